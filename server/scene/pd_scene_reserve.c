/*
 * pd_scene_reserve.c - the per-scene reservation tables beside the registry
 * (see pd_scene_reserve.h): a hash of scene name -> table, each entry
 * reference-counted so that forgetting a scene while a request holds its
 * table frees it once that request lets go.
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_clock.h"
#include "pd_index.h"
#include "pd_reserve_log.h"
#include "pd_scene_reserve.h"
#include "pd_scene_reserve_internal.h"
#include "pd_sort.h"

pd_reservations *pd_reservations_create(void)
{
    pd_reservations *set = calloc(1, sizeof *set);
    if (!set)
        return NULL;
    if (pthread_mutex_init(&set->lock, NULL) != 0) {
        free(set);
        return NULL;
    }
    if (pthread_mutex_init(&set->log_lock, NULL) != 0) {
        pthread_mutex_destroy(&set->lock);
        free(set);
        return NULL;
    }
    return set;
}

static void pd__entry_free(pd_reservations_entry *e)
{
    pd_reserve_destroy(e->table);
    pd_reserve_log_buf_free(&e->pend);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void pd_reservations_destroy(pd_reservations *set)
{
    if (!set)
        return;
    for (size_t b = 0; b < PD__RESV_BUCKETS; b++) {
        pd_reservations_entry *e = set->buckets[b];
        while (e) {
            pd_reservations_entry *next = e->next;
            pd__entry_free(e);
            e = next;
        }
    }
    pd_reserve_log_close(set->log);
    pthread_mutex_destroy(&set->log_lock);
    pthread_mutex_destroy(&set->lock);
    free(set);
}

void pd_reservations_set_limits(pd_reservations *set, const pd_reserve_limits *limits, int64_t ttl_ms,
                                int clear_holds)
{
    pthread_mutex_lock(&set->lock);
    set->limits = *limits;
    set->ttl_ms = ttl_ms;
    set->clear_holds = clear_holds;
    pthread_mutex_unlock(&set->lock);
}

int pd_reservations_clear_holds(pd_reservations *set)
{
    pthread_mutex_lock(&set->lock);
    int on = set->clear_holds;
    pthread_mutex_unlock(&set->lock);
    return on;
}

int64_t pd_reservations_ttl_ms(pd_reservations *set)
{
    pthread_mutex_lock(&set->lock);
    int64_t ttl = set->ttl_ms;
    pthread_mutex_unlock(&set->lock);
    return ttl;
}

pd_status pd_reservations_clock_refusal(pd_reservations *set, const pd_reserve *table, const char *scene,
                                        uint64_t agent, int64_t t0_ms, char *msg, size_t len)
{
    const int64_t ttl = pd_reservations_ttl_ms(set), now = pd_reserve_now(table);
    /* Short enough for the longest scene name (63 bytes), t0 and clock
     * (19 digits) and limit (10) in a reply's message (PD_REASON_MAX, 256
     * bytes): cut there, the remedy at its end was lost. */
    switch (pd_reserve_clock_fits(table, agent, t0_ms, ttl)) {
    case PD_RESERVE_CLOCK_OK:
        return PD_OK;
    case PD_RESERVE_CLOCK_AHEAD: {
        /* the limit pd_reserve_clock_fits applied: a longer TTL's */
        const int64_t step = pd_reserve_get_limits(table)->max_clock_step_ms;
        const int by_ttl = ttl > step;
        /* With no TTL no agent ever expires: neither the idle sweep nor
         * the game's retries clear this refusal, only a release - said
         * so, or the game retries for good. */
        snprintf(msg, len, "reserve_path.t0_ms %" PRId64 " leads scene '%s''s clock %" PRId64 " by over %s (%" PRId64 ")%s",
                 t0_ms, scene, now, by_ttl ? "reservation_ttl_ms" : "max_clock_step_ms", by_ttl ? ttl : step,
                 ttl > 0 ? " and would expire every agent; ReleaseAgent all first if it jumped"
                         : "; with reservation_ttl_ms 0 this never clears: ReleaseAgent all first");
        break;
    }
    case PD_RESERVE_CLOCK_BEHIND:
        snprintf(msg, len,
                 "reserve_path.t0_ms %" PRId64 " trails scene '%s''s clock %" PRId64
                 " by over reservation_ttl_ms (%" PRId64 "): the game clock went back; ReleaseAgent all first "
                 "if it restarted",
                 t0_ms, scene, now, ttl);
        break;
    }
    return PD_INVALID_ARGUMENT;
}

static pd_reservations_entry **pd__slot(pd_reservations *set, const char *name)
{
    pd_reservations_entry **at = &set->buckets[pd_index_hash(name) % PD__RESV_BUCKETS];
    while (*at && strcmp((*at)->name, name) != 0)
        at = &(*at)->next;
    return at;
}

/* Unlinks *at; the set's lock is held. */
static void pd__unlink(pd_reservations_entry **at)
{
    pd_reservations_entry *e = *at;
    *at = e->next;
    e->forgotten = 1;
    if (--e->refs == 0)
        pd__entry_free(e);
}

/* ---- reservation log hooks (pd_reserve_log.h) ----------------------------- */

/* The table's observer: each change it made, encoded for the log. */
void pd_reservations_observe(void *user, const pd_reserve_op *op)
{
    pd_reservations_entry *e = user;
    if (e->set->log || e->capture)
        (void)pd_reserve_log_encode(&e->pend, e->name, op);
}

/* A new table (the set's lock held): its changes are logged, after a RESET
 * that ends whatever the log holds for an earlier table of the name. */
static void pd__log_attach(pd_reservations *set, pd_reservations_entry *e)
{
    e->set = set;
    pd_reserve_set_observer(e->table, pd_reservations_observe, e);
    if (set->log)
        (void)pd_reserve_log_encode(&e->pend, e->name, NULL);
}

/* Writes what e's request changed (e->lock held): 0, or -1 when it is not
 * in the log as the fsync policy asks (the log has then failed, and
 * pd_reservations_refusal refuses the changes after it). A forgotten
 * table's changes are not written: its RESET went before them. */
static int pd__log_flush(pd_reservations *set, pd_reservations_entry *e)
{
    int rc = e->pend.failed ? -1 : 0;
    uint64_t end = 0;
    pthread_mutex_lock(&set->log_lock);
    pthread_mutex_lock(&set->lock);
    const int gone = e->forgotten;
    pthread_mutex_unlock(&set->lock);
    if (rc == 0 && !gone)
        rc = pd_reserve_log_write(set->log, e->pend.p, e->pend.n, &end);
    pthread_mutex_unlock(&set->log_lock);
    if (rc == 0 && !gone)
        rc = pd_reserve_log_settle(set->log, end);
    e->pend.n = 0;
    e->pend.failed = 0;
    return rc;
}

/* The table of `name` is gone (set->log_lock held). */
static void pd__log_reset(pd_reservations *set, const char *name)
{
    if (!set->log)
        return;
    pd_reserve_log_buf b = { 0 };
    uint64_t end = 0;
    if (pd_reserve_log_encode(&b, name, NULL) == 0 && pd_reserve_log_write(set->log, b.p, b.n, &end) == 0)
        (void)pd_reserve_log_settle(set->log, end);
    pd_reserve_log_buf_free(&b);
}

typedef struct pd__replay {
    pd_reservations *set;
    pd_reservations_scene_fn acquire;
    void *user;
    pd_reservations_log_stats *stats;
} pd__replay;

static void pd__replay_record(void *user, const char *scene, const pd_reserve_op *op)
{
    pd__replay *rp = user;
    rp->stats->records++;
    if (!op) {
        pd_reservations_forget(rp->set, scene);
        return;
    }
    pd_scene *s = rp->acquire(rp->user, scene);
    if (!s) {
        rp->stats->unserved++;
        return;
    }
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(rp->set, s, 1, &hold);
    if (!table || pd_reserve_log_apply(table, op) != PD_OK)
        rp->stats->refused++;
    /* Heard now: the idle sweep counts a replayed table's idle time from
     * the restart (its game time the log's last), or its agents would
     * never expire until a ReservePath came to the scene. */
    pd_reservations_heard(&hold, pd_clock_ns());
    pd_reservations_unlock(rp->set, &hold);
    pd_scene_release(s);
}

int pd_reservations_open_log(pd_reservations *set, pd_reservations_scene_fn acquire, void *user, const char *dir,
                             int fsync_always, uint64_t compact_bytes, pd_reservations_log_stats *stats, char *err,
                             size_t errlen)
{
    memset(stats, 0, sizeof *stats);
    pd__replay rp = { set, acquire, user, stats };
    pd_reserve_log_stats fs;
    /* Replayed before set->log is set: nothing replay does is logged again. */
    pd_reserve_log *log = pd_reserve_log_open(dir, fsync_always, pd__replay_record, &rp, &fs, err, errlen);
    if (!log)
        return -1;
    stats->bytes = fs.bytes;
    stats->truncated_bytes = fs.truncated_bytes;
    pthread_mutex_lock(&set->log_lock);
    set->log = log;
    set->compact_bytes = compact_bytes;
    pthread_mutex_unlock(&set->log_lock);
    /* The tables replay made log their changes from now on; a RESET first
     * is not needed (the log holds their history). */
    return 0;
}

pd_status pd_reservations_refusal(pd_reservations *set, char *msg, size_t len)
{
    pd_status st = PD_OK;
    char why[256];
    if (st == PD_OK && set->log && pd_reserve_log_failed(set->log, why, sizeof why)) {
        snprintf(msg, len, "the reservation log failed (%s): no reservation is changed until pathd is restarted",
                 why);
        st = PD_INTERNAL;
    }
    return st;
}

int pd_reservations_sync_due(pd_reservations *set)
{
    return set->log &&
           (pd_reserve_log_sync_due(set->log) || pd_reserve_log_compaction_due(set->log, set->compact_bytes));
}

int pd_reservations_sync(pd_reservations *set)
{
    if (!set->log)
        return 0;
    if (pd_reserve_log_sync(set->log) != 0)
        return -1;
    if (pd_reserve_log_compaction_due(set->log, set->compact_bytes)) {
        char why[sizeof set->compact_why];
        const int rc = pd_reservations_compact(set, why, sizeof why);
        pthread_mutex_lock(&set->lock);
        snprintf(set->compact_why, sizeof set->compact_why, "%s", rc == 0 ? "" : why);
        pthread_mutex_unlock(&set->lock);
    }
    return 0;
}

uint64_t pd_reservations_compactions(pd_reservations *set, char *why, size_t len)
{
    pthread_mutex_lock(&set->lock);
    const uint64_t n = set->compactions;
    if (why && len)
        snprintf(why, len, "%s", set->compact_why);
    pthread_mutex_unlock(&set->lock);
    return n;
}

/* Releases the references pd_reservations_compact took (the set's lock
 * not held). */
static void pd__unref_all(pd_reservations *set, pd_reservations_entry **es, size_t n)
{
    pthread_mutex_lock(&set->lock);
    for (size_t i = 0; i < n; i++)
        if (--es[i]->refs == 0)
            pd__entry_free(es[i]);
    pthread_mutex_unlock(&set->lock);
}

int pd_reservations_compact(pd_reservations *set, char *err, size_t errlen)
{
    if (!set->log)
        return 0;
    /* Every table, referenced so none is freed while it waits its turn. */
    pthread_mutex_lock(&set->lock);
    size_t n = 0;
    for (size_t b = 0; b < PD__RESV_BUCKETS; b++)
        for (pd_reservations_entry *e = set->buckets[b]; e; e = e->next)
            n++;
    pd_reservations_entry **es = malloc((n ? n : 1u) * sizeof *es);
    if (!es) {
        pthread_mutex_unlock(&set->lock);
        snprintf(err, errlen, "reservation log compaction: out of memory");
        return -1;
    }
    n = 0;
    for (size_t b = 0; b < PD__RESV_BUCKETS; b++)
        for (pd_reservations_entry *e = set->buckets[b]; e; e = e->next) {
            e->refs++;
            es[n++] = e;
        }
    pthread_mutex_unlock(&set->lock);
    /* Each table's lock, then the log's: the order a request's unlock
     * takes them in (its table's, then log_lock to write), so a request
     * holding one table finishes, writes and lets go while this waits. No
     * request holds two tables. Holding them all, no table changes and
     * nothing is appended: the dump is exactly what the log would replay
     * to. A table's pend holds at most its attach RESET here, which its
     * next request writes after the dump (an empty table's RESET again). */
    for (size_t i = 0; i < n; i++)
        pthread_mutex_lock(&es[i]->lock);
    pthread_mutex_lock(&set->log_lock);
    pd_reserve_log_buf b = { 0 };
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&set->lock);
        const int gone = es[i]->forgotten; /* its RESET is in the log already */
        pthread_mutex_unlock(&set->lock);
        if (gone)
            continue;
        (void)pd_reserve_log_dump(&b, es[i]->name, es[i]->table);
    }
    int rc = -1;
    if (b.failed)
        snprintf(err, errlen, "reservation log compaction: the dump did not fit in memory");
    else
        rc = pd_reserve_log_rewrite(set->log, b.p, b.n, err, errlen);
    pthread_mutex_unlock(&set->log_lock);
    for (size_t i = 0; i < n; i++)
        pthread_mutex_unlock(&es[i]->lock);
    pd_reserve_log_buf_free(&b);
    pd__unref_all(set, es, n);
    free(es);
    if (rc == 0) {
        pthread_mutex_lock(&set->lock);
        set->compactions++;
        pthread_mutex_unlock(&set->lock);
    }
    return rc;
}

uint64_t pd_reservations_log_bytes(pd_reservations *set)
{
    return set->log ? pd_reserve_log_bytes(set->log) : 0;
}

pd_reserve *pd_reservations_lock(pd_reservations *set, const pd_scene *s, int create, pd_reservations_hold *hold)
{
    hold->entry = NULL;
    hold->heard_ns = 0;
    pthread_mutex_lock(&set->lock);
    pd_reservations_entry **at = pd__slot(set, s->name);
    if (*at && (*at)->incarnation != s->incarnation) {
        pd__unlink(at); /* the name's earlier scene: its agents are gone with it */
        if (!create) {
            /* reservation log hook: the log learns they are gone too */
            pthread_mutex_unlock(&set->lock);
            pthread_mutex_lock(&set->log_lock);
            pd__log_reset(set, s->name);
            pthread_mutex_unlock(&set->log_lock);
            return NULL;
        }
    }
    if (!*at) {
        if (!create) {
            pthread_mutex_unlock(&set->lock);
            return NULL;
        }
        pd_reservations_entry *e = calloc(1, sizeof *e);
        if (!e || !(e->table = pd_reserve_create(&set->limits)) || pthread_mutex_init(&e->lock, NULL) != 0) {
            if (e)
                pd_reserve_destroy(e->table);
            free(e);
            pthread_mutex_unlock(&set->lock);
            return NULL;
        }
        memcpy(e->name, s->name, sizeof e->name); /* both PD_CONF_MAX_NAME, NUL-terminated */
        e->incarnation = s->incarnation;
        e->refs = 1;
        pd__log_attach(set, e);
        *at = e;
    }
    pd_reservations_entry *e = *at;
    e->refs++;
    pd_reserve_limits limits = set->limits;
    pthread_mutex_unlock(&set->lock);
    pthread_mutex_lock(&e->lock);
    pd_reserve_set_limits(e->table, &limits);
    hold->entry = e;
    return e->table;
}

void pd_reservations_unlock(pd_reservations *set, pd_reservations_hold *hold)
{
    pd_reservations_entry *e = hold->entry;
    hold->unlogged = 0;
    if (!e)
        return;
    hold->entry = NULL;
    if (set->log && (e->pend.n || e->pend.failed))
        hold->unlogged = pd__log_flush(set, e) != 0;
    const int64_t now_game = pd_reserve_now(e->table);
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_lock(&set->lock);
    if (hold->heard_ns) {
        e->heard_game_ms = now_game;
        e->heard_ns = hold->heard_ns;
        e->swept_empty = 0;
    }
    if (--e->refs == 0)
        pd__entry_free(e);
    pthread_mutex_unlock(&set->lock);
}

void pd_reservations_heard(pd_reservations_hold *hold, uint64_t now_ns)
{
    hold->heard_ns = now_ns ? now_ns : 1;
}

/* Real time (ns) a table must go without a ReservePath before the timer
 * sweeps it, and between two sweeps: the sixteenth of the TTL that
 * pd_reserve_maintain waits between its own checks. */
static uint64_t pd__idle_ns(int64_t ttl_ms)
{
    return (uint64_t)(ttl_ms / 16 > 0 ? ttl_ms / 16 : 1) * 1000000u;
}

int pd_reservations_sweep_due(const pd_reservations_entry *e, int64_t ttl_ms, uint64_t now_ns)
{
    const uint64_t idle = pd__idle_ns(ttl_ms);
    return ttl_ms > 0 && !e->swept_empty && e->heard_ns && now_ns >= e->heard_ns && now_ns - e->heard_ns >= idle &&
           (now_ns < e->swept_ns || now_ns - e->swept_ns >= idle);
}

size_t pd_reservations_idle(pd_reservations *set, uint64_t now_ns, char (*names)[PD_CONF_MAX_NAME], size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&set->lock);
    for (size_t b = 0; b < PD__RESV_BUCKETS && n < cap; b++)
        for (pd_reservations_entry *e = set->buckets[b]; e && n < cap; e = e->next)
            if (pd_reservations_sweep_due(e, set->ttl_ms, now_ns))
                memcpy(names[n++], e->name, sizeof e->name);
    pthread_mutex_unlock(&set->lock);
    return n;
}

void pd_reservations_forget(pd_reservations *set, const char *name)
{
    if (!set || !name)
        return;
    pthread_mutex_lock(&set->log_lock);
    pthread_mutex_lock(&set->lock);
    pd_reservations_entry **at = pd__slot(set, name);
    const int had = *at != NULL;
    if (*at)
        pd__unlink(at);
    pthread_mutex_unlock(&set->lock);
    if (had)
        pd__log_reset(set, name);
    pthread_mutex_unlock(&set->log_lock);
}

/* ---- UpdateCells' cuts -------------------------------------------------- */

/* Cuts what op blocked in table; the ids go to ids[*n..), which has room
 * for every agent of the table per op. A RESTORE may bring walls back: its
 * cells blocked in the new grid cut as a BLOCK's. */
static void pd__cut_op(pd_reserve *table, const pd_grid *grid, const pd_scene_update *op, int64_t at,
                       pd_reserve_cut *cuts, size_t cap, uint64_t *ids, size_t *n)
{
    size_t got = 0;
    if (op->op == PD_UPDATE_BLOCK) {
        got = op->is_rect ? pd_reserve_block(table, op->rect_min.x, op->rect_min.y, op->rect_max.x, op->rect_max.y,
                                             at, cuts, cap)
                          : pd_reserve_block_cells(table, op->cells, op->n_cells, at, cuts, cap);
    } else if (op->op == PD_UPDATE_RESTORE) {
        size_t cells = op->is_rect ? (size_t)(op->rect_max.x - op->rect_min.x + 1) *
                                         (size_t)(op->rect_max.y - op->rect_min.y + 1)
                                   : op->n_cells;
        for (size_t i = 0; i < cells; i++) {
            pd_point c = op->is_rect ? (pd_point){op->rect_min.x + (int32_t)(i % (size_t)(op->rect_max.x -
                                                                                         op->rect_min.x + 1)),
                                                  op->rect_min.y + (int32_t)(i / (size_t)(op->rect_max.x -
                                                                                         op->rect_min.x + 1))}
                                     : op->cells[i];
            if (pd_grid_get(grid, c.x, c.y) == 0)
                got += pd_reserve_block(table, c.x, c.y, c.x, c.y, at, cuts + (got < cap ? got : cap),
                                        got < cap ? cap - got : 0);
        }
    }
    for (size_t i = 0; i < got && i < cap; i++)
        ids[(*n)++] = cuts[i].agent;
}

pd_update_cut *pd_reservations_cut_table(pd_reserve *table, const pd_scene *s, const pd_scene_update *ops,
                                         size_t n_ops, int has_at_ms, int64_t at_ms)
{
    pd_update_cut *cut = NULL;
    {
        pd_reserve_stats st;
        pd_reserve_get_stats(table, &st);
        size_t cap = st.agents, n = 0;
        int64_t at = has_at_ms ? at_ms : pd_reserve_now(table);
        pd_reserve_cut *cuts = cap ? malloc(cap * sizeof *cuts) : NULL;
        uint64_t *ids = cap ? malloc(cap * n_ops * sizeof *ids) : NULL;
        cut = calloc(1, sizeof *cut);
        if (cap && cuts && ids && cut) {
            for (size_t i = 0; i < n_ops; i++)
                pd__cut_op(table, s->grid, &ops[i], at, cuts, cap, ids, &n);
        }
        free(cuts);
        if (n && cut) {
            qsort(ids, n, sizeof *ids, pd_cmp_u64);
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (k == 0 || ids[k - 1] != ids[i])
                    ids[k++] = ids[i];
            cut->agents = ids;
            cut->n_agents = k;
            cut->at_ms = at;
        } else {
            free(ids);
            free(cut);
            cut = NULL;
        }
    }
    return cut;
}

void pd_update_cut_free(pd_update_cut *cut)
{
    if (!cut)
        return;
    free(cut->agents);
    free(cut);
}
