/*
 * pd_query.h - the query layer: every request kind's pipeline as a plain
 * function over a scene (or world) snapshot and a per-thread scratch.
 *
 * Two steps per request kind:
 *  - prepare (loop thread, cheap): checks the decoded request against the
 *    snapshot it will run on - the scene serves the unit size, every point
 *    and rectangle lies inside it - and resolves world coordinates to cells.
 *    Every such check lives here, once, with its message.
 *  - run (a worker, or a test, with no threads at all): the pipeline itself
 *    (see the top of pd_query.c), writing a result struct the codec encodes.
 *
 * Nothing here knows about threads, connections or the wire. A run polls
 * its caller through pd_query_control (deadline, cancel) and reads the
 * scratch it is given; one scratch per thread, reused for every run.
 *
 * Lifetime: results own their arrays (and, for routes, scene references);
 * free them with the matching *_free. A pd_path_query borrows its avoid
 * array from whoever holds it (the decoded request, or the job that took
 * it over) for as long as the run lasts.
 */
#ifndef PD_QUERY_H
#define PD_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "pd_store.h"
#include "pd_request.h"
#include "pd_scene.h"
#include "pd_search.h"
#include "pd_world.h"

/* Longest message a prepare step writes, in bytes with the NUL: as long as
 * the store's, whose messages an UpdateCells outcome carries on. */
#define PD_QUERY_MESSAGE_MAX PD_STORE_MESSAGE_MAX
/* A place in words ("world (x, y)" with two %g, "cell (x, y)" with two
 * int32s, or a listening "[host]:port" of PD_CONF_MAX_HOST bytes), which
 * the caller puts into a message: 96 holds the longest of these. */
#define PD_WHERE_MAX 96

/* ---- per-thread scratch ------------------------------------------------ */

typedef struct pd_query_scratch pd_query_scratch;

/* NULL on allocation failure. The search contexts inside grow on demand. */
pd_query_scratch *pd_query_scratch_create(void);
void pd_query_scratch_destroy(pd_query_scratch *s);   /* NULL is a no-op */

/* Gives memory back until the scratch holds at most retained_bytes (its
 * search contexts and path buffer), or as little as it can; a no-op when it
 * already holds less. Call it between runs: a worker that grew for one huge
 * search does not keep that memory for the small ones after it. Returns the
 * bytes the scratch holds afterwards. */
size_t pd_query_scratch_trim(pd_query_scratch *s, size_t retained_bytes);

/* The scratch's memory for walking-distance areas (pd_movement.c). */
struct pd_move_area *pd_query_scratch_move_area(pd_query_scratch *s);

/* How a run talks to its caller. */
typedef struct pd_query_control {
    pd_search_poll_fn poll;       /* deadline / cancel, every PD_SEARCH_POLL_INTERVAL
                                     expansions; may be NULL */
    void *poll_user;
    int jump_points;              /* answer with jump point search where it applies */
} pd_query_control;

/* ---- FindPath ---------------------------------------------------------- */

/* A FindPath resolved against its scene: start and goal are anchor cells on
 * the unit grid of unit_size, the window lies inside the scene. */
typedef struct pd_path_query {
    uint32_t unit_size;           /* 0 means 1 */
    pd_search_params params;      /* start, goal, connectivity, max_expansions, window and
                                     partial_on_cutoff are used; poll and blockers are
                                     the run's own (control and avoid) */
    pd_waypoint_style style;
    pd_goal_mode goal_mode;
    int snap;                     /* blocked start/goal: use the nearest open cell */
    double speed;                 /* world units per second; > 0 adds times (so slow
                                     that an arrival time overflows: the run
                                     answers INVALID_ARGUMENT) */
    double start_time;            /* seconds at the first waypoint */
    const pd_point *avoid;        /* borrowed: cells blocked for this request only */
    size_t n_avoid;
    /* A goal set (pd_targets.h): FindPath.goals, or one goal with a range.
     * n_goals 0: params.goal alone, the ordinary search. Otherwise goals
     * holds the anchors and params.goal is goals[0] (what goal_mode's
     * fallback uses). */
    pd_point goals[PD_FINDPATH_MAX_GOALS];
    size_t n_goals;
    double range;                 /* cells */
    int line_of_sight;
    /* FindPath.avoid_reserved: planned by SIPP against the scene's
     * reservation table in the scene's lane (pd_kind_reserve_find_path),
     * from the game time t0_ms (start_time in ms), nothing reserved. */
    int avoid_reserved;
    int64_t t0_ms;
} pd_path_query;

typedef struct pd_path_result {
    pd_status status;
    pd_search_metrics metrics;    /* metrics.cutoff says why a PARTIAL path was cut off */
    pd_point *path;               /* malloc'd, path_len entries in the requested style;
                                     NULL unless PD_OK / PD_PARTIAL */
    size_t path_len;
    double *times;                /* malloc'd arrival times when speed > 0; else NULL */
    int start_substituted;        /* 1: the start was snapped to start_used */
    pd_point start_used;
    int goal_substituted;         /* 1: the path ends at goal_used, not at the goal
                                     (snapped, NEAREST/LINE, or cut off); never for a
                                     path that ends within range of a goal (that is
                                     where it was asked to end) */
    pd_point goal_used;
    int has_target;               /* a goal set was reached: target says which goal */
    uint32_t target;              /* index into the request's goals (0 for a single goal) */
    char message[PD_QUERY_MESSAGE_MAX];  /* why, for every status but OK and PARTIAL:
                                            which end is a wall or does not fit the
                                            unit, which components the ends are in... */
} pd_path_result;

/* PD_STALE_VERSION, with the reason in err, when scene is older than
 * min_version (0: any version will do), else PD_OK. Every scene query's
 * prepare asks this first, so a client that has seen version V (an update's
 * answer, a watch event) never gets an answer computed on an older one;
 * the caller answers with scene->version so the client knows what to wait
 * for. */
pd_status pd_query_check_version(const pd_scene *scene, uint64_t min_version, char *err, size_t errlen);

/* Checks req against scene and fills *out (avoid borrowed from req):
 * PD_STALE_VERSION (pd_query_check_version),
 * PD_INVALID_ARGUMENT (unit size not served), PD_OUT_OF_BOUNDS (start or
 * goal outside the scene), with the reason in err. A window is clipped to
 * the scene; one that does not hold the start is the search's to refuse.
 * default_max_expansions replaces a request's 0. */
pd_status pd_query_path_prepare(const pd_scene *scene, const pd_find_path_req *req,
                                uint64_t default_max_expansions, pd_path_query *out, char *err,
                                size_t errlen);

/* Runs the path pipeline on scene; returns out->status. A goal set is
 * searched by A* (jump point search does not know one). */
pd_status pd_query_find_path(pd_query_scratch *s, const pd_scene *scene, const pd_path_query *q,
                             const pd_query_control *ctl, pd_path_result *out);

void pd_path_result_free(pd_path_result *r);   /* frees the arrays; NULL is a no-op */

/* Runs q at once on the calling thread when it is small: one goal, no
 * avoid cells, no snap or goal fallback that would have to run, and A*
 * finishes within max_expansions (fewer than the request's own budget).
 * Returns 1 with *out as pd_query_find_path would fill it (the same cost;
 * among paths of equal cost A*'s pick, whatever the scene's search), or 0
 * with *out empty after at most max_expansions expansions: run q as usual.
 * The server answers trivial requests this way without a worker's round
 * trip (limits.inline_max_expansions). With jump_points set, a scene whose
 * pick uses jump point search is searched as a worker's pd_query_find_path
 * with ctl->jump_points would (the same path), max_expansions counting jump
 * points: for a connection with nothing else in flight (pd_dispatch.c). */
int pd_query_find_path_small(pd_query_scratch *s, const pd_scene *scene, const pd_path_query *q,
                             uint64_t max_expansions, int jump_points, pd_path_result *out);

/* ---- FindRoute --------------------------------------------------------- */

/* A FindRoute resolved against its world: start and goal are anchor cells on
 * the unit grids of from_scene and to_scene. */
typedef struct pd_route_query {
    char from_scene[PD_CONF_MAX_NAME];
    pd_point start;
    char to_scene[PD_CONF_MAX_NAME];
    pd_point goal;
    uint32_t unit_size;           /* 0 means 1 */
    pd_waypoint_style style;
    pd_goal_mode goal_mode;       /* its fallbacks apply in to_scene */
    double speed;
    double start_time;
    uint64_t max_expansions;      /* per leg search */
} pd_route_query;

/* One leg of a finished route: everything the encoder needs, so the world
 * can be released as soon as the legs are searched. */
typedef struct pd_route_leg {
    pd_scene *scene;              /* retained snapshot the leg was searched on */
    pd_point *path;               /* malloc'd, path_len anchor cells in the requested style */
    size_t path_len;
    double *times;                /* malloc'd arrival times when speed > 0; else NULL */
    double cost;                  /* in-scene path cost of the leg */
    int has_portal;               /* 0 on the last leg */
    char portal[PD_CONF_MAX_NAME];/* the portal the leg ends at */
    pd_point portal_exit;         /* equals the leg's last cell */
    char next_scene[PD_CONF_MAX_NAME];
    pd_point portal_entry;        /* the next leg's first cell */
    double portal_cost;
} pd_route_leg;

/* On PD_OK / PD_PARTIAL: the legs in travel order; metrics.cost is the total
 * (legs + portals), metrics.expanded counts the planner's and the legs'
 * searches, metrics.micros the whole run. */
typedef struct pd_route_result {
    pd_status status;
    pd_search_metrics metrics;
    pd_route_leg *legs;           /* malloc'd, n_legs entries */
    size_t n_legs;
    int pinned;                   /* 1: a pinned route from the config was followed */
    int goal_substituted;         /* a GOAL_NEAREST / LINE substitute */
    pd_point goal_used;
    char message[PD_QUERY_MESSAGE_MAX];  /* why, for every status but OK and PARTIAL */
} pd_route_result;

/* Checks req against world: PD_UNKNOWN_SCENE, PD_INVALID_ARGUMENT (unit size
 * not served), PD_OUT_OF_BOUNDS, with the reason in err. */
pd_status pd_query_route_prepare(const pd_world *world, const pd_find_route_req *req,
                                 uint64_t default_max_expansions, pd_route_query *out, char *err,
                                 size_t errlen);

/* Plans on world, applies the goal_mode fallback and searches every leg;
 * returns out->status. */
pd_status pd_query_find_route(pd_query_scratch *s, const pd_world *world, const pd_route_query *q,
                              const pd_query_control *ctl, pd_route_result *out);

void pd_route_result_free(pd_route_result *r);   /* releases the legs; NULL is a no-op */

/* ---- UpdateCells ------------------------------------------------------- */

/* What an update made: the store's outcome (pd_store_update). */
typedef pd_store_update pd_update_outcome;

/* Applies req to its scene through the store (pd_store_update_cells: the
 * registry checks the name and the cells' bounds; the change log records
 * the version before it is served and settles it; the world's route
 * tables are refreshed), all before returning: the answer is made from
 * what this returns. Returns out->status. Updates of one scene must not
 * overtake each other: the caller runs them one at a time, in order. */
pd_status pd_query_update_cells(pd_store *store, const pd_update_cells_req *req, pd_update_outcome *out);

/* ---- CreateScene, CreateInstance, DropScene ----------------------------- */

typedef struct pd_scene_change_outcome {
    pd_store_change change;               /* the store's outcome: status, message, version,
                                             own_bytes, scene_bytes, applied,
                                             template_version */
    char built[PD_TILED_STATS_LAYERS + 256]; /* CreateScene that applied: the new scene's
                                             pd_scene_describe, for the log */
} pd_scene_change_outcome;

/* The scene changes, each through the store. CreateScene refuses a name
 * already served before anything else, then parses the map (on the calling
 * thread: call it from a worker), refuses one with no walkable cell
 * (pd_scene_check_walkable, INVALID_ARGUMENT) and adds the scene
 * (pd_store_add_scene); CreateInstance is pd_store_add_instance, DropScene
 * pd_store_drop_scene. The caps are the registry's
 * (pd_registry_set_caps): a map's cells and the bytes its scene would hold
 * are checked as it is parsed, before the work they cost
 * (pd_registry_build_limits), LIMIT_EXCEEDED. ctl's poll (ctl may be NULL)
 * is asked while a map is parsed and derived: a cancel, a closed
 * connection or a stopping server ends the build with its status, before
 * anything is served or journalled. Changes to one scene must run one at
 * a time, in order, like updates. Each returns out->change.status. */
pd_status pd_query_create_scene(pd_store *store, const pd_scene_change_req *req, const pd_query_control *ctl,
                                pd_scene_change_outcome *out);
pd_status pd_query_create_instance(pd_store *store, const pd_scene_change_req *req, pd_scene_change_outcome *out);
pd_status pd_query_drop_scene(pd_store *store, const pd_scene_change_req *req, pd_scene_change_outcome *out);

#endif
