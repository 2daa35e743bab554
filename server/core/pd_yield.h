/*
 * pd_yield.h - ReservePath that keeps standing agents out of each other's
 * way (issue 34's deadlocks): holds that block no one, and holders moved aside.
 *
 * Why. Prioritised planning (pd_sipp.h) plans each agent around everyone
 * else's reservations, and an agent whose plan ended (a parked goal, or
 * PARTIAL's unbounded hold) holds its cell for good. In a one- or two-cell
 * corridor two such holders each wait for the other forever: neither plan
 * may pass through the other's hold. A bounded hold does not cure it (it
 * leaves agents standing unreserved in others' way). So a holder must
 * yield: be re-planned off the way, in the same lane step as the request
 * that needs the way.
 *
 * Rules, each its own switch (pd_yield_params).
 *
 * Clear holds (clear_holds), a parking rule. PARTIAL's hold for good may
 * only be where the footprint blocks no one (pd_sipp_params.hold_ok): the
 * open cells on the ring around it form one run, and none of them is held
 * for good by another agent; nor may it close a passage for any larger
 * unit size, the other holds counted as walls (pd_yield_clear_hold). Not
 * in a corridor or its mouth, not in a door, never beside another hold, so
 * a crowd keeps its gaps, and never where a 2 x 2 could no longer pass.
 * The planner then reserves on past the window's end to the first such cell (through a
 * corridor, to its far side), and an agent coming the other way sees the
 * whole passage taken and waits outside it. The start is always allowed
 * (the agent stands there already); when nowhere in reach is clear (a
 * crowd all round) the plan is made without the rule.
 *
 * Moving holders aside (after_ms), a priority that rises with the wait.
 *  - The requester R has stood on its start for at least after_ms (its
 *    unbroken waits there in the table, across its re-reservations).
 *  - A holder H may be moved when its reservations end in a hold for good
 *    and it has stood less long than R (an agent still on its way to its
 *    hold has stood 0), or - giving way, below - give_way_ms or more. So
 *    the longest-waiting agent gets its way (until give_way_ms), and two
 *    agents cannot take the way from each other back and forth: the one
 *    moved aside starts its wait again from 0.
 *  - R plans P0 as usual, and P1 all the way to its goal with the movable
 *    holders' holds ignored (pd_sipp_params.passable). Only when P1
 *    arrives at least PD_YIELD_MIN_GAIN_MS sooner (pd_sipp_result.eta_ms)
 *    are the holders P1 crosses within R's window (at most
 *    PD_YIELD_MAX_DISPLACED, the first met) moved.
 *  - Each is re-planned from its anchor at T = max(t0, when it began
 *    standing) to the nearest anchor off P1's cells (R's whole way) that it
 *    can hold for good (and, with clear holds, that blocks no one):
 *    pd_sipp_params.park_ok, a space-time Dijkstra against the table, so
 *    it steps aside around everyone's plans. The one P1 meets last is moved
 *    first (nearer ones cannot get out past it), then again those that
 *    could not move yet, while any moved.
 *  - R then plans as usual on the table with the holders' new plans - all
 *    the way when no further holders stay on P1, so its way through the
 *    narrow part is reserved before a moved holder plans again (otherwise
 *    the holder walks straight back in to meet R's PARTIAL hold) - and
 *    keeps it when it gains as much over P0. An agent whose reservations
 *    reach its goal keeps planning all the way on its later requests for
 *    the same reason.
 *  - Otherwise everything is undone - each holder's hold restored exactly
 *    as it was, renewal time included - and R gets P0, as without this
 *    module. The table checks every step itself (pd_reserve_replace), so a
 *    wrong plan here is refused, never stored.
 *
 * Moving holders ahead (move_ahead), in time rather than off the way.
 * Moving aside parks each holder off every cell of R's whole way, and moves
 * only those R meets within its window: in a corridor a holder with
 * another holder beyond it, or with R's own start behind it, has nowhere
 * to go, and the holders further on stay to stop R again. So when every
 * hold P1 crosses - all the way, not only within the window - is a movable
 * holder's, and they fit (PD_YIELD_MAX_DISPLACED), and P1 went all the
 * way within its budget: each holder keeps its anchor only until P1 first
 * reaches its footprint, R reserves P1 itself, and each holder is
 * re-planned (far along P1 first, then again those that could not move
 * yet) against that table to the nearest anchor it can hold for good -
 * which may be ahead of R along its way, in a pocket R passes, or a cell R
 * has left: the table, not a list of cells, says where R will be (PIBT's
 * push, planned over time). If any holder cannot move, R's P1 and every
 * cut go back and the attempt counts as undone. When the holder found no
 * anchor at all, or P1 meets it at once (nothing to cut: two 2 x 2s side
 * by side in a chamber of Berlin_0_256, seed 1, each attempt undone so;
 * test_yield_aside_when_ahead_meets_at_once) (aside_after_ahead), moving
 * aside is tried on the same request: a holder whose only way out of R's way passes R's start (two
 * agents to swap in a pocket, each wanting the other's side) cannot get
 * out ahead of R, who reserves its way from t0 on, but it can once R
 * waits for it. Seen on Berlin_0_256 seed 1: two 2 x 2s in a dead end
 * stood for good with every attempt undone so (that dead end is
 * test_reserve's test_yield_aside_after_ahead). Otherwise R plans as it
 * would with no holder moved, and the back-off decides when it tries
 * again.
 *
 * Parking anywhere (park_any): with clear holds a holder may only step
 * aside to a clear anchor, and in a crowd there is none (the ring of every
 * anchor touches another hold), so the move was undone and the crowd
 * stayed. With park_any a holder that finds no clear anchor tries again
 * for any anchor (off R's way when moving aside) it can hold for good.
 *
 * Giving way (give_way_ms), when the longest waiter is the knot. By the
 * priority above nobody may move the agent that stood longest, so when it
 * cannot get its own way it holds for good, and everyone it blocks stands
 * behind it. Traced on Berlin_0_256 (500 agents, 600 s, default seed;
 * docs/BENCHMARKS.md, "Deadlocks, sixth pass"): its last jam was 26
 * deadlocked agents in one street, the longest waiter's way crossed more
 * than PD_YIELD_MAX_DISPLACED holds (no moving ahead), and in 18 of its
 * 30 attempts over 166 s a holder, another member of the jam, found no
 * anchor off its way; the agents coming the other way could not move it.
 * A holder that has stood give_way_ms is movable by any requester that
 * may move holders, whatever its own wait: the longest waiter gives way
 * instead of standing between everyone and their goals. A moved agent's
 * wait starts again from 0 once it steps off its anchor; one whose new
 * plan first waits there and that reserves again in place before leaving
 * keeps its wait (the table joins the waits), and may be given way again
 * at once (the dl6 review counted 32 such moves in a Berlin_0_256 run).
 * Resetting it needs a "moved at" time in the table and its log; not
 * done. 500 agents, 600 s, three seeds
 * each of Berlin_0_256 and den520d: 211 deadlocked agents in all before,
 * 145 with 16 s, 168 with 20 s; with 10 s Berlin's default seed went
 * from 43 to 134 (moving agents that would have got their way).
 *
 * Coming in at its own door (door_ms), when the goal is crossed far ahead.
 * R may park on its goal only when no other reservation crosses the goal
 * after it arrives (a hold is for good), and the all-the-way plans of
 * agents whose reservations reach their goal cross other goals 40 s and
 * more ahead: on den520d (500 agents, 600 s) half the deadlocked agents
 * stood one step from their goal (docs/BENCHMARKS.md, seventh pass). When
 * R stands one step from its goal (an anchor's 8-neighbour), may move
 * holders (after_ms, the back-off) and has stood door_ms, and P0 does not
 * reach the goal: if every crossing of the goal left starts after R's
 * window (t0 + window) and belongs to an agent M (at
 * most PD_YIELD_MAX_DISPLACED of them) whose plan has a waypoint from
 * then on before its crossing, each M keeps its plan up to that waypoint
 * (the table's pd_reserve_agent_plan reads it), R plans as usual and must
 * park, and each M is re-planned from that waypoint to where its plan
 * ended (a long plan, the same at_goal), round R. The answer lists the
 * new plans as displaced ones (t0_ms that waypoint's arrival, later than
 * R's t0: the near part of M's plan stands). If R cannot park or any M
 * finds no plan that reaches its old end (a PARTIAL one may stop behind
 * R's hold for good: no way round), every plan goes back as it was (the
 * table's limits off for that: they bound decisions, not a plan given
 * back) and R tries the moves above. Each M's search has the aside
 * plans' budget (max_expansions). Crossings within the window stay: R's
 * plan waits for them. First come at a goal: an M that was to park over
 * R's goal (two goals over one cell; its hold begins after R's window, so
 * it is still on its way) finds it taken: its re-plan is the request's own
 * window, as near as it can hold (clear), PARTIAL accepted
 * (test_yield_door_first_come; before, any later hold stopped the door and
 * R stood below its goal until M came, for good).
 *
 * Crossing at last (cross_ms), when the way is taken far ahead. Agents
 * whose reservations reach their goal plan all the way, so a busy street
 * is reserved by plans that cross it 10 - 40 s ahead, and an agent that
 * must cross it or go along it, planning in its window, always finds its
 * way taken after the window's end: its P0 stands short of its goal for
 * good, request after request, while the others' plans keep coming (on
 * den520d seed 21, 500 agents: 15 of the 20 deadlocked agents had a plan
 * to their goal on the table as it was, after a wait of up to 41 s). First
 * come is not fair there: whoever reserved later, farther ahead, wins.
 * When R has stood cross_ms (and may move holders, on a back-off
 * attempt), and P0 does not take it to its goal within its window (PARTIAL,
 * or it first leaves after the window), R plans all the way with every
 * other agent's spans that begin at or after far = t0 + window ignored
 * (pd_sipp_params.ignore_span), within its own budget
 * (PD_YIELD_CROSS_PLAN_EXPANSIONS; with the long plans' 4,000, 152 of the
 * 222 crossings tried by the agents left deadlocked gave up there, and a
 * budget of its own cut the deadlocked agents from 72 to 52 over 24 seeds
 * a map; 48,000 did worse: docs/BENCHMARKS.md, twelfth pass). When that
 * plan reaches the goal (and gains on P0 when P0 reaches it too), the
 * agents whose later spans it crosses (at most PD_YIELD_MAX_DISPLACED;
 * none with a plan a block cut) are handled as door_ms handles the
 * crossings of R's goal: each keeps its plan up to its first waypoint
 * arriving at or after far (else at or after t0), which must come before
 * its crossing, R reserves that plan itself (it crosses only what was
 * cut), and each is re-planned from its cut to where its plan ended, round
 * R; if any cannot get there, every plan goes back as it was. The plans
 * within R's window stand (R waits for them), and holds for good begun
 * before far stay the other rules' business.
 *
 * Crossing jointly (joint), when a crosser cannot get out of R's way.
 * The crossers are re-planned one after another round R's plan, which
 * went all the way as if they were not there: in a street too narrow for
 * two 2 x 2 units, a crosser cut inside it that R meets head-on can only
 * back out ahead of R, and R, planned first, leaves it no time (on
 * den520d and Berlin_0_256, 500 agents, most crossings tried by the agents
 * left deadlocked gave up so: cross_why 9 - 11). When a crosser's re-plan
 * fails (cross_why 9 - 11), everything is cut again as the crossing cut
 * it, and R and that crosser C are planned together: a space-time A* over
 * both (pd_joint.h), one tick (the slower one's straight step) at a
 * time, each waiting or taking a straight step, the table's other
 * reservations walls in time and R and C apart within each tick, C on
 * its cut until its cut time; until R stands on the waypoint of its plan
 * after the last one C's old plan comes to, and C on the waypoint of its
 * old plan after the last one R's plan comes to - past each other, in
 * whichever order costs less (one backs into a pocket, the other goes
 * by). Within PD_YIELD_JOINT_EXPANSIONS, on grids up to 512 x 512 cells
 * (its static distances cover the whole grid: larger ones cross one by
 * one only), and only through cells the slower agent crosses in one tick
 * (cost 1 for it: on a map with terrain costs it seldom finds a plan).
 * Its buffers (pd_yield_ctx_bytes) stay in the context until pd_yield_ctx_trim. R then plans on from its joint
 * part's end all the way on the table as it is (the crossers cut, C's
 * joint part reserved; half the crossing plan's budget), and every
 * crosser is re-planned round R as the crossing does - C from its joint
 * part's end - with what the crossing's first re-plans left of their
 * budget. Anything failing puts every plan back, as the crossing does
 * (pd_yield_result.joint: 1 tried, 2 kept; cross_why 12 the joint search
 * found nothing, 13 R's plan on from it failed). On in the server and the
 * bench: 500 agents, 600 s, odd seeds 1 - 47 on Berlin_0_256 and den520d,
 * 16 + 30 agents deadlocked against 17 + 35, the longest call 77 ms
 * against 73 ms; with the joint round's re-plans on a budget of their own
 * (not what the first ones left) the longest call was 121 ms; with 8,000
 * joint expansions 18 + 31 deadlocked.
 *
 * Taking the way round (take_free_way), when there is nobody to move.
 * A windowed plan ranks a handover by its time plus the static rest from
 * there, which knows nothing of holds for good further on: beside a
 * holder it may not move (one that stood longer) R's P0 stands still for
 * good, every step back costing more than standing. When R has stood
 * after_ms and P0 stands still, R takes a long plan that moves: its P1
 * when P1 crosses no hold at all (then P1 is a plan on the table as it
 * is), else the long plan on the table as it is (P3), when that leaves
 * within the request's window. Measured on den520d (500 agents): the
 * remaining deadlocked agents were unit 2 agents beside such a hold in the
 * main north-south passage, P1 found and nobody to move. Off in the
 * server and the bench: beside crossing at last it changed nothing over 24
 * seeds a map (Berlin_0_256 17 -> 24 deadlocked, den520d 35 -> 29) and
 * raised Berlin's p99 (docs/BENCHMARKS.md, twelfth pass).
 *
 * The long plans' budget (long_expansions). P1, R's plan after the moves,
 * P3 and the plans of an agent whose reservations reach its goal go all
 * the way, a space-time search with no bound of its own: on Berlin_0_256
 * P1 alone took 30,000 - 40,000 expansions (12 - 25 ms) for agents stuck
 * for good, again on each of their requests. Each long plan gets this many
 * expansions (and as many of the reverse search); past them, or NO_PATH,
 * it is planned again in the request's own window. 4,000 by default: on
 * Berlin_0_256 (500 agents, 600 s, with moving ahead and parking anywhere)
 * 8,000 gave p99 4.2-4.6 ms and 99 deadlocked, 6,000 4.9 ms and 174, 4,000
 * 3.8 ms and 104 (the deadlock count swings with small changes).
 *
 * Backing off (retry_max_ms). Most attempts were undone (Berlin_0_256,
 * 500 agents: 13,974 of 19,617), and the same stuck requesters tried again
 * on every request, each a long P1 plus aside plans. A requester still
 * standing tries again only when its wait crosses the next of after_ms,
 * 2 after_ms, 4 after_ms, ... (gaps doubling up to retry_max_ms, then
 * every retry_max_ms); in between it plans as usual. Read from the table
 * alone (its wait, and its last request as the renewal time), so every
 * worker and replica decides the same; moving starts the wait again.
 *
 * The game must learn the displaced agents' new plans: the answer lists
 * them (pd_yield_result; each replaces that agent's plan from its t0_ms on,
 * its first waypoint being where it is at t0_ms: a holder's anchor, or the
 * waypoint door_ms cut a moving agent's plan at). A moved holder's renewal
 * time is kept: being moved is not the agent's own request, so its TTL
 * still runs from its last one.
 */
#ifndef PD_YIELD_H
#define PD_YIELD_H

#include <stddef.h>
#include <stdint.h>

#include "pd_reserve.h"
#include "pd_sipp.h"

/* The most holders one request moves (pd_yield_result.n_displaced; the
 * wire's ReservePathResult.displaced). 16: on Berlin_0_256 the jams in its
 * diagonal street stood more than 4 holders deep on a requester's way, and
 * moving ahead moves a whole chain or none. */
#define PD_YIELD_MAX_DISPLACED 16
#define PD_YIELD_MIN_GAIN_MS 1000
/* The aside plans one request may search for its holders, per holder
 * found (pd__replan_holders; unbounded, 16 holders could take 272
 * searches of max_expansions each in one lane step, now at most 64). The
 * agents bench's Berlin_0_256 run (500 agents, 600 s) makes the same
 * decisions with it as without. */
#define PD_YIELD_REPLAN_SEARCHES_PER_HOLDER 4
/* pd_yield_params.give_way_ms in the server and the agents bench: 16 s,
 * about half the 30 s that count an agent deadlocked. */
#define PD_YIELD_GIVE_WAY_MS 16000
/* pd_yield_params.door_ms in the server and the agents bench: 2 s, the
 * bench's after_ms (an agent at its door tries it on its first attempt).
 * 500 agents, 600 s, three seeds each of Berlin_0_256 and den520d: 145
 * deadlocked agents without it, 116 with 2 s, 148 with 10 s, 168 with 6
 * s, 220 with 16 s; 86 with 2 s after the review's fixes (a mover must
 * reach its old plan's end) (docs/BENCHMARKS.md, "Deadlocks, eighth
 * pass"). */
#define PD_YIELD_DOOR_MS 2000
/* pd_yield_params.cross_ms in the server and the agents bench (see
 * "Crossing at last"). */
#define PD_YIELD_CROSS_MS 4000
/* The expansions (forward, as pd_sipp_params.max_expansions counts them)
 * of each re-plan of an agent crossing at last cut - its way to where its
 * plan ended, round R, all the way - and twice that for all of one
 * request's. 8,000: den520d seed 1 gave 8
 * deadlocked against 3 (docs/BENCHMARKS.md, eleventh pass). */
#define PD_YIELD_CROSS_EXPANSIONS 16000
/* The expansions of the crossing's own plan (R's, all the way through the
 * later spans), forward as pd_sipp_params.max_expansions counts them; the
 * request's own max_expansions when lower (it is R's search). The
 * crossers' re-plans have PD_YIELD_CROSS_EXPANSIONS whatever the request
 * sets, as the aside plans have theirs (pd_yield_params.max_expansions). */
#define PD_YIELD_CROSS_PLAN_EXPANSIONS 16000
/* The joint search's expansions (pd_yield_params.joint), each a joint
 * state with up to 25 successors (each agent's 5 steps checked against
 * the table once). */
#define PD_YIELD_JOINT_EXPANSIONS 4000
/* Each aside plan's expansions when the caller sets none. */
#define PD_YIELD_DEFAULT_EXPANSIONS 4000
/* Each long plan's (pd_yield_params.long_expansions) when the caller sets none. */
#define PD_YIELD_DEFAULT_LONG_EXPANSIONS 4000
/* The longest gap between a standing requester's attempts
 * (pd_yield_params.retry_max_ms) when the caller sets none. */
#define PD_YIELD_DEFAULT_RETRY_MAX_MS 4000

typedef struct pd_yield_params {
    int64_t after_ms;                  /* R's wait before it may move holders; <= 0: never */
    /* The unit grids holders plan on, indexed by unit size (0 unused); a
     * holder whose unit has none here is not moved. */
    const pd_grid *const *unit_grids;
    uint32_t max_unit;                 /* unit_grids[1..max_unit] */
    uint64_t max_expansions;           /* each aside plan's; 0: the default */
    /* Parking rule: PARTIAL's hold, and a moved holder's new place, only
     * where the footprint blocks no one (see pd_yield_clear_hold); needs
     * unit_grids[1], the scene's open cells. */
    int clear_holds;
    /* The long plans' budget: P1, R's plan after the moves, and the plans
     * of an agent whose reservations reach its goal go all the way (or the
     * longest window allowed), each within this many expansions (and as
     * many of the reverse search); past it, or NO_PATH, they are planned
     * again in the request's own window. 0: the default; UINT64_MAX: no
     * budget. */
    uint64_t long_expansions;
    /* Taking a free way (take_free_way): when R's P1 gains on P0 but
     * crosses no hold at all - nobody to move - R reserves P1 itself. P0's
     * eta is a guess (the handover's time plus the static rest, which
     * knows nothing of holds further on): a P0 that stands still, betting
     * on a way that holds for good keep shut, would stand for good. */
    int take_free_way;
    /* Backing off (retry_max_ms): a requester still standing tries again
     * (plans P1) only once its wait has crossed the next of after_ms, 2 x,
     * 4 x, ... - the gaps doubling up to retry_max_ms, then every
     * retry_max_ms - since its last request (the table's renewal time), not
     * on every request. 0: the default; < 0: an attempt on every request. */
    int64_t retry_max_ms;
    /* Moving holders ahead (move_ahead, above): when every hold R's P1
     * crosses all the way belongs to a movable holder and they fit, R
     * reserves P1 itself and the holders are re-planned around it in time,
     * not off its whole way. */
    int move_ahead;
    /* A holder that finds no clear anchor (clear_holds) may park on any
     * anchor off R's way it can hold for good. */
    int park_any;
    /* The most holders one request moves, 1..PD_YIELD_MAX_DISPLACED; 0 (or
     * more than that): PD_YIELD_MAX_DISPLACED. */
    uint32_t max_displaced;
    /* Giving way (give_way_ms, above): a holder that has stood this long
     * may be moved by any requester that may move holders, not only by one
     * that stood longer; <= 0: never (the server and the bench:
     * PD_YIELD_GIVE_WAY_MS). */
    int64_t give_way_ms;
    /* Coming in at its own door (door_ms, above): a requester one step
     * from its goal that has stood this long (and may move holders) has
     * the agents whose plans cross its goal only after its window cut
     * there and re-planned round it; <= 0: never (the server and the
     * bench: PD_YIELD_DOOR_MS). */
    int64_t door_ms;
    /* Moving aside after moving ahead (above): when moving ahead is undone
     * because a holder found no anchor, the holders R meets within its
     * window are moved aside on the same request (the server and the
     * bench: on). */
    int aside_after_ahead;
    /* Crossing at last (cross_ms, above): a requester that has stood this
     * long (and may move holders) and whose plan does not take it to its
     * goal within its window has the plans that reach its whole way only
     * after its window cut there and re-planned round it; <= 0: never
     * (the server and the bench: PD_YIELD_CROSS_MS). */
    int64_t cross_ms;
    /* Crossing jointly (joint, above): when a crosser's re-plan round R
     * fails, R and that crosser are planned together past each other,
     * and the crossing's re-plans go on from there. */
    int joint;
} pd_yield_params;

/* An agent moved: its new plan replaces its reservations from t0_ms on
 * (waypoints[0] is where it is at t0_ms: a holder's anchor, or the
 * waypoint door_ms cut its plan at, later than the requester's t0). */
typedef struct pd_displaced {
    uint64_t agent;
    uint32_t unit;
    double speed;
    int64_t t0_ms;
    const pd_waypoint *waypoints;      /* valid until the context's next call */
    size_t n_waypoints;
    int64_t reserved_until_ms;
} pd_displaced;

typedef struct pd_yield_result {
    const pd_displaced *displaced;
    size_t n_displaced;
    int tried;                         /* P1 was planned */
    int undone;                        /* a move was tried and undone */
    int took_p1;                       /* R took its P1 (take_free_way) */
    uint64_t p1_expanded;              /* P1's search (and reverse search) expansions */
    /* How the attempt ended, for the agents bench's trace of who stays
     * stuck and why (PD_YIELD_OUT_*; 0 when none was tried), and the agent
     * it names (the holder that could not move), or 0. */
    int outcome;
    uint64_t culprit;
    int p1_fell;                       /* P1 planned in the window instead: 1 past its budget, 2 NO_PATH */
    int hold_fell;                     /* clear holds found no clear anchor in reach: planned without the rule */
    int found;                         /* the holders this attempt would move (-1: none it may) */
    int ahead;                         /* moving ahead was tried (else aside) */
    /* Why the move was undone: 1 the request's aside searches ran out, 2
     * the culprit found no anchor (NO_PATH), 3 its searches ran past their
     * budget, 4 R's P1 reaches the culprit's cell no later than it stands
     * there (nothing to cut), 5 the table refused R's P1. */
    int undone_why;
    /* Why crossing at last (cross_ms) gave up (0: it was not tried, or
     * kept): R's plan through the later spans 1 ran past its budget
     * (PD_YIELD_CROSS_PLAN_EXPANSIONS, or the request's lower
     * max_expansions) or 2 did not reach the goal (PARTIAL, NO_PATH, or
     * what the poll returned), 3 it did not gain on P0, 4 it crosses more
     * agents than may move (or one that cannot), 5 none, 6 a crosser could
     * not be cut (its cut is not before the crossing, or memory or the
     * table refused it), 7 the table refused R's plan, 8 - 11 a crosser's
     * re-plan failed: 9 past its budget, 10 short of its end, 11 no path,
     * 8 out of memory; crossing jointly (joint) after 9 - 11: 12 its
     * search found no joint plan (or R and the crosser's ways do not
     * meet), 13 R's plan on from it failed (or the table refused the
     * joint plans), then 8 - 11 as above for its re-plans. */
    int cross_why;
    /* Crossing jointly (joint): 0 not tried, 1 tried and undone, 2 kept. */
    int joint;
    /* P1 against P0: how long P1 first stands on R's start (-1: for
     * good), and P0's eta less P1's (> 0: P1 arrives sooner). */
    int64_t p1_wait_ms, p1_gain_ms;
} pd_yield_result;

/* pd_yield_result.outcome */
enum {
    PD_YIELD_OUT_NONE = 0,
    PD_YIELD_OUT_P1_FAILED,            /* P1 not even in the window */
    PD_YIELD_OUT_NO_GAIN,              /* P1 no better than P0 */
    PD_YIELD_OUT_NONE_IN_WINDOW,       /* P1 gains, crosses no hold R meets in its window */
    PD_YIELD_OUT_AHEAD_UNDONE,         /* moving ahead: culprit could not move */
    PD_YIELD_OUT_ASIDE_UNDONE,         /* moving aside: culprit found no anchor off R's way */
    PD_YIELD_OUT_R2_NO_GAIN,           /* moved aside, R's plan after it gained nothing: undone */
    PD_YIELD_OUT_KEPT_AHEAD,
    PD_YIELD_OUT_KEPT_ASIDE,
    PD_YIELD_OUT_TOOK_P1,              /* take_free_way */
    PD_YIELD_OUT_KEPT_DOOR,            /* door_ms: R parked, the far crossings re-planned */
    PD_YIELD_OUT_DOOR_UNDONE,          /* door_ms: tried and undone */
    PD_YIELD_OUT_KEPT_CROSS,           /* cross_ms: R's way kept, the later plans re-planned round it */
    PD_YIELD_OUT_CROSS_UNDONE          /* cross_ms: tried and undone */
};

/*
 * Whether a k x k footprint at anchor (x, y) blocks no one: the open cells
 * of unit_grids[1] (the scene's cells) on the ring around it form one run
 * (or none), and so do the anchors round it that each larger unit size u
 * (unit_grids[u], 2 <= u <= max_unit, NULL ones skipped) could take. Two or
 * more runs mean the footprint stands between them - a corridor, a door, a
 * corridor's mouth, a street too narrow for a 2 x 2 beside it - and others
 * could only pass through it. With a table t (may be NULL), another agent's
 * hold for good is a wall for this, and no cell of the unit-1 ring may be
 * held for good at all (holds keep a cell apart).
 */
int pd_yield_clear_hold(const pd_grid *const *unit_grids, uint32_t max_unit, const pd_reserve *t, uint32_t k,
                        int32_t x, int32_t y);

typedef struct pd_yield_ctx pd_yield_ctx;

pd_yield_ctx *pd_yield_ctx_create(void);
void pd_yield_ctx_destroy(pd_yield_ctx *yc);
/* The bytes the context holds (with joint, after a joint search, about
 * 4.6 MB plus 12 bytes a cell of the scene - 7.8 MB at 512 x 512 - until
 * pd_yield_ctx_trim gives them back). */
size_t pd_yield_ctx_bytes(const pd_yield_ctx *yc);
/* Gives back the joint search's buffers when the context holds more than
 * keep bytes (the next joint search makes them again: a crossing is rare,
 * and a worker should keep what an ordinary request needs, as
 * pd_sipp_ctx_trim does). The bytes it holds after. */
size_t pd_yield_ctx_trim(pd_yield_ctx *yc, size_t keep);

/*
 * pd_sipp_reserve, and the move above when y allows it (y may be NULL: plain
 * pd_sipp_reserve). Statuses are pd_sipp_reserve's; r's waypoints are valid
 * until the next call on yc (or ctx). Also notes the agent's speed in the
 * table (pd_reserve_note_speed): a holder moves at its own speed.
 */
pd_status pd_yield_reserve(pd_yield_ctx *yc, pd_sipp_ctx *ctx, pd_reserve *table, const pd_grid *grid,
                           const pd_sipp_params *p, const pd_yield_params *y, pd_sipp_result *r,
                           pd_yield_result *yr);

/*
 * The plan pd_yield_reserve would reserve when no holder is moved (y's
 * clear holds rule applied; after_ms ignored), made without changing the
 * table (pd_sipp_plan): the replicas' shared log appends it before any
 * table holds it. r's waypoints are valid until the next call on ctx.
 */
pd_status pd_yield_plan(pd_yield_ctx *yc, pd_sipp_ctx *ctx, const pd_reserve *table, const pd_grid *grid,
                        const pd_sipp_params *p, const pd_yield_params *y, pd_sipp_result *r);

#endif
