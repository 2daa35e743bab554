/*
 * pd_scene.c - scene snapshots and the name -> scene registry.
 *
 * A scene is loaded once from its config entry and never changes after that;
 * sharing is by reference count. The registry keeps the current set as an
 * array sorted by name, guarded by a read-write lock: lookups (every path
 * request) take the read side for a binary search and one atomic increment,
 * and a reload takes the write side only for the pointer swap. All the slow
 * work - reading and parsing maps, dropping the old set's references - happens
 * outside the lock, so a SIGHUP reload never stalls the workers.
 *
 * Versions: pd_scene_load starts a scene at version 1. When the registry
 * replaces a scene with a new snapshot of the same name, the new one gets the
 * old version + 1, so a version number names one snapshot for as long as the
 * registry lives and clients can tell that a reload happened.
 */
#include "pd_scene.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pd_mapfile.h"

/* Largest map file we read, in bytes: a full PD_GRID_MAX_SIDE square grid
 * (256 Mi cells) with CRLF line ends and a header still fits, anything bigger
 * cannot be a valid map and is refused before we allocate for it. */
#define PD_SCENE_MAX_FILE_BYTES \
    ((size_t)PD_GRID_MAX_SIDE * (PD_GRID_MAX_SIDE + 2) + 64u * 1024u)

struct pd_registry {
    /* Readers (acquire, list) take the read side; the swap takes the write side. */
    pthread_rwlock_t lock;
    /* Serialises whole reloads, so the version hand-over from the old set to
     * the new one cannot interleave with a second reload. */
    pthread_mutex_t reload_lock;
    pd_scene **scenes;          /* sorted by name, one reference each */
    size_t n_scenes;
};

void pd_scene_retain(pd_scene *s)
{
    /* Relaxed suffices: the caller already holds a reference (or the registry
     * lock), so the object cannot be freed under us. */
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

void pd_scene_release(pd_scene *s)
{
    if (!s)
        return;
    /* acq_rel: every earlier use of the scene happens before the free. */
    if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    pd_grid_destroy(s->grid);
    free(s);
}

pd_status pd_scene_world_to_cell(const pd_scene *s, double wx, double wy, pd_point *cell)
{
    double fx = floor((wx - s->origin_x) / s->cell_size);
    double fy = floor((wy - s->origin_y) / s->cell_size);
    /* Compare as doubles before converting: a NaN fails both comparisons and
     * a huge value never reaches the (undefined) double -> int conversion. */
    if (!(fx >= 0.0 && fx < (double)s->grid->width && fy >= 0.0 && fy < (double)s->grid->height))
        return PD_OUT_OF_BOUNDS;
    cell->x = (int32_t)fx;
    cell->y = (int32_t)fy;
    return PD_OK;
}

void pd_scene_cell_center(const pd_scene *s, pd_point cell, double *wx, double *wy)
{
    *wx = s->origin_x + ((double)cell.x + 0.5) * s->cell_size;
    *wy = s->origin_y + ((double)cell.y + 0.5) * s->cell_size;
}

int pd_scene_allows_unit(const pd_scene *s, uint32_t unit_size)
{
    for (size_t i = 0; i < s->n_unit_sizes; i++) {
        if (s->unit_sizes[i] == unit_size)
            return 1;
    }
    return 0;
}

/* Reads a whole map file, refusing anything above `cap` bytes before
 * allocating for it. */
static char *pd__read_file(const char *path, size_t cap, size_t *len, const char *name,
                           char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "scene '%s': %s: cannot open: %s", name, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "scene '%s': %s: not a regular file", name, path);
        fclose(f);
        return NULL;
    }
    if ((uintmax_t)st.st_size > cap) {
        snprintf(err, errlen, "scene '%s': %s: larger than %zu bytes", name, path, cap);
        fclose(f);
        return NULL;
    }
    size_t size = (size_t)st.st_size;
    char *buf = malloc(size + 1);
    if (!buf) {
        snprintf(err, errlen, "scene '%s': %s: out of memory", name, path);
        fclose(f);
        return NULL;
    }
    /* Asking for one byte more than fstat reported catches a file that changed. */
    size_t n = fread(buf, 1, size + 1, f);
    int failed = ferror(f) || n != size;
    fclose(f);
    if (failed) {
        snprintf(err, errlen, "scene '%s': %s: read error or file changed while reading", name, path);
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

pd_scene *pd_scene_load(const pd_conf_scene *cs, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    /* The config layer validates these; a hand-built entry gets the same checks. */
    if (cs->name[0] == '\0' || memchr(cs->name, '\0', sizeof cs->name) == NULL) {
        snprintf(err, errlen, "scene: name is empty or unterminated");
        return NULL;
    }
    if (!(isfinite(cs->cell_size) && cs->cell_size > 0.0) || !isfinite(cs->origin_x) ||
        !isfinite(cs->origin_y)) {
        snprintf(err, errlen, "scene '%s': origin must be finite and cell_size finite and > 0",
                 cs->name);
        return NULL;
    }
    if (cs->n_unit_sizes < 1 || cs->n_unit_sizes > PD_CONF_MAX_UNIT_SIZES) {
        snprintf(err, errlen, "scene '%s': needs 1..%d unit sizes", cs->name, PD_CONF_MAX_UNIT_SIZES);
        return NULL;
    }
    for (size_t i = 0; i < cs->n_unit_sizes; i++) {
        if (cs->unit_sizes[i] < 1 || cs->unit_sizes[i] > PD_CONF_MAX_UNIT_SIZE) {
            snprintf(err, errlen, "scene '%s': unit size %u is outside 1..%d", cs->name,
                     (unsigned)cs->unit_sizes[i], PD_CONF_MAX_UNIT_SIZE);
            return NULL;
        }
    }
    if (!cs->map_path || cs->map_path[0] == '\0') {
        snprintf(err, errlen, "scene '%s': no map file", cs->name);
        return NULL;
    }
    if (cs->format != PD_MAP_ASCII && cs->format != PD_MAP_MOVINGAI) {
        snprintf(err, errlen, "scene '%s': unknown map format %d", cs->name, (int)cs->format);
        return NULL;
    }

    size_t len = 0;
    char *buf = pd__read_file(cs->map_path, PD_SCENE_MAX_FILE_BYTES, &len, cs->name, err, errlen);
    if (!buf)
        return NULL;
    pd_parse_error perr = { 0 };
    pd_grid *grid = cs->format == PD_MAP_ASCII ? pd_map_parse_ascii(buf, len, &perr)
                                               : pd_map_parse_movingai(buf, len, &perr);
    free(buf);
    if (!grid) {
        if (perr.line > 0 && perr.column > 0)
            snprintf(err, errlen, "scene '%s': %s:%d:%d: %s", cs->name, cs->map_path, perr.line,
                     perr.column, perr.message);
        else if (perr.line > 0)
            snprintf(err, errlen, "scene '%s': %s:%d: %s", cs->name, cs->map_path, perr.line,
                     perr.message);
        else
            snprintf(err, errlen, "scene '%s': %s: %s", cs->name, cs->map_path, perr.message);
        return NULL;
    }

    pd_scene *s = calloc(1, sizeof *s);
    if (!s) {
        pd_grid_destroy(grid);
        snprintf(err, errlen, "scene '%s': out of memory", cs->name);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    memcpy(s->name, cs->name, sizeof s->name);
    s->grid = grid;
    s->origin_x = cs->origin_x;
    s->origin_y = cs->origin_y;
    s->cell_size = cs->cell_size;
    memcpy(s->unit_sizes, cs->unit_sizes, sizeof s->unit_sizes);
    s->n_unit_sizes = cs->n_unit_sizes;
    s->version = 1;
    return s;
}

pd_registry *pd_registry_create(void)
{
    pd_registry *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    if (pthread_rwlock_init(&r->lock, NULL) != 0) {
        free(r);
        return NULL;
    }
    if (pthread_mutex_init(&r->reload_lock, NULL) != 0) {
        pthread_rwlock_destroy(&r->lock);
        free(r);
        return NULL;
    }
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
    pd__release_set(r->scenes, r->n_scenes);
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

/* Binary search in a name-sorted set; NULL when absent. */
static pd_scene *pd__find(pd_scene *const *scenes, size_t n, const char *name)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, scenes[mid]->name);
        if (c == 0)
            return scenes[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

int pd_registry_load(pd_registry *r, const pd_conf *conf, char *err, size_t errlen)
{
    char scratch[1];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    pd_scene **fresh = NULL;
    size_t n = 0;
    if (conf->n_scenes > 0) {
        fresh = calloc(conf->n_scenes, sizeof *fresh);
        if (!fresh) {
            snprintf(err, errlen, "scenes: out of memory");
            return -1;
        }
    }
    /* Build the complete new set before touching the live one: all or nothing. */
    for (; n < conf->n_scenes; n++) {
        fresh[n] = pd_scene_load(&conf->scenes[n], err, errlen);
        if (!fresh[n]) {
            pd__release_set(fresh, n);
            return -1;
        }
    }
    if (n > 1)
        qsort(fresh, n, sizeof *fresh, pd__cmp_scene_name);
    for (size_t i = 1; i < n; i++) {
        if (strcmp(fresh[i - 1]->name, fresh[i]->name) == 0) {
            snprintf(err, errlen, "scene '%s': name given more than once", fresh[i]->name);
            pd__release_set(fresh, n);
            return -1;
        }
    }

    pthread_mutex_lock(&r->reload_lock);
    /* Only reloads write the set, and they are serialised by reload_lock, so
     * reading the current set here needs no read lock. */
    for (size_t i = 0; i < n; i++) {
        const pd_scene *prev = pd__find(r->scenes, r->n_scenes, fresh[i]->name);
        if (prev)
            fresh[i]->version = prev->version + 1;
    }
    pthread_rwlock_wrlock(&r->lock);
    pd_scene **old = r->scenes;
    size_t old_n = r->n_scenes;
    r->scenes = fresh;
    r->n_scenes = n;
    pthread_rwlock_unlock(&r->lock);
    pthread_mutex_unlock(&r->reload_lock);

    /* Readers that still hold old scenes keep them alive by their own references. */
    pd__release_set(old, old_n);
    return 0;
}

pd_scene *pd_registry_acquire(pd_registry *r, const char *name)
{
    if (!name)
        return NULL;
    pthread_rwlock_rdlock(&r->lock);
    pd_scene *s = pd__find(r->scenes, r->n_scenes, name);
    if (s)
        pd_scene_retain(s);
    pthread_rwlock_unlock(&r->lock);
    return s;
}

size_t pd_registry_list(pd_registry *r, pd_scene ***out)
{
    *out = NULL;
    pthread_rwlock_rdlock(&r->lock);
    size_t n = r->n_scenes;
    pd_scene **list = n ? malloc(n * sizeof *list) : NULL;
    if (list) {
        for (size_t i = 0; i < n; i++) {
            list[i] = r->scenes[i];
            pd_scene_retain(list[i]);
        }
    }
    pthread_rwlock_unlock(&r->lock);
    if (!list)
        return 0;
    *out = list;
    return n;
}

void pd_registry_release_list(pd_scene **list, size_t n)
{
    pd__release_set(list, n);
}
