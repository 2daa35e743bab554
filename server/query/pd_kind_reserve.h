/*
 * pd_kind_reserve.h - the reservation family's kinds (issue 34):
 * ReservePath, ReleaseAgent and GetReservations, each an ordered task in
 * its scene's lane against the scene's reservation table
 * (pd_scene_reserve.h). What a job of them holds (job->ext) is declared
 * here for the codec, which encodes the answers.
 */
#ifndef PD_KIND_RESERVE_H
#define PD_KIND_RESERVE_H

#include <stddef.h>
#include <stdint.h>

#include "pd_query.h"
#include "pd_request.h"
#include "pd_reserve.h"
#include "pd_scene.h"

/* GetReservations answers at most this many entries (about 40 bytes each
 * on the wire: well inside one frame); max_entries 0 means this many. */
#define PD_RESERVE_MAX_LIST 16384u

typedef struct pd_reserve_job {
    pd_reserve_req req;
    pd_registry *registry;
    uint64_t default_max_expansions;
    pd_status status;
    char message[PD_QUERY_MESSAGE_MAX];
    uint64_t scene_version;
    /* ReservePath */
    pd_waypoint *waypoints;           /* malloc'd */
    size_t n_waypoints;
    int64_t reserved_until_ms;        /* PD_RESERVE_FOREVER: no end */
    double cost;
    uint64_t expanded, micros;
    int has_blocker;
    uint64_t blocker;
    int was_cut;
    /* ReleaseAgent */
    int released;
    /* GetReservations */
    pd_reserve_entry *entries;        /* malloc'd */
    size_t n_entries;
    uint64_t matching;
    pd_reserve_stats stats;
} pd_reserve_job;

/* The config's name of a reservation limit ("limits.max_agents_per_scene"). */
const char *pd_kind_reserve_limit_key(pd_reserve_limit l);

#endif
