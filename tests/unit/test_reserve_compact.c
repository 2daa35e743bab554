/*
 * test_reserve_compact.c - the reservation log's compaction (pd_reserve_log.h):
 * a table's state as pd_reserve_export gives it, encoded, decoded and
 * applied to an empty table (pd_reserve_restore through pd_reserve_log_apply),
 * must make the same table, compared entry by entry (every agent's entries
 * with their cut marks, renewal, speed and was_cut; the game time; every
 * cell's spans). The tables are random: replaces at random times (cutting
 * moves short), releases, touches, blocks of rectangles and cell lists,
 * collects, expiries, speeds, renewals and releases of every agent. Also: restore refuses what a
 * replace would (an overlap, a malformed entry, an agent already there)
 * with the table unchanged, and the file: a log rewritten as a dump and
 * opened again replays to the same table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pd_reserve.h"
#include "pd_reserve_log.h"

#define GRID 24

/* ---- a table's state, copied out of pd_reserve_export ---- */

typedef struct agent_state {
    uint64_t agent;
    int64_t renewed;
    double speed;
    int was_cut;
    pd_reserve_raw *e;
    size_t n;
} agent_state;

typedef struct state {
    int64_t now, maintained;
    agent_state *a;
    size_t n, cap;
} state;

static void state_op(void *user, const pd_reserve_op *op)
{
    state *s = user;
    if (op->kind == PD_RESERVE_OP_CLOCK) {
        s->now = op->at_ms;
        s->maintained = op->maintained_ms;
        return;
    }
    assert_int_equal(op->kind, PD_RESERVE_OP_RESTORE);
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->a = realloc(s->a, s->cap * sizeof *s->a);
        assert_non_null(s->a);
    }
    agent_state *a = &s->a[s->n++];
    *a = (agent_state){ op->agent, op->at_ms, op->speed, op->was_cut, malloc(op->n * sizeof *a->e), op->n };
    assert_non_null(a->e);
    memcpy(a->e, op->raw, op->n * sizeof *a->e);
}

static void state_of(const pd_reserve *t, state *s)
{
    memset(s, 0, sizeof *s);
    pd_reserve_export(t, state_op, s);
}

static void state_free(state *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->a[i].e);
    free(s->a);
}

static int by_agent(const void *p, const void *q)
{
    const agent_state *a = p, *b = q;
    return (a->agent > b->agent) - (a->agent < b->agent);
}

/* The two tables hold the same: entry by entry, then cell by cell. In
 * slot order (what GetReservations lists) when `ordered`; else by id: an
 * agent made after a restore takes the next slot where the table that
 * lived on reuses a freed one. */
static int skip_maintained; /* maintain() is not an op of the log */
static void assert_same_table(const pd_reserve *x, const pd_reserve *y, int ordered)
{
    state a, b;
    state_of(x, &a);
    state_of(y, &b);
    if (!ordered) {
        /* qsort's base must not be NULL, even for none (an empty table
         * after a release-all: UBSan) */
        if (a.n > 1)
            qsort(a.a, a.n, sizeof *a.a, by_agent);
        if (b.n > 1)
            qsort(b.a, b.n, sizeof *b.a, by_agent);
    }
    assert_int_equal(a.now, b.now);
    if (!skip_maintained)
        assert_int_equal(a.maintained, b.maintained);
    assert_int_equal(a.n, b.n);
    for (size_t i = 0; i < a.n; i++) {
        assert_int_equal(a.a[i].agent, b.a[i].agent);
        assert_int_equal(a.a[i].renewed, b.a[i].renewed);
        assert_memory_equal(&a.a[i].speed, &b.a[i].speed, sizeof(double));
        assert_int_equal(a.a[i].was_cut, b.a[i].was_cut);
        assert_int_equal(a.a[i].n, b.a[i].n);
        for (size_t k = 0; k < a.a[i].n; k++) {
            const pd_reserve_raw *p = &a.a[i].e[k], *q = &b.a[i].e[k];
            assert_int_equal(p->t0, q->t0);
            assert_int_equal(p->t1, q->t1);
            assert_int_equal(p->x, q->x);
            assert_int_equal(p->y, q->y);
            assert_int_equal(p->dx, q->dx);
            assert_int_equal(p->dy, q->dy);
            assert_int_equal(p->unit, q->unit);
            assert_int_equal(p->cut, q->cut);
        }
        assert_int_equal(pd_reserve_was_cut(x, a.a[i].agent), pd_reserve_was_cut(y, a.a[i].agent));
    }
    state_free(&a);
    state_free(&b);
    pd_reserve_stats sa, sb;
    pd_reserve_get_stats(x, &sa);
    pd_reserve_get_stats(y, &sb);
    assert_int_equal(sa.agents, sb.agents);
    assert_int_equal(sa.entries, sb.entries);
    assert_int_equal(sa.spans, sb.spans);
    assert_int_equal(sa.cells, sb.cells);
    for (int32_t cy = 0; cy < GRID + 4; cy++)
        for (int32_t cx = 0; cx < GRID + 4; cx++) {
            size_t na, nb;
            const pd_reserve_span *p = pd_reserve_cell(x, cx, cy, &na), *q = pd_reserve_cell(y, cx, cy, &nb);
            assert_int_equal(na, nb);
            for (size_t i = 0; i < na; i++) {
                assert_int_equal(p[i].t0, q[i].t0);
                assert_int_equal(p[i].t1, q[i].t1);
                assert_int_equal(pd_reserve_slot_agent(x, p[i].slot), pd_reserve_slot_agent(y, q[i].slot));
            }
        }
}

/* ---- random tables ---- */

static uint64_t rng_state;
static uint32_t rnd(uint32_t n)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % n);
}

/* A random walk from a random cell from t0 on: waits and 8-neighbour
 * moves, ending parked (FOREVER) or leaving the table. */
static size_t random_plan(pd_waypoint *wp, size_t cap, int64_t t0)
{
    size_t n = 1 + rnd((uint32_t)cap);
    int32_t x = (int32_t)rnd(GRID), y = (int32_t)rnd(GRID);
    int64_t t = t0;
    for (size_t i = 0; i < n; i++) {
        const int64_t leave = t + (rnd(3) ? 0 : 1 + rnd(400));
        wp[i] = (pd_waypoint){ x, y, t, leave };
        int32_t dx, dy;
        do {
            dx = (int32_t)rnd(3) - 1;
            dy = (int32_t)rnd(3) - 1;
        } while ((dx == 0 && dy == 0) || x + dx < 0 || y + dy < 0 || x + dx >= GRID || y + dy >= GRID);
        x += dx;
        y += dy;
        t = leave + 1 + rnd(300);
    }
    if (rnd(2))
        wp[n - 1].t_leave_ms = PD_RESERVE_FOREVER;
    return n;
}

/* Random calls on t until it holds about `agents` agents. */
static void random_table(pd_reserve *t, int steps)
{
    pd_waypoint wp[24];
    int64_t now = 1000;
    for (int s = 0; s < steps; s++) {
        now += rnd(200);
        const uint64_t agent = 1 + rnd(40);
        const uint32_t what = rnd(100);
        if (what < 60) {
            /* From a random time: within the agent's plan, so moves and
             * waits are cut short by the replace. */
            size_t n = random_plan(wp, 24, now - rnd(2000) > 0 ? now - rnd(2000) : now);
            (void)pd_reserve_replace(t, agent, 1 + rnd(2), wp[0].t_arrive_ms, wp, n, NULL);
            /* a lone agent's t0 before the clock restarts it, as a request does */
            (void)pd_reserve_restart_clock(t, agent);
        } else if (what < 68) {
            (void)pd_reserve_release(t, agent);
        } else if (what < 74) {
            (void)pd_reserve_touch(t, agent, now);
        } else if (what < 80) {
            const int32_t x = (int32_t)rnd(GRID), y = (int32_t)rnd(GRID);
            (void)pd_reserve_block(t, x, y, x + (int32_t)rnd(3), y + (int32_t)rnd(3), now - rnd(3000), NULL, 0);
        } else if (what < 85) {
            pd_point cells[5];
            for (int i = 0; i < 5; i++)
                cells[i] = (pd_point){ (int32_t)rnd(GRID), (int32_t)rnd(GRID) };
            (void)pd_reserve_block_cells(t, cells, 5, now - rnd(3000), NULL, 0);
        } else if (what < 88) {
            (void)pd_reserve_collect(t, now - 2000 - rnd(4000));
        } else if (what < 90) {
            (void)pd_reserve_expire(t, now - 3000 - rnd(4000), NULL, 0);
        } else if (what < 93) {
            (void)pd_reserve_maintain(t, 5000, NULL, 0, NULL);
        } else if (what < 97) {
            pd_reserve_note_speed(t, agent, 0.5 + rnd(40) / 8.0);
        } else if (what < 99) {
            pd_reserve_set_renewed(t, agent, now - rnd(1000));
        } else {
            /* A game that starts over: every agent goes, and the clock. */
            (void)pd_reserve_release_all(t, NULL, 0);
        }
    }
}

/* ---- export, encode, decode, apply ---- */

typedef struct dump {
    pd_reserve_log_buf b;
} dump;

static void dump_op(void *user, const pd_reserve_op *op)
{
    dump *d = user;
    assert_int_equal(pd_reserve_log_encode(&d->b, "scene-a", op), 0);
}

static void apply_record(void *user, const char *scene, const pd_reserve_op *op)
{
    pd_reserve **t = user;
    assert_string_equal(scene, "scene-a");
    if (!op) { /* RESET: the table starts empty */
        pd_reserve_destroy(*t);
        *t = pd_reserve_create(NULL);
        assert_non_null(*t);
        return;
    }
    assert_int_equal(pd_reserve_log_apply(*t, op), PD_OK);
}

static void dump_table(const pd_reserve *t, dump *d)
{
    memset(d, 0, sizeof *d);
    assert_int_equal(pd_reserve_log_encode(&d->b, "scene-a", NULL), 0);
    pd_reserve_export(t, dump_op, d);
}

static void test_export_replay_random(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        rng_state = seed * 0x9e3779b97f4a7c15ULL;
        pd_reserve *t = pd_reserve_create(NULL);
        assert_non_null(t);
        random_table(t, 50 + (int)rnd(600));
        dump d;
        dump_table(t, &d);
        /* The replay starts on a table with other agents: the RESET ends them. */
        pd_reserve *r = pd_reserve_create(NULL);
        pd_waypoint w = { 1, 1, 10, PD_RESERVE_FOREVER };
        assert_int_equal(pd_reserve_replace(r, 999, 1, 10, &w, 1, NULL), PD_OK);
        assert_int_equal(pd_reserve_log_decode(d.b.p, d.b.n, apply_record, &r), d.b.n);
        assert_same_table(t, r, 1);
        /* And it goes on the same: the same calls after on both. */
        uint64_t keep = rng_state;
        random_table(t, 200);
        rng_state = keep;
        random_table(r, 200);
        assert_same_table(t, r, 0);
        pd_reserve_log_buf_free(&d.b);
        pd_reserve_destroy(t);
        pd_reserve_destroy(r);
    }
}


/* The reservation log's own replay - every op the live
 * table's observer wrote, applied in order to an empty table - must give
 * the live table (what a restart without compaction does). */
static void test_oplog_replay_random(void **unused)
{
    (void)unused;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rng_state = seed * 0x9e3779b97f4a7c15ULL;
        pd_reserve *t = pd_reserve_create(NULL);
        assert_non_null(t);
        dump d;
        memset(&d, 0, sizeof d);
        pd_reserve_set_observer(t, dump_op, &d);
        random_table(t, 50 + (int)rnd(600));
        pd_reserve *r = pd_reserve_create(NULL);
        assert_int_equal(pd_reserve_log_decode(d.b.p, d.b.n, apply_record, &r), d.b.n);
        skip_maintained = 1;
        assert_same_table(t, r, 0);
        skip_maintained = 0;
        pd_reserve_log_buf_free(&d.b);
        pd_reserve_destroy(t);
        pd_reserve_destroy(r);
    }
}

/* The minimal case - an agent whose plan is one zero-length waypoint
 * holds nothing; a collect that removed no entry removed it and logged
 * nothing, so a replay of the log kept it. */
static void test_empty_agent_collect_logged(void **unused)
{
    (void)unused;
    pd_reserve *t = pd_reserve_create(NULL);
    dump d;
    memset(&d, 0, sizeof d);
    pd_reserve_set_observer(t, dump_op, &d);
    pd_waypoint w = { 3, 3, 1000, 1000 };
    assert_int_equal(pd_reserve_replace(t, 7, 1, 1000, &w, 1, NULL), PD_OK);
    (void)pd_reserve_collect(t, 500);
    pd_reserve *r = pd_reserve_create(NULL);
    assert_int_equal(pd_reserve_log_decode(d.b.p, d.b.n, apply_record, &r), d.b.n);
    assert_int_equal(pd_reserve_agent_slot(t, 7) == PD_RESERVE_NO_SLOT, pd_reserve_agent_slot(r, 7) == PD_RESERVE_NO_SLOT);
    pd_reserve_log_buf_free(&d.b);
    pd_reserve_destroy(t);
    pd_reserve_destroy(r);
}

/* A lone agent's clock restart (pd_reserve_restart_clock) is an op of the
 * log, after its REPLACE: a replay gives the same clock, and the agent
 * renewed at it survives the next maintain. Decided inside the replace
 * (as first done), an older pathd - or a replica of one in a rolling
 * upgrade - applying the same REPLACE kept the old clock and expired it. */
static void test_clock_restart_replays(void **unused)
{
    (void)unused;
    pd_reserve *t = pd_reserve_create(NULL);
    dump d;
    memset(&d, 0, sizeof d);
    pd_reserve_set_observer(t, dump_op, &d);
    const pd_waypoint w0 = { 3, 3, 500000, PD_RESERVE_FOREVER }, w1 = { 3, 3, 100, PD_RESERVE_FOREVER };
    assert_int_equal(pd_reserve_replace(t, 7, 1, 500000, &w0, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_replace(t, 7, 1, 100, &w1, 1, NULL), PD_OK);
    const size_t replace_only = d.b.n;
    assert_int_equal(pd_reserve_restart_clock(t, 7), 1);
    assert_true(d.b.n > replace_only);
    pd_reserve *r = pd_reserve_create(NULL);
    assert_int_equal(pd_reserve_log_decode(d.b.p, d.b.n, apply_record, &r), d.b.n);
    assert_same_table(t, r, 0);
    assert_int_equal(pd_reserve_now(r), 100);
    uint64_t gone[1];
    assert_int_equal(pd_reserve_maintain(r, 30000, gone, 1, NULL), 0);
    assert_int_not_equal(pd_reserve_agent_slot(r, 7), PD_RESERVE_NO_SLOT);
    /* The REPLACEs alone, as a log without the CLOCK: the old clock. */
    pd_reserve *o = pd_reserve_create(NULL);
    assert_int_equal(pd_reserve_log_decode(d.b.p, replace_only, apply_record, &o), replace_only);
    assert_int_equal(pd_reserve_now(o), 500000);
    pd_reserve_log_buf_free(&d.b);
    pd_reserve_destroy(t);
    pd_reserve_destroy(r);
    pd_reserve_destroy(o);
}

/* What export carries matters: a move cut short by a block, restored
 * without its cut mark, would leave the agent at the move's far end. */
static void test_cut_mark_is_exported(void **unused)
{
    (void)unused;
    pd_reserve *t = pd_reserve_create(NULL);
    pd_waypoint wp[2] = { { 2, 2, 100, 100 }, { 3, 2, 300, PD_RESERVE_FOREVER } };
    assert_int_equal(pd_reserve_replace(t, 7, 1, 100, wp, 2, NULL), PD_OK);
    assert_int_equal(pd_reserve_block(t, 3, 2, 3, 2, 150, NULL, 0), 1);
    state s;
    state_of(t, &s);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.a[0].n, 1);
    assert_int_equal(s.a[0].e[0].cut, 1);
    assert_int_equal(s.a[0].e[0].t1, 150);
    assert_int_equal(s.a[0].was_cut, 1);
    pd_reserve *r = pd_reserve_create(NULL);
    pd_reserve_op op = { .kind = PD_RESERVE_OP_RESTORE, .agent = 7, .at_ms = 100, .was_cut = 1, .raw = s.a[0].e,
                         .n = 1 };
    assert_int_equal(pd_reserve_restore(r, &op, NULL), PD_OK);
    pd_reserve_cut a, b;
    assert_true(pd_reserve_agent_end(t, 7, &a));
    assert_true(pd_reserve_agent_end(r, 7, &b));
    assert_true(a.mid_move && b.mid_move);
    assert_int_equal(a.x, 2);
    assert_int_equal(b.x, 2);
    assert_true(pd_reserve_was_cut(r, 7));
    /* Without the mark: elsewhere. */
    pd_reserve_release(r, 7);
    s.a[0].e[0].cut = 0;
    assert_int_equal(pd_reserve_restore(r, &op, NULL), PD_OK);
    assert_true(pd_reserve_agent_end(r, 7, &b));
    assert_false(b.mid_move);
    assert_int_equal(b.x, 3);
    state_free(&s);
    pd_reserve_destroy(t);
    pd_reserve_destroy(r);
}

/* A dump written before tables forgot their clock (a compaction, a
 * replicas' snapshot): an empty table's CLOCK still carried the old game
 * time. Restored, a table with no agent had that clock, and the first
 * agent of a game whose clock had started over was expired by the next
 * maintain. */
static void test_old_dump_of_an_empty_table(void **unused)
{
    (void)unused;
    pd_reserve *r = pd_reserve_create(NULL);
    const pd_reserve_op clock = { .kind = PD_RESERVE_OP_CLOCK, .at_ms = 1000000, .maintained_ms = 1000000 };
    assert_int_equal(pd_reserve_restore(r, &clock, NULL), PD_OK);
    assert_int_equal(pd_reserve_clock_fits(r, 0, 0, 30000), PD_RESERVE_CLOCK_OK);
    const pd_waypoint w = { 3, 3, 0, PD_RESERVE_FOREVER };
    assert_int_equal(pd_reserve_replace(r, 7, 1, 0, &w, 1, NULL), PD_OK);
    assert_int_equal(pd_reserve_now(r), 0);
    uint64_t gone[1];
    assert_int_equal(pd_reserve_maintain(r, 30000, gone, 1, NULL), 0);
    assert_int_not_equal(pd_reserve_agent_slot(r, 7), PD_RESERVE_NO_SLOT);
    pd_reserve_destroy(r);
}

static void test_restore_refuses(void **unused)
{
    (void)unused;
    pd_reserve *t = pd_reserve_create(NULL);
    pd_waypoint w = { 5, 5, 0, PD_RESERVE_FOREVER };
    assert_int_equal(pd_reserve_replace(t, 1, 1, 0, &w, 1, NULL), PD_OK);
    /* Zeroed: the compare below reads the padding too, which the stack
     * left by the tests before may fill differently (it did under ASan). */
    pd_reserve_stats before, after;
    memset(&before, 0, sizeof before);
    memset(&after, 0, sizeof after);
    pd_reserve_get_stats(t, &before);
    /* Another agent's cell at the same time. */
    pd_reserve_raw e[2] = { { .t0 = 50, .t1 = 80, .x = 4, .y = 5, .unit = 2 },
                            { .t0 = 80, .t1 = 90, .x = 4, .y = 5, .dx = -1, .unit = 2, .cut = 1 } };
    pd_reserve_refusal why;
    pd_reserve_op op = { .kind = PD_RESERVE_OP_RESTORE, .agent = 2, .raw = e, .n = 2 };
    assert_int_equal(pd_reserve_restore(t, &op, &why), PD_INTERNAL);
    assert_true(why.has_agent);
    assert_int_equal(why.agent, 1);
    /* The agent already there. */
    op.agent = 1;
    e[0].x = e[1].x = 10;
    assert_int_equal(pd_reserve_restore(t, &op, NULL), PD_INVALID_ARGUMENT);
    /* Malformed: entries overlapping in time, a cut wait, a unit of 0, a jump. */
    op.agent = 3;
    e[1].t0 = 79;
    assert_int_equal(pd_reserve_restore(t, &op, NULL), PD_INVALID_ARGUMENT);
    e[1].t0 = 80;
    e[0].cut = 1;
    assert_int_equal(pd_reserve_restore(t, &op, NULL), PD_INVALID_ARGUMENT);
    e[0].cut = 0;
    e[0].unit = 0;
    assert_int_equal(pd_reserve_restore(t, &op, NULL), PD_INVALID_ARGUMENT);
    e[0].unit = 2;
    e[1].dx = 2;
    assert_int_equal(pd_reserve_restore(t, &op, NULL), PD_INVALID_ARGUMENT);
    pd_reserve_get_stats(t, &after);
    assert_memory_equal(&before, &after, offsetof(pd_reserve_stats, bytes));
    e[1].dx = -1;
    assert_int_equal(pd_reserve_restore(t, &op, NULL), PD_OK);
    pd_reserve_destroy(t);
}

/* The file: history appended, then rewritten as the dump, then opened
 * again (a restart): the same table, and appends after go on from it. */
static pd_reserve *file_table;
static void file_record(void *user, const char *scene, const pd_reserve_op *op)
{
    (void)user;
    apply_record(&file_table, scene, op);
}

static void log_history(void *user, const pd_reserve_op *op)
{
    pd_reserve_log_buf *b = user;
    assert_int_equal(pd_reserve_log_encode(b, "scene-a", op), 0);
}

static void test_file_rewrite(void **unused)
{
    (void)unused;
    char dir[] = "/tmp/pd_resv_compact_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char err[512];
    pd_reserve_log_stats st;
    file_table = pd_reserve_create(NULL);
    pd_reserve_log *l = pd_reserve_log_open(dir, 1, file_record, NULL, &st, err, sizeof err);
    assert_non_null(l);
    /* The history, logged by the observer as the server does. */
    pd_reserve *t = pd_reserve_create(NULL);
    pd_reserve_log_buf hist = { 0 };
    pd_reserve_set_observer(t, log_history, &hist);
    rng_state = 42;
    random_table(t, 3000);
    assert_int_equal(pd_reserve_log_write(l, hist.p, hist.n, NULL), 0);
    const uint64_t grown = pd_reserve_log_bytes(l);
    assert_true(pd_reserve_log_compaction_due(l, 1024));
    assert_false(pd_reserve_log_compaction_due(l, grown));
    dump d;
    dump_table(t, &d);
    assert_int_equal(pd_reserve_log_rewrite(l, d.b.p, d.b.n, err, sizeof err), 0);
    assert_int_equal(pd_reserve_log_bytes(l), 8 + d.b.n);
    assert_true(pd_reserve_log_bytes(l) < grown);
    assert_false(pd_reserve_log_compaction_due(l, 1024));
    /* More changes appended to the new file. */
    hist.n = 0;
    random_table(t, 100);
    assert_int_equal(pd_reserve_log_write(l, hist.p, hist.n, NULL), 0);
    pd_reserve_log_close(l);
    pd_reserve_destroy(file_table);
    file_table = pd_reserve_create(NULL);
    l = pd_reserve_log_open(dir, 1, file_record, NULL, &st, err, sizeof err);
    assert_non_null(l);
    assert_int_equal(st.truncated_bytes, 0);
    /* The changes after the dump are replayed as ops: a maintain among
     * them moved the live table's mark, which no op carries. */
    skip_maintained = 1;
    assert_same_table(t, file_table, 0);
    skip_maintained = 0;
    pd_reserve_log_close(l);
    char path[600];
    snprintf(path, sizeof path, "%s/reservations.log", dir);
    unlink(path);
    rmdir(dir);
    pd_reserve_log_buf_free(&hist);
    pd_reserve_log_buf_free(&d.b);
    pd_reserve_destroy(t);
    pd_reserve_destroy(file_table);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_export_replay_random),
        cmocka_unit_test(test_oplog_replay_random),
        cmocka_unit_test(test_empty_agent_collect_logged),
        cmocka_unit_test(test_clock_restart_replays),
        cmocka_unit_test(test_cut_mark_is_exported),
        cmocka_unit_test(test_old_dump_of_an_empty_table),
        cmocka_unit_test(test_restore_refuses),
        cmocka_unit_test(test_file_rewrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
