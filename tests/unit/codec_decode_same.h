/*
 * codec_decode_same.h - the check that the codec's hand-written FindPath
 * reader (server/codec/pd_codec_fast.c) decodes a frame exactly as the
 * generic protobuf-c path does: same status, same reason, same id, kind and
 * structural flag, and for an accepted FindPath the same fields, arrays
 * included. Shared by test_codec_fast (random and mutated frames) and the
 * fuzz_codec target (whatever the fuzzer makes).
 */
#ifndef CODEC_DECODE_SAME_H
#define CODEC_DECODE_SAME_H

#include <stdio.h>
#include <string.h>

#include "pd_codec.h"

/* Bit-for-bit for doubles: both decoders read the same 8 bytes, NaN too. */
static inline int decode_same_double(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static inline int decode_same_spec(const pd_point_spec *a, const pd_point_spec *b)
{
    if (a->is_world != b->is_world)
        return 0;
    if (a->is_world)
        return decode_same_double(a->wx, b->wx) && decode_same_double(a->wy, b->wy);
    return a->cell.x == b->cell.x && a->cell.y == b->cell.y;
}

/* Every field of pd_find_path_req (pd_request.h); a field added there is
 * added here too. */
static inline const char *decode_same_find_path(const pd_find_path_req *a, const pd_find_path_req *b)
{
    if (strcmp(a->scene, b->scene) != 0)
        return "scene";
    if (!decode_same_spec(&a->start, &b->start))
        return "start";
    if (!decode_same_spec(&a->goal, &b->goal))
        return "goal";
    if (a->unit_size != b->unit_size || a->connectivity != b->connectivity)
        return "unit_size or connectivity";
    if (a->max_expansions != b->max_expansions || a->deadline_ms != b->deadline_ms)
        return "max_expansions or deadline_ms";
    if (a->style != b->style || a->goal_mode != b->goal_mode)
        return "style or goal_mode";
    if (a->snap != b->snap || a->partial_on_cutoff != b->partial_on_cutoff || a->want_world != b->want_world ||
        a->line_of_sight != b->line_of_sight)
        return "a flag";
    if (!decode_same_double(a->speed, b->speed) || !decode_same_double(a->start_time, b->start_time) ||
        !decode_same_double(a->range, b->range))
        return "speed, start_time or range";
    if (a->n_avoid != b->n_avoid || (a->n_avoid && memcmp(a->avoid, b->avoid, a->n_avoid * sizeof *a->avoid)))
        return "avoid";
    if (a->has_window != b->has_window ||
        (a->has_window && (a->window_min.x != b->window_min.x || a->window_min.y != b->window_min.y ||
                           a->window_max.x != b->window_max.x || a->window_max.y != b->window_max.y)))
        return "window";
    if (a->n_goals != b->n_goals)
        return "n_goals";
    for (size_t i = 0; i < a->n_goals; i++)
        if (!decode_same_spec(&a->goals[i], &b->goals[i]))
            return "goals";
    if (a->min_version != b->min_version)
        return "min_version";
    return NULL;
}

/* Decodes payload both ways; 1 when the answers agree, else 0 with what
 * differs in why. *fast says whether the hand-written reader took it. */
static inline int decode_same(const uint8_t *payload, size_t len, int *fast, char *why, size_t whylen)
{
    pd_request a, g;
    char ea[256], eg[256];
    pd_status sa = pd_codec_decode_request(payload, len, &a, ea, sizeof ea);
    pd_status sg = pd_codec_decode_request_generic(payload, len, &g, eg, sizeof eg);
    const char *diff = NULL;
    *fast = pd_codec_fast_path_takes(payload, len);
    if (sa != sg)
        diff = "status";
    else if (strcmp(ea, eg) != 0)
        diff = "reason";
    else if (a.id != g.id || a.kind != g.kind || a.structural != g.structural)
        diff = "id, kind or structural";
    else if (sa == PD_OK && a.kind == PD_REQ_FIND_PATH)
        diff = decode_same_find_path(&a.u.find_path, &g.u.find_path);
    if (diff != NULL)
        snprintf(why, whylen, "%s differs: %s (\"%s\") by hand, %s (\"%s\") by protobuf-c", diff,
                 pd_status_name(sa), ea, pd_status_name(sg), eg);
    pd_request_free(&a);
    pd_request_free(&g);
    return diff == NULL;
}

#endif
