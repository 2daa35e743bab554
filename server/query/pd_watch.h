/*
 * pd_watch.h - what a watcher hears: one change of a scene as the codec
 * encodes it (a WatchEvent), and how an applied update becomes one.
 *
 * The subscriptions themselves (who watches what, buffering, ordering,
 * overflow) are the net layer's (server/net/pd_watchers.c); this is the plain
 * data both it and the codec read, so its tests need no server.
 */
#ifndef PD_WATCH_H
#define PD_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "pd_query.h"
#include "pd_request.h"

/* Values match pathd.v1.WatchEventKind. */
typedef enum pd_watch_kind {
    PD_WATCH_STARTED = 0,    /* first frame per scene: the version served when the watch began */
    PD_WATCH_UPDATED = 1,    /* UpdateCells made `version` */
    PD_WATCH_REPLACED = 2,   /* a reload replaced the scene's definition */
    PD_WATCH_INSTANCED = 3,  /* CreateInstance copied the scene (at `version`) as `instance` */
    PD_WATCH_DROPPED = 4,    /* the scene is no longer served: its last event */
    PD_WATCH_ENDED = 5,      /* Unwatch: the watch's final frame */
    PD_WATCH_AGENTS_CUT = 6, /* the update that made `version` cut `agents`' reservations */
    PD_WATCH_AGENTS_DISPLACED = 7, /* a ReservePath (at `version`) moved `agents` aside */
    PD_WATCH_AGENTS_EXPIRED = 8,   /* reservation_ttl_ms released `agents` (at `version`) */
    PD_WATCH_AGENTS_RELEASED = 9,  /* ReleaseAgent with all released `agents` (at `version`) */
} pd_watch_kind;

/* The agent ids one AGENTS_CUT event carries, at most (4 KiB of ids, about
 * 5 KiB on the wire): an update that cuts more sends several AGENTS_CUT
 * events in a row, each with the next ids (ascending throughout), so an
 * event's size stays bounded whatever the table holds. */
#define PD_WATCH_MAX_AGENTS 512

/* One operation of an update, summarised: its cell list may hold a million
 * cells, an event holds where they lie and how many there are. */
typedef struct pd_watch_op {
    pd_update_op op;
    uint8_t cost;                /* PD_UPDATE_COST */
    pd_point min, max;           /* the bounding rectangle of the cells it named */
    uint64_t cells;              /* how many it named */
} pd_watch_op;

typedef struct pd_watch_event {
    pd_watch_kind kind;
    char scene[PD_CONF_MAX_NAME];
    uint64_t incarnation;        /* which scene of that name (pd_scene.incarnation): a
                                    watch hears only its own scene's events */
    uint64_t version;
    int has_changed;             /* UPDATED, REPLACED: changed_min/max hold the rectangle */
    pd_point changed_min, changed_max;
    uint64_t cells_changed;      /* UPDATED */
    pd_watch_op ops[PD_SCENE_MAX_UPDATE_OPS];  /* UPDATED: the update's, in order */
    size_t n_ops;
    char instance[PD_CONF_MAX_NAME];           /* INSTANCED: the new scene */
    uint64_t agents[PD_WATCH_MAX_AGENTS];      /* AGENTS_CUT, _DISPLACED, _EXPIRED: ascending */
    size_t n_agents;
    int64_t cut_at_ms;                         /* AGENTS_CUT: from when they lost their holds */
} pd_watch_event;

/* Fills ev with the event of an update that made a version (out->update.
 * cells_changed > 0, whatever out->status says: a journal that failed after
 * the registry published still leaves the version served). Returns 0, or
 * -1 when the update made no version (no event is due). */
int pd_watch_event_from_update(const pd_update_cells_req *req, const pd_update_outcome *out, pd_watch_event *ev);

/* Fills ev with AGENTS_CUT event number `part` (from 0) of an update that
 * made version `version` of the scene (req's name, out's incarnation) and
 * cut agents[0..n) (ascending) from cut_at_ms on: the ids
 * [part * PD_WATCH_MAX_AGENTS, ...) of them. Returns 0, or -1 when part is
 * past the last (none at all for n = 0). */
int pd_watch_event_agents_cut(const pd_update_cells_req *req, const pd_update_outcome *out, const uint64_t *agents,
                              size_t n, int64_t cut_at_ms, size_t part, pd_watch_event *ev);

/* Fills ev with the AGENTS_DISPLACED event of a ReservePath in scene
 * (name, incarnation) at `version` that moved agents[0..n) aside (n at
 * most PD_WATCH_MAX_AGENTS; any order: the event lists them ascending).
 * Returns 0, or -1 when n is 0 (no event is due). */
int pd_watch_event_agents_displaced(const char *scene, uint64_t incarnation, uint64_t version,
                                    const uint64_t *agents, size_t n, pd_watch_event *ev);

/* Fills ev with AGENTS_EXPIRED event number `part` (from 0) of an expiry
 * in scene (name, incarnation) at `version` that released agents[0..n)
 * (ascending): the ids [part * PD_WATCH_MAX_AGENTS, ...) of them. Returns
 * 0, or -1 when part is past the last (none at all for n = 0). */
int pd_watch_event_agents_expired(const char *scene, uint64_t incarnation, uint64_t version, const uint64_t *agents,
                                  size_t n, size_t part, pd_watch_event *ev);

/* The same for AGENTS_RELEASED: ReleaseAgent with all released
 * agents[0..n) (ascending). */
int pd_watch_event_agents_released(const char *scene, uint64_t incarnation, uint64_t version,
                                   const uint64_t *agents, size_t n, size_t part, pd_watch_event *ev);

#endif
