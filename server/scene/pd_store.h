/*
 * pd_store.h - the world's changes in one place. The store holds the
 * registry of scenes, the world (portals and route tables) and the change
 * log, and every change a client makes goes through it: a cell update, a
 * new scene, an instance, a drop, and a reload's publish. Each is applied,
 * recorded in the log before it is served, made durable as the log's
 * policy says, and answered with the version it made. The query and net
 * layers hold a store, never the three parts separately.
 *
 * The change log is an interface (pd_changelog, its contract below): the
 * file journal (pd_journal.h, pd_journal_file_log) is its first
 * implementation. A log kept elsewhere (a Redis Stream per scene, for
 * replicas) implements the same calls and the callers do not change. The
 * store owns the log's life too: its replay at start, when it is synced
 * (the fsync policy), its compaction and its tails. Without a log (no
 * data_dir) changes are applied in memory only.
 *
 * Changes of one scene run one at a time, in order (the callers' ordered
 * lanes); changes of different scenes run in parallel, and the log's lock
 * serialises only their records, so the log's order is the order of
 * versions.
 */
#ifndef PD_STORE_H
#define PD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "pd_journal.h"
#include "pd_scene.h"
#include "pd_world.h"

/* ---- the change log ----------------------------------------------------
 *
 * The contract every change log keeps (the file journal, pd_journal.h; an
 * in-memory one in tests/unit/test_store_log.c; a Redis Stream later):
 *
 * Records and versions. A log is one ordered sequence of pd_journal_record,
 * each naming its scene and the version it made (a DROP: the version the
 * scene had). Versions count per scene and per incarnation: a scene's
 * records make 1, 2, 3, ... (a reload's RESET may follow any), a scene
 * dropped and made again under its name starts at 1 again. The log's order
 * is the order the changes were served in, because every append happens
 * under the log's lock, inside the registry's swap.
 *
 * Replay. Applying a log's records in order, with pd_journal_replayer's
 * rules, to the scenes the config loads gives the scenes served when the
 * last record was appended: the same names, versions and cells.
 *
 * Threads. replay runs once, before anything else, on any thread (not the
 * loop's: it reads the whole log). lock/append/unlock, reload_begin/end
 * and why run on the thread making the change (a worker, or the loop for a
 * reload). sync, dirty, failed, wants_compaction and sizes may run on any
 * thread at any time and never wait for a change in progress (the loop's
 * timer calls them). tail, snapshot and compact run on any thread but the
 * loop's, while changes go on; snapshot and compact run one at a time.
 * close runs last, when nothing else can call in.
 *
 * Durability. append hands the record over; sync makes everything appended
 * before it durable (the file journal: fdatasync). When sync runs is the
 * store's fsync policy (pd_store_set_fsync), not the log's.
 */

/* pd_journal_tail_fn: called with each record of a tail in order. */

/* What append_many did with one record. */
typedef struct pd_changelog_outcome {
    pd_status refusal;            /* PD_OK: taken; else the status to answer
                                     (retryable, or PD_INTERNAL: the log failed) */
    uint64_t duplicate;           /* not taken: the version its key made the first
                                     time (the change is in the log: answered OK), else 0 */
    uint64_t raced;               /* not taken only because another writer appended
                                     first (see raced below): the log's version, else 0 */
} pd_changelog_outcome;

typedef struct pd_changelog_ops {
    /* Takes the log's change lock; nonzero when the log refuses changes
     * (it failed earlier: why() says why), the lock then not held. */
    int (*lock)(void *log);
    void (*unlock)(void *log);
    /* Under the lock, just before the change is served: its record. 0, or
     * nonzero when the log did not take it (the change is then never
     * served and the log refuses later ones: failed() turns 1). */
    int (*append)(void *log, const pd_journal_record *rec);
    /* Optional (NULL: every refusal is final). Right after append refused
     * a record, under the lock: PD_INTERNAL when the refusal is final (the
     * log failed), or the retryable status to answer when it is not - the
     * log took nothing, did not fail, and the same change may be sent
     * again (PD_UNAVAILABLE: a log server that cannot be reached now). */
    pd_status (*refusal)(void *log);
    /* Optional (NULL: never). Right after append refused a record that
     * carried an idempotency key, under the lock: the version that key
     * made the first time when the change is in the log already (a resent
     * change whose first answer was lost), else 0. The store then applies
     * nothing and answers OK with that version. */
    uint64_t (*duplicate)(void *log);
    /* Optional (NULL: never). Right after append refused a record, under
     * the lock: the log's version when the refusal was only because
     * another writer sharing the log (a replica) appended first - the
     * log is past the version the change was built on, nothing was taken,
     * the key (if any) was not seen - else 0. A pathd that tails the log
     * applies that writer's records, and the store then builds the change
     * again on them (pd_store_set_race_retry). */
    uint64_t (*raced)(void *log);
    /* Optional (NULL: keys are not kept). Not under the lock: the version
     * the change named `key` of scene `scene` made, when the log has seen
     * that key. Asked for a keyed update that changed no cell - a resend
     * of a change that went through finds its cells already as it left
     * them, makes no record, so append never meets its key; without this
     * it would be answered with the version served now, not its own.
     * 1 seen (*version set), 0 not seen, -1 the log could not be asked
     * (why in why: retryable). */
    int (*key_version)(void *log, const char *scene, const char *key, uint64_t *version, char *why,
                       size_t whylen);
    /* Optional (NULL: the store appends one record at a time). Under the
     * lock: n updates of one scene, each made on the one before (versions
     * v, v+1, ...), in one go - the Redis log pipelines them, so they
     * share a round trip. Returns how many from the first were taken;
     * out[i] says what became of each: the first one not taken as append
     * and refusal/duplicate would say, every later one not taken either
     * (it was made on a change the log did not take), answered by its key
     * when the log has seen it. why() says why the first was refused. */
    size_t (*append_many)(void *log, const pd_journal_record *recs, size_t n, pd_changelog_outcome *out);
    /* Optional (NULL: never). Any thread: 1 when the log's entry
     * entry_id (the log's own id of it, as a tail read it) of scene is
     * at or before this pathd's own latest append that made the scene
     * anew or dropped it: the tail skips it (pd_store_apply_logged_entry
     * answers HAD), as what is served of the scene is the log's through
     * that append. */
    int (*own_past)(void *log, const char *scene, const char *entry_id);
    /* Optional (NULL: nothing kept). Under the lock (when the log has not
     * failed), as the tail's record is served: what is served of scene is
     * now the log's through its entry entry_id - the Redis log's appends
     * of the scene name that entry's incarnation from then on
     * (pd_redis_log_served_entry). */
    void (*served)(void *log, const char *scene, const char *entry_id);
    /* Makes every record appended before the call durable. Several changes
     * may share one. 0, or -1 (errno). */
    int (*sync)(void *log);
    /* 1 when something was appended since the last sync began. */
    int (*dirty)(void *log);
    /* Why the log refuses changes (after lock or append failed). */
    const char *(*why)(void *log);
    /* 1 once the log refuses changes. */
    int (*failed)(void *log);
    /* A reload's records, with the lock held from begin to end around the
     * publish: begin sees the set about to be published, end the registry
     * after it. begin returns the state end needs (NULL: nothing to
     * record, or the log failed). */
    void *(*reload_begin)(void *log, pd_registry *r, const pd_scene_set *set);
    void (*reload_end)(void *log, pd_registry *r, void *state);
    /* Applies every record the log holds to r (the config's scenes already
     * loaded) and ws (may be NULL), reporting what it skips; then the log
     * takes appends after them. 0, or -1 with the reason in err (the log
     * is then only to be closed). Fields of stats a log does not have stay
     * 0. */
    int (*replay)(void *log, pd_registry *r, pd_world_store *ws, pd_journal_replay_stats *stats, char *err,
                  size_t errlen);
    /* The records of scene `name` after the one that made version `from`
     * (0: the scene's whole history the log holds; a version no record
     * made, such as a config scene's as loaded, when the log's first
     * record of the scene is the update made on it), in order, to fn. 0, 1
     * when the log no longer holds that point (compacted past it: the
     * reader needs the scene whole, pd_journal_scene_record of what the
     * registry serves, and tails on from its version), -1 with err. */
    int (*tail)(void *log, const char *name, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                size_t errlen);
    /* Records r's state at one instant (taken under the lock; appends go
     * on before and after it) as the point replay starts from. The
     * records before it stay until compact. 0, or -1 with err (the log
     * then replays as before). */
    int (*snapshot)(void *log, pd_registry *r, char *err, size_t errlen);
    /* Drops the records the last snapshot made unneeded. 0, or -1 with err. */
    int (*compact)(void *log, char *err, size_t errlen);
    /* 1 when the log has grown enough since its snapshot to want one. */
    int (*wants_compaction)(void *log);
    /* Bytes held since the last snapshot, and the snapshot's. */
    void (*sizes)(void *log, uint64_t *log_bytes, uint64_t *snapshot_bytes);
    /* Makes what was appended durable unless the log was told not to
     * (the file journal's fsync "no"), and frees the log. */
    void (*close)(void *log);
} pd_changelog_ops;

typedef struct pd_changelog {
    const pd_changelog_ops *ops;  /* NULL: no log */
    void *log;
} pd_changelog;

/* The file journal as a change log: an open one (j stays the caller's), or
 * one to be opened by the store's replay (pd_store_replay), which the
 * store then owns (ops NULL with the reason in err when opts cannot be
 * used or memory ran out). */
pd_changelog pd_journal_changelog(pd_journal *j);
pd_changelog pd_journal_file_log(const pd_journal_opts *opts, char *err, size_t errlen);

/* ---- the store ----------------------------------------------------------- */

typedef struct pd_store pd_store;

/* A store over registry and world (may be NULL: no routes), with no log
 * yet. Neither is owned. NULL when memory ran out. */
pd_store *pd_store_create(pd_registry *registry, pd_world_store *world);
void pd_store_destroy(pd_store *st);

/* Sets the world (may be NULL) and the change log (before any change is
 * made through the store; a log set later records only what follows). A
 * log set here stays the caller's, and is synced as pd_store_set_fsync
 * says. */
void pd_store_set_world(pd_store *st, pd_world_store *world);
void pd_store_set_log(pd_store *st, pd_changelog log);

/* ---- the log's life: replay, fsync, compaction, tails --------------------- */

/* Replays log (pd_changelog_ops.replay) into the store's registry and
 * world. Any thread (not the loop's); the store itself is not changed, so
 * the loop may read it meanwhile. 0, or -1 with the reason in err (log is
 * then closed). */
int pd_store_replay(pd_store *st, pd_changelog log, pd_journal_replay_stats *stats, char *err, size_t errlen);
/* Makes a replayed log the store's (the store closes it: pd_store_destroy)
 * with its fsync policy. On the thread that owns the store, before any
 * change. */
void pd_store_own_log(pd_store *st, pd_changelog log, pd_conf_fsync fsync);

/* The fsync policy: "always" syncs after each change, before its answer;
 * "everysec" whenever pd_store_sync_due says (the server's 1 s timer);
 * "no" never (the OS writes back). Default everysec. */
void pd_store_set_fsync(pd_store *st, pd_conf_fsync fsync);

/* An update (alone or in a batch) whose append the log refused because
 * another writer appended first (pd_changelog_ops.raced) waits until this
 * pathd applied the log up to that writer's version - at most wait_ms in
 * all for the update, as a query waits for limits.max_behind_wait_ms -,
 * is validated and built again on what is served then, and appended
 * again, up to `attempts` appends in all (limits.max_append_attempts)
 * before it is answered with the retryable refusal. Only a pathd that
 * tails the log (a replica) sets it: without it, or with attempts 1, a
 * raced update is answered at once. Its updates of one scene run one at
 * a time in their lane, so the retry keeps them in order. Any thread. */
void pd_store_set_race_retry(pd_store *st, uint32_t attempts, uint32_t wait_ms);
/* Updates built again after a race, and those answered the refusal
 * after their last attempt or wait. Any thread. */
void pd_store_race_stats(const pd_store *st, uint64_t *retries, uint64_t *gave_up);
pd_conf_fsync pd_store_fsync(const pd_store *st);

/* 1 when the store has a log. Any thread. */
int pd_store_has_log(const pd_store *st);
/* 1 when the policy is everysec and something is not yet synced. Any
 * thread, never waits. */
int pd_store_sync_due(pd_store *st);
/* Syncs the log now: 0 (also without a log), or -1 (errno). Not the loop's
 * thread. */
int pd_store_sync(pd_store *st);
/* 1 when the log wants compacting. Any thread, never waits. */
int pd_store_compaction_due(pd_store *st);
/* Snapshot, then compact: the log then replays from the registry's state
 * now. 0 (also without a log), or -1 with err. Not the loop's thread. */
int pd_store_compact(pd_store *st, char *err, size_t errlen);
/* The log's tail of scene `name` after version `from` (see the ops):
 * 0, 1 (not held any more), -1 with err (also without a log). */
int pd_store_tail(pd_store *st, const char *name, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                  size_t errlen);
/* The log's sizes and whether it failed, for /metrics: 1, or 0 (all zeros)
 * without a log. Any thread, never waits. */
int pd_store_log_state(pd_store *st, uint64_t *log_bytes, uint64_t *snapshot_bytes, int *failed);

pd_registry *pd_store_registry(const pd_store *st);
pd_world_store *pd_store_world(const pd_store *st);

/* Longest message the store writes, in bytes with the NUL: a reason and
 * where (PD_REASON_MAX). The query layer's messages carry these on, so
 * PD_QUERY_MESSAGE_MAX is this size. */
#define PD_STORE_MESSAGE_MAX PD_REASON_MAX

/* ---- cell updates --------------------------------------------------------- */

typedef struct pd_store_update {
    pd_status status;
    pd_scene_update_result update;   /* on PD_OK: the version served now */
    pd_status world_refresh;         /* with a world: how refreshing its route tables
                                        went (PD_OK when nothing had to change); the
                                        update stands either way */
    char world_refresh_error[PD_REASON_SHORT_MAX];   /* the reason when world_refresh != PD_OK */
    char message[PD_STORE_MESSAGE_MAX];  /* why, when status != PD_OK */
} pd_store_update;

/* Applies ops (1..PD_SCENE_MAX_UPDATE_OPS, as one version) to scene
 * `name`: builds the version, appends its record under the log's lock just
 * before serving it (a version the log refused is never served: PD_INTERNAL
 * with the reason), syncs the log as the fsync policy says, then refreshes the world's tables for
 * that scene, so a route asked for after the answer plans around it.
 * Statuses of pd_registry_update_hooked, and PD_INTERNAL when the log
 * refused. Returns out->status. */
pd_status pd_store_update_cells(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                pd_store_update *out);
/* The same with the change's idempotency key (NULL or "": none; at most
 * PD_IDEMPOTENCY_KEY_MAX bytes), handed to the log with the record. A log
 * that deduplicates (Redis) answers a key it has seen with the version the
 * first change made: the store then applies nothing and answers OK with
 * that version (update.cells_changed 0). The file journal ignores keys. */
pd_status pd_store_update_cells_keyed(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                      const char *key, pd_store_update *out);

/* ---- several updates of one scene at once (issue 32) ----------------------
 *
 * With a log whose round trip is the cost of an update (Redis: an fsync
 * away), a scene's updates that queue up while one is appended go to the
 * log together: their versions are built one on the other
 * (pd_registry_update_chain), appended in one pipeline (append_many), and
 * served up to the first the log did not take. Each keeps its own
 * version, idempotency key and compare-and-set, and its own answer: the
 * one the same update alone would have had, except that an update made on
 * a change the log refused is refused too (retryable), because its
 * version was built on cells that are not served. */

/* Most updates one batch takes (one pipeline). */
#define PD_STORE_BATCH_MAX 64u

typedef struct pd_store_batch_item {
    const pd_scene_update *ops;   /* 1..PD_SCENE_MAX_UPDATE_OPS, as one version */
    size_t n_ops;
    const char *key;              /* the idempotency key, or NULL */
    pd_store_update out;          /* the answer, as pd_store_update_cells_keyed's */
} pd_store_batch_item;

/* 1 when the store's log takes several updates in one go (append_many):
 * then gathering a scene's queued updates pays. Any thread. */
int pd_store_batches(const pd_store *st);

/* Applies items[0..n) (n 1..PD_STORE_BATCH_MAX) to scene `name`, in order,
 * each as pd_store_update_cells_keyed would, with one append of them all. */
void pd_store_update_cells_batch(pd_store *st, const char *name, pd_store_batch_item *items, size_t n);

/* Gathering: the caller's ordered lanes (one scene's changes run one at a
 * time, in the order they were submitted) hand the store each update as
 * it is queued, so the first of a scene's queued updates to run takes the
 * ones queued right after it in its lane into its batch; they then find
 * their answers made when their turn comes. Only updates with nothing in
 * between in their lane are taken (pd_store_lane_note counts what else is
 * queued in a lane: a reservation, a drop, a new instance keep their
 * place), and only updates without a deadline (one taken into a batch is
 * applied even if its deadline then passes in the queue).
 *
 * Threads: note, enqueue and submitted on the submitter's thread (the
 * loop), in submission order; run on the worker running the update, in its
 * lane; forget on any thread, once the update's answer is taken. */
typedef struct pd_store_queued pd_store_queued;

/* A task other than an update queued in lanes lane and lane2 (the same
 * when it has one), before it is submitted. */
void pd_store_lane_note(pd_store *st, uint64_t lane, uint64_t lane2);
/* An update of `name` (ops copied, key copied) about to be submitted in
 * `lane`; may_batch 0 (it has a deadline) keeps it out of others' batches.
 * NULL when the store does not batch (pd_store_batches) or memory ran
 * out: the update then runs alone. Counts in its lane as note does. */
pd_store_queued *pd_store_update_enqueue(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                         const char *key, uint64_t lane, int may_batch);
/* After the submit: accepted 1 lets a batch take it; 0 (the submit was
 * refused) withdraws it (forget still follows). */
void pd_store_update_submitted(pd_store *st, pd_store_queued *q, int accepted);
/* In the update's lane turn: its answer, made now with the updates queued
 * right after it, or made by the batch of an update before it. */
pd_status pd_store_update_run(pd_store *st, pd_store_queued *q, pd_store_update *out);
/* The update is done with (answered, cancelled, or never submitted). */
void pd_store_update_forget(pd_store *st, pd_store_queued *q);

/* ---- new scenes, instances, drops --------------------------------------- */

typedef struct pd_store_change {
    pd_status status;
    char message[PD_STORE_MESSAGE_MAX];   /* why, when status != PD_OK */
    uint64_t version;                     /* the new scene's, or the dropped one's */
    uint64_t own_bytes;                   /* the new scene's pd_scene_own_bytes */
    uint64_t scene_bytes;                 /* pd_registry_bytes after the change */
    int applied;                          /* the registry took the change, whatever
                                             status says (a log that failed after a
                                             drop) */
    uint64_t template_version;            /* an instance: the template version it copies */
    uint64_t incarnation;                 /* a drop: the dropped scene's; an instance: the
                                             template's (pd_scene.incarnation): which scene
                                             of that name the watchers' event is about */
} pd_store_change;

/* Serves s (made by the caller; the store takes its reference) under its
 * name: refused PD_SCENE_EXISTS, PD_LIMIT_EXCEEDED (the registry's caps) or
 * PD_INTERNAL (the log did not take it: never served). */
pd_status pd_store_add_scene(pd_store *st, pd_scene *s, pd_store_change *out);

/* A new instance `name` of the template's current version; as add, and
 * PD_UNKNOWN_SCENE when tmpl is not served. */
pd_status pd_store_add_instance(pd_store *st, const char *name, const char *tmpl, pd_store_change *out);

/* Records the drop of `name`, then stops serving it (with drop_portals,
 * the portals naming it too; else PD_SCENE_IN_USE while one does, nothing
 * recorded). A drop the log did not take is not done: the log's refusal
 * (PD_UNAVAILABLE when it is not final: no answer, Redis down, another
 * replica's change first; PD_UNKNOWN_SCENE when another replica dropped
 * it first; else PD_INTERNAL, the log failed). */
pd_status pd_store_drop_scene(pd_store *st, const char *name, int drop_portals, pd_store_change *out);

/* The three with the change's idempotency key, as pd_store_update_cells_keyed.
 * A resent add whose first one is served here is refused SCENE_EXISTS by
 * the registry before the log is asked, and a resent drop UNKNOWN_SCENE:
 * the key answers a change whose first try the log took but this pathd did
 * not serve (an answer from Redis that timed out). */
pd_status pd_store_add_scene_keyed(pd_store *st, pd_scene *s, const char *key, pd_store_change *out);
pd_status pd_store_add_instance_keyed(pd_store *st, const char *name, const char *tmpl, const char *key,
                                      pd_store_change *out);
pd_status pd_store_drop_scene_keyed(pd_store *st, const char *name, int drop_portals, const char *key,
                                    pd_store_change *out);

/* ---- changes another replica made (issue 32) ----------------------------- */

/* What pd_store_apply_logged did with a record read from the shared log. */
typedef enum pd_store_logged {
    PD_STORE_LOGGED_APPLIED = 0,  /* applied: the scene serves the record's version */
    PD_STORE_LOGGED_HAD = 1,      /* this pathd has it already (its own append) */
    PD_STORE_LOGGED_NOOP = 2,     /* does not apply here (why says): a recorded no-op */
    PD_STORE_LOGGED_GAP = 3,      /* an update past the version after this pathd's:
                                     a record was missed, the scene is not the log's */
} pd_store_logged;

/* Applies one record of the shared log that this pathd may not have made,
 * with rp's rules (pd_journal_replayer over the store's registry and
 * world), never appending it. Safe against this pathd's own changes of the
 * same scene running meanwhile: an update is built under the scene's
 * writer lock and served under the log's lock only if it makes exactly
 * the record's version (else it was this pathd's own, HAD); a new scene,
 * an instance or a drop is checked and applied under the log's lock. A
 * record of a scene this pathd serves at that version or later is HAD. Any
 * thread but the loop's (an update builds a version); rp is the caller's,
 * used by one thread at a time. */
pd_store_logged pd_store_apply_logged(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                      char *why, size_t len);
/* The same, and an applied update's result in *res (may be NULL; zeroed
 * for any other outcome or record): what its watchers hear (pd_replica.c). */
pd_store_logged pd_store_apply_logged_result(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                             pd_scene_update_result *res, char *why, size_t len);
/* The same for a record read as the log's entry entry_id (NULL: not
 * known): one at or before this pathd's own latest new scene or drop of
 * that name (pd_changelog_ops.own_past) is HAD, checked under the log's
 * lock, so a tail behind this pathd's own changes never makes a name it
 * dropped again, nor applies an older incarnation's update to a newer. */
pd_store_logged pd_store_apply_logged_entry(pd_store *st, pd_journal_replayer *rp, const pd_journal_record *rec,
                                            const char *entry_id, pd_scene_update_result *res, char *why,
                                            size_t len);

/* ---- reloads ------------------------------------------------------------ */

/* The log's records of a reload: begin before publishing set (takes the
 * log's lock), end after (records what the publish replaced and lets the
 * lock go). end takes begin's result; both are no-ops without a log. */
void *pd_store_reload_begin(pd_store *st, const pd_scene_set *set);
void pd_store_reload_end(pd_store *st, void *state);

#endif
