/*
 * pd_replica.c - the replica's tail of the shared change log (see
 * pd_replica.h). One hiredis async connection on the server's loop runs
 * this cycle, one command at a time:
 *
 *   connect -> (after a reconnect: XREVRANGE of each scene's stream, and
 *   of each scene with a mark of this pathd's own, to find a log that went
 *   back) -> SMEMBERS PREFIX:scenes (new scenes start
 *   at their stream's first entry; scenes replay read start after the last
 *   entry it read) -> XREAD COUNT n [BLOCK b] STREAMS ... -> the entries go
 *   to libuv's threadpool, where pd_store_apply_logged_entry applies them
 *   in the log's global order -> again.
 *
 * SMEMBERS goes only when a new scene may be there (pd__list_due): every
 * round trip costs Redis, this loop and the threadpool a wakeup each, and
 * under 1,000 updates/s the tail turns ~150 times a second on a 2-core
 * machine the searches share (issue 32's target 3). A new scene shows as
 * a gap in the global sequence (every append takes the next one, and the
 * tail reads every stream it knows), or it is found after an empty read,
 * with a query parked, or PD_REPLICA_LIST_MS after the last look.
 *
 * Catching up (issue 32: 100,000 updates in a second) the read and the
 * apply overlap: while one batch is applied on the threadpool, the next
 * XREAD (COUNT PD_REPLICA_READ_COUNT_BEHIND, no BLOCK) is answered and
 * decoded on the loop into the other of two batch buffers, which are kept
 * from read to read. The replies are built in an arena (below): hiredis's
 * own reader mallocs and frees every element of them. At most one batch
 * is applied and one held, so records are still applied strictly in order.
 *
 * Until one XREAD without BLOCK finds nothing new, the replica has not
 * caught up with the log as it was at start and Ping answers NOT_SERVING.
 * hiredis 0.14 has no timeout for async commands: a uv timer (the
 * watchdog) frees a connection whose answer is late, and the same timer
 * waits out the jittered reconnect backoff. A replica's own appends come
 * back through the tail: pd_store_apply_logged_entry finds it has them
 * (HAD) - by the version, or for a name this pathd dropped or made anew
 * since by the entry's id (pd_redis_log_own_past).
 *
 * Applying is the store's, on a threadpool thread (an update builds a
 * version, and may wait for the scene's writer lock that a worker holds
 * through a Redis round trip).
 */
#include "pd_replica.h"

#include <hiredis/adapters/libuv.h>
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_journal.h"
#include "pd_log.h"
#include "pd_server_internal.h"
#include "pd_redis_journal.h"
#include "pd_redis_snapshot.h"
#include "pd_store.h"
#include "pd_watch.h"
#include "pd_world.h"

/* One scene's stream as the tail reads it. */
typedef struct pd__rscene {
    char name[PD_CONF_MAX_NAME];
    char key[PD_CONF_MAX_NAME + 80];
    char last_id[64];             /* the last entry read ("0-0": none yet) */
    uint64_t log_version;         /* the largest version read from its stream */
    int refused;                  /* the log went back: not served (loop) */
    int rebuild;                  /* refused, and to be rebuilt from the log */
    char why[400];
} pd__rscene;

/* One entry read, to apply. */
typedef struct pd__item {
    uint64_t g;                   /* the global sequence: the order to apply in */
    size_t scene;                 /* index into the replica's scenes */
    int skip;                     /* its scene is refused: not applied */
    pd_journal_record rec;
    pd_store_logged outcome;
    pd_scene_update_result res;   /* an update applied: what its watchers hear */
    uint64_t incarnation;         /* a drop's scene, an instance's template, a reset's
                                     scene (for their watch events) */
    char why[160];
    char id[48];                  /* its stream entry id (for the local journal) */
    char def[PD_REDIS_SNAP_DEF_HEX]; /* a reload's RESET: its definition's hash (field d; "" none) */
    int other_def;                /* a RESET applied from this pathd's config, which defines
                                     the scene otherwise than the config it was made with */
} pd__item;

/* The entries of one XREAD, decoded. A replica holds two, kept from one
 * read to the next (their pages stay mapped): one applied on the
 * threadpool while the next read fills the other. */
typedef struct pd__batch {
    pd__item *items;
    size_t n, cap;
    uint64_t max_g;               /* the largest global sequence in it */
    int full;                     /* a stream gave the whole COUNT: read on at once */
} pd__batch;

/* A query parked until the tail catches up with its min_version. */
typedef struct pd__parked {
    struct pd__parked *next;
    uint64_t conn_id, arrival_ns, deadline_ns;
    size_t len;
    uint8_t frame[];
} pd__parked;

typedef struct pd__arena pd__arena;

/* A watchdog that fires this much later than it was due found the loop
 * stopped, not Redis silent. */
#define PD__STALL_MS 1000u

typedef enum pd__rphase {
    PD__R_IDLE,                   /* waiting for the watchdog (backoff, or a pause) */
    PD__R_CONNECTING,
    PD__R_CHECKING,               /* XREVRANGEs after a reconnect */
    PD__R_LISTING,
    PD__R_READING,
    PD__R_HELD,                   /* a batch read waits for the one applied: nothing sent */
    PD__R_REBUILDING,             /* a refused scene rebuilt on the threadpool: nothing sent */
} pd__rphase;

struct pd_replica {
    pd_server *s;
    pd__replica_redispatch_fn redispatch;
    pd_redis_log *rl;
    char host[PD_CONF_MAX_LOG_HOST];
    uint16_t port;
    uint32_t timeout_ms;
    char scenes_key[PD_CONF_MAX_LOG_PREFIX + 16];
    char seq_key[PD_CONF_MAX_LOG_PREFIX + 16];
    uint64_t start_seq;           /* PREFIX:seq when the tail first connected: caught up
                                     once every record up to it is applied */
    int start_seq_known;
    uint64_t applied_g;           /* the largest global sequence applied */

    redisAsyncContext *ac;        /* NULL: not connected */
    pd__arena *arena;             /* its reader's replies (freed with the replica) */
    int ever_connected;
    uv_timer_t watchdog;          /* a late answer, or the next connect */
    uint64_t armed_ms, due_ms;    /* its wait beyond log.timeout_ms, and when it is due
                                     (the loop's clock) */
    uv_timer_t park_timer;
    int handles;                  /* of the two above, not yet closed */
    int closing;
    pd__rphase phase;
    uint32_t backoff_ms;
    unsigned rand_state;
    size_t checks_left;           /* XREVRANGE answers still to come */
    pd_scene **checked;           /* the scenes served when they were sent (retained) */
    size_t n_checked;
    pd_redis_own_mark *marked;    /* this pathd's own marks when they were sent
                                     (pd_redis_log_own_check), checked after them */
    size_t n_marked;

    pd__rscene *scenes;
    size_t n_scenes, cap_scenes;
    atomic_int serving;

    pd_journal_replayer *rp;      /* used by the apply work only */
    uv_work_t work;
    pd__batch bufs[2];
    pd__batch *applying;          /* on the threadpool, or NULL */
    pd__batch *held;              /* read while another was applied, or NULL */
    int read_on;                  /* the last read was full, or the replica is behind:
                                     the next XREAD goes at once, without BLOCK */
    int drained;                  /* the last XREAD found nothing new */

    pd__parked *parked;
    size_t n_parked;

    /* When SMEMBERS goes (pd__list_due): */
    int list_due;                 /* a new scene may be there: look before the next read */
    uint64_t listed_ms;           /* the loop's clock at the last look */
    uint64_t seen_g;              /* the largest global sequence read (0: none yet) */

    /* Rebuilding a refused scene (pd_redis_snap_rebuild), one at a time,
     * never beside an apply: the same work request and replayer. */
    pd_redis_snap *snap;          /* fetches snapshots over the log's connection */
    char journal_dir[PD_CONF_MAX_DATA_DIR + 16]; /* data_dir's redis-cache: the local journal, or "" */
    int rebuilding;
    size_t rb_scene;
    char rb_name[PD_CONF_MAX_NAME]; /* its name, for the threadpool (r->scenes may grow) */
    int rb_rc;
    uint64_t rb_version, rb_inc_before, rb_ver_before, rb_inc_after;
    char rb_last[64], rb_err[256];
    uint64_t rebuild_after;       /* the loop's clock: a failed rebuild is tried again then */
    uint64_t rebuilds;

    uint64_t reconnects, connect_failures, applied, had, noops, gaps, behind, parked_total;
};

/* ---- helpers ------------------------------------------------------------------------ */

static size_t pd__scene_index(pd_replica *r, const char *name)
{
    for (size_t i = 0; i < r->n_scenes; i++)
        if (strcmp(r->scenes[i].name, name) == 0)
            return i;
    return SIZE_MAX;
}

static size_t pd__scene_by_key(pd_replica *r, const char *key, size_t len)
{
    for (size_t i = 0; i < r->n_scenes; i++)
        if (strlen(r->scenes[i].key) == len && memcmp(r->scenes[i].key, key, len) == 0)
            return i;
    return SIZE_MAX;
}

/* A scene the tail reads from now on: after replay's position, or from
 * its stream's start when replay did not see it. */
static int pd__track(pd_replica *r, const char *name)
{
    if (r->n_scenes == r->cap_scenes) {
        size_t cap = r->cap_scenes ? 2 * r->cap_scenes : 16;
        pd__rscene *v = realloc(r->scenes, cap * sizeof *v);
        if (!v)
            return -1;
        r->scenes = v;
        r->cap_scenes = cap;
    }
    pd__rscene *sc = &r->scenes[r->n_scenes];
    memset(sc, 0, sizeof *sc);
    snprintf(sc->name, sizeof sc->name, "%s", name);
    pd_redis_log_stream_key(r->rl, name, sc->key, sizeof sc->key);
    if (!pd_redis_log_position(r->rl, name, sc->last_id, sizeof sc->last_id))
        snprintf(sc->last_id, sizeof sc->last_id, "0-0");
    r->n_scenes++;
    return 0;
}

static void pd__cycle(pd_replica *r);
static void pd__list(pd_replica *r);
static void pd__end_checks(pd_replica *r);
static void pd__wake(uv_timer_t *t);
static void pd__free_replica(pd_replica *r);
static void pd__wake_parked(pd_replica *r, int expired_only);
static void pd__arm(pd_replica *r, uint64_t ms);
static void pd__park_tick(uv_timer_t *t);

/* ---- replies in an arena ------------------------------------------------------------------ */

/* An XREAD answer of thousands of entries is some ten redisReply objects
 * an entry; hiredis's own reader mallocs each and frees each after the
 * callback, and that was most of the loop thread's time catching up. The
 * tail's reader builds its replies here instead: bump allocation from
 * chunks kept by the replica, all let go at once when hiredis frees the
 * reply (it frees only whole replies, one at a time, after their callback
 * or when the reader goes). The objects are hiredis's own redisReply, so
 * the callbacks read them as ever. */
#define PD__ARENA_CHUNK (256u * 1024u)
#define PD__ARENA_KEEP (8u * 1024u * 1024u) /* bytes kept past a reply's end */

typedef struct pd__chunk {
    struct pd__chunk *next;
    size_t used, cap;
    max_align_t data[];
} pd__chunk;

struct pd__arena {
    pd__chunk *first, *cur;
};

static void *pd__arena_alloc(pd__arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    while (a->cur && a->cur->used + n > a->cur->cap)
        a->cur = a->cur->next;
    if (!a->cur) {
        size_t cap = n > PD__ARENA_CHUNK ? n : PD__ARENA_CHUNK;
        pd__chunk *c = malloc(sizeof *c + cap);
        if (!c)
            return NULL;
        c->used = 0;
        c->cap = cap;
        /* At the end of the list: chunks kept are tried in order. */
        c->next = NULL;
        pd__chunk **tail = &a->first;
        while (*tail)
            tail = &(*tail)->next;
        *tail = c;
        a->cur = c;
    }
    void *p = (char *)a->cur->data + a->cur->used;
    a->cur->used += n;
    return p;
}

/* Every reply let go; past PD__ARENA_KEEP bytes of chunks, the rest are
 * freed (one huge answer does not pin its memory). */
static void pd__arena_reset(pd__arena *a)
{
    size_t kept = 0;
    for (pd__chunk **c = &a->first; *c;) {
        if (kept >= PD__ARENA_KEEP) {
            pd__chunk *gone = *c;
            *c = gone->next;
            free(gone);
            continue;
        }
        kept += (*c)->cap;
        (*c)->used = 0;
        c = &(*c)->next;
    }
    a->cur = a->first;
}

static void pd__arena_free(pd__arena *a)
{
    if (!a)
        return;
    while (a->first) {
        pd__chunk *c = a->first;
        a->first = c->next;
        free(c);
    }
    free(a);
}

/* A new object of the task's reply, linked into its parent array. A whole
 * reply's object has its arena in front of it: hiredis's freeObject gets
 * the reply alone. */
static redisReply *pd__arena_reply(const redisReadTask *task, int type)
{
    size_t front = task->parent ? 0 : sizeof(max_align_t);
    char *p = pd__arena_alloc(task->privdata, front + sizeof(redisReply));
    if (!p)
        return NULL;
    if (front)
        *(pd__arena **)p = task->privdata;
    redisReply *x = (redisReply *)(p + front);
    memset(x, 0, sizeof *x);
    x->type = type;
    if (task->parent)
        ((redisReply *)task->parent->obj)->element[task->idx] = x;
    return x;
}

static void *pd__arena_string(const redisReadTask *task, char *str, size_t len)
{
    redisReply *x = pd__arena_reply(task, task->type);
    char *copy = x ? pd__arena_alloc(task->privdata, len + 1) : NULL;
    if (!copy)
        return NULL;
    memcpy(copy, str, len);
    copy[len] = '\0';
    x->str = copy;
    x->len = len;
    return x;
}

static void *pd__arena_array(const redisReadTask *task, int elements)
{
    redisReply *x = pd__arena_reply(task, REDIS_REPLY_ARRAY);
    if (!x)
        return NULL;
    if (elements > 0 && !(x->element = pd__arena_alloc(task->privdata, (size_t)elements * sizeof *x->element)))
        return NULL;
    x->elements = elements > 0 ? (size_t)elements : 0;
    return x;
}

static void *pd__arena_integer(const redisReadTask *task, long long value)
{
    redisReply *x = pd__arena_reply(task, REDIS_REPLY_INTEGER);
    if (x)
        x->integer = value;
    return x;
}

static void *pd__arena_nil(const redisReadTask *task)
{
    return pd__arena_reply(task, REDIS_REPLY_NIL);
}

/* hiredis frees whole replies only, one at a time (the next one is not
 * begun before): the arena starts over. */
static void pd__arena_release(void *reply)
{
    pd__arena_reset(*(pd__arena **)((char *)reply - sizeof(max_align_t)));
}

static redisReplyObjectFunctions pd__arena_fns = {
    pd__arena_string, pd__arena_array, pd__arena_integer, pd__arena_nil, pd__arena_release,
};

/* ---- the connection ------------------------------------------------------------------ */

/* Drops the connection (its pending callbacks see r->ac changed) and
 * tries again after a jittered, doubling wait. */
static void pd__drop(pd_replica *r, const char *why)
{
    if (r->checked || r->marked)
        pd__end_checks(r);
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    if (ac)
        redisAsyncFree(ac);
    if (r->closing)
        return;
    uint32_t d = r->backoff_ms ? r->backoff_ms * 2 : PD_REDIS_BACKOFF_MIN_MS;
    if (d > PD_REDIS_BACKOFF_MAX_MS)
        d = PD_REDIS_BACKOFF_MAX_MS;
    r->backoff_ms = d;
    uint32_t wait = d / 2 + (uint32_t)rand_r(&r->rand_state) % (d / 2 + 1);
    if (why)
        pd_log_warn("replica: Redis %s:%u: %s; reading again in %" PRIu32 " ms", r->host, (unsigned)r->port, why,
                    wait);
    r->connect_failures++;
    r->phase = PD__R_IDLE;
    uv_timer_stop(&r->watchdog);
    uv_timer_start(&r->watchdog, pd__wake, wait, 0);
}

/* The watchdog: in IDLE the wait is over (connect); otherwise an answer
 * is late: the connection goes. */
static void pd__wake(uv_timer_t *t)
{
    pd_replica *r = t->data;
    if (r->closing)
        return;
    if (r->phase == PD__R_IDLE) {
        /* A batch or a rebuild on the threadpool stays in hand: its end
         * connects again. */
        if (!r->applying && !r->rebuilding)
            pd__cycle(r);
        return;
    }
    if (r->phase == PD__R_HELD || r->phase == PD__R_REBUILDING)
        return;
    /* Fired long after it was due: the loop itself stood still (the
     * process was stopped, SIGSTOP), and the answer may be waiting in the
     * socket, which the loop polls after its timers. It gets its time
     * again rather than the connection going (a reconnect, its checks and
     * a read again). */
    if (uv_now(r->s->loop) > r->due_ms + PD__STALL_MS) {
        pd__arm(r, r->armed_ms);
        return;
    }
    pd__drop(r, "no answer within the watchdog");
}

static void pd__arm(pd_replica *r, uint64_t ms)
{
    r->armed_ms = ms;
    r->due_ms = uv_now(r->s->loop) + ms + r->timeout_ms;
    uv_timer_stop(&r->watchdog);
    uv_timer_start(&r->watchdog, pd__wake, ms + r->timeout_ms, 0);
}

/* Sends one command (C strings) whose answer fn takes in `phase`, the
 * watchdog waiting extra_ms (a BLOCK's time) beyond log.timeout_ms for it.
 * 0, or -1: it could not be sent, and the connection is dropped. */
static int pd__send(pd_replica *r, pd__rphase phase, uint64_t extra_ms, redisCallbackFn *fn, void *priv, int argc,
                    const char **argv)
{
    size_t small[8] = { 0 };
    size_t *argvlen = argc <= 8 ? small : malloc((size_t)argc * sizeof *argvlen);
    int rc = REDIS_ERR;
    if (argvlen) {
        for (int i = 0; i < argc; i++)
            argvlen[i] = strlen(argv[i]);
        rc = redisAsyncCommandArgv(r->ac, fn, priv, argc, argv, argvlen);
        if (argvlen != small)
            free(argvlen);
    }
    if (rc != REDIS_OK) {
        char why[64];
        snprintf(why, sizeof why, "cannot send %s", argv[0]);
        pd__drop(r, why);
        return -1;
    }
    r->phase = phase;
    pd__arm(r, extra_ms);
    return 0;
}

static void pd__on_disconnect(const redisAsyncContext *ac, int status)
{
    pd_replica *r = ac->data;
    (void)status;
    if (r && r->ac == ac) {
        r->ac = NULL; /* hiredis frees it after this callback */
        pd__drop(r, "the connection closed");
    }
}

static void pd__check_reply(redisAsyncContext *ac, void *reply, void *priv);
static void pd__end_checks(pd_replica *r);
static void pd__begin_reads(pd_replica *r);
static void pd__refuse(pd_replica *r, size_t i, int rebuild, const char *fmt, const char *a, const char *b);

/* Caught up: every record the log held when the tail started is applied
 * (a log that goes on growing does not keep a replica NOT_SERVING). */
static void pd__maybe_serving(pd_replica *r, int nothing_new)
{
    if (atomic_load(&r->serving) || !r->start_seq_known || (!nothing_new && r->applied_g < r->start_seq))
        return;
    atomic_store(&r->serving, 1);
    pd_log_info("replica: caught up with the log (%zu streams, its global sequence at start %" PRIu64 ")",
                r->n_scenes, r->start_seq);
}

static void pd__seq_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    pd_replica *r = ac->data;
    (void)priv;
    if (!r || r->ac != ac || r->phase != PD__R_LISTING)
        return;
    const redisReply *x = reply;
    if (!x || (x->type != REDIS_REPLY_STRING && x->type != REDIS_REPLY_NIL)) {
        pd__drop(r, x && x->type == REDIS_REPLY_ERROR ? x->str : "GET of the sequence failed");
        return;
    }
    r->start_seq = x->type == REDIS_REPLY_STRING ? strtoull(x->str, NULL, 10) : 0;
    r->start_seq_known = 1;
    pd__list(r);
}

/* After a connect (and its checks): the sequence the log is at, the first
 * time, then the scenes and their streams. */
static void pd__begin_reads(pd_replica *r)
{
    r->list_due = 1;
    if (!r->start_seq_known) {
        const char *argv[] = { "GET", r->seq_key };
        (void)pd__send(r, PD__R_LISTING, 0, pd__seq_reply, NULL, 2, argv);
        return;
    }
    pd__list(r);
}

static void pd__on_connect(const redisAsyncContext *ac, int status)
{
    pd_replica *r = ac->data;
    if (!r || r->ac != ac)
        return;
    if (status != REDIS_OK) {
        r->ac = NULL; /* hiredis frees it after this callback */
        pd__drop(r, ac->errstr[0] ? ac->errstr : "cannot connect");
        return;
    }
    r->backoff_ms = 0;
    if (r->ever_connected)
        r->reconnects++;
    int again = r->ever_connected;
    r->ever_connected = 1;
    /* After a reconnect the log may be another one (a failover, a
     * restore): each scene served must still be in its stream at the
     * version served. */
    r->checks_left = 0;
    if (again) {
        r->n_checked = pd_registry_list(r->s->registry, &r->checked);
        for (size_t i = 0; i < r->n_checked; i++) {
            char key[sizeof r->scenes[0].key];
            pd_redis_log_stream_key(r->rl, r->checked[i]->name, key, sizeof key);
            const char *argv[] = { "XREVRANGE", key, "+", "-", "COUNT", "1" };
            if (pd__send(r, PD__R_CHECKING, 0, pd__check_reply, (void *)(uintptr_t)i, 6, argv) != 0)
                return;
            r->checks_left++;
        }
        /* This pathd's marks (pd_redis_log_own_past) against their
         * streams: a failover that lost the marked entry would have the
         * mark skip another replica's entries that took its ids. */
        size_t n = pd_redis_log_own_marked(r->rl, NULL, 0);
        r->marked = n ? calloc(n, sizeof *r->marked) : NULL;
        r->n_marked = r->marked ? pd_redis_log_own_marked(r->rl, r->marked, n) : 0;
        if (r->n_marked > n)
            r->n_marked = n; /* one made since: its entry is on the new log */
        for (size_t j = 0; j < r->n_marked; j++) {
            char key[sizeof r->scenes[0].key];
            pd_redis_log_stream_key(r->rl, r->marked[j].scene, key, sizeof key);
            const char *argv[] = { "XREVRANGE", key, "+", "-", "COUNT", "1" };
            if (pd__send(r, PD__R_CHECKING, 0, pd__check_reply, (void *)(uintptr_t)(r->n_checked + j), 6, argv) !=
                0)
                return;
            r->checks_left++;
        }
        if (r->checks_left)
            return;
        pd__end_checks(r);
    }
    pd__begin_reads(r);
}

static void pd__connect(pd_replica *r)
{
    redisAsyncContext *ac = redisAsyncConnect(r->host, r->port);
    if (!ac) {
        pd__drop(r, "out of memory");
        return;
    }
    if (ac->err) {
        char why[160];
        snprintf(why, sizeof why, "%s", ac->errstr);
        redisAsyncFree(ac);
        pd__drop(r, why);
        return;
    }
    ac->data = r;
    ac->c.reader->fn = &pd__arena_fns;
    ac->c.reader->privdata = r->arena;
    if (redisLibuvAttach(ac, r->s->loop) != REDIS_OK) {
        redisAsyncFree(ac);
        pd__drop(r, "cannot attach to the loop");
        return;
    }
    redisAsyncSetConnectCallback(ac, pd__on_connect);
    redisAsyncSetDisconnectCallback(ac, pd__on_disconnect);
    r->ac = ac;
    r->phase = PD__R_CONNECTING;
    pd__arm(r, 0);
}

/* ---- a log that went back --------------------------------------------------------------- */

/* Scene i is not served from now on; with `rebuild` it is rebuilt from the
 * log (pd__list starts it), and found again at each reconnect's checks. */
static void pd__refuse(pd_replica *r, size_t i, int rebuild, const char *fmt, const char *a, const char *b)
{
    pd__rscene *sc = &r->scenes[i];
    sc->rebuild |= rebuild;
    /* Changes already past the request path's refusal (queued in the
     * scene's lane) are refused by the log until the rebuild is done: the
     * rebuild runs without the change lock. Out of memory, they are not
     * (as before this mark): said. */
    if (pd_redis_log_set_refused(r->rl, sc->name, 1) != 0)
        pd_log_error("replica: scene '%s': out of memory marking it refused in the log", sc->name);
    /* This pathd's mark of the scene (pd_redis_log_own_past) names an
     * entry of the history left behind: the rebuilt stream's are not
     * skipped by it; the incarnation its appends name goes with it (the
     * rebuild sets it again). Forgotten even when the scene was refused
     * already (a mark made since is of the history left behind too), and
     * after the refusal's mark: an append in flight reads both under one
     * lock, and one that found neither would be taken, on the history
     * left behind, by a log with no live record of the scene
     * (pd_redis_log.c's pd__queue_append). */
    pd_redis_log_own_forget(r->rl, sc->name);
    if (sc->refused)
        return;
    sc->refused = 1;
    snprintf(sc->why, sizeof sc->why, fmt, a, b);
    pd_log_error("replica: scene '%s': %s", sc->name, sc->why);
    if (r->journal_dir[0])
        pd_redis_journal_discard(r->journal_dir, sc->name); /* of the history left behind */
}

/* Whether stream entry id a ("INC-V") comes before b; ids that are not
 * INC-V never do. */
static int pd__id_before(const char *a, const char *b)
{
    unsigned long long ai, av, bi, bv;
    if (sscanf(a, "%llu-%llu", &ai, &av) != 2 || sscanf(b, "%llu-%llu", &bi, &bv) != 2)
        return 0;
    return ai < bi || (ai == bi && av < bv);
}

/* One served scene against its stream's last entry: a scene made here or
 * changed through the log (a run-time scene, or one past version 1) whose
 * version the stream does not reach any more went back with the log, and
 * so did one whose stream ends before the last entry the tail read of it
 * (a stream's end never goes back otherwise: trims keep it) - whatever
 * its versions say, which restart at each incarnation. A stream that
 * ends with a drop the tail has not read is another replica's drop,
 * which the tail will apply; one the tail read past is a log that went
 * back to it (the tail would read nothing after it until the new
 * history's ids passed the ones it read, then apply them onto the older
 * scene). */
static void pd__check_one(pd_replica *r, const pd_scene *s, const redisReply *x)
{
    uint64_t logv = 0;
    char last[64] = "0-0";
    int drop = 0;
    if (x->elements && x->element[0]->type == REDIS_REPLY_ARRAY && x->element[0]->elements == 2 &&
        x->element[0]->element[0]->type == REDIS_REPLY_STRING) {
        const redisReply *e = x->element[0];
        snprintf(last, sizeof last, "%s", e->element[0]->str);
        drop = strlen(last) > 2 && strcmp(last + strlen(last) - 2, "-0") == 0;
        const redisReply *f = e->element[1];
        for (size_t k = 0; !drop && f->type == REDIS_REPLY_ARRAY && k + 1 < f->elements; k += 2)
            if (f->element[k]->type == REDIS_REPLY_STRING && strcmp(f->element[k]->str, "v") == 0 &&
                f->element[k + 1]->type == REDIS_REPLY_STRING)
                logv = strtoull(f->element[k + 1]->str, NULL, 10);
    }
    size_t i = pd__scene_index(r, s->name);
    int read_past = i != SIZE_MAX && pd__id_before(last, r->scenes[i].last_id);
    if (!read_past && (drop || !(s->runtime || s->version > 1) || logv >= s->version))
        return;
    if (i == SIZE_MAX) {
        if (pd__track(r, s->name) != 0)
            return;
        i = r->n_scenes - 1;
    }
    char served[32];
    snprintf(served, sizeof served, "%" PRIu64, s->version);
    pd__refuse(r, i, 1,
               "the log went back (its stream ends at entry %s, this replica serves version %s: a Redis failover "
               "or restore); not served until the scene is rebuilt from the log (under way)",
               last, served);
}

/* One scene with a mark of this pathd's own against its stream's last
 * entry: a stream that ends before the mark lost the marked append (a
 * failover). The mark is forgotten (pd_redis_log_own_check), and a scene
 * served here is served from a history the log no longer has: refused and
 * rebuilt, as a log that went back. */
static void pd__check_mark(pd_replica *r, const pd_redis_own_mark *m, const redisReply *x)
{
    const char *name = m->scene;
    char last[64] = "";
    if (x->elements && x->element[0]->type == REDIS_REPLY_ARRAY && x->element[0]->elements == 2 &&
        x->element[0]->element[0]->type == REDIS_REPLY_STRING)
        snprintf(last, sizeof last, "%s", x->element[0]->element[0]->str);
    if (!pd_redis_log_own_check(r->rl, m, last))
        return;
    pd_scene *s = pd_registry_acquire(r->s->registry, name);
    int served = s != NULL;
    pd_scene_release(s);
    if (!served)
        return; /* dropped here: the tail's versions find what the log has (a GAP) */
    size_t i = pd__scene_index(r, name);
    if (i == SIZE_MAX) {
        if (pd__track(r, name) != 0)
            return;
        i = r->n_scenes - 1;
    }
    pd__refuse(r, i, 1,
               "the log went back (its stream ends at entry %s, before this replica's own %s of it: a Redis "
               "failover or restore); not served until the scene is rebuilt from the log (under way)",
               last[0] ? last : "(none)", "new scene or drop");
}

/* ---- rebuilding a refused scene ------------------------------------------------------------ */

/* How long a failed rebuild waits before it is tried again. */
#define PD__REBUILD_RETRY_MS 1000u

static uint64_t pd__incarnation(pd_replica *r, const char *name);

static void pd__rebuild_work(uv_work_t *w)
{
    pd_replica *r = w->data;
    const char *name = r->rb_name;
    pd_scene *was = pd_registry_acquire(r->s->registry, name);
    r->rb_inc_before = was ? was->incarnation : 0;
    r->rb_ver_before = was ? was->version : 0;
    pd_scene_release(was);
    r->rb_rc = pd_redis_snap_rebuild(r->snap, r->rp, r->s->registry, name, r->rb_last, sizeof r->rb_last,
                                     &r->rb_version, r->rb_err, sizeof r->rb_err);
    r->rb_inc_after = pd__incarnation(r, name);
}

static void pd__rebuild_done(uv_work_t *w, int status);

/* Starts the rebuild of a refused scene when one is due and nothing is
 * applied: 1 when it went to the threadpool. */
static int pd__start_rebuild(pd_replica *r)
{
    if (r->applying || r->rebuilding || !r->snap || uv_now(r->s->loop) < r->rebuild_after)
        return 0;
    size_t i = 0;
    while (i < r->n_scenes && !(r->scenes[i].refused && r->scenes[i].rebuild))
        i++;
    if (i == r->n_scenes)
        return 0;
    r->rb_scene = i;
    snprintf(r->rb_name, sizeof r->rb_name, "%s", r->scenes[i].name);
    r->rebuilding = 1;
    r->work.data = r;
    if (uv_queue_work(r->s->loop, &r->work, pd__rebuild_work, pd__rebuild_done) != 0) {
        r->rebuilding = 0;
        return 0;
    }
    r->s->open_handles++;
    r->phase = PD__R_REBUILDING;
    uv_timer_stop(&r->watchdog);
    return 1;
}

/* The watch event of a scene rebuilt: its watchers' topic is of the
 * incarnation they watched; another one (a snapshot of another history,
 * or a drop) ends them, the same one is replaced (its version may have
 * gone down: the log's). */
static void pd__rebuilt_event(pd_replica *r, const char *name)
{
    if (!r->rb_inc_before || pd__watch_count(r->s) == 0)
        return;
    pd_watch_event ev;
    memset(&ev, 0, sizeof ev);
    snprintf(ev.scene, sizeof ev.scene, "%s", name);
    ev.incarnation = r->rb_inc_before;
    pd_scene *now = pd_registry_acquire(r->s->registry, name);
    if (now && r->rb_inc_after == r->rb_inc_before) {
        ev.kind = PD_WATCH_REPLACED;
        ev.version = now->version;
        ev.has_changed = 1;
        ev.changed_max = (pd_point){ now->grid->width - 1, now->grid->height - 1 };
    } else {
        ev.kind = PD_WATCH_DROPPED;
        ev.version = r->rb_ver_before;
    }
    pd_scene_release(now);
    pd__watch_publish(r->s, &ev);
}

static void pd__rebuild_done(uv_work_t *w, int status)
{
    pd_replica *r = w->data;
    (void)status;
    r->s->open_handles--;
    r->rebuilding = 0;
    if (r->closing) {
        r->phase = PD__R_IDLE;
        if (r->handles == 0)
            pd__free_replica(r);
        return;
    }
    pd__rscene *sc = &r->scenes[r->rb_scene];
    if (r->rb_rc == 0) {
        sc->refused = 0;
        sc->rebuild = 0;
        (void)pd_redis_log_set_refused(r->rl, sc->name, 0);
        sc->why[0] = '\0';
        snprintf(sc->last_id, sizeof sc->last_id, "%s", r->rb_last);
        sc->log_version = r->rb_version;
        r->rebuilds++;
        if (r->s->world_store)
            pd_world_store_mark_stale(r->s->world_store, r->s->registry);
        pd__rebuilt_event(r, sc->name);
        if (r->rb_version)
            pd_log_warn("replica: scene '%s' rebuilt from the log at version %" PRIu64 " (it served %" PRIu64
                        "); served again",
                        sc->name, r->rb_version, r->rb_ver_before);
        else
            pd_log_warn("replica: scene '%s': the log has no record of it; dropped", sc->name);
    } else {
        r->rebuild_after = uv_now(r->s->loop) + PD__REBUILD_RETRY_MS;
        pd_log_error("replica: scene '%s': rebuilding it from the log failed: %s; tried again in %u ms", sc->name,
                     r->rb_err, PD__REBUILD_RETRY_MS);
    }
    r->phase = PD__R_IDLE;
    pd__wake_parked(r, 0);
    if (!r->ac) {
        uv_timer_stop(&r->watchdog);
        uv_timer_start(&r->watchdog, pd__wake, r->backoff_ms ? r->backoff_ms / 2 : PD_REDIS_BACKOFF_MIN_MS, 0);
        return;
    }
    pd__list(r);
}

static void pd__end_checks(pd_replica *r)
{
    pd_registry_release_list(r->checked, r->n_checked);
    r->checked = NULL;
    r->n_checked = 0;
    free(r->marked);
    r->marked = NULL;
    r->n_marked = 0;
}

static void pd__check_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    pd_replica *r = ac->data;
    if (!r || r->ac != ac || r->phase != PD__R_CHECKING)
        return;
    const redisReply *x = reply;
    size_t i = (size_t)(uintptr_t)priv;
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        pd__end_checks(r);
        pd__drop(r, x && x->type == REDIS_REPLY_ERROR ? x->str : "XREVRANGE failed");
        return;
    }
    if (i < r->n_checked)
        pd__check_one(r, r->checked[i], x);
    else if (i - r->n_checked < r->n_marked)
        pd__check_mark(r, &r->marked[i - r->n_checked], x);
    if (--r->checks_left == 0) {
        pd__end_checks(r);
        pd__begin_reads(r);
    }
}

/* ---- reading ------------------------------------------------------------------------- */

static void pd__read_reply(redisAsyncContext *ac, void *reply, void *priv);

/* XREAD of every stream not refused, from the last entry read. Behind (the
 * last read was full, or the replica has not caught up) it asks for
 * PD_REPLICA_READ_COUNT_BEHIND entries and does not BLOCK; caught up, for
 * PD_REPLICA_READ_COUNT, blocking PD_REPLICA_BLOCK_MS. Called with a batch
 * buffer free (at most one applied and one held). */
static void pd__read(pd_replica *r)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_scenes; i++)
        n += !r->scenes[i].refused;
    if (n == 0) {
        /* Nothing to read yet: look for scenes again after a block's time. */
        r->list_due = 1;
        if (!r->applying)
            pd__maybe_serving(r, 1);
        r->phase = PD__R_IDLE;
        uv_timer_stop(&r->watchdog);
        uv_timer_start(&r->watchdog, pd__wake, PD_REPLICA_BLOCK_MS, 0);
        return;
    }
    int block = atomic_load(&r->serving) && !r->read_on;
    size_t argc = 4 + (block ? 2 : 0) + 2 * n;
    const char **argv = malloc(argc * sizeof *argv);
    if (!argv) {
        pd__drop(r, "out of memory");
        return;
    }
    char count[16], blockms[16];
    snprintf(count, sizeof count, "%u", block ? PD_REPLICA_READ_COUNT : PD_REPLICA_READ_COUNT_BEHIND);
    snprintf(blockms, sizeof blockms, "%u", PD_REPLICA_BLOCK_MS);
    size_t k = 0;
    argv[k++] = "XREAD";
    argv[k++] = "COUNT";
    argv[k++] = count;
    if (block) {
        argv[k++] = "BLOCK";
        argv[k++] = blockms;
    }
    argv[k++] = "STREAMS";
    for (size_t i = 0; i < r->n_scenes; i++)
        if (!r->scenes[i].refused)
            argv[k++] = r->scenes[i].key;
    for (size_t i = 0; i < r->n_scenes; i++)
        if (!r->scenes[i].refused)
            argv[k++] = r->scenes[i].last_id;
    (void)pd__send(r, PD__R_READING, block ? PD_REPLICA_BLOCK_MS : 0, pd__read_reply,
                   (void *)(uintptr_t)strtoul(count, NULL, 10), (int)argc, argv);
    free(argv);
}

static void pd__list_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    pd_replica *r = ac->data;
    (void)priv;
    if (!r || r->ac != ac || r->phase != PD__R_LISTING)
        return;
    const redisReply *x = reply;
    if (!x || x->type != REDIS_REPLY_ARRAY) {
        pd__drop(r, x && x->type == REDIS_REPLY_ERROR ? x->str : "SMEMBERS failed");
        return;
    }
    r->list_due = 0;
    r->listed_ms = uv_now(r->s->loop);
    for (size_t i = 0; i < x->elements; i++) {
        const redisReply *n = x->element[i];
        if (n->type != REDIS_REPLY_STRING || n->len == 0 || n->len >= PD_CONF_MAX_NAME || strlen(n->str) != n->len)
            continue;
        if (pd__scene_index(r, n->str) == SIZE_MAX && pd__track(r, n->str) != 0) {
            pd__drop(r, "out of memory");
            return;
        }
    }
    pd__read(r);
}

static int pd__start_rebuild(pd_replica *r);

/* Whether SMEMBERS goes before the next read (see the top): a scene the
 * tail does not read may have entries. */
static int pd__list_due(pd_replica *r)
{
    return r->list_due || r->n_parked > 0 || uv_now(r->s->loop) - r->listed_ms >= PD_REPLICA_LIST_MS;
}

/* The start of each caught-up round: a refused scene due for its rebuild
 * goes first, then SMEMBERS for new scenes when one may be there, then
 * the read. */
static void pd__list(pd_replica *r)
{
    if (pd__start_rebuild(r))
        return;
    if (!pd__list_due(r)) {
        pd__read(r);
        return;
    }
    const char *argv[] = { "SMEMBERS", r->scenes_key };
    (void)pd__send(r, PD__R_LISTING, 0, pd__list_reply, NULL, 2, argv);
}

static void pd__cycle(pd_replica *r)
{
    if (r->closing)
        return;
    if (!r->ac)
        pd__connect(r);
    else
        pd__list(r);
}

/* ---- applying --------------------------------------------------------------------------- */

/* The incarnation of the scene served as name, 0 when none is. */
static uint64_t pd__incarnation(pd_replica *r, const char *name)
{
    pd_scene *s = pd_registry_acquire(r->s->registry, name);
    uint64_t inc = s ? s->incarnation : 0;
    pd_scene_release(s);
    return inc;
}

static int pd__item_cmp(const void *a, const void *b)
{
    uint64_t x = ((const pd__item *)a)->g, y = ((const pd__item *)b)->g;
    return x < y ? -1 : x > y;
}

/* One batch in the log's global order (each stream's entries come in
 * order; several streams interleave). */
static void pd__apply_work(uv_work_t *w)
{
    pd_replica *r = w->data;
    pd__batch *b = r->applying;
    if (b->n > 1)
        qsort(b->items, b->n, sizeof *b->items, pd__item_cmp);
    for (size_t i = 0; i < b->n; i++) {
        pd__item *it = &b->items[i];
        if (it->skip)
            continue;
        /* The incarnation a watch event names: a drop's before it goes,
         * an instance's template's and a reset's after. */
        pd_journal_type t = it->rec.type;
        it->incarnation = t == PD_JOURNAL_DROP ? pd__incarnation(r, it->rec.scene) : 0;
        it->outcome = pd_store_apply_logged_entry(r->s->store, r->rp, &it->rec, it->id, &it->res, it->why,
                                                  sizeof it->why);
        if (r->journal_dir[0] && (it->outcome == PD_STORE_LOGGED_APPLIED || it->outcome == PD_STORE_LOGGED_HAD))
            (void)pd_redis_journal_append(r->journal_dir, it->rec.scene, it->id, it->g, &it->rec); /* a cache */
        if (it->outcome == PD_STORE_LOGGED_APPLIED && (t == PD_JOURNAL_INSTANCE || t == PD_JOURNAL_RESET))
            it->incarnation = pd__incarnation(r, t == PD_JOURNAL_INSTANCE ? it->rec.tmpl : it->rec.scene);
        if (it->outcome == PD_STORE_LOGGED_APPLIED && t == PD_JOURNAL_RESET && it->def[0]) {
            /* The config this RESET goes back to is this pathd's: another
             * replica's reload made it from another (a config push that
             * has not reached this one yet), said on the loop. */
            pd_scene *cfg = pd_journal_replayer_config(r->rp, it->rec.scene);
            char mine[PD_REDIS_SNAP_DEF_HEX] = "";
            if (cfg)
                pd_redis_snap_definition_hash(cfg, mine);
            pd_scene_release(cfg);
            it->other_def = strcmp(mine, it->def) != 0;
        }
    }
}

/* The watch event of a record the tail applied: watchers on this replica
 * hear of changes other replicas made as of their own (an update's
 * SCENE_UPDATED, a drop's SCENE_DROPPED, an instance's SCENE_INSTANCED on
 * its template, a reset's SCENE_REPLACED). 0, or -1: none is due. */
static int pd__event_of(pd_replica *r, const pd__item *it, pd_watch_event *ev)
{
    switch (it->rec.type) {
    case PD_JOURNAL_UPDATE: {
        pd_update_cells_req req;
        memset(&req, 0, sizeof req);
        snprintf(req.scene, sizeof req.scene, "%s", it->rec.scene);
        req.ops = it->rec.ops;
        req.n_ops = it->rec.n_ops;
        pd_update_outcome out;
        memset(&out, 0, sizeof out);
        out.update = it->res;
        return pd_watch_event_from_update(&req, &out, ev);
    }
    case PD_JOURNAL_DROP:
        memset(ev, 0, sizeof *ev);
        ev->kind = PD_WATCH_DROPPED;
        ev->version = it->rec.version;
        break;
    case PD_JOURNAL_INSTANCE:
        memset(ev, 0, sizeof *ev);
        ev->kind = PD_WATCH_INSTANCED;
        ev->version = it->rec.tmpl_version;
        snprintf(ev->instance, sizeof ev->instance, "%s", it->rec.scene);
        snprintf(ev->scene, sizeof ev->scene, "%s", it->rec.tmpl);
        ev->incarnation = it->incarnation;
        return 0;
    case PD_JOURNAL_RESET: {
        memset(ev, 0, sizeof *ev);
        ev->kind = PD_WATCH_REPLACED;
        ev->version = it->rec.version;
        pd_scene *now = pd_registry_acquire(r->s->registry, it->rec.scene);
        if (now) {
            ev->has_changed = 1;
            ev->changed_max = (pd_point){ now->grid->width - 1, now->grid->height - 1 };
        }
        pd_scene_release(now);
        break;
    }
    default:
        return -1;
    }
    snprintf(ev->scene, sizeof ev->scene, "%s", it->rec.scene);
    ev->incarnation = it->incarnation;
    return 0;
}

static void pd__publish(pd_replica *r, const pd__item *it)
{
    pd_watch_event ev;
    if (pd__event_of(r, it, &ev) != 0)
        return;
    if (ev.kind == PD_WATCH_DROPPED)
        pd_metrics_forget_scene(r->s->metrics, ev.scene);
    pd__watch_publish(r->s, &ev);
}

static void pd__batch_clear(pd__batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        pd_journal_record_free(&b->items[i].rec);
    b->n = 0;
    b->max_g = 0;
    b->full = 0;
}

static void pd__free_batches(pd_replica *r)
{
    for (int i = 0; i < 2; i++) {
        pd__batch_clear(&r->bufs[i]);
        free(r->bufs[i].items);
        r->bufs[i].items = NULL;
        r->bufs[i].cap = 0;
    }
}

/* The end of a closed replica: its handles closed, no apply in flight. */
static void pd__free_replica(pd_replica *r)
{
    pd_redis_snap_destroy(r->snap);
    pd__free_batches(r);
    pd__arena_free(r->arena);
    free(r->scenes);
    pd_journal_replayer_destroy(r->rp);
    free(r);
}

static void pd__apply_done(uv_work_t *w, int status);

/* Hands batch b to the threadpool; entries of a scene refused since they
 * were read are not applied. 0, or -1 (the connection is dropped). */
static int pd__start_apply(pd_replica *r, pd__batch *b)
{
    for (size_t i = 0; i < b->n; i++)
        b->items[i].skip = r->scenes[b->items[i].scene].refused;
    r->applying = b;
    r->work.data = r;
    if (uv_queue_work(r->s->loop, &r->work, pd__apply_work, pd__apply_done) != 0) {
        r->applying = NULL;
        pd__batch_clear(b);
        pd__drop(r, "cannot queue the apply work");
        return -1;
    }
    r->s->open_handles++; /* the server waits for it before freeing the store */
    return 0;
}


/* What the next step is once nothing is sent and nothing applied: read on
 * at once while behind, or look for new scenes, then block. */
static void pd__next(pd_replica *r)
{
    if (r->read_on && !r->drained)
        pd__read(r);
    else
        pd__list(r);
}

static void pd__apply_done(uv_work_t *w, int status)
{
    pd_replica *r = w->data;
    pd__batch *b = r->applying;
    (void)status;
    r->s->open_handles--;
    r->applying = NULL;
    /* Watches begun while the batch was applied start at a version served
     * then: their subscriptions skip the events up to it. */
    int watched = !r->closing && pd__watch_count(r->s) > 0;
    for (size_t i = 0; i < b->n; i++) {
        pd__item *it = &b->items[i];
        if (it->skip)
            continue;
        switch (it->outcome) {
        case PD_STORE_LOGGED_APPLIED:
            r->applied++;
            if (watched)
                pd__publish(r, it);
            if (it->other_def)
                pd_log_warn("replica: scene '%s' version %" PRIu64 ": the log's RESET (entry %s) was made from "
                            "another config's definition of it than this pathd's; it serves its own config's "
                            "map at that version until it loads the same config (every replica must)",
                            it->rec.scene, it->rec.version, it->id);
            break;
        case PD_STORE_LOGGED_HAD:
            r->had++;
            break;
        case PD_STORE_LOGGED_NOOP:
            r->noops++;
            pd_log_warn("replica: scene '%s' version %" PRIu64 " from the log is a no-op here: %s", it->rec.scene,
                        it->rec.version, it->why);
            break;
        case PD_STORE_LOGGED_GAP:
            r->gaps++;
            pd__refuse(r, it->scene, 1, "a record is missing before this one (%s)%s", it->why,
                       "; not served until the scene is rebuilt from the log (under way)");
            break;
        }
    }
    if (b->max_g > r->applied_g)
        r->applied_g = b->max_g;
    pd__batch_clear(b);
    if (r->closing) {
        /* The timers' close callbacks free the replica once both ran and
         * no apply is in flight. */
        r->phase = PD__R_IDLE;
        if (r->handles == 0)
            pd__free_replica(r);
        return;
    }
    pd__maybe_serving(r, r->drained && !r->held);
    pd__wake_parked(r, 0);
    /* The batch read meanwhile goes next; while behind, the read after it
     * goes at once (it is read while this one is applied). */
    pd__batch *next = r->held;
    r->held = NULL;
    if (next && pd__start_apply(r, next) != 0)
        return;
    if (!r->ac) {
        /* The connection went while the batch was applied. */
        r->phase = PD__R_IDLE;
        uv_timer_stop(&r->watchdog);
        uv_timer_start(&r->watchdog, pd__wake, r->backoff_ms ? r->backoff_ms / 2 : PD_REDIS_BACKOFF_MIN_MS, 0);
        return;
    }
    if (r->phase == PD__R_HELD || r->phase == PD__R_IDLE) {
        r->phase = PD__R_IDLE;
        if (next && !(r->read_on && !r->drained))
            return; /* caught up: the end of that batch looks for scenes */
        pd__next(r);
    }
}

/* One stream entry into the batch. 0, or -1 (it does not parse: the
 * scene is refused, as a record this replica cannot apply would make it
 * another scene than the log's). */
static int pd__take(pd_replica *r, pd__batch *b, size_t scene, const redisReply *e)
{
    if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 || e->element[0]->type != REDIS_REPLY_STRING ||
        e->element[1]->type != REDIS_REPLY_ARRAY)
        return -1;
    const redisReply *f = e->element[1];
    const redisReply *g = NULL, *v = NULL, *rec = NULL, *def = NULL;
    for (size_t i = 0; i + 1 < f->elements; i += 2) {
        const redisReply *name = f->element[i];
        if (name->type != REDIS_REPLY_STRING || name->len != 1)
            continue;
        if (name->str[0] == 'g')
            g = f->element[i + 1];
        else if (name->str[0] == 'v')
            v = f->element[i + 1];
        else if (name->str[0] == 'r')
            rec = f->element[i + 1];
        else if (name->str[0] == 'd')
            def = f->element[i + 1];
    }
    if (!g || !v || !rec || g->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING ||
        rec->type != REDIS_REPLY_STRING)
        return -1;
    pd__item *it = &b->items[b->n];
    it->g = strtoull(g->str, NULL, 10);
    it->scene = scene;
    it->skip = 0;
    it->outcome = PD_STORE_LOGGED_HAD;
    it->why[0] = '\0';
    snprintf(it->id, sizeof it->id, "%s", e->element[0]->str);
    snprintf(it->def, sizeof it->def, "%s", def && def->type == REDIS_REPLY_STRING ? def->str : "");
    it->other_def = 0;
    char why[160];
    if (pd_journal_decode((const uint8_t *)rec->str, rec->len, &it->rec, why, sizeof why) != 0)
        return -1;
    b->n++;
    if (it->g > b->max_g)
        b->max_g = it->g;
    pd__rscene *sc = &r->scenes[scene];
    uint64_t ver = strtoull(v->str, NULL, 10);
    if (ver > sc->log_version || it->rec.type != PD_JOURNAL_UPDATE)
        sc->log_version = ver;
    return 0;
}

/* Whether stream entry `next` ("INC-V") may come right after `prev` in
 * its stream: in one incarnation (its versions the store checks), a drop
 * ("INC+1-0") after it, or a new incarnation after a drop. Any other
 * change of INC leaves entries out - a snapshot's trim (XTRIM MINID) of
 * what a tail behind had not read, the drop and the new scene among
 * them - and versions restart at a new scene, so the store's version
 * check would take the new incarnation's update at the version this
 * replica serves of the old one for one it has (HAD), serving the old
 * scene for ever. An id that is not INC-V, or none read yet ("0-0"),
 * follows anything. */
static int pd__follows(const char *prev, const char *next)
{
    unsigned long long pi, pv, ni, nv;
    if (sscanf(prev, "%llu-%llu", &pi, &pv) != 2 || sscanf(next, "%llu-%llu", &ni, &nv) != 2 || (pi == 0 && pv == 0))
        return 1;
    if (ni == pi)
        return 1;
    return ni == pi + 1 && (pv == 0 || nv == 0);
}

/* A batch just read whose global sequences do not follow the last one
 * read without a hole has a record in a stream the tail does not read (a
 * new scene, or one refused): SMEMBERS goes before the next read. */
static void pd__note_sequence(pd_replica *r, const pd__batch *b)
{
    if (b->n == 0)
        return;
    uint64_t lo = UINT64_MAX;
    for (size_t i = 0; i < b->n; i++)
        if (b->items[i].g < lo)
            lo = b->items[i].g;
    if (r->seen_g == 0 || lo != r->seen_g + 1 || b->max_g - lo + 1 != b->n)
        r->list_due = 1;
    if (b->max_g > r->seen_g)
        r->seen_g = b->max_g;
}

/* Room for n entries in b (kept from one read to the next). */
static int pd__reserve(pd__batch *b, size_t n)
{
    if (n <= b->cap)
        return 0;
    pd__item *v = realloc(b->items, n * sizeof *v);
    if (!v)
        return -1;
    b->items = v;
    b->cap = n;
    return 0;
}

static void pd__read_reply(redisAsyncContext *ac, void *reply, void *priv)
{
    pd_replica *r = ac->data;
    size_t count = (size_t)(uintptr_t)priv;
    if (!r || r->ac != ac || r->phase != PD__R_READING)
        return;
    const redisReply *x = reply;
    if (!x || x->type == REDIS_REPLY_ERROR) {
        pd__drop(r, x ? x->str : "XREAD failed");
        return;
    }
    uv_timer_stop(&r->watchdog);
    r->phase = PD__R_IDLE;
    if (x->type == REDIS_REPLY_NIL || (x->type == REDIS_REPLY_ARRAY && x->elements == 0)) {
        r->read_on = 0;
        r->drained = 1;
        r->list_due = 1; /* quiet: a new scene's stream is what else there could be */
        if (!r->applying) {
            pd__maybe_serving(r, 1);
            pd__list(r);
        }
        return; /* else the end of the apply goes on */
    }
    r->drained = 0;
    size_t total = 0;
    for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
        const redisReply *st = x->element[i];
        if (st->type == REDIS_REPLY_ARRAY && st->elements == 2 && st->element[1]->type == REDIS_REPLY_ARRAY)
            total += st->element[1]->elements;
    }
    pd__batch *b = &r->bufs[0] == r->applying ? &r->bufs[1] : &r->bufs[0];
    if (pd__reserve(b, total ? total : 1) != 0) {
        pd__drop(r, "out of memory");
        return;
    }
    for (size_t i = 0; x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
        const redisReply *st = x->element[i];
        if (st->type != REDIS_REPLY_ARRAY || st->elements != 2 || st->element[0]->type != REDIS_REPLY_STRING ||
            st->element[1]->type != REDIS_REPLY_ARRAY)
            continue;
        size_t sc = pd__scene_by_key(r, st->element[0]->str, st->element[0]->len);
        if (sc == SIZE_MAX)
            continue;
        const redisReply *entries = st->element[1];
        if (entries->elements >= count)
            b->full = 1;
        size_t j = 0;
        for (; j < entries->elements; j++) {
            const redisReply *e = entries->element[j];
            const char *prev = j ? entries->element[j - 1]->element[0]->str : r->scenes[sc].last_id;
            if (e->type == REDIS_REPLY_ARRAY && e->elements == 2 && e->element[0]->type == REDIS_REPLY_STRING &&
                !pd__follows(prev, e->element[0]->str)) {
                pd__refuse(r, sc, 1, "its stream goes on at entry %s after %s, the last entry read: those between "
                           "are gone (trimmed below a snapshot); not served until the scene is rebuilt from the log "
                           "(under way)",
                           e->element[0]->str, prev);
                break;
            }
            if (pd__take(r, b, sc, e) != 0) {
                pd__refuse(r, sc, 0, "an entry of its stream does not parse (%s)%s",
                           entries->element[j]->type == REDIS_REPLY_ARRAY && entries->element[j]->elements
                               ? entries->element[j]->element[0]->str
                               : "?",
                           "; not served (a rebuild would read it too: a newer pathd's entry?)");
                break;
            }
        }
        /* The next read starts after the last entry taken. */
        if (j > 0) {
            const redisReply *last = entries->element[j - 1];
            snprintf(r->scenes[sc].last_id, sizeof r->scenes[sc].last_id, "%s", last->element[0]->str);
        }
    }
    pd__note_sequence(r, b);
    r->read_on = b->full || !atomic_load(&r->serving);
    if (r->applying) {
        /* Read while the one before is applied: it waits for it. */
        r->held = b;
        r->phase = PD__R_HELD;
        return;
    }
    if (pd__start_apply(r, b) != 0)
        return;
    /* Behind: the next read goes now, and is decoded while this batch is
     * applied. Caught up: the end of the apply looks for scenes, then
     * blocks. */
    if (r->read_on)
        pd__read(r);
}

/* ---- parked queries ----------------------------------------------------------------------- */

int pd__replica_park(pd_replica *r, uint64_t conn_id, const uint8_t *frame, size_t len, uint64_t arrival_ns,
                     uint64_t deadline_ns)
{
    if (r->closing || r->n_parked >= PD_REPLICA_MAX_PARKED)
        return -1;
    pd__parked *p = malloc(sizeof *p + len);
    if (!p)
        return -1;
    p->conn_id = conn_id;
    p->arrival_ns = arrival_ns;
    p->deadline_ns = deadline_ns;
    p->len = len;
    memcpy(p->frame, frame, len);
    p->next = r->parked;
    r->parked = p;
    r->n_parked++;
    r->parked_total++;
    if (!uv_is_active((uv_handle_t *)&r->park_timer)) {
        uv_timer_start(&r->park_timer, pd__park_tick, PD_REPLICA_PARK_TICK_MS, PD_REPLICA_PARK_TICK_MS);
    }
    return 0;
}

/* Dispatches the parked frames again (all, or those past their wait): a
 * query whose scene caught up is answered, one still behind parks again
 * until its deadline, then is answered STALE_VERSION. */
static void pd__wake_parked(pd_replica *r, int expired_only)
{
    pd__parked *list = r->parked, *keep = NULL;
    r->parked = NULL;
    size_t kept = 0;
    uint64_t now = uv_hrtime();
    while (list) {
        pd__parked *p = list;
        list = p->next;
        if (expired_only && now < p->deadline_ns) {
            p->next = keep;
            keep = p;
            kept++;
            continue;
        }
        r->n_parked--;
        pd__conn *c = pd__map_find(&r->s->table.map, p->conn_id);
        if (c && !c->lingering)
            r->redispatch(c, p->frame, p->len, p->arrival_ns, p->deadline_ns);
        free(p);
    }
    /* Those parked again meanwhile are in r->parked already. */
    while (keep) {
        pd__parked *p = keep;
        keep = p->next;
        p->next = r->parked;
        r->parked = p;
    }
    (void)kept;
    if (!r->parked)
        uv_timer_stop(&r->park_timer);
}

static void pd__park_tick(uv_timer_t *t)
{
    pd__wake_parked(t->data, 1);
}

void pd__replica_count_behind(pd_replica *r)
{
    r->behind++;
}

/* ---- the request path's questions ------------------------------------------------------ */

int pd__replica_serving(const pd_replica *r)
{
    return atomic_load(&r->serving);
}

int pd__replica_refuses(pd_replica *r, const char *name, char *msg, size_t len)
{
    size_t i = pd__scene_index(r, name);
    if (i == SIZE_MAX || !r->scenes[i].refused)
        return 0;
    snprintf(msg, len, "scene '%s': %s", name, r->scenes[i].why);
    return 1;
}

/* ---- metrics ------------------------------------------------------------------------------ */

/* A label value with \, " and newlines escaped (Prometheus text format). */
static void pd__label(char *out, size_t cap, const char *in)
{
    size_t k = 0;
    for (; *in && k + 3 < cap; in++) {
        if (*in == '\\' || *in == '"') {
            out[k++] = '\\';
            out[k++] = *in;
        } else if (*in == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
        } else {
            out[k++] = *in;
        }
    }
    out[k] = '\0';
}

char *pd__replica_metrics(pd_replica *r)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    pd_redis_log_counters lc;
    pd_redis_log_stats(r->rl, &lc);
    fprintf(f, "# HELP pathd_replica_serving 1 once this replica caught up with the log at start (Ping: SERVING).\n"
               "# TYPE pathd_replica_serving gauge\npathd_replica_serving %d\n",
            atomic_load(&r->serving));
    fprintf(f, "# HELP pathd_replica_scene_version The version of each scene this replica serves.\n"
               "# TYPE pathd_replica_scene_version gauge\n");
    char label[2 * PD_CONF_MAX_NAME + 4];
    for (size_t i = 0; i < r->n_scenes; i++) {
        pd_scene *s = pd_registry_acquire(r->s->registry, r->scenes[i].name);
        pd__label(label, sizeof label, r->scenes[i].name);
        fprintf(f, "pathd_replica_scene_version{scene=\"%s\"} %" PRIu64 "\n", label, s ? s->version : 0);
        pd_scene_release(s);
    }
    fprintf(f, "# HELP pathd_replica_scene_lag Versions of each scene the tail has read from the log and this "
               "replica does not serve yet.\n# TYPE pathd_replica_scene_lag gauge\n");
    for (size_t i = 0; i < r->n_scenes; i++) {
        pd_scene *s = pd_registry_acquire(r->s->registry, r->scenes[i].name);
        uint64_t have = s ? s->version : 0, log = r->scenes[i].log_version;
        pd__label(label, sizeof label, r->scenes[i].name);
        fprintf(f, "pathd_replica_scene_lag{scene=\"%s\"} %" PRIu64 "\n", label, s && log > have ? log - have : 0);
        pd_scene_release(s);
    }
    fprintf(f, "# HELP pathd_replica_scene_refused 1 for a scene not served: its log went back, or missed a "
               "record (UNAVAILABLE until rebuilt).\n# TYPE pathd_replica_scene_refused gauge\n");
    for (size_t i = 0; i < r->n_scenes; i++) {
        pd__label(label, sizeof label, r->scenes[i].name);
        fprintf(f, "pathd_replica_scene_refused{scene=\"%s\"} %d\n", label, r->scenes[i].refused);
    }
    fprintf(f, "# HELP pathd_replica_rebuilds_total Refused scenes rebuilt from the log (its newest snapshot "
               "and stream) and served again.\n# TYPE pathd_replica_rebuilds_total counter\n"
               "pathd_replica_rebuilds_total %" PRIu64 "\n",
            r->rebuilds);
    fprintf(f, "# HELP pathd_replica_records_total Records the tail read, by what applying them did.\n"
               "# TYPE pathd_replica_records_total counter\n"
               "pathd_replica_records_total{outcome=\"applied\"} %" PRIu64 "\n"
               "pathd_replica_records_total{outcome=\"had\"} %" PRIu64 "\n"
               "pathd_replica_records_total{outcome=\"noop\"} %" PRIu64 "\n"
               "pathd_replica_records_total{outcome=\"gap\"} %" PRIu64 "\n",
            r->applied, r->had, r->noops, r->gaps);
    fprintf(f, "# HELP pathd_replica_behind_total Queries answered STALE_VERSION (BEHIND) after waiting "
               "limits.max_behind_wait_ms for the tail.\n# TYPE pathd_replica_behind_total counter\n"
               "pathd_replica_behind_total %" PRIu64 "\n",
            r->behind);
    fprintf(f, "# HELP pathd_replica_parked_total Queries that waited for the tail to reach their min_version.\n"
               "# TYPE pathd_replica_parked_total counter\npathd_replica_parked_total %" PRIu64 "\n",
            r->parked_total);
    fprintf(f, "# HELP pathd_log_reconnects_total Connections to Redis made again after one failed.\n"
               "# TYPE pathd_log_reconnects_total counter\n"
               "pathd_log_reconnects_total{conn=\"append\"} %" PRIu64 "\n"
               "pathd_log_reconnects_total{conn=\"tail\"} %" PRIu64 "\n",
            lc.reconnects, r->reconnects);
    fprintf(f, "# HELP pathd_log_connect_failures_total Connections to Redis that could not be made, or (the "
               "tail's) failed or went silent.\n"
               "# TYPE pathd_log_connect_failures_total counter\n"
               "pathd_log_connect_failures_total{conn=\"append\"} %" PRIu64 "\n"
               "pathd_log_connect_failures_total{conn=\"tail\"} %" PRIu64 "\n",
            lc.connect_failures, r->connect_failures);
    fprintf(f, "# HELP pathd_log_append_seconds Round trips of the appends Redis answered (FCALL pathd_append).\n"
               "# TYPE pathd_log_append_seconds summary\n"
               "pathd_log_append_seconds_sum %.6f\npathd_log_append_seconds_count %" PRIu64 "\n",
            (double)lc.append_us / 1e6, lc.appends);
    fprintf(f, "# HELP pathd_log_append_failures_total Appends refused UNAVAILABLE: Redis did not answer.\n"
               "# TYPE pathd_log_append_failures_total counter\npathd_log_append_failures_total %" PRIu64 "\n",
            lc.append_failures);
    uint64_t race_retries = 0, race_gave_up = 0;
    pd_store_race_stats(r->s->store, &race_retries, &race_gave_up);
    fprintf(f, "# HELP pathd_log_append_races_total Updates whose append lost to another replica's: built "
               "again after the tail applied it, or answered UNAVAILABLE (limits.max_append_attempts or "
               "limits.max_behind_wait_ms reached).\n# TYPE pathd_log_append_races_total counter\n"
               "pathd_log_append_races_total{outcome=\"retried\"} %" PRIu64 "\n"
               "pathd_log_append_races_total{outcome=\"gave_up\"} %" PRIu64 "\n",
            race_retries, race_gave_up);
    fclose(f);
    return buf;
}

/* ---- the config a RESET goes back to ------------------------------------------------------ */

void pd__replica_set_config(pd_replica *r, pd_scene **scenes, size_t n)
{
    pd_journal_replayer_set_config(r->rp, scenes, n);
}

typedef struct pd__reload_config {
    pd_scene **list;
    size_t n;
} pd__reload_config;

void *pd__replica_reload_begin(pd_replica *r, const pd_scene_set *set)
{
    size_t n = 0;
    pd_scene *const *scenes = pd_scene_set_scenes(set, &n);
    pd__reload_config *c = calloc(1, sizeof *c);
    if (!c || (n && !(c->list = calloc(n, sizeof *c->list)))) {
        free(c);
        pd_log_warn("replica: out of memory keeping the reloaded config: a RESET its tail applies goes back to "
                    "the config before it");
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        /* A kept scene's config entry did not change: the tail's has its
         * definition (the scene served may hold changes since). */
        pd_scene *def = pd_scene_set_kept(set, i) ? pd_journal_replayer_config(r->rp, scenes[i]->name) : NULL;
        if (!def)
            pd_scene_retain(def = scenes[i]);
        c->list[c->n++] = def;
    }
    return c;
}

void pd__replica_reload_end(pd_replica *r, void *state, int published)
{
    pd__reload_config *c = state;
    if (!c)
        return;
    if (published)
        pd_journal_replayer_set_config(r->rp, c->list, c->n);
    else
        pd_registry_release_list(c->list, c->n);
    free(c);
}

/* ---- life --------------------------------------------------------------------------------- */

static void pd__timer_closed(uv_handle_t *h)
{
    pd_replica *r = h->data;
    r->s->open_handles--;
    if (--r->handles == 0 && !r->applying && !r->rebuilding)
        pd__free_replica(r);
}

pd_replica *pd__replica_start(pd_server *s, pd_redis_log *rl, pd__replica_redispatch_fn redispatch, char *err,
                              size_t errlen)
{
    pd_replica *r = calloc(1, sizeof *r);
    if (!r || !(r->arena = calloc(1, sizeof *r->arena)) ||
        !(r->rp = pd_journal_replayer_create(s->registry, s->world_store))) {
        if (r)
            free(r->arena);
        free(r);
        snprintf(err, errlen, "replica: out of memory");
        return NULL;
    }
    r->s = s;
    r->redispatch = redispatch;
    r->rl = rl;
    snprintf(r->host, sizeof r->host, "%s", s->conf.log.redis_host);
    r->port = s->conf.log.redis_port;
    r->timeout_ms = s->conf.log.timeout_ms;
    pd_redis_log_scenes_key(rl, r->scenes_key, sizeof r->scenes_key);
    snprintf(r->seq_key, sizeof r->seq_key, "%s:seq", s->conf.log.prefix);
    r->rand_state = (unsigned)uv_hrtime() ^ (unsigned)(uintptr_t)r;
    /* Only fetches: the interval, count and bound are not used. */
    const pd_redis_snap_opts so = { .every = 1, .keep = 1, .max_bytes = 1 };
    char why[160];
    if (!(r->snap = pd_redis_snap_create(rl, &so, why, sizeof why)))
        pd_log_warn("replica: %s; a scene whose log went back is not rebuilt", why);
    uv_timer_init(s->loop, &r->watchdog);
    uv_timer_init(s->loop, &r->park_timer);
    r->watchdog.data = r->park_timer.data = r;
    r->handles = 2;
    s->open_handles += 2;
    if (s->conf.data_dir[0])
        snprintf(r->journal_dir, sizeof r->journal_dir, "%s/%s", s->conf.data_dir, PD_REDIS_CACHE_SUBDIR);
    pd_redis_log_set_tailed(rl, 1);
    /* An update whose append lost to another replica's waits for this
     * tail and is built again (pd_store_set_race_retry), rather than
     * answered UNAVAILABLE for its client to resend late. */
    pd_store_set_race_retry(s->store, s->conf.max_append_attempts, s->conf.max_behind_wait_ms);
    pd__connect(r);
    return r;
}

void pd__replica_close(pd_replica *r)
{
    if (!r || r->closing)
        return;
    r->closing = 1;
    pd_redis_log_set_tailed(r->rl, 0);
    pd_store_set_race_retry(r->s->store, 0, 0); /* no tail to wait for */
    if (r->checked || r->marked)
        pd__end_checks(r);
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    if (ac)
        redisAsyncFree(ac);
    while (r->parked) {
        pd__parked *p = r->parked;
        r->parked = p->next;
        free(p);
    }
    r->n_parked = 0;
    uv_close((uv_handle_t *)&r->watchdog, pd__timer_closed);
    uv_close((uv_handle_t *)&r->park_timer, pd__timer_closed);
}
