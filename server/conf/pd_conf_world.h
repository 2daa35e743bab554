/*
 * pd_conf_world.h - the cross-scene part of the config: portals between
 * scenes and pinned routes ("portals" and "routes" at the top level).
 *
 * It is parsed from the same cJSON document as the rest of pd_conf (the conf
 * layer stays the only server layer that includes cJSON.h), after "scenes", whose names the
 * portals and routes are checked against. What the config alone cannot know
 * - whether a cell lies inside its map, whether it is passable - is checked
 * when the world is built from loaded scenes (scene/pd_world.h).
 *
 * Accepted shape (unknown keys and keys given twice are errors):
 *
 *   "portals": [                        at most PD_CONF_WORLD_MAX_PORTALS
 *     {
 *       "name": "town-house",           required; 1..63 bytes of [A-Za-z0-9_.-]; unique
 *       "a": {"scene": "town", "cell": [14, 6]},    required; a configured scene
 *       "b": {"scene": "house", "cell": [5, 14]},   required; cells are [x, y],
 *                                       0 <= x, y < PD_GRID_MAX_SIDE, a != b
 *       "two_way": true,                default true; false = only a -> b
 *       "cost": 2.5,                    traversal cost (door opening, stairs), finite,
 *                                       >= 0; default 0
 *       "max_unit": 2                   largest unit size let through, 1..16;
 *                                       default: no limit
 *     }
 *   ],
 *   "routes": [                         pinned routes, at most PD_CONF_WORLD_MAX_ROUTES
 *     {"from": "town", "to": "cellar", "via": ["town-house", "house-cellar"]}
 *   ]
 *
 * A pinned route must chain: each portal in "via" must leave the scene the
 * previous one arrived in (starting from "from"), in a direction the portal
 * allows, and the last must arrive in "to". At most one route per (from, to).
 *
 * Lifetime: pd_conf_world_parse fills a caller-owned struct; on failure it is
 * left zeroed. pd_conf_world_free releases it (safe on a zeroed struct).
 */
#ifndef PD_CONF_WORLD_H
#define PD_CONF_WORLD_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

/* Bytes incl. NUL of a portal or scene name; equal to PD_CONF_MAX_NAME
 * (checked in pd_conf_world.c; this header cannot include pd_conf.h, which
 * includes it). */
#define PD_CONF_WORLD_MAX_NAME 64
/* Portals one config may declare: route tables grow with the square of the
 * portals per scene, so thousands is already far past a hand-made world. */
#define PD_CONF_WORLD_MAX_PORTALS 4096
/* Pinned routes one config may declare (one per ordered pair of scenes). */
#define PD_CONF_WORLD_MAX_ROUTES 1024
/* Portals one pinned route may pass: a designer's hand-picked way, not a tour. */
#define PD_CONF_WORLD_MAX_VIA 32

typedef struct pd_conf_portal_end {
    char scene[PD_CONF_WORLD_MAX_NAME];
    int32_t x, y;                    /* anchor cell on the scene grid */
} pd_conf_portal_end;

typedef struct pd_conf_portal {
    char name[PD_CONF_WORLD_MAX_NAME];
    pd_conf_portal_end a, b;
    int two_way;                     /* 1: a <-> b; 0: a -> b only */
    double cost;                     /* >= 0 */
    uint32_t max_unit;               /* 0 = any unit size */
} pd_conf_portal;

typedef struct pd_conf_route {
    char from[PD_CONF_WORLD_MAX_NAME];
    char to[PD_CONF_WORLD_MAX_NAME];
    uint32_t via[PD_CONF_WORLD_MAX_VIA];   /* indices into pd_conf_world.portals */
    size_t n_via;                          /* >= 1 */
} pd_conf_route;

typedef struct pd_conf_world {
    pd_conf_portal *portals;
    size_t n_portals;
    pd_conf_route *routes;
    size_t n_routes;
} pd_conf_world;

/* Reads root's "portals" and "routes" (both optional) and checks them against
 * root's "scenes" names. Returns 0, or -1 with "SOURCE: $.path: reason" in
 * err and *out zeroed. Other top-level keys are ignored here: pd_conf checks
 * those. */
int pd_conf_world_parse(const struct cJSON *root, const char *source, pd_conf_world *out,
                        char *err, size_t errlen);

/* Same from JSON text (tests and tools that keep the world in a file of its
 * own). When scene_names is set, portals and routes are checked against
 * those names (e.g. the scenes of an already loaded pd_conf) instead of the
 * document's "scenes". */
int pd_conf_world_parse_buffer(const char *json, size_t len, const char *source,
                               const char *const *scene_names, size_t n_scene_names,
                               pd_conf_world *out, char *err, size_t errlen);

void pd_conf_world_free(pd_conf_world *w);

/* Index of the portal with that name, or -1. */
long pd_conf_world_find_portal(const pd_conf_world *w, const char *name);

#endif
