/*
 * pd_codec_admin.c - the administrative family on the wire: Auth, Cancel,
 * Ping, Stats, GetLimits and Reload decoded, and the answers the server
 * makes for them (acks, pong, limits, the role granted, the stats).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_codec_internal.h"

uint8_t *pd_codec_encode_ack(uint64_t id, pd_status status, size_t *out_len)
{
    Pathd__V1__Response resp = PATHD__V1__RESPONSE__INIT;
    resp.id = id;
    resp.status = pd__wire_status(status);
    resp.final = 1;
    return pd__encode_single(&resp, out_len);
}

uint8_t *pd_codec_encode_pong(uint64_t id, uint64_t nonce, pd_serving serving,
                              size_t *out_len)
{
    Pathd__V1__Pong pong = PATHD__V1__PONG__INIT;
    pong.nonce = nonce;
    pong.serving = (Pathd__V1__ServingState)serving;
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_PONG, &pong, out_len);
}

void pd_codec_limits_fixed(pd_codec_limits *out)
{
    out->max_batch_items = PD_BATCH_MAX_ITEMS;
    out->max_move_points = PD_MOVE_MAX_POINTS;
    out->max_radius_cells = PD_MOVE_MAX_RADIUS;
    out->max_walk_radius = PD_MOVE_MAX_WALK_RADIUS;
    out->max_tolerance = PD_MOVE_MAX_TOLERANCE;
    out->max_avoid_cells = PD_CODEC_MAX_AVOID;
    out->max_deadline_ms = PD_CODEC_MAX_DEADLINE_MS;
    out->max_unit_size = PD_CONF_MAX_UNIT_SIZE;
    out->scene_grid_band_bytes = PD_SCENE_GRID_BAND_BYTES;
}

uint8_t *pd_codec_encode_limits(uint64_t id, const pd_codec_limits *l, size_t *out_len)
{
    Pathd__V1__Limits m = PATHD__V1__LIMITS__INIT;
    m.max_frame_bytes = l->max_frame_bytes;
    m.max_inflight_per_conn = l->max_inflight_per_conn;
    m.max_waypoints_per_chunk = l->max_waypoints_per_chunk;
    m.max_connections = l->max_connections;
    m.job_queue_capacity = l->job_queue_capacity;
    m.idle_timeout_ms = l->idle_timeout_ms;
    m.frame_timeout_ms = l->frame_timeout_ms;
    m.default_max_expansions = l->default_max_expansions;
    m.max_batch_items = l->max_batch_items;
    m.max_move_points = l->max_move_points;
    m.max_radius_cells = l->max_radius_cells;
    m.max_walk_radius = l->max_walk_radius;
    m.max_tolerance = l->max_tolerance;
    m.max_avoid_cells = l->max_avoid_cells;
    m.max_deadline_ms = l->max_deadline_ms;
    m.max_unit_size = l->max_unit_size;
    m.scene_grid_band_bytes = l->scene_grid_band_bytes;
    m.max_message_bytes = l->max_message_bytes;
    m.watch_buffer_bytes = l->watch_buffer_bytes;
    m.max_watch_scenes = l->max_watch_scenes;
    m.max_watchers = l->max_watchers;
    m.max_watches_per_conn = l->max_watches_per_conn;
    m.reservation_ttl_ms = l->reservation_ttl_ms;
    m.max_agents_per_scene = l->max_agents_per_scene;
    m.max_reservation_entries = l->max_reservation_entries;
    m.max_reservation_window_ms = l->max_reservation_window_ms;
    m.max_agent_bytes = l->max_agent_bytes;
    m.max_clock_step_ms = l->max_clock_step_ms;
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_LIMITS, &m, out_len);
}

uint8_t *pd_codec_encode_auth(uint64_t id, const char *role, size_t *out_len)
{
    Pathd__V1__AuthResult m = PATHD__V1__AUTH_RESULT__INIT;
    m.role = (char *)role;
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_AUTH, &m, out_len);
}

uint8_t *pd_codec_encode_stats(uint64_t id, const pd_server_stats *stats, size_t *out_len)
{
    Pathd__V1__Stats m = PATHD__V1__STATS__INIT;
    m.uptime_ms = stats->uptime_ms;
    m.connections = stats->connections;
    m.requests_total = stats->requests_total;
    m.paths_found = stats->paths_found;
    m.expansions_total = stats->expansions_total;
    m.queue_depth = stats->queue_depth;
    m.in_flight = stats->in_flight;
    m.threads = stats->threads;
    m.scenes = stats->scenes;
    m.overloaded_total = stats->overloaded_total;
    m.malformed_total = stats->malformed_total;
    m.buffered_bytes = stats->buffered_bytes;
    m.buffer_budget_bytes = stats->buffer_budget_bytes;
    m.connections_shed = stats->connections_shed_total;
    m.frame_timeouts = stats->frame_timeouts_total;
    m.accept_errors = stats->accept_errors_total;
    return pd__encode_ok(id, PATHD__V1__RESPONSE__BODY_STATS, &m, out_len);
}

static pd_status pd__decode_cancel_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                        char *err, size_t errlen)
{
    (void)row;
    (void)err;
    (void)errlen;
    req->u.cancel_target = m->cancel->target_id;
    return PD_OK;
}

static pd_status pd__decode_ping_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                      char *err, size_t errlen)
{
    (void)row;
    (void)err;
    (void)errlen;
    req->u.ping_nonce = m->ping->nonce;
    return PD_OK;
}

/* The token itself is never echoed: it may be a real one mistyped. */
static pd_status pd__decode_auth_body(const Pathd__V1__Request *m, const pd__codec_row *row, pd_request *req,
                                      char *err, size_t errlen)
{
    (void)row;
    const char *token = m->auth->token ? m->auth->token : "";
    size_t n = strlen(token);
    if (n >= PD_CONF_MAX_TOKEN) {
        pd_set_err(err, errlen, "auth.token is longer than %d bytes", PD_CONF_MAX_TOKEN - 1);
        return PD_INVALID_ARGUMENT;
    }
    memcpy(req->u.auth.token, token, n + 1);
    req->u.auth.len = n;
    return PD_OK;
}

const pd__codec_row pd__codec_rows_admin[] = {
    {PATHD__V1__REQUEST__BODY_PING, PD_REQ_PING, 0, pd__decode_ping_body, NULL},
    {PATHD__V1__REQUEST__BODY_AUTH, PD_REQ_AUTH, 0, pd__decode_auth_body, NULL},
    {PATHD__V1__REQUEST__BODY_CANCEL, PD_REQ_CANCEL, 0, pd__decode_cancel_body, NULL},
    {PATHD__V1__REQUEST__BODY_STATS, PD_REQ_STATS, 0, NULL, NULL},
    {PATHD__V1__REQUEST__BODY_LIMITS, PD_REQ_GET_LIMITS, 0, NULL, NULL},
    {PATHD__V1__REQUEST__BODY_RELOAD, PD_REQ_RELOAD, 0, NULL, NULL},
    {0},
};
