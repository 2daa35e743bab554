/*
 * pd_job.h - one request on its way through the worker pool: the pool's
 * task with the query and result of its kind around it. Defined once, here
 * below the net layer, so the server (net/pd_dispatch.c), the codec (which
 * encodes a finished job, pd_codec_encode_job) and the tests all use this
 * one struct.
 *
 * What a job holds for its kind is filled by the kind's prepare and read by
 * its run, encode, events and stats hooks (pd_kind.h); what every kind
 * shares (ids, arrival, the encoded answer) is filled by the server.
 *
 * A Batch is a job that is never submitted: each of its items is a task of
 * its own (pd_job_item), queued, charged and counted like the same request
 * sent alone; the batch answers in one frame once its last item is back.
 */
#ifndef PD_JOB_H
#define PD_JOB_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "pd_movement.h"
#include "pd_pool.h"
#include "pd_query.h"
#include "pd_request.h"

struct pd_kind;
struct pd__wire;  /* the net layer's: a connection's socket a worker may write to */

typedef struct pd_job pd_job;

/* One item of a Batch on its way through the pool: its batch's owner and
 * tag, so that a Cancel of the batch or the close of its connection
 * reaches every item. Its query and result live in the batch. */
typedef struct pd_job_item {
    pd_task task;                 /* first: the pool hands back &item->task */
    pd_job *batch;
    size_t index;                 /* in the batch's move_* arrays */
    int ran;                      /* set by the worker that ran it */
} pd_job_item;

struct pd_job {
    pd_task task;                 /* first: the pool hands back &job->task;
                                     owner = connection id, tag = request id */
    pd_request_kind kind;
    const struct pd_kind *ops;    /* pd_kind_of(kind) */
    int jump_points;              /* the server's setting when the job was made */
    uint64_t arrival_ns;          /* when its request's frame was read (Response.server_us) */

    /* PD_REQ_FIND_PATH */
    pd_scene *scene;              /* retained */
    pd_point *avoid;              /* owned; path_query.avoid points at it */
    pd_path_query path_query;
    pd_path_result path;

    /* PD_REQ_FIND_ROUTE */
    pd_world *world;              /* retained until the legs are searched */
    pd_route_query route_query;
    pd_route_result route;

    /* PD_REQ_UPDATE_CELLS */
    pd_store *store;              /* the server's: every change goes through it */
    pd_update_cells_req update_req;   /* cells owned */
    pd_update_outcome update;
    struct pd_store_queued *queued;   /* queued for a batch (pd_kind_lane_submit), or NULL */

    /* pd_request_is_scene_change(kind): store as above */
    pd_scene_change_req change;   /* map owned */
    pd_scene_change_outcome change_out;

    /* Movement queries (pd_request_is_move) and PD_REQ_BATCH: n_moves items
     * (1 for a single query), each with its query and result. */
    pd_move_req *move_reqs;       /* owned, with their arrays */
    pd_move_query *move_queries;  /* scenes retained */
    pd_move_result *move_results;
    size_t n_moves;

    /* PD_REQ_BATCH: the items' tasks. */
    pd_job_item *items;           /* n_moves; those submitted are in the pool */
    size_t items_out;             /* items the pool holds (loop thread only) */
    atomic_size_t items_left;     /* items without a result yet, plus one while
                                     the loop submits: whoever takes it to 0
                                     encodes the answer */

    /* A kind's own state beyond the fields above (a kind added later keeps
     * what it needs here rather than in this struct), freed by its
     * pd_kind.release. */
    void *ext;

    int want_world;               /* FindPath / FindRoute: answer with world coordinates */
    uint32_t max_chunk;           /* the server's max_waypoints_per_chunk when the job was made */
    uint8_t *answer;              /* owned: the encoded answer, when its worker made it */
    size_t answer_len;
    struct pd__wire *wire;        /* the server's, retained: set when the worker may write the
                                     answer itself (its connection had nothing else in flight) */
    size_t answer_sent;           /* bytes of the answer its worker wrote */
};

/* A zeroed job of kind, its task set to run `run`; NULL when out of memory. */
pd_job *pd_job_new(pd_request_kind kind, pd_task_run_fn run);

/* Frees what the job holds (scenes and world released, arrays freed, the
 * kind's release called) but not job->wire, which is the server's to
 * release first; safe on NULL. */
void pd_job_free(pd_job *job);

/* What pd_job_free frees, leaving the job itself, its owned pointers NULL:
 * the server reuses one job for the FindPaths it answers on the loop
 * (pd_kind.run_inline), which would otherwise cost a 3 KiB allocation and
 * zeroing each. */
void pd_job_clear(pd_job *job);

/* Copies the task's status into the job's results, so that a job that
 * never ran (cancelled, past its deadline), which carries only that
 * status, answers with it too. */
void pd_job_settle_status(pd_job *job);

/* A movement query or batch item that stopped, or never ran, with st. */
void pd_job_move_fail(pd_move_result *r, pd_status st);

/* The job's time in the search proper (Response.search_us): its path's or
 * route's search, its movement queries' (a batch's items together); 0 for
 * a change, or a job that never ran. */
uint64_t pd_job_search_us(const pd_job *job);

/* Expansions the job's search spent (its path's or route's). */
uint64_t pd_job_expanded(const pd_job *job);

/* Gives back, on the thread that ran the job, what its searches allocated
 * once its answer is encoded. */
void pd_job_drop_results(pd_job *job);

#endif
