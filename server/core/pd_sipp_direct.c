/*
 * pd_sipp_direct.c - ReservePath's fast path (pd_sipp_direct.h): jump point
 * search in the planner's milliseconds, then the path's moves checked
 * against the reservation table in order, up to the first end SIPP would
 * take. Reads the table as pd_sipp.c does (each cell's sorted spans, a
 * binary search for the first that ends after a time); an empty table (no
 * other agent) is not read at all.
 */
#include "pd_sipp_direct.h"

#include <stdlib.h>

#include "pd_jps.h"
#include "pd_search_common.h"

struct pd_sipp_direct {
    pd_jps_ctx *jps;
    pd_point *path;          /* the static path, every cell */
    size_t cap_path;
    size_t n_path;           /* its length when the last plan declined with one */
    pd_waypoint *wp;         /* the last answer */
    size_t cap_wp;
};

void pd_sipp_direct_destroy(pd_sipp_direct *d)
{
    if (!d)
        return;
    pd_jps_ctx_destroy(d->jps);
    free(d->path);
    free(d->wp);
    free(d);
}

size_t pd_sipp_direct_footprint(const pd_sipp_direct *d)
{
    if (!d)
        return 0;
    return sizeof *d + pd_jps_ctx_footprint(d->jps) + d->cap_path * sizeof *d->path + d->cap_wp * sizeof *d->wp;
}

void pd_sipp_direct_trim(pd_sipp_direct *d, size_t keep_bytes)
{
    if (!d || pd_sipp_direct_footprint(d) <= keep_bytes)
        return;
    free(d->path);
    d->path = NULL;
    d->cap_path = 0;
    const size_t rest = pd_sipp_direct_footprint(d) - pd_jps_ctx_footprint(d->jps);
    pd_jps_ctx_trim(d->jps, keep_bytes > rest ? keep_bytes - rest : 0);
}

/* Makes *dp at first use: 0, or -1 when memory ran out. */
static int pd__make(pd_sipp_direct **dp)
{
    if (*dp)
        return 0;
    pd_sipp_direct *d = calloc(1, sizeof *d);
    if (!d || !(d->jps = pd_jps_ctx_create())) {
        free(d);
        return -1;
    }
    *dp = d;
    return 0;
}

/* The static path from `from` to p->goal into d->path; its length, or 0
 * when jump point search cannot give it (*st says why: not applicable, no
 * path, budget, poll, memory). */
static size_t pd__static_path(pd_sipp_direct *d, const pd_grid *grid, const pd_sipp_params *p, pd_point from,
                              uint64_t max_expansions, int64_t straight, int64_t diagonal, pd_status *st,
                              uint64_t *expanded, uint64_t *micros)
{
    const pd_search_params sp = { .start = from,
                                  .goal = p->goal,
                                  .connectivity = p->connectivity ? p->connectivity : PD_CONNECT_8,
                                  .max_expansions = max_expansions,
                                  .poll = p->poll,
                                  .poll_user = p->poll_user };
    pd_search_metrics m = { 0 };
    *st = pd_search_jps_weighted(d->jps, grid, &sp, (double)straight, (double)diagonal, d->path, d->cap_path, &m);
    if (expanded)
        *expanded = m.expanded;
    if (micros)
        *micros = m.micros;
    /* With no buffer yet, pd_search_jps answers OK without copying. */
    if (*st == PD_BUFFER_TOO_SMALL || (*st == PD_OK && !d->path)) {
        if (pd__grow_array((void **)&d->path, &d->cap_path, m.path_len, sizeof *d->path) != 0) {
            *st = PD_INTERNAL;
            return 0;
        }
        *st = pd_jps_extract(d->jps, d->path, d->cap_path, NULL);
    }
    return *st == PD_OK ? m.path_len : 0;
}

size_t pd_sipp_direct_static_path(pd_sipp_direct **dp, const pd_grid *grid, const pd_sipp_params *p, pd_point from,
                                  uint64_t max_expansions, const pd_point **path, pd_status *st, uint64_t *expanded)
{
    *expanded = 0;
    if (!grid->uniform_cost || p->targets) {
        *st = PD_INVALID_ARGUMENT;
        return 0;
    }
    if (pd__make(dp) != 0) {
        *st = PD_INTERNAL;
        return 0;
    }
    pd_sipp_direct *d = *dp;
    d->n_path = 0;
    const size_t n = pd__static_path(d, grid, p, from, max_expansions, pd_sipp_step_ms(0, 1, p->speed),
                                     pd_sipp_step_ms(1, 1, p->speed), st, expanded, NULL);
    *path = d->path;
    return n;
}

const pd_point *pd_sipp_direct_declined_path(const pd_sipp_direct *d, size_t *n)
{
    *n = d ? d->n_path : 0;
    return d ? d->path : NULL;
}

int pd_sipp_direct_plan(pd_sipp_direct **dp, const pd_reserve *table, const pd_grid *grid, const pd_sipp_params *p,
                        uint32_t self, int use_table, int64_t t_end,
                        pd_sipp_result *res, pd_status *st, uint64_t *micros)
{
    *micros = 0;
    if (*dp)
        (*dp)->n_path = 0;
    if (!grid->uniform_cost || p->targets || pd__make(dp) != 0)
        return 0;
    pd_sipp_direct *d = *dp;
    /* Every passable cell costs 1 on a uniform grid. */
    const int64_t dur[2] = { pd_sipp_step_ms(0, 1, p->speed), pd_sipp_step_ms(1, 1, p->speed) };
    pd_status why;
    uint64_t expanded;
    const size_t n =
        pd__static_path(d, grid, p, p->start, p->max_expansions, dur[0], dur[1], &why, &expanded, micros);
    if (n == 0)
        return 0;
    /* Kept for SIPP when the checks below decline (its exact static times
     * along the path: pd_sipp_direct_declined_path). */
    d->n_path = n;

    /* Walk the path from t0 without waits until the first end SIPP would
     * take, checking each move's box (both footprints) over its duration. */
    const int32_t k = (int32_t)p->unit;
    const pd_point *pt = d->path;
    int64_t g = p->t0_ms;
    size_t end = 0;
    pd_status out = PD_OK;
    for (size_t i = 0;; i++) {
        if (i + 1 == n) {
            /* The goal: PARK holds it from arrival on; VANISH leaves, but
             * SIPP still arrives only inside a safe interval, so the
             * footprint must be free at the arrival itself. */
            const int64_t until = p->at_goal == PD_AT_GOAL_PARK ? PD_RESERVE_FOREVER : g + 1;
            if (use_table &&
                pd_reserve_box_busy(table, self, pt[i].x, pt[i].y, pt[i].x + k - 1, pt[i].y + k - 1, g, until))
                return 0;
            end = i;
            out = PD_OK;
            break;
        }
        if (p->window_ms > 0 && g >= t_end) {
            /* SIPP's handover: the first state at or past the window's end
             * whose footprint stays free for the hold. */
            const int64_t until = p->hold_ms ? g + p->hold_ms : PD_RESERVE_FOREVER;
            if (!use_table ||
                !pd_reserve_box_busy(table, self, pt[i].x, pt[i].y, pt[i].x + k - 1, pt[i].y + k - 1, g, until)) {
                end = i;
                out = PD_PARTIAL;
                break;
            }
        }
        const int32_t dx = pt[i + 1].x - pt[i].x, dy = pt[i + 1].y - pt[i].y;
        const int64_t step = dur[dx != 0 && dy != 0];
        if (use_table) {
            const int32_t x0 = dx < 0 ? pt[i + 1].x : pt[i].x, y0 = dy < 0 ? pt[i + 1].y : pt[i].y;
            const int32_t x1 = (dx > 0 ? pt[i + 1].x : pt[i].x) + k - 1, y1 = (dy > 0 ? pt[i + 1].y : pt[i].y) + k - 1;
            if (pd_reserve_box_busy(table, self, x0, y0, x1, y1, g, g + step))
                return 0;
        }
        g += step;
    }

    if (pd__grow_array((void **)&d->wp, &d->cap_wp, end + 1u, sizeof *d->wp) != 0)
        return 0;
    d->n_path = 0; /* answered: nothing left for SIPP */
    g = p->t0_ms;
    for (size_t i = 0; i <= end; i++) {
        if (i > 0)
            g += dur[pt[i].x != pt[i - 1].x && pt[i].y != pt[i - 1].y];
        d->wp[i] = (pd_waypoint){ .x = pt[i].x, .y = pt[i].y, .t_arrive_ms = g, .t_leave_ms = g };
    }
    pd_waypoint *last = &d->wp[end];
    if (out == PD_PARTIAL)
        last->t_leave_ms = p->hold_ms ? last->t_arrive_ms + p->hold_ms : PD_RESERVE_FOREVER;
    else if (p->at_goal == PD_AT_GOAL_PARK)
        last->t_leave_ms = PD_RESERVE_FOREVER;
    /* The summed step cost, in the order pd_sipp.c's extraction sums it
     * (from the end back), so the two agree to the bit. */
    double cost = 0.0;
    for (size_t i = end; i > 0; i--)
        cost += pt[i].x != pt[i - 1].x && pt[i].y != pt[i - 1].y ? PD__SQRT2 * 1.0 : 1.0;
    *res = (pd_sipp_result){ .waypoints = d->wp,
                             .n_waypoints = end + 1u,
                             .reserved_until_ms = last->t_leave_ms,
                             .cost = cost,
                             .direct = 1 };
    *st = out;
    return 1;
}
