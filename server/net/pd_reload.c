/*
 * pd_reload.c - SIGHUP: the config and its maps are loaded, and the world
 * built over them, on libuv's threadpool; the loop thread then publishes
 * scenes and world together, or refuses them and keeps serving. Repeats
 * asked for during a load are coalesced into one more run. The start-up
 * load (pd_server_load) is the same job over the config main.c has read,
 * so the metrics port already answers while large maps load.
 */
#include "pd_server_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_log.h"

/* What the start-up load reports to pd_server_load, which waits for it. */
typedef struct pd__initial_load {
    int done;
    int result;                  /* pd_server_load's return value */
    char *err;
    size_t errlen;
} pd__initial_load;

/* One reload in progress. The loop thread fills in what the load needs and
 * queues it; the work callback (a libuv threadpool thread) reads the config,
 * builds the scene set and the world over it; the after-work callback (the
 * loop thread again) publishes or refuses them and frees this. libuv runs
 * the two callbacks one after the other and orders them with its own lock,
 * so the fields need no lock of their own; the loop thread does not touch
 * them in between. */
typedef struct pd__reload_job {
    uv_work_t req;               /* req.data points back to the server */
    const pd_conf *initial;      /* the start-up load: this config, already read and
                                    adjusted (NULL for a reload, which reads the file) */
    pd__initial_load *initial_out;
    const char *config_path;     /* the server's; lives until the after-work callback */
    pd_registry *registry;       /* the server's, read to keep unchanged scenes */
    pd_world_store *world_store; /* the server's (or NULL), read for the running world */
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;
    int build_world;             /* the server serves routes: build the world too */
    /* Results, written by the work callback. */
    int conf_loaded;             /* next holds a config to use or free */
    pd_conf next;
    pd_scene_set *scenes;        /* the loaded scenes; NULL when refused */
    pd_world *world;             /* built over `scenes`, unpublished; NULL when
                                    refused (world_err says why) or not built */
    char err[512];
    char world_err[512];
} pd__reload_job;

/* The slow part, off the loop thread: everything that reads files or builds
 * grids and route tables. It touches no server state, so the loop keeps
 * serving meanwhile. The world is built over the loaded set itself, the
 * scenes the publish will serve; a world that does not fit them refuses
 * the whole reload (pd__reload_done). */
static void pd__reload_work(uv_work_t *req)
{
    pd__reload_job *rl = (pd__reload_job *)req;
    const pd_conf *conf = rl->initial;
    if (!conf) {
        if (pd_conf_load_file(rl->config_path, &rl->next, rl->err, sizeof rl->err) != 0)
            return;
        rl->conf_loaded = 1;
        if (rl->adjust)
            rl->adjust(&rl->next, rl->adjust_user);
        if (pd_conf_check_protected(&rl->next, rl->err, sizeof rl->err) != 0)
            return;
        conf = &rl->next;
    }
    /* A config scene whose definition did not change is kept as served,
     * its updates included (at start-up the registry is empty). */
    rl->scenes = pd_registry_prepare_reload(rl->registry, conf, rl->err, sizeof rl->err);
    if (rl->scenes && rl->build_world) {
        /* The tables of a kept scene whose portal cells did not move are
         * the running world's. */
        pd_world *running = pd_world_store_acquire(rl->world_store);
        rl->world = pd_world_build_from_set(&conf->world, rl->scenes, running, rl->world_err,
                                            sizeof rl->world_err);
        pd_world_release(running);
    }
}

/* Swaps in the loaded scenes and the world built over them; the registry and the world store
 * own them from now on. Returns 0, or -1 when a scene the load kept was
 * dropped meanwhile (nothing was published; the load must run again). */
static int pd__publish_loaded(pd_server *s, pd__reload_job *rl)
{
    int rc = s->world_store
                 ? pd_world_store_publish_reload(s->world_store, s->registry, rl->scenes, rl->world)
                 : pd_registry_publish(s->registry, rl->scenes);
    rl->scenes = NULL;
    rl->world = NULL;
    return rc;
}

/* Publishes a loaded reload: the scene swap with the world built for it,
 * the workers' contexts, and the settings a reload may change. Only swaps
 * happen here; the tables were computed by pd__reload_work. Takes over
 * rl->next, rl->scenes and rl->world. Returns 0, or -1 when nothing was
 * published because a scene the load kept was dropped while it loaded. */
static int pd__reload_publish(pd_server *s, pd__reload_job *rl)
{
    pd_conf next = rl->next;
    size_t kept = 0, built = 0;
    pd_scene_set_counts(rl->scenes, &kept, &built);

    /* A world that does not fit the new scenes never gets here
     * (pd__reload_done refuses the whole reload). The journal records the
     * scenes the publish replaced or dropped, in order with the changes
     * around it. */
    void *jr = pd_store_reload_begin(s->store, rl->scenes);
    /* Watchers hear of every watched scene whose snapshot the publish
     * replaced or dropped; one it kept makes no event. */
    pd__watch_reload *wr = pd__watch_reload_begin(s);
    int rc = pd__publish_loaded(s, rl);
    pd_store_reload_end(s->store, jr);
    pd__watch_reload_end(s, wr);
    if (rc != 0) {
        pd_conf_free(&next);
        return -1;
    }

    char addr[PD_CONF_MAX_ADDRESS];
    if (strcmp(next.listen_host, s->conf.listen_host) != 0 || next.listen_port != s->conf.listen_port)
        pd_log_warn("reload: a new listen address needs a restart; still on %s",
                    pd_conf_format_address(addr, s->conf.listen_host, s->port));
    /* The metrics HTTP server is started once, by main.c; s->conf keeps the
     * address it serves, so nothing reads one it does not. */
    if (next.metrics_enabled != s->conf.metrics_enabled ||
        (next.metrics_enabled && (strcmp(next.metrics_host, s->conf.metrics_host) != 0 ||
                                  next.metrics_port != s->conf.metrics_port))) {
        if (s->conf.metrics_enabled)
            pd_log_warn("reload: a new metrics_listen address needs a restart; still on %s",
                        pd_conf_format_address(addr, s->conf.metrics_host, s->metrics_port));
        else
            pd_log_warn("reload: a new metrics_listen address needs a restart; metrics stay off");
    }
    if (next.threads != s->conf.threads || next.job_queue_capacity != s->conf.job_queue_capacity)
        pd_log_warn("reload: thread count and job queue capacity need a restart; unchanged");
    if (strcmp(next.data_dir, s->conf.data_dir) != 0 || next.journal_fsync != s->conf.journal_fsync ||
        next.journal_compact_bytes != s->conf.journal_compact_bytes)
        pd_log_warn("reload: data_dir and the journal's settings need a restart; unchanged");
    memcpy(next.data_dir, s->conf.data_dir, sizeof next.data_dir);
    next.journal_fsync = s->conf.journal_fsync;
    next.journal_compact_bytes = s->conf.journal_compact_bytes;
    memcpy(next.listen_host, s->conf.listen_host, sizeof next.listen_host);
    next.listen_port = s->conf.listen_port;
    next.metrics_enabled = s->conf.metrics_enabled;
    memcpy(next.metrics_host, s->conf.metrics_host, sizeof next.metrics_host);
    next.metrics_port = s->conf.metrics_port;
    next.threads = s->conf.threads;
    next.job_queue_capacity = s->conf.job_queue_capacity;

    size_t n_scenes = next.n_scenes;
    pd_conf scenes_only = {0};
    scenes_only.scenes = next.scenes;
    scenes_only.n_scenes = next.n_scenes;
    scenes_only.world = next.world;   /* the world store keeps its own copy */
    next.scenes = NULL;
    next.n_scenes = 0;
    memset(&next.world, 0, sizeof next.world);
    /* Open connections hold the rights their tokens gave: the new tokens
     * decide them from now on. */
    pd__auth_recheck(s, &next);
    s->conf = next;
    /* The frame cap is the one limit a connection keeps a copy of (its
     * reader's); open connections take the new one too, as GetLimits on
     * them reports it. A frame already partly read is checked against it
     * when its header is looked at next. */
    for (pd__conn *c = s->conns; c; c = c->next)
        c->reader.max_frame = s->conf.max_frame_bytes;
    pd__fit_fd_limit(&s->conf);
    pd__server_scene_caps(s);
    pd_metrics_set_scene_series(s->metrics, s->conf.metrics_scene_series);
    atomic_store(&s->worker_retained_bytes, s->conf.worker_retained_bytes);
    pd__dispatch_apply_conf(s);
    pd_conf_free(&scenes_only);

    pd_log_set_level(s->conf.log_level);
    uint64_t interval = pd__sweep_interval(&s->conf);
    if (interval != s->sweep_interval_ms && uv_is_active((uv_handle_t *)&s->sweep_timer)) {
        s->sweep_interval_ms = interval;
        uv_timer_set_repeat(&s->sweep_timer, interval);
    }
    pd__journal_after_reload(s, built);
    pd_metrics_set_reload_scenes(s->metrics, kept, built);
    pd_log_info("reloaded %s: %zu scenes, %zu kept with their updates, %zu built anew", s->config_path,
                n_scenes, kept, built);
    return 0;
}

static void pd__reload_start(pd_server *s);

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
    }
}

/* Seconds since the epoch, for the time of the last reload on /metrics. */
static double pd__wall_seconds(void)
{
    uv_timeval64_t tv;
    if (uv_gettimeofday(&tv) != 0)
        return 0;
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The start-up load is back: unlike a reload there is nothing to fall back
 * on, so a world that does not fit the scenes refuses the whole load. */
static void pd__initial_done(pd_server *s, pd__reload_job *rl)
{
    pd__initial_load *out = rl->initial_out;
    out->done = 1;
    s->loading = 0;
    if (s->phase != PD__RUNNING) {
        /* Stopped: the stop ended the load (pd_registry_stop_loads), or
         * came after it. */
        out->result = 1;
    } else if (!rl->scenes) {
        snprintf(out->err, out->errlen, "%s", rl->err);
        out->result = -1;
    } else if (rl->build_world && !rl->world) {
        snprintf(out->err, out->errlen, "portals and routes: %s", rl->world_err);
        out->result = -1;
    } else {
        /* The registry was empty, so the set keeps nothing and publishes. */
        out->result = pd__publish_loaded(s, rl);
    }
    pd_world_release(rl->world);
    pd_registry_discard(rl->scenes);
}

/* Back on the loop thread once the load is done: publish it, or log why it
 * was refused and keep serving the running set. A stop that began meanwhile
 * wins: the loaded set and its world are dropped unpublished. Then a reload
 * asked for during the load runs (once, however many were asked for). */
static void pd__reload_done(uv_work_t *req, int status)
{
    pd_server *s = req->data;
    pd__reload_job *rl = (pd__reload_job *)req;
    s->reload = NULL;
    if (status != 0) {
        /* Only uv_cancel gives this, and nothing cancels a reload; kept so
         * no path leaks what the work may have loaded. */
        snprintf(rl->err, sizeof rl->err, "the load did not run: %s", uv_strerror(status));
    }
    if (rl->scenes)
        pd__log_built(rl->scenes);
    if (rl->initial) {
        pd__initial_done(s, rl);
    } else if (!rl->conf_loaded) {
        pd_log_error("reload refused: %s; the running configuration stays", rl->err);
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_FAILURE, pd__wall_seconds());
    } else if (s->phase != PD__RUNNING) {
        pd_log_warn("reload of %s dropped: the server is stopping", s->config_path);
        pd_world_release(rl->world);
        pd_registry_discard(rl->scenes);
        pd_conf_free(&rl->next);
    } else if (!rl->scenes) {
        pd_log_error("reload refused: %s; the running scenes stay", rl->err);
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_FAILURE, pd__wall_seconds());
        pd_conf_free(&rl->next);
    } else if (rl->build_world && !rl->world && s->world_store) {
        /* One transaction: scenes, portals and routes change together or
         * not at all, so portals that do not fit refuse the whole reload. */
        pd_log_error("reload refused: portals and routes of %s: %s; the running scenes, portals and routes stay",
                     s->config_path, rl->world_err);
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_FAILURE, pd__wall_seconds());
        pd_registry_discard(rl->scenes);
        pd_conf_free(&rl->next);
    } else if (pd__reload_publish(s, rl) != 0) {
        /* Rare: a DropScene of a config scene the load kept landed while it
         * loaded. The file is read again against what is served now. */
        pd_log_info("reload of %s: a scene it kept was dropped while it loaded; loading again",
                    s->config_path);
        s->reload_again = 1;
    } else {
        pd_metrics_observe_reload(s->metrics, PD_METRICS_RELOAD_SUCCESS, pd__wall_seconds());
    }
    free(rl);
    if (s->reload_again) {
        s->reload_again = 0;
        if (s->phase == PD__RUNNING)
            pd__reload_start(s);
    }
}

/* Queues the load of the config file on libuv's threadpool. The pending
 * work request keeps uv_run going, so a stop that begins meanwhile still
 * waits for pd__reload_done before the loop can be closed. */
static void pd__reload_start(pd_server *s)
{
    pd_log_info("reloading %s", s->config_path);
    pd__reload_job *rl = calloc(1, sizeof *rl);
    if (!rl) {
        pd_log_error("reload refused: out of memory; the running configuration stays");
        return;
    }
    rl->req.data = s;
    rl->config_path = s->config_path;
    rl->registry = s->registry;
    rl->world_store = s->world_store;
    rl->adjust = s->adjust;
    rl->adjust_user = s->adjust_user;
    rl->build_world = s->world_store != NULL;
    int rc = uv_queue_work(s->loop, &rl->req, pd__reload_work, pd__reload_done);
    if (rc != 0) {
        pd_log_error("reload refused: cannot start the load: %s; the running configuration stays",
                     uv_strerror(rc));
        free(rl);
        return;
    }
    s->reload = rl;
}

/* A reload request (SIGHUP or pd_server_request_reload). While one is still
 * loading, requests are coalesced into one more run after it: the file may
 * have changed after the running load read it. */
void pd__reload(pd_server *s)
{
    if (!s->config_path) {
        pd_log_warn("reload requested, but the server has no config file to reread");
        return;
    }
    if (s->phase != PD__RUNNING) {
        pd_log_warn("reload requested while stopping; ignored");
        return;
    }
    if (s->reload) {
        pd_log_info("reload requested while one is loading; it runs again once that one is done");
        s->reload_again = 1;
        return;
    }
    pd__reload_start(s);
}

int pd_server_load(pd_server *s, pd_pool *pool, const pd_conf *conf, char *err, size_t errlen)
{
    pd__initial_load out = {0, -1, err, errlen};
    pd__reload_job *rl = calloc(1, sizeof *rl);
    if (!rl) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    s->pool = pool;
    rl->req.data = s;
    rl->initial = conf;
    rl->initial_out = &out;
    rl->registry = s->registry;
    rl->world_store = s->world_store;
    rl->build_world = s->world_store != NULL;
    int rc = uv_queue_work(s->loop, &rl->req, pd__reload_work, pd__reload_done);
    if (rc != 0) {
        snprintf(err, errlen, "cannot start loading the scenes: %s", uv_strerror(rc));
        free(rl);
        return -1;
    }
    s->reload = rl;
    s->loading = 1;
    pd_log_info("loading %zu scenes", conf->n_scenes);
    /* The pending work request keeps the loop running until its after-work
     * callback has set out.done, whatever else (a stop) happens meanwhile. */
    while (!out.done)
        uv_run(s->loop, UV_RUN_ONCE);
    return out.result;
}
