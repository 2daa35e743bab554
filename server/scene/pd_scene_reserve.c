/*
 * pd_scene_reserve.c - the per-scene reservation tables beside the registry
 * (see pd_scene_reserve.h): a hash of scene name -> table, each entry
 * reference-counted so that forgetting a scene while a request holds its
 * table frees it once that request lets go.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pd_index.h"
#include "pd_scene_reserve.h"

/* Buckets of the name hash: a chain per bucket. Scenes number in the
 * thousands at most (limits.max_scenes); a fixed table keeps this small. */
#define PD__RESV_BUCKETS 1024u

typedef struct pd_reservations_entry {
    struct pd_reservations_entry *next;
    char name[PD_CONF_MAX_NAME];
    uint64_t incarnation;
    pd_reserve *table;
    pthread_mutex_t lock;      /* held while a request uses the table */
    unsigned refs;             /* guarded by the set's lock: the set's own, plus holders */
    int forgotten;             /* out of the chain; freed at the last release */
    /* Idle expiry (pd_reservations_idle), guarded by the set's lock and
     * written at the unlocks: the last game time a ReservePath brought,
     * when (pd_clock_ns; 0: none yet), when last swept, and whether a
     * sweep left it empty (nothing more to expire until a ReservePath). */
    int64_t heard_game_ms;
    uint64_t heard_ns;
    uint64_t swept_ns;
    int swept_empty;
} pd_reservations_entry;

struct pd_reservations {
    pthread_mutex_t lock;
    pd_reserve_limits limits;
    int64_t ttl_ms;
    int clear_holds;
    pd_reservations_entry *buckets[PD__RESV_BUCKETS];
};

pd_reservations *pd_reservations_create(void)
{
    pd_reservations *set = calloc(1, sizeof *set);
    if (!set)
        return NULL;
    if (pthread_mutex_init(&set->lock, NULL) != 0) {
        free(set);
        return NULL;
    }
    return set;
}

static void pd__entry_free(pd_reservations_entry *e)
{
    pd_reserve_destroy(e->table);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void pd_reservations_destroy(pd_reservations *set)
{
    if (!set)
        return;
    for (size_t b = 0; b < PD__RESV_BUCKETS; b++) {
        pd_reservations_entry *e = set->buckets[b];
        while (e) {
            pd_reservations_entry *next = e->next;
            pd__entry_free(e);
            e = next;
        }
    }
    pthread_mutex_destroy(&set->lock);
    free(set);
}

void pd_reservations_set_limits(pd_reservations *set, const pd_reserve_limits *limits, int64_t ttl_ms,
                                int clear_holds)
{
    pthread_mutex_lock(&set->lock);
    set->limits = *limits;
    set->ttl_ms = ttl_ms;
    set->clear_holds = clear_holds;
    pthread_mutex_unlock(&set->lock);
}

int pd_reservations_clear_holds(pd_reservations *set)
{
    pthread_mutex_lock(&set->lock);
    int on = set->clear_holds;
    pthread_mutex_unlock(&set->lock);
    return on;
}

int64_t pd_reservations_ttl_ms(pd_reservations *set)
{
    pthread_mutex_lock(&set->lock);
    int64_t ttl = set->ttl_ms;
    pthread_mutex_unlock(&set->lock);
    return ttl;
}

static pd_reservations_entry **pd__slot(pd_reservations *set, const char *name)
{
    pd_reservations_entry **at = &set->buckets[pd_index_hash(name) % PD__RESV_BUCKETS];
    while (*at && strcmp((*at)->name, name) != 0)
        at = &(*at)->next;
    return at;
}

/* Unlinks *at; the set's lock is held. */
static void pd__unlink(pd_reservations_entry **at)
{
    pd_reservations_entry *e = *at;
    *at = e->next;
    e->forgotten = 1;
    if (--e->refs == 0)
        pd__entry_free(e);
}

pd_reserve *pd_reservations_lock(pd_reservations *set, const pd_scene *s, int create, pd_reservations_hold *hold)
{
    hold->entry = NULL;
    hold->heard_ns = 0;
    pthread_mutex_lock(&set->lock);
    pd_reservations_entry **at = pd__slot(set, s->name);
    if (*at && (*at)->incarnation != s->incarnation)
        pd__unlink(at); /* the name's earlier scene: its agents are gone with it */
    if (!*at) {
        if (!create) {
            pthread_mutex_unlock(&set->lock);
            return NULL;
        }
        pd_reservations_entry *e = calloc(1, sizeof *e);
        if (!e || !(e->table = pd_reserve_create(&set->limits)) || pthread_mutex_init(&e->lock, NULL) != 0) {
            if (e)
                pd_reserve_destroy(e->table);
            free(e);
            pthread_mutex_unlock(&set->lock);
            return NULL;
        }
        memcpy(e->name, s->name, sizeof e->name); /* both PD_CONF_MAX_NAME, NUL-terminated */
        e->incarnation = s->incarnation;
        e->refs = 1;
        *at = e;
    }
    pd_reservations_entry *e = *at;
    e->refs++;
    pd_reserve_limits limits = set->limits;
    pthread_mutex_unlock(&set->lock);
    pthread_mutex_lock(&e->lock);
    pd_reserve_set_limits(e->table, &limits);
    hold->entry = e;
    return e->table;
}

void pd_reservations_unlock(pd_reservations *set, pd_reservations_hold *hold)
{
    pd_reservations_entry *e = hold->entry;
    if (!e)
        return;
    hold->entry = NULL;
    const int64_t now_game = pd_reserve_now(e->table);
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_lock(&set->lock);
    if (hold->heard_ns) {
        e->heard_game_ms = now_game;
        e->heard_ns = hold->heard_ns;
        e->swept_empty = 0;
    }
    if (--e->refs == 0)
        pd__entry_free(e);
    pthread_mutex_unlock(&set->lock);
}

void pd_reservations_heard(pd_reservations_hold *hold, uint64_t now_ns)
{
    hold->heard_ns = now_ns ? now_ns : 1;
}

/* Real time (ns) a table must go without a ReservePath before the timer
 * sweeps it, and between two sweeps: the sixteenth of the TTL that
 * pd_reserve_maintain waits between its own checks. */
static uint64_t pd__idle_ns(int64_t ttl_ms)
{
    return (uint64_t)(ttl_ms / 16 > 0 ? ttl_ms / 16 : 1) * 1000000u;
}

/* Whether e is due for a sweep at now_ns; the set's lock is held. */
static int pd__sweep_due(const pd_reservations_entry *e, int64_t ttl_ms, uint64_t now_ns)
{
    const uint64_t idle = pd__idle_ns(ttl_ms);
    return ttl_ms > 0 && !e->swept_empty && e->heard_ns && now_ns >= e->heard_ns && now_ns - e->heard_ns >= idle &&
           (now_ns < e->swept_ns || now_ns - e->swept_ns >= idle);
}

size_t pd_reservations_idle(pd_reservations *set, uint64_t now_ns, char (*names)[PD_CONF_MAX_NAME], size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&set->lock);
    for (size_t b = 0; b < PD__RESV_BUCKETS && n < cap; b++)
        for (pd_reservations_entry *e = set->buckets[b]; e && n < cap; e = e->next)
            if (pd__sweep_due(e, set->ttl_ms, now_ns))
                memcpy(names[n++], e->name, sizeof e->name);
    pthread_mutex_unlock(&set->lock);
    return n;
}

size_t pd_reservations_sweep(pd_reservations *set, const pd_scene *s, uint64_t now_ns, uint64_t *out, size_t cap)
{
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(set, s, 0, &hold);
    if (!table)
        return 0;
    pd_reservations_entry *e = hold.entry;
    pthread_mutex_lock(&set->lock);
    const int64_t ttl = set->ttl_ms;
    /* A ReservePath that ran since the timer looked has maintained it. */
    const int due = pd__sweep_due(e, ttl, now_ns);
    const int64_t heard_game = e->heard_game_ms;
    const uint64_t heard_ns = e->heard_ns;
    if (due)
        e->swept_ns = now_ns;
    pthread_mutex_unlock(&set->lock);
    size_t released = 0;
    if (due) {
        const int64_t idle_ms = (int64_t)((now_ns - heard_ns) / 1000000u);
        const int64_t now_game = heard_game > PD_RESERVE_MAX_TIME - idle_ms ? PD_RESERVE_MAX_TIME
                                                                           : heard_game + idle_ms;
        released = pd_reserve_expire(table, now_game - ttl, out, cap);
        (void)pd_reserve_collect(table, now_game - ttl);
        pd_reserve_stats st;
        pd_reserve_get_stats(table, &st);
        if (st.agents == 0) {
            pthread_mutex_lock(&set->lock);
            e->swept_empty = 1;
            pthread_mutex_unlock(&set->lock);
        }
    }
    pd_reservations_unlock(set, &hold);
    return released;
}

void pd_reservations_forget(pd_reservations *set, const char *name)
{
    if (!set || !name)
        return;
    pthread_mutex_lock(&set->lock);
    pd_reservations_entry **at = pd__slot(set, name);
    if (*at)
        pd__unlink(at);
    pthread_mutex_unlock(&set->lock);
}

/* ---- UpdateCells' cuts -------------------------------------------------- */

static int pd__cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Cuts what op blocked in table; the ids go to ids[*n..), which has room
 * for every agent of the table per op. A RESTORE may bring walls back: its
 * cells blocked in the new grid cut as a BLOCK's. */
static void pd__cut_op(pd_reserve *table, const pd_grid *grid, const pd_scene_update *op, int64_t at,
                       pd_reserve_cut *cuts, size_t cap, uint64_t *ids, size_t *n)
{
    size_t got = 0;
    if (op->op == PD_UPDATE_BLOCK) {
        got = op->is_rect ? pd_reserve_block(table, op->rect_min.x, op->rect_min.y, op->rect_max.x, op->rect_max.y,
                                             at, cuts, cap)
                          : pd_reserve_block_cells(table, op->cells, op->n_cells, at, cuts, cap);
    } else if (op->op == PD_UPDATE_RESTORE) {
        size_t cells = op->is_rect ? (size_t)(op->rect_max.x - op->rect_min.x + 1) *
                                         (size_t)(op->rect_max.y - op->rect_min.y + 1)
                                   : op->n_cells;
        for (size_t i = 0; i < cells; i++) {
            pd_point c = op->is_rect ? (pd_point){op->rect_min.x + (int32_t)(i % (size_t)(op->rect_max.x -
                                                                                         op->rect_min.x + 1)),
                                                  op->rect_min.y + (int32_t)(i / (size_t)(op->rect_max.x -
                                                                                         op->rect_min.x + 1))}
                                     : op->cells[i];
            if (pd_grid_get(grid, c.x, c.y) == 0)
                got += pd_reserve_block(table, c.x, c.y, c.x, c.y, at, cuts + (got < cap ? got : cap),
                                        got < cap ? cap - got : 0);
        }
    }
    for (size_t i = 0; i < got && i < cap; i++)
        ids[(*n)++] = cuts[i].agent;
}

pd_update_cut *pd_reservations_cut(pd_reservations *set, const pd_scene *s, const pd_scene_update *ops,
                                   size_t n_ops, int has_at_ms, int64_t at_ms)
{
    pd_reservations_hold hold;
    pd_reserve *table = pd_reservations_lock(set, s, 0, &hold);
    pd_update_cut *cut = NULL;
    if (table) {
        pd_reserve_stats st;
        pd_reserve_get_stats(table, &st);
        size_t cap = st.agents, n = 0;
        int64_t at = has_at_ms ? at_ms : pd_reserve_now(table);
        pd_reserve_cut *cuts = cap ? malloc(cap * sizeof *cuts) : NULL;
        uint64_t *ids = cap ? malloc(cap * n_ops * sizeof *ids) : NULL;
        cut = calloc(1, sizeof *cut);
        if (cap && cuts && ids && cut) {
            for (size_t i = 0; i < n_ops; i++)
                pd__cut_op(table, s->grid, &ops[i], at, cuts, cap, ids, &n);
        }
        free(cuts);
        if (n && cut) {
            qsort(ids, n, sizeof *ids, pd__cmp_u64);
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (k == 0 || ids[k - 1] != ids[i])
                    ids[k++] = ids[i];
            cut->agents = ids;
            cut->n_agents = k;
            cut->at_ms = at;
        } else {
            free(ids);
            free(cut);
            cut = NULL;
        }
    }
    pd_reservations_unlock(set, &hold);
    return cut;
}

void pd_update_cut_free(pd_update_cut *cut)
{
    if (!cut)
        return;
    free(cut->agents);
    free(cut);
}
