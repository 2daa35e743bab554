/*
 * pd_store.h - the world's changes in one place. The store holds the
 * registry of scenes, the world (portals and route tables) and the change
 * log, and every change a client makes goes through it: a cell update, a
 * new scene, an instance, a drop, and a reload's publish. Each is applied,
 * recorded in the log before it is served, made durable as the log's
 * policy says, and answered with the version it made. The query and net
 * layers hold a store, never the three parts separately.
 *
 * The change log is an interface (pd_changelog): the file journal
 * (pd_journal.h, pd_journal_changelog) is its first implementation. A log
 * kept elsewhere (a Redis Stream per scene, for replicas) implements the
 * same calls and the callers do not change. Without a log (no data_dir)
 * changes are applied in memory only.
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

/* ---- the change log ---------------------------------------------------- */

typedef struct pd_changelog_ops {
    /* Takes the log's change lock; nonzero when the log refuses changes
     * (it failed earlier: why() says why), the lock then not held. */
    int (*lock)(void *log);
    void (*unlock)(void *log);
    /* Under the lock, just before the change is served: its record. 0, or
     * nonzero when the log did not take it (the change is then never
     * served and the log refuses later ones). */
    int (*append)(void *log, const pd_journal_record *rec);
    /* After the lock was let go: makes what was appended durable as the
     * log's policy says (the journal's "always" fsync; a no-op otherwise).
     * Several changes waiting together may share one. 0, or -1 (errno). */
    int (*settle)(void *log);
    /* Why the log refuses changes (after lock or append failed). */
    const char *(*why)(void *log);
    /* A reload's records, with the lock held from begin to end around the
     * publish: begin sees the set about to be published, end the registry
     * after it. begin returns the state end needs (NULL: nothing to
     * record, or the log failed). */
    void *(*reload_begin)(void *log, pd_registry *r, const pd_scene_set *set);
    void (*reload_end)(void *log, pd_registry *r, void *state);
} pd_changelog_ops;

typedef struct pd_changelog {
    const pd_changelog_ops *ops;  /* NULL: no log */
    void *log;
} pd_changelog;

/* The file journal as a change log (j stays the caller's). */
pd_changelog pd_journal_changelog(pd_journal *j);

/* ---- the store ----------------------------------------------------------- */

typedef struct pd_store pd_store;

/* A store over registry and world (may be NULL: no routes), with no log
 * yet. Neither is owned. NULL when memory ran out. */
pd_store *pd_store_create(pd_registry *registry, pd_world_store *world);
void pd_store_destroy(pd_store *st);

/* Sets the world (may be NULL) and the change log (before any change is
 * made through the store; a log set later records only what follows). */
void pd_store_set_world(pd_store *st, pd_world_store *world);
void pd_store_set_log(pd_store *st, pd_changelog log);

pd_registry *pd_store_registry(const pd_store *st);
pd_world_store *pd_store_world(const pd_store *st);

/* Messages the store writes: as long as the query layer's. */
#define PD_STORE_MESSAGE_MAX 256

/* ---- cell updates --------------------------------------------------------- */

typedef struct pd_store_update {
    pd_status status;
    pd_scene_update_result update;   /* on PD_OK: the version served now */
    pd_status world_refresh;         /* with a world: how refreshing its route tables
                                        went (PD_OK when nothing had to change); the
                                        update stands either way */
    char world_refresh_error[160];   /* the reason when world_refresh != PD_OK */
    char message[PD_STORE_MESSAGE_MAX];  /* why, when status != PD_OK */
} pd_store_update;

/* Applies ops (1..PD_SCENE_MAX_UPDATE_OPS, as one version) to scene
 * `name`: builds the version, appends its record under the log's lock just
 * before serving it (a version the log refused is never served: PD_INTERNAL
 * with the reason), settles the log, then refreshes the world's tables for
 * that scene, so a route asked for after the answer plans around it.
 * Statuses of pd_registry_update_hooked, and PD_INTERNAL when the log
 * refused. Returns out->status. */
pd_status pd_store_update_cells(pd_store *st, const char *name, const pd_scene_update *ops, size_t n_ops,
                                pd_store_update *out);

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

/* Stops serving `name` (with drop_portals, the portals naming it too; else
 * PD_SCENE_IN_USE while one does), then records it; a drop the log did not
 * take is done in memory (applied) but answered PD_INTERNAL: after a
 * restart the scene is back as it was. */
pd_status pd_store_drop_scene(pd_store *st, const char *name, int drop_portals, pd_store_change *out);

/* ---- reloads ------------------------------------------------------------ */

/* The log's records of a reload: begin before publishing set (takes the
 * log's lock), end after (records what the publish replaced and lets the
 * lock go). end takes begin's result; both are no-ops without a log. */
void *pd_store_reload_begin(pd_store *st, const pd_scene_set *set);
void pd_store_reload_end(pd_store *st, void *state);

#endif
