/*
 * test_e2e_watch.c - hearing about changes through the real daemon
 * (issue 12): two watchers see every version of several scenes in order
 * while two writers update them at once, each event naming the cell its
 * update changed; an instance and a drop reach them too, and Unwatch ends
 * a watch. A watcher that never reads is dropped at limits.watch_buffer_bytes
 * with a final WATCH_OVERFLOW while another goes on being served. A reload
 * that redefines or removes a watched scene is heard. min_version answers
 * STALE_VERSION (with the version now) until an update reaches it, on every
 * scene query. Bad Watch requests get clear statuses. The C client's watch
 * calls and pathctl's `watch` and `--min-version` show the same.
 *
 * Everything speaks raw frames, so each test decides when a socket is read.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>
#include <cjson/cJSON.h>
#include <sys/wait.h>

#include "harness.h"

#define W_SIDE 32
#define W_SCENES 3
#define W_WRITERS 2
#define W_UPDATES 150               /* per writer, round-robin over the scenes */
#define W_PIPELINE 16               /* updates a writer sends before reading answers */
static const char *const W_NAMES[W_SCENES] = { "wa", "wb", "wc" };

/* ---- frames ------------------------------------------------------------- */

static void send_watch(int fd, uint64_t id, const char *const *names, size_t n)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Watch w = PATHD__V1__WATCH__INIT;
    w.scenes = (char **)names;
    w.n_scenes = n;
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_WATCH;
    req.watch = &w;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
}

static void send_unwatch(int fd, uint64_t id, uint64_t watch_id)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Unwatch u = PATHD__V1__UNWATCH__INIT;
    u.watch_id = watch_id;
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_UNWATCH;
    req.unwatch = &u;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
}

/* One UpdateCells of n single-cell operations, cell i at (x + i, y), all
 * with the same op. */
static void send_update(int fd, uint64_t id, const char *scene, int32_t x, int32_t y, size_t n,
                        Pathd__V1__UpdateOp op, uint32_t cost)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__UpdateCells uc = PATHD__V1__UPDATE_CELLS__INIT;
    Pathd__V1__CellOp ops[64], *opp[64];
    Pathd__V1__CellList lists[64];
    Pathd__V1__Cell cells[64], *cellp[64];
    assert_true(n >= 1 && n <= 64);
    for (size_t i = 0; i < n; i++) {
        pathd__v1__cell__init(&cells[i]);
        cells[i].x = x + (int32_t)i;
        cells[i].y = y;
        cellp[i] = &cells[i];
        pathd__v1__cell_list__init(&lists[i]);
        lists[i].cells = &cellp[i];
        lists[i].n_cells = 1;
        pathd__v1__cell_op__init(&ops[i]);
        ops[i].target_case = PATHD__V1__CELL_OP__TARGET_CELLS;
        ops[i].cells = &lists[i];
        ops[i].op = op;
        ops[i].cost = cost;
        opp[i] = &ops[i];
    }
    uc.scene = (char *)scene;
    uc.ops = opp;
    uc.n_ops = n;
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
    req.update_cells = &uc;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
}

/* The next frame on fd, which must come within the call timeout. */
static Pathd__V1__Response *recv_one(int fd)
{
    Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
    assert_non_null(r);
    return r;
}

/* The next frame, which must be a watch event of watch id. */
static Pathd__V1__Response *recv_event(int fd, uint64_t id)
{
    Pathd__V1__Response *r = recv_one(fd);
    if (r->body_case != PATHD__V1__RESPONSE__BODY_WATCH_EVENT)
        fail_msg("expected a watch event of %llu, got id %llu body %d status %d final %d (%s)",
                 (unsigned long long)id, (unsigned long long)r->id, (int)r->body_case, (int)r->status, (int)r->final,
                 r->body_case == PATHD__V1__RESPONSE__BODY_ERROR ? r->error->message : "");
    assert_int_equal(r->id, id);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    return r;
}

/* The final answer to request id: an Error frame with status `want`. */
static Pathd__V1__Response *expect_error(int fd, uint64_t id, Pathd__V1__Status want)
{
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    if (r->status != want)
        fail_msg("request %llu: status %d, want %d (%s)", (unsigned long long)id, (int)r->status, (int)want,
                 r->body_case == PATHD__V1__RESPONSE__BODY_ERROR ? r->error->message : "");
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_ERROR);
    assert_true(r->final);
    return r;
}

/* Starts a watch on fd and checks its WATCH_STARTED frames, one per scene
 * in any order; versions[i] gets scene i's. */
static void start_watch(int fd, uint64_t id, const char *const *names, size_t n, uint64_t *versions)
{
    send_watch(fd, id, names, n);
    int seen[8] = { 0 };
    assert_true(n <= 8);
    for (size_t k = 0; k < n; k++) {
        Pathd__V1__Response *r = recv_event(fd, id);
        const Pathd__V1__WatchEvent *ev = r->watch_event;
        assert_int_equal(ev->kind, PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED);
        assert_false(r->final);
        size_t i = 0;
        while (i < n && strcmp(names[i], ev->scene) != 0)
            i++;
        assert_true(i < n);
        assert_false(seen[i]);
        seen[i] = 1;
        versions[i] = ev->version;
        assert_true(ev->version >= 1);
        pathd__v1__response__free_unpacked(r, NULL);
    }
}

static void create_open_scene(pdc_conn *c, const char *name, int32_t side)
{
    uint8_t *cells = malloc((size_t)side * side);
    assert_non_null(cells);
    memset(cells, 1, (size_t)side * side);
    pdc_create_scene_req req = { .name = name, .width = side, .height = side, .cells = cells };
    pdc_scene_change out;
    assert_int_equal(pdc_create_scene(c, &req, &out), PDC_OK);
    assert_int_equal(out.version, 1);
    free(cells);
}

/* The value of an unlabelled metric line "NAME VALUE"; -1 when absent. */
static long long metric(const pdi_daemon *d, const char *name)
{
    char *text = pdi_metrics_get(d);
    assert_non_null(text);
    char needle[128];
    snprintf(needle, sizeof needle, "\n%s ", name);
    const char *p = strstr(text, needle);
    long long v = p ? strtoll(p + strlen(needle), NULL, 10) : -1;
    free(text);
    return v;
}

/* ---- every version, in order ----------------------------------------------- */

/* What an update's answer said: the version it made and the cell it
 * changed, so an event can be checked against the update that made it. */
typedef struct made {
    int32_t x, y;
    int blocked;
} made;

typedef struct writer {
    const pdi_daemon *d;
    int k;                                  /* writer index: its cells are column k */
    made (*log)[W_SCENES * W_WRITERS * W_UPDATES + 2];  /* per scene, by version */
    pthread_mutex_t *lock;
    int failed;
} writer;

static void *writer_run(void *arg)
{
    writer *w = arg;
    int fd = pdi_raw_connect(w->d->port);
    if (fd < 0) {
        w->failed = 1;
        return NULL;
    }
    for (int base = 0; base < W_UPDATES && !w->failed; base += W_PIPELINE) {
        int n = W_UPDATES - base < W_PIPELINE ? W_UPDATES - base : W_PIPELINE;
        for (int i = 0; i < n; i++) {
            int u = base + i;
            /* Update u of this writer: scene u % 3, its own cell (k, row),
             * blocked on even rounds and open again on odd ones, so every
             * update changes exactly one cell. */
            int round = u / W_SCENES;
            send_update(fd, (uint64_t)(u + 1), W_NAMES[u % W_SCENES], w->k, round / 2 % W_SIDE, 1,
                        round % 2 == 0 ? PATHD__V1__UPDATE_OP__UPDATE_BLOCK : PATHD__V1__UPDATE_OP__UPDATE_PASS, 0);
        }
        for (int i = 0; i < n; i++) {
            Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
            if (!r || r->status != PATHD__V1__STATUS__OK || r->body_case != PATHD__V1__RESPONSE__BODY_UPDATE ||
                r->update->cells_changed != 1) {
                w->failed = 1;
                if (r)
                    pathd__v1__response__free_unpacked(r, NULL);
                break;
            }
            int u = (int)r->id - 1, round = u / W_SCENES;
            pthread_mutex_lock(w->lock);
            if (r->update->version < sizeof w->log[0] / sizeof w->log[0][0])
                w->log[u % W_SCENES][r->update->version] = (made){ w->k, round / 2 % W_SIDE, round % 2 == 0 };
            else
                w->failed = 1;
            pthread_mutex_unlock(w->lock);
            pathd__v1__response__free_unpacked(r, NULL);
        }
    }
    close(fd);
    return NULL;
}

/* Reads watch id's events on fd until every scene in names has reached
 * last[i], checking each is the next version and matches log. */
static void expect_versions(int fd, uint64_t id, const char *const *names, size_t n, const uint64_t *start,
                            const uint64_t *last, made (*log)[W_SCENES * W_WRITERS * W_UPDATES + 2])
{
    uint64_t at[W_SCENES];
    size_t done = 0;
    for (size_t i = 0; i < n; i++) {
        at[i] = start[i];
        done += at[i] == last[i];
    }
    while (done < n) {
        Pathd__V1__Response *r = recv_event(fd, id);
        const Pathd__V1__WatchEvent *ev = r->watch_event;
        size_t i = 0;
        while (i < n && strcmp(names[i], ev->scene) != 0)
            i++;
        assert_true(i < n);
        assert_int_equal(ev->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED);
        if (ev->version != at[i] + 1)
            fail_msg("watch %llu, scene %s: version %llu after %llu", (unsigned long long)id, names[i],
                     (unsigned long long)ev->version, (unsigned long long)at[i]);
        at[i] = ev->version;
        const made *m = &log[i][ev->version];
        assert_int_equal(ev->cells_changed, 1);
        assert_non_null(ev->changed);
        assert_int_equal(ev->changed->min->x, m->x);
        assert_int_equal(ev->changed->min->y, m->y);
        assert_int_equal(ev->changed->max->x, m->x);
        assert_int_equal(ev->changed->max->y, m->y);
        assert_int_equal(ev->n_ops, 1);
        assert_int_equal(ev->ops[0]->op, m->blocked ? PATHD__V1__UPDATE_OP__UPDATE_BLOCK
                                                    : PATHD__V1__UPDATE_OP__UPDATE_PASS);
        assert_int_equal(ev->ops[0]->cells, 1);
        assert_int_equal(ev->ops[0]->bounds->min->x, m->x);
        assert_int_equal(ev->ops[0]->bounds->max->y, m->y);
        assert_false(r->final);
        done += at[i] == last[i];
        pathd__v1__response__free_unpacked(r, NULL);
    }
}

static int setup_metrics(void **state)
{
    pdi_limits l = { 0 };
    l.metrics = 1;
    return pdi_fixture_start(state, &l);
}

static void test_every_version_in_order(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    for (size_t i = 0; i < W_SCENES; i++)
        create_open_scene(c, W_NAMES[i], W_SIDE);

    /* A watches two scenes, B all three. */
    int a = pdi_raw_connect(d->port), b = pdi_raw_connect(d->port);
    assert_true(a >= 0 && b >= 0);
    uint64_t va[W_SCENES], vb[W_SCENES];
    start_watch(a, 100, W_NAMES, 2, va);
    start_watch(b, 200, W_NAMES, 3, vb);
    for (size_t i = 0; i < W_SCENES; i++) {
        assert_int_equal(vb[i], 1);
        if (i < 2)
            assert_int_equal(va[i], 1);
    }
    assert_int_equal(metric(d, "pathd_watchers"), 2);

    static made log[W_SCENES][W_SCENES * W_WRITERS * W_UPDATES + 2];
    memset(log, 0, sizeof log);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    writer w[W_WRITERS];
    pthread_t th[W_WRITERS];
    for (int k = 0; k < W_WRITERS; k++) {
        w[k] = (writer){ .d = d, .k = k, .log = log, .lock = &lock };
        assert_int_equal(pthread_create(&th[k], NULL, writer_run, &w[k]), 0);
    }
    for (int k = 0; k < W_WRITERS; k++) {
        pthread_join(th[k], NULL);
        assert_false(w[k].failed);
    }
    /* Every update changed a cell, so each scene made one version per update. */
    uint64_t last[W_SCENES];
    for (size_t i = 0; i < W_SCENES; i++) {
        size_t per = 0;
        for (int u = 0; u < W_UPDATES; u++)
            per += (size_t)(u % W_SCENES) == i;
        last[i] = 1 + per * W_WRITERS;
    }
    expect_versions(a, 100, W_NAMES, 2, va, last, log);
    expect_versions(b, 200, W_NAMES, 3, vb, last, log);

    /* An instance of wa is heard on wa, at wa's version, which stays. */
    pdc_scene_change out;
    assert_int_equal(pdc_create_instance(c, "wa_copy", "wa", &out), PDC_OK);
    const int fds[2] = { a, b };
    const uint64_t ids[2] = { 100, 200 };
    for (int k = 0; k < 2; k++) {
        Pathd__V1__Response *r = recv_event(fds[k], ids[k]);
        assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_INSTANCED);
        assert_string_equal(r->watch_event->scene, "wa");
        assert_string_equal(r->watch_event->instance, "wa_copy");
        assert_int_equal(r->watch_event->version, last[0]);
        pathd__v1__response__free_unpacked(r, NULL);
    }

    /* Dropping wc ends B's subscription to it (B still watches two). */
    assert_int_equal(pdc_drop_scene(c, "wc", 0, &out), PDC_OK);
    Pathd__V1__Response *r = recv_event(b, 200);
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_DROPPED);
    assert_string_equal(r->watch_event->scene, "wc");
    assert_int_equal(r->watch_event->version, last[2]);
    assert_false(r->final);
    pathd__v1__response__free_unpacked(r, NULL);

    /* Unwatch: A's final frame, then the Unwatch's own answer. */
    send_unwatch(a, 101, 100);
    r = recv_event(a, 100);
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__WATCH_ENDED);
    assert_true(r->final);
    pathd__v1__response__free_unpacked(r, NULL);
    r = recv_one(a);
    assert_int_equal(r->id, 101);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_true(r->final);
    pathd__v1__response__free_unpacked(r, NULL);

    /* B goes on hearing wb; A hears nothing more (its next frame is a Pong). */
    pdc_update_req up = { .scene = "wb", .op = PDC_UPDATE_BLOCK };
    pdc_xy cell = { 30, 30 };
    up.cells = &cell;
    up.cell_count = 1;
    pdc_update_result ur;
    assert_int_equal(pdc_update_cells(c, &up, &ur), PDC_OK);
    r = recv_event(b, 200);
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED);
    assert_int_equal(r->watch_event->version, ur.version);
    pathd__v1__response__free_unpacked(r, NULL);
    pdi_small_msg ping;
    pdi_ping_init(&ping, 102, 7);
    assert_int_equal(pdi_raw_send_request(a, &ping.req), 0);
    r = recv_one(a);
    assert_int_equal(r->id, 102);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    pathd__v1__response__free_unpacked(r, NULL);

    assert_int_equal(metric(d, "pathd_watchers"), 1);
    /* A: 2 starts, its two scenes' versions, the instance; B: 3 starts,
     * every version, the instance, the drop, wb's last update. */
    assert_int_equal(metric(d, "pathd_watch_events_total"),
                     (long long)(2 + (last[0] - 1) + (last[1] - 1) + 1 + 3 + (last[0] - 1) + (last[1] - 1) +
                                 (last[2] - 1) + 1 + 1 + 1));
    assert_int_equal(metric(d, "pathd_watchers_dropped_total"), 0);
    close(a);
    close(b);
    pdc_close(c);
}

/* ---- a watcher that does not read -------------------------------------- */

typedef struct reader {
    int fd;
    uint64_t id;
    uint64_t next;                          /* the version expected next */
    uint64_t stop_at;                       /* read until this version (set by the test) */
    pthread_mutex_t lock;
    int failed;
} reader;

static void *reader_run(void *arg)
{
    reader *rd = arg;
    for (;;) {
        pthread_mutex_lock(&rd->lock);
        int more = rd->stop_at == 0 || rd->next <= rd->stop_at;
        pthread_mutex_unlock(&rd->lock);
        if (!more)
            return NULL;
        Pathd__V1__Response *r = pdi_raw_recv(rd->fd, 500, NULL);
        if (!r)
            continue;
        int ok = r->id == rd->id && r->body_case == PATHD__V1__RESPONSE__BODY_WATCH_EVENT &&
                 r->watch_event->kind == PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED;
        pthread_mutex_lock(&rd->lock);
        if (!ok || r->watch_event->version != rd->next)
            rd->failed = 1;
        rd->next++;
        pthread_mutex_unlock(&rd->lock);
        pathd__v1__response__free_unpacked(r, NULL);
        if (!ok)
            return NULL;
    }
}

static int setup_small_buffer(void **state)
{
    pdi_limits l = { 0 };
    l.metrics = 1;
    l.watch_buffer_bytes = 4096;
    return pdi_fixture_start(state, &l);
}

static void test_slow_watcher_dropped(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    create_open_scene(c, "busy", 64);
    const char *const names[] = { "busy" };
    uint64_t v0;

    int slow = pdi_raw_connect_small_window(d->port);
    assert_true(slow >= 0);
    start_watch(slow, 7, names, 1, &v0);
    reader rd = { .fd = pdi_raw_connect(d->port), .id = 8, .lock = PTHREAD_MUTEX_INITIALIZER };
    start_watch(rd.fd, 8, names, 1, &v0);
    rd.next = v0 + 1;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, reader_run, &rd), 0);

    /* Updates of 64 operations make events of about 1.5 KB: the slow
     * watcher's socket buffers fill, then its 4 KiB budget. */
    int w = pdi_raw_connect(d->port);
    uint64_t version = v0;
    int dropped = 0;
    for (int u = 0; u < 4000 && !dropped; u++) {
        send_update(w, (uint64_t)u + 1, "busy", 0, u / 2 % 64, 64,
                    u % 2 == 0 ? PATHD__V1__UPDATE_OP__UPDATE_BLOCK : PATHD__V1__UPDATE_OP__UPDATE_PASS, 0);
        Pathd__V1__Response *r = recv_one(w);
        assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        assert_int_equal(r->update->version, version + 1);
        version = r->update->version;
        pathd__v1__response__free_unpacked(r, NULL);
        if (u % 100 == 99)
            dropped = metric(d, "pathd_watchers_dropped_total") == 1;
    }
    assert_true(dropped);
    /* Ten more versions the reader must see after the drop: costs 2, 3,
     * 2... on one cell, each a change whatever the cell was. */
    for (int u = 0; u < 10; u++) {
        send_update(w, 9000 + (uint64_t)u, "busy", 63, 63, 1, PATHD__V1__UPDATE_OP__UPDATE_COST, 2 + (uint32_t)u % 2);
        Pathd__V1__Response *r = recv_one(w);
        assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        assert_int_equal(r->update->version, version + 1);
        version = r->update->version;
        pathd__v1__response__free_unpacked(r, NULL);
    }
    /* The reader heard every version up to the last. */
    Pathd__V1__Response *r;
    pdi_small_msg ping;
    const uint64_t last = version;
    pthread_mutex_lock(&rd.lock);
    rd.stop_at = last;
    pthread_mutex_unlock(&rd.lock);
    pthread_join(th, NULL);
    assert_false(rd.failed);
    assert_int_equal(rd.next, last + 1);

    /* The slow watcher's stream: events in order, then WATCH_OVERFLOW. */
    uint64_t next = v0 + 1;
    for (;;) {
        r = recv_one(slow);
        assert_int_equal(r->id, 7);
        if (r->body_case == PATHD__V1__RESPONSE__BODY_ERROR) {
            assert_int_equal(r->status, PATHD__V1__STATUS__WATCH_OVERFLOW);
            assert_true(r->final);
            assert_non_null(strstr(r->error->message, "watch_buffer_bytes"));
            pathd__v1__response__free_unpacked(r, NULL);
            break;
        }
        assert_int_equal(r->watch_event->version, next);
        next++;
        pathd__v1__response__free_unpacked(r, NULL);
    }
    assert_true(next <= last);
    /* Its connection stays open and served. */
    pdi_ping_init(&ping, 70, 2);
    assert_int_equal(pdi_raw_send_request(slow, &ping.req), 0);
    r = recv_one(slow);
    assert_int_equal(r->id, 70);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_int_equal(metric(d, "pathd_watchers"), 1);
    assert_true(pdi_log_contains(d, "limits.watch_buffer_bytes"));
    close(slow);
    close(rd.fd);
    close(w);
    pdc_close(c);
}

/* ---- min_version ------------------------------------------------------- */

/* Sends req with min_version set by the caller and checks STALE_VERSION
 * with the version now in Error.version. */
static void expect_stale(int fd, const Pathd__V1__Request *req, uint64_t now)
{
    assert_int_equal(pdi_raw_send_request(fd, req), 0);
    Pathd__V1__Response *r = expect_error(fd, req->id, PATHD__V1__STATUS__STALE_VERSION);
    assert_int_equal(r->error->version, now);
    assert_non_null(strstr(r->error->message, "min_version"));
    pathd__v1__response__free_unpacked(r, NULL);
}

static void test_min_version(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    create_open_scene(c, "mv", 16);
    int fd = pdi_raw_connect(d->port);
    const uint64_t want = 3;

    pdi_fp_msg fp;
    pdi_fp_init(&fp, 1, "mv", 0, 0, 15, 15);
    fp.fp.min_version = want;
    Pathd__V1__Request info_req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneInfo info = PATHD__V1__GET_SCENE_INFO__INIT;
    info.scene = "mv";
    info.min_version = want;
    info_req.id = 2;
    info_req.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    info_req.scene_info = &info;
    Pathd__V1__Request grid_req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneGrid grid = PATHD__V1__GET_SCENE_GRID__INIT;
    grid.scene = "mv";
    grid.min_version = want;
    grid_req.id = 3;
    grid_req.body_case = PATHD__V1__REQUEST__BODY_SCENE_GRID;
    grid_req.scene_grid = &grid;
    Pathd__V1__Request ray_req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Raycast ray = PATHD__V1__RAYCAST__INIT;
    ray.scene = "mv";
    ray.from = fp.req.find_path->start;
    ray.to = fp.req.find_path->goal;
    ray.min_version = want;
    ray_req.id = 4;
    ray_req.body_case = PATHD__V1__REQUEST__BODY_RAYCAST;
    ray_req.raycast = &ray;
    /* A batch: the FindPath item carries its own min_version, the
     * raycast item another; one is stale, the other not. */
    Pathd__V1__Request batch_req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Batch batch = PATHD__V1__BATCH__INIT;
    Pathd__V1__Query q[2] = { PATHD__V1__QUERY__INIT, PATHD__V1__QUERY__INIT };
    Pathd__V1__Query *qp[2] = { &q[0], &q[1] };
    Pathd__V1__Raycast ray_any = ray;
    ray_any.min_version = 0;
    q[0].kind_case = PATHD__V1__QUERY__KIND_FIND_PATH;
    q[0].find_path = &fp.fp;
    q[1].kind_case = PATHD__V1__QUERY__KIND_RAYCAST;
    q[1].raycast = &ray_any;
    batch.items = qp;
    batch.n_items = 2;
    batch_req.id = 5;
    batch_req.body_case = PATHD__V1__REQUEST__BODY_BATCH;
    batch_req.batch = &batch;

    /* Version 1 now: every query asking for 3 is stale. */
    expect_stale(fd, &fp.req, 1);
    expect_stale(fd, &info_req, 1);
    expect_stale(fd, &grid_req, 1);
    expect_stale(fd, &ray_req, 1);
    assert_int_equal(pdi_raw_send_request(fd, &batch_req), 0);
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, 5, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_int_equal(r->batch->n_items, 2);
    assert_int_equal(r->batch->items[0]->status, PATHD__V1__STATUS__STALE_VERSION);
    assert_int_equal(r->batch->items[0]->version, 1);
    assert_int_equal(r->batch->items[1]->status, PATHD__V1__STATUS__OK);
    pathd__v1__response__free_unpacked(r, NULL);

    /* Two updates make version 3: now they all answer. */
    for (int i = 0; i < 2; i++) {
        pdc_update_req up = { .scene = "mv", .op = i == 0 ? PDC_UPDATE_BLOCK : PDC_UPDATE_PASS };
        pdc_xy cell = { 5, 5 };
        up.cells = &cell;
        up.cell_count = 1;
        pdc_update_result ur;
        assert_int_equal(pdc_update_cells(c, &up, &ur), PDC_OK);
        assert_int_equal(ur.version, 2 + (uint64_t)i);
    }
    const Pathd__V1__Request *reqs[] = { &fp.req, &info_req, &grid_req, &ray_req, &batch_req };
    for (size_t i = 0; i < sizeof reqs / sizeof reqs[0]; i++) {
        assert_int_equal(pdi_raw_send_request(fd, reqs[i]), 0);
        r = pdi_raw_recv_final(fd, reqs[i]->id, PDI_CALL_TIMEOUT_MS);
        assert_non_null(r);
        assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        if (r->body_case == PATHD__V1__RESPONSE__BODY_BATCH)
            assert_int_equal(r->batch->items[0]->status, PATHD__V1__STATUS__OK);
        pathd__v1__response__free_unpacked(r, NULL);
    }
    close(fd);
    pdc_close(c);
}

/* ---- bad input ----------------------------------------------------------- */

static int setup_small_caps(void **state)
{
    pdi_limits l = { 0 };
    l.max_watch_scenes = 2;
    l.max_watchers = 2;
    return pdi_fixture_start(state, &l);
}

static void test_bad_watch_requests(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    Pathd__V1__Response *r;

    /* GetLimits says the caps this server runs with. */
    pdc_conn *c = pdi_connect(d);
    pdc_limits lim;
    assert_int_equal(pdc_get_limits(c, &lim), PDC_OK);
    assert_int_equal(lim.max_watch_scenes, 2);
    assert_int_equal(lim.max_watchers, 2);
    assert_int_equal(lim.watch_buffer_bytes, 1048576);
    /* The reservation limits, at their defaults (config/README.md). */
    assert_int_equal(lim.reservation_ttl_ms, 30000);
    assert_int_equal(lim.max_agents_per_scene, 10000);
    assert_int_equal(lim.max_reservation_entries, 1000000);
    assert_int_equal(lim.max_reservation_window_ms, 60000);
    assert_int_equal(lim.max_agent_bytes, 1048576);
    assert_int_equal(lim.max_clock_step_ms, 3600000);
    pdc_close(c);

    const char *const unknown[] = { "rooms", "nowhere" };
    send_watch(fd, 1, unknown, 2);
    r = expect_error(fd, 1, PATHD__V1__STATUS__UNKNOWN_SCENE);
    assert_non_null(strstr(r->error->message, "nowhere"));
    pathd__v1__response__free_unpacked(r, NULL);

    const char *const three[] = { "rooms", "den520d", "serpent" };
    send_watch(fd, 2, three, 3);
    r = expect_error(fd, 2, PATHD__V1__STATUS__LIMIT_EXCEEDED);
    assert_non_null(strstr(r->error->message, "max_watch_scenes"));
    pathd__v1__response__free_unpacked(r, NULL);

    const char *const twice[] = { "rooms", "rooms" };
    send_watch(fd, 3, twice, 2);
    pathd__v1__response__free_unpacked(expect_error(fd, 3, PATHD__V1__STATUS__INVALID_ARGUMENT), NULL);
    send_watch(fd, 4, NULL, 0);
    pathd__v1__response__free_unpacked(expect_error(fd, 4, PATHD__V1__STATUS__INVALID_ARGUMENT), NULL);
    const char *const bad_name[] = { "a-name-longer-than-sixty-three-bytes-is-refused-before-any-lookup-x" };
    send_watch(fd, 5, bad_name, 1);
    pathd__v1__response__free_unpacked(expect_error(fd, 5, PATHD__V1__STATUS__INVALID_ARGUMENT), NULL);
    send_unwatch(fd, 6, 12345);
    pathd__v1__response__free_unpacked(expect_error(fd, 6, PATHD__V1__STATUS__INVALID_ARGUMENT), NULL);

    /* Two watches are the server's limit; a third (another connection) is
     * refused, and the same id twice on one connection too. */
    uint64_t v;
    const char *const one[] = { "rooms" };
    start_watch(fd, 10, one, 1, &v);
    send_watch(fd, 10, one, 1);
    pathd__v1__response__free_unpacked(expect_error(fd, 10, PATHD__V1__STATUS__INVALID_ARGUMENT), NULL);
    start_watch(fd, 11, one, 1, &v);
    int other = pdi_raw_connect(d->port);
    send_watch(other, 1, one, 1);
    r = expect_error(other, 1, PATHD__V1__STATUS__LIMIT_EXCEEDED);
    assert_non_null(strstr(r->error->message, "max_watchers"));
    pathd__v1__response__free_unpacked(r, NULL);
    /* Closing a watching connection frees its watches for others. */
    close(fd);
    for (int tries = 0;; tries++) {
        send_watch(other, 2 + (uint64_t)tries, one, 1);
        r = pdi_raw_recv(other, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        int ok = r->status == PATHD__V1__STATUS__OK;
        assert_true(ok || r->status == PATHD__V1__STATUS__LIMIT_EXCEEDED);
        pathd__v1__response__free_unpacked(r, NULL);
        if (ok)
            break;
        assert_true(tries < 100);
        pdi_sleep_ms(50);
    }

    /* A Watch body that is not a Watch: MALFORMED, and the connection closes. */
    static const uint8_t garbage[] = { 0, 0, 0, 4, 0x08, 0x01, 0xb2, 0x04 };
    assert_int_equal(pdi_raw_send(other, garbage, sizeof garbage), 0);
    for (;;) {
        r = pdi_raw_recv(other, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        int malformed = r->status == PATHD__V1__STATUS__MALFORMED;
        pathd__v1__response__free_unpacked(r, NULL);
        if (malformed)
            break;
    }
    assert_true(pdi_raw_wait_closed(other, PDI_CALL_TIMEOUT_MS));
    close(other);
    pdi_assert_daemon_serves(d);
}

static int setup_per_conn_cap(void **state)
{
    pdi_limits l = { 0 };
    l.max_watchers = 6;
    l.max_watches_per_conn = 2;
    return pdi_fixture_start(state, &l);
}

/* Issue 29, finding 12: one client could take every watch slot. A third
 * Watch on one connection is answered LIMIT_EXCEEDED naming
 * limits.max_watches_per_conn, while another connection still watches;
 * GetLimits says the cap. */
static void test_watches_per_connection_cap(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    pdc_limits lim;
    assert_int_equal(pdc_get_limits(c, &lim), PDC_OK);
    assert_int_equal(lim.max_watches_per_conn, 2);
    pdc_close(c);

    int fd = pdi_raw_connect(d->port);
    int other = pdi_raw_connect(d->port);
    uint64_t v;
    const char *const one[] = { "rooms" };
    start_watch(fd, 1, one, 1, &v);
    start_watch(fd, 2, one, 1, &v);
    send_watch(fd, 3, one, 1);
    Pathd__V1__Response *r = expect_error(fd, 3, PATHD__V1__STATUS__LIMIT_EXCEEDED);
    assert_non_null(strstr(r->error->message, "limits.max_watches_per_conn is 2"));
    pathd__v1__response__free_unpacked(r, NULL);
    start_watch(other, 1, one, 1, &v);
    start_watch(other, 2, one, 1, &v);
    /* An Unwatch gives the slot back. */
    send_unwatch(fd, 4, 1);
    for (;;) {
        r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        assert_non_null(r);
        int acked = r->id == 4;
        if (acked)
            assert_int_equal(r->status, PATHD__V1__STATUS__OK);
        pathd__v1__response__free_unpacked(r, NULL);
        if (acked)
            break;
    }
    start_watch(fd, 5, one, 1, &v);
    close(fd);
    close(other);
    pdi_assert_daemon_serves(d);
}

/* A protocol error closes the connection (docs/PROTOCOL.md, 2), and with it
 * its watches: at once, not when the lingering close that lets the error
 * reach the client ends (up to PD_SERVER_LINGER_MS later). Until then they
 * would hold their max_watchers slots and be sent events after the
 * connection's last frame. */
static void test_protocol_error_ends_watches(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    uint64_t v;
    const char *const one[] = { "rooms" };
    start_watch(fd, 1, one, 1, &v);
    start_watch(fd, 2, one, 1, &v);

    static const uint8_t garbage[] = { 0, 0, 0, 4, 0x08, 0x01, 0xb2, 0x04 };
    assert_int_equal(pdi_raw_send(fd, garbage, sizeof garbage), 0);
    Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
    assert_non_null(r);
    assert_int_equal(r->id, 0);
    assert_int_equal(r->status, PATHD__V1__STATUS__MALFORMED);
    pathd__v1__response__free_unpacked(r, NULL);
    assert_true(pdi_raw_wait_closed(fd, PDI_CALL_TIMEOUT_MS));

    /* fd stays open, so the server still lingers on it; its two watches,
     * the server's limit, are gone all the same. */
    int other = pdi_raw_connect(d->port);
    start_watch(other, 1, one, 1, &v);
    close(other);
    close(fd);
    pdi_assert_daemon_serves(d);
}

/* ---- reloads --------------------------------------------------------------- */

static const char *ext_scene(int origin)
{
    static char json[PDI_PATH_MAX];
    snprintf(json, sizeof json,
             ",\n    {\"name\": \"ext\", \"map\": \"%s/integ_rooms.txt\", \"format\": \"ascii\", \"origin\": [%d, 0]}",
             PD_TEST_DATA_DIR, origin);
    return json;
}

static int setup_ext(void **state)
{
    pdi_limits l = { 0 };
    l.extra_scenes_json = ext_scene(0);
    return pdi_fixture_start(state, &l);
}

/* Reads watch id's events until one for `scene` arrives; events for other
 * scenes must be REPLACED (a reload may replace unchanged scenes too). */
static Pathd__V1__Response *event_for(int fd, uint64_t id, const char *scene)
{
    for (;;) {
        Pathd__V1__Response *r = recv_event(fd, id);
        if (strcmp(r->watch_event->scene, scene) == 0)
            return r;
        assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_REPLACED);
        pathd__v1__response__free_unpacked(r, NULL);
    }
}

static void test_reload_events(void **state)
{
    pdi_daemon *d = *state;
    int fd = pdi_raw_connect(d->port);
    const char *const names[] = { "ext", "rooms" };
    uint64_t v[2];
    start_watch(fd, 1, names, 2, v);

    pdi_limits l = { 0 };
    l.extra_scenes_json = ext_scene(5);
    assert_int_equal(pdi_write_config(d, &l), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    Pathd__V1__Response *r = event_for(fd, 1, "ext");
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_REPLACED);
    assert_int_equal(r->watch_event->version, v[0] + 1);
    assert_int_equal(r->watch_event->changed->min->x, 0);
    assert_int_equal(r->watch_event->changed->max->x, 23);
    assert_int_equal(r->watch_event->changed->max->y, 11);
    pathd__v1__response__free_unpacked(r, NULL);

    /* The config without ext: its last event. */
    assert_int_equal(pdi_write_config(d, NULL), 0);
    assert_int_equal(pdi_daemon_signal(d, SIGHUP), 0);
    r = event_for(fd, 1, "ext");
    assert_int_equal(r->watch_event->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_DROPPED);
    assert_int_equal(r->watch_event->version, v[0] + 1);
    assert_false(r->final);   /* rooms is still watched */
    pathd__v1__response__free_unpacked(r, NULL);
    close(fd);
}

/* ---- a scene dropped and made again (issue 29, finding 5) --------------- */

#define R_ROUNDS 400
#define R_WATCHES 4                 /* Watches sent per round, beside the drop and create */
#define R_SIDE 8
#define R_PINGS 200                 /* sent ahead of them (see the test) */

static void send_drop(int fd, uint64_t id, const char *name)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__DropScene ds = PATHD__V1__DROP_SCENE__INIT;
    ds.name = (char *)name;
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_DROP_SCENE;
    req.drop_scene = &ds;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
}

static void send_create_open(int fd, uint64_t id, const char *name)
{
    static uint8_t cells[R_SIDE * R_SIDE];
    memset(cells, 1, sizeof cells);
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__CreateScene cs = PATHD__V1__CREATE_SCENE__INIT;
    cs.name = (char *)name;
    cs.width = cs.height = R_SIDE;
    cs.cells.data = cells;
    cs.cells.len = sizeof cells;
    req.id = id;
    req.body_case = PATHD__V1__REQUEST__BODY_CREATE_SCENE;
    req.create_scene = &cs;
    assert_int_equal(pdi_raw_send_request(fd, &req), 0);
}

/* The final answer of id on fd, which must be OK. */
static void expect_ok(int fd, uint64_t id)
{
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    if (r->status != PATHD__V1__STATUS__OK)
        fail_msg("request %llu: status %d (%s)", (unsigned long long)id, (int)r->status,
                 r->body_case == PATHD__V1__RESPONSE__BODY_ERROR ? r->error->message : "");
    pathd__v1__response__free_unpacked(r, NULL);
}

/* What the test knows of one Watch of "re". */
typedef struct re_watch {
    int round;                      /* sent in this round */
    int state;                      /* 0 sent, 1 started, 2 ended */
    uint64_t started;               /* WATCH_STARTED's version */
    uint64_t incarnation;           /* and incarnation */
    uint64_t seen;                  /* the newest version heard */
} re_watch;

/* Reads fd's frames up to the answer of Ping `ping`, checking each watch
 * frame against what its scene may send. `round` is the round whose drop
 * was the last one sent. */
static void drain_watches(int fd, uint64_t ping, re_watch *w, size_t n, int round)
{
    pdi_small_msg m;
    pdi_ping_init(&m, ping, ping);
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
    for (;;) {
        Pathd__V1__Response *r = recv_one(fd);
        if (r->id == ping) {
            pathd__v1__response__free_unpacked(r, NULL);
            return;
        }
        if (r->id >= 2000000) {
            pathd__v1__response__free_unpacked(r, NULL);
            continue;
        }
        assert_true(r->id >= 1 && r->id <= n);
        re_watch *x = &w[r->id - 1];
        if (r->body_case == PATHD__V1__RESPONSE__BODY_ERROR) {
            /* Sent between the drop and the create. */
            assert_int_equal(x->state, 0);
            assert_int_equal(r->status, PATHD__V1__STATUS__UNKNOWN_SCENE);
            x->state = 2;
            pathd__v1__response__free_unpacked(r, NULL);
            continue;
        }
        assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_WATCH_EVENT);
        const Pathd__V1__WatchEvent *ev = r->watch_event;
        assert_int_not_equal(x->state, 2);
        if (ev->kind == PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED) {
            assert_int_equal(x->state, 0);
            x->state = 1;
            x->started = x->seen = ev->version;
            x->incarnation = ev->incarnation;
            assert_int_not_equal(x->incarnation, 0);
        } else {
            assert_int_equal(x->state, 1);
            if (ev->incarnation != x->incarnation)
                fail_msg("watch %llu (round %d) on incarnation %llu heard an event of incarnation %llu",
                         (unsigned long long)r->id, x->round, (unsigned long long)x->incarnation,
                         (unsigned long long)ev->incarnation);
            if (ev->kind == PATHD__V1__WATCH_EVENT_KIND__SCENE_DROPPED) {
                /* Version 1 is only ever the new scene's (the old one was
                 * at 2 when dropped): not dropped before the next round. */
                if (x->started == 1 && x->round == round)
                    fail_msg("round %d: watch %llu started on the new scene (version 1) heard "
                             "SCENE_DROPPED at version %llu before that scene was dropped",
                             round, (unsigned long long)r->id, (unsigned long long)ev->version);
                assert_true(r->final);
                assert_int_equal(ev->version, x->seen);
                x->state = 2;
            } else {
                assert_int_equal(ev->kind, PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED);
                assert_int_equal(ev->version, x->seen + 1);
                x->seen = ev->version;
            }
        }
        pathd__v1__response__free_unpacked(r, NULL);
    }
}

/* Issue 29, finding 5: one connection drops scene "re" and makes it again,
 * round after round, while another sends Watches of "re" at the same
 * moment. A watch that began on the new scene (version 1; the old one was
 * at version 2) must never hear the old one's SCENE_DROPPED, which the
 * drop's job can bring back to the loop after the new scene is served and
 * watched; every event of a watch carries its WATCH_STARTED incarnation. */
static void test_recreated_scene_keeps_its_watches(void **state)
{
    pdi_daemon *d = *state;
    int a = pdi_raw_connect(d->port);
    int b = pdi_raw_connect(d->port);
    re_watch *w = calloc(R_ROUNDS * R_WATCHES, sizeof *w);
    assert_non_null(w);
    uint64_t id = 1;
    send_create_open(a, id, "re");
    expect_ok(a, id++);
    send_update(a, id, "re", 1, 1, 1, PATHD__V1__UPDATE_OP__UPDATE_BLOCK, 0);
    expect_ok(a, id++);
    size_t n = 0;
    for (int round = 0; round < R_ROUNDS; round++) {
        uint64_t drop = id++, create = id++, update = id++;
        send_drop(a, drop, "re");
        send_create_open(a, create, "re");
        /* Pings ahead of the Watches keep the loop in b's read callback
         * while the workers drop and create: the Watches then find the new
         * scene served before the loop has collected the drop's job. */
        for (int k = 0; k < R_PINGS; k++) {
            pdi_small_msg m;
            pdi_ping_init(&m, 2000000 + (uint64_t)k, 0);
            assert_int_equal(pdi_raw_send_request(b, &m.req), 0);
        }
        for (int k = 0; k < R_WATCHES; k++) {
            const char *const names[] = { "re" };
            w[n].round = round;
            send_watch(b, ++n, names, 1);
        }
        expect_ok(a, drop);
        expect_ok(a, create);
        /* The new scene at version 2, as the old one was. */
        send_update(a, update, "re", 1, 1, 1, PATHD__V1__UPDATE_OP__UPDATE_BLOCK, 0);
        expect_ok(a, update);
        drain_watches(b, 1000000 + (uint64_t)round, w, n, round);
    }
    size_t on_new = 0;
    for (size_t i = 0; i < n; i++)
        on_new += w[i].started == 1;
    print_message("%zu of %zu watches began on a scene just made again\n", on_new, n);
    free(w);
    close(a);
    close(b);
    pdi_assert_daemon_serves(d);
}

/* ---- the C client and pathctl ------------------------------------------ */

/* pathctl with args; its stdout (heap) in *out; returns its exit status. */
static int pathctl(const pdi_daemon *d, const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --server %s %s", pdi_pathctl_binary(), d->addr, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char *buf = calloc(1, 65536);
    assert_non_null(buf);
    size_t len = fread(buf, 1, 65535, p);
    buf[len] = '\0';
    int st = pclose(p);
    *out = buf;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static cJSON *json_line(const char *line)
{
    cJSON *o = cJSON_Parse(line);
    if (!o)
        fail_msg("not JSON: %s", line);
    return o;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static void block_cell(pdc_conn *c, const char *scene, int32_t x, int32_t y, int block, uint64_t want_version)
{
    pdc_update_req up = { .scene = scene, .op = block ? PDC_UPDATE_BLOCK : PDC_UPDATE_PASS };
    pdc_xy cell = { x, y };
    up.cells = &cell;
    up.cell_count = 1;
    pdc_update_result ur;
    assert_int_equal(pdc_update_cells(c, &up, &ur), PDC_OK);
    assert_int_equal(ur.version, want_version);
}

static void test_clients(void **state)
{
    pdi_daemon *d = *state;
    pdc_conn *c = pdi_connect(d);
    create_open_scene(c, "cw", 16);

    /* The library: a watch, events queued while other calls run, unwatch. */
    pdc_conn *w = pdi_connect(d);
    const char *const names[] = { "cw" };
    uint64_t id;
    assert_int_equal(pdc_watch(w, names, 1, &id), PDC_OK);
    const char *const unknown[] = { "nowhere" };
    uint64_t bad;
    assert_int_equal(pdc_watch(w, unknown, 1, &bad), PDC_UNKNOWN_SCENE);
    assert_non_null(strstr(pdc_last_error(w), "nowhere"));
    block_cell(c, "cw", 3, 4, 1, 2);
    pdc_scene_details info;
    assert_int_equal(pdc_scene_info(w, "cw", &info), PDC_OK); /* a blocking call on the watching connection */
    pdc_scene_details_free(&info);
    pdc_watch_event e;
    assert_int_equal(pdc_watch_next(w, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_STARTED);
    assert_int_equal(e.version, 1);
    assert_int_equal(e.watch_id, id);
    pdc_watch_event_free(&e);
    assert_int_equal(pdc_watch_next(w, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_UPDATED);
    assert_string_equal(e.scene, "cw");
    assert_int_equal(e.version, 2);
    assert_true(e.has_changed);
    assert_int_equal(e.changed_min.x, 3);
    assert_int_equal(e.changed_max.y, 4);
    assert_int_equal(e.op_count, 1);
    assert_int_equal(e.ops[0].op, PDC_UPDATE_BLOCK);
    pdc_watch_event_free(&e);
    assert_int_equal(pdc_watch_next(w, 50, &e), PDC_ERR_TIMEOUT);
    assert_int_equal(pdc_unwatch(w, id), PDC_OK);
    assert_int_equal(pdc_watch_next(w, PDI_CALL_TIMEOUT_MS, &e), PDC_OK);
    assert_int_equal(e.kind, PDC_WATCH_ENDED);
    assert_true(e.final);
    pdc_watch_event_free(&e);
    assert_int_equal(pdc_watch_next(w, 50, &e), PDC_ERR_IDLE);
    pdc_close(w);

    /* min_version through the library: stale, with the version now. */
    pdc_path_req pr = { .scene = "cw", .start = pdc_cell(0, 0), .goal = pdc_cell(10, 10), .min_version = 4 };
    pdc_path_result path;
    assert_int_equal(pdc_find_path(c, &pr, &path), PDC_STALE_VERSION);
    assert_int_equal(path.scene_version, 2);
    pdc_path_result_free(&path);
    pdc_query q = { .kind = PDC_Q_REACHABLE, .scene = "cw", .a = pdc_cell(0, 0), .b = pdc_cell(9, 9),
                    .min_version = 4 };
    pdc_query_result qr;
    assert_int_equal(pdc_query_run(c, &q, &qr), PDC_STALE_VERSION);
    assert_int_equal(qr.version, 2);
    assert_int_equal(pdc_scene_info_at(c, "cw", 4, &info), PDC_STALE_VERSION);
    assert_int_equal(info.version, 2);
    assert_int_equal(pdc_stale_version(c), 2);

    /* pathctl watch: its first line (the watch began) comes before any
     * update, then one line per change; --count 2 ends it. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' --server %s watch cw --count 2 --json", pdi_pathctl_binary(), d->addr);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    char line[4096];
    assert_non_null(fgets(line, sizeof line, p));
    cJSON *o = json_line(line);
    assert_string_equal(str(o, "kind"), "started");
    assert_int_equal(num(o, "version"), 2);
    cJSON_Delete(o);
    block_cell(c, "cw", 3, 4, 0, 3);
    block_cell(c, "cw", 7, 1, 1, 4);
    for (int k = 0; k < 2; k++) {
        assert_non_null(fgets(line, sizeof line, p));
        o = json_line(line);
        assert_string_equal(str(o, "status"), "OK");
        assert_string_equal(str(o, "kind"), "updated");
        assert_string_equal(str(o, "scene"), "cw");
        assert_int_equal(num(o, "version"), 3 + k);
        const cJSON *ch = cJSON_GetObjectItemCaseSensitive(o, "changed");
        assert_int_equal(cJSON_GetArraySize(ch), 4);
        assert_int_equal(cJSON_GetArrayItem(ch, 0)->valueint, k ? 7 : 3);
        assert_int_equal(cJSON_GetArrayItem(ch, 1)->valueint, k ? 1 : 4);
        const cJSON *op = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(o, "ops"), 0);
        assert_string_equal(str(op, "set"), k ? "blocked" : "passable");
        cJSON_Delete(o);
    }
    int st = pclose(p);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* pathctl --min-version: STALE_VERSION with the version now, then OK. */
    static const struct {
        const char *args;
        int exit;
        const char *status;
    } runs[] = {
        { "info cw --min-version 9 --json", 1, "STALE_VERSION" },
        { "path --scene cw --from 0,0 --to 9,9 --min-version 9 --json", 1, "STALE_VERSION" },
        { "raycast --scene cw --from 0,0 --to 9,9 --min-version 9 --json", 1, "STALE_VERSION" },
        { "path --scene cw --from 0,0 --to 9,9 --min-version 4 --json", 0, "OK" },
    };
    char *out;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        assert_int_equal(pathctl(d, runs[i].args, &out), runs[i].exit);
        o = json_line(out);
        assert_string_equal(str(o, "status"), runs[i].status);
        assert_int_equal(num(o, "version"), 4);
        cJSON_Delete(o);
        free(out);
    }
    assert_int_equal(pathctl(d, "watch nowhere", &out), 1);
    free(out);
    assert_int_equal(pathctl(d, "watch", &out), 2);
    free(out);
    assert_int_equal(pathctl(d, "update --scene cw --cells 1,1 --set blocked --min-version 2", &out), 2);
    free(out);
    pdc_close(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_version_in_order, setup_metrics, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_slow_watcher_dropped, setup_small_buffer, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_min_version, setup_metrics, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_bad_watch_requests, setup_small_caps, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_watches_per_connection_cap, setup_per_conn_cap, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_protocol_error_ends_watches, setup_small_caps, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_reload_events, setup_ext, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_recreated_scene_keeps_its_watches, setup_metrics, pdi_fixture_stop),
        cmocka_unit_test_setup_teardown(test_clients, setup_metrics, pdi_fixture_stop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
