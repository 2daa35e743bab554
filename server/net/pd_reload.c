/*
 * pd_reload.c - preparing a config: SIGHUP's reload, and the start-up load
 * (pd_server_load) of the config main.c has read, so the metrics port
 * already answers while large maps load. The config and its maps are loaded,
 * and the world built over them, on libuv's threadpool; the result goes
 * back on the loop thread to the server's done callback, which publishes it
 * or refuses it (pd_server.c: the one place a config is applied). Repeats
 * asked for during a load are coalesced into one more run.
 */
#include "pd_reload.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_log.h"

/* One load in progress. The loop thread fills in what the load needs and
 * queues it; the work callback (a libuv threadpool thread) reads the config,
 * builds the scene set and the world over it; the after-work callback (the
 * loop thread again) hands them to the server and frees this. libuv runs
 * the two callbacks one after the other and orders them with its own lock,
 * so the fields need no lock of their own; the loop thread does not touch
 * them in between. */
typedef struct pd__reload_job {
    uv_work_t req;               /* req.data points back to the reloader */
    const char *config_path;     /* the server's; lives until the after-work callback */
    pd_registry *registry;       /* the server's, read to keep unchanged scenes */
    pd_world_store *world_store; /* the server's (or NULL), read for the running world */
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;
    pd__loaded loaded;           /* the results, written by the work callback */
} pd__reload_job;

/* The slow part, off the loop thread: everything that reads files or builds
 * grids and route tables. It touches no server state, so the loop keeps
 * serving meanwhile. The world is built over the loaded set itself, the
 * scenes the publish will serve; a world that does not fit them refuses
 * the whole reload (pd_server.c). */
static void pd__reload_work(uv_work_t *req)
{
    pd__reload_job *rl = (pd__reload_job *)req;
    pd__loaded *l = &rl->loaded;
    const pd_conf *conf = l->initial;
    if (!conf) {
        if (pd_conf_load_file(rl->config_path, &l->next, l->err, sizeof l->err) != 0)
            return;
        l->conf_loaded = 1;
        if (rl->adjust)
            rl->adjust(&l->next, rl->adjust_user);
        if (pd_conf_check_protected(&l->next, l->err, sizeof l->err) != 0)
            return;
        conf = &l->next;
    }
    /* A config scene whose definition did not change is kept as served,
     * its updates included (at start-up the registry is empty). */
    l->scenes = pd_registry_prepare_reload(rl->registry, conf, l->err, sizeof l->err);
    if (l->scenes && l->build_world) {
        /* The tables of a kept scene whose portal cells did not move are
         * the running world's. */
        pd_world *running = pd_world_store_acquire(rl->world_store);
        l->world = pd_world_build_from_set(&conf->world, l->scenes, running, l->world_err,
                                            sizeof l->world_err);
        pd_world_release(running);
    }
}

/* One line per scene the load built (a kept one was logged when it was
 * built): its size, walkable fraction and, for a Tiled map, what each rule
 * decided, so a map that loads wrong is seen in the log. */
static void pd__log_built(const pd_scene_set *set)
{
    size_t n = 0;
    pd_scene *const *scenes = pd_scene_set_scenes(set, &n);
    char line[PD_TILED_STATS_LAYERS + 256];
    for (size_t i = 0; i < n; i++) {
        if (pd_scene_set_kept(set, i))
            continue;
        pd_scene_describe(scenes[i], line, sizeof line);
        pd_log_info("scene '%s' built: %s", scenes[i]->name, line);
        if (scenes[i]->from_tiled && pd_tiled_stats_untagged_only(&scenes[i]->tiled_stats))
            pd_log_warn("scene '%s' loads all open: no tile decided a cell by its property, class, collision "
                        "shape or object; if the map has walls, check blocked_property and the class names",
                        scenes[i]->name);
    }
}

static void pd__reload_start(pd__reloader *r);

/* Back on the loop thread once the load is done: the server publishes it or
 * refuses it. Then a reload asked for during the load runs (once, however
 * many were asked for), unless the server is stopping. */
static void pd__reload_done(uv_work_t *req, int status)
{
    pd__reloader *r = req->data;
    pd__reload_job *rl = (pd__reload_job *)req;
    pd__loaded *l = &rl->loaded;
    r->job = NULL;
    if (status != 0) {
        /* Only uv_cancel gives this, and nothing cancels a reload; kept so
         * no path leaks what the work may have loaded. */
        snprintf(l->err, sizeof l->err, "the load did not run: %s", uv_strerror(status));
    }
    if (l->scenes)
        pd__log_built(l->scenes);
    if (r->done(r->done_user, l))
        r->again = 1;
    free(rl);
    if (r->again) {
        r->again = 0;
        if (!r->stopped)
            pd__reload_start(r);
    }
}

static pd__reload_job *pd__job_new(pd__reloader *r)
{
    pd__reload_job *rl = calloc(1, sizeof *rl);
    if (!rl)
        return NULL;
    rl->req.data = r;
    rl->registry = r->registry;
    rl->world_store = r->world_store;
    rl->loaded.build_world = r->world_store != NULL;
    return rl;
}

/* Queues the load of the config file on libuv's threadpool. The pending
 * work request keeps uv_run going, so a stop that begins meanwhile still
 * waits for pd__reload_done before the loop can be closed. */
static void pd__reload_start(pd__reloader *r)
{
    pd_log_info("reloading %s", r->config_path);
    pd__reload_job *rl = pd__job_new(r);
    if (!rl) {
        pd_log_error("reload refused: out of memory; the running configuration stays");
        return;
    }
    rl->config_path = r->config_path;
    rl->adjust = r->adjust;
    rl->adjust_user = r->adjust_user;
    int rc = uv_queue_work(r->loop, &rl->req, pd__reload_work, pd__reload_done);
    if (rc != 0) {
        pd_log_error("reload refused: cannot start the load: %s; the running configuration stays",
                     uv_strerror(rc));
        free(rl);
        return;
    }
    r->job = rl;
}

void pd__reload_request(pd__reloader *r)
{
    if (!r->config_path) {
        pd_log_warn("reload requested, but the server has no config file to reread");
        return;
    }
    if (r->stopped) {
        pd_log_warn("reload requested while stopping; ignored");
        return;
    }
    if (r->job) {
        pd_log_info("reload requested while one is loading; it runs again once that one is done");
        r->again = 1;
        return;
    }
    pd__reload_start(r);
}

int pd__reload_initial(pd__reloader *r, const pd_conf *conf, char *err, size_t errlen)
{
    pd__reload_job *rl = pd__job_new(r);
    if (!rl) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rl->loaded.initial = conf;
    int rc = uv_queue_work(r->loop, &rl->req, pd__reload_work, pd__reload_done);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start loading the scenes: %s", uv_strerror(rc));
        free(rl);
        return -1;
    }
    r->job = rl;
    return 0;
}

void pd__reload_stop(pd__reloader *r)
{
    r->stopped = 1;
}
