/*
 * pd_kind.h - the request-kind table: one descriptor per kind
 * (pd_request_kind), read by the server's dispatch (where a kind runs, how
 * it is prepared and run), its auth (the role a kind needs), its metrics
 * (the kind's name is its label) and its batching (in-flight weight).
 *
 * A kind's code lives in its family's file of this layer: pd_kind_paths.c
 * (FindPath, FindRoute), pd_kind_move.c (the movement queries, Batch),
 * pd_kind_scenes.c (UpdateCells, CreateScene, CreateInstance, DropScene);
 * the table itself is pd_kind.c. Its wire format is the codec's (decode
 * into the pd_request, pd_codec_encode_job for the answer): the codec sits
 * above this layer, so the table cannot name its functions.
 *
 * Kinds the server answers itself, because they touch connection or
 * server state or only read a snapshot on the loop thread (Auth, Cancel,
 * Watch, Unwatch, Reload, Stats, GetLimits, Ping, ListScenes,
 * GetSceneInfo, GetSceneGrid), have rows too: their name and role, and
 * PD_KIND_SERVED; the server's dispatch answers them in its one switch.
 */
#ifndef PD_KIND_H
#define PD_KIND_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conf.h"
#include "pd_job.h"
#include "pd_query.h"
#include "pd_request.h"
#include "pd_store.h"
#include "pd_watch.h"

typedef enum pd_kind_runs {
    PD_KIND_SERVED = 0,  /* answered by the server itself (dispatch's switch) */
    PD_KIND_WORKER,      /* prepared on the loop, run as a pool task */
    PD_KIND_LANE,        /* as WORKER, but as an ordered task in its scene's lane:
                            a scene's changes run one at a time, in order */
    PD_KIND_BATCH,       /* its items are pool tasks of their own (pd_job_item) */
} pd_kind_runs;

/* What prepare may read: the server's state when the request arrived. */
typedef struct pd_kind_env {
    pd_registry *registry;
    pd_world_store *world_store;   /* NULL: no world loaded */
    pd_store *store;
    uint64_t default_max_expansions;
} pd_kind_env;

/* Why prepare refused a request: its status's message, and for
 * STALE_VERSION the version the snapshot has. */
typedef struct pd_kind_refusal {
    char message[PD_QUERY_MESSAGE_MAX];
    uint64_t version;
} pd_kind_refusal;

/* What a finished job asks the server to log (pd_kind.note). */
typedef enum pd_kind_note {
    PD_KIND_NOTE_NONE = 0,
    PD_KIND_NOTE_INFO,
    PD_KIND_NOTE_WARN,
} pd_kind_note;

typedef struct pd_kind {
    const char *name;          /* the protocol's spelling; also its metrics label */
    pd_role role;              /* the least role that may send it */
    pd_kind_runs runs;
    int counts_paths;          /* an OK or PARTIAL answer counts in Stats' paths_found */

    /* On the loop: checks req against the snapshots in env and takes what
     * the job needs from it (scenes retained, the request's arrays moved
     * into the job, its deadline and lane set). Returns PD_OK, or the
     * status to answer with (why filled); the caller frees the job. */
    pd_status (*prepare)(pd_job *job, pd_request *req, const pd_kind_env *env, pd_kind_refusal *why);
    /* Optional, on the loop: answers a prepared job at once when that costs
     * less than a worker's round trip (at most `budget` expansions).
     * `lone` says its connection has nothing else in flight: the kind may
     * then search as a worker would (FindPath: with jump points where the
     * scene uses them, `budget` counting jump points). Returns 1 when the
     * job's result is final, 0 when it must go to a worker after all. */
    int (*run_inline)(pd_job *job, pd_query_scratch *scratch, uint64_t budget, int lone);
    /* On a worker: the query proper. Returns the job's status. */
    pd_status (*run)(pd_job *job, pd_query_scratch *scratch, const pd_query_control *ctl);
    /* Optional: frees what the kind keeps in job->ext. */
    void (*release)(pd_job *job);

    /* On the loop, once the job is back. All optional. */
    /* The watch events of the change the job made, a list of any length:
     * fills event number i (from 0, in the order watchers hear them) and
     * returns 1, or returns 0 past the last. One event at a time, so a
     * change with many (an update's SCENE_UPDATED, then one AGENTS_CUT per
     * PD_WATCH_MAX_AGENTS agents it cut) costs one event's memory. */
    int (*event)(const pd_job *job, size_t i, pd_watch_event *ev);
    /* A line for the server's log: the level, the text in buf. */
    pd_kind_note (*note)(const pd_job *job, char *buf, size_t len);
    /* The scene its latency is labelled with, or NULL (none, or several). */
    const char *(*scene)(const pd_job *job);
    /* 1 when it named no served scene: a refusal, whose latency is not
     * observed and whose name takes no metrics label slot. */
    int (*unserved)(const pd_job *job);
    /* The status it is counted with; NULL: the task's. */
    pd_status (*status)(const pd_job *job);
    /* In-flight slots it takes; NULL: one. */
    size_t (*weight)(const pd_request *req);
} pd_kind;

/* The descriptor of kind; PD_REQ_NONE's for anything out of range. */
const pd_kind *pd_kind_of(pd_request_kind kind);

/* ---- helpers the families share with the server ------------------------ */

/* A Batch's item i, checked against the scene current now, as the same
 * request sent alone would be (a FindPath item gets the server's budget
 * when it names none; its deadline counts from the batch's arrival, and
 * is returned in *deadline_ns, 0 for none). PD_OK, or the item's result
 * holds why not. */
pd_status pd_kind_batch_prepare_item(pd_job *batch, size_t i, const pd_kind_env *env, uint64_t *deadline_ns);

/* The pool lane of the changes to scene `name`: a scene's updates, its
 * creation and its drop share it, so they run in the order they arrived,
 * while other scenes' changes run beside them. Two names that hash alike
 * only share a lane. */
uint64_t pd_kind_scene_lane(const char *name);

/* Around the submit of an ordered job (job->task.ordered, its lanes set):
 * the store hears of it (pd_store_lane_note, or an UpdateCells queued with
 * pd_store_update_enqueue, so a batch of the scene's queued updates may
 * take it: issue 32's appends in one pipeline); submitted says whether the
 * pool took it. On the loop, in submission order. */
void pd_kind_lane_submit(pd_job *job, pd_store *store);
void pd_kind_lane_submitted(pd_job *job, pd_store *store, int accepted);

#endif
