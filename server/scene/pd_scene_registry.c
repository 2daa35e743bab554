/*
 * pd_scene_registry.c - the name -> scene registry: which snapshot serves
 * each name, acquire/release and list for readers, reloads (prepare, then
 * publish), the cell updates' swap of a new version, scenes added, put,
 * instanced and dropped at run time, and the registry's caps and memory
 * count.
 *
 * The registry keeps the current set in an array found by a hash index on
 * the name, guarded by a read-write lock: lookups (every path request) take
 * the read side and one atomic increment, and a reload takes the write
 * side only for the pointer swap. All the slow work - reading and parsing
 * maps, dropping the old set's references - happens outside the lock, so a
 * SIGHUP reload never stalls the workers. A reload is two steps,
 * pd_registry_prepare (the slow load, on any thread, touching no registry)
 * and pd_registry_publish (the swap), so the server can load on a
 * background thread and publish on its event loop. A reload's prepare
 * (pd_registry_prepare_reload) keeps a config scene whose definition did
 * not change - the grid its map parses to equals the cells it was loaded
 * with, and its placement, unit sizes and search are the same - rather
 * than building it again, so its version and its updates stay.
 */
#include "pd_scene.h"
#include "pd_scene_internal.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_index.h"
#include "pd_scene_reserve.h"

struct pd_registry {
    /* Readers (acquire, list) take the read side; the swap takes the write side. */
    pthread_rwlock_t lock;
    /* Serialises whole reloads, so the version hand-over from the old set to
     * the new one cannot interleave with a second reload, and every change
     * of the set (an update's swap included). */
    pthread_mutex_t reload_lock;
    /* The served scenes, one reference each: scenes[0, n_sorted) sorted by
     * name, then those added since, in the order they came; a dropped one
     * leaves NULL until the next sort (pd__registry_sort). A scene is found
     * by its name through `index`, so adding, finding and dropping one
     * cost the same with ten scenes or a million. Changed under both
     * locks; read under either. */
    pd_scene **scenes;
    size_t n_slots;             /* entries of scenes[] in use, NULL ones included */
    size_t cap_slots;
    size_t n_sorted;
    size_t n_scenes;            /* the entries that are not NULL */
    size_t unsorted;            /* adds and drops since the last sort */
    uint32_t *index;            /* open addressing, linear probing by the name's hash:
                                   0 empty, else 1 + the scenes[] entry; at most half
                                   full */
    size_t index_cap;           /* a power of two; 0 before the first scene */
    uint64_t work;              /* guarded by reload_lock: pd_registry_work */
    pd_registry_caps caps;      /* guarded by reload_lock */
    atomic_int loads_stopped;   /* pd_registry_stop_loads */
    uint64_t spare_min_cells;   /* guarded by reload_lock; see pd_registry_set_spare_min_cells */
    struct pd_scene_acct *acct; /* what every snapshot charged here holds */
    pd_reservations *reservations; /* each scene's reservation table (pd_scene_reserve.h) */
};

pd_registry *pd_registry_create(void)
{
    pd_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (pthread_rwlock_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    r->acct = calloc(1, sizeof *r->acct);
    if (!r->acct || pthread_mutex_init(&r->reload_lock, NULL) != 0) {
        free(r->acct);
        pthread_rwlock_destroy(&r->lock);
        free(r);
        return NULL;
    }
    if (!(r->reservations = pd_reservations_create())) {
        pthread_mutex_destroy(&r->reload_lock);
        free(r->acct);
        pthread_rwlock_destroy(&r->lock);
        free(r);
        return NULL;
    }
    atomic_init(&r->loads_stopped, 0);
    atomic_init(&r->acct->refs, 1);
    atomic_init(&r->acct->bytes, 0);
    r->spare_min_cells = PD_SCENE_SPARE_MIN_CELLS;
    return r;
}

static void pd__release_set(pd_scene **scenes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_scene_release(scenes[i]);
    free(scenes);
}

void pd_registry_destroy(pd_registry *r)
{
    if (!r)
        return;
    pd__release_set(r->scenes, r->n_slots);
    free(r->index);
    pd__acct_release(r->acct);
    pd_reservations_destroy(r->reservations);
    pthread_mutex_destroy(&r->reload_lock);
    pthread_rwlock_destroy(&r->lock);
    free(r);
}

static int pd__cmp_scene_name(const void *a, const void *b)
{
    const pd_scene *sa = *(pd_scene *const *)a;
    const pd_scene *sb = *(pd_scene *const *)b;
    return strcmp(sa->name, sb->name);
}

/* Binary search in a name-sorted set: the index of `name`, or n when absent. */
static size_t pd__find_index(pd_scene *const *scenes, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, scenes[mid]->name);
        if (c == 0)
            return mid;
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return n;
}

/* The scene called `name` in a name-sorted set; NULL when absent. */
static pd_scene *pd__find(pd_scene *const *scenes, size_t n, const char *name)
{
    size_t i = pd__find_index(scenes, n, name);
    return i < n ? scenes[i] : NULL;
}

/* ---- the registry's index ---------------------------------------------- */

/* The registry sorts its scenes again (pd__registry_sort) once the adds and
 * drops since the last sort pass the larger of these: a fixed floor, and
 * one change in PD__REGISTRY_SORT_SHARE of the scenes, so that the sort's
 * O(n) merge costs a change O(1) however many scenes there are, and a
 * listing sorts at most that many scenes of its own. */
#define PD__REGISTRY_SORT_MIN 1024
#define PD__REGISTRY_SORT_SHARE 16
/* Smallest scenes[] allocation. */
#define PD__REGISTRY_SLOTS_MIN 16

/* The name of scenes[e] for the index (NULL: a dropped one's hole). */
static const char *pd__slot_name(const void *scenes, uint32_t e)
{
    const pd_scene *s = ((pd_scene *const *)scenes)[e];
    return s ? s->name : NULL;
}

/* The scenes[] entry serving `name`, or SIZE_MAX. Under either lock. */
static size_t pd__lookup(const pd_registry *r, const char *name, uint64_t *work)
{
    if (r->index_cap == 0)
        return SIZE_MAX;
    uint32_t e = r->index[pd_index_slot(r->index, r->index_cap, name, pd__slot_name, r->scenes, work)];
    return e ? e - 1 : SIZE_MAX;
}

/* Sorts r's scenes again: the ones added since the last sort, sorted, are
 * merged with the sorted ones, and the dropped ones' NULL entries go. With
 * reload_lock held; the new array and index are made before the write
 * lock, which only swaps them. Without the memory it leaves r as it is
 * (a listing still sorts what it reads). */
static void pd__registry_sort(pd_registry *r)
{
    size_t tail = r->n_slots - r->n_sorted, n = r->n_scenes;
    size_t cap = n < PD__REGISTRY_SLOTS_MIN ? PD__REGISTRY_SLOTS_MIN : n;
    size_t icap = r->index_cap;
    pd_scene **added = malloc((tail ? tail : 1) * sizeof *added);
    pd_scene **fresh = malloc(cap * sizeof *fresh);
    size_t k = 0;
    for (size_t i = r->n_sorted; added && i < r->n_slots; i++)
        if (r->scenes[i])
            added[k++] = r->scenes[i];
    uint32_t *index = NULL;
    if (added && fresh) {
        if (k > 1)
            qsort(added, k, sizeof *added, pd__cmp_scene_name);
        size_t a = 0, b = 0, m = 0;
        while (a < r->n_sorted || b < k) {
            if (a < r->n_sorted && !r->scenes[a]) {
                a++;
                continue;
            }
            if (b == k || (a < r->n_sorted && strcmp(r->scenes[a]->name, added[b]->name) < 0))
                fresh[m++] = r->scenes[a++];
            else
                fresh[m++] = added[b++];
        }
        r->work += r->n_slots;
        index = pd_index_build(icap, n, pd__slot_name, fresh, &r->work);
    }
    free(added);
    if (!index) {
        free(fresh);
        return;
    }
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    uint32_t *old_index = r->index;
    r->scenes = fresh;
    r->index = index;
    r->n_slots = r->n_sorted = n;
    r->cap_slots = cap;
    r->unsorted = 0;
    pthread_rwlock_unlock(&r->lock);
    free(old);
    free(old_index);
}

/* After an add or a drop (reload_lock held): sorts when enough of them
 * have come since the last sort. */
static void pd__registry_changed(pd_registry *r)
{
    r->unsorted++;
    size_t due = r->n_scenes / PD__REGISTRY_SORT_SHARE;
    if (r->unsorted >= (due > PD__REGISTRY_SORT_MIN ? due : PD__REGISTRY_SORT_MIN))
        pd__registry_sort(r);
}

/* Makes room in r for one more scene (reload_lock held): a larger array or
 * index when one is needed, made before the write lock, which only swaps
 * it in (doubling, so the copy costs an add O(1) on average). Returns 0,
 * or -1 when memory ran out (nothing changed). */
static int pd__registry_reserve(pd_registry *r)
{
    pd_scene **slots = r->scenes;
    size_t cap = r->cap_slots, icap = r->index_cap;
    if (r->n_slots == cap) {
        cap = cap ? 2 * cap : PD__REGISTRY_SLOTS_MIN;
        if (!(slots = malloc(cap * sizeof *slots)))
            return -1;
        if (r->n_slots)
            memcpy(slots, r->scenes, r->n_slots * sizeof *slots);
        r->work += r->n_slots;
    }
    uint32_t *index = r->index;
    if ((r->n_scenes + 1) * 2 > icap) {
        icap = pd_index_cap_for(r->n_scenes + 1);
        if (!(index = pd_index_build(icap, r->n_slots, pd__slot_name, slots, &r->work))) {
            if (slots != r->scenes)
                free(slots);
            return -1;
        }
    }
    if (slots == r->scenes && index == r->index)
        return 0;
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    uint32_t *old_index = r->index;
    r->scenes = slots;
    r->cap_slots = cap;
    r->index = index;
    r->index_cap = icap;
    pthread_rwlock_unlock(&r->lock);
    if (old != slots)
        free(old);
    if (old_index != index)
        free(old_index);
    return 0;
}

/* Serves s, whose name r does not serve, taking over the caller's
 * reference; reload_lock held, and room made (pd__registry_reserve). */
static void pd__registry_insert(pd_registry *r, pd_scene *s)
{
    size_t at = pd_index_slot(r->index, r->index_cap, s->name, pd__slot_name, r->scenes, &r->work);
    pthread_rwlock_wrlock(&r->lock);
    r->scenes[r->n_slots] = s;
    r->index[at] = (uint32_t)(r->n_slots + 1);
    r->n_slots++;
    r->n_scenes++;
    pthread_rwlock_unlock(&r->lock);
    pd__registry_changed(r);
}

/* Stops serving scenes[at] (reload_lock held) and returns it with the
 * registry's reference. */
static pd_scene *pd__registry_remove(pd_registry *r, size_t at)
{
    pd_scene *gone = r->scenes[at];
    size_t slot = pd_index_slot(r->index, r->index_cap, gone->name, pd__slot_name, r->scenes, &r->work);
    pthread_rwlock_wrlock(&r->lock);
    pd_index_remove(r->index, r->index_cap, slot, pd__slot_name, r->scenes);
    r->scenes[at] = NULL;
    r->n_scenes--;
    pthread_rwlock_unlock(&r->lock);
    pd__registry_changed(r);
    return gone;
}

/* A loaded scene set nobody reads yet: what pd_registry_prepare builds and
 * pd_registry_publish swaps in. */
struct pd_scene_set {
    pd_scene **scenes;          /* sorted by name, one reference each */
    unsigned char *kept;        /* kept[i]: scenes[i] is a served snapshot kept
                                   (pd_registry_prepare_reload), not a new build */
    size_t n_scenes;
};

static void pd__set_free(pd_scene_set *set)
{
    pd__release_set(set->scenes, set->n_scenes);
    free(set->kept);
    free(set);
}

static int pd__cmp_conf_scene(const void *a, const void *b)
{
    const pd_conf_scene *sa = *(const pd_conf_scene *const *)a;
    const pd_conf_scene *sb = *(const pd_conf_scene *const *)b;
    return strcmp(sa->name, sb->name);
}

/* The poll of a load into r: CANCELLED once its loads are stopped. */
static pd_status pd__loads_poll(void *user)
{
    const pd_registry *r = user;
    return atomic_load_explicit(&r->loads_stopped, memory_order_relaxed) ? PD_CANCELLED : PD_OK;
}

void pd_registry_stop_loads(pd_registry *r)
{
    atomic_store(&r->loads_stopped, 1);
}

/* pd_registry_prepare (r NULL) and pd_registry_prepare_reload. The entries
 * are taken in name order, so scenes[] and kept[] come out sorted. */
static pd_scene_set *pd__prepare(pd_registry *r, const pd_conf *conf, char *err, size_t errlen)
{
    const pd_scene_limits stop = { .poll = pd__loads_poll, .poll_user = r };
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    size_t n_conf = conf->n_scenes;
    pd_scene_set *set = calloc(1, sizeof *set);
    const pd_conf_scene **order = n_conf ? malloc(n_conf * sizeof *order) : NULL;
    if (!set || (n_conf > 0 && (!order || !(set->scenes = calloc(n_conf, sizeof *set->scenes)) ||
                                !(set->kept = calloc(n_conf, sizeof *set->kept))))) {
        if (set)
            pd__set_free(set);
        free(order);
        snprintf(err, errlen, "scenes: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < n_conf; i++)
        order[i] = &conf->scenes[i];
    if (n_conf > 1)
        qsort(order, n_conf, sizeof *order, pd__cmp_conf_scene);
    for (size_t i = 1; i < n_conf; i++) {
        if (strcmp(order[i - 1]->name, order[i]->name) == 0) {
            snprintf(err, errlen, "scene '%s': name given more than once", order[i]->name);
            free(order);
            pd__set_free(set);
            return NULL;
        }
    }
    for (size_t i = 0; i < n_conf; i++) {
        pd_scene *served = r ? pd_registry_acquire(r, order[i]->name) : NULL;
        int kept = 0;
        set->scenes[i] = pd__scene_load_or_keep(order[i], served, r ? &stop : NULL, &kept, err,
                                                errlen);
        pd_scene_release(served);
        if (!set->scenes[i]) {
            free(order);
            pd__set_free(set);
            return NULL;
        }
        set->kept[i] = (unsigned char)kept;
        set->n_scenes = i + 1;
    }
    free(order);
    return set;
}

pd_scene_set *pd_registry_prepare(const pd_conf *conf, char *err, size_t errlen)
{
    return pd__prepare(NULL, conf, err, errlen);
}

pd_scene_set *pd_registry_prepare_reload(pd_registry *r, const pd_conf *conf, char *err,
                                         size_t errlen)
{
    return pd__prepare(r, conf, err, errlen);
}

void pd_registry_discard(pd_scene_set *set)
{
    if (set)
        pd__set_free(set);
}

pd_scene *const *pd_scene_set_scenes(const pd_scene_set *set, size_t *n_out)
{
    size_t n = set ? set->n_scenes : 0;
    if (n_out)
        *n_out = n;
    return n ? set->scenes : NULL;
}

int pd_scene_set_kept(const pd_scene_set *set, size_t i)
{
    return set && i < set->n_scenes && set->kept[i];
}

void pd_scene_set_counts(const pd_scene_set *set, size_t *kept, size_t *built)
{
    size_t k = 0, n = set ? set->n_scenes : 0;
    for (size_t i = 0; i < n; i++)
        k += set->kept[i];
    if (kept)
        *kept = k;
    if (built)
        *built = n - k;
}

/* The run-time scenes of cur (NULL entries skipped) that set does not
 * name, appended to set's array and the whole sorted again; 0, or -1 when
 * memory ran out. */
static int pd__keep_runtime(pd_scene *const *cur, size_t n_cur, pd_scene ***fresh, size_t *n)
{
    size_t keep = 0;
    for (size_t i = 0; i < n_cur; i++)
        keep += cur[i] && cur[i]->runtime && !pd__find(*fresh, *n, cur[i]->name);
    if (keep == 0)
        return 0;
    pd_scene **grown = realloc(*fresh, (*n + keep) * sizeof *grown);
    if (!grown)
        return -1;
    size_t m = *n;
    for (size_t i = 0; i < n_cur; i++) {
        if (cur[i] && cur[i]->runtime && !pd__find(grown, *n, cur[i]->name)) {
            pd_scene_retain(cur[i]);
            grown[m++] = cur[i];
        }
    }
    *fresh = grown;
    *n = m;
    qsort(grown, m, sizeof *grown, pd__cmp_scene_name);
    return 0;
}

int pd_registry_publish(pd_registry *r, pd_scene_set *set)
{
    size_t n = set->n_scenes;
    pthread_mutex_lock(&r->reload_lock);
    /* Only reloads and updates write the set, and they are serialised by
     * reload_lock, so reading the current set here needs no read lock.
     * A kept scene must still be served as the same scene (updates since
     * the prepare made newer versions of it, which is what stays). */
    for (size_t i = 0; i < n; i++) {
        size_t at = pd__lookup(r, set->scenes[i]->name, NULL);
        const pd_scene *now = at == SIZE_MAX ? NULL : r->scenes[at];
        if (set->kept[i] && (!now || now->lineage != set->scenes[i]->lineage)) {
            pthread_mutex_unlock(&r->reload_lock);
            pd__set_free(set);
            return -1;
        }
    }
    /* The new index, made first: at most the set and every run-time scene
     * served now. */
    size_t icap = pd_index_cap_for(n + r->n_scenes);
    uint32_t *index = calloc(icap, sizeof *index);
    if (!index) {
        pthread_mutex_unlock(&r->reload_lock);
        pd__set_free(set);
        return -1;
    }
    pd_scene **fresh = set->scenes;
    for (size_t i = 0; i < n; i++) {
        size_t at = pd__lookup(r, fresh[i]->name, NULL);
        pd_scene *prev = at == SIZE_MAX ? NULL : r->scenes[at];
        if (set->kept[i]) {
            pd_scene_retain(prev);
            pd_scene_release(fresh[i]);
            fresh[i] = prev;
            continue;
        }
        if (prev) {
            /* Built again: the same scene's next version to its watchers. */
            fresh[i]->version = prev->version + 1;
            fresh[i]->incarnation = prev->incarnation;
        }
        pd__charge(r->acct, fresh[i]);
    }
    free(set->kept);
    free(set);
    /* Scenes made at run time are not in any config: they stay. Without
     * the memory to keep them the config's scenes are still published. */
    (void)pd__keep_runtime(r->scenes, r->n_slots, &fresh, &n);
    for (size_t i = 0; i < n; i++)
        index[pd_index_slot(index, icap, fresh[i]->name, pd__slot_name, fresh, NULL)] = (uint32_t)(i + 1);
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    uint32_t *old_index = r->index;
    size_t old_n = r->n_slots;
    r->scenes = fresh;
    r->n_slots = r->n_sorted = r->n_scenes = r->cap_slots = n;
    r->unsorted = 0;
    r->index = index;
    r->index_cap = icap;
    pthread_rwlock_unlock(&r->lock);
    free(old_index);
    /* A scene the reload stopped serving takes its reservations with it. */
    for (size_t i = 0; i < old_n; i++)
        if (old[i] && pd__lookup(r, old[i]->name, NULL) == SIZE_MAX)
            pd_reservations_forget(r->reservations, old[i]->name);
    pthread_mutex_unlock(&r->reload_lock);

    /* Readers that still hold old scenes keep them alive by their own
     * references (a replaced scene's writer, spare included, goes with its
     * last version). */
    pd__release_set(old, old_n);
    return 0;
}

int pd_registry_load(pd_registry *r, const pd_conf *conf, char *err, size_t errlen)
{
    /* Build the complete new set before touching the live one: all or nothing. */
    pd_scene_set *set = pd_registry_prepare(conf, err, errlen);
    if (!set)
        return -1;
    return pd_registry_publish(r, set);
}

pd_scene *pd_registry_acquire(pd_registry *r, const char *name)
{
    if (!name)
        return NULL;
    pthread_rwlock_rdlock(&r->lock);
    size_t at = pd__lookup(r, name, NULL);
    pd_scene *s = at == SIZE_MAX ? NULL : r->scenes[at];
    if (s)
        pd_scene_retain(s);
    pthread_rwlock_unlock(&r->lock);
    return s;
}

size_t pd_registry_count(pd_registry *r)
{
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->n_scenes;
    pthread_rwlock_unlock(&r->lock);
    return n;
}

uint64_t pd_registry_work(pd_registry *r)
{
    pthread_mutex_lock(&r->reload_lock);
    uint64_t work = r->work;
    pthread_mutex_unlock(&r->reload_lock);
    return work;
}

size_t pd_registry_list(pd_registry *r, pd_scene ***out)
{
    *out = NULL;
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->n_scenes, tail = r->n_slots - r->n_sorted, a = 0, k = 0;
    pd_scene **list = n ? malloc(n * sizeof *list) : NULL;
    pd_scene **added = list && tail ? malloc(tail * sizeof *added) : NULL;
    if (list && (added || !tail)) {
        for (size_t i = 0; i < r->n_slots; i++) {
            pd_scene *s = r->scenes[i];
            if (!s)
                continue;
            pd_scene_retain(s);
            if (i < r->n_sorted)
                list[a++] = s;
            else
                added[k++] = s;
        }
    }
    pthread_rwlock_unlock(&r->lock);
    if (!list || (tail && !added)) {
        free(list);
        return 0;
    }
    /* The scenes added since the registry's last sort, sorted, merged in
     * from the back (at most PD__REGISTRY_SORT_SHARE-th of them). */
    if (k > 1)
        qsort(added, k, sizeof *added, pd__cmp_scene_name);
    for (size_t w = a + k; k > 0;) {
        if (a > 0 && strcmp(list[a - 1]->name, added[k - 1]->name) > 0)
            list[--w] = list[--a];
        else
            list[--w] = added[--k];
    }
    free(added);
    *out = list;
    return n;
}

void pd_registry_release_list(pd_scene **list, size_t n)
{
    pd__release_set(list, n);
}

pd_status pd_registry_update(pd_registry *r, const char *name, const pd_scene_update *u,
                             pd_scene_update_result *res)
{
    return pd_registry_update_many(r, name, u, 1, res);
}

pd_status pd_registry_update_many(pd_registry *r, const char *name, const pd_scene_update *ops,
                                  size_t n_ops, pd_scene_update_result *res)
{
    return pd_registry_update_hooked(r, name, ops, n_ops, NULL, res);
}

/* The current version of `name` and its writer (made at the scene's first
 * update), each with a reference of the caller's; PD_UNKNOWN_SCENE or
 * PD_INTERNAL (memory). */
static pd_status pd__update_start(pd_registry *r, const char *name, pd_scene **cur, pd_scene_writer **l,
                                  uint64_t *max_bytes)
{
    pthread_mutex_lock(&r->reload_lock);
    *max_bytes = r->caps.max_scene_bytes;
    size_t at = pd__lookup(r, name, NULL);
    pd_scene *s = at == SIZE_MAX ? NULL : r->scenes[at];
    pd_status st = !s ? PD_UNKNOWN_SCENE : PD_OK;
    /* Only updates read or set a served scene's writer, and they look it
     * up here, under reload_lock. */
    if (s && !s->writer && !(s->writer = pd__writer_new(r->spare_min_cells)))
        st = PD_INTERNAL;
    if (st == PD_OK) {
        pd_scene_retain(s);
        *cur = s;
        *l = pd__writer_retain(s->writer);
    }
    pthread_mutex_unlock(&r->reload_lock);
    return st;
}

/* Serves next at index i, in place of the version there (reload_lock
 * held): charged, holding a reference to the scene's writer l. */
static void pd__serve_next(pd_registry *r, size_t i, pd_scene *next, pd_scene_writer *l)
{
    if (next->acct)
        pd__recharge(next); /* a reused spare */
    else
        pd__charge(r->acct, next);
    next->writer = pd__writer_retain(l);
    pthread_rwlock_wrlock(&r->lock);
    r->scenes[i] = next;
    pthread_rwlock_unlock(&r->lock);
}

/* Serves next in place of cur when cur is still what `name` serves (a
 * reload or a drop may have replaced it while next was built) and the
 * hooks' commit takes it: returns 1 served, 0 replaced meanwhile, -1
 * refused by commit (nothing served). next may be NULL (an update that
 * changed nothing: nothing to swap or commit). */
static int pd__update_swap(pd_registry *r, const char *name, pd_scene *cur, pd_scene *next,
                           pd_scene_writer *l, const pd_registry_update_hooks *hooks,
                           const pd_scene_update_result *res)
{
    pthread_mutex_lock(&r->reload_lock);
    size_t i = pd__lookup(r, name, NULL);
    int current = i != SIZE_MAX && r->scenes[i] == cur;
    /* The commit (the journal's append) comes before the swap and under
     * the same lock, so no reader ever sees a version it refused. */
    if (current && next && hooks && hooks->commit && hooks->commit(hooks->user, res) != 0)
        current = -1;
    if (current == 1 && next)
        pd__serve_next(r, i, next, l);
    pthread_mutex_unlock(&r->reload_lock);
    return current;
}

/* After cur was replaced by the version ops made (writer lock held): cur
 * keeps the registry's reference as the writer's spare, with the
 * operations that bring it up to date; a small scene's is let go. */
static void pd__update_retire(pd_scene *cur, pd_scene_writer *l, const pd_scene_update *ops,
                              size_t n_ops, uint64_t version)
{
    pd_scene *drop = l->spare;
    l->spare = NULL;
    if (cur->base || cur->grid->width * (uint64_t)cur->grid->height <= l->spare_min_cells) {
        pd_scene_release(drop);
        pd_scene_release(cur);
        return;
    }
    /* A waiting spare holds no writer reference (see pd_scene_writer);
     * the version just served holds one, so l stays. Readers of cur never
     * read its writer. */
    pd__writer_release(cur->writer);
    cur->writer = NULL;
    l->spare = cur;
    l->spare_at = cur->version;
    pd__writer_keep_ops(l, ops, n_ops, version);
    pd_scene_release(drop);
}

/* limits.max_scene_bytes for the version an update is about to make: with
 * no spare to write into, it is a copy of cur's structures (an instance's
 * first update copies the template's it shared), and one that would take
 * the registry past the cap is refused before it is made. res gets the
 * bytes it would need and those held (for the answer's message). */
static pd_status pd__update_fits(pd_registry *r, const pd_scene *cur, const pd_scene_writer *l,
                                 uint64_t max_bytes, pd_scene_update_result *res)
{
    if (!max_bytes || l->spare)
        return PD_OK;
    pd_scene_bytes b;
    pd_scene_get_bytes(cur, &b);
    uint64_t more = sizeof *cur + b.total, held = pd_registry_bytes(r);
    if (held + more <= max_bytes)
        return PD_OK;
    res->version = cur->version;
    res->bytes_needed = more;
    res->bytes_held = held;
    return PD_LIMIT_EXCEEDED;
}

pd_status pd_registry_update_hooked(pd_registry *r, const char *name, const pd_scene_update *ops,
                                    size_t n_ops, const pd_registry_update_hooks *hooks,
                                    pd_scene_update_result *res)
{
    pd_scene_update_result local;
    if (!res)
        res = &local;
    memset(res, 0, sizeof *res);
    if (!r || !ops)
        return PD_INVALID_ARGUMENT;
    if (!name)
        return PD_UNKNOWN_SCENE;
    for (;;) {
        pd_scene *cur;
        pd_scene_writer *l;
        uint64_t max_bytes;
        pd_status st = pd__update_start(r, name, &cur, &l, &max_bytes);
        if (st != PD_OK)
            return st;
        /* The writer's lock keeps this scene's updates in order: each
         * starts from the version the one before published. Other scenes'
         * updates run meanwhile; readers never wait for it. */
        pthread_mutex_lock(&l->lock);
        pd_scene *next = NULL;
        st = pd__update_fits(r, cur, l, max_bytes, res);
        if (st == PD_OK)
            st = pd__apply_updates(cur, ops, n_ops, l, &next, res);
        int refused = st == PD_OK && hooks && hooks->before_publish && hooks->before_publish(hooks->user) != 0;
        int let_go = st == PD_OK && !refused;
        int current = let_go ? pd__update_swap(r, name, cur, next, l, hooks, res) : 0;
        if (current < 0) {
            /* Not served: the version served is still cur's. */
            refused = 1;
            current = 0;
            res->version = cur->version;
            res->cells_changed = 0;
        }
        if (let_go && hooks && hooks->after_publish)
            hooks->after_publish(hooks->user, current, res);
        if (current && next)
            pd__update_retire(cur, l, ops, n_ops, next->version); /* takes the registry's reference */
        else
            pd_scene_release(next);
        pthread_mutex_unlock(&l->lock);
        pd_scene_release(cur);
        pd__writer_release(l);
        if (refused)
            return PD_INTERNAL;
        if (st != PD_OK || current)
            return st;
        /* A reload or a drop replaced the scene while the version was
         * built: start again from what is served now. */
    }
}

/* The version of the items' first `upto` (a prefix of a chain the log
 * took only in part), built again from cur on a copy; NULL when none of
 * them changed a cell, or memory ran out. */
static pd_scene *pd__chain_prefix(const pd_scene *cur, const pd_registry_chain_item *items, size_t upto)
{
    pd_registry_chain_item again[PD_REGISTRY_CHAIN_MAX];
    if (upto == 0 || upto > PD_REGISTRY_CHAIN_MAX)
        return NULL;
    for (size_t k = 0; k < upto; k++)
        again[k] = (pd_registry_chain_item){ .ops = items[k].ops, .n_ops = items[k].n_ops };
    pd_scene *built = NULL;
    (void)pd__apply_chain(cur, again, upto, NULL, &built);
    return built;
}

/* The chain's swap (see pd__update_swap): under reload_lock, when cur is
 * still served, the hooks' commit says how many items are served, and
 * the version the last of them made replaces cur: built when that is the
 * chain's last, else the prefix built again. Returns 1 current (*served
 * set, *published what is served now in cur's place or NULL when none of
 * the served items made a version), 0 replaced meanwhile. */
static int pd__chain_swap(pd_registry *r, const char *name, pd_scene *cur, pd_scene *built,
                          pd_registry_chain_item *items, size_t n, pd_scene_writer *l,
                          const pd_registry_chain_hooks *hooks, size_t *served, pd_scene **published)
{
    *served = 0;
    *published = NULL;
    pthread_mutex_lock(&r->reload_lock);
    size_t i = pd__lookup(r, name, NULL);
    int current = i != SIZE_MAX && r->scenes[i] == cur;
    if (current) {
        *served = hooks && hooks->commit ? hooks->commit(hooks->user, items, n) : n;
        if (*served > n)
            *served = n;
        int all = 1, some = 0;
        for (size_t k = 0; k < n; k++) {
            int made = items[k].status == PD_OK && items[k].res.cells_changed > 0;
            if (k < *served)
                some |= made;
            else
                all &= !made;
        }
        if (all)
            *published = built;
        else if (some)
            *published = pd__chain_prefix(cur, items, *served);
    }
    if (*published)
        pd__serve_next(r, i, *published, l);
    pthread_mutex_unlock(&r->reload_lock);
    return current;
}

pd_status pd_registry_update_chain(pd_registry *r, const char *name, pd_registry_chain_item *items, size_t n,
                                   const pd_registry_chain_hooks *hooks)
{
    if (!r || !items || n == 0 || n > PD_REGISTRY_CHAIN_MAX)
        return PD_INVALID_ARGUMENT;
    pd_status whole = PD_OK;
    for (;;) {
        for (size_t k = 0; k < n; k++) {
            memset(&items[k].res, 0, sizeof items[k].res);
            items[k].status = PD_INTERNAL;
        }
        pd_scene *cur;
        pd_scene_writer *l;
        uint64_t max_bytes;
        whole = name ? pd__update_start(r, name, &cur, &l, &max_bytes) : PD_UNKNOWN_SCENE;
        if (whole != PD_OK) {
            for (size_t k = 0; k < n; k++)
                items[k].status = whole;
            break;
        }
        pthread_mutex_lock(&l->lock);
        pd_scene_update_result fits;
        memset(&fits, 0, sizeof fits);
        whole = pd__update_fits(r, cur, l, max_bytes, &fits);
        /* One version holds them all (one copy, each item's repairs as
         * alone); each item is told the version it makes. */
        pd_scene *built = NULL;
        if (whole == PD_OK)
            (void)pd__apply_chain(cur, items, n, l, &built);
        else
            for (size_t k = 0; k < n; k++) {
                items[k].status = whole;
                items[k].res = fits;
            }
        int refused = built && hooks && hooks->before_publish && hooks->before_publish(hooks->user) != 0;
        size_t served = 0;
        pd_scene *published = NULL;
        int current = 1;
        if (built && !refused) {
            current = pd__chain_swap(r, name, cur, built, items, n, l, hooks, &served, &published);
            if (hooks && hooks->after_publish)
                hooks->after_publish(hooks->user, served, current);
        }
        uint64_t now = published ? published->version : cur->version;
        for (size_t k = 0; built && current && k < n; k++) {
            if (items[k].status == PD_OK && items[k].res.cells_changed > 0 && (refused || k >= served)) {
                /* Made but not served: the version served is the answer. */
                items[k].res.version = now;
                items[k].res.cells_changed = 0;
                if (refused)
                    items[k].status = PD_INTERNAL;
            }
        }
        if (built && built != published)
            pd_scene_release(built);
        if (published) /* cur keeps the registry's reference as the writer's spare (or goes) */
            pd__update_retire(cur, l, NULL, 0, 0);
        pthread_mutex_unlock(&l->lock);
        pd_scene_release(cur);
        pd__writer_release(l);
        if (current)
            break;
        /* A reload or a drop replaced the scene while the versions were
         * built: start again from what is served now. */
    }
    return whole;
}

void pd_registry_set_spare_min_cells(pd_registry *r, uint64_t cells)
{
    pthread_mutex_lock(&r->reload_lock);
    r->spare_min_cells = cells;
    pthread_mutex_unlock(&r->reload_lock);
}

pd_reservations *pd_registry_reservations(pd_registry *r)
{
    return r->reservations;
}

void pd_registry_set_caps(pd_registry *r, const pd_registry_caps *caps)
{
    pthread_mutex_lock(&r->reload_lock);
    r->caps = *caps;
    pthread_mutex_unlock(&r->reload_lock);
}

void pd_registry_build_limits(pd_registry *r, pd_scene_limits *out)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&r->reload_lock);
    out->max_cells = r->caps.max_scene_cells;
    out->bytes_cap = r->caps.max_scene_bytes;
    pthread_mutex_unlock(&r->reload_lock);
    out->bytes_held = pd_registry_bytes(r);
}

uint64_t pd_registry_bytes(const pd_registry *r)
{
    return atomic_load_explicit(&r->acct->bytes, memory_order_relaxed);
}

/* pd_registry_add with reload_lock held. */
static pd_status pd__add_locked(pd_registry *r, pd_scene *s, const pd_scene *tmpl,
                                const pd_registry_commit *commit, char *err, size_t errlen)
{
    const pd_registry_caps *caps = &r->caps;
    size_t at = pd__lookup(r, s->name, &r->work);
    if (at != SIZE_MAX) {
        snprintf(err, errlen, "scene '%s' exists already (version %" PRIu64 ")", s->name,
                 r->scenes[at]->version);
        pd_scene_release(s);
        return PD_SCENE_EXISTS;
    }
    uint64_t cells = (uint64_t)s->grid->width * (uint64_t)s->grid->height;
    if (caps->max_scenes && r->n_scenes >= caps->max_scenes) {
        snprintf(err, errlen, "scene '%s': %zu scenes are served, limits.max_scenes is %" PRIu32,
                 s->name, r->n_scenes, caps->max_scenes);
        pd_scene_release(s);
        return PD_LIMIT_EXCEEDED;
    }
    if (!s->base && caps->max_scene_cells && cells > caps->max_scene_cells) {
        snprintf(err, errlen, "scene '%s': %" PRIu64 " cells, limits.max_scene_cells is %" PRIu64,
                 s->name, cells, caps->max_scene_cells);
        pd_scene_release(s);
        return PD_LIMIT_EXCEEDED;
    }
    uint64_t held = pd_registry_bytes(r), more = pd_scene_own_bytes(s);
    if (caps->max_scene_bytes && held + more > caps->max_scene_bytes) {
        snprintf(err, errlen,
                 "scene '%s': needs %" PRIu64 " bytes, scenes hold %" PRIu64
                 ", limits.max_scene_bytes is %" PRIu64,
                 s->name, more, held, caps->max_scene_bytes);
        pd_scene_release(s);
        return PD_LIMIT_EXCEEDED;
    }
    if (pd__registry_reserve(r) != 0) {
        snprintf(err, errlen, "scene '%s': out of memory", s->name);
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    s->runtime = 1;
    /* Last, once nothing else can fail: what the commit records is then
     * exactly what is served. */
    if (commit && commit->fn(commit->user, s, tmpl, err, errlen) != 0) {
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    pd__charge(r->acct, s);
    pd__registry_insert(r, s);
    return PD_OK;
}

pd_status pd_registry_add(pd_registry *r, pd_scene *s, char *err, size_t errlen)
{
    return pd_registry_add_committed(r, s, NULL, err, errlen);
}

pd_status pd_registry_add_committed(pd_registry *r, pd_scene *s, const pd_registry_commit *commit, char *err,
                                    size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!r || !s || !s->grid) {
        pd_scene_release(s);
        return PD_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&r->reload_lock);
    pd_status st = pd__add_locked(r, s, NULL, commit, err, errlen);
    pthread_mutex_unlock(&r->reload_lock);
    return st;
}

pd_status pd_registry_put(pd_registry *r, pd_scene *s)
{
    if (!r || !s || !s->grid) {
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    pthread_mutex_lock(&r->reload_lock);
    size_t at = pd__lookup(r, s->name, &r->work);
    pd_scene *gone = NULL;
    if (at == SIZE_MAX && pd__registry_reserve(r) != 0) {
        pthread_mutex_unlock(&r->reload_lock);
        pd_scene_release(s);
        return PD_INTERNAL;
    }
    if (!s->acct)
        pd__charge(r->acct, s);
    if (at == SIZE_MAX) {
        pd__registry_insert(r, s);
    } else {
        pthread_rwlock_wrlock(&r->lock);
        gone = r->scenes[at];
        r->scenes[at] = s;
        pthread_rwlock_unlock(&r->lock);
    }
    pthread_mutex_unlock(&r->reload_lock);
    pd_scene_release(gone);
    return PD_OK;
}

pd_status pd_registry_instance(pd_registry *r, const char *name, const char *tmpl,
                               uint64_t *version_out, char *err, size_t errlen)
{
    return pd_registry_instance_committed(r, name, tmpl, NULL, version_out, err, errlen);
}

pd_status pd_registry_instance_committed(pd_registry *r, const char *name, const char *tmpl,
                                         const pd_registry_commit *commit, uint64_t *version_out, char *err,
                                         size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (version_out)
        *version_out = 0;
    if (!r || !name || !tmpl)
        return PD_INVALID_ARGUMENT;
    /* Under reload_lock the template cannot be replaced between the lookup
     * and the add, and the name check sees every other add. */
    pthread_mutex_lock(&r->reload_lock);
    size_t at = pd__lookup(r, tmpl, &r->work);
    pd_scene *t = at == SIZE_MAX ? NULL : r->scenes[at];
    if (!t) {
        pthread_mutex_unlock(&r->reload_lock);
        snprintf(err, errlen, "unknown template scene '%s'", tmpl);
        return PD_UNKNOWN_SCENE;
    }
    pd_scene *n = pd_scene_instance(t, name);
    pd_status st = PD_INTERNAL;
    if (!n)
        snprintf(err, errlen, "scene '%s': out of memory", name);
    else if ((st = pd__add_locked(r, n, t, commit, err, errlen)) == PD_OK && version_out)
        *version_out = n->version;
    pthread_mutex_unlock(&r->reload_lock);
    return st;
}

pd_status pd_registry_drop(pd_registry *r, const char *name, uint64_t *version_out)
{
    if (version_out)
        *version_out = 0;
    if (!r || !name)
        return PD_UNKNOWN_SCENE;
    pthread_mutex_lock(&r->reload_lock);
    size_t i = pd__lookup(r, name, &r->work);
    if (i == SIZE_MAX) {
        pthread_mutex_unlock(&r->reload_lock);
        return PD_UNKNOWN_SCENE;
    }
    pd_scene *gone = pd__registry_remove(r, i);
    if (version_out)
        *version_out = gone->version;
    pd_reservations_forget(r->reservations, name); /* its agents go with it */
    pthread_mutex_unlock(&r->reload_lock);
    pd_scene_release(gone);
    return PD_OK;
}

