/*
 * ref_dijkstra.h - the tests' own shortest-path reference: a plain Dijkstra
 * written from the movement rules in pd_search.h (not from pd_search.c),
 * giving the cost from one start to every cell of a small map. Shared by
 * test_search_reference.c (A* against it) and test_targets.c (ranges and
 * goal sets against it). Include after <cmocka.h>; needs CORE_SQRT2
 * (core_check.h).
 */
#ifndef REF_DIJKSTRA_H
#define REF_DIJKSTRA_H

#include <stdint.h>
#include <stdlib.h>

#define REF_UNREACHED (-1.0)

/* The test's own copy of a map: w*h cost bytes, 0 = blocked. */
typedef struct ref_map {
    int32_t w, h;
    uint8_t *cells;
} ref_map;

static int ref_passable(const ref_map *m, int32_t x, int32_t y)
{
    return x >= 0 && y >= 0 && x < m->w && y < m->h && m->cells[y * m->w + x] != 0;
}

/* ------------------------------------------------- reference Dijkstra */

typedef struct ref_item {
    double d;
    int32_t cell;
} ref_item;

/* A binary heap with lazy deletion: stale items are skipped when popped. */
typedef struct ref_queue {
    ref_item *items;
    size_t size, cap;
} ref_queue;

static void ref_queue_push(ref_queue *q, double d, int32_t cell)
{
    if (q->size == q->cap) {
        q->cap = q->cap ? q->cap * 2 : 64;
        q->items = realloc(q->items, q->cap * sizeof *q->items);
        assert_non_null(q->items);
    }
    size_t i = q->size++;
    while (i > 0 && q->items[(i - 1) / 2].d > d) {
        q->items[i] = q->items[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->items[i].d = d;
    q->items[i].cell = cell;
}

static ref_item ref_queue_pop(ref_queue *q)
{
    ref_item top = q->items[0];
    ref_item last = q->items[--q->size];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= q->size)
            break;
        if (c + 1 < q->size && q->items[c + 1].d < q->items[c].d)
            c++;
        if (q->items[c].d >= last.d)
            break;
        q->items[i] = q->items[c];
        i = c;
    }
    if (q->size > 0)
        q->items[i] = last;
    return top;
}

/* Fills dist[] (w*h) with shortest costs from (sx, sy); REF_UNREACHED where
 * none. Moves: the 8 (or 4) neighbours; a diagonal needs both cells it
 * passes between to be passable; a move costs its length (1 or sqrt 2)
 * times the cost of the cell it enters. */
static void ref_dijkstra(const ref_map *m, int conn, int32_t sx, int32_t sy, double *dist)
{
    size_t n = (size_t)m->w * (size_t)m->h;
    for (size_t i = 0; i < n; i++)
        dist[i] = REF_UNREACHED;
    char *done = calloc(n, 1);
    assert_non_null(done);
    ref_queue q = { NULL, 0, 0 };
    dist[sy * m->w + sx] = 0.0;
    ref_queue_push(&q, 0.0, sy * m->w + sx);
    while (q.size > 0) {
        ref_item it = ref_queue_pop(&q);
        if (done[it.cell])
            continue;
        done[it.cell] = 1;
        int32_t x = it.cell % m->w, y = it.cell / m->w;
        for (int32_t dy = -1; dy <= 1; dy++) {
            for (int32_t dx = -1; dx <= 1; dx++) {
                if (dx == 0 && dy == 0)
                    continue;
                int diagonal = dx != 0 && dy != 0;
                if (diagonal && conn == 4)
                    continue;
                int32_t nx = x + dx, ny = y + dy;
                if (!ref_passable(m, nx, ny))
                    continue;
                if (diagonal && (!ref_passable(m, x + dx, y) || !ref_passable(m, x, y + dy)))
                    continue;
                double step = (diagonal ? CORE_SQRT2 : 1.0) * m->cells[ny * m->w + nx];
                double nd = it.d + step;
                int32_t nc = ny * m->w + nx;
                if (!done[nc] && (dist[nc] < 0 || nd < dist[nc])) {
                    dist[nc] = nd;
                    ref_queue_push(&q, nd, nc);
                }
            }
        }
    }
    free(q.items);
    free(done);
}

#endif
