/*
 * pd_world.h - scenes joined by portals: route tables and the optimal
 * cross-scene route planner behind FindRoute.
 *
 * A world is an immutable, reference-counted snapshot, like a scene: it holds
 * a reference to one snapshot of every scene, the portals resolved against
 * them (pd_conf_world.h), the pinned routes, and for every scene and every
 * unit size it allows a route table: the in-scene path cost between every
 * ordered pair of portal endpoints in that scene (pd_search_astar on the
 * unit grid, 8-connected; component labels answer "unreachable" without a
 * search). A planner keeps the world it acquired for the whole query, so an
 * update published meanwhile never changes the tables under it.
 *
 * Portal endpoints: a portal endpoint is usable by unit size u when the
 * scene allows u, u <= the portal's max_unit, and the unit may stand with
 * its anchor on that cell (the cell is passable on u's unit grid). A blocked
 * endpoint is not an error: the portal is just closed to that unit (a later
 * update may open it). A portal is traversable a -> b (and b -> a when two-
 * way) when both its endpoints are usable.
 *
 * Planning (pd_world_plan), unit u, from (S, start) to (T, goal):
 *  - nodes: the portal endpoints usable by u, plus start and goal;
 *  - edges: route-table costs between endpoints of one scene, portal
 *    traversals with the portal's cost, start -> each endpoint in S and each
 *    endpoint in T -> goal (one A* per endpoint, skipped in O(1) when the
 *    component labels differ: the tables already hold everything else, so a
 *    query costs at most |endpoints in S| + |endpoints in T| (+1) searches),
 *    and start -> goal when S == T;
 *  - Dijkstra (core/pd_route.h) gives the cheapest chain; its cost is the
 *    optimum over all ways through the world, since every in-scene leg is an
 *    optimal A* cost between the points where the chain enters and leaves.
 * With a pinned route for (S, T) the planner follows exactly its portals
 * (choosing for each the direction that chains, cheapest if both do) and
 * answers NO_PATH when one of them is closed to the unit or a leg between
 * them is unreachable right now; the computed route is not tried instead,
 * because a designer pinned this one on purpose.
 *
 * goal_mode: the planner takes the goal as given. A caller that wants the
 * FindPath fallbacks in the last scene calls pd_world_plan first; on NO_PATH
 * or GOAL_BLOCKED it picks a substitute goal in T (pd_fallback_*) in the
 * components pd_world_arrivals names and plans again.
 *
 * Thread safety: a world is read-only once built; any number of threads may
 * plan on it, each with its own pd_search_ctx. pd_world_retain/release are
 * atomic. The store (bottom of this file) publishes new worlds atomically.
 */
#ifndef PD_WORLD_H
#define PD_WORLD_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf_world.h"
#include "pd_scene.h"
#include "pd_search.h"
#include "pd_status.h"

typedef struct pd_world pd_world;

/* Builds a world over the given scenes (each is retained; the caller keeps
 * its own references). Every scene a portal or route names must be among
 * them, and every portal cell inside its scene's grid; otherwise NULL with
 * the reason in err ("portal 'cellar-stairs': cell 25,3 is outside scene
 * 'cellar' (20x12)"). Scene names must be unique. cw may be NULL (no
 * portals: only same-scene plans succeed). */
pd_world *pd_world_build(const pd_conf_world *cw, pd_scene *const *scenes, size_t n_scenes,
                         char *err, size_t errlen);

/* Same, over every scene the registry serves right now. */
pd_world *pd_world_build_from_registry(const pd_conf_world *cw, pd_registry *r,
                                       char *err, size_t errlen);

/* Same, over the scenes of a prepared set (pd_registry_prepare) that no
 * registry serves yet: the slow half of a reload's world (every route
 * table), which touches no store and no registry, so it may run on any
 * thread while the running world keeps serving. A scene whose snapshot
 * prev (the world serving now; may be NULL) holds with the same portal
 * cells - one the set kept - takes its tables from prev instead of
 * computing them. The result is an ordinary
 * world, invisible to planners until pd_world_store_publish_reload makes it
 * current; drop one that will not be published with pd_world_release. The
 * set must stay unpublished during the call. NULL with the reason in err,
 * as for pd_world_build (the caller then publishes the set without it). */
pd_world *pd_world_build_from_set(const pd_conf_world *cw, const pd_scene_set *set,
                                  const pd_world *prev, char *err, size_t errlen);

void pd_world_retain(pd_world *w);
void pd_world_release(pd_world *w);        /* frees on the last release; NULL is a no-op */

/* A new world in which scene s replaces the scene of the same name; only that
 * scene's route tables are recomputed, the rest are copied. w is untouched.
 * Returns PD_OK with *out (refcount 1), PD_UNKNOWN_SCENE (w has no scene of
 * that name), PD_INVALID_ARGUMENT (a portal cell is outside s's grid: s came
 * from a reload with a different map, which needs pd_world_build) or
 * PD_INTERNAL; the reason is in err. */
pd_status pd_world_refresh_scene(const pd_world *w, pd_scene *s, pd_world **out,
                                 char *err, size_t errlen);

/* Scenes of the world, sorted by name, and lookup by name (NULL if none).
 * The pointers stay valid while the world is held. */
size_t pd_world_scene_count(const pd_world *w);
const pd_scene *pd_world_scene_at(const pd_world *w, size_t i);
const pd_scene *pd_world_scene(const pd_world *w, const char *name);

typedef struct pd_world_stats {
    size_t n_scenes;
    size_t n_portals;
    size_t n_routes;              /* pinned routes */
    /* The last table computation: the whole world for pd_world_build, the
     * one scene for pd_world_refresh_scene. */
    uint64_t table_entries;       /* ordered pairs of open endpoints, over unit sizes */
    uint64_t table_searches;      /* A* runs (pairs in different components need none) */
    uint64_t table_micros;        /* wall time */
} pd_world_stats;

void pd_world_get_stats(const pd_world *w, pd_world_stats *out);

typedef struct pd_world_query {
    const char *from_scene;
    pd_point start;               /* anchor cell on from_scene's unit grid */
    const char *to_scene;
    pd_point goal;                /* anchor cell on to_scene's unit grid, taken as given */
    uint32_t unit_size;           /* 0 means 1 */
    pd_search_poll_fn poll;       /* deadline / cancel for the leg searches; may be NULL */
    void *poll_user;
} pd_world_query;

/* One leg: a walk inside one scene, then (except on the last leg) a portal. */
typedef struct pd_world_leg {
    const pd_scene *scene;        /* the world's snapshot: search the leg on it */
    pd_point from, to;            /* on the scene's unit grid for the query's unit size */
    double cost;                  /* in-scene path cost from -> to (what A* on that unit
                                     grid returns) */
    int has_portal;               /* 0 on the last leg */
    const char *portal;           /* the portal's name (owned by the world) */
    pd_point portal_exit;         /* the cell the portal is entered at: equals `to` */
    const pd_scene *next_scene;
    pd_point portal_entry;        /* where the unit comes out: the next leg's `from` */
    double portal_cost;
} pd_world_leg;

typedef struct pd_world_route {
    pd_world_leg *legs;           /* n_legs entries, owned by the route */
    size_t n_legs;
    double total_cost;            /* sum of leg and portal costs */
    int pinned;                   /* 1 when a pinned route from the config was followed */
    uint64_t searches;            /* A* runs for the start and goal legs */
    uint64_t expanded;            /* nodes those searches expanded */
    uint64_t micros;              /* wall time of the whole plan */
} pd_world_route;

/*
 * Plans the cheapest route (see the top of this file). On PD_OK *out holds
 * the legs; free them with pd_world_route_free (also safe after an error,
 * which leaves *out zeroed but for the search counters). Errors, checked
 * in this order: PD_INVALID_ARGUMENT (NULL arguments), PD_UNKNOWN_SCENE,
 * PD_INVALID_ARGUMENT (a unit size S or T does not serve), PD_OUT_OF_BOUNDS
 * (start or goal outside its grid), PD_START_BLOCKED, PD_GOAL_BLOCKED (on
 * the unit grid), PD_NO_PATH
 *  (no chain of portals connects them, or the pinned route is closed),
 *  whatever the poll returned, PD_INTERNAL.
 * ctx is the caller's per-thread search context; its last path is
 * overwritten.
 */
pd_status pd_world_plan(const pd_world *w, pd_search_ctx *ctx, const pd_world_query *q,
                        pd_world_route *out);

void pd_world_route_free(pd_world_route *r);

/*
 * The goal_mode hook: the cells of q->to_scene a unit starting at q->start
 * can stand on by travelling the way pd_world_plan would (q->goal is
 * ignored): the start itself when both scenes are the same, and every portal
 * endpoint in to_scene that the route graph reaches (with a pinned route:
 * the far cell of its last portal only). Every cell in the unit-grid component of one of them
 * is reachable, so a caller substitutes the goal among those components
 * (pd_fallback_nearest per label) and plans again. Returns PD_OK with the
 * count in *n_out (only the first cap cells are written; may repeat a cell),
 * or the errors of pd_world_plan up to PD_START_BLOCKED.
 */
pd_status pd_world_arrivals(const pd_world *w, pd_search_ctx *ctx, const pd_world_query *q,
                            pd_point *out, size_t cap, size_t *n_out);

/* How many portals have an end in scene `name` (0 when w has no such scene). */
size_t pd_world_portals_naming(const pd_world *w, const char *name);

/* A world snapshot slot for the server: planners acquire the current world,
 * loads and updates publish new ones. Writers (rebuild, refresh) are
 * serialised with each other; readers never wait for a table computation. */
typedef struct pd_world_store pd_world_store;

pd_world_store *pd_world_store_create(void);
void pd_world_store_destroy(pd_world_store *s);   /* releases its world */

/* The current world, retained (release it when done), or NULL before the
 * first successful rebuild. */
pd_world *pd_world_store_acquire(pd_world_store *s);

/* Builds a world from cw over the registry's current scenes and publishes it
 * (at start-up, after pd_registry_load). The table computation runs on the
 * calling thread; a reload uses pd_world_build_from_set and
 * pd_world_store_publish_reload instead. Returns 0, or -1 with the reason in
 * err and the old world still published. */
int pd_world_store_rebuild(pd_world_store *s, const pd_conf_world *cw, pd_registry *r,
                           char *err, size_t errlen);

/* The quick half of a reload, on the thread that publishes it: set replaces
 * r's scenes (pd_registry_publish), then w, built over that same set with
 * pd_world_build_from_set, becomes the current world (with the tables of a
 * kept scene updated since the prepare computed again). With w NULL only
 * the scenes change and the previous world keeps serving routes on its own
 * snapshots. Takes over set and the caller's reference to w (both are
 * dropped unpublished when s or r is NULL). Returns 0, or -1 when nothing
 * was published (pd_registry_publish refused the set: prepare again).
 *
 * Both swaps happen under the lock that serialises rebuilds and refreshes,
 * so a pd_world_store_refresh after an UpdateCells runs either wholly
 * before them (and its world is replaced) or wholly after them (and finds
 * the new world and compares it with the scene the registry serves then):
 * an update landing between the scene swap and the world swap cannot leave
 * the world on a stale snapshot. The wait is at most one refresh already
 * computing its scene's tables. */
int pd_world_store_publish_reload(pd_world_store *s, pd_registry *r, pd_scene_set *set,
                                  pd_world *w);

/* After a scene was made at run time (pd_registry_add, pd_registry_instance)
 * or dropped: the next pd_world_store_acquire (or refresh) publishes a world
 * holding exactly the scenes r serves, with the current world's portals and
 * pinned routes; scenes whose snapshot and portals did not change keep
 * their tables (copied), so it costs O(scenes) and no search. Deferred so
 * that 10,000 CreateInstance in a row copy the world once, not 10,000
 * times. Reloads make the same sync after publishing, so the scenes made at
 * run time that the registry kept join the reload's world. */
void pd_world_store_mark_stale(pd_world_store *s, pd_registry *r);

/* DropScene: refuses with PD_SCENE_IN_USE while a portal names the scene,
 * unless drop_portals is set; then the scene leaves the registry and the
 * world loses it with every portal naming it and every pinned route through
 * those portals (a scene no portal names leaves the world at the next
 * sync, pd_world_store_mark_stale). PD_UNKNOWN_SCENE when r does not serve it. *version_out
 * (may be NULL) gets the version it had. s may be NULL (no world). */
pd_status pd_world_store_drop_scene(pd_world_store *s, pd_registry *r, const char *name,
                                    int drop_portals, uint64_t *version_out, char *err,
                                    size_t errlen);

/* After pd_registry_update changed scene `name`: if the registry serves a
 * different snapshot of it than the current world holds, publishes a world
 * with that scene's tables recomputed. Returns PD_OK (also when nothing had
 * to change), PD_UNKNOWN_SCENE, or the errors of pd_world_refresh_scene (the
 * old world then stays published). */
pd_status pd_world_store_refresh(pd_world_store *s, pd_registry *r, const char *name,
                                 char *err, size_t errlen);

#endif
