/*
 * pd_store.c - the world's changes in one place (see pd_store.h): each
 * change is applied through the registry's hooks, so its record reaches
 * the change log under the log's lock just before the change is served,
 * and the log is synced (made durable) after the lock is let go, as the
 * store's fsync policy says, so changes arriving together share one fsync.
 * The log's background work (the everysec sync, compaction) and its tails
 * go through here too, so a caller never names the log's implementation.
 */
#include "pd_store.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Lane buckets counted for batches (a power of two). */
#define PD__LANE_BUCKETS 256u

struct pd_store {
    pd_registry *registry;
    pd_world_store *world;        /* may be NULL */
    pd_changelog log;             /* ops NULL: no log */
    int owns_log;                 /* pd_store_own_log: closed with the store */
    pd_conf_fsync fsync;          /* when the log is synced (pd_store_set_fsync) */

    /* Updates gathered into batches (pd_store_update_enqueue): the ones
     * queued and not yet taken, oldest first, and per lane bucket a count
     * of the ordered tasks queued in it, so a batch takes only updates
     * with nothing else between them in their lane (a bucket shared by two
     * lanes only splits batches more often). */
    pthread_mutex_t q_lock;
    pd_store_queued *q_head, *q_tail;
    uint64_t lane_seq[PD__LANE_BUCKETS];

    /* Raced updates (pd_store_set_race_retry): the policy, and the tail's
     * applies told to the updates waiting for them. A waiter reads the
     * scene's version under applied_lock, and the tail broadcasts under
     * it after its change is served, so no wakeup is lost. */
    _Atomic uint32_t race_attempts;   /* 0 or 1: never built again */
    _Atomic uint32_t race_wait_ms;
    _Atomic uint64_t race_retries, race_gave_up;
    _Atomic uint32_t race_waiters;    /* updates in pd__race_again: the tail wakes them */
    pthread_mutex_t applied_lock;
    pthread_cond_t applied;           /* CLOCK_MONOTONIC */
};

pd_store *pd_store_create(pd_registry *registry, pd_world_store *world)
{
    pd_store *st = calloc(1, sizeof *st);
    if (st) {
        pthread_mutex_init(&st->q_lock, NULL);
        pthread_mutex_init(&st->applied_lock, NULL);
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&st->applied, &ca);
        pthread_condattr_destroy(&ca);
        st->registry = registry;
        st->world = world;
        st->fsync = PD_CONF_FSYNC_EVERYSEC;
    }
    return st;
}

void pd_store_destroy(pd_store *st)
{
    if (st && st->owns_log)
        st->log.ops->close(st->log.log);
    if (st) {
        pthread_mutex_destroy(&st->q_lock);
        pthread_mutex_destroy(&st->applied_lock);
        pthread_cond_destroy(&st->applied);
    }
    free(st);
}

void pd_store_set_world(pd_store *st, pd_world_store *world)
{
    st->world = world;
}

void pd_store_set_log(pd_store *st, pd_changelog log)
{
    st->log = log;
    st->owns_log = 0;
}

/* ---- the log's life ------------------------------------------------------ */

int pd_store_replay(pd_store *st, pd_changelog log, pd_journal_replay_stats *stats, char *err, size_t errlen)
{
    if (!log.ops) {
        snprintf(err, errlen, "no change log");
        return -1;
    }
    int rc = log.ops->replay(log.log, st->registry, st->world, stats, err, errlen);
    if (rc != 0)
        log.ops->close(log.log);
    return rc;
}

void pd_store_own_log(pd_store *st, pd_changelog log, pd_conf_fsync fsync)
{
    st->log = log;
    st->owns_log = log.ops != NULL;
    st->fsync = fsync;
}

void pd_store_set_fsync(pd_store *st, pd_conf_fsync fsync)
{
    st->fsync = fsync;
}

void pd_store_set_race_retry(pd_store *st, uint32_t attempts, uint32_t wait_ms)
{
    atomic_store(&st->race_attempts, attempts);
    atomic_store(&st->race_wait_ms, wait_ms);
}

void pd_store_race_stats(const pd_store *st, uint64_t *retries, uint64_t *gave_up)
{
    *retries = atomic_load(&((pd_store *)st)->race_retries);
    *gave_up = atomic_load(&((pd_store *)st)->race_gave_up);
}

pd_conf_fsync pd_store_fsync(const pd_store *st)
{
    return st->fsync;
}

int pd_store_has_log(const pd_store *st)
{
    return st->log.ops != NULL;
}

int pd_store_sync_due(pd_store *st)
{
    return pd_store_has_log(st) && st->fsync == PD_CONF_FSYNC_EVERYSEC && st->log.ops->dirty(st->log.log);
}

int pd_store_sync(pd_store *st)
{
    return pd_store_has_log(st) ? st->log.ops->sync(st->log.log) : 0;
}

int pd_store_compaction_due(pd_store *st)
{
    return pd_store_has_log(st) && st->log.ops->wants_compaction(st->log.log);
}

int pd_store_compact(pd_store *st, char *err, size_t errlen)
{
    if (!pd_store_has_log(st))
        return 0;
    if (st->log.ops->snapshot(st->log.log, st->registry, err, errlen) != 0)
        return -1;
    /* The snapshot stands once written: what compact leaves behind is
     * never replayed again, so its failure is not the compaction's. */
    (void)st->log.ops->compact(st->log.log, err, errlen);
    return 0;
}

int pd_store_tail(pd_store *st, const char *name, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                  size_t errlen)
{
    if (!pd_store_has_log(st)) {
        snprintf(err, errlen, "no change log");
        return -1;
    }
    return st->log.ops->tail(st->log.log, name, from, fn, user, err, errlen);
}

int pd_store_log_state(pd_store *st, uint64_t *log_bytes, uint64_t *snapshot_bytes, int *failed)
{
    *log_bytes = *snapshot_bytes = 0;
    *failed = 0;
    if (!pd_store_has_log(st))
        return 0;
    st->log.ops->sizes(st->log.log, log_bytes, snapshot_bytes);
    *failed = st->log.ops->failed(st->log.log);
    return 1;
}

pd_registry *pd_store_registry(const pd_store *st)
{
    return st->registry;
}

pd_world_store *pd_store_world(const pd_store *st)
{
    return st->world;
}

/* ---- the log around one change ------------------------------------------ */

static int pd__has_log(const pd_store *st)
{
    return st->log.ops != NULL;
}

static void pd__refused(const pd_store *st, char *message, size_t len)
{
    snprintf(message, len, "%s; changes are refused until pathd restarts", st->log.ops->why(st->log.log));
}

/* The log's lock before a change (none without a log); PD_INTERNAL with
 * the reason when the log refuses changes. */
static pd_status pd__begin(pd_store *st, char *message, size_t len)
{
    if (!pd__has_log(st) || st->log.ops->lock(st->log.log) == 0)
        return PD_OK;
    pd__refused(st, message, len);
    return PD_INTERNAL;
}

/* After the lock was let go: PD_INTERNAL when the log did not take a change
 * that was applied all the same (a drop: applied_rc), and for a change it
 * took, the sync the store's policy asks for ("always") - outside the
 * lock, so other changes append meanwhile and one fsync may cover several. */
static pd_status pd__settle(pd_store *st, pd_status status, int applied_rc, char *message, size_t len)
{
    if (!pd__has_log(st))
        return status;
    if (status == PD_OK && applied_rc != 0) {
        snprintf(message, len, "applied, but not journalled: %s", st->log.ops->why(st->log.log));
        return PD_INTERNAL;
    }
    if (status == PD_OK && st->fsync == PD_CONF_FSYNC_ALWAYS && st->log.ops->sync(st->log.log) != 0) {
        snprintf(message, len, "applied and journalled, but the journal's fsync failed: %s", strerror(errno));
        return PD_INTERNAL;
    }
    return status;
}

static int pd__append(pd_store *st, const pd_journal_record *rec)
{
    return st->log.ops->append(st->log.log, rec);
}

/* After an append refused, under the lock: the retryable status to answer
 * when the log says the refusal is not final, else PD_INTERNAL. */
static pd_status pd__refusal(const pd_store *st)
{
    return st->log.ops->refusal ? st->log.ops->refusal(st->log.log) : PD_INTERNAL;
}

/* After an append refused, under the lock: the version a keyed change made
 * the first time (it is in the log already), else 0. */
static uint64_t pd__duplicate(const pd_store *st, const char *key)
{
    return key && key[0] && st->log.ops->duplicate ? st->log.ops->duplicate(st->log.log) : 0;
}

/* The answer's message for a change the log did not take. */
static void pd__not_taken(const pd_store *st, pd_status refusal, const char *what, char *message, size_t len)
{
    if (refusal != PD_INTERNAL)
        snprintf(message, len, "%s, the change log did not take it: %s; nothing changed, try again", what,
                 st->log.ops->why(st->log.log));
    else
        snprintf(message, len, "%s, the journal did not take it: %s; changes are refused until pathd restarts", what,
                 st->log.ops->why(st->log.log));
}

/* ---- cell updates --------------------------------------------------------- */

/* A keyed update that changed no cell made no record, so the log never
 * met its key: when it is a resend of a change that went through (its
 * cells are as that change left them), the answer is that change's
 * version, not the version served now - which another change made, and a
 * client would take as its own. A log that could not be asked: retryable. */
static void pd__answer_unchanged(pd_store *st, const char *name, const char *key, pd_store_update *out)
{
    if (out->status != PD_OK || out->update.cells_changed != 0 || !key || !key[0] || !pd__has_log(st) ||
        !st->log.ops->key_version)
        return;
    uint64_t v = 0;
    char why[200] = "";
    int seen = st->log.ops->key_version(st->log.log, name, key, &v, why, sizeof why);
    if (seen > 0) {
        out->update.version = v;
    } else if (seen < 0) {
        out->status = PD_UNAVAILABLE;
        snprintf(out->message, sizeof out->message,
                 "scene '%.40s': it changed no cell and the log could not say if its key was seen: %.100s; "
                 "try again",
                 name, why);
    }
}

/* One update's part in the registry's hooks. */
typedef struct pd__update_ctx {
    pd_store *st;
    const char *name;
    const pd_scene_update *ops;
    size_t n_ops;
    const char *key;              /* the idempotency key, or NULL */
    int refused;                  /* the log refused changes: nothing applied */
    int append_rc;                /* the log did not take the record: not served */
    pd_status refusal;            /* then: pd__refusal */
    uint64_t duplicate;           /* then: the version the key made before, or 0 */
    uint64_t raced;               /* then: the log's version when another writer's came first */
} pd__update_ctx;

static int pd__update_lock(void *user)
{
    pd__update_ctx *u = user;
    u->refused = u->st->log.ops->lock(u->st->log.log) != 0;
    return u->refused ? -1 : 0;
}

/* Under the registry's swap, just before the version is served. */
static int pd__update_commit(void *user, const pd_scene_update_result *res)
{
    pd__update_ctx *u = user;
    pd_journal_record rec = { .type = PD_JOURNAL_UPDATE, .version = res->version, .key = u->key,
                              .ops = (pd_scene_update *)u->ops, .n_ops = u->n_ops };
    snprintf(rec.scene, sizeof rec.scene, "%s", u->name);
    u->append_rc = pd__append(u->st, &rec);
    if (u->append_rc != 0) {
        u->refusal = pd__refusal(u->st);
        u->duplicate = pd__duplicate(u->st, u->key);
        u->raced = u->st->log.ops->raced ? u->st->log.ops->raced(u->st->log.log) : 0;
    }
    return u->append_rc;
}

static void pd__update_unlock(void *user, int published, const pd_scene_update_result *res)
{
    pd__update_ctx *u = user;
    (void)published;
    (void)res;
    u->st->log.ops->unlock(u->st->log.log);
}

pd_status pd_store_update_cells(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                pd_store_update *out)
{
    return pd_store_update_cells_keyed(st, name, ops, n_ops, NULL, out);
}

/* ---- updates that lost the log to another replica's ---------------------- */

static uint64_t pd__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The version `name` serves now (0: none). */
static uint64_t pd__served_version(pd_store *st, const char *name)
{
    pd_scene *cur = pd_registry_acquire(st->registry, name);
    uint64_t v = cur ? cur->version : 0;
    pd_scene_release(cur);
    return v;
}

/* One race's retry: whether the update, refused because the log is at
 * `log_version` (another writer's), is built again - after this pathd's
 * tail applied the log up to there, within the update's deadline (set at
 * its first race) and its attempts. Counted either way. No lock held. */
static int pd__race_again(pd_store *st, const char *name, uint64_t log_version, unsigned attempt,
                          uint64_t *deadline_ns)
{
    if (!log_version)
        return 0;
    uint32_t attempts = atomic_load(&st->race_attempts);
    if (attempt >= attempts) {
        if (attempts > 1)
            atomic_fetch_add(&st->race_gave_up, 1);
        return 0;
    }
    if (!*deadline_ns)
        *deadline_ns = pd__mono_ns() + (uint64_t)atomic_load(&st->race_wait_ms) * 1000000u;
    int caught_up;
    atomic_fetch_add(&st->race_waiters, 1); /* before the version is read: see pd__applied_note */
    /* Pairs with the applier's fence (publish version, fence, read
     * race_waiters): without one here too the C11 model lets the version
     * read below move before the increment, and a wakeup be missed (the
     * wait would then run to its deadline). */
    atomic_thread_fence(memory_order_seq_cst);
    pthread_mutex_lock(&st->applied_lock);
    while (!(caught_up = pd__served_version(st, name) >= log_version)) {
        uint64_t deadline = *deadline_ns;
        if (pd__mono_ns() >= deadline)
            break;
        struct timespec ts = { (time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u) };
        pthread_cond_timedwait(&st->applied, &st->applied_lock, &ts);
    }
    pthread_mutex_unlock(&st->applied_lock);
    atomic_fetch_sub(&st->race_waiters, 1);
    atomic_fetch_add(caught_up ? &st->race_retries : &st->race_gave_up, 1);
    return caught_up;
}

/* The tail applied a record: the raced updates waiting see if it is theirs. */
static void pd__applied_note(pd_store *st)
{
    /* A tail catching up applies 100,000 records a second: the lock only
     * when an update waits. The version was served before this fence; a
     * waiter counted after it reads that version itself. */
    atomic_thread_fence(memory_order_seq_cst);
    if (!atomic_load(&st->race_waiters))
        return;
    pthread_mutex_lock(&st->applied_lock);
    pthread_cond_broadcast(&st->applied);
    pthread_mutex_unlock(&st->applied_lock);
}

static pd_status pd__update_cells_once(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                       const char *key, pd_store_update *out, uint64_t *raced);

pd_status pd_store_update_cells_keyed(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                      const char *key, pd_store_update *out)
{
    uint64_t raced = 0, deadline = 0;
    for (unsigned attempt = 1;; attempt++) {
        pd__update_cells_once(st, name, ops, n_ops, key, out, &raced);
        /* Lost to another replica's append: validated and built again on
         * the state its records make, once this pathd applied them. */
        if (!pd__race_again(st, name, raced, attempt, &deadline))
            return out->status;
    }
}

/* One attempt of pd_store_update_cells_keyed; *raced: the log's version
 * when the log refused it only because another writer appended first. */
static pd_status pd__update_cells_once(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                       const char *key, pd_store_update *out, uint64_t *raced)
{
    *raced = 0;
    memset(out, 0, sizeof *out);
    /* The log's lock covers only the swap and the append: other scenes'
     * updates build their versions meanwhile. */
    pd__update_ctx u = { .st = st, .name = name, .ops = ops, .n_ops = n_ops, .key = key };
    const pd_registry_update_hooks hooks = { .before_publish = pd__update_lock, .commit = pd__update_commit,
                                             .after_publish = pd__update_unlock, .user = &u };
    out->status = pd_registry_update_hooked(st->registry, name, ops, n_ops, pd__has_log(st) ? &hooks : NULL,
                                            &out->update);
    if (u.refused)
        pd__refused(st, out->message, sizeof out->message);
    else if (u.append_rc != 0 && u.duplicate) {
        /* Made before under this key: answered as it was, nothing applied. */
        out->status = PD_OK;
        out->update.version = u.duplicate;
        out->update.cells_changed = 0;
        out->message[0] = '\0';
        return out->status;
    } else if (u.append_rc != 0) {
        pd__not_taken(st, u.refusal, "not applied", out->message, sizeof out->message);
        out->status = u.refusal;
        *raced = u.refusal == PD_UNAVAILABLE ? u.raced : 0;
    } else if (out->status == PD_LIMIT_EXCEEDED)
        snprintf(out->message, sizeof out->message,
                 "scene '%s': its new version needs %" PRIu64 " bytes, scenes hold %" PRIu64
                 ", limits.max_scene_bytes would be passed",
                 name, out->update.bytes_needed, out->update.bytes_held);
    pd__answer_unchanged(st, name, key, out);
    out->status = pd__settle(st, out->status, 0, out->message, sizeof out->message);
    /* Refreshing the world before the answer goes out means a route asked
     * for after the update's answer already plans around the change. */
    if (out->status == PD_OK && st->world)
        out->world_refresh = pd_world_store_refresh(st->world, st->registry, name, out->world_refresh_error,
                                                    sizeof out->world_refresh_error);
    return out->status;
}

/* ---- several updates of one scene at once ------------------------------- */

int pd_store_batches(const pd_store *st)
{
    return st->log.ops && st->log.ops->append_many;
}

/* A batch's part in the registry's chain hooks. */
typedef struct pd__batch_ctx {
    pd_store *st;
    const char *name;
    pd_store_batch_item *items;
    int refused;                  /* the log refused changes: nothing applied */
    int committed;                /* commit ran */
    size_t served;                /* items from the first that are served */
    pd_changelog_outcome *outcome;    /* per item (those that made a version) */
    size_t first_refused;         /* the item whose record the log refused first, or SIZE_MAX */
    char why[PD_STORE_MESSAGE_MAX];   /* then: why (the log's why, read under its lock) */
} pd__batch_ctx;

static int pd__batch_lock(void *user)
{
    pd__batch_ctx *b = user;
    b->refused = b->st->log.ops->lock(b->st->log.log) != 0;
    return b->refused ? -1 : 0;
}

/* The records of the items that made versions, appended together (or one
 * by one, stopping at the first refused, for a log without append_many):
 * the items before the first refused record are served. */
static size_t pd__batch_commit(void *user, pd_registry_chain_item *ci, size_t n)
{
    pd__batch_ctx *b = user;
    b->committed = 1;
    pd_journal_record *recs = calloc(n, sizeof *recs);
    size_t *item_of = calloc(n, sizeof *item_of);
    pd_changelog_outcome *out = calloc(n, sizeof *out);
    if (!recs || !item_of || !out) {
        free(recs);
        free(item_of);
        free(out);
        /* Nothing appended: the whole batch is retryable. */
        b->first_refused = 0;
        b->outcome[0] = (pd_changelog_outcome){ .refusal = PD_UNAVAILABLE };
        snprintf(b->why, sizeof b->why, "out of memory");
        return b->served = 0;
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (ci[i].status != PD_OK || ci[i].res.cells_changed == 0)
            continue;
        pd_journal_record *rec = &recs[m];
        rec->type = PD_JOURNAL_UPDATE;
        rec->version = ci[i].res.version;
        rec->key = b->items[i].key;
        rec->ops = (pd_scene_update *)ci[i].ops;
        rec->n_ops = ci[i].n_ops;
        snprintf(rec->scene, sizeof rec->scene, "%s", b->name);
        item_of[m++] = i;
    }
    size_t taken = 0;
    const pd_changelog_ops *ops = b->st->log.ops;
    if (ops->append_many) {
        taken = ops->append_many(b->st->log.log, recs, m, out);
    } else {
        for (; taken < m && ops->append(b->st->log.log, &recs[taken]) == 0; taken++)
            out[taken].refusal = PD_OK;
        for (size_t k = taken; k < m; k++)
            out[k] = (pd_changelog_outcome){
                .refusal = k == taken ? pd__refusal(b->st) : PD_INTERNAL,
                .duplicate = k == taken ? pd__duplicate(b->st, recs[k].key) : 0,
                .raced = k == taken && ops->raced ? ops->raced(b->st->log.log) : 0,
            };
    }
    for (size_t k = 0; k < m; k++)
        b->outcome[item_of[k]] = out[k];
    b->first_refused = taken < m ? item_of[taken] : SIZE_MAX;
    if (taken < m)
        snprintf(b->why, sizeof b->why, "%s", ops->why(b->st->log.log));
    b->served = taken < m ? item_of[taken] : n;
    free(recs);
    free(item_of);
    free(out);
    return b->served;
}

static void pd__batch_unlock(void *user, size_t served, int current)
{
    pd__batch_ctx *b = user;
    (void)served;
    (void)current;
    b->st->log.ops->unlock(b->st->log.log);
}

static uint64_t pd__update_batch_once(pd_store *st, const char *name, pd_store_batch_item *items, size_t n,
                                      size_t *from);

void pd_store_update_cells_batch(pd_store *st, const char *name, pd_store_batch_item *items, size_t n)
{
    if (n == 0)
        return;
    if (n > PD_STORE_BATCH_MAX || !pd__has_log(st)) {
        for (size_t i = 0; i < n; i++)
            pd_store_update_cells_keyed(st, name, items[i].ops, items[i].n_ops, items[i].key, &items[i].out);
        return;
    }
    /* The items before the first record the log refused are served (their
     * answers stand); when it lost to another replica's append, that one
     * and every later one are built again, in their order, on the state
     * the winner's records make. */
    uint64_t deadline = 0;
    size_t done = 0;
    for (unsigned attempt = 1;; attempt++) {
        size_t from = 0;
        uint64_t raced = pd__update_batch_once(st, name, items + done, n - done, &from);
        if (!pd__race_again(st, name, raced, attempt, &deadline))
            return;
        done += from;
    }
}

/* One attempt of pd_store_update_cells_batch: every item answered; the
 * log's version when the first record it refused lost to another writer's
 * append (*from: that item), else 0. */
static uint64_t pd__update_batch_once(pd_store *st, const char *name, pd_store_batch_item *items, size_t n,
                                      size_t *from)
{
    pd_registry_chain_item ci[PD_STORE_BATCH_MAX];
    pd_changelog_outcome outcome[PD_STORE_BATCH_MAX];
    for (size_t i = 0; i < n; i++) {
        memset(&items[i].out, 0, sizeof items[i].out);
        ci[i] = (pd_registry_chain_item){ .ops = items[i].ops, .n_ops = items[i].n_ops };
        outcome[i] = (pd_changelog_outcome){ .refusal = PD_OK };
    }
    pd__batch_ctx b = { .st = st, .name = name, .items = items, .outcome = outcome, .first_refused = SIZE_MAX };
    const pd_registry_chain_hooks hooks = { .before_publish = pd__batch_lock, .commit = pd__batch_commit,
                                            .after_publish = pd__batch_unlock, .user = &b };
    pd_status whole = pd_registry_update_chain(st->registry, name, ci, n, &hooks);
    const char *first_why = b.why;
    int served_change = 0;
    for (size_t i = 0; i < n; i++) {
        pd_store_update *out = &items[i].out;
        out->status = ci[i].status;
        out->update = ci[i].res;
        if (whole == PD_INVALID_ARGUMENT) {
            out->status = whole;
            continue;
        }
        if (b.refused && out->status == PD_INTERNAL) {
            pd__refused(st, out->message, sizeof out->message);
            continue;
        }
        /* At or after the first record the log refused, an update built
         * on unserved cells - even one that changed nothing on them - is
         * not answered from them; its own invalid input still is. */
        if (b.committed && i >= b.served && ci[i].status == PD_OK) {
            const pd_changelog_outcome *o = &outcome[i];
            if (o->duplicate) {
                /* Made before under this key: answered as it was. */
                out->status = PD_OK;
                out->update.version = o->duplicate;
                out->update.cells_changed = 0;
                continue;
            }
            pd_status refusal = i == b.first_refused ? o->refusal
                                : st->log.ops->failed(st->log.log) ? PD_INTERNAL : PD_UNAVAILABLE;
            out->status = refusal;
            if (i == b.first_refused)
                snprintf(out->message, sizeof out->message, "not applied, the change log did not take it: %.150s; %s",
                         first_why, refusal == PD_INTERNAL ? "changes are refused until pathd restarts"
                                                           : "nothing changed, try again");
            else
                snprintf(out->message, sizeof out->message,
                         "not applied: it was made on an update of scene '%.64s' the change log did not take (%.60s); "
                         "nothing changed, try again",
                         name, first_why);
            continue;
        }
        if (out->status == PD_LIMIT_EXCEEDED)
            snprintf(out->message, sizeof out->message,
                     "scene '%s': its new version needs %" PRIu64 " bytes, scenes hold %" PRIu64
                     ", limits.max_scene_bytes would be passed",
                     name, out->update.bytes_needed, out->update.bytes_held);
        pd__answer_unchanged(st, name, items[i].key, out);
        out->status = pd__settle(st, out->status, 0, out->message, sizeof out->message);
        served_change |= out->status == PD_OK && out->update.cells_changed > 0;
    }
    /* One refresh of the world's tables covers every version served. */
    if (served_change && st->world) {
        pd_status wr = PD_OK;
        char why[PD_REASON_SHORT_MAX] = "";
        wr = pd_world_store_refresh(st->world, st->registry, name, why, sizeof why);
        for (size_t i = 0; i < n; i++) {
            if (items[i].out.status != PD_OK)
                continue;
            items[i].out.world_refresh = wr;
            memcpy(items[i].out.world_refresh_error, why, sizeof why);
        }
    }
    size_t first = b.first_refused;
    if (whole == PD_INVALID_ARGUMENT || !b.committed || first >= n || items[first].out.status != PD_UNAVAILABLE)
        return 0;
    *from = first;
    return outcome[first].raced;
}

/* ---- gathering queued updates into batches ------------------------------- */

struct pd_store_queued {
    pd_store_queued *prev, *next;     /* in the store's queue while not taken */
    int in_queue;
    int refs;                         /* the caller's and a batch's (q_lock) */
    int armed;                        /* submitted: a batch may take it */
    int may_batch;
    int done;                         /* out holds its answer */
    uint32_t bucket;
    uint64_t seq;                     /* its place among its bucket's ordered tasks */
    char name[PD_CONF_MAX_NAME];
    char key[PD_IDEMPOTENCY_KEY_MAX + 1];
    pd_scene_update *ops;             /* copies, cells included (one block) */
    size_t n_ops;
    pd_store_update out;
};

static uint32_t pd__bucket(uint64_t lane)
{
    return (uint32_t)(lane ^ (lane >> 32)) & (PD__LANE_BUCKETS - 1);
}

void pd_store_lane_note(pd_store *st, uint64_t lane, uint64_t lane2)
{
    if (!pd_store_batches(st))
        return;
    uint32_t a = pd__bucket(lane), b = pd__bucket(lane2);
    pthread_mutex_lock(&st->q_lock);
    st->lane_seq[a]++;
    if (b != a)
        st->lane_seq[b]++;
    pthread_mutex_unlock(&st->q_lock);
}

static void pd__unlink(pd_store *st, pd_store_queued *q)
{
    if (!q->in_queue)
        return;
    if (q->prev)
        q->prev->next = q->next;
    else
        st->q_head = q->next;
    if (q->next)
        q->next->prev = q->prev;
    else
        st->q_tail = q->prev;
    q->prev = q->next = NULL;
    q->in_queue = 0;
}

/* Drops one reference (q_lock held). */
static void pd__unref(pd_store_queued *q)
{
    if (--q->refs == 0) {
        free(q->ops);
        free(q);
    }
}

pd_store_queued *pd_store_update_enqueue(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                         const char *key, uint64_t lane, int may_batch)
{
    if (!pd_store_batches(st) || !name || strlen(name) >= PD_CONF_MAX_NAME || n_ops == 0 ||
        n_ops > PD_SCENE_MAX_UPDATE_OPS || (key && strlen(key) > PD_IDEMPOTENCY_KEY_MAX))
        return NULL;
    size_t cells = 0;
    for (size_t i = 0; i < n_ops; i++)
        cells += ops[i].is_rect || !ops[i].cells ? 0 : ops[i].n_cells;
    pd_store_queued *q = calloc(1, sizeof *q);
    pd_scene_update *copy = malloc(n_ops * sizeof *copy + cells * sizeof(pd_point));
    if (!q || !copy) {
        free(q);
        free(copy);
        return NULL;
    }
    pd_point *at = (pd_point *)(copy + n_ops);
    for (size_t i = 0; i < n_ops; i++) {
        copy[i] = ops[i];
        if (!ops[i].is_rect && ops[i].cells) {
            memcpy(at, ops[i].cells, ops[i].n_cells * sizeof *at);
            copy[i].cells = at;
            at += ops[i].n_cells;
        }
    }
    q->ops = copy;
    q->n_ops = n_ops;
    q->refs = 1;
    q->may_batch = may_batch;
    snprintf(q->name, sizeof q->name, "%s", name);
    snprintf(q->key, sizeof q->key, "%s", key ? key : "");
    q->bucket = pd__bucket(lane);
    pthread_mutex_lock(&st->q_lock);
    q->seq = ++st->lane_seq[q->bucket];
    q->prev = st->q_tail;
    if (st->q_tail)
        st->q_tail->next = q;
    else
        st->q_head = q;
    st->q_tail = q;
    q->in_queue = 1;
    pthread_mutex_unlock(&st->q_lock);
    return q;
}

void pd_store_update_submitted(pd_store *st, pd_store_queued *q, int accepted)
{
    if (!q)
        return;
    pthread_mutex_lock(&st->q_lock);
    if (accepted)
        q->armed = 1;
    else
        pd__unlink(st, q);
    pthread_mutex_unlock(&st->q_lock);
}

pd_status pd_store_update_run(pd_store *st, pd_store_queued *q, pd_store_update *out)
{
    pd_store_queued *batch[PD_STORE_BATCH_MAX];
    size_t n = 0;
    pthread_mutex_lock(&st->q_lock);
    if (q->done) {
        /* A batch before it in its lane made its answer. */
        *out = q->out;
        pthread_mutex_unlock(&st->q_lock);
        return out->status;
    }
    /* It runs: it was submitted, whether or not the submitter has said so
     * yet. The updates right after it in its lane join it. */
    batch[n++] = q;
    q->refs++;
    for (pd_store_queued *e = q->in_queue ? q->next : NULL; e && n < PD_STORE_BATCH_MAX; e = e->next) {
        if (e->bucket != q->bucket)
            continue; /* another lane's: not in the way */
        if (e->seq != batch[n - 1]->seq + 1 || !e->armed || !e->may_batch || strcmp(e->name, q->name) != 0)
            break;
        batch[n++] = e;
        e->refs++;
    }
    for (size_t i = 0; i < n; i++)
        pd__unlink(st, batch[i]);
    pthread_mutex_unlock(&st->q_lock);

    pd_store_batch_item items[PD_STORE_BATCH_MAX];
    for (size_t i = 0; i < n; i++)
        items[i] = (pd_store_batch_item){ .ops = batch[i]->ops, .n_ops = batch[i]->n_ops,
                                          .key = batch[i]->key[0] ? batch[i]->key : NULL };
    if (n == 1)
        pd_store_update_cells_keyed(st, q->name, q->ops, q->n_ops, items[0].key, &items[0].out);
    else
        pd_store_update_cells_batch(st, q->name, items, n);

    pthread_mutex_lock(&st->q_lock);
    for (size_t i = 0; i < n; i++) {
        batch[i]->out = items[i].out;
        batch[i]->done = 1;
    }
    *out = q->out;
    for (size_t i = 0; i < n; i++)
        pd__unref(batch[i]);
    pthread_mutex_unlock(&st->q_lock);
    return out->status;
}

void pd_store_update_forget(pd_store *st, pd_store_queued *q)
{
    if (!q)
        return;
    pthread_mutex_lock(&st->q_lock);
    pd__unlink(st, q);
    pd__unref(q);
    pthread_mutex_unlock(&st->q_lock);
}

/* ---- new scenes, instances, drops --------------------------------------- */

typedef struct pd__add_ctx {
    pd_store *st;
    pd_store_change *out;
    const char *key;              /* the idempotency key, or NULL */
    pd_status refusal;            /* the log did not take the record: pd__refusal, else PD_OK */
    uint64_t duplicate;           /* then: the version the key made before, or 0 */
} pd__add_ctx;

/* The record of a scene about to be served (the registry's commit): an
 * instance names its template's version, a scene of its own holds its
 * cells. */
static int pd__add_commit(void *user, const pd_scene *made, const pd_scene *tmpl, char *err, size_t errlen)
{
    pd__add_ctx *a = user;
    pd_journal_record rec;
    int rc;
    if (tmpl) {
        memset(&rec, 0, sizeof rec);
        rec.type = PD_JOURNAL_INSTANCE;
        rec.version = made->version;
        rec.tmpl_version = tmpl->version;
        rec.key = a->key;
        snprintf(rec.scene, sizeof rec.scene, "%s", made->name);
        snprintf(rec.tmpl, sizeof rec.tmpl, "%s", tmpl->name);
        rc = pd__append(a->st, &rec);
    } else {
        rc = pd_journal_scene_record(made, &rec);
        rec.key = a->key;
        if (rc == 0)
            rc = pd__append(a->st, &rec);
        rec.key = NULL;
        pd_journal_record_free(&rec);
    }
    if (rc != 0) {
        a->refusal = pd__refusal(a->st);
        a->duplicate = pd__duplicate(a->st, a->key);
        pd__not_taken(a->st, a->refusal, "not served", err, errlen);
    }
    return rc;
}

/* What an add or an instance shares: the lock, the registry call (which
 * calls the commit), the settle, the new scene's bytes. */
typedef pd_status (*pd__add_fn)(pd_store *st, const pd_registry_commit *commit, void *arg, pd_store_change *out);

/* owned: a scene the add takes over (released here when the log refuses
 * before the add is tried), or NULL. */
static pd_status pd__add(pd_store *st, pd__add_fn add, void *arg, pd_scene *owned, const char *name,
                         const char *key, pd_store_change *out)
{
    if ((out->status = pd__begin(st, out->message, sizeof out->message)) != PD_OK) {
        pd_scene_release(owned);
        out->scene_bytes = pd_registry_bytes(st->registry);
        return out->status;
    }
    pd__add_ctx a = { st, out, key, PD_OK, 0 };
    const pd_registry_commit commit = { .fn = pd__add_commit, .user = &a };
    pd_status st_add = add(st, pd__has_log(st) ? &commit : NULL, arg, out);
    if (a.refusal != PD_OK)
        st_add = a.refusal; /* never served; retryable when the log says so */
    if (a.duplicate) {
        /* The log has it from a first try whose answer was lost. */
        st_add = PD_OK;
        out->version = a.duplicate;
        out->message[0] = '\0';
    }
    out->applied = st_add == PD_OK && !a.duplicate;
    if (pd__has_log(st))
        st->log.ops->unlock(st->log.log);
    out->status = pd__settle(st, st_add, 0, out->message, sizeof out->message);
    if (out->applied) {
        pd_scene *s = pd_registry_acquire(st->registry, name);
        out->own_bytes = s ? pd_scene_own_bytes(s) : 0;
        pd_scene_release(s);
        /* Routes within the new scene are served once the world holds it:
         * the next route request syncs the world, once for a whole burst. */
        pd_world_store_mark_stale(st->world, st->registry);
    }
    out->scene_bytes = pd_registry_bytes(st->registry);
    return out->status;
}

static pd_status pd__add_scene(pd_store *st, const pd_registry_commit *commit, void *arg, pd_store_change *out)
{
    pd_scene *s = arg;
    out->version = s->version;
    return pd_registry_add_committed(st->registry, s, commit, out->message, sizeof out->message);
}

pd_status pd_store_add_scene(pd_store *st, pd_scene *s, pd_store_change *out)
{
    return pd_store_add_scene_keyed(st, s, NULL, out);
}

pd_status pd_store_add_scene_keyed(pd_store *st, pd_scene *s, const char *key, pd_store_change *out)
{
    memset(out, 0, sizeof *out);
    char name[PD_CONF_MAX_NAME];
    snprintf(name, sizeof name, "%s", s->name);
    return pd__add(st, pd__add_scene, s, s, name, key, out);
}

typedef struct pd__instance_arg {
    const char *name, *tmpl;
} pd__instance_arg;

static pd_status pd__add_instance(pd_store *st, const pd_registry_commit *commit, void *arg, pd_store_change *out)
{
    const pd__instance_arg *ia = arg;
    pd_status rc = pd_registry_instance_committed(st->registry, ia->name, ia->tmpl, commit, &out->version,
                                                  out->message, sizeof out->message);
    if (rc == PD_OK) {
        /* Under the log's lock the template is still the version the
         * instance copied. */
        pd_scene *t = pd_registry_acquire(st->registry, ia->tmpl);
        out->template_version = t ? t->version : 0;
        out->incarnation = t ? t->incarnation : 0;
        pd_scene_release(t);
    }
    return rc;
}

pd_status pd_store_add_instance(pd_store *st, const char *name, const char *tmpl, pd_store_change *out)
{
    return pd_store_add_instance_keyed(st, name, tmpl, NULL, out);
}

pd_status pd_store_add_instance_keyed(pd_store *st, const char *name, const char *tmpl, const char *key,
                                      pd_store_change *out)
{
    memset(out, 0, sizeof *out);
    pd__instance_arg ia = { name, tmpl };
    return pd__add(st, pd__add_instance, &ia, NULL, name, key, out);
}

pd_status pd_store_drop_scene(pd_store *st, const char *name, int drop_portals, pd_store_change *out)
{
    return pd_store_drop_scene_keyed(st, name, drop_portals, NULL, out);
}

pd_status pd_store_drop_scene_keyed(pd_store *st, const char *name, int drop_portals, const char *key,
                                    pd_store_change *out)
{
    memset(out, 0, sizeof *out);
    if ((out->status = pd__begin(st, out->message, sizeof out->message)) != PD_OK)
        return out->status;
    /* The scene the drop takes: this scene's changes run one at a time
     * (its lane), so only a reload can replace it before the drop, and
     * that keeps its incarnation. Under the log's lock nothing else
     * changes what is served of it (the tail's applies take it too). */
    pd_scene *gone = pd_registry_acquire(st->registry, name);
    out->incarnation = gone ? gone->incarnation : 0;
    out->version = gone ? gone->version : 0;
    pd_scene_release(gone);
    /* Recorded first, then done: a drop the log did not take (no answer,
     * Redis down, another replica's change first) leaves the scene served
     * as the log may still have it, and fails only this request. Done
     * first, a drop whose append went unanswered could not be told from
     * one the log refused: the log failed, and every later change with it
     * (restart to replay). What is checked before the record is what
     * would refuse the drop here. */
    pd_status rc = PD_OK;
    if (!gone) {
        snprintf(out->message, sizeof out->message, "unknown scene '%s'", name);
        rc = PD_UNKNOWN_SCENE;
    } else if (!drop_portals && st->world) {
        pd_world *w = pd_world_store_acquire(st->world);
        size_t naming = w ? pd_world_portals_naming(w, name) : 0;
        pd_world_release(w);
        if (naming > 0) {
            snprintf(out->message, sizeof out->message,
                     "scene '%s' is named by %zu portal%s: drop them too (drop_portals) or keep the scene", name,
                     naming, naming == 1 ? "" : "s");
            rc = PD_SCENE_IN_USE;
        }
    }
    int recorded = rc == PD_OK && pd__has_log(st);
    if (recorded) {
        pd_journal_record rec = { .type = PD_JOURNAL_DROP, .version = out->version, .key = key };
        snprintf(rec.scene, sizeof rec.scene, "%s", name);
        if (pd__append(st, &rec) != 0) {
            uint64_t dup = pd__duplicate(st, key);
            rc = dup ? PD_OK : pd__refusal(st);
            if (dup) {
                /* The key's drop went through before, of another version
                 * (the first try's answer was lost): answered, nothing
                 * done again. */
                out->version = dup;
            } else if (rc == PD_UNKNOWN_SCENE) {
                snprintf(out->message, sizeof out->message, "not dropped here, the change log did not take it: %s",
                         st->log.ops->why(st->log.log));
            } else {
                pd__not_taken(st, rc, "not dropped", out->message, sizeof out->message);
            }
            out->status = rc;
            st->log.ops->unlock(st->log.log);
            out->scene_bytes = pd_registry_bytes(st->registry);
            return out->status;
        }
    }
    uint64_t dropped = 0;
    if (rc == PD_OK)
        rc = pd_world_store_drop_scene(st->world, st->registry, name, drop_portals, &dropped, out->message,
                                       sizeof out->message);
    out->applied = rc == PD_OK;
    if (pd__has_log(st)) {
        st->log.ops->unlock(st->log.log);
        /* Recorded, then not done: only a reload that made a portal name
         * the scene between the check and the drop could (reloads take
         * the log's lock too); the log and this pathd disagree. */
        if (rc != PD_OK && recorded) {
            snprintf(out->message, sizeof out->message,
                     "scene '%s': the drop was recorded but not done here; restart pathd to replay the log", name);
            rc = PD_INTERNAL;
        }
    }
    out->status = pd__settle(st, rc, 0, out->message, sizeof out->message);
    out->scene_bytes = pd_registry_bytes(st->registry);
    return out->status;
}

/* ---- changes another replica made ---------------------------------------- */

/* The log's lock around applying a logged record: not taken when the log
 * refuses changes (it failed): nothing of this pathd's own appends then. */
typedef struct pd__logged_ctx {
    pd_store *st;
    uint64_t want;                /* the version the record makes */
    const char *scene;
    const char *entry_id;         /* the record's id in the log, or NULL */
    int locked;
    int past;                     /* this pathd's own new scene or drop came after it */
} pd__logged_ctx;

/* Not a record type: pd__apply_logged's case of an entry made stale. */
#define PD_JOURNAL_TYPE_OWN_PAST (-1)

/* 1 when the record's entry is at or before this pathd's own latest new
 * scene or drop of its scene (pd_changelog_ops.own_past): read under the
 * log's lock, that append was served already. */
static int pd__own_past(const pd_store *st, const char *scene, const char *entry_id)
{
    return entry_id && pd__has_log(st) && st->log.ops->own_past &&
           st->log.ops->own_past(st->log.log, scene, entry_id);
}

/* The tail's record of entry_id is served (the log's lock held): the
 * log's later appends of the scene name its incarnation. */
static void pd__served(const pd_store *st, const char *scene, const char *entry_id)
{
    if (entry_id && pd__has_log(st) && st->log.ops->served)
        st->log.ops->served(st->log.log, scene, entry_id);
}

static int pd__logged_lock(void *user)
{
    pd__logged_ctx *x = user;
    x->locked = pd__has_log(x->st) && x->st->log.ops->lock(x->st->log.log) == 0;
    return 0;
}

/* Served only when it makes the record's version: otherwise this pathd's
 * own change of that version came first, and this is built on it. */
static int pd__logged_commit(void *user, const pd_scene_update_result *res)
{
    pd__logged_ctx *x = user;
    if (pd__own_past(x->st, x->scene, x->entry_id)) {
        x->past = 1;
        return -1;
    }
    if (x->want != res->version)
        return -1;
    pd__served(x->st, x->scene, x->entry_id); /* served right after, under the same locks */
    return 0;
}

static void pd__logged_unlock(void *user, int published, const pd_scene_update_result *res)
{
    pd__logged_ctx *x = user;
    (void)published, (void)res;
    if (x->locked)
        x->st->log.ops->unlock(x->st->log.log);
    x->locked = 0;
}

static pd_store_logged pd__logged_update(pd_store *st, const pd_journal_record *rec, const char *entry_id,
                                         pd_scene_update_result *out, char *why, size_t len)
{
    /* Made stale by this pathd's own drop or new scene of the name (an
     * own append's mark only grows in the log's order: checked again
     * under the lock below, before anything is served). */
    if (pd__own_past(st, rec->scene, entry_id))
        return PD_STORE_LOGGED_HAD;
    pd_scene *cur = pd_registry_acquire(st->registry, rec->scene);
    uint64_t have = cur ? cur->version : 0;
    pd_scene_release(cur);
    if (!cur) {
        snprintf(why, len, "no such scene");
        return PD_STORE_LOGGED_NOOP;
    }
    if (have >= rec->version)
        return PD_STORE_LOGGED_HAD;
    if (have + 1 != rec->version) {
        snprintf(why, len, "the scene is at version %" PRIu64 ", the record makes %" PRIu64, have, rec->version);
        return PD_STORE_LOGGED_GAP;
    }
    pd__logged_ctx x = { .st = st, .want = rec->version, .scene = rec->scene, .entry_id = entry_id };
    const pd_registry_update_hooks hooks = { .before_publish = pd__logged_lock, .commit = pd__logged_commit,
                                             .after_publish = pd__logged_unlock, .user = &x };
    pd_scene_update_result res;
    pd_status rc = pd_registry_update_hooked(st->registry, rec->scene, rec->ops, rec->n_ops, &hooks, &res);
    if (rc == PD_OK && res.version == rec->version) {
        if (st->world)
            (void)pd_world_store_refresh(st->world, st->registry, rec->scene, why, len);
        if (out)
            *out = res;
        return PD_STORE_LOGGED_APPLIED;
    }
    if (x.past)
        return PD_STORE_LOGGED_HAD; /* this pathd's own drop or new scene of the name came after it */
    cur = pd_registry_acquire(st->registry, rec->scene);
    have = cur ? cur->version : 0;
    pd_scene_release(cur);
    if (have >= rec->version)
        return PD_STORE_LOGGED_HAD; /* this pathd's own change of that version went first */
    snprintf(why, len, "%s", rc != PD_OK ? pd_status_name(rc) : "it changed no cell");
    return PD_STORE_LOGGED_NOOP;
}

pd_store_logged pd_store_apply_logged(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                      char *why, size_t len)
{
    return pd_store_apply_logged_result(st, rp, rec, NULL, why, len);
}

static pd_store_logged pd__apply_logged(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                        const char *entry_id, pd_scene_update_result *res, char *why, size_t len);

pd_store_logged pd_store_apply_logged_result(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                             pd_scene_update_result *res, char *why, size_t len)
{
    return pd_store_apply_logged_entry(st, rp, rec, NULL, res, why, len);
}

pd_store_logged pd_store_apply_logged_entry(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                            const char *entry_id, pd_scene_update_result *res, char *why,
                                            size_t len)
{
    pd_store_logged out = pd__apply_logged(st, rp, rec, entry_id, res, why, len);
    /* Served now (or found served, or skipped): an update raced by this
     * record's writer may build itself again (pd__race_again). */
    pd__applied_note(st);
    return out;
}

static pd_store_logged pd__apply_logged(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                        const char *entry_id, pd_scene_update_result *res, char *why, size_t len)
{
    why[0] = '\0';
    if (res)
        memset(res, 0, sizeof *res);
    if (rec->type == PD_JOURNAL_UPDATE)
        return pd__logged_update(st, rec, entry_id, res, why, len);
    pd__logged_ctx x = { .st = st, .want = rec->version, .scene = rec->scene, .entry_id = entry_id };
    pd__logged_lock(&x);
    pd_scene *cur = pd_registry_acquire(st->registry, rec->scene);
    pd_store_logged out = PD_STORE_LOGGED_APPLIED;
    const char *skip = NULL;
    /* This pathd dropped the name, or made it anew, after this entry: a
     * new scene read here would be made again though dropped, a drop
     * would end the incarnation made since. */
    switch (pd__own_past(st, rec->scene, entry_id) ? PD_JOURNAL_TYPE_OWN_PAST : (int)rec->type) {
    case PD_JOURNAL_TYPE_OWN_PAST:
        out = PD_STORE_LOGGED_HAD;
        break;
    case PD_JOURNAL_SCENE:
    case PD_JOURNAL_INSTANCE:
        /* Served already: this pathd made it (its own append). */
        if (cur)
            out = PD_STORE_LOGGED_HAD;
        break;
    case PD_JOURNAL_DROP:
        if (!cur)
            out = PD_STORE_LOGGED_HAD;
        else if (cur->version != rec->version) {
            snprintf(why, len, "the scene served is at version %" PRIu64 ", the drop was of %" PRIu64, cur->version,
                     rec->version);
            out = PD_STORE_LOGGED_NOOP;
        }
        break;
    case PD_JOURNAL_RESET:
        if (cur && cur->version >= rec->version)
            out = PD_STORE_LOGGED_HAD;
        break;
    default:
        snprintf(why, len, "a snapshot-only record in the log");
        out = PD_STORE_LOGGED_NOOP;
        break;
    }
    pd_scene_release(cur);
    if (out == PD_STORE_LOGGED_APPLIED && (skip = pd_journal_replay_one(rp, rec, why, len)) != NULL) {
        if (skip != why)
            snprintf(why, len, "%s", skip);
        out = PD_STORE_LOGGED_NOOP;
    }
    /* Only a record applied here: one had (this pathd's own, whose
     * answer noted it) or skipped says nothing of what is served. */
    if (out == PD_STORE_LOGGED_APPLIED)
        pd__served(st, rec->scene, entry_id);
    pd__logged_unlock(&x, 0, NULL);
    if (out == PD_STORE_LOGGED_APPLIED && st->world && rec->type != PD_JOURNAL_DROP)
        pd_world_store_mark_stale(st->world, st->registry);
    return out;
}

/* ---- reloads ------------------------------------------------------------ */

void *pd_store_reload_begin(pd_store *st, const pd_scene_set *set)
{
    return pd__has_log(st) ? st->log.ops->reload_begin(st->log.log, st->registry, set) : NULL;
}

void pd_store_reload_end(pd_store *st, void *state)
{
    if (pd__has_log(st) && state)
        st->log.ops->reload_end(st->log.log, st->registry, state);
}
