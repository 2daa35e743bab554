/*
 * pd_route.h - a small directed graph with non-negative edge costs and the
 * Dijkstra search the cross-scene route planner runs over it.
 *
 * The planner (scene/pd_world.h) turns portals, per-scene route tables and a
 * query's start and goal legs into one of these graphs: a few hundred nodes
 * at most, so clarity beats cleverness here. The graph lives in core because
 * it is pure data and arithmetic, and so that it can be tested on hand-made
 * graphs without scenes.
 *
 * Ties are broken deterministically, whatever order the edges were added in:
 * among paths of equal cost the one with fewer edges wins, and among those
 * each node keeps the predecessor with the lowest node id. (cost, edges) is
 * compared lexicographically, which Dijkstra handles exactly because both
 * parts only grow along a path.
 *
 * Lifetime: pd_route_graph_init on a caller-owned struct, edges added with
 * pd_route_graph_add_edge, pd_route_graph_prepare once they are all in;
 * pd_route_graph_free releases the arrays (safe on a zeroed graph). A
 * prepared graph may be searched any number of times and by several threads
 * at once: the search keeps its state in arrays of its own.
 */
#ifndef PD_ROUTE_H
#define PD_ROUTE_H

#include <stddef.h>
#include <stdint.h>

#include "pd_status.h"

/* Most nodes one graph may have: a route graph has two nodes per portal plus
 * the start and goal, so this is far above any world a config describes, and
 * it keeps node ids and counts inside uint32_t. */
#define PD_ROUTE_MAX_NODES (1u << 24)

typedef struct pd_route_edge {
    uint32_t from;
    uint32_t to;
    double cost;        /* finite, >= 0 */
} pd_route_edge;

typedef struct pd_route_graph {
    uint32_t n_nodes;
    pd_route_edge *edges;   /* in insertion order: an edge's index is its identity */
    size_t n_edges;
    size_t cap_edges;
    /* Adjacency built by pd_route_graph_prepare (CSR: out_edges[first[v] ..
     * first[v+1]) are the indices of v's outgoing edges, in insertion order).
     * Adding an edge drops it until the next prepare. */
    uint32_t *first;
    uint32_t *out_edges;
} pd_route_graph;

/* Returns 0, or -1 when n_nodes is 0 or above PD_ROUTE_MAX_NODES. */
int pd_route_graph_init(pd_route_graph *g, uint32_t n_nodes);
void pd_route_graph_free(pd_route_graph *g);

/* Appends from -> to. Returns PD_OK, PD_INVALID_ARGUMENT (a node id out of
 * range, a negative or non-finite cost) or PD_INTERNAL (allocation). */
pd_status pd_route_graph_add_edge(pd_route_graph *g, uint32_t from, uint32_t to, double cost);

/* Builds the adjacency the search walks; call it after the last edge and
 * before searching. Returns PD_OK or PD_INTERNAL (allocation). */
pd_status pd_route_graph_prepare(pd_route_graph *g);

typedef struct pd_route_path {
    double cost;        /* total; 0 when source == target */
    size_t n_edges;     /* edges on the path (may exceed the caller's capacity) */
} pd_route_path;

/*
 * Cheapest path from source to target. On PD_OK the indices of the path's
 * edges, in travel order, are in edges_out[0..path->n_edges). Returns PD_OK,
 * PD_NO_PATH, PD_INVALID_ARGUMENT (node out of range, graph not prepared),
 * PD_BUFFER_TOO_SMALL (path->n_edges says how many are needed; the search
 * must then be repeated with a larger buffer) or PD_INTERNAL (allocation).
 * edges_out may be NULL when cap is 0.
 */
pd_status pd_route_shortest(const pd_route_graph *g, uint32_t source, uint32_t target,
                            uint32_t *edges_out, size_t cap, pd_route_path *path);

#endif
