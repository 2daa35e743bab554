/*
 * test_route.c - the route graph's Dijkstra (core/pd_route.h) on hand-made
 * graphs: one-way edges, unreachable nodes, zero-cost edges, the documented
 * tie rule (fewer edges, then the lower predecessor id, whatever the order
 * the edges were added in), argument checks and the buffer protocol. A last
 * test compares costs on random graphs with Bellman-Ford written here.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "pd_route.h"
#include "test_rng.h"

#define ROUTE_RANDOM_GRAPHS 200
#define ROUTE_RANDOM_MAX_NODES 24

/* Builds a prepared graph from {from, to, cost} triples. */
static void build(pd_route_graph *g, uint32_t n, const pd_route_edge *edges, size_t n_edges)
{
    assert_int_equal(pd_route_graph_init(g, n), 0);
    for (size_t i = 0; i < n_edges; i++)
        assert_int_equal(pd_route_graph_add_edge(g, edges[i].from, edges[i].to, edges[i].cost),
                         PD_OK);
    assert_int_equal(pd_route_graph_prepare(g), PD_OK);
}

/* Runs a search and returns the node sequence it implies in nodes[]. */
static pd_status route_nodes(const pd_route_graph *g, uint32_t s, uint32_t t, uint32_t *nodes,
                             size_t *n_nodes, double *cost)
{
    uint32_t edges[64];
    pd_route_path p;
    pd_status st = pd_route_shortest(g, s, t, edges, 64, &p);
    *cost = p.cost;
    *n_nodes = 0;
    if (st != PD_OK)
        return st;
    nodes[(*n_nodes)++] = s;
    for (size_t i = 0; i < p.n_edges; i++) {
        assert_int_equal(g->edges[edges[i]].from, nodes[*n_nodes - 1]);
        nodes[(*n_nodes)++] = g->edges[edges[i]].to;
    }
    assert_int_equal(nodes[*n_nodes - 1], t);
    return st;
}

static void test_shortcut_and_chain(void **state)
{
    (void)state;
    /* 0 -> 1 -> 2 -> 3 costs 3; 0 -> 3 directly costs 5; 0 -> 2 costs 1.5. */
    const pd_route_edge e[] = {
        { 0, 1, 1.0 }, { 1, 2, 1.0 }, { 2, 3, 1.0 }, { 0, 3, 5.0 }, { 0, 2, 1.5 },
    };
    pd_route_graph g;
    build(&g, 4, e, 5);
    uint32_t nodes[8];
    size_t n;
    double cost;
    assert_int_equal(route_nodes(&g, 0, 3, nodes, &n, &cost), PD_OK);
    assert_true(cost == 2.5);
    assert_int_equal(n, 3);
    assert_int_equal(nodes[1], 2);
    assert_int_equal(route_nodes(&g, 2, 2, nodes, &n, &cost), PD_OK);
    assert_true(cost == 0.0);
    assert_int_equal(n, 1);
    pd_route_graph_free(&g);
}

static void test_one_way_and_unreachable(void **state)
{
    (void)state;
    /* 0 -> 1 one way; 1 <-> 2; 3 is isolated; 2 -> 0 only through a long edge. */
    const pd_route_edge e[] = {
        { 0, 1, 2.0 }, { 1, 2, 1.0 }, { 2, 1, 1.0 }, { 2, 0, 10.0 },
    };
    pd_route_graph g;
    build(&g, 4, e, 4);
    uint32_t nodes[8];
    size_t n;
    double cost;
    assert_int_equal(route_nodes(&g, 0, 2, nodes, &n, &cost), PD_OK);
    assert_true(cost == 3.0);
    /* Back from 1 to 0 the one-way edge is unusable: the long way is taken. */
    assert_int_equal(route_nodes(&g, 1, 0, nodes, &n, &cost), PD_OK);
    assert_true(cost == 11.0);
    assert_int_equal(n, 3);
    assert_int_equal(route_nodes(&g, 0, 3, nodes, &n, &cost), PD_NO_PATH);
    assert_int_equal(route_nodes(&g, 3, 0, nodes, &n, &cost), PD_NO_PATH);
    pd_route_graph_free(&g);
}

/* Four equal-cost ways from 0 to 5; the rule picks one regardless of order. */
static void test_ties_are_deterministic(void **state)
{
    (void)state;
    const pd_route_edge e[] = {
        { 0, 5, 4.0 },                            /* one edge, cost 4: fewest edges */
        { 0, 3, 2.0 }, { 3, 5, 2.0 },             /* two edges via 3 */
        { 0, 1, 2.0 }, { 1, 5, 2.0 },             /* two edges via 1 */
        { 0, 2, 1.0 }, { 2, 4, 1.0 }, { 4, 5, 2.0 }, /* three edges */
    };
    const size_t n_e = sizeof e / sizeof e[0];
    uint32_t nodes[8];
    size_t n;
    double cost;

    /* With the direct edge, it wins on edge count, in any insertion order. */
    for (int reversed = 0; reversed < 2; reversed++) {
        pd_route_edge order[8];
        for (size_t i = 0; i < n_e; i++)
            order[i] = e[reversed ? n_e - 1 - i : i];
        pd_route_graph g;
        build(&g, 6, order, n_e);
        assert_int_equal(route_nodes(&g, 0, 5, nodes, &n, &cost), PD_OK);
        assert_true(cost == 4.0);
        assert_int_equal(n, 2);
        pd_route_graph_free(&g);
    }
    /* Without it, the two-edge ways tie and the lower predecessor (1) wins. */
    for (int reversed = 0; reversed < 2; reversed++) {
        pd_route_edge order[8];
        for (size_t i = 1; i < n_e; i++)
            order[i - 1] = e[reversed ? n_e - i : i];
        pd_route_graph g;
        build(&g, 6, order, n_e - 1);
        assert_int_equal(route_nodes(&g, 0, 5, nodes, &n, &cost), PD_OK);
        assert_true(cost == 4.0);
        assert_int_equal(n, 3);
        assert_int_equal(nodes[1], 1);
        pd_route_graph_free(&g);
    }
    /* Parallel edges of equal cost: the first added is the one reported. */
    const pd_route_edge par[] = { { 0, 1, 1.0 }, { 0, 1, 1.0 } };
    pd_route_graph g;
    build(&g, 2, par, 2);
    uint32_t edge;
    pd_route_path p;
    assert_int_equal(pd_route_shortest(&g, 0, 1, &edge, 1, &p), PD_OK);
    assert_int_equal(edge, 0);
    pd_route_graph_free(&g);
}

static void test_zero_cost_edges(void **state)
{
    (void)state;
    /* A zero-cost cycle must not loop, and a zero-cost chain is free. */
    const pd_route_edge e[] = {
        { 0, 1, 0.0 }, { 1, 0, 0.0 }, { 1, 2, 0.0 }, { 2, 1, 0.0 }, { 2, 3, 0.5 },
    };
    pd_route_graph g;
    build(&g, 4, e, 5);
    uint32_t nodes[8];
    size_t n;
    double cost;
    assert_int_equal(route_nodes(&g, 0, 3, nodes, &n, &cost), PD_OK);
    assert_true(cost == 0.5);
    assert_int_equal(n, 4);
    pd_route_graph_free(&g);
}

static void test_arguments_and_buffer(void **state)
{
    (void)state;
    pd_route_graph g;
    assert_int_equal(pd_route_graph_init(&g, 0), -1);
    assert_int_equal(pd_route_graph_init(&g, PD_ROUTE_MAX_NODES + 1), -1);
    assert_int_equal(pd_route_graph_init(&g, 3), 0);
    assert_int_equal(pd_route_graph_add_edge(&g, 0, 3, 1.0), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_graph_add_edge(&g, 0, 1, -1.0), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_graph_add_edge(&g, 0, 1, NAN), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_graph_add_edge(&g, 0, 1, INFINITY), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_graph_add_edge(&g, 0, 1, 1.0), PD_OK);
    assert_int_equal(pd_route_graph_add_edge(&g, 1, 2, 1.0), PD_OK);
    pd_route_path p;
    /* Not prepared yet. */
    assert_int_equal(pd_route_shortest(&g, 0, 2, NULL, 0, &p), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_graph_prepare(&g), PD_OK);
    assert_int_equal(pd_route_shortest(&g, 0, 3, NULL, 0, &p), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_shortest(&g, 0, 2, NULL, 0, NULL), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_shortest(&g, 0, 2, NULL, 1, &p), PD_INVALID_ARGUMENT);
    /* Too small: the needed count comes back, then a retry fits. */
    uint32_t one[1], two[2];
    assert_int_equal(pd_route_shortest(&g, 0, 2, one, 1, &p), PD_BUFFER_TOO_SMALL);
    assert_int_equal(p.n_edges, 2);
    assert_true(p.cost == 2.0);
    assert_int_equal(pd_route_shortest(&g, 0, 2, two, 2, &p), PD_OK);
    assert_int_equal(two[0], 0);
    assert_int_equal(two[1], 1);
    /* Adding an edge drops the adjacency until the next prepare. */
    assert_int_equal(pd_route_graph_add_edge(&g, 0, 2, 0.5), PD_OK);
    assert_int_equal(pd_route_shortest(&g, 0, 2, two, 2, &p), PD_INVALID_ARGUMENT);
    assert_int_equal(pd_route_graph_prepare(&g), PD_OK);
    assert_int_equal(pd_route_shortest(&g, 0, 2, two, 2, &p), PD_OK);
    assert_true(p.cost == 0.5);
    assert_int_equal(p.n_edges, 1);
    pd_route_graph_free(&g);
    pd_route_graph_free(&g);   /* safe on a freed (zeroed) graph */
}

/* Random sparse graphs (one-way edges, zero and fractional costs): the cost
 * must equal Bellman-Ford's, the edges must chain and add up to it. */
static void test_random_against_bellman_ford(void **state)
{
    (void)state;
    uint64_t seed = 0x5eed1234abcdULL;
    for (int round = 0; round < ROUTE_RANDOM_GRAPHS; round++) {
        uint32_t n = 2 + (uint32_t)(rng_next(&seed) % (ROUTE_RANDOM_MAX_NODES - 1));
        size_t m = (size_t)(rng_next(&seed) % (3 * n));
        pd_route_graph g;
        assert_int_equal(pd_route_graph_init(&g, n), 0);
        for (size_t i = 0; i < m; i++) {
            uint32_t a = (uint32_t)(rng_next(&seed) % n), b = (uint32_t)(rng_next(&seed) % n);
            double c = (double)(rng_next(&seed) % 8) * 0.75;
            assert_int_equal(pd_route_graph_add_edge(&g, a, b, c), PD_OK);
        }
        assert_int_equal(pd_route_graph_prepare(&g), PD_OK);
        uint32_t s = (uint32_t)(rng_next(&seed) % n);
        double dist[ROUTE_RANDOM_MAX_NODES];
        for (uint32_t v = 0; v < n; v++)
            dist[v] = INFINITY;
        dist[s] = 0.0;
        for (uint32_t it = 0; it < n; it++) {
            for (size_t i = 0; i < g.n_edges; i++) {
                const pd_route_edge *e = &g.edges[i];
                if (dist[e->from] + e->cost < dist[e->to])
                    dist[e->to] = dist[e->from] + e->cost;
            }
        }
        for (uint32_t t = 0; t < n; t++) {
            uint32_t edges[3 * ROUTE_RANDOM_MAX_NODES];
            pd_route_path p;
            pd_status st = pd_route_shortest(&g, s, t, edges, 3 * ROUTE_RANDOM_MAX_NODES, &p);
            if (isinf(dist[t])) {
                assert_int_equal(st, PD_NO_PATH);
                continue;
            }
            assert_int_equal(st, PD_OK);
            assert_true(fabs(p.cost - dist[t]) < 1e-9);
            double sum = 0.0;
            uint32_t at = s;
            for (size_t i = 0; i < p.n_edges; i++) {
                assert_int_equal(g.edges[edges[i]].from, at);
                sum += g.edges[edges[i]].cost;
                at = g.edges[edges[i]].to;
            }
            assert_int_equal(at, t);
            assert_true(fabs(sum - p.cost) < 1e-9);
        }
        pd_route_graph_free(&g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortcut_and_chain),
        cmocka_unit_test(test_one_way_and_unreachable),
        cmocka_unit_test(test_ties_are_deterministic),
        cmocka_unit_test(test_zero_cost_edges),
        cmocka_unit_test(test_arguments_and_buffer),
        cmocka_unit_test(test_random_against_bellman_ford),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
