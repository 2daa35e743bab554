/*
 * pd_route.c - the route graph and its Dijkstra search (see pd_route.h).
 *
 * The open list is a binary heap with lazy deletion: an improved label pushes
 * a new entry and stale ones are skipped when popped. Route graphs are small
 * and sparse enough that decrease-key would buy nothing but code.
 */
#include "pd_route.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Edges a new graph has room for before its first growth. */
#define PD_ROUTE_INITIAL_EDGES 64

/* Marks "no predecessor" in the search's arrays. */
#define PD__NONE UINT32_MAX

int pd_route_graph_init(pd_route_graph *g, uint32_t n_nodes)
{
    memset(g, 0, sizeof *g);
    if (n_nodes == 0 || n_nodes > PD_ROUTE_MAX_NODES)
        return -1;
    g->n_nodes = n_nodes;
    return 0;
}

void pd_route_graph_free(pd_route_graph *g)
{
    if (!g)
        return;
    free(g->edges);
    free(g->first);
    free(g->out_edges);
    memset(g, 0, sizeof *g);
}

pd_status pd_route_graph_add_edge(pd_route_graph *g, uint32_t from, uint32_t to, double cost)
{
    if (!g || from >= g->n_nodes || to >= g->n_nodes || !isfinite(cost) || cost < 0.0)
        return PD_INVALID_ARGUMENT;
    /* Edge indices travel as uint32_t in paths and the adjacency. */
    if (g->n_edges >= UINT32_MAX)
        return PD_INTERNAL;
    if (g->n_edges == g->cap_edges) {
        size_t cap = g->cap_edges ? g->cap_edges * 2 : PD_ROUTE_INITIAL_EDGES;
        pd_route_edge *e = realloc(g->edges, cap * sizeof *e);
        if (!e)
            return PD_INTERNAL;
        g->edges = e;
        g->cap_edges = cap;
    }
    g->edges[g->n_edges++] = (pd_route_edge){ from, to, cost };
    /* The adjacency no longer covers every edge. */
    free(g->first);
    free(g->out_edges);
    g->first = NULL;
    g->out_edges = NULL;
    return PD_OK;
}

pd_status pd_route_graph_prepare(pd_route_graph *g)
{
    if (!g || g->n_nodes == 0)
        return PD_INVALID_ARGUMENT;
    free(g->first);
    free(g->out_edges);
    g->first = calloc((size_t)g->n_nodes + 1, sizeof *g->first);
    g->out_edges = malloc((g->n_edges ? g->n_edges : 1) * sizeof *g->out_edges);
    if (!g->first || !g->out_edges) {
        free(g->first);
        free(g->out_edges);
        g->first = NULL;
        g->out_edges = NULL;
        return PD_INTERNAL;
    }
    /* Counting sort by source node; it is stable, so each node's edges stay
     * in insertion order. */
    for (size_t i = 0; i < g->n_edges; i++)
        g->first[g->edges[i].from + 1]++;
    for (uint32_t v = 0; v < g->n_nodes; v++)
        g->first[v + 1] += g->first[v];
    uint32_t *fill = malloc((size_t)g->n_nodes * sizeof *fill);
    if (!fill) {
        free(g->first);
        free(g->out_edges);
        g->first = NULL;
        g->out_edges = NULL;
        return PD_INTERNAL;
    }
    memcpy(fill, g->first, (size_t)g->n_nodes * sizeof *fill);
    for (size_t i = 0; i < g->n_edges; i++)
        g->out_edges[fill[g->edges[i].from]++] = (uint32_t)i;
    free(fill);
    return PD_OK;
}

/* One open-list entry: the label (cost, hops) a node had when pushed. */
typedef struct pd__open {
    double cost;
    uint32_t hops;
    uint32_t node;
} pd__open;

static int pd__open_before(const pd__open *a, const pd__open *b)
{
    if (a->cost != b->cost)
        return a->cost < b->cost;
    if (a->hops != b->hops)
        return a->hops < b->hops;
    return a->node < b->node;
}

static void pd__heap_push(pd__open *h, size_t *n, pd__open e)
{
    size_t i = (*n)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!pd__open_before(&e, &h[parent]))
            break;
        h[i] = h[parent];
        i = parent;
    }
    h[i] = e;
}

static pd__open pd__heap_pop(pd__open *h, size_t *n)
{
    pd__open top = h[0];
    pd__open last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n)
            break;
        if (c + 1 < *n && pd__open_before(&h[c + 1], &h[c]))
            c++;
        if (!pd__open_before(&h[c], &last))
            break;
        h[i] = h[c];
        i = c;
    }
    if (*n > 0)
        h[i] = last;
    return top;
}

/* Per-node search state. */
typedef struct pd__label {
    double cost;
    uint32_t hops;
    uint32_t pred;        /* predecessor node, PD__NONE for none */
    uint32_t pred_edge;   /* edge index from pred */
    uint8_t reached;
    uint8_t settled;
} pd__label;

/* Does reaching v over edge e from u, with label (cost, hops), beat v's
 * current label under the tie rule of pd_route.h? */
static int pd__improves(const pd__label *v, double cost, uint32_t hops, uint32_t u, uint32_t e)
{
    if (!v->reached || cost < v->cost)
        return 1;
    if (cost > v->cost)
        return 0;
    if (hops != v->hops)
        return hops < v->hops;
    if (u != v->pred)
        return u < v->pred;
    return e < v->pred_edge;
}

pd_status pd_route_shortest(const pd_route_graph *g, uint32_t source, uint32_t target,
                            uint32_t *edges_out, size_t cap, pd_route_path *path)
{
    if (path) {
        path->cost = 0.0;
        path->n_edges = 0;
    }
    if (!g || !path || g->n_nodes == 0 || !g->first || source >= g->n_nodes ||
        target >= g->n_nodes || (cap > 0 && !edges_out))
        return PD_INVALID_ARGUMENT;

    pd__label *lab = calloc(g->n_nodes, sizeof *lab);
    /* Every push follows an improvement through one edge, plus the source. */
    pd__open *heap = malloc((g->n_edges + 1) * sizeof *heap);
    if (!lab || !heap) {
        free(lab);
        free(heap);
        return PD_INTERNAL;
    }
    size_t n_open = 0;
    lab[source] = (pd__label){ 0.0, 0, PD__NONE, PD__NONE, 1, 0 };
    pd__heap_push(heap, &n_open, (pd__open){ 0.0, 0, source });

    while (n_open > 0) {
        pd__open top = pd__heap_pop(heap, &n_open);
        pd__label *u = &lab[top.node];
        if (u->settled || top.cost != u->cost || top.hops != u->hops)
            continue;
        u->settled = 1;
        if (top.node == target)
            break;
        for (uint32_t k = g->first[top.node]; k < g->first[top.node + 1]; k++) {
            uint32_t ei = g->out_edges[k];
            const pd_route_edge *e = &g->edges[ei];
            pd__label *v = &lab[e->to];
            if (v->settled)
                continue;
            double cost = u->cost + e->cost;
            uint32_t hops = u->hops + 1;
            if (!pd__improves(v, cost, hops, top.node, ei))
                continue;
            int label_changed = !v->reached || cost != v->cost || hops != v->hops;
            v->cost = cost;
            v->hops = hops;
            v->pred = top.node;
            v->pred_edge = ei;
            v->reached = 1;
            /* A new predecessor with the same label needs no new entry. */
            if (label_changed)
                pd__heap_push(heap, &n_open, (pd__open){ cost, hops, e->to });
        }
    }

    pd_status st = PD_NO_PATH;
    if (lab[target].settled) {
        size_t n = lab[target].hops;
        path->cost = lab[target].cost;
        path->n_edges = n;
        if (n > cap) {
            st = PD_BUFFER_TOO_SMALL;
        } else {
            uint32_t v = target;
            for (size_t i = n; i > 0; i--) {
                edges_out[i - 1] = lab[v].pred_edge;
                v = lab[v].pred;
            }
            st = PD_OK;
        }
    }
    free(lab);
    free(heap);
    return st;
}
