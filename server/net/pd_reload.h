/*
 * pd_reload.h - preparing a config (pd_reload.c): a SIGHUP's or the
 * start-up's load of the config and its maps, and the world built over
 * them, on libuv's threadpool. It applies nothing: what it loaded goes back
 * to the server through the done callback, which publishes it or refuses
 * it (pd_server.c, the one place a config is applied). It calls nothing
 * else in the net layer but the logger.
 */
#ifndef PD_RELOAD_H
#define PD_RELOAD_H

#include <stddef.h>
#include <uv.h>

#include "pd_conf.h"
#include "pd_scene.h"
#include "pd_world.h"

/* Error-text sizes of a load: a full load error line. */
#define PD__RELOAD_ERR_BYTES PD_LOAD_ERR_MAX

/* What a load hands back: the done callback takes over conf (when
 * conf_loaded), scenes and world, and sets them to NULL (or frees them). */
typedef struct pd__loaded {
    const pd_conf *initial;      /* the start-up load: the config it loaded (read and
                                    adjusted by main.c); NULL for a reload */
    int build_world;             /* the server serves routes: a world was built too */
    int conf_loaded;             /* next holds a config to use or free */
    pd_conf next;
    pd_scene_set *scenes;        /* the loaded scenes; NULL when refused (err says why) */
    pd_world *world;             /* built over `scenes`, unpublished; NULL when
                                    refused (world_err says why) or not built */
    char err[PD__RELOAD_ERR_BYTES];
    char world_err[PD__RELOAD_ERR_BYTES];
} pd__loaded;

/* On the loop thread, once a load is done. Returns 1 to load the file
 * again (a scene the load kept was dropped meanwhile), else 0. */
typedef int (*pd__reload_done_fn)(void *user, pd__loaded *loaded);

/* The reload state: the server's part that pd_reload.c owns. The server
 * fills in everything above `job` before asking for a load. */
typedef struct pd__reloader {
    uv_loop_t *loop;
    const char *config_path;     /* NULL: nothing to reread */
    pd_registry *registry;       /* read to keep unchanged scenes */
    pd_world_store *world_store; /* read for the running world; NULL: build none */
    void (*adjust)(pd_conf *conf, void *user);
    void *adjust_user;
    pd__reload_done_fn done;
    void *done_user;
    struct pd__reload_job *job;  /* the load on the threadpool, or NULL */
    int again;                   /* a reload was asked for while one was loading */
    int stopped;                 /* the server is stopping: no reload starts */
} pd__reloader;

/* A reload request (SIGHUP, Reload, pd_server_request_reload). While one is
 * still loading, requests are coalesced into one more run after it: the
 * file may have changed after the running load read it. */
void pd__reload_request(pd__reloader *r);
/* The start-up load of conf (pd_server_load); 0, or -1 with the reason in
 * err when it could not be queued. */
int pd__reload_initial(pd__reloader *r, const pd_conf *conf, char *err, size_t errlen);
/* The server stops: requests are refused from now on, and none runs again
 * after the one loading. */
void pd__reload_stop(pd__reloader *r);

#endif
