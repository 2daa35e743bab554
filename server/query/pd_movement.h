/*
 * pd_movement.h - the movement queries of the query layer: Raycast,
 * ValidateMove, MoveAlong, NearestWalkable, IsReachable, RandomPoint and
 * DistanceToWall, alone or as the items of a Batch; and a Batch's FindPath
 * items, which run the path pipeline (pd_query.h) item by item.
 *
 * Like the path pipeline (pd_query.h), each query is prepared on the loop
 * thread against the scene snapshot it will run on - unit size served,
 * points inside the scene - and then run by a plain function over that
 * snapshot and a per-thread scratch. The geometry itself is core's
 * (pd_move.h); this layer picks the unit's grid and component labels,
 * turns cells and world points into grid positions and back, and fills the
 * answer the codec encodes.
 *
 * Points: a cell stands for its centre, a world point for its exact place
 * in the cell (to 1/PD_MOVE_SUBCELL of a cell). For a unit of size K the
 * point is the anchor (top-left cell of the footprint) and the query runs
 * on the unit-K grid, as FindPath does.
 */
#ifndef PD_MOVEMENT_H
#define PD_MOVEMENT_H

#include <stddef.h>
#include <stdint.h>

#include "pd_move.h"
#include "pd_query.h"
#include "pd_request.h"
#include "pd_scene.h"

/* Why a claimed movement is illegal (ValidateMove). */
typedef enum pd_move_reason {
    PD_MOVE_VALID = 0,
    PD_MOVE_OUT_OF_BOUNDS = 1,
    PD_MOVE_BLOCKED_POINT = 2,
    PD_MOVE_BLOCKED_SEGMENT = 3,
    PD_MOVE_TOO_FAST = 4,
    PD_MOVE_TIME_NOT_INCREASING = 5,
} pd_move_reason;

/* A movement query resolved against its scene. */
typedef struct pd_move_query {
    pd_request_kind kind;
    pd_scene *scene;              /* retained; NULL when prepare refused the query */
    const pd_grid *grid;          /* the unit's grid on scene */
    const pd_components *labels;  /* its component labels; may be NULL (hand-made scenes) */
    pd_fpoint a, b;               /* from/at/around and to/reachable_from */
    int has_b;
    pd_fpoint d;                  /* MoveAlong displacement */
    double radius;
    uint64_t seed;
    double max_speed, tolerance;
    const pd_timed_point *moves;  /* borrowed from the request */
    size_t n_moves;
    pd_path_query *path;          /* FIND_PATH (Batch items): malloc'd, freed by release */
    pd_query_control control;     /* FIND_PATH: deadline / cancel polling and jump points,
                                     set by the caller after prepare */
} pd_move_query;

/* The answer; which fields count depends on the kind (see proto/pathd.proto:
 * RaycastResult and the others). */
typedef struct pd_move_result {
    pd_status status;
    char message[PD_QUERY_MESSAGE_MAX];   /* why, when status is not PD_OK */
    uint64_t version;
    int yes;                      /* clear / valid / slid / reachable */
    int has_hit;                  /* hit (raycast) or wall (distance to wall) */
    pd_point hit;
    int has_cell;
    pd_point cell;                /* last_free / last_valid / end / nearest / random */
    double wx, wy;                /* the world point that goes with cell */
    int32_t first_invalid;        /* -1 when valid */
    pd_move_reason reason;
    double distance;
    uint64_t seed;
    uint64_t candidates;
    uint64_t micros;              /* pd_move_run's time in the query proper, rounded
                                     up (FIND_PATH: the search's, path.metrics.micros);
                                     0 for a query that did not run */
    pd_path_result path;          /* FIND_PATH: the path answer (pd_move_result_free) */
    const pd_scene *scene;        /* FIND_PATH: the snapshot it ran on, for world
                                     coordinates; borrowed from the query */
} pd_move_result;

/* Checks req against scene (which the query takes over: it is released by
 * pd_move_query_release, also on failure) and fills *q. On failure the
 * status and reason are in *r and the query must not be run. A NULL scene
 * answers UNKNOWN_SCENE. */
pd_status pd_move_prepare(pd_scene *scene, const pd_move_req *req, pd_move_query *q, pd_move_result *r);

/* Runs a prepared query; returns r->status. */
pd_status pd_move_run(pd_query_scratch *s, const pd_move_query *q, pd_move_result *r);

void pd_move_query_release(pd_move_query *q);  /* releases the scene; safe twice */
void pd_move_result_free(pd_move_result *r);   /* frees a FindPath item's path; safe twice */

#endif
