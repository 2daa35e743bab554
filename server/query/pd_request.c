/*
 * pd_request.c - freeing a decoded request (see pd_request.h); the kinds'
 * names are the kind table's (pd_kind.c).
 */
#include "pd_request.h"

#include <stdlib.h>

void pd_find_path_req_free(pd_find_path_req *fp)
{
    if (fp == NULL)
        return;
    free(fp->avoid);
    fp->avoid = NULL;
    fp->n_avoid = 0;
    free(fp->goals);
    fp->goals = NULL;
    fp->n_goals = 0;
}

void pd_move_req_free(pd_move_req *m)
{
    if (m == NULL)
        return;
    free(m->moves);
    m->moves = NULL;
    m->n_moves = 0;
    pd_find_path_req_free(m->path);
    free(m->path);
    m->path = NULL;
}

void pd_update_cells_req_free(pd_update_cells_req *u)
{
    free(u->cells);
    u->cells = NULL;
    u->update.cells = NULL;
    u->update.n_cells = 0;
    for (size_t i = 0; i < u->n_ops; i++)
        free((pd_point *)u->ops[i].cells);
    free(u->ops);
    u->ops = NULL;
    u->n_ops = 0;
}

void pd_scene_change_req_free(pd_scene_change_req *ch)
{
    free(ch->map);
    ch->map = NULL;
    ch->map_len = 0;
    pd_conf_scene_free(ch->scene);
    free(ch->scene);
    ch->scene = NULL;
}

void pd_request_free(pd_request *req)
{
    if (req == NULL)
        return;
    if (req->kind == PD_REQ_FIND_PATH) {
        pd_find_path_req_free(&req->u.find_path);
    } else if (req->kind == PD_REQ_UPDATE_CELLS) {
        pd_update_cells_req_free(&req->u.update_cells);
    } else if (pd_request_is_move(req->kind)) {
        pd_move_req_free(&req->u.move);
    } else if (req->kind == PD_REQ_BATCH) {
        for (size_t i = 0; i < req->u.batch.n_items; i++)
            pd_move_req_free(&req->u.batch.items[i]);
        free(req->u.batch.items);
        req->u.batch.items = NULL;
        req->u.batch.n_items = 0;
    } else if (pd_request_is_scene_change(req->kind)) {
        pd_scene_change_req_free(&req->u.change);
    } else if (req->kind == PD_REQ_WATCH) {
        free(req->u.watch.scenes);
        req->u.watch.scenes = NULL;
        req->u.watch.n_scenes = 0;
    }
}
