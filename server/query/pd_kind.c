/*
 * pd_kind.c - the request-kind table (see pd_kind.h): which descriptor
 * serves each pd_request_kind. A kind that runs on a worker has its
 * descriptor in its family's file (pd_kind_paths.c, pd_kind_move.c,
 * pd_kind_scenes.c); the kinds the server answers itself are described
 * here, by name and role alone.
 */
#include "pd_kind.h"

/* The families' descriptors. */
extern const pd_kind pd_kind_find_path, pd_kind_find_route;
extern const pd_kind pd_kind_raycast, pd_kind_validate_move, pd_kind_move_along, pd_kind_nearest,
    pd_kind_reachable, pd_kind_random_point, pd_kind_distance_to_wall, pd_kind_batch;
extern const pd_kind pd_kind_reserve_path, pd_kind_release_agent, pd_kind_get_reservations;
extern const pd_kind pd_kind_update_cells, pd_kind_create_scene, pd_kind_create_instance, pd_kind_drop_scene;

#define PD__SERVED(var, label, least) static const pd_kind var = {.name = label, .role = least, .runs = PD_KIND_SERVED}

/* PD_REQ_NONE: a request with no body, answered INVALID_ARGUMENT. */
PD__SERVED(pd__none, "unknown", PD_ROLE_NONE);
PD__SERVED(pd__ping, "ping", PD_ROLE_NONE);
PD__SERVED(pd__auth, "auth", PD_ROLE_NONE);
PD__SERVED(pd__cancel, "cancel", PD_ROLE_QUERY);
PD__SERVED(pd__list_scenes, "list_scenes", PD_ROLE_QUERY);
PD__SERVED(pd__scene_info, "scene_info", PD_ROLE_QUERY);
PD__SERVED(pd__scene_grid, "scene_grid", PD_ROLE_QUERY);
PD__SERVED(pd__get_limits, "get_limits", PD_ROLE_QUERY);
PD__SERVED(pd__watch, "watch", PD_ROLE_QUERY);
PD__SERVED(pd__unwatch, "unwatch", PD_ROLE_QUERY);
PD__SERVED(pd__stats, "stats", PD_ROLE_ADMIN);
PD__SERVED(pd__reload, "reload", PD_ROLE_ADMIN);

static const pd_kind *const pd__kinds[PD_REQ__COUNT] = {
    [PD_REQ_NONE] = &pd__none,
    [PD_REQ_FIND_PATH] = &pd_kind_find_path,
    [PD_REQ_CANCEL] = &pd__cancel,
    [PD_REQ_LIST_SCENES] = &pd__list_scenes,
    [PD_REQ_SCENE_INFO] = &pd__scene_info,
    [PD_REQ_STATS] = &pd__stats,
    [PD_REQ_PING] = &pd__ping,
    [PD_REQ_UPDATE_CELLS] = &pd_kind_update_cells,
    [PD_REQ_SCENE_GRID] = &pd__scene_grid,
    [PD_REQ_FIND_ROUTE] = &pd_kind_find_route,
    [PD_REQ_AUTH] = &pd__auth,
    [PD_REQ_RELOAD] = &pd__reload,
    [PD_REQ_RAYCAST] = &pd_kind_raycast,
    [PD_REQ_VALIDATE_MOVE] = &pd_kind_validate_move,
    [PD_REQ_MOVE_ALONG] = &pd_kind_move_along,
    [PD_REQ_NEAREST] = &pd_kind_nearest,
    [PD_REQ_REACHABLE] = &pd_kind_reachable,
    [PD_REQ_RANDOM_POINT] = &pd_kind_random_point,
    [PD_REQ_DISTANCE_TO_WALL] = &pd_kind_distance_to_wall,
    [PD_REQ_BATCH] = &pd_kind_batch,
    [PD_REQ_GET_LIMITS] = &pd__get_limits,
    [PD_REQ_CREATE_SCENE] = &pd_kind_create_scene,
    [PD_REQ_CREATE_INSTANCE] = &pd_kind_create_instance,
    [PD_REQ_DROP_SCENE] = &pd_kind_drop_scene,
    [PD_REQ_WATCH] = &pd__watch,
    [PD_REQ_UNWATCH] = &pd__unwatch,
    [PD_REQ_RESERVE_PATH] = &pd_kind_reserve_path,
    [PD_REQ_RELEASE_AGENT] = &pd_kind_release_agent,
    [PD_REQ_GET_RESERVATIONS] = &pd_kind_get_reservations,
};

const pd_kind *pd_kind_of(pd_request_kind kind)
{
    if ((unsigned)kind >= PD_REQ__COUNT || !pd__kinds[kind])
        return &pd__none;
    return pd__kinds[kind];
}

const char *pd_request_kind_name(pd_request_kind kind)
{
    return pd_kind_of(kind)->name;
}
