/*
 * pd_reserve.h - a scene's space-time reservation table (issue 34): which
 * agent holds which cells at which game times, so that agents planned one
 * after another (pd_sipp.h) never walk through each other.
 *
 * The model.
 *  - Time is the game's, in integer milliseconds; the table keeps no clock.
 *    Intervals are half-open, [t0, t1); PD_RESERVE_FOREVER as t1 means "until
 *    the agent reserves again or is released".
 *  - An agent of unit size K at anchor (x, y) occupies the K x K footprint
 *    x..x+K-1 by y..y+K-1 (top-left anchor, as pd_clearance.h's unit grids).
 *  - A plan is a list of waypoints (anchor, t_arrive, t_leave); consecutive
 *    anchors are 8-neighbours. It occupies, as *entries*:
 *      a wait: the footprint at waypoint i over [t_arrive_i, t_leave_i);
 *      a move: the bounding box of the footprints at i and i+1 (for a
 *              diagonal that closes the corner two crossing moves share)
 *              over [t_leave_i, t_arrive_i+1).
 *    So an agent holds cells continuously from its first arrival to its last
 *    departure, and another may follow into a cell only once the one leaving
 *    it has arrived at its next waypoint: swaps and diagonal crossings are
 *    impossible.
 *  - Invariant: no cell is held by two agents at overlapping times. Every
 *    change either keeps it or is refused with the table unchanged; the
 *    planner is not trusted for it: pd_reserve_replace checks every cell of
 *    every new entry against the other agents' spans before it changes
 *    anything.
 *
 * Layout (memory grows with reservations, not with the map):
 *  - per cell that some entry covers, a sorted array of *spans* (t0, t1,
 *    agent slot), disjoint; one agent's spans on a cell are merged where they
 *    touch, so a cell an agent waits on and then leaves holds one span. The
 *    cells live in a hash map keyed by (x, y); a cell whose last span goes
 *    leaves the map.
 *  - per agent, its entries in time order (disjoint; usually back to back,
 *    but a replace that starts after the agent's last entry ended leaves a
 *    gap, and a live agent may hold no entry at all after a plan that ends
 *    where it starts), so release, truncation and expiry cost O(path), and
 *    GetReservations reads entries as they were planned.
 *
 * Limits (pd_reserve_limits; 0 = none): agents per table, entries per table
 * (summed over agents), the longest window a ReservePath may ask for (read
 * by pd_sipp), and accounted bytes per agent: for each entry, its record
 * plus one span per cell it covers (an upper bound of what the agent costs:
 * merged spans only lower it). A change past a limit answers
 * PD_LIMIT_EXCEEDED naming the limit, with the table unchanged.
 *
 * Not thread-safe: a scene's reservations run in order (its lane).
 */
#ifndef PD_RESERVE_H
#define PD_RESERVE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "pd_search.h"  /* pd_point */
#include "pd_status.h"

/* t1 of a hold that lasts until the agent reserves again or is released. */
#define PD_RESERVE_FOREVER INT64_MAX
/* Times a plan may carry, below FOREVER with room for a window and a move
 * added to them without overflow (about 146,000 years of milliseconds). */
#define PD_RESERVE_MAX_TIME ((int64_t)1 << 62)
/* The window ReservePath uses when the request names none (the issue's
 * default; 0 in pd_sipp_params means "all the way to the goal"). */
#define PD_RESERVE_DEFAULT_WINDOW_MS 8000

typedef struct pd_waypoint {
    int32_t x, y;            /* anchor (top-left cell of the footprint) */
    int64_t t_arrive_ms;
    int64_t t_leave_ms;      /* PD_RESERVE_FOREVER: held until released */
} pd_waypoint;

typedef struct pd_reserve_limits {
    uint32_t max_agents;       /* agents in the table */
    uint64_t max_entries;      /* entries (waits and moves), all agents together */
    int64_t max_window_ms;     /* longest ReservePath window; with a limit set,
                                  window 0 ("all the way") is past it */
    uint64_t max_agent_bytes;  /* accounted bytes of one agent (see above) */
    int64_t max_clock_step_ms; /* how far a request's t0 may lead pd_reserve_now
                                  (pd_reserve_clock_fit); not a change's limit */
} pd_reserve_limits;

typedef enum pd_reserve_limit {
    PD_RESERVE_LIMIT_NONE = 0,
    PD_RESERVE_LIMIT_AGENTS,
    PD_RESERVE_LIMIT_ENTRIES,
    PD_RESERVE_LIMIT_WINDOW,
    PD_RESERVE_LIMIT_AGENT_BYTES,
} pd_reserve_limit;

/* "agents", "entries", "window", "agent_bytes" (the config's words), "none". */
const char *pd_reserve_limit_name(pd_reserve_limit l);

/* Why a change was refused: the limit behind PD_LIMIT_EXCEEDED, or the
 * agent whose cells a refused plan would have overlapped (has_agent). */
typedef struct pd_reserve_refusal {
    pd_reserve_limit limit;
    int has_agent;
    uint64_t agent;
} pd_reserve_refusal;

/* One entry as GetReservations reports it: the cells x..x+w-1 by
 * y..y+h-1 held by agent over [t0_ms, t1_ms). */
typedef struct pd_reserve_entry {
    uint64_t agent;
    int32_t x, y, w, h;
    int64_t t0_ms, t1_ms;
} pd_reserve_entry;

/* Where a cut (pd_reserve_block) or the end of its reservations leaves an
 * agent: the last waypoint it reaches at or before until_ms, at anchor
 * (x, y). Nothing is reserved for it from until_ms on. */
typedef struct pd_reserve_cut {
    uint64_t agent;
    int32_t x, y;
    int64_t until_ms;
    int mid_move;            /* the cut fell while it moved away from (x, y) */
} pd_reserve_cut;

typedef struct pd_reserve_stats {
    uint32_t agents;
    uint64_t entries;
    uint64_t spans;          /* per-cell spans after merging */
    uint64_t cells;          /* cells holding at least one span */
    size_t bytes;            /* memory the table holds */
} pd_reserve_stats;

typedef struct pd_reserve pd_reserve;

/* An empty table; limits may be NULL (none). NULL on allocation failure. */
pd_reserve *pd_reserve_create(const pd_reserve_limits *limits);
void pd_reserve_destroy(pd_reserve *t);
const pd_reserve_limits *pd_reserve_get_limits(const pd_reserve *t);
/* New limits (a reload's): they bound the changes from now on; what the
 * table holds stays, even past them. */
void pd_reserve_set_limits(pd_reserve *t, const pd_reserve_limits *limits);
void pd_reserve_get_stats(const pd_reserve *t, pd_reserve_stats *out);

/*
 * Replaces agent's reservations from t0_ms on with the plan wp[0..n):
 * its entries that start at or after t0_ms go, the one running across t0_ms
 * ends there, and the plan's entries are added. wp[0] must arrive at t0_ms;
 * each waypoint leaves no earlier than it arrives; consecutive anchors are
 * 8-neighbours and a move takes at least 1 ms. The last waypoint's
 * t_leave_ms is where its hold ends (FOREVER to park; equal to its arrival
 * to leave the table there).
 * The table checks the plan against every other agent's spans: an overlap
 * is PD_INTERNAL with refusal->agent set (a planner bug: pd_sipp plans
 * around them). Also PD_INVALID_ARGUMENT (a malformed plan, unit outside
 * 1..PD_UNIT_SIZE_MAX), PD_LIMIT_EXCEEDED (refusal->limit), PD_INTERNAL
 * (allocation failure). On every failure the table is unchanged.
 * Also renews the agent (its last renewal becomes t0_ms, see expire).
 */
pd_status pd_reserve_replace(pd_reserve *t, uint64_t agent, uint32_t unit, int64_t t0_ms,
                             const pd_waypoint *wp, size_t n, pd_reserve_refusal *refusal);

/* Removes every reservation of agent, past ones too, and the agent.
 * Returns 1 when it was in the table, 0 otherwise. */
int pd_reserve_release(pd_reserve *t, uint64_t agent);

/* Removes every agent (ReleaseAgent with all: a game that starts its clock
 * over), which forgets the table's clock. Their ids, in slot order, go to
 * out[0..cap); returns how many were removed (may exceed cap). Told to the
 * observer as PD_RESERVE_OP_RELEASE_ALL when any was. */
size_t pd_reserve_release_all(pd_reserve *t, uint64_t *out, size_t cap);

/* Renews agent at now_ms without changing its plan (a parked agent that is
 * still there). Returns 1 when it was in the table. */
int pd_reserve_touch(pd_reserve *t, uint64_t agent, int64_t now_ms);

/* Collects what ended long ago: entries whose t1 is at or before
 * before_ms, and agents left with no entry - but one a block cut (it
 * stays, holding nothing, until it reserves again, and that answer says
 * was_cut; or until released or expired). Returns the entries removed. */
uint64_t pd_reserve_collect(pd_reserve *t, int64_t before_ms);

/* The entries pd_reserve_collect(t, before_ms) would remove, the table left
 * as it is (a replica asks before it logs a sweep that would change
 * nothing). */
uint64_t pd_reserve_collectable(const pd_reserve *t, int64_t before_ms);

/* The latest game time the table has heard of: the largest t0_ms of a
 * replace or now_ms of a touch (0 before any), less the replaces that
 * pd_reserve_set_renewed took back (a holder moved aside). pathd keeps no clock for
 * reservations; this is what "now" means for expiry, and for an update
 * that names no time of its own. A table whose last agent goes forgets it
 * (0 again, and maintain is due at once): with no agent there is nothing
 * to compare a game time with, and the next replace sets it (whatever an
 * old dump restored: pd_reserve_replace of an empty table's first agent
 * starts from 0) - so a game
 * whose clock started over, or one bad t0 long gone, leaves no trace. So
 * does a table whose only agent restarted its clock
 * (pd_reserve_restart_clock). A replace never moves it back. */
int64_t pd_reserve_now(const pd_reserve *t);

/* Whether the table holds no agent but agent (none at all, or agent
 * alone): then the table's clock is agent's own, and agent's request may
 * take any t0 as a fresh clock (nothing else could be expired or
 * conflict; pd_reserve_restart_clock after its replace). */
int pd_reserve_holds_only(const pd_reserve *t, uint64_t agent);

/* Whether agent, the table's only agent, renewed at t0_ms (its replace
 * at that t0) is before the clock: then its request restarts the clock
 * (pd_reserve_restart_clock). A replica decides it before the append. */
int pd_reserve_clock_restarts(const pd_reserve *t, uint64_t agent, int64_t t0_ms);

/* After the replace of a request by agent, the table's only agent, at a
 * t0 before the clock: the clock was that agent's alone and starts afresh
 * at its renewal, as if it had been released first (kept, the agent
 * renewed at t0 was expired by the next maintain). Recorded as a CLOCK op
 * of its own, after the REPLACE, never decided inside a replace: a log
 * means the same to every replica and pathd version applying it (an older
 * one applies a CLOCK as a dump's; one that applied the bare REPLACE kept
 * the old clock, and its expiry removed the agent on every replica).
 * 1 when it restarted, else 0 (the table unchanged). The agent's entries
 * before t0 stay: they end before the new clock, as the past they were
 * (the checker's view too: a plan replaces an agent's occupancy from its
 * t0 on). */
int pd_reserve_restart_clock(pd_reserve *t, uint64_t agent);

/* Whether agent's request at game time t0_ms fits the table's clock,
 * checked before a request moves it (ReservePath's t0; pd_reserve_replace
 * itself takes any time, as replay and pd_yield need):
 *  - AHEAD: more than limits.max_clock_step_ms (when set; ttl_ms when
 *    that is longer: a step within it expires only idle agents) after
 *    pd_reserve_now: taken, it would make every other agent look idle
 *    and expire it;
 *  - BEHIND: more than ttl_ms (when > 0) before it: the agent would be
 *    acknowledged and then expired by the next check.
 * OK for a t0 at or before the clock whenever the table holds no agent
 * but agent (pd_reserve_holds_only: it has no clock then, or only agent's,
 * which its request starts afresh (pd_reserve_restart_clock): a game with
 * one NPC restarting its clock conflicts with nobody). A lone agent's jump
 * ahead is bound as anyone's: one bad t0 (microseconds, 2^60) would move
 * the clock away from every agent that joins later. */
typedef enum pd_reserve_clock_fit {
    PD_RESERVE_CLOCK_OK = 0,
    PD_RESERVE_CLOCK_AHEAD,
    PD_RESERVE_CLOCK_BEHIND,
} pd_reserve_clock_fit;
pd_reserve_clock_fit pd_reserve_clock_fits(const pd_reserve *t, uint64_t agent, int64_t t0_ms, int64_t ttl_ms);

/*
 * Expiry (the config's reservation_ttl_ms): with now = pd_reserve_now,
 * releases the agents not renewed since now - ttl_ms (pd_reserve_expire;
 * their ids to out[0..cap)) and collects the entries that ended before
 * then (pd_reserve_collect; how many to *collected, which may be NULL).
 * Both read every agent, so they run at most once per ttl_ms / 16 of game
 * time (later calls return 0 at once): call it on every ReservePath. An
 * agent is released at most ttl_ms * 17 / 16 after its last renewal.
 * ttl_ms <= 0: nothing expires. Returns how many agents were released.
 */
size_t pd_reserve_maintain(pd_reserve *t, int64_t ttl_ms, uint64_t *out, size_t cap, uint64_t *collected);
/* Whether pd_reserve_maintain would run now (1) or return 0 at once: a
 * caller that allocates room for the released ids asks first. */
int pd_reserve_maintain_due(const pd_reserve *t, int64_t ttl_ms);

/* Releases the agents whose last renewal (replace or touch) is before
 * renewed_before_ms (the server passes now - reservation_ttl_ms). Their ids
 * go to out[0..cap); returns how many were released (may exceed cap). */
size_t pd_reserve_expire(pd_reserve *t, int64_t renewed_before_ms, uint64_t *out, size_t cap);

/*
 * The world changed: the cells x0..x1 by y0..y1 (inclusive) are blocked
 * from at_ms on. Every agent holding any of them at or after at_ms is cut:
 * with T = max(at_ms, start of its first entry on them that ends after
 * at_ms), its reservations from T on go (as replace would drop them), so it
 * keeps its plan up to the last waypoint before the blocked cells. One
 * pd_reserve_cut per cut agent goes to out[0..cap) (ids for AGENTS_CUT, and
 * where each is left); returns how many were cut (may exceed cap: all are
 * cut regardless). Never fails and never allocates.
 *
 * What "plans from where its cut plan leaves it" means: the agent is
 * reserved up to until_ms and arrives at (x, y) by then, unless mid_move
 * (the cells went under it). Its next ReservePath starts from where the game
 * has it at t0: on the kept plan while t0 <= until_ms, at (x, y) after it.
 * Nothing holds (x, y) for it after until_ms: a cut agent must reserve again
 * before then, as after a PARTIAL answer. pd_reserve_agent_end tells the
 * same point later.
 */
size_t pd_reserve_block(pd_reserve *t, int32_t x0, int32_t y0, int32_t x1, int32_t y1,
                        int64_t at_ms, pd_reserve_cut *out, size_t cap);

/*
 * pd_reserve_block for the cells cells[0..n_cells) (UpdateCells with a cell
 * list): the same cuts as blocking each cell on its own at at_ms, each
 * agent cut once, at the earliest. Costs the cells named plus the spans on
 * them, never the whole table. Never fails and never allocates.
 */
size_t pd_reserve_block_cells(pd_reserve *t, const pd_point *cells, size_t n_cells, int64_t at_ms,
                              pd_reserve_cut *out, size_t cap);

/* Whether a block cut agent since its last replace (ReservePathResult's
 * was_cut: read it before pd_sipp_reserve replaces the plan). */
int pd_reserve_was_cut(const pd_reserve *t, uint64_t agent);

/* Where agent's reservations leave it (see pd_reserve_cut): returns 1 and
 * fills *out, or 0 when it is not in the table or holds nothing. */
int pd_reserve_agent_end(const pd_reserve *t, uint64_t agent, pd_reserve_cut *out);

/* The agent's plan from its first waypoint arriving at or after from_ms
 * on, as a replace from that arrival would take it (the last waypoint's
 * t_leave_ms is its hold's end): how many waypoints (0: none, or the
 * entries from there are not one plan a replace could give back: a move a
 * block cut, or a gap where the agent left the table and came back), of
 * which the first cap are in out. What pd_yield reads to cut a moving agent's
 * plan and to give it back. */
size_t pd_reserve_agent_plan(const pd_reserve *t, uint64_t agent, int64_t from_ms, pd_waypoint *out, size_t cap);

/*
 * GetReservations: entries covering any cell of x0..x1 by y0..y1
 * (inclusive) at some time of [from_ms, to_ms), agent by agent and in time
 * order within an agent. Copies up to cap into out; returns how many match.
 * Reads every entry of the table: a debugging and drawing query.
 */
size_t pd_reserve_query(const pd_reserve *t, int32_t x0, int32_t y0, int32_t x1, int32_t y1,
                        int64_t from_ms, int64_t to_ms, pd_reserve_entry *out, size_t cap);

/* ---- What the yielding planner (pd_yield.h) reads and restores ---- */

/* An agent as a holder: its unit, speed, last renewal, and whether its
 * reservations end in a hold for good (the last entry a wait at (x, y)
 * running to PD_RESERVE_FOREVER: a parked goal or PARTIAL's hold). */
typedef struct pd_reserve_agent_info {
    uint32_t unit;           /* of its last entry */
    double speed;            /* as noted by pd_reserve_note_speed; 0 unknown */
    int64_t renewed_ms;
    int holds;
    int32_t x, y;            /* the held anchor, when holds */
    int64_t hold_since;      /* when it began standing there: the start of
                                the unbroken waits at (x, y) ending in the hold */
} pd_reserve_agent_info;

/* 1 and *out filled when agent is in the table, else 0. */
int pd_reserve_agent_info_get(const pd_reserve *t, uint64_t agent, pd_reserve_agent_info *out);

/* Since when agent has stood on anchor (x, y) without a break up to `at`
 * (its unbroken waits there, across re-reservations); `at` when its entries
 * do not have it standing there then. Entries collected (older than the
 * TTL) no longer count. */
int64_t pd_reserve_standing_since(const pd_reserve *t, uint64_t agent, int32_t x, int32_t y, int64_t at);

/* The speed (cells per second) of the agent's last plan, which the table
 * does not otherwise know: a holder moved aside walks at its own speed. */
void pd_reserve_note_speed(pd_reserve *t, uint64_t agent, double speed);

/* Sets the agent's last renewal (a replace renews it): moving a holder
 * aside, or undoing that, is not the holder's own renewal, so its TTL
 * keeps running from its last request. Nor was that replace's t0 game time
 * heard of (a hold may begin far ahead): pd_reserve_now goes back to the
 * largest renewal, of the live agents and the removed ones. */
void pd_reserve_set_renewed(pd_reserve *t, uint64_t agent, int64_t renewed_ms);

/* ---- Reading a plan on the clock (the game's side, tests, benchmarks) ---- */

/* The waypoint of wp[0..n) (n >= 1) the agent stands on at t (arriving,
 * waiting or leaving), -1 while it moves between two, n - 1 after the
 * last one's hold ended. */
int pd_plan_index_at(const pd_waypoint *wp, size_t n, int64_t t);

/* The first time from t on at which the plan has the agent standing on a
 * waypoint: where a ReservePath from t on may start (t0 and start). */
int64_t pd_plan_next_stop(const pd_waypoint *wp, size_t n, int64_t t);

/* ---- What the planner (pd_sipp.c) reads. ---- */

/* One agent's hold on one cell; spans on a cell are sorted and disjoint. */
typedef struct pd_reserve_span {
    int64_t t0, t1;
    uint32_t slot;           /* the holder's slot (pd_reserve_agent_slot) */
    uint32_t unused;
} pd_reserve_span;

#define PD_RESERVE_NO_SLOT UINT32_MAX

/* In items[0..n) of `size` bytes each, sorted by time and disjoint, each
 * opening with int64_t t0, t1 (spans, and the table's own entries): the
 * index of the first that ends after t, n when none does. Disjoint
 * intervals sorted by start are sorted by end too. */
static inline size_t pd_reserve_first_ending_after(const void *items, size_t n, size_t size, int64_t t)
{
    const unsigned char *base = items;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2u;
        int64_t t1;
        memcpy(&t1, base + mid * size + sizeof(int64_t), sizeof t1);
        if (t1 > t)
            hi = mid;
        else
            lo = mid + 1u;
    }
    return lo;
}

/* The spans on cell (x, y); NULL with *n = 0 when none. Valid until the
 * next change to the table. */
const pd_reserve_span *pd_reserve_cell(const pd_reserve *t, int32_t x, int32_t y, size_t *n);

/* Whether another agent than slot `self` holds a cell of x0..x1 by y0..y1
 * at some time of [from, to) (pd_sipp_direct's fast path and pd_joint's
 * search check a step's box so; inline, as their loops call it). */
static inline int pd_reserve_box_busy(const pd_reserve *t, uint32_t self, int32_t x0, int32_t y0, int32_t x1,
                                      int32_t y1, int64_t from, int64_t to)
{
    for (int32_t y = y0; y <= y1; y++)
        for (int32_t x = x0; x <= x1; x++) {
            size_t n;
            const pd_reserve_span *s = pd_reserve_cell(t, x, y, &n);
            for (size_t i = pd_reserve_first_ending_after(s, n, sizeof *s, from); i < n && s[i].t0 < to; i++)
                if (s[i].slot != self)
                    return 1;
        }
    return 0;
}

/* The slot of an agent in the table, or PD_RESERVE_NO_SLOT; and back. */
uint32_t pd_reserve_agent_slot(const pd_reserve *t, uint64_t agent);
uint64_t pd_reserve_slot_agent(const pd_reserve *t, uint32_t slot);

/* Spans held by agents other than the one in slot (all spans for
 * PD_RESERVE_NO_SLOT): 0 lets the planner skip every lookup. */
uint64_t pd_reserve_spans_except(const pd_reserve *t, uint32_t slot);

/*
 * The observer: told each change the table made, as the call that made it
 * (after it succeeded; a refused replace, a release of an unknown agent, a
 * collect, expire or block that removed nothing are not changes). Replaying
 * the same calls, in the same order, on an empty table gives the same
 * table: no call reads a clock or the map, so a log of them (pd_reserve_log,
 * scene layer) makes the table durable and is applied by validation
 * (pd_reserve_replace checks each plan again), never planned again.
 * pd_reserve_maintain is told as the expire and collect it runs.
 */
typedef enum pd_reserve_op_kind {
    PD_RESERVE_OP_REPLACE = 1,   /* agent, unit, at_ms = t0, wp[0..n) */
    PD_RESERVE_OP_RELEASE,       /* agent */
    PD_RESERVE_OP_TOUCH,         /* agent, at_ms = now */
    PD_RESERVE_OP_COLLECT,       /* at_ms = before */
    PD_RESERVE_OP_EXPIRE,        /* at_ms = renewed_before */
    PD_RESERVE_OP_BLOCK,         /* x0, y0, x1, y1, at_ms */
    PD_RESERVE_OP_BLOCK_CELLS,   /* cells[0..n_cells), at_ms */
    PD_RESERVE_OP_SPEED,         /* agent, speed (pd_reserve_note_speed) */
    PD_RESERVE_OP_RENEWED,       /* agent, at_ms (pd_reserve_set_renewed) */
    /* pd_reserve_export's state, which pd_reserve_restore applies (the
     * log's compaction, pd_reserve_log.h); the clock also from
     * pd_reserve_restart_clock, the one change told as a CLOCK. */
    PD_RESERVE_OP_CLOCK,         /* at_ms = pd_reserve_now, maintained_ms */
    PD_RESERVE_OP_RESTORE,       /* agent, at_ms = renewed, speed, was_cut, raw[0..n) */
    /* A change again, numbered after the others: the kinds are the log's
     * record tags (pd_reserve_log.h), which must keep their numbers. */
    PD_RESERVE_OP_RELEASE_ALL,   /* (pd_reserve_release_all) */
} pd_reserve_op_kind;

/* One of an agent's entries as the table keeps it (see "Layout" above): a
 * wait (dx = dy = 0) at anchor (x, y), or a move from (x, y) by (dx, dy),
 * holding the unit's footprints' bounding box over [t0, t1); cut: a move
 * whose end a truncation took away (it ends mid-move). */
typedef struct pd_reserve_raw {
    int64_t t0, t1;
    int32_t x, y;
    int8_t dx, dy;
    uint8_t unit;
    uint8_t cut;
    uint32_t unused;         /* 0 */
} pd_reserve_raw;

typedef struct pd_reserve_op {
    pd_reserve_op_kind kind;
    uint64_t agent;
    uint32_t unit;
    int64_t at_ms;
    const pd_waypoint *wp;
    size_t n;
    int32_t x0, y0, x1, y1;
    const pd_point *cells;
    size_t n_cells;
    double speed;
    int64_t maintained_ms;   /* CLOCK */
    int was_cut;             /* RESTORE */
    const pd_reserve_raw *raw; /* RESTORE: n of them */
} pd_reserve_op;

typedef void (*pd_reserve_observer)(void *user, const pd_reserve_op *op);

/*
 * The table's state as ops that make it again on an empty table: one
 * CLOCK (its game time and when maintain last ran), then one RESTORE per
 * agent in slot order (its entries exactly as kept, cut moves and
 * collected prefixes included, its renewal, speed and was_cut). What a
 * compacted log holds instead of the history that made the table. fn is
 * called with raw pointing into the table: valid during the call; the
 * table must not change meanwhile. Returns the agents exported.
 */
size_t pd_reserve_export(const pd_reserve *t, pd_reserve_observer fn, void *user);

/*
 * Applies an op of pd_reserve_export. CLOCK sets the game time and the
 * maintain mark (and forgets the removed agents' renewals: a dump's comes
 * before any, a restart's ends the old clock's). RESTORE adds an agent
 * that is not in the table with exactly those entries, checked as a
 * replace is: well formed (each
 * t0 < t1, in time order without overlap, unit 1 ..
 * PD_UNIT_SIZE_MAX, moves to an 8-neighbour, cut only on a move), and no
 * cell another agent's at the same time (PD_INTERNAL with refusal->agent).
 * PD_INVALID_ARGUMENT for a malformed one or an agent already there,
 * PD_INTERNAL on allocation failure; the limits do not apply (a snapshot
 * holds what the table held). On failure the table is unchanged. Told to
 * the observer as the op itself.
 */
pd_status pd_reserve_restore(pd_reserve *t, const pd_reserve_op *op, pd_reserve_refusal *refusal);

/* fn NULL: none (the default). Called on the thread making the change,
 * inside the call. */
void pd_reserve_set_observer(pd_reserve *t, pd_reserve_observer fn, void *user);

#endif
