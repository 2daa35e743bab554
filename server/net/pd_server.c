/*
 * pd_server.c - the libuv front end (see pd_server.h).
 *
 * Everything here runs on the loop thread except pd_server_wake and the two
 * request_* functions, which only set atomic flags and call uv_async_send,
 * and pd__reload_work, which loads a reload's config and scenes and builds
 * its world (portals and route tables) on libuv's threadpool without
 * touching the server.
 *
 * A connection lives in two places: a list (for the idle sweep and shutdown,
 * which visit every connection) and a hash map from its id (for completions,
 * which arrive carrying only the id). It leaves the map as soon as it starts
 * closing, so late results for it are dropped, and leaves the list and is
 * freed only in its uv_close callback, after libuv has called back every
 * pending write and shutdown request on it.
 *
 * Closing after a protocol error (MALFORMED, FRAME_TOO_LARGE, too many
 * connections) is a "lingering close": the error reply is queued, the write
 * side is shut down once it has gone out, and whatever the peer still sends
 * is read and thrown away until it closes or PD_SERVER_LINGER_MS pass.
 * Closing a socket with unread input would make the kernel send a reset,
 * which can destroy the error reply before the client reads it.
 *
 * Shutdown runs through phases: DRAINING (nothing new is read; in-flight jobs
 * get shutdown_grace_ms), CANCELLING (the rest are cancelled and get
 * PD_SERVER_CANCEL_WAIT_MS to come back), FLUSHING (every connection is shut
 * down once its replies are written, cut after PD_SERVER_FLUSH_MS), CLOSED
 * (the server's own handles close and uv_run returns).
 */
#include "pd_server.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_frame.h"
#include "pd_log.h"

/* Hash map sizing: a power of two, kept at most half full so linear probes
 * stay short even with 10,000+ connections. */
#define PD__MAP_INITIAL_SLOTS 64

/* Input from a connection that is closing is read into this and dropped. */
#define PD__DISCARD_BYTES 4096

/* Longest error text sent to a client, in bytes. */
#define PD__MESSAGE_MAX 256

typedef enum pd__phase {
    PD__RUNNING = 0,
    PD__DRAINING,
    PD__CANCELLING,
    PD__FLUSHING,
    PD__CLOSED,
} pd__phase;

typedef struct pd__conn {
    uv_tcp_t tcp;                /* tcp.data points back to the connection */
    pd_server *server;
    uint64_t id;                 /* never reused; jobs name their connection by it */
    pd_frame_reader reader;
    struct pd__conn *prev, *next;
    uint64_t last_active_ms;     /* uv_now of the last read or finished write: a
                                    client that neither sends nor takes replies
                                    is idle, whatever it still has queued */
    uint64_t lingering_since_ms; /* uv_now when the lingering close began */
    uint32_t writes_pending;     /* uv_write requests not yet called back */
    uint32_t in_flight;          /* jobs submitted and not yet completed */
    unsigned reading : 1;        /* uv_read_start is in effect */
    unsigned paused : 1;         /* reading stopped for backpressure */
    unsigned lingering : 1;      /* error reply queued; input is discarded */
    unsigned shutdown_done : 1;  /* the write side has been shut down */
    unsigned closing : 1;        /* uv_close has been called */
    unsigned in_map : 1;
    uv_shutdown_t shutdown_req;
} pd__conn;

/* One queued write: the request and the buffer it sends, freed together in
 * the write callback. */
typedef struct pd__write {
    uv_write_t req;
    uv_buf_t buf;
} pd__write;

typedef struct pd__conn_map {
    pd__conn **slots;
    size_t n_slots;              /* power of two */
    size_t count;
} pd__conn_map;

struct pd_server {
    uv_loop_t *loop;
    pd_conf conf;                /* scalar settings only; scenes live in the registry */
    pd_registry *registry;
    pd_world_store *world_store; /* NULL: FindRoute is refused (pd_server_set_world_store) */
    pd_pool *pool;
    char *config_path;
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;

    uv_tcp_t listener;
    uv_async_t async;
    uv_timer_t sweep_timer;
    uv_timer_t stop_timer;
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_tcp_t spare;              /* accepts and closes one connection when memory is out */
    int spare_busy;
    int open_handles;            /* server-level handles not yet called back from uv_close */
    uint64_t sweep_interval_ms;

    atomic_int stop_requested;
    atomic_int reload_requested;
    struct pd__reload_job *reload;   /* the reload loading on the threadpool, or NULL */
    int reload_again;            /* a reload was asked for while one was loading */

    pd__conn_map map;
    pd__conn *conns;             /* every connection not yet freed */
    size_t n_conns;
    uint64_t next_conn_id;
    uint16_t port;
    pd__phase phase;
    uint64_t started_ns;

    uint64_t requests_total;
    uint64_t overloaded_total;
    uint64_t malformed_total;
    uint64_t in_flight;

    pd_metrics *metrics;         /* NULL: nothing is counted */
    int answering;               /* pd_metrics_req_type of the frame being handled, or -1
                                    between frames (errors outside a request are not counted) */
    uint64_t answering_since_ns; /* that frame's arrival */

    uint8_t discard[PD__DISCARD_BYTES];
};

static void pd__conn_close(pd__conn *c);
static void pd__check_drained(pd_server *s);
static void pd__stop_timer_cb(uv_timer_t *t);

/* ---- connection map ---------------------------------------------------- */

static size_t pd__map_home(const pd__conn_map *m, uint64_t id)
{
    /* splitmix64 finaliser: ids are sequential, so spread them. */
    uint64_t z = id + 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (size_t)z & (m->n_slots - 1);
}

static int pd__map_grow(pd__conn_map *m)
{
    size_t n = m->n_slots ? m->n_slots * 2 : PD__MAP_INITIAL_SLOTS;
    pd__conn **slots = calloc(n, sizeof *slots);
    if (!slots)
        return -1;
    pd__conn_map grown = {slots, n, 0};
    for (size_t i = 0; i < m->n_slots; i++) {
        pd__conn *c = m->slots[i];
        if (!c)
            continue;
        size_t j = pd__map_home(&grown, c->id);
        while (grown.slots[j])
            j = (j + 1) & (n - 1);
        grown.slots[j] = c;
        grown.count++;
    }
    free(m->slots);
    *m = grown;
    return 0;
}

static int pd__map_insert(pd__conn_map *m, pd__conn *c)
{
    if ((m->count + 1) * 2 > m->n_slots && pd__map_grow(m) != 0)
        return -1;
    size_t j = pd__map_home(m, c->id);
    while (m->slots[j])
        j = (j + 1) & (m->n_slots - 1);
    m->slots[j] = c;
    m->count++;
    return 0;
}

static size_t pd__map_slot(const pd__conn_map *m, uint64_t id)
{
    if (m->n_slots == 0)
        return SIZE_MAX;
    size_t j = pd__map_home(m, id);
    while (m->slots[j]) {
        if (m->slots[j]->id == id)
            return j;
        j = (j + 1) & (m->n_slots - 1);
    }
    return SIZE_MAX;
}

static pd__conn *pd__map_find(const pd__conn_map *m, uint64_t id)
{
    size_t j = pd__map_slot(m, id);
    return j == SIZE_MAX ? NULL : m->slots[j];
}

/* Removes by shifting later members of the probe run back, so lookups never
 * need tombstones. */
static void pd__map_remove(pd__conn_map *m, uint64_t id)
{
    size_t mask = m->n_slots - 1;
    size_t hole = pd__map_slot(m, id);
    if (hole == SIZE_MAX)
        return;
    m->slots[hole] = NULL;
    m->count--;
    for (size_t j = (hole + 1) & mask; m->slots[j]; j = (j + 1) & mask) {
        size_t home = pd__map_home(m, m->slots[j]->id);
        /* The entry at j may move into the hole only if its home is not in
         * the cyclic range (hole, j]. */
        int home_in_range = hole < j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!home_in_range) {
            m->slots[hole] = m->slots[j];
            m->slots[j] = NULL;
            hole = j;
        }
    }
}

/* ---- small helpers ----------------------------------------------------- */

static void pd__handle_closed(uv_handle_t *h)
{
    pd_server *s = h->data;
    s->open_handles--;
}

/* Closes one of the server's own handles if it was ever initialised and is
 * not closing yet (the server struct starts zeroed: UV_UNKNOWN_HANDLE). */
static void pd__close_handle(uv_handle_t *h)
{
    if (h->type != UV_UNKNOWN_HANDLE && !uv_is_closing(h))
        uv_close(h, pd__handle_closed);
}

static void pd__format_address(const pd_server *s, uint16_t port, char *out, size_t len)
{
    if (strchr(s->conf.listen_host, ':'))
        snprintf(out, len, "[%s]:%u", s->conf.listen_host, (unsigned)port);
    else
        snprintf(out, len, "%s:%u", s->conf.listen_host, (unsigned)port);
}

/* The idle sweep runs often enough to close an idle connection within about a
 * quarter of the timeout past it, and at least once a second for lingering
 * closes. */
static uint64_t pd__sweep_interval(const pd_conf *conf)
{
    uint64_t ms = conf->idle_timeout_ms / 4;
    if (conf->idle_timeout_ms == 0 || ms > PD_SERVER_SWEEP_MAX_MS)
        ms = PD_SERVER_SWEEP_MAX_MS;
    if (ms < PD_SERVER_SWEEP_MIN_MS)
        ms = PD_SERVER_SWEEP_MIN_MS;
    return ms;
}

/* ---- reading and writing ----------------------------------------------- */

static void pd__alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    pd__conn *c = h->data;
    uint8_t *p;
    size_t avail;
    if (c->lingering) {
        *buf = uv_buf_init((char *)c->server->discard, sizeof c->server->discard);
        return;
    }
    if (pd_frame_reader_space(&c->reader, suggested, &p, &avail) != 0) {
        /* A zero-length buffer makes libuv report UV_ENOBUFS to read_cb. */
        *buf = uv_buf_init(NULL, 0);
        return;
    }
    *buf = uv_buf_init((char *)p, (unsigned int)avail);
}

static void pd__read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf);
static void pd__conn_process(pd__conn *c);

static void pd__conn_read_start(pd__conn *c)
{
    if (c->reading || c->closing)
        return;
    int rc = uv_read_start((uv_stream_t *)&c->tcp, pd__alloc_cb, pd__read_cb);
    if (rc != 0) {
        pd_log_debug("conn %" PRIu64 ": read start failed: %s", c->id, uv_strerror(rc));
        pd__conn_close(c);
        return;
    }
    c->reading = 1;
}

static void pd__conn_read_stop(pd__conn *c)
{
    if (!c->reading)
        return;
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = 0;
}

static void pd__write_cb(uv_write_t *req, int status)
{
    pd__write *w = (pd__write *)req;
    pd__conn *c = req->handle->data;
    pd_server *s = c->server;

    c->writes_pending--;
    free(w->buf.base);
    free(w);
    if (status < 0) {
        if (status != UV_ECANCELED)
            pd_log_debug("conn %" PRIu64 ": write failed: %s", c->id, uv_strerror(status));
        pd__conn_close(c);
        return;
    }
    c->last_active_ms = uv_now(s->loop);
    if (c->paused && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) <= s->conf.write_low_watermark) {
        pd_log_debug("conn %" PRIu64 ": replies drained; resuming reads", c->id);
        c->paused = 0;
        if (s->phase == PD__RUNNING && !c->lingering) {
            /* Frames that arrived before the pause come first; the reader
             * hands out no new space while a whole frame is buffered. */
            pd__conn_process(c);
            if (!c->paused && !c->closing && !c->lingering)
                pd__conn_read_start(c);
        }
    }
}

/* Queues one encoded answer (whole frames) and takes ownership of buf. A NULL
 * buf means encoding ran out of memory: the client cannot be told, so the
 * connection is closed rather than left waiting for an answer. */
static void pd__conn_send(pd__conn *c, uint8_t *buf, size_t len)
{
    pd_server *s = c->server;
    if (!buf) {
        pd_log_error("conn %" PRIu64 ": out of memory encoding a reply; closing", c->id);
        pd__conn_close(c);
        return;
    }
    if (c->closing) {
        free(buf);
        return;
    }
    pd__write *w = malloc(sizeof *w);
    if (!w) {
        free(buf);
        pd_log_error("conn %" PRIu64 ": out of memory queueing a reply; closing", c->id);
        pd__conn_close(c);
        return;
    }
    w->buf = uv_buf_init((char *)buf, (unsigned int)len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &w->buf, 1, pd__write_cb);
    if (rc != 0) {
        free(buf);
        free(w);
        pd_log_debug("conn %" PRIu64 ": write failed: %s", c->id, uv_strerror(rc));
        pd__conn_close(c);
        return;
    }
    c->writes_pending++;

    /* The backlog is what libuv holds because the kernel's send buffer is
     * full: bytes the client has not taken yet. */
    size_t backlog = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp);
    uint64_t hard_cap = (uint64_t)s->conf.write_high_watermark * PD_SERVER_WRITE_HARD_CAP_FACTOR;
    if (backlog > hard_cap) {
        pd_log_warn("conn %" PRIu64 ": %zu reply bytes unread (cap %" PRIu64 "); closing",
                    c->id, backlog, hard_cap);
        pd__conn_close(c);
    } else if (backlog > s->conf.write_high_watermark && !c->paused) {
        pd_log_debug("conn %" PRIu64 ": %zu reply bytes unread; pausing reads", c->id, backlog);
        c->paused = 1;
        if (!c->lingering)
            pd__conn_read_stop(c);
    }
}

static void pd__send_error(pd__conn *c, uint64_t id, pd_status status, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

/* Counts the answer to the frame being handled, if any. */
static void pd__observe(pd_server *s, pd_status status)
{
    if (s->answering >= 0)
        pd_metrics_observe(s->metrics, (pd_metrics_req_type)s->answering, status,
                           (pd_pool_now_ns() - s->answering_since_ns) / 1000u, 0);
}

static void pd__send_error(pd__conn *c, uint64_t id, pd_status status, const char *fmt, ...)
{
    char msg[PD__MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (status == PD_OVERLOADED)
        c->server->overloaded_total++;
    pd__observe(c->server, status);
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_error(id, status, msg, &len);
    pd__conn_send(c, buf, len);
}

/* ---- connection lifetime ----------------------------------------------- */

static void pd__conn_closed(uv_handle_t *h)
{
    pd__conn *c = h->data;
    pd_server *s = c->server;
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->n_conns--;
    pd_frame_reader_free(&c->reader);
    free(c);
    if (s->phase == PD__FLUSHING && s->n_conns == 0)
        pd__check_drained(s);
}

static void pd__conn_close(pd__conn *c)
{
    pd_server *s = c->server;
    if (c->closing)
        return;
    c->closing = 1;
    c->reading = 0;
    if (c->in_map) {
        pd__map_remove(&s->map, c->id);
        c->in_map = 0;
    }
    /* Queued jobs of a closed connection are skipped by the workers; their
     * completions are dropped because the id is no longer in the map. */
    if (c->in_flight > 0 && s->pool)
        pd_pool_cancel_conn(s->pool, c->id);
    uv_close((uv_handle_t *)&c->tcp, pd__conn_closed);
}

static void pd__shutdown_cb(uv_shutdown_t *req, int status)
{
    pd__conn *c = req->handle->data;
    c->shutdown_done = 1;
    /* While running, a lingering connection stays open to drain the peer's
     * input (see the top of this file); during a server stop there is no
     * point in waiting. */
    if (status < 0 || c->server->phase != PD__RUNNING)
        pd__conn_close(c);
}

/* Shuts the write side down once queued replies have gone out. */
static void pd__conn_shutdown(pd__conn *c)
{
    if (c->closing || c->shutdown_req.handle)
        return;
    int rc = uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, pd__shutdown_cb);
    if (rc != 0)
        pd__conn_close(c);
}

/* Answer-then-close after a protocol error: the reply (already queued by the
 * caller) goes out, then the write side shuts, and input is discarded until
 * the peer closes or the linger time runs out. */
static void pd__conn_linger(pd__conn *c)
{
    if (c->closing || c->lingering)
        return;
    c->lingering = 1;
    c->lingering_since_ms = uv_now(c->server->loop);
    pd__conn_shutdown(c);
    pd__conn_read_start(c);
}

/* ---- requests ---------------------------------------------------------- */

/* Resolves a start or goal point to an in-bounds cell. */
static pd_status pd__resolve_point(const pd_scene *scene, const pd_point_spec *spec, pd_point *cell)
{
    if (spec->is_world)
        return pd_scene_world_to_cell(scene, spec->wx, spec->wy, cell);
    if (!pd_grid_in_bounds(scene->grid, spec->cell.x, spec->cell.y))
        return PD_OUT_OF_BOUNDS;
    *cell = spec->cell;
    return PD_OK;
}

static void pd__describe_point(const pd_point_spec *spec, char *out, size_t len)
{
    if (spec->is_world)
        snprintf(out, len, "world (%g, %g)", spec->wx, spec->wy);
    else
        snprintf(out, len, "cell (%" PRId32 ", %" PRId32 ")", spec->cell.x, spec->cell.y);
}

/* Answers OVERLOADED when the connection already has its limit of requests
 * in flight; returns 1 when the request may go on. */
static int pd__inflight_ok(pd__conn *c, uint64_t id)
{
    if (c->in_flight < c->server->conf.max_inflight_per_conn)
        return 1;
    pd__send_error(c, id, PD_OVERLOADED, "%" PRIu32 " requests already in flight on this connection (the limit)",
                   c->in_flight);
    return 0;
}

/* Hands a job to the pool and counts it in flight, or answers OVERLOADED and
 * frees it. */
static void pd__submit(pd__conn *c, uint64_t id, pd_job *job)
{
    pd_server *s = c->server;
    if (pd_pool_submit(s->pool, job) != PD_OK) {
        pd_job_free(job);
        pd__send_error(c, id, PD_OVERLOADED, "job queue full (%" PRIu32 " jobs)", s->conf.job_queue_capacity);
        return;
    }
    c->in_flight++;
    s->in_flight++;
}

/* Resolves the request, then queues it for a worker, which runs the rest of
 * the pipeline (snap, reachability, search, style, timing; see pd_pool.c).
 * Start and goal of a unit request are anchor cells: a world point names the
 * cell that contains it, which becomes the unit's top-left cell. */
static void pd__handle_find_path(pd__conn *c, pd_request *req, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    pd_find_path_req *fp = &req->u.find_path;

    if (!pd__inflight_ok(c, req->id))
        return;
    pd_scene *scene = pd_registry_acquire(s->registry, fp->scene);
    if (!scene) {
        pd__send_error(c, req->id, PD_UNKNOWN_SCENE, "unknown scene '%s'", fp->scene);
        return;
    }
    if (!pd_scene_allows_unit(scene, fp->unit_size)) {
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "scene '%s' does not serve unit size %" PRIu32,
                       scene->name, fp->unit_size);
        pd_scene_release(scene);
        return;
    }

    pd_point start, goal;
    const pd_point_spec *bad = NULL;
    if (pd__resolve_point(scene, &fp->start, &start) != PD_OK)
        bad = &fp->start;
    else if (pd__resolve_point(scene, &fp->goal, &goal) != PD_OK)
        bad = &fp->goal;
    if (bad) {
        char where[96];
        pd__describe_point(bad, where, sizeof where);
        pd__send_error(c, req->id, PD_OUT_OF_BOUNDS, "%s %s is outside scene '%s' (%" PRId32 "x%" PRId32 ")",
                       bad == &fp->start ? "start" : "goal", where, scene->name,
                       scene->grid->width, scene->grid->height);
        pd_scene_release(scene);
        return;
    }

    pd_job *job = pd_job_new();
    if (!job) {
        pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
        pd_scene_release(scene);
        return;
    }
    job->kind = PD_JOB_FIND_PATH;
    job->conn_id = c->id;
    job->request_id = req->id;
    job->scene = scene; /* the job owns the reference now */
    job->unit_size = fp->unit_size;
    job->params.start = start;
    job->params.goal = goal;
    job->params.connectivity = fp->connectivity;
    job->params.max_expansions = fp->max_expansions ? fp->max_expansions : s->conf.default_max_expansions;
    job->params.partial_on_cutoff = fp->partial_on_cutoff;
    job->params.has_window = fp->has_window;
    job->params.window_min = fp->window_min;
    job->params.window_max = fp->window_max;
    job->style = fp->style;
    job->goal_mode = fp->goal_mode;
    job->snap = fp->snap;
    job->speed = fp->speed;
    job->start_time = fp->start_time;
    job->avoid = fp->avoid; /* the job owns the array now */
    job->n_avoid = fp->n_avoid;
    fp->avoid = NULL;
    fp->n_avoid = 0;
    job->deadline_ns = fp->deadline_ms ? arrival_ns + (uint64_t)fp->deadline_ms * 1000000u : 0;
    job->submitted_ns = pd_pool_now_ns();
    pd__submit(c, req->id, job);
}

/* FindRoute: resolves the scenes and points against the world current now
 * (so unknown scenes, unit sizes and out-of-bounds points are answered at
 * once, like FindPath's), then queues a route job holding that world; the
 * worker plans, searches the legs and releases it. */
static void pd__handle_find_route(pd__conn *c, pd_request *req, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    const pd_find_route_req *fr = &req->u.find_route;

    if (!pd__inflight_ok(c, req->id))
        return;
    pd_world *world = s->world_store ? pd_world_store_acquire(s->world_store) : NULL;
    if (!world) {
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "this server has no world loaded: routes are not served");
        return;
    }
    const pd_scene *from = pd_world_scene(world, fr->from_scene);
    const pd_scene *to = pd_world_scene(world, fr->to_scene);
    const pd_scene *unserved = NULL;
    pd_point start, goal;
    const pd_point_spec *bad = NULL;
    if (!from || !to) {
        pd__send_error(c, req->id, PD_UNKNOWN_SCENE, "unknown scene '%s'", !from ? fr->from_scene : fr->to_scene);
        goto fail;
    }
    if (!pd_scene_allows_unit(from, fr->unit_size))
        unserved = from;
    else if (!pd_scene_allows_unit(to, fr->unit_size))
        unserved = to;
    if (unserved) {
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "scene '%s' does not serve unit size %" PRIu32,
                       unserved->name, fr->unit_size);
        goto fail;
    }
    if (pd__resolve_point(from, &fr->start, &start) != PD_OK)
        bad = &fr->start;
    else if (pd__resolve_point(to, &fr->goal, &goal) != PD_OK)
        bad = &fr->goal;
    if (bad) {
        const pd_scene *sc = bad == &fr->start ? from : to;
        char where[96];
        pd__describe_point(bad, where, sizeof where);
        pd__send_error(c, req->id, PD_OUT_OF_BOUNDS, "%s %s is outside scene '%s' (%" PRId32 "x%" PRId32 ")",
                       bad == &fr->start ? "start" : "goal", where, sc->name, sc->grid->width, sc->grid->height);
        goto fail;
    }

    pd_job *job = pd_job_new();
    if (!job) {
        pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
        goto fail;
    }
    job->kind = PD_JOB_FIND_ROUTE;
    job->conn_id = c->id;
    job->request_id = req->id;
    job->world = world; /* the job owns the reference now */
    memcpy(job->route_from, fr->from_scene, sizeof job->route_from);
    memcpy(job->route_to, fr->to_scene, sizeof job->route_to);
    job->unit_size = fr->unit_size;
    job->params.start = start;
    job->params.goal = goal;
    job->params.connectivity = PD_CONNECT_8;
    job->params.max_expansions = fr->max_expansions ? fr->max_expansions : s->conf.default_max_expansions;
    job->style = fr->style;
    job->goal_mode = fr->goal_mode;
    job->speed = fr->speed;
    job->start_time = fr->start_time;
    job->deadline_ns = fr->deadline_ms ? arrival_ns + (uint64_t)fr->deadline_ms * 1000000u : 0;
    job->submitted_ns = pd_pool_now_ns();
    pd__submit(c, req->id, job);
    return;
fail:
    pd_world_release(world);
}

/* UpdateCells copies and repairs a scene, which takes milliseconds on big
 * maps, so it runs on a worker like a search; the pool keeps updates in
 * order. The scene name and the cells' bounds are checked there. */
static void pd__handle_update_cells(pd__conn *c, pd_request *req)
{
    pd_update_cells_req *uc = &req->u.update_cells;
    if (!pd__inflight_ok(c, req->id))
        return;
    pd_job *job = pd_job_new();
    if (!job) {
        pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
        return;
    }
    job->kind = PD_JOB_UPDATE_CELLS;
    job->conn_id = c->id;
    job->request_id = req->id;
    job->registry = c->server->registry;
    memcpy(job->update_scene, uc->scene, sizeof job->update_scene);
    job->update = uc->update;
    job->world_store = c->server->world_store;
    job->update_cells = uc->cells; /* the job owns the array now */
    uc->cells = NULL;
    job->submitted_ns = pd_pool_now_ns();
    pd__submit(c, req->id, job);
}

/* GetSceneGrid: one band of rows of the scene grid (unit 1) or a unit grid,
 * read from the snapshot current now and answered on the loop thread. A band
 * is one memcpy per row of at most PD_SCENE_GRID_BAND_BYTES, cheap enough not
 * to need a worker; the client stitches bands together and starts over when
 * the version changes between them. */
static void pd__handle_scene_grid(pd__conn *c, const pd_request *req)
{
    const pd_scene_grid_req *gr = &req->u.grid;
    pd_scene *scene = pd_registry_acquire(c->server->registry, gr->scene);
    if (!scene) {
        pd__send_error(c, req->id, PD_UNKNOWN_SCENE, "unknown scene '%s'", gr->scene);
        return;
    }
    const pd_grid *grid = scene->grid;
    if (gr->unit_size > 1) {
        const pd_scene_unit *unit = pd_scene_unit_for(scene, gr->unit_size);
        if (!unit) {
            pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "scene '%s' does not serve unit size %" PRIu32,
                           scene->name, gr->unit_size);
            pd_scene_release(scene);
            return;
        }
        grid = unit->grid;
    }
    if (gr->row_start >= grid->height) {
        pd__send_error(c, req->id, PD_OUT_OF_BOUNDS, "row %" PRId32 " is outside scene '%s' (%" PRId32 " rows)",
                       gr->row_start, scene->name, grid->height);
        pd_scene_release(scene);
        return;
    }
    int32_t rows = grid->height - gr->row_start;
    int32_t band_rows = (int32_t)(PD_SCENE_GRID_BAND_BYTES / (uint32_t)grid->width);
    if (band_rows < 1)
        band_rows = 1;
    if (rows > band_rows)
        rows = band_rows;
    if (gr->row_count > 0 && rows > gr->row_count)
        rows = gr->row_count;
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_scene_grid(req->id, grid, scene->version, gr->row_start, rows, &len);
    pd_scene_release(scene);
    pd__conn_send(c, buf, len);
}

static void pd__handle_request(pd__conn *c, pd_request *req, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    size_t len = 0;
    uint8_t *buf;

    switch (req->kind) {
    case PD_REQ_FIND_PATH:
        pd__handle_find_path(c, req, arrival_ns);
        return;
    case PD_REQ_UPDATE_CELLS:
        pd__handle_update_cells(c, req);
        return;
    case PD_REQ_FIND_ROUTE:
        pd__handle_find_route(c, req, arrival_ns);
        return;
    case PD_REQ_CANCEL:
        if (pd_pool_cancel(s->pool, c->id, req->u.cancel_target))
            buf = pd_codec_encode_ack(req->id, PD_OK, &len);
        else {
            pd__send_error(c, req->id, PD_INVALID_ARGUMENT,
                           "no request %" PRIu64 " in flight on this connection", req->u.cancel_target);
            return;
        }
        break;
    case PD_REQ_LIST_SCENES: {
        pd_scene **list = NULL;
        size_t n = pd_registry_list(s->registry, &list);
        buf = pd_codec_encode_scene_list(req->id, list, n, &len);
        pd_registry_release_list(list, n);
        break;
    }
    case PD_REQ_SCENE_INFO: {
        pd_scene *scene = pd_registry_acquire(s->registry, req->u.scene_name);
        if (!scene) {
            pd__send_error(c, req->id, PD_UNKNOWN_SCENE, "unknown scene '%s'", req->u.scene_name);
            return;
        }
        buf = pd_codec_encode_scene_info(req->id, scene, &len);
        pd_scene_release(scene);
        break;
    }
    case PD_REQ_SCENE_GRID:
        pd__handle_scene_grid(c, req);
        return;
    case PD_REQ_STATS: {
        pd_server_stats st;
        pd_server_get_stats(s, &st);
        buf = pd_codec_encode_stats(req->id, &st, &len);
        break;
    }
    case PD_REQ_PING:
        buf = pd_codec_encode_pong(req->id, req->u.ping_nonce, &len);
        break;
    case PD_REQ_NONE:
    default:
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "request has no body");
        return;
    }
    pd__observe(s, PD_OK);
    pd__conn_send(c, buf, len);
}

static void pd__handle_frame(pd__conn *c, const uint8_t *payload, size_t len, uint64_t arrival_ns)
{
    pd_server *s = c->server;
    pd_request req;
    char err[PD__MESSAGE_MAX];

    s->requests_total++;
    err[0] = '\0';
    memset(&req, 0, sizeof req);
    pd_status st = pd_codec_decode_request(payload, len, &req, err, sizeof err);
    s->answering = (int)pd_metrics_req_type_of(req.kind);
    s->answering_since_ns = arrival_ns;
    if (st == PD_MALFORMED) {
        s->malformed_total++;
        pd_log_debug("conn %" PRIu64 ": malformed frame: %s; closing", c->id, err);
        pd__send_error(c, 0, PD_MALFORMED, "%s", err[0] ? err : "frame is not a pathd.v1.Request");
        s->answering = -1;
        pd__conn_linger(c);
        return;
    }
    if (st != PD_OK) {
        pd__send_error(c, req.id, st, "%s", err[0] ? err : pd_status_name(st));
        s->answering = -1;
        return;
    }
    pd__handle_request(c, &req, arrival_ns);
    s->answering = -1;
    pd_request_free(&req);
}

/* Answers the complete frames that are buffered, until backpressure pauses
 * the connection: the rest wait in the reader until replies drain, so the
 * unread backlog never grows by more than one reply past the high
 * watermark (plus what in-flight searches bring back). */
static void pd__conn_process(pd__conn *c)
{
    pd_server *s = c->server;
    uint64_t arrival_ns = pd_pool_now_ns();
    while (!c->closing && !c->lingering && !c->paused) {
        const uint8_t *payload;
        size_t len;
        pd_status st = pd_frame_reader_next(&c->reader, &payload, &len);
        if (st == PD_PARTIAL)
            return;
        if (st == PD_FRAME_TOO_LARGE) {
            const uint8_t *h = c->reader.buf + c->reader.start;
            uint32_t claimed = ((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) |
                               ((uint32_t)h[2] << 8) | (uint32_t)h[3];
            s->malformed_total++;
            pd_metrics_observe(s->metrics, PD_METRICS_REQ_UNKNOWN, PD_FRAME_TOO_LARGE, 0, 0);
            pd_log_debug("conn %" PRIu64 ": frame of %" PRIu32 " bytes refused; closing", c->id, claimed);
            pd__send_error(c, 0, PD_FRAME_TOO_LARGE,
                           "frame of %" PRIu32 " bytes exceeds the %" PRIu32 "-byte limit", claimed,
                           c->reader.max_frame);
            pd__conn_linger(c);
            return;
        }
        pd__handle_frame(c, payload, len, arrival_ns);
    }
}

static void pd__read_cb(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    pd__conn *c = stream->data;
    if (nread > 0) {
        if (c->lingering)
            return; /* read into the discard buffer */
        c->last_active_ms = uv_now(c->server->loop);
        pd_frame_reader_commit(&c->reader, (size_t)nread);
        pd__conn_process(c);
        return;
    }
    if (nread == 0)
        return; /* EAGAIN: not end of stream */
    if (nread == UV_ENOBUFS)
        pd_log_warn("conn %" PRIu64 ": no memory for its read buffer; closing", c->id);
    else if (nread != UV_EOF)
        pd_log_debug("conn %" PRIu64 ": read failed: %s", c->id, uv_strerror((int)nread));
    /* A client that hangs up gets no more answers: its queued jobs are
     * cancelled rather than computed for nobody. */
    pd__conn_close(c);
}

/* ---- accepting --------------------------------------------------------- */

static void pd__spare_closed(uv_handle_t *h)
{
    pd_server *s = h->data;
    s->spare_busy = 0;
    s->open_handles--;
}

/* Accepts a connection into the spare handle and closes it: without a
 * uv_accept libuv stops watching the listener, so even when there is no
 * memory for a connection, the pending one must be taken off the queue. */
static void pd__accept_and_drop(pd_server *s)
{
    if (s->spare_busy || uv_tcp_init(s->loop, &s->spare) != 0)
        return;
    s->spare.data = s;
    s->spare_busy = 1;
    s->open_handles++;
    (void)uv_accept((uv_stream_t *)&s->listener, (uv_stream_t *)&s->spare);
    uv_close((uv_handle_t *)&s->spare, pd__spare_closed);
}

static void pd__on_connection(uv_stream_t *listener, int status)
{
    pd_server *s = listener->data;
    if (status < 0) {
        pd_log_warn("accept failed: %s", uv_strerror(status));
        return;
    }
    pd__conn *c = calloc(1, sizeof *c);
    if (!c || uv_tcp_init(s->loop, &c->tcp) != 0) {
        free(c);
        pd_log_error("out of memory accepting a connection; dropping it");
        pd__accept_and_drop(s);
        return;
    }
    c->tcp.data = c;
    c->server = s;
    c->id = s->next_conn_id++;
    pd_frame_reader_init(&c->reader, s->conf.max_frame_bytes);
    c->last_active_ms = uv_now(s->loop);
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    s->n_conns++;

    int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc != 0) {
        pd_log_warn("accept failed: %s", uv_strerror(rc));
        pd__conn_close(c);
        return;
    }
    if (pd__map_insert(&s->map, c) != 0) {
        pd_log_error("out of memory registering a connection; closing it");
        pd__conn_close(c);
        return;
    }
    c->in_map = 1;
    uv_tcp_nodelay(&c->tcp, 1);

    if (s->n_conns > s->conf.max_connections) {
        pd__send_error(c, 0, PD_OVERLOADED, "server has %zu connections (limit %" PRIu32 ")",
                       s->n_conns - 1, s->conf.max_connections);
        pd__conn_linger(c);
        return;
    }
    pd_log_debug("conn %" PRIu64 ": accepted (%zu open)", c->id, s->n_conns);
    pd__conn_read_start(c);
}

/* ---- completions, stop and reload -------------------------------------- */

static void pd__drain_completions(pd_server *s)
{
    if (!s->pool)
        return;
    pd_job *job = pd_pool_take_completed(s->pool);
    while (job) {
        pd_job *next = job->next;
        if (s->in_flight > 0)
            s->in_flight--;
        int is_update = job->kind == PD_JOB_UPDATE_CELLS;
        pd_request_kind kind = is_update ? PD_REQ_UPDATE_CELLS
                               : job->kind == PD_JOB_FIND_ROUTE ? PD_REQ_FIND_ROUTE
                                                                : PD_REQ_FIND_PATH;
        pd_metrics_observe(s->metrics, pd_metrics_req_type_of(kind), job->status,
                           (pd_pool_now_ns() - job->submitted_ns) / 1000u, is_update ? 0 : job->metrics.expanded);
        if (is_update && job->status == PD_OK && job->world_refresh != PD_OK)
            pd_log_warn("update of scene '%s' applied, but the route tables were not refreshed: %s (%s); "
                        "routes keep the previous tables until the next reload",
                        job->update_scene, job->world_refresh_error, pd_status_name(job->world_refresh));
        pd__conn *c = pd__map_find(&s->map, job->conn_id);
        if (c) {
            if (c->in_flight > 0)
                c->in_flight--;
            if (!c->lingering) {
                size_t len = 0;
                uint8_t *buf = is_update ? pd_codec_encode_update(job, &len)
                               : job->kind == PD_JOB_FIND_ROUTE
                                   ? pd_codec_encode_route(job, s->conf.max_waypoints_per_chunk, &len)
                                   : pd_codec_encode_path(job, s->conf.max_waypoints_per_chunk, &len);
                pd__conn_send(c, buf, len);
            }
        }
        pd_job_free(job);
        job = next;
    }
}

/* Last step of a stop: close the server's own handles. The async handle
 * stays open (workers may still wake it until the pool is destroyed) but no
 * longer keeps uv_run going. */
static void pd__stop_finish(pd_server *s)
{
    s->phase = PD__CLOSED;
    pd__close_handle((uv_handle_t *)&s->listener);
    pd__close_handle((uv_handle_t *)&s->sweep_timer);
    pd__close_handle((uv_handle_t *)&s->stop_timer);
    pd__close_handle((uv_handle_t *)&s->sig_term);
    pd__close_handle((uv_handle_t *)&s->sig_int);
    pd__close_handle((uv_handle_t *)&s->sig_hup);
    uv_unref((uv_handle_t *)&s->async);
    pd_log_info("stopped");
}

static void pd__flush_begin(pd_server *s)
{
    s->phase = PD__FLUSHING;
    for (pd__conn *c = s->conns; c; c = c->next) {
        if (c->closing)
            continue;
        if (c->writes_pending == 0 || c->shutdown_done)
            pd__conn_close(c);
        else
            pd__conn_shutdown(c);
    }
    if (s->n_conns == 0)
        pd__stop_finish(s);
    else
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_FLUSH_MS, 0);
}

static void pd__cancel_all(pd_server *s)
{
    pd_log_warn("grace period over: cancelling %" PRIu64 " jobs in flight", s->in_flight);
    s->phase = PD__CANCELLING;
    for (pd__conn *c = s->conns; c; c = c->next)
        if (c->in_flight > 0)
            pd_pool_cancel_conn(s->pool, c->id);
}

static void pd__check_drained(pd_server *s)
{
    switch (s->phase) {
    case PD__DRAINING:
    case PD__CANCELLING:
        if (s->in_flight == 0) {
            uv_timer_stop(&s->stop_timer);
            pd__flush_begin(s);
        }
        break;
    case PD__FLUSHING:
        if (s->n_conns == 0) {
            uv_timer_stop(&s->stop_timer);
            pd__stop_finish(s);
        }
        break;
    case PD__RUNNING:
    case PD__CLOSED:
        break;
    }
}

static void pd__stop_timer_cb(uv_timer_t *t)
{
    pd_server *s = t->data;
    switch (s->phase) {
    case PD__DRAINING:
        pd__cancel_all(s);
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_CANCEL_WAIT_MS, 0);
        break;
    case PD__CANCELLING:
        pd_log_warn("%" PRIu64 " cancelled jobs did not come back in time", s->in_flight);
        pd__flush_begin(s);
        break;
    case PD__FLUSHING:
        pd_log_warn("cutting %zu connections that did not take their replies", s->n_conns);
        for (pd__conn *c = s->conns; c; c = c->next)
            pd__conn_close(c);
        break;
    case PD__RUNNING:
    case PD__CLOSED:
        break;
    }
}

static void pd__stop_begin(pd_server *s)
{
    if (s->phase == PD__DRAINING) {
        /* A second request: skip what is left of the grace period. */
        uv_timer_stop(&s->stop_timer);
        pd__cancel_all(s);
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, PD_SERVER_CANCEL_WAIT_MS, 0);
        return;
    }
    if (s->phase != PD__RUNNING)
        return;
    s->phase = PD__DRAINING;
    pd_log_info("stopping: %zu connections, %" PRIu64 " jobs in flight, grace %" PRIu32 " ms",
                s->n_conns, s->in_flight, s->conf.shutdown_grace_ms);
    pd__close_handle((uv_handle_t *)&s->listener);
    for (pd__conn *c = s->conns; c; c = c->next)
        if (!c->lingering)
            pd__conn_read_stop(c);
    if (s->in_flight == 0)
        pd__flush_begin(s);
    else
        uv_timer_start(&s->stop_timer, pd__stop_timer_cb, s->conf.shutdown_grace_ms, 0);
}

/* After a reload: has the workers grow their search contexts for the
 * largest scene now being served, so the first request on a larger new map
 * does not pay for it. Contexts never shrink, so after a reload to smaller
 * maps they are simply already big enough. */
static void pd__prepare_workers(pd_server *s)
{
    int32_t w, h;
    char name[PD_CONF_MAX_NAME];
    if (s->pool && pd_registry_largest(s->registry, &w, &h, name, sizeof name)) {
        pd_pool_reserve(s->pool, w, h);
        pd_log_info("reload: workers prepare search contexts for %" PRId32 "x%" PRId32 " grids (largest scene %s)",
                    w, h, name);
    }
}

/* One reload in progress. The loop thread fills in what the load needs and
 * queues it; the work callback (a libuv threadpool thread) reads the config,
 * builds the scene set and the world over it; the after-work callback (the
 * loop thread again) publishes or refuses them and frees this. libuv runs
 * the two callbacks one after the other and orders them with its own lock,
 * so the fields need no lock of their own; the loop thread does not touch
 * them in between. */
typedef struct pd__reload_job {
    uv_work_t req;               /* req.data points back to the server */
    const char *config_path;     /* the server's; lives until the after-work callback */
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;
    int build_world;             /* the server serves routes: build the world too */
    /* Results, written by the work callback. */
    int conf_loaded;             /* next holds a config to use or free */
    pd_conf next;
    pd_scene_set *scenes;        /* the loaded scenes; NULL when refused */
    pd_world *world;             /* built over `scenes`, unpublished; NULL when
                                    refused (world_err says why) or not built */
    char err[512];
    char world_err[512];
} pd__reload_job;

/* The slow part, off the loop thread: everything that reads files or builds
 * grids and route tables. It touches no server state, so the loop keeps
 * serving meanwhile. The world is built over the loaded set itself, the
 * scenes the publish will serve; a world that does not fit them is not an
 * error of the load (the scenes are still published, see
 * pd__reload_publish). */
static void pd__reload_work(uv_work_t *req)
{
    pd__reload_job *rl = (pd__reload_job *)req;
    if (pd_conf_load_file(rl->config_path, &rl->next, rl->err, sizeof rl->err) != 0)
        return;
    rl->conf_loaded = 1;
    if (rl->adjust)
        rl->adjust(&rl->next, rl->adjust_user);
    rl->scenes = pd_registry_prepare(&rl->next, rl->err, sizeof rl->err);
    if (rl->scenes && rl->build_world)
        rl->world = pd_world_build_from_set(&rl->next.world, rl->scenes, rl->world_err,
                                            sizeof rl->world_err);
}

/* Publishes a loaded reload: the scene swap with the world built for it,
 * the workers' contexts, and the settings a reload may change. Only swaps
 * happen here; the tables were computed by pd__reload_work. Takes over
 * rl->next, rl->scenes and rl->world. */
static void pd__reload_publish(pd_server *s, pd__reload_job *rl)
{
    pd_conf next = rl->next;
    int world_refused = s->world_store && !rl->world;

    /* A world that does not fit the new scenes (a portal cell outside a
     * reloaded map) was refused by the build: the scenes are swapped in
     * anyway and the old world, whose snapshots stay valid for routes,
     * serves until a reload that fits. */
    if (s->world_store)
        pd_world_store_publish_reload(s->world_store, s->registry, rl->scenes, rl->world);
    else
        pd_registry_publish(s->registry, rl->scenes);
    rl->scenes = NULL;
    rl->world = NULL;
    pd__prepare_workers(s);
    if (world_refused)
        pd_log_error("reload: portals and routes of %s refused: %s; the previous world keeps serving routes",
                     s->config_path, rl->world_err);

    if (strcmp(next.listen_host, s->conf.listen_host) != 0 || next.listen_port != s->conf.listen_port)
        pd_log_warn("reload: a new listen address needs a restart; still on %s:%u",
                    s->conf.listen_host, (unsigned)s->conf.listen_port);
    if (next.threads != s->conf.threads || next.job_queue_capacity != s->conf.job_queue_capacity)
        pd_log_warn("reload: thread count and job queue capacity need a restart; unchanged");
    memcpy(next.listen_host, s->conf.listen_host, sizeof next.listen_host);
    next.listen_port = s->conf.listen_port;
    next.threads = s->conf.threads;
    next.job_queue_capacity = s->conf.job_queue_capacity;

    size_t n_scenes = next.n_scenes;
    pd_conf scenes_only = {0};
    scenes_only.scenes = next.scenes;
    scenes_only.n_scenes = next.n_scenes;
    scenes_only.world = next.world;   /* the world store keeps its own copy */
    next.scenes = NULL;
    next.n_scenes = 0;
    memset(&next.world, 0, sizeof next.world);
    s->conf = next;
    pd_conf_free(&scenes_only);

    pd_log_set_level(s->conf.log_level);
    uint64_t interval = pd__sweep_interval(&s->conf);
    if (interval != s->sweep_interval_ms && uv_is_active((uv_handle_t *)&s->sweep_timer)) {
        s->sweep_interval_ms = interval;
        uv_timer_set_repeat(&s->sweep_timer, interval);
    }
    pd_log_info("reloaded %s: %zu scenes", s->config_path, n_scenes);
}

static void pd__reload_start(pd_server *s);

/* Back on the loop thread once the load is done: publish it, or log why it
 * was refused and keep serving the running set. A stop that began meanwhile
 * wins: the loaded set and its world are dropped unpublished. Then a reload
 * asked for during the load runs (once, however many were asked for). */
static void pd__reload_done(uv_work_t *req, int status)
{
    pd_server *s = req->data;
    pd__reload_job *rl = (pd__reload_job *)req;
    s->reload = NULL;
    if (status != 0) {
        /* Only uv_cancel gives this, and nothing cancels a reload; kept so
         * no path leaks what the work may have loaded. */
        snprintf(rl->err, sizeof rl->err, "the load did not run: %s", uv_strerror(status));
    }
    if (!rl->conf_loaded) {
        pd_log_error("reload refused: %s; the running configuration stays", rl->err);
    } else if (!rl->scenes) {
        pd_log_error("reload refused: %s; the running scenes stay", rl->err);
        pd_conf_free(&rl->next);
    } else if (s->phase != PD__RUNNING) {
        pd_log_warn("reload of %s dropped: the server is stopping", s->config_path);
        pd_world_release(rl->world);
        pd_registry_discard(rl->scenes);
        pd_conf_free(&rl->next);
    } else {
        pd__reload_publish(s, rl);
    }
    free(rl);
    if (s->reload_again) {
        s->reload_again = 0;
        if (s->phase == PD__RUNNING)
            pd__reload_start(s);
    }
}

/* Queues the load of the config file on libuv's threadpool. The pending
 * work request keeps uv_run going, so a stop that begins meanwhile still
 * waits for pd__reload_done before the loop can be closed. */
static void pd__reload_start(pd_server *s)
{
    pd_log_info("reloading %s", s->config_path);
    pd__reload_job *rl = calloc(1, sizeof *rl);
    if (!rl) {
        pd_log_error("reload refused: out of memory; the running configuration stays");
        return;
    }
    rl->req.data = s;
    rl->config_path = s->config_path;
    rl->adjust = s->adjust;
    rl->adjust_user = s->adjust_user;
    rl->build_world = s->world_store != NULL;
    int rc = uv_queue_work(s->loop, &rl->req, pd__reload_work, pd__reload_done);
    if (rc != 0) {
        pd_log_error("reload refused: cannot start the load: %s; the running configuration stays",
                     uv_strerror(rc));
        free(rl);
        return;
    }
    s->reload = rl;
}

/* A reload request (SIGHUP or pd_server_request_reload). While one is still
 * loading, requests are coalesced into one more run after it: the file may
 * have changed after the running load read it. */
static void pd__reload(pd_server *s)
{
    if (!s->config_path) {
        pd_log_warn("reload requested, but the server has no config file to reread");
        return;
    }
    if (s->phase != PD__RUNNING) {
        pd_log_warn("reload requested while stopping; ignored");
        return;
    }
    if (s->reload) {
        pd_log_info("reload requested while one is loading; it runs again once that one is done");
        s->reload_again = 1;
        return;
    }
    pd__reload_start(s);
}

static void pd__async_cb(uv_async_t *a)
{
    pd_server *s = a->data;
    if (atomic_exchange(&s->reload_requested, 0))
        pd__reload(s);
    if (atomic_exchange(&s->stop_requested, 0))
        pd__stop_begin(s);
    pd__drain_completions(s);
    pd__check_drained(s);
}

static void pd__sweep_cb(uv_timer_t *t)
{
    pd_server *s = t->data;
    uint64_t now = uv_now(s->loop);
    uint32_t idle_ms = s->conf.idle_timeout_ms;
    for (pd__conn *c = s->conns; c; c = c->next) {
        if (c->closing)
            continue;
        if (c->lingering) {
            if (now - c->lingering_since_ms >= PD_SERVER_LINGER_MS)
                pd__conn_close(c);
        } else if (idle_ms > 0 && c->in_flight == 0 && now - c->last_active_ms >= idle_ms) {
            pd_log_debug("conn %" PRIu64 ": idle for %" PRIu32 " ms; closing", c->id, idle_ms);
            pd__conn_close(c);
        }
    }
}

static void pd__signal_cb(uv_signal_t *h, int signum)
{
    pd_server *s = h->data;
    if (signum == SIGHUP) {
        pd__reload(s);
        return;
    }
    pd_log_info("received %s", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    pd__stop_begin(s);
}

/* ---- public API -------------------------------------------------------- */

pd_server *pd_server_create(uv_loop_t *loop, const pd_conf *conf, pd_registry *registry,
                            const pd_server_config_source *source)
{
    pd_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->loop = loop;
    s->conf = *conf;
    s->conf.scenes = NULL;
    s->conf.n_scenes = 0;
    /* The caller's config owns the portals; the world store holds what
     * routes need, so the server keeps no pointer into them. */
    memset(&s->conf.world, 0, sizeof s->conf.world);
    s->registry = registry;
    s->next_conn_id = 1;
    s->answering = -1;
    s->started_ns = uv_hrtime();
    s->sweep_interval_ms = pd__sweep_interval(&s->conf);
    atomic_init(&s->stop_requested, 0);
    atomic_init(&s->reload_requested, 0);
    if (source) {
        s->adjust = source->adjust;
        s->adjust_user = source->adjust_user;
        if (source->path && !(s->config_path = strdup(source->path)))
            goto fail;
    }

    if (uv_async_init(loop, &s->async, pd__async_cb) != 0)
        goto fail;
    s->async.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->sweep_timer) != 0)
        goto fail;
    s->sweep_timer.data = s;
    s->open_handles++;
    if (uv_timer_init(loop, &s->stop_timer) != 0)
        goto fail;
    s->stop_timer.data = s;
    s->open_handles++;
    if (pd__map_grow(&s->map) != 0)
        goto fail;
    return s;

fail:
    pd_server_destroy(s);
    return NULL;
}

void pd_server_wake(void *server)
{
    pd_server *s = server;
    uv_async_send(&s->async);
}

int pd_server_start(pd_server *s, pd_pool *pool, char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    char where[96];
    int rc;

    s->pool = pool;
    pd__format_address(s, s->conf.listen_port, where, sizeof where);
    if (strchr(s->conf.listen_host, ':'))
        rc = uv_ip6_addr(s->conf.listen_host, s->conf.listen_port, (struct sockaddr_in6 *)&addr);
    else
        rc = uv_ip4_addr(s->conf.listen_host, s->conf.listen_port, (struct sockaddr_in *)&addr);
    if (rc != 0) {
        snprintf(err, errlen, "listen address %s: %s", where, uv_strerror(rc));
        return -1;
    }
    if ((rc = uv_tcp_init(s->loop, &s->listener)) != 0) {
        snprintf(err, errlen, "listen on %s: %s", where, uv_strerror(rc));
        return -1;
    }
    s->listener.data = s;
    s->open_handles++;
    if ((rc = uv_tcp_bind(&s->listener, (const struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->listener, PD_SERVER_LISTEN_BACKLOG, pd__on_connection)) != 0) {
        snprintf(err, errlen, "listen on %s: %s", where, uv_strerror(rc));
        pd__close_handle((uv_handle_t *)&s->listener);
        return -1;
    }

    struct sockaddr_storage bound;
    int bound_len = (int)sizeof bound;
    if ((rc = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &bound_len)) != 0) {
        snprintf(err, errlen, "listen on %s: %s", where, uv_strerror(rc));
        pd__close_handle((uv_handle_t *)&s->listener);
        return -1;
    }
    if (bound.ss_family == AF_INET6)
        s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
    else
        s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);

    uv_timer_start(&s->sweep_timer, pd__sweep_cb, s->sweep_interval_ms, s->sweep_interval_ms);
    pd__format_address(s, s->port, where, sizeof where);
    pd_log_info("listening on %s", where);
    return 0;
}

uint16_t pd_server_port(const pd_server *s)
{
    return s->port;
}

int pd_server_watch_signals(pd_server *s)
{
    struct {
        uv_signal_t *h;
        int signum;
    } sigs[] = {{&s->sig_term, SIGTERM}, {&s->sig_int, SIGINT}, {&s->sig_hup, SIGHUP}};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        if (uv_signal_init(s->loop, sigs[i].h) != 0)
            return -1;
        sigs[i].h->data = s;
        s->open_handles++;
        if (uv_signal_start(sigs[i].h, pd__signal_cb, sigs[i].signum) != 0)
            return -1;
    }
    return 0;
}

void pd_server_request_stop(pd_server *s)
{
    atomic_store(&s->stop_requested, 1);
    uv_async_send(&s->async);
}

void pd_server_request_reload(pd_server *s)
{
    atomic_store(&s->reload_requested, 1);
    uv_async_send(&s->async);
}

void pd_server_set_world_store(pd_server *s, pd_world_store *store)
{
    s->world_store = store;
}

void pd_server_set_metrics(pd_server *s, pd_metrics *m)
{
    s->metrics = m;
}

void pd_server_get_stats(pd_server *s, pd_server_stats *out)
{
    pd_pool_stats ps;
    memset(&ps, 0, sizeof ps);
    if (s->pool)
        pd_pool_get_stats(s->pool, &ps);
    pd_scene **list = NULL;
    size_t n_scenes = pd_registry_list(s->registry, &list);
    pd_registry_release_list(list, n_scenes);

    memset(out, 0, sizeof *out);
    out->uptime_ms = (uv_hrtime() - s->started_ns) / 1000000u;
    out->connections = s->n_conns;
    out->requests_total = s->requests_total;
    out->paths_found = ps.paths_found;
    out->expansions_total = ps.expansions;
    out->queue_depth = ps.queue_depth;
    out->in_flight = s->in_flight;
    out->threads = ps.threads;
    out->scenes = (uint32_t)n_scenes;
    out->overloaded_total = s->overloaded_total;
    out->malformed_total = s->malformed_total;
}

void pd_server_destroy(pd_server *s)
{
    if (!s)
        return;
    /* The pool is gone by now (or never existed): nothing may call into it. */
    s->pool = NULL;
    for (pd__conn *c = s->conns; c; c = c->next)
        pd__conn_close(c);
    pd__close_handle((uv_handle_t *)&s->listener);
    pd__close_handle((uv_handle_t *)&s->sweep_timer);
    pd__close_handle((uv_handle_t *)&s->stop_timer);
    pd__close_handle((uv_handle_t *)&s->sig_term);
    pd__close_handle((uv_handle_t *)&s->sig_int);
    pd__close_handle((uv_handle_t *)&s->sig_hup);
    pd__close_handle((uv_handle_t *)&s->async);
    /* Close callbacks run on the next loop iteration; the phase must not
     * start a flush from pd__conn_closed meanwhile. */
    s->phase = PD__CLOSED;
    /* A reload still loading must call back before the server is freed (it
     * frees its own memory there, dropping what it loaded); waiting for it
     * blocks in the loop instead of spinning. */
    while (s->open_handles > 0 || s->conns || s->reload)
        uv_run(s->loop, s->reload ? UV_RUN_ONCE : UV_RUN_NOWAIT);
    free(s->map.slots);
    free(s->config_path);
    free(s);
}
