/*
 * test_nodepool.c - the lazy node pool (pd_nodepool.h) and the search
 * contexts built on it: blocks appear on first touch and nowhere else, the
 * generation wraps without leaving stale records, trimming gives slabs back
 * newest first and keeps the rest intact, and A* and jump point search on a
 * context that is reused, trimmed and grown again answer exactly as a fresh
 * context per search (the old behaviour: arrays cleared for every grid).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core_check.h"
#include "pd_jps.h"
#include "pd_nodepool.h"

/* A record laid out as the searches lay theirs out: the stamp is part of it. */
typedef struct rec {
    double g;
    uint32_t gen;
    uint32_t tag;
} rec;
#define BC PD_NODEPOOL_BLOCK_CELLS
#define BLOCK_BYTES (BC * sizeof(rec))

static rec *rec_of(pd_nodepool *p, uint32_t cell)
{
    unsigned char *b = pd_nodepool_block(p, cell);
    assert_non_null(b);
    return (rec *)(void *)b + (cell & (PD_NODEPOOL_BLOCK_CELLS - 1));
}

/* Nothing before a search; a block per run of BC cells touched, zeroed,
 * shared by the cells of that run; untouched runs stay unallocated. */
static void test_blocks_on_first_touch(void **state)
{
    (void)state;
    pd_nodepool p;
    pd_nodepool_init(&p, BLOCK_BYTES);
    assert_int_equal(pd_nodepool_footprint(&p), 0);
    assert_int_equal(pd_nodepool_begin(&p, 1000000), 0);
    assert_int_equal(p.gen, 1);
    /* The directory only: one pointer per BC cells, no slab yet. */
    assert_int_equal(pd_nodepool_footprint(&p), (1000000 + BC - 1) / BC * sizeof(void *));
    assert_null(pd_nodepool_peek(&p, 5000));

    rec *a = rec_of(&p, 5000);
    assert_int_equal(a->gen, 0);
    assert_true(a->g == 0.0);
    a->gen = p.gen;
    assert_ptr_equal(pd_nodepool_peek(&p, 5000 / BC * BC), pd_nodepool_peek(&p, 5000));
    assert_ptr_equal(rec_of(&p, 5000), a);
    assert_null(pd_nodepool_peek(&p, 5000 / BC * BC + BC));
    assert_null(pd_nodepool_peek(&p, 999999));
    assert_int_equal(p.n_slabs, 1);

    /* Enough blocks to need a second slab. */
    for (uint32_t i = 0; i <= p.blocks_per_slab; i++)
        rec_of(&p, 100000 + i * BC)->gen = p.gen;
    assert_int_equal(p.n_slabs, 2);
    assert_ptr_equal(rec_of(&p, 5000), a);
    assert_int_equal(a->gen, 1);
    pd_nodepool_free(&p);
    assert_int_equal(pd_nodepool_footprint(&p), 0);
}

/* At the wrap every block is zeroed once and the generation restarts at 1,
 * so a record stamped 2^32 searches ago cannot pass for a current one. */
static void test_generation_wraps(void **state)
{
    (void)state;
    pd_nodepool p;
    pd_nodepool_init(&p, BLOCK_BYTES);
    p.gen = UINT32_MAX - 1;
    assert_int_equal(pd_nodepool_begin(&p, 4096), 0);
    assert_int_equal(p.gen, UINT32_MAX);
    rec *r = rec_of(&p, 70);
    *r = (rec){ .g = 3.5, .gen = p.gen, .tag = 7 };
    /* A record stamped 1 long ago (before the wrap) would match gen 1. */
    rec *old = rec_of(&p, 4000);
    old->gen = 1;
    unsigned char *block = pd_nodepool_block(&p, 70);

    assert_int_equal(pd_nodepool_begin(&p, 4096), 0);
    assert_int_equal(p.gen, 1);
    /* Same blocks, every record unseen. */
    assert_ptr_equal(pd_nodepool_block(&p, 70), block);
    assert_int_equal(r->gen, 0);
    assert_int_equal(r->tag, 0);
    assert_int_equal(old->gen, 0);
    assert_int_equal(pd_nodepool_begin(&p, 4096), 0);
    assert_int_equal(p.gen, 2);
    pd_nodepool_free(&p);
}

/* Trimming hands back the newest slabs first and clears exactly their
 * directory entries; older blocks keep their records; trimming to 0 leaves
 * nothing, and the pool works again after it. */
static void test_trim_gives_back(void **state)
{
    (void)state;
    pd_nodepool p;
    pd_nodepool_init(&p, BLOCK_BYTES);
    const size_t cells = BC * 4096u;
    assert_int_equal(pd_nodepool_begin(&p, cells), 0);
    for (uint32_t b = 0; b < 4096; b++)
        rec_of(&p, b * BC)->g = (double)b;
    const size_t slabs = p.n_slabs;
    assert_true(slabs >= 3);
    const size_t full = pd_nodepool_footprint(&p);

    /* Keep room for one slab fewer: exactly the newest goes. */
    pd_nodepool_trim(&p, full - 1);
    assert_int_equal(p.n_slabs, slabs - 1);
    assert_true(pd_nodepool_footprint(&p) <= full - 1);
    for (uint32_t b = 0; b < 4096; b++) {
        const rec *r = (const rec *)(const void *)pd_nodepool_peek(&p, b * BC);
        if (b < (slabs - 1) * p.blocks_per_slab) {
            assert_non_null(r);
            assert_true(r->g == (double)b);
        } else {
            assert_null(r);
        }
    }
    /* A trim within the footprint does nothing. */
    pd_nodepool_trim(&p, full);
    assert_int_equal(p.n_slabs, slabs - 1);

    /* A block handed back with its slab comes back zeroed on its next
     * touch; after a full trim the pool starts over. */
    assert_true(rec_of(&p, 4095u * BC)->g == 0.0);
    assert_int_equal(p.n_slabs, slabs);
    pd_nodepool_trim(&p, 0);
    assert_int_equal(pd_nodepool_footprint(&p), 0);
    assert_int_equal(pd_nodepool_begin(&p, cells), 0);
    assert_null(pd_nodepool_peek(&p, BC));
    assert_true(rec_of(&p, BC)->g == 0.0);
    pd_nodepool_free(&p);
}

/* Random grids of several sizes; one reused context that is trimmed to
 * various sizes between searches answers exactly as a fresh context per
 * search: same status, cost, path, expansions and pushes, for A* (plain,
 * 4-connected, with blockers) and jump point search. */
#define REUSE_QUERIES 400
#define REUSE_PATH_CAP 8192

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static pd_grid *random_grid(uint64_t *rng, int32_t w, int32_t h)
{
    pd_grid *g = core_open_grid(w, h);
    for (int32_t y = 0; y < h; y++)
        for (int32_t x = 0; x < w; x++)
            if (rng_next(rng) % 100 < 25)
                pd_grid_set(g, x, y, PD_CELL_BLOCKED);
    return g;
}

static pd_point random_open(uint64_t *rng, const pd_grid *g)
{
    for (;;) {
        pd_point p = { (int32_t)(rng_next(rng) % (uint64_t)g->width), (int32_t)(rng_next(rng) % (uint64_t)g->height) };
        if (pd_grid_get(g, p.x, p.y) != PD_CELL_BLOCKED)
            return p;
    }
}

static void assert_same_answer(pd_status st_a, const pd_search_metrics *a, const pd_point *pa, pd_status st_b,
                               const pd_search_metrics *b, const pd_point *pb, int query)
{
    if (st_a != st_b)
        fail_msg("query %d: reused %s, fresh %s", query, pd_status_name(st_a), pd_status_name(st_b));
    if (a->cost != b->cost || a->expanded != b->expanded || a->generated != b->generated ||
        a->path_len != b->path_len)
        fail_msg("query %d: reused cost %.9f exp %llu gen %llu len %zu, fresh %.9f %llu %llu %zu", query, a->cost,
                 (unsigned long long)a->expanded, (unsigned long long)a->generated, a->path_len, b->cost,
                 (unsigned long long)b->expanded, (unsigned long long)b->generated, b->path_len);
    if (st_a == PD_OK)
        assert_memory_equal(pa, pb, a->path_len * sizeof *pa);
}

static void test_reused_equals_fresh(void **state)
{
    (void)state;
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    static const int32_t sides[][2] = { { 7, 5 }, { 300, 41 }, { 64, 64 }, { 129, 257 } };
    pd_grid *grids[4];
    for (size_t i = 0; i < 4; i++)
        grids[i] = random_grid(&rng, sides[i][0], sides[i][1]);
    pd_search_ctx *reused = pd_search_ctx_create();
    pd_jps_ctx *reused_jps = pd_jps_ctx_create();
    assert_non_null(reused);
    assert_non_null(reused_jps);
    pd_point *pa = malloc(REUSE_PATH_CAP * sizeof *pa), *pb = malloc(REUSE_PATH_CAP * sizeof *pb);
    assert_non_null(pa);
    assert_non_null(pb);
    static const size_t keeps[] = { 0, 4096, 200000, SIZE_MAX };

    for (int q = 0; q < REUSE_QUERIES; q++) {
        const pd_grid *g = grids[rng_next(&rng) % 4];
        pd_point blockers[3];
        pd_search_params p = { .start = random_open(&rng, g), .goal = random_open(&rng, g) };
        const int kind = q % 4; /* A* 8-connected, 4-connected, with blockers; JPS */
        p.connectivity = kind == 1 ? PD_CONNECT_4 : PD_CONNECT_8;
        if (kind == 2) {
            for (size_t i = 0; i < 3; i++)
                blockers[i] = random_open(&rng, g);
            p.blockers = blockers;
            p.n_blockers = 3;
        }
        pd_search_metrics ma, mb;
        pd_status sa, sb;
        if (kind == 3) {
            pd_jps_ctx *fresh = pd_jps_ctx_create();
            sa = pd_search_jps(reused_jps, g, &p, pa, REUSE_PATH_CAP, &ma);
            sb = pd_search_jps(fresh, g, &p, pb, REUSE_PATH_CAP, &mb);
            pd_jps_ctx_destroy(fresh);
            pd_jps_ctx_trim(reused_jps, keeps[rng_next(&rng) % 4]);
        } else {
            pd_search_ctx *fresh = pd_search_ctx_create();
            sa = pd_search_astar(reused, g, &p, pa, REUSE_PATH_CAP, &ma);
            sb = pd_search_astar(fresh, g, &p, pb, REUSE_PATH_CAP, &mb);
            pd_search_ctx_destroy(fresh);
            pd_search_ctx_trim(reused, keeps[rng_next(&rng) % 4]);
        }
        assert_same_answer(sa, &ma, pa, sb, &mb, pb, q);
    }
    free(pa);
    free(pb);
    pd_search_ctx_destroy(reused);
    pd_jps_ctx_destroy(reused_jps);
    for (size_t i = 0; i < 4; i++)
        pd_grid_destroy(grids[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_on_first_touch),
        cmocka_unit_test(test_generation_wraps),
        cmocka_unit_test(test_trim_gives_back),
        cmocka_unit_test(test_reused_equals_fresh),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
