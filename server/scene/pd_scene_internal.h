/*
 * pd_scene_internal.h - what the files of the scene snapshot share and no
 * caller outside them sees: a snapshot's memory count, its authored cells
 * and its writer (the state the versions of one scene share), and the
 * calls between the files. They call one way only:
 *   pd_scene_registry.c -> pd_scene_load.c, pd_scene_update.c -> pd_scene_snapshot.c
 * (the registry loads and updates scenes; loading and updating build
 * snapshots). pd_scene.h is the public side of all four.
 */
#ifndef PD_SCENE_INTERNAL_H
#define PD_SCENE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_scene.h"

/* A registry's memory count. Snapshots outlive the registry's hold on them
 * (searches, instances, the world), so each charged snapshot keeps the
 * count alive by a reference and takes its bytes back when it is freed. */
typedef struct pd_scene_acct {
    atomic_uint_fast32_t refs;
    atomic_uint_fast64_t bytes;
} pd_scene_acct;

/* The cells a scene was loaded or created with, which PD_UPDATE_RESTORE
 * puts back: shared by every version of one scene, made at its first
 * update (until then its grid is its authored state). */
typedef struct pd_scene_authored {
    atomic_uint_fast32_t refs;
    pd_grid *grid;
} pd_scene_authored;

/* What the registry's updates of one scene share (see the top of
 * pd_scene_update.c). Every version that points to it holds a reference; the spare it
 * keeps holds none (its writer is NULL while it waits), so a writer goes
 * when its last version does, and takes the spare with it. */
typedef struct pd_scene_writer {
    atomic_uint_fast32_t refs;
    pthread_mutex_t lock;            /* one update of the scene at a time, in order */
    uint64_t spare_min_cells;        /* a scene of more cells keeps a spare */
    pd_scene *spare;                 /* a retired version to write the next into, or NULL */
    uint64_t spare_at;               /* the version whose state the spare holds */
    uint64_t ops_version;            /* the version the kept operations made (0: none) */
    pd_scene_update *ops;            /* those operations, copied */
    size_t n_ops, ops_cap;
    pd_point *cells;                 /* their cell lists, one after the other */
    size_t cells_cap;
    /* What those operations wrote into each unit size's labels (the same
     * order as the scene's units), so the spare takes the labels as they
     * are, without running the floods again; diffs_ok when complete. */
    pd_components_diff diffs[PD_CONF_MAX_UNIT_SIZES];
    int diffs_ok;
} pd_scene_writer;

/* ---- pd_scene_snapshot.c ------------------------------------------------- */

void pd__acct_release(pd_scene_acct *a);
void pd__charge(pd_scene_acct *a, pd_scene *s);
void pd__recharge(pd_scene *s);
void pd__authored_release(pd_scene_authored *a);
pd_scene_authored *pd__authored_retain(pd_scene_authored *a);
pd_scene_writer *pd__writer_new(uint64_t spare_min_cells);
pd_scene_writer *pd__writer_retain(pd_scene_writer *l);
void pd__writer_release(pd_scene_writer *l);
void pd__writer_keep_ops(pd_scene_writer *l, const pd_scene_update *ops, size_t n_ops, uint64_t version);
void pd__scene_free(pd_scene *s);
int pd__scene_after_change(pd_scene *n, uint64_t changed);
int pd__scene_derive(pd_scene *s, const pd_scene_limits *lim, pd_status *stopped);

/* ---- pd_scene_load.c ----------------------------------------------------- */

pd_scene *pd__scene_load_or_keep(const pd_conf_scene *cs, pd_scene *keep, const pd_scene_limits *lim, int *kept,
                                 char *err, size_t errlen);

/* ---- pd_scene_update.c --------------------------------------------------- */

pd_status pd__apply_updates(const pd_scene *s, const pd_scene_update *ops, size_t n_ops, pd_scene_writer *l,
                            pd_scene **out, pd_scene_update_result *res);
/* The chain's items applied in order to one private snapshot of s (the
 * writer's spare when l allows, else a copy): each validated on its own
 * (a refused one changes nothing), each given the version it makes when it
 * changes cells (s's version plus the changing items up to it) and its
 * own result, repaired op by op as alone. *out: the snapshot, at the last
 * item's version, or NULL when no item changed a cell. PD_OK, or
 * PD_INTERNAL (memory: the items that were valid say so, *out NULL). */
pd_status pd__apply_chain(const pd_scene *s, pd_registry_chain_item *items, size_t n, pd_scene_writer *l,
                          pd_scene **out);

#endif
