/*
 * pd_kind_scenes.c - the world-change family's kinds: UpdateCells,
 * CreateScene, CreateInstance and DropScene. Each runs on a worker (a
 * scene's repair or a map's parse can take a while) as an ordered task in
 * its scene's lane, so one scene's changes apply in the order they arrived
 * while other scenes' run beside them; every change goes through the
 * server's store (pd_store), and each that applies emits a watch event.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pd_index.h"
#include "pd_kind.h"
#include "pd_scene_reserve.h"

uint64_t pd_kind_scene_lane(const char *name)
{
    return pd_index_hash(name); /* FNV-1a, the one the scene index uses */
}

/* ---- UpdateCells ---------------------------------------------------------- */

/* The scene name and the cells' bounds are checked on the worker, by the
 * store, against the version the update applies to. */
static pd_status pd__update_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    (void)why;
    pd_update_cells_req *uc = &req->u.update_cells;
    job->task.lane = job->task.lane2 = pd_kind_scene_lane(uc->scene);
    job->store = env->store;
    job->update_req = *uc; /* the job owns the cells and ops now */
    uc->cells = NULL;
    uc->ops = NULL;
    uc->n_ops = 0;
    return PD_OK;
}

/* The cut of the reservations on the cells the update blocked, in the
 * version it made (the lane's next change cannot have come yet). */
static void pd__update_cut(pd_job *job)
{
    pd_registry *registry = pd_store_registry(job->store);
    pd_scene *s = pd_registry_acquire(registry, job->update_req.scene);
    if (!s)
        return;
    const pd_update_cells_req *u = &job->update_req;
    job->ext = pd_reservations_cut(pd_registry_reservations(registry), s, u->n_ops ? u->ops : &u->update,
                                   u->n_ops ? u->n_ops : 1, u->has_at_ms, u->at_ms);
    pd_scene_release(s);
}

/* OUT_OF_BOUNDS from the store says no more than that: name the first
 * cell or rectangle of the request that leaves the scene, with its size. */
static void pd__explain_out_of_bounds(pd_job *job)
{
    pd_scene *s = pd_registry_acquire(pd_store_registry(job->store), job->update_req.scene);
    if (!s)
        return;
    const pd_update_cells_req *u = &job->update_req;
    pd_scene_update one = u->update;
    if (u->cells)
        one.cells = u->cells;
    const pd_scene_update *ops = u->n_ops ? u->ops : &one;
    size_t n_ops = u->n_ops ? u->n_ops : 1;
    char where[112] = "";
    const pd_grid *g = s->grid;
    for (size_t k = 0; k < n_ops && !where[0]; k++) {
        const pd_scene_update *op = &ops[k];
        char prefix[32] = "";
        if (u->n_ops)
            snprintf(prefix, sizeof prefix, "ops[%zu]: ", k);
        if (op->is_rect && (!pd_grid_in_bounds(g, op->rect_min.x, op->rect_min.y) ||
                            !pd_grid_in_bounds(g, op->rect_max.x, op->rect_max.y)))
            snprintf(where, sizeof where, "%srect (%" PRId32 ",%" PRId32 ")-(%" PRId32 ",%" PRId32 ") reaches", prefix,
                     op->rect_min.x, op->rect_min.y, op->rect_max.x, op->rect_max.y);
        for (size_t i = 0; !op->is_rect && i < op->n_cells && !where[0]; i++) {
            if (!pd_grid_in_bounds(g, op->cells[i].x, op->cells[i].y))
                snprintf(where, sizeof where, "%scell (%" PRId32 ",%" PRId32 ") is", prefix, op->cells[i].x,
                         op->cells[i].y);
        }
    }
    if (where[0])
        snprintf(job->update.message, sizeof job->update.message, "%s outside the scene (%" PRId32 "x%" PRId32 ")",
                 where, g->width, g->height);
    pd_scene_release(s);
}

/* An update that blocked cells cuts the reservations holding them, in the
 * same lane run (so no ReservePath of the scene plans on the old cells
 * after the update answered); job->ext keeps who was cut. */
static pd_status pd__update_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    (void)ctl;
    pd_status st = job->queued ? pd_store_update_run(job->store, job->queued, &job->update)
                               : pd_query_update_cells(job->store, &job->update_req, &job->update);
    if (st == PD_OK && job->update.update.cells_changed)
        pd__update_cut(job);
    if (st == PD_OUT_OF_BOUNDS && !job->update.message[0])
        pd__explain_out_of_bounds(job);
    return st;
}

static void pd__update_release(pd_job *job)
{
    pd_update_cut_free(job->ext);
    job->ext = NULL;
    if (job->queued)
        pd_store_update_forget(job->store, job->queued);
    job->queued = NULL;
}

void pd_kind_lane_submit(pd_job *job, pd_store *store)
{
    if (!store || !job->task.ordered)
        return;
    if (job->kind == PD_REQ_UPDATE_CELLS && job->store == store && pd_store_batches(store)) {
        const pd_update_cells_req *u = &job->update_req;
        pd_scene_update one = u->update;
        if (u->cells)
            one.cells = u->cells;
        job->queued = pd_store_update_enqueue(store, u->scene, u->n_ops ? u->ops : &one, u->n_ops ? u->n_ops : 1,
                                              u->idem_key, job->task.lane, job->task.deadline_ns == 0);
        if (job->queued)
            return;
    }
    pd_store_lane_note(store, job->task.lane, job->task.lane2);
}

void pd_kind_lane_submitted(pd_job *job, pd_store *store, int accepted)
{
    if (job->queued)
        pd_store_update_submitted(store, job->queued, accepted);
}

/* The update's SCENE_UPDATED, then the AGENTS_CUT events of the agents it
 * cut (pd_watch_event_agents_cut splits a long list): watchers hear of the
 * new cells before of the plans they broke. */
static int pd__update_event(const pd_job *job, size_t i, pd_watch_event *ev)
{
    if (i == 0)
        return pd_watch_event_from_update(&job->update_req, &job->update, ev) == 0;
    const pd_update_cut *cut = job->ext;
    return cut && pd_watch_event_agents_cut(&job->update_req, &job->update, cut->agents, cut->n_agents, cut->at_ms,
                                            i - 1, ev) == 0;
}

static pd_kind_note pd__update_note(const pd_job *job, char *buf, size_t len)
{
    if (job->task.status != PD_OK || job->update.world_refresh == PD_OK)
        return PD_KIND_NOTE_NONE;
    snprintf(buf, len,
             "update of scene '%s' applied, but the route tables were not refreshed: %s (%s); "
             "routes keep the previous tables until the next reload",
             job->update_req.scene, job->update.world_refresh_error, pd_status_name(job->update.world_refresh));
    return PD_KIND_NOTE_WARN;
}

static const char *pd__update_scene(const pd_job *job)
{
    return job->update_req.scene;
}

/* An update of an unknown scene is a refusal: its client-made name must
 * not take a metrics label slot. */
static int pd__update_unserved(const pd_job *job)
{
    return job->task.status == PD_UNKNOWN_SCENE;
}

const pd_kind pd_kind_update_cells = {
    .name = "update_cells",
    .role = PD_ROLE_WRITE,
    .runs = PD_KIND_LANE,
    .prepare = pd__update_prepare,
    .run = pd__update_run,
    .release = pd__update_release,
    .event = pd__update_event,
    .note = pd__update_note,
    .scene = pd__update_scene,
    .unserved = pd__update_unserved,
};

/* ---- CreateScene, CreateInstance, DropScene -------------------------------- */

/* In the lane of the scene it names; an instance also takes its template's
 * lane: it copies the version the template's earlier updates made, and
 * none made after. The job owns the map and scene entry now. */
static pd_status pd__change_prepare(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why)
{
    (void)why;
    job->task.lane = pd_kind_scene_lane(req->u.change.name);
    job->task.lane2 = req->kind == PD_REQ_CREATE_INSTANCE ? pd_kind_scene_lane(req->u.change.tmpl) : job->task.lane;
    job->store = env->store;
    job->change = req->u.change;
    req->u.change.map = NULL;
    req->u.change.scene = NULL;
    return PD_OK;
}

/* The poll reaches a CreateScene's parse and derive: a cancel, the
 * connection's close or the server's stop ends them. */
static pd_status pd__create_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    return pd_query_create_scene(job->store, &job->change, ctl, &job->change_out);
}

static pd_status pd__instance_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    (void)ctl;
    return pd_query_create_instance(job->store, &job->change, &job->change_out);
}

static pd_status pd__drop_run(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl)
{
    (void)scratch;
    (void)ctl;
    pd_status st = pd_query_drop_scene(job->store, &job->change, &job->change_out);
    /* shared log hook: the scene's reservations end with it on every
     * replica (a scene made again under the name starts with none) */
    if (st == PD_OK && job->change_out.change.applied)
        pd_reservations_dropped(pd_registry_reservations(pd_store_registry(job->store)), job->change.name);
    return st;
}

/* One event each. A new scene has no watchers yet: CreateScene emits
 * nothing. */
static int pd__instance_event(const pd_job *job, size_t i, pd_watch_event *ev)
{
    if (i > 0 || !job->change_out.change.applied)
        return 0;
    memset(ev, 0, sizeof *ev);
    ev->kind = PD_WATCH_INSTANCED;
    ev->incarnation = job->change_out.change.incarnation;
    ev->version = job->change_out.change.template_version;
    memcpy(ev->scene, job->change.tmpl, sizeof ev->scene);
    memcpy(ev->instance, job->change.name, sizeof ev->instance);
    return 1;
}

static int pd__drop_event(const pd_job *job, size_t i, pd_watch_event *ev)
{
    if (i > 0 || !job->change_out.change.applied)
        return 0;
    memset(ev, 0, sizeof *ev);
    ev->kind = PD_WATCH_DROPPED;
    ev->incarnation = job->change_out.change.incarnation;
    ev->version = job->change_out.change.version;
    memcpy(ev->scene, job->change.name, sizeof ev->scene);
    return 1;
}

static pd_kind_note pd__create_note(const pd_job *job, char *buf, size_t len)
{
    if (!job->change_out.change.applied)
        return PD_KIND_NOTE_NONE;
    snprintf(buf, len, "scene '%s' created: %s", job->change.name, job->change_out.built);
    return PD_KIND_NOTE_INFO;
}

const pd_kind pd_kind_create_scene = {
    .name = "create_scene",
    .role = PD_ROLE_WRITE,
    .runs = PD_KIND_LANE,
    .prepare = pd__change_prepare,
    .run = pd__create_run,
    .note = pd__create_note,
};

const pd_kind pd_kind_create_instance = {
    .name = "create_instance",
    .role = PD_ROLE_WRITE,
    .runs = PD_KIND_LANE,
    .prepare = pd__change_prepare,
    .run = pd__instance_run,
    .event = pd__instance_event,
};

const pd_kind pd_kind_drop_scene = {
    .name = "drop_scene",
    .role = PD_ROLE_WRITE,
    .runs = PD_KIND_LANE,
    .prepare = pd__change_prepare,
    .run = pd__drop_run,
    .event = pd__drop_event,
};
