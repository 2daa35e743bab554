/*
 * pathd_agents_bench.c - issue 34's simulation benchmark: N agents on a
 * Moving AI map, driven on the game's clock at 10 Hz, faster than real
 * time, against the core that ReservePath calls (pd_sipp + pd_reserve, one
 * scene's lane: everything on one thread, in order), or through a live
 * pathd (--mode wire).
 *
 * Modes (--mode):
 *   reserve  every agent reserves (pd_sipp_reserve, window 8000 ms, PARK at
 *            the goal) and re-reserves from a waypoint a few steps on, before
 *            its reservation ends; a new random goal on arrival.
 *   alone    the baseline: each agent planned alone (pd_search_astar, the
 *            FindPath core) to its goal, timed as ReservePath times moves, no
 *            waiting; a new plan only on arrival. The checker's conflict
 *            count for it is what reservations remove.
 *   wire     reserve's simulation through a live pathd (--server ADDR
 *            --scene NAME: a scene of the same map): every ReservePath goes
 *            over the wire with the C client; the times are the server's
 *            own (Response.server_us: from the frame read to the answer
 *            encoded, the lane's queue included), expiry the server's.
 *            --yield goes as ReservePath.yield_after_ms and the answers'
 *            displaced plans are applied as in process; clear holds are
 *            the server's (limits.reservation_clear_holds, default on).
 *   single   one agent on an empty table: ReservePath against FindPath (A*,
 *            and JPS where the scene allows it) on the same random queries,
 *            interleaved; medians and their ratios.
 *
 * reserve and alone write every answer with a plan to --answers as JSON
 * lines for tests/agents/check_plans.py (bench/agents/run.sh runs it).
 * Times are the thread's CPU time per call (a shared machine's other
 * processes do not count), the server-side cost a worker would pay.
 *
 * Keeping agents out of each other's way (pd_yield.h): --clear-holds 1
 * (the default) holds PARTIAL's hold only where it blocks no one; --yield
 * MS (default 2000; 0 is off) lets an agent that stood that long have
 * standing agents moved off its way. The bench applies the moved agents'
 * new plans as the game would (each replaces that agent's plan from its t0
 * on) and writes them to the answers for the checker. --take-free-way 1
 * (off by default, as in the server: docs/BENCHMARKS.md, twelfth pass)
 * lets a standing agent whose windowed plan stands still take a long plan
 * that moves; --long-expansions N bounds the long plans (0: pd_yield's
 * default, the bench's too; UINT64_MAX: none). --retry-max MS sets the back-off
 * (pd_yield_params.retry_max_ms; 0 its default, < 0 none). --move-ahead 0|1 and --park-any 0|1
 * (both on by default, as the server has them) switch pd_yield_params.move_ahead and park_any.
 * --max-displaced N (pd_yield_params.max_displaced; 0, the default, is
 * PD_YIELD_MAX_DISPLACED) caps the holders one request moves. --give-way MS
 * (pd_yield_params.give_way_ms; PD_YIELD_GIVE_WAY_MS by default, as the
 * server has it; 0 off) lets any standing requester move a holder that has
 * stood that long. --door MS (pd_yield_params.door_ms; PD_YIELD_DOOR_MS by
 * default, as the server has it; 0 off) lets an agent one step from its
 * goal that stood that long have the agents whose plans cross its goal
 * after its window re-planned round it (their answers are applied as a
 * moved holder's: the plan up to the move's t0, then the new one).
 * --joint 0|1 (pd_yield_params.joint; on by default, as the server has
 * it) lets a crossing whose crosser cannot get round the requester plan
 * the two together. --yield 0 --clear-holds 0 is plain
 * prioritised planning. An agent decides again at the latest half a TTL
 * after its last decision, as a game renews its reservations.
 *
 * Diagnostics: PD_AGENTS_DEADLOCK_DUMP=FILE writes, for each agent found
 * deadlocked, where it stands, who holds the cells of its static way, what
 * yield tried for it and its plans in three windows on the table as it
 * is; PD_AGENTS_SLOW_TRACE=FILE one line per call over 5 ms (status, what
 * yield did, expansions, P1's); PD_AGENTS_EXPIRY_TRACE=FILE one line per
 * agent the table released for want of renewal (it then reserves again at
 * once from where it stands; the answers keep it on its plan meanwhile, so
 * the checker counts what others did through it); PD_AGENTS_YIELD_TRACE=FILE
 * one line per attempt to move holders (pd_yield_result: how it ended -
 * PD_YIELD_OUT_* - and the holder that could not move, with where it
 * holds and since when).
 *
 * Deadlocked (the issue: an agent that waited more than 30 s of game time
 * while a free path existed): an agent that stood on one anchor for more
 * than 30 s of game time while not at its goal, and had a free path then.
 * Goals are picked in the agent's static component, so a path exists on
 * the map. Free is judged when the 30 s pass, on the agent's unit grid
 * with the footprints of the agents parked at their own goals (arrived:
 * nothing of their own moves them) as walls. An agent without such a path
 * counts apart (no_free_path): its goal or every way there is occupied by
 * agents at rest, and no plan could have got it there. Agents that stand
 * waiting themselves are not walls: the planner could move them, so their
 * jams count as deadlocks.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "pathd_client.h"
#include "pd_clearance.h"
#include "pd_components.h"
#include "pd_jps.h"
#include "pd_mapfile.h"
#include "pd_reserve.h"
#include "pd_search.h"
#include "pd_sipp.h"
#include "pd_yield.h"

#define MAX_UNIT 16 /* the scene's unit sizes: 1, 2, 4, ... up to --scene-units (agents: 1 and 2) */
#define TICK_MS 100             /* 10 Hz */
#define DEADLOCK_MS 30000
#define TTL_MS 30000            /* reservation_ttl_ms's default */

typedef struct scene {
    pd_grid *g;
    pd_clearance *c;
    pd_grid *unit[MAX_UNIT + 1];
    pd_components *comp[MAX_UNIT + 1];
} scene;

typedef struct agent {
    uint64_t id;
    uint32_t unit;
    double speed;
    pd_point goal;
    pd_waypoint *plan;          /* from the last decision on */
    size_t n, cap;
    int to_goal;                /* the plan ends at the goal (OK) */
    int64_t next;               /* when it decides again */
    pd_point still_at;          /* deadlock watch: where it stood since when */
    int64_t still_since;
    int deadlocked;
    uint32_t y_tried, y_undone, y_moved; /* its yield attempts since still_since (the dump) */
} agent;

typedef struct figures {
    uint64_t calls, ok, partial, no_path, goal_blocked, start_blocked, other;
    double *us;                 /* each call's CPU microseconds */
    size_t n_us, cap_us;
    double wait_ms;             /* executed waits, away from the goal */
    double agent_ms;            /* agents x game time */
    uint64_t deadlocked, no_free_path, expired, hold_fell;
    uint64_t yield_tried, yield_moves, yield_undone, displaced;
    size_t table_bytes, table_entries;
    uint64_t direct;            /* plans the fast path answered (pd_sipp_direct.h) */
    double *slow_us;            /* the CPU microseconds of the others (SIPP) */
    size_t n_slow, cap_slow;
} figures;

static double cpu_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return q;
}

static void note_us(figures *f, double us)
{
    if (f->n_us == f->cap_us) {
        f->cap_us = f->cap_us ? 2 * f->cap_us : 4096;
        f->us = xrealloc(f->us, f->cap_us * sizeof *f->us);
    }
    f->us[f->n_us++] = us;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n) (sorts it). */
static double quantile(double *v, size_t n, double q)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static pd_grid *load_map(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "%s: %s\n", path, strerror(errno));
        exit(2);
    }
    fseek(fp, 0, SEEK_END);
    long len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = xrealloc(NULL, (size_t)len);
    if (fread(buf, 1, (size_t)len, fp) != (size_t)len) {
        fprintf(stderr, "%s: short read\n", path);
        exit(2);
    }
    fclose(fp);
    pd_grid *g = pd_map_parse_movingai(buf, (size_t)len, NULL);
    free(buf);
    if (!g) {
        fprintf(stderr, "%s: not a Moving AI map\n", path);
        exit(2);
    }
    return g;
}

static void scene_init(scene *s, const char *path, uint32_t scene_units)
{
    memset(s, 0, sizeof *s);
    s->g = load_map(path);
    s->c = pd_clearance_build(s->g);
    for (uint32_t k = 1; k <= scene_units; k += k) {
        s->unit[k] = pd_unit_grid_build(s->g, s->c, k);
        s->comp[k] = s->unit[k] ? pd_components_build(s->unit[k]) : NULL;
        if (!s->comp[k]) {
            fprintf(stderr, "%s: cannot build unit %u structures\n", path, k);
            exit(2);
        }
    }
}

static void scene_free(scene *s)
{
    for (uint32_t k = 1; k <= MAX_UNIT; k++) {
        pd_components_destroy(s->comp[k]);
        pd_grid_destroy(s->unit[k]);
    }
    pd_clearance_destroy(s->c);
    pd_grid_destroy(s->g);
}

/* A random open anchor of the unit grid; in `near`'s component when given
 * (near itself when a million draws miss that component: a pocket). */
static pd_point random_cell(const scene *s, uint32_t unit, const pd_point *near)
{
    const pd_grid *ug = s->unit[unit];
    const uint32_t want = near ? pd_components_label(s->comp[unit], *near) : 0;
    for (int tries = 0;; tries++) {
        if (near && tries == 1000000)
            return *near;
        pd_point p = { (int32_t)(bench_rand() % (uint32_t)ug->width), (int32_t)(bench_rand() % (uint32_t)ug->height) };
        if (pd_grid_get(ug, p.x, p.y) == PD_CELL_BLOCKED)
            continue;
        if (near && pd_components_label(s->comp[unit], p) != want)
            continue;
        return p;
    }
}

/* ---- the answers file ---- */

static void write_grid(FILE *f, const pd_grid *g)
{
    fprintf(f, "{\"type\":\"grid\",\"width\":%d,\"height\":%d,\"cells\":[", g->width, g->height);
    for (int32_t y = 0; y < g->height; y++)
        for (int32_t x = 0; x < g->width; x++)
            fprintf(f, "%s%u", x || y ? "," : "", pd_grid_get(g, x, y));
    fprintf(f, "]}\n");
}

static void write_waypoints(FILE *f, const agent *a, int64_t t0, const pd_waypoint *wp, size_t n)
{
    if (!f)
        return;
    fprintf(f, "{\"type\":\"plan\",\"agent\":%llu,\"unit\":%u,\"speed\":%.17g,\"t0\":%lld,\"waypoints\":[",
            (unsigned long long)a->id, a->unit, a->speed, (long long)t0);
    for (size_t i = 0; i < n; i++) {
        const pd_waypoint *w = &wp[i];
        if (w->t_leave_ms == PD_RESERVE_FOREVER)
            fprintf(f, "%s[%d,%d,%lld,null]", i ? "," : "", w->x, w->y, (long long)w->t_arrive_ms);
        else
            fprintf(f, "%s[%d,%d,%lld,%lld]", i ? "," : "", w->x, w->y, (long long)w->t_arrive_ms,
                    (long long)w->t_leave_ms);
    }
    fprintf(f, "]}\n");
}

static void write_plan(FILE *f, const agent *a, int64_t t0)
{
    write_waypoints(f, a, t0, a->plan, a->n);
}

/* ---- an agent's plan on the clock ---- */

/* Waits of the plan run before t, away from the goal. */
static double waited_before(const agent *a, int64_t t)
{
    double w = 0;
    for (size_t i = 0; i < a->n && a->plan[i].t_arrive_ms < t; i++) {
        if (a->plan[i].x == a->goal.x && a->plan[i].y == a->goal.y)
            continue;
        const int64_t end = a->plan[i].t_leave_ms < t ? a->plan[i].t_leave_ms : t;
        w += (double)(end - a->plan[i].t_arrive_ms);
    }
    return w;
}

static void set_plan(agent *a, const pd_waypoint *wp, size_t n)
{
    if (n > a->cap) {
        a->cap = n;
        a->plan = xrealloc(a->plan, n * sizeof *a->plan);
    }
    memcpy(a->plan, wp, n * sizeof *wp);
    a->n = n;
}

/* An agent moved (pd_yield.h): its plan up to the waypoint where it
 * stands at the move's t0 (a holder's hold, or a waypoint of a moving
 * agent's plan that door_ms cut), that waypoint left when the new plan
 * leaves it, then the new plan. The bench's plan is the one the table
 * knows (the last answer, or an earlier move). */
static void apply_displaced(agent *a, const pd_displaced *d)
{
    size_t k = 0;
    while (k + 1u < a->n && a->plan[k + 1u].t_arrive_ms <= d->t0_ms)
        k++;
    const pd_waypoint *at = &a->plan[k];
    if (at->x != d->waypoints[0].x || at->y != d->waypoints[0].y || at->t_arrive_ms > d->t0_ms ||
        at->t_leave_ms < d->t0_ms) {
        fprintf(stderr, "agent %llu moved from (%d,%d) at %lld, but its plan has it at (%d,%d)\n",
                (unsigned long long)a->id, d->waypoints[0].x, d->waypoints[0].y, (long long)d->t0_ms, at->x,
                at->y);
        exit(2);
    }
    const size_t n = k + d->n_waypoints;
    const int was_last = k + 1u == a->n;
    pd_waypoint *wp = xrealloc(NULL, n * sizeof *wp);
    memcpy(wp, a->plan, (k + 1u) * sizeof *wp);
    wp[k].t_leave_ms = d->waypoints[0].t_leave_ms;
    memcpy(wp + k + 1u, d->waypoints + 1, (d->n_waypoints - 1u) * sizeof *wp);
    set_plan(a, wp, n);
    free(wp);
    /* A holder leaves its hold (its goal, maybe); a cut plan re-planned to
     * where it ended still ends at the goal when it did. */
    a->to_goal = !was_last && a->to_goal && a->plan[n - 1].x == a->goal.x && a->plan[n - 1].y == a->goal.y &&
                 a->plan[n - 1].t_leave_ms == PD_RESERVE_FOREVER;
    /* Decide again once it stands aside, if not before. */
    if (a->next > a->plan[n - 1].t_arrive_ms)
        a->next = a->plan[n - 1].t_arrive_ms;
}

/* Whether agent i has a path to its goal on its unit grid with the
 * footprints of the agents parked at their goals at t taken as walls (see
 * "Deadlocked" above). */
static int free_path_exists(const scene *s, const agent *ag, int n_agents, int i, pd_point from, int64_t t,
                            pd_search_ctx *sctx)
{
    const agent *a = &ag[i];
    pd_grid *g = pd_grid_clone(s->unit[a->unit]);
    if (!g) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    const int32_t k = (int32_t)a->unit;
    for (int j = 0; j < n_agents; j++) {
        const agent *b = &ag[j];
        if (j == i || !b->to_goal || pd_plan_index_at(b->plan, b->n, t) != (int)b->n - 1)
            continue;
        const pd_waypoint *w = &b->plan[b->n - 1];
        /* Anchors whose k x k footprint meets b's unit x unit one. */
        for (int32_t y = w->y - k + 1; y <= w->y + (int32_t)b->unit - 1; y++)
            for (int32_t x = w->x - k + 1; x <= w->x + (int32_t)b->unit - 1; x++)
                if (pd_grid_in_bounds(g, x, y) && !(x == from.x && y == from.y))
                    pd_grid_set(g, x, y, PD_CELL_BLOCKED);
    }
    pd_grid_refresh_flags(g);
    pd_search_params sp = { .start = from, .goal = a->goal };
    pd_search_metrics m;
    const pd_status st = pd_grid_get(g, a->goal.x, a->goal.y) == PD_CELL_BLOCKED
                             ? PD_GOAL_BLOCKED
                             : pd_search_astar(sctx, g, &sp, NULL, 0, &m);
    pd_grid_destroy(g);
    return st == PD_OK || st == PD_BUFFER_TOO_SMALL;
}

/* PD_AGENTS_DEADLOCK_DUMP=FILE: for each agent found deadlocked, where it
 * stands, where it goes, and who holds the cells of its static way there
 * at that moment (each holder: whether it is parked at its goal, how long
 * it has stood, its goal) - to see why yield did not clear the way. */
static void dump_deadlock(FILE *out, const scene *s, const pd_reserve *table, const agent *ag, int i, pd_point from,
                          int64_t t, pd_search_ctx *sctx)
{
    const agent *a = &ag[i];
    fprintf(out,
            "deadlocked agent %llu unit %u speed %.1f at (%d,%d) since %lld, t %lld, goal (%d,%d); yield tried %u "
            "undone %u moved %u\n",
            (unsigned long long)a->id, a->unit, a->speed, from.x, from.y, (long long)a->still_since, (long long)t,
            a->goal.x, a->goal.y, a->y_tried, a->y_undone, a->y_moved);
    pd_search_params sp = { .start = from, .goal = a->goal };
    pd_search_metrics m;
    pd_point path[4096];
    if (pd_search_astar(sctx, s->unit[a->unit], &sp, path, 4096, &m) != PD_OK) {
        fprintf(out, "  no static path\n");
        return;
    }
    uint64_t seen[16];
    int n_seen = 0;
    for (size_t j = 0; j < m.path_len && j < 60 && n_seen < 16; j++)
        for (uint32_t dy = 0; dy < a->unit; dy++)
            for (uint32_t dx = 0; dx < a->unit; dx++) {
                size_t ns;
                const pd_reserve_span *sp2 = pd_reserve_cell(table, path[j].x + (int32_t)dx, path[j].y + (int32_t)dy, &ns);
                for (size_t q = 0; q < ns; q++) {
                    if (sp2[q].t1 <= t)
                        continue;
                    const uint64_t id = pd_reserve_slot_agent(table, sp2[q].slot);
                    if (id == a->id)
                        continue;
                    int dup = 0;
                    for (int z = 0; z < n_seen; z++)
                        dup |= seen[z] == id;
                    if (dup || n_seen == 16)
                        continue;
                    seen[n_seen++] = id;
                    const agent *b = &ag[id - 1];
                    pd_reserve_agent_info in;
                    pd_reserve_agent_info_get(table, id, &in);
                    const int parked = b->to_goal && in.holds && in.x == b->goal.x && in.y == b->goal.y;
                    fprintf(out,
                            "  step %zu (%d,%d): agent %llu unit %u span [%lld,%s) %s holds=%d at (%d,%d) since %lld "
                            "goal (%d,%d)\n",
                            j, path[j].x, path[j].y, (unsigned long long)id, b->unit, (long long)sp2[q].t0,
                            sp2[q].t1 == PD_RESERVE_FOREVER ? "forever" : "..", parked ? "PARKED-AT-GOAL" : "on-way",
                            in.holds, in.x, in.y, (long long)in.hold_since, b->goal.x, b->goal.y);
                }
            }
    {
        pd_sipp_ctx *c2 = pd_sipp_ctx_create();
        const int64_t wins[3] = { 8000, 30000, 0 };
        for (int w = 0; w < 3; w++) {
            pd_sipp_params p = { .agent = a->id, .unit = a->unit, .start = from, .goal = a->goal, .t0_ms = t,
                                 .speed = a->speed, .window_ms = wins[w], .max_expansions = 400000 };
            pd_sipp_result r;
            const pd_status st = pd_sipp_plan(c2, table, s->unit[a->unit], &p, &r);
            fprintf(out, "  replan window %lld: %s n %zu eta %lld exp %llu:", (long long)wins[w], pd_status_name(st),
                    r.n_waypoints, (long long)r.eta_ms, (unsigned long long)r.expanded);
            for (size_t j = 0; j < r.n_waypoints && j < 6; j++)
                fprintf(out, " (%d,%d %lld-%lld)", r.waypoints[j].x, r.waypoints[j].y,
                        (long long)r.waypoints[j].t_arrive_ms,
                        r.waypoints[j].t_leave_ms == PD_RESERVE_FOREVER ? -1LL : (long long)r.waypoints[j].t_leave_ms);
            fprintf(out, "\n");
        }
        pd_sipp_ctx_destroy(c2);
    }
    fprintf(out, "  own plan:");
    for (size_t j = 0; j < a->n && j < 8; j++)
        fprintf(out, " (%d,%d %lld-%lld)", a->plan[j].x, a->plan[j].y, (long long)a->plan[j].t_arrive_ms,
                a->plan[j].t_leave_ms == PD_RESERVE_FOREVER ? -1LL : (long long)a->plan[j].t_leave_ms);
    fprintf(out, "\n");
}

/* FindPath alone: A* on the unit grid, timed as pd_sipp times steps (cost x
 * 1000 / speed ms, rounded up), no waits, parked at the end. */
static pd_status plan_alone(pd_search_ctx *sctx, const scene *s, agent *a, pd_point from, int64_t t0,
                            pd_point **buf, size_t *cap)
{
    const pd_grid *ug = s->unit[a->unit];
    pd_search_params sp = { .start = from, .goal = a->goal };
    pd_search_metrics m;
    pd_status st = pd_search_astar(sctx, ug, &sp, *buf, *cap, &m);
    if (st == PD_BUFFER_TOO_SMALL) {
        *cap = m.path_len;
        *buf = xrealloc(*buf, *cap * sizeof **buf);
        st = pd_search_astar(sctx, ug, &sp, *buf, *cap, &m);
    }
    if (st != PD_OK)
        return st;
    pd_waypoint *wp = xrealloc(NULL, m.path_len * sizeof *wp);
    int64_t t = t0;
    for (size_t i = 0; i < m.path_len; i++) {
        const pd_point p = (*buf)[i];
        if (i > 0) {
            const pd_point q = (*buf)[i - 1];
            const double c = pd_grid_get(ug, p.x, p.y) * (p.x != q.x && p.y != q.y ? 1.4142135623730951 : 1.0);
            const double ms = ceil(c * 1000.0 / a->speed - 1e-9);
            t += ms < 1 ? 1 : (int64_t)ms;
        }
        wp[i] = (pd_waypoint){ p.x, p.y, t, i + 1 == m.path_len ? PD_RESERVE_FOREVER : t };
    }
    set_plan(a, wp, m.path_len);
    free(wp);
    return PD_OK;
}

/* When to decide again: four waypoints on (or the last), a moment after
 * arriving at the goal; at the latest half a TTL on, as a game renews its
 * reservations (a long plan may stand longer than that on one waypoint). */
static int64_t next_decision(const agent *a, int64_t t0)
{
    if (a->n == 1)
        return t0 + 500 + bench_rand() % 1000;
    const size_t k = a->n - 1 < 4 ? a->n - 1 : 4;
    int64_t t = a->plan[k].t_arrive_ms;
    if (k == a->n - 1 && a->to_goal)
        t += bench_rand() % 2000;
    return t < t0 + TTL_MS / 2 ? t : t0 + TTL_MS / 2;
}

typedef struct run_args {
    const char *mode;
    int agents;
    int64_t game_ms;
    int unit2_pct;
    uint32_t scene_units;       /* the largest unit size the scene has, for clear holds */
    int64_t window_ms;
    int64_t hold_ms;            /* PARTIAL's hold (pd_sipp.h): 0 until reserved again */
    int sipp_only;              /* --sipp-only 1: no fast path (pd_sipp_direct.h), to compare */
    int64_t yield_ms;           /* pd_yield_params.after_ms: 0 never moves holders */
    int clear_holds;            /* pd_yield_params.clear_holds (with yield_ms > 0) */
    uint64_t long_expansions;   /* pd_yield_params.long_expansions (0: its default; UINT64_MAX none) */
    int take_free_way;          /* pd_yield_params.take_free_way */
    int aside_after_ahead;      /* pd_yield_params.aside_after_ahead */
    int64_t retry_max_ms;       /* pd_yield_params.retry_max_ms (0: its default; < 0 no back-off) */
    int move_ahead;             /* pd_yield_params.move_ahead */
    int park_any;               /* pd_yield_params.park_any */
    uint32_t max_displaced;     /* pd_yield_params.max_displaced */
    int64_t give_way_ms;        /* pd_yield_params.give_way_ms */
    int64_t door_ms;            /* pd_yield_params.door_ms */
    int64_t cross_ms;           /* pd_yield_params.cross_ms */
    int joint;                  /* pd_yield_params.joint */
    FILE *answers;
    pdc_conn *wire;             /* --mode wire: the server's connection */
    const char *scene;          /* and the scene of the map there */
} run_args;

/* The agents one wire answer moved aside (ReservePathResult.displaced), in
 * pd_yield_result's shape, with room for their waypoints. */
typedef struct wire_moved {
    pd_displaced d[PD_YIELD_MAX_DISPLACED];
    pd_waypoint *buf[PD_YIELD_MAX_DISPLACED];
    size_t cap[PD_YIELD_MAX_DISPLACED];
    size_t n;
} wire_moved;

/* A wire answer's timed waypoints as the core's (-1: FOREVER), in *buf. */
static void wire_waypoints(const pdc_timed_waypoint *w, size_t n, pd_waypoint **buf, size_t *cap)
{
    if (n > *cap) {
        *cap = n;
        *buf = xrealloc(*buf, *cap * sizeof **buf);
    }
    for (size_t i = 0; i < n; i++)
        (*buf)[i] = (pd_waypoint){w[i].x, w[i].y, w[i].t_arrive_ms, w[i].t_leave_ms < 0 ? PD_RESERVE_FOREVER
                                                                                         : w[i].t_leave_ms};
}

/* The plan of one ReservePath over the wire, in pd_sipp_result's shape
 * (its waypoints in *buf); *us is the server's time for it. yield_ms goes
 * as ReservePath.yield_after_ms; the agents the answer moved aside go to
 * *moved (NULL: none may be). */
static pd_status reserve_wire(const run_args *ra, const pd_sipp_params *p, int64_t yield_ms, pd_sipp_result *r,
                              pd_waypoint **buf, size_t *cap, wire_moved *moved, double *us)
{
    pdc_reserve_req q = {.scene = ra->scene, .agent = p->agent, .unit_size = p->unit,
                         .start = {p->start.x, p->start.y}, .goal = {p->goal.x, p->goal.y}, .t0_ms = p->t0_ms,
                         .speed = p->speed, .has_window = p->window_ms != 0, .window_ms = p->window_ms,
                         .yield_after_ms = yield_ms};
    pdc_reserve_result out;
    int st = pdc_reserve_path(ra->wire, &q, &out);
    *us = (double)pdc_last_timing(ra->wire).server_us;
    memset(r, 0, sizeof *r);
    if (st < 0 || (out.n_displaced && (!moved || out.n_displaced > PD_YIELD_MAX_DISPLACED))) {
        fprintf(stderr, "pathd-agents-bench: %s: %s\n", st < 0 ? pdc_status_name(st) : "agents moved unasked",
                pdc_last_error(ra->wire));
        exit(2);
    }
    wire_waypoints(out.waypoints, out.count, buf, cap);
    r->waypoints = *buf;
    r->n_waypoints = out.count;
    if (moved) {
        moved->n = out.n_displaced;
        for (size_t i = 0; i < out.n_displaced; i++) {
            const pdc_displaced_plan *dp = &out.displaced[i];
            wire_waypoints(dp->waypoints, dp->count, &moved->buf[i], &moved->cap[i]);
            moved->d[i] = (pd_displaced){.agent = dp->agent, .t0_ms = dp->t0_ms, .waypoints = moved->buf[i],
                                         .n_waypoints = dp->count,
                                         .reserved_until_ms = dp->reserved_until_ms < 0 ? PD_RESERVE_FOREVER
                                                                                       : dp->reserved_until_ms};
        }
    }
    pdc_reserve_result_free(&out);
    return (pd_status)st;
}

static void run_agents(const scene *s, const run_args *ra, figures *f)
{
    const int wire = ra->wire != NULL;
    const int reserve_mode = strcmp(ra->mode, "reserve") == 0 || wire;
    /* PD_AGENTS_FALLBACK_TRACE=FILE: one line per plan the fast path
     * declined (agent, goal, unit, us): who needed SIPP, and how often
     * toward the same goal, for sizing a cache of its searches. */
    FILE *trace = getenv("PD_AGENTS_FALLBACK_TRACE") ? fopen(getenv("PD_AGENTS_FALLBACK_TRACE"), "w") : NULL;
    FILE *slow = getenv("PD_AGENTS_SLOW_TRACE") ? fopen(getenv("PD_AGENTS_SLOW_TRACE"), "w") : NULL;
    FILE *dump = getenv("PD_AGENTS_DEADLOCK_DUMP") ? fopen(getenv("PD_AGENTS_DEADLOCK_DUMP"), "w") : NULL;
    FILE *expiry = getenv("PD_AGENTS_EXPIRY_TRACE") ? fopen(getenv("PD_AGENTS_EXPIRY_TRACE"), "w") : NULL;
    FILE *ytrace = getenv("PD_AGENTS_YIELD_TRACE") ? fopen(getenv("PD_AGENTS_YIELD_TRACE"), "w") : NULL;
    pd_waypoint *wbuf = NULL;
    size_t wcap = 0;
    double wire_us;
    wire_moved wmoved = {0};
    pd_reserve *table = pd_reserve_create(NULL);
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    pd_yield_ctx *yctx = pd_yield_ctx_create();
    pd_search_ctx *sctx = pd_search_ctx_create();
    agent *ag = calloc((size_t)ra->agents, sizeof *ag);
    const pd_grid *grids[MAX_UNIT + 1];
    for (uint32_t k = 0; k <= MAX_UNIT; k++)
        grids[k] = s->unit[k];
    const pd_yield_params yp = { .after_ms = ra->yield_ms, .unit_grids = grids, .max_unit = ra->scene_units,
                               .clear_holds = ra->clear_holds, .long_expansions = ra->long_expansions,
                               .take_free_way = ra->take_free_way, .retry_max_ms = ra->retry_max_ms,
                               .move_ahead = ra->move_ahead, .park_any = ra->park_any,
                               .max_displaced = ra->max_displaced, .give_way_ms = ra->give_way_ms,
                               .door_ms = ra->door_ms, .aside_after_ahead = ra->aside_after_ahead,
                               .cross_ms = ra->cross_ms, .joint = ra->joint };
    size_t cap = 4096;          /* A* copies no path into a NULL buffer */
    pd_point *buf = xrealloc(NULL, cap * sizeof *buf);
    if (!table || !ctx || !yctx || !sctx || !ag) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    if (ra->answers)
        write_grid(ra->answers, s->g);
    /* Everyone stands first, parked where no one else stands (both modes:
     * the baseline starts from the same places). */
    for (int i = 0; i < ra->agents; i++) {
        agent *a = &ag[i];
        a->id = 1 + (uint64_t)i;
        a->unit = (int)(bench_rand() % 100) < ra->unit2_pct ? 2 : 1;
        a->speed = 1.5 + (bench_rand() % 4) * 0.5;
        for (;;) {
            a->goal = random_cell(s, a->unit, NULL);
            pd_sipp_params p = { .agent = a->id, .unit = a->unit, .start = a->goal, .goal = a->goal,
                                 .speed = a->speed };
            pd_sipp_result r;
            if ((wire ? reserve_wire(ra, &p, 0, &r, &wbuf, &wcap, NULL, &wire_us)
                      : pd_yield_reserve(yctx, ctx, table, s->unit[a->unit], &p, NULL, &r, NULL)) == PD_OK) {
                set_plan(a, r.waypoints, r.n_waypoints);
                break;
            }
        }
        a->to_goal = 1;
        a->still_at = a->goal;
        a->next = bench_rand() % 1000;
        write_plan(ra->answers, a, 0);
    }
    for (int64_t now = 0; now < ra->game_ms; now += TICK_MS) {
        for (int i = 0; i < ra->agents; i++) {
            agent *a = &ag[i];
            if (a->next > now)
                continue;
            const int64_t t0 = pd_plan_next_stop(a->plan, a->n, now);
            const int at = pd_plan_index_at(a->plan, a->n, t0);
            const pd_waypoint here = a->plan[at];
            const pd_point from = { here.x, here.y };
            const int arrived = a->to_goal && at + 1 == (int)a->n;
            if (from.x != a->still_at.x || from.y != a->still_at.y) {
                a->still_at = from;
                a->still_since = t0;
                a->y_tried = a->y_undone = a->y_moved = 0;
            } else if (!arrived && !a->deadlocked && t0 - a->still_since > DEADLOCK_MS) {
                a->deadlocked = 1;
                if (free_path_exists(s, ag, ra->agents, i, from, t0, sctx)) {
                    f->deadlocked++;
                    if (dump)
                        dump_deadlock(dump, s, table, ag, i, from, t0, sctx);
                } else {
                    /* Counted whether or not a dump is written. */
                    f->no_free_path++;
                    if (dump)
                        fprintf(dump, "no free path: agent %llu\n", (unsigned long long)a->id);
                }
            }
            if (!reserve_mode && !arrived) {
                a->next = a->plan[a->n - 1].t_arrive_ms;   /* alone: no re-planning on the way */
                continue;
            }
            if (arrived)
                a->goal = random_cell(s, a->unit, &from);
            pd_status st;
            uint64_t r_blocker = 0;
            const double wait = waited_before(a, t0);
            const double began = cpu_us();
            if (reserve_mode) {
                pd_sipp_params p = { .agent = a->id, .unit = a->unit, .start = from, .goal = a->goal,
                                     .t0_ms = t0, .speed = a->speed, .window_ms = ra->window_ms,
                                     .hold_ms = ra->hold_ms, .sipp_only = ra->sipp_only };
                pd_sipp_result r;
                if (wire) {
                    st = reserve_wire(ra, &p, ra->yield_ms, &r, &wbuf, &wcap, &wmoved, &wire_us);
                    note_us(f, wire_us);
                    /* The moved agents' plans, applied and written as the
                     * in-process run does (the server's order). */
                    f->yield_moves += wmoved.n > 0;
                    f->displaced += wmoved.n;
                    for (size_t d = 0; d < wmoved.n; d++) {
                        agent *h = &ag[wmoved.d[d].agent - 1u];
                        apply_displaced(h, &wmoved.d[d]);
                        write_waypoints(ra->answers, h, wmoved.d[d].t0_ms, wmoved.d[d].waypoints,
                                        wmoved.d[d].n_waypoints);
                    }
                } else {
                    pd_yield_result yr;
                    st = pd_yield_reserve(yctx, ctx, table, s->unit[a->unit], &p, &yp, &r, &yr);
                    r_blocker = st == PD_START_BLOCKED && r.has_blocker ? r.blocker : 0;
                    const double us = cpu_us() - began;
                    note_us(f, us);
                    if ((st == PD_OK || st == PD_PARTIAL) && r.direct)
                        f->direct++;
                    else if (st == PD_OK || st == PD_PARTIAL) {
                        if (f->n_slow == f->cap_slow) {
                            f->cap_slow = f->cap_slow ? 2 * f->cap_slow : 1024;
                            f->slow_us = xrealloc(f->slow_us, f->cap_slow * sizeof *f->slow_us);
                        }
                        f->slow_us[f->n_slow++] = us;
                    }
                    if (slow && us > 5000)
                        fprintf(slow, "%llu t0 %lld us %.0f st %s tried %d undone %d moved %zu exp %llu rexp %llu n %zu p1 %llu joint %d\n",
                                (unsigned long long)a->id, (long long)t0, us, pd_status_name(st), yr.tried, yr.undone,
                                yr.n_displaced, (unsigned long long)r.expanded, (unsigned long long)r.reverse_expanded,
                                r.n_waypoints, (unsigned long long)yr.p1_expanded, yr.joint);
                    if (trace && (st == PD_OK || st == PD_PARTIAL) && !r.direct)
                        fprintf(trace, "%llu %d %d %u %.0f\n", (unsigned long long)a->id, a->goal.x, a->goal.y,
                                a->unit, us);
                    if (ytrace && yr.tried) {
                        /* The culprit as the table had it after the attempt
                         * (an undone move restored it exactly). */
                        pd_reserve_agent_info ci = { 0 };
                        if (yr.culprit)
                            pd_reserve_agent_info_get(table, yr.culprit, &ci);
                        fprintf(ytrace,
                                "%llu u%u t0 %lld at %d %d stood %lld out %d culprit %llu u%u at %d %d since %lld "
                                "fell %d found %d ahead %d p1exp %llu st %s n %zu why %d p1wait %lld gain %lld cross %d joint %d\n",
                                (unsigned long long)a->id, a->unit, (long long)t0, from.x, from.y,
                                (long long)(t0 - a->still_since), yr.outcome, (unsigned long long)yr.culprit, ci.unit,
                                ci.x, ci.y, (long long)ci.hold_since, yr.p1_fell, yr.found, yr.ahead,
                                (unsigned long long)yr.p1_expanded, pd_status_name(st), r.n_waypoints, yr.undone_why,
                                (long long)yr.p1_wait_ms, (long long)yr.p1_gain_ms, yr.cross_why, yr.joint);
                    }
                    a->y_tried += (uint32_t)yr.tried;
                    a->y_undone += (uint32_t)yr.undone;
                    a->y_moved += yr.n_displaced > 0;
                    f->yield_tried += (uint64_t)yr.tried;
                    f->hold_fell += (uint64_t)yr.hold_fell;
                    f->yield_undone += (uint64_t)yr.undone;
                    f->yield_moves += yr.n_displaced > 0;
                    f->displaced += yr.n_displaced;
                    for (size_t d = 0; d < yr.n_displaced; d++) {
                        agent *h = &ag[yr.displaced[d].agent - 1u];
                        apply_displaced(h, &yr.displaced[d]);
                        write_waypoints(ra->answers, h, yr.displaced[d].t0_ms, yr.displaced[d].waypoints,
                                        yr.displaced[d].n_waypoints);
                    }
                }
                if (st == PD_OK || st == PD_PARTIAL) {
                    f->wait_ms += wait;
                    set_plan(a, r.waypoints, r.n_waypoints);
                }
                /* Released for want of renewal: the bench still has them
                 * on their plans, as a game would, so they reserve again
                 * from where they stand at once (PD_AGENTS_EXPIRY_TRACE=FILE
                 * says who and when: the table's clock against the game's). */
                uint64_t gone[64];
                const size_t ng = pd_reserve_maintain(table, TTL_MS, gone, 64, NULL);
                f->expired += ng;
                for (size_t g = 0; g < ng && g < 64; g++) {
                    ag[gone[g] - 1u].next = now;
                    if (expiry)
                        fprintf(expiry, "%llu expired at %lld, the table's now %lld\n", (unsigned long long)gone[g],
                                (long long)now, (long long)pd_reserve_now(table));
                }
            } else {
                st = plan_alone(sctx, s, a, from, t0, &buf, &cap);
                note_us(f, cpu_us() - began);
                if (st == PD_OK)
                    f->wait_ms += wait;
            }
            f->calls++;
            if (st == PD_OK || st == PD_PARTIAL) {
                f->ok += st == PD_OK;
                f->partial += st == PD_PARTIAL;
                a->to_goal = st == PD_OK;
                write_plan(ra->answers, a, t0);
                a->next = next_decision(a, t0);
            } else {
                /* The goal is out of reach now (someone parked on it, or
                 * boxed in): another one at the next tick. */
                f->no_path += st == PD_NO_PATH;
                f->goal_blocked += st == PD_GOAL_BLOCKED;
                f->start_blocked += st == PD_START_BLOCKED;
                if (dump && st == PD_START_BLOCKED && !wire) {
                    const agent *b = r_blocker ? &ag[r_blocker - 1] : NULL;
                    fprintf(dump, "start blocked: agent %llu at (%d,%d) t0 %lld by %llu", (unsigned long long)a->id,
                            from.x, from.y, (long long)t0, (unsigned long long)r_blocker);
                    if (b) {
                        fprintf(dump, " whose plan:");
                        for (size_t j = 0; j < b->n; j++)
                            fprintf(dump, " (%d,%d %lld-%lld)", b->plan[j].x, b->plan[j].y,
                                    (long long)b->plan[j].t_arrive_ms,
                                    b->plan[j].t_leave_ms == PD_RESERVE_FOREVER ? -1LL
                                                                                : (long long)b->plan[j].t_leave_ms);
                    }
                    fprintf(dump, "\n  own plan:");
                    for (size_t j = 0; j < a->n; j++)
                        fprintf(dump, " (%d,%d %lld-%lld)", a->plan[j].x, a->plan[j].y, (long long)a->plan[j].t_arrive_ms,
                                a->plan[j].t_leave_ms == PD_RESERVE_FOREVER ? -1LL : (long long)a->plan[j].t_leave_ms);
                    fprintf(dump, "\n");
                }
                f->other += st != PD_NO_PATH && st != PD_GOAL_BLOCKED && st != PD_START_BLOCKED;
                a->goal = random_cell(s, a->unit, &from);
                a->to_goal = 0;
                a->next = now + TICK_MS;
            }
        }
    }
    f->agent_ms = (double)ra->agents * (double)ra->game_ms;
    if (trace)
        fclose(trace);
    if (dump)
        fclose(dump);
    if (expiry)
        fclose(expiry);
    if (ytrace)
        fclose(ytrace);
    if (slow)
        fclose(slow);
    pd_reserve_stats ts;
    pd_reserve_get_stats(table, &ts);
    f->table_bytes = ts.bytes;
    f->table_entries = ts.entries;
    for (int i = 0; i < ra->agents; i++)
        free(ag[i].plan);
    free(ag);
    free(buf);
    free(wbuf);
    for (size_t d = 0; d < PD_YIELD_MAX_DISPLACED; d++)
        free(wmoved.buf[d]);
    pd_search_ctx_destroy(sctx);
    pd_yield_ctx_destroy(yctx);
    pd_sipp_ctx_destroy(ctx);
    pd_reserve_destroy(table);
}

/* One agent on an empty table against FindPath's searches on the same
 * queries, interleaved so a slow moment of the machine hits all three.
 * ReservePath and JPS read the same grid bitsets around the query, so the
 * one run second finds them in cache: they take turns going first (with
 * ReservePath always first, its median came out 1.4-1.6x JPS's on
 * den520d; alternating, 1.25x in an outside harness). A* runs between. */
static void run_single(const scene *s, int queries, int64_t window_ms)
{
    pd_reserve *table = pd_reserve_create(NULL);
    pd_sipp_ctx *ctx = pd_sipp_ctx_create();
    pd_search_ctx *sctx = pd_search_ctx_create();
    pd_jps_ctx *jctx = pd_jps_ctx_create();
    double *rp = xrealloc(NULL, (size_t)queries * sizeof *rp), *as = xrealloc(NULL, (size_t)queries * sizeof *as),
           *jp = xrealloc(NULL, (size_t)queries * sizeof *jp);
    size_t cap = 65536, nj = 0;
    pd_point *buf = xrealloc(NULL, cap * sizeof *buf);
    double sum_rp = 0, sum_as = 0, sum_jp = 0;
    for (int q = 0; q < queries; q++) {
        const pd_point a = random_cell(s, 1, NULL), b = random_cell(s, 1, &a);
        pd_sipp_params p = { .agent = 1, .unit = 1, .start = a, .goal = b, .speed = 2.0, .window_ms = window_ms };
        pd_sipp_result r;
        pd_status st = PD_OK;
        pd_search_params sp = { .start = a, .goal = b };
        pd_search_metrics m;
        const int jps = pd_jps_applicable(s->unit[1], &sp);
        for (int turn = 0; turn < 3; turn++) {
            /* q even: ReservePath, A*, JPS; q odd: JPS, A*, ReservePath. */
            const int which = (q & 1) ? 2 - turn : turn;
            double t = cpu_us();
            if (which == 0) {
                st = pd_sipp_reserve(ctx, table, s->unit[1], &p, &r);
                rp[q] = cpu_us() - t;
                pd_reserve_release(table, 1);
            } else if (which == 1) {
                const pd_status sa = pd_search_astar(sctx, s->unit[1], &sp, buf, cap, &m);
                as[q] = cpu_us() - t;
                if (sa != PD_OK)
                    fprintf(stderr, "single query %d: A* %s\n", q, pd_status_name(sa));
            } else if (jps) {
                pd_search_jps(jctx, s->unit[1], &sp, buf, cap, &m);
                jp[nj] = cpu_us() - t;
                sum_jp += jp[nj++];
            }
        }
        if (st != PD_OK && st != PD_PARTIAL)
            fprintf(stderr, "single query %d: ReservePath %s\n", q, pd_status_name(st));
        sum_rp += rp[q];
        sum_as += as[q];
    }
    const double mr = quantile(rp, (size_t)queries, 0.5), ma = quantile(as, (size_t)queries, 0.5);
    printf("single: %d queries, window %lld ms: ReservePath median %.1f us (mean %.1f), FindPath A* median %.1f us "
           "(mean %.1f); ratio of medians %.2f, of means %.2f",
           queries, (long long)window_ms, mr, sum_rp / queries, ma, sum_as / queries, mr / ma,
           sum_rp / sum_as);
    if (nj) {
        const double mj = quantile(jp, nj, 0.5);
        printf("; FindPath JPS median %.1f us (mean %.1f), ratio %.2f", mj, sum_jp / (double)nj, mr / mj);
    }
    const double mj = nj ? quantile(jp, nj, 0.5) : 0;
    printf("\nfigures mode=single rp_median_us=%.1f astar_median_us=%.1f ratio_astar=%.2f jps_median_us=%.1f "
           "ratio_jps=%.2f\n",
           mr, ma, mr / ma, mj, mj > 0 ? mr / mj : 0);
    free(rp);
    free(as);
    free(jp);
    free(buf);
    pd_jps_ctx_destroy(jctx);
    pd_search_ctx_destroy(sctx);
    pd_sipp_ctx_destroy(ctx);
    pd_reserve_destroy(table);
}

static void usage(void)
{
    fprintf(stderr, "usage: pathd-agents-bench --map FILE.map [--mode reserve|alone|single|wire] [--agents N]\n"
                    "         [--seconds S] [--unit2-pct P] [--scene-units 2|4|8|16] [--window MS] [--hold MS] [--sipp-only 1] [--yield MS]\n"
                    "         [--clear-holds 0|1] [--long-expansions N] [--take-free-way 0|1] [--aside-after-ahead 0|1] [--retry-max MS] [--queries N] [--seed N]"
                    " [--move-ahead 0|1] [--park-any 0|1] [--max-displaced N] [--door MS] [--cross MS] [--joint 0|1]\n"
                    "         [--answers FILE.jsonl] [--server HOST:PORT --scene NAME (wire)]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *map = NULL, *answers = NULL, *server = NULL;
    run_args ra = { .mode = "reserve", .agents = 500, .game_ms = 600000, .unit2_pct = 20, .scene_units = 2,
                    .window_ms = PD_RESERVE_DEFAULT_WINDOW_MS, .yield_ms = 2000, .clear_holds = 1,
                    .long_expansions = 0, .move_ahead = 1, .park_any = 1,
                    .give_way_ms = PD_YIELD_GIVE_WAY_MS, .door_ms = PD_YIELD_DOOR_MS, .aside_after_ahead = 1,
                    .cross_ms = PD_YIELD_CROSS_MS, .joint = 1 };
    int queries = 200;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            usage();
        if (!strcmp(argv[i], "--map"))
            map = v;
        else if (!strcmp(argv[i], "--mode"))
            ra.mode = v;
        else if (!strcmp(argv[i], "--agents"))
            ra.agents = atoi(v);
        else if (!strcmp(argv[i], "--seconds"))
            ra.game_ms = (int64_t)(atof(v) * 1000);
        else if (!strcmp(argv[i], "--unit2-pct"))
            ra.unit2_pct = atoi(v);
        else if (!strcmp(argv[i], "--scene-units")) {
            ra.scene_units = (uint32_t)atoi(v);
            if (ra.scene_units < 2 || ra.scene_units > MAX_UNIT || (ra.scene_units & (ra.scene_units - 1)))
                usage();
        }
        else if (!strcmp(argv[i], "--window"))
            ra.window_ms = atoll(v);
        else if (!strcmp(argv[i], "--hold"))
            ra.hold_ms = atoll(v);
        else if (!strcmp(argv[i], "--sipp-only"))
            ra.sipp_only = atoi(v);
        else if (!strcmp(argv[i], "--yield"))
            ra.yield_ms = atoll(v);
        else if (!strcmp(argv[i], "--clear-holds"))
            ra.clear_holds = atoi(v);
        else if (!strcmp(argv[i], "--long-expansions"))
            ra.long_expansions = strtoull(v, NULL, 10);
        else if (!strcmp(argv[i], "--aside-after-ahead"))
            ra.aside_after_ahead = atoi(v);
        else if (!strcmp(argv[i], "--take-free-way"))
            ra.take_free_way = atoi(v);
        else if (!strcmp(argv[i], "--retry-max"))
            ra.retry_max_ms = atoll(v);
        else if (!strcmp(argv[i], "--move-ahead"))
            ra.move_ahead = atoi(v);
        else if (!strcmp(argv[i], "--park-any"))
            ra.park_any = atoi(v);
        else if (!strcmp(argv[i], "--max-displaced"))
            ra.max_displaced = (uint32_t)atoi(v);
        else if (!strcmp(argv[i], "--door"))
            ra.door_ms = atoll(v);
        else if (!strcmp(argv[i], "--cross"))
            ra.cross_ms = atoll(v);
        else if (!strcmp(argv[i], "--joint"))
            ra.joint = atoi(v);
        else if (!strcmp(argv[i], "--give-way"))
            ra.give_way_ms = atoll(v);
        else if (!strcmp(argv[i], "--queries"))
            queries = atoi(v);
        else if (!strcmp(argv[i], "--seed"))
            bench_rng = strtoull(v, NULL, 10) | 1u;
        else if (!strcmp(argv[i], "--answers"))
            answers = v;
        else if (!strcmp(argv[i], "--server"))
            server = v;
        else if (!strcmp(argv[i], "--scene"))
            ra.scene = v;
        else
            usage();
        i++;
    }
    if (!map || ra.agents < 1 || ra.game_ms < TICK_MS || queries < 1 ||
        (strcmp(ra.mode, "reserve") && strcmp(ra.mode, "alone") && strcmp(ra.mode, "single") &&
         strcmp(ra.mode, "wire")) ||
        (!strcmp(ra.mode, "wire") && (!server || !ra.scene)))
        usage();
    if (!strcmp(ra.mode, "wire")) {
        char err[PDC_MESSAGE_MAX];
        if (!(ra.wire = pdc_connect(server, 30000, err, sizeof err))) {
            fprintf(stderr, "pathd-agents-bench: %s\n", err);
            return 2;
        }
        if (!ra.clear_holds)
            fprintf(stderr, "pathd-agents-bench: --clear-holds is the server's in wire mode "
                            "(limits.reservation_clear_holds); the answers follow its config\n");
    }
    scene s;
    scene_init(&s, map, ra.scene_units);
    if (!strcmp(ra.mode, "single")) {
        run_single(&s, queries, ra.window_ms);
        scene_free(&s);
        return 0;
    }
    if (answers && !(ra.answers = fopen(answers, "w"))) {
        fprintf(stderr, "%s: %s\n", answers, strerror(errno));
        return 2;
    }
    figures f = { 0 };
    const uint64_t began = now_ns();
    run_agents(&s, &ra, &f);
    const double wall = (double)(now_ns() - began) / 1e9;
    double sum = 0;
    for (size_t i = 0; i < f.n_us; i++)
        sum += f.us[i];
    const double mean = f.n_us ? sum / (double)f.n_us : 0;
    const double p50 = quantile(f.us, f.n_us, 0.5), p99 = quantile(f.us, f.n_us, 0.99),
                 max = f.n_us ? f.us[f.n_us - 1] : 0;
    printf("%s: %d agents (%d%% unit 2), %.0f s of game time at 10 Hz: %llu calls (%llu OK, %llu PARTIAL, "
           "%llu NO_PATH, %llu GOAL_BLOCKED, %llu START_BLOCKED, %llu other) in %.1f s wall, %.0f per CPU second; "
           "p50 %.0f us, p99 %.0f us, mean %.0f us, max %.0f us; waits %.1f%% of agent time; deadlocked %llu "
           "(and %llu with no free path); moved aside: %llu agents in %llu moves (%llu tried, %llu undone); "
           "expired %llu; table %zu entries, %zu KiB at the end\n",
           ra.mode, ra.agents, ra.unit2_pct, (double)ra.game_ms / 1000, (unsigned long long)f.calls,
           (unsigned long long)f.ok, (unsigned long long)f.partial, (unsigned long long)f.no_path,
           (unsigned long long)f.goal_blocked, (unsigned long long)f.start_blocked, (unsigned long long)f.other,
           wall, sum > 0 ? (double)f.calls / (sum / 1e6) : 0, p50, p99, mean, max, 100.0 * f.wait_ms / f.agent_ms,
           (unsigned long long)f.deadlocked, (unsigned long long)f.no_free_path, (unsigned long long)f.displaced,
           (unsigned long long)f.yield_moves, (unsigned long long)f.yield_tried, (unsigned long long)f.yield_undone,
           (unsigned long long)f.expired, f.table_entries, f.table_bytes / 1024);
    double slow_sum = 0;
    for (size_t i = 0; i < f.n_slow; i++)
        slow_sum += f.slow_us[i];
    const double direct_pct = f.calls ? 100.0 * (double)f.direct / (double)f.calls : 0;
    if (!strcmp(ra.mode, "reserve"))
        printf("fast path: %llu of %llu calls (%.1f%%); the %zu planned by SIPP: p50 %.0f us, p99 %.0f us, mean %.0f "
               "us, %.0f%% of all CPU time\n",
               (unsigned long long)f.direct, (unsigned long long)f.calls, direct_pct, f.n_slow,
               quantile(f.slow_us, f.n_slow, 0.5), quantile(f.slow_us, f.n_slow, 0.99),
               f.n_slow ? slow_sum / (double)f.n_slow : 0, sum > 0 ? 100.0 * slow_sum / sum : 0);
    printf("figures mode=%s agents=%d seconds=%.0f calls=%llu p50_us=%.0f p99_us=%.0f mean_us=%.0f waits_pct=%.1f "
           "deadlocked=%llu no_free_path=%llu displaced=%llu start_blocked=%llu direct_pct=%.1f\n",
           ra.mode, ra.agents, (double)ra.game_ms / 1000, (unsigned long long)f.calls, p50, p99, mean,
           100.0 * f.wait_ms / f.agent_ms, (unsigned long long)f.deadlocked, (unsigned long long)f.no_free_path,
           (unsigned long long)f.displaced, (unsigned long long)f.start_blocked, direct_pct);
    if (!strcmp(ra.mode, "reserve"))
        printf("clear holds: %llu plans found no clear anchor in reach and were made without the rule\n",
               (unsigned long long)f.hold_fell);
    free(f.slow_us);
    if (ra.answers)
        fclose(ra.answers);
    pdc_close(ra.wire);
    free(f.us);
    scene_free(&s);
    return 0;
}
