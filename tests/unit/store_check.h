/*
 * store_check.h - what the change log tests share (test_store_log.c: a log
 * in memory; test_redis_log.c: Redis Streams): a config of one open scene,
 * random updates through the store, and the tail contract every log keeps
 * (pd_changelog_ops.tail), so each implementation is held to the same
 * assertions. The including file defines SIDE (each scene SIDE x SIDE
 * open cells) and includes cmocka, open_scene.h, same_scene.h and
 * test_rng.h first.
 */
#ifndef STORE_CHECK_H
#define STORE_CHECK_H

#ifndef SIDE
#error "define SIDE before including store_check.h"
#endif

/* A registry holding the "config": scene "town", all open. */
static inline pd_registry *config_registry(void)
{
    pd_registry *r = pd_registry_create();
    assert_non_null(r);
    assert_int_equal(pd_registry_put(r, open_scene("town", SIDE)), PD_OK);
    return r;
}

/* The store and the registry it was made over. */
static inline void store_free(pd_store *st)
{
    pd_registry *r = pd_store_registry(st);
    pd_store_destroy(st);
    pd_registry_destroy(r);
}

/* One update of a random cell that always changes it (so it makes a
 * version): blocked now and then, else a cost other than the one it has.
 * Returns the version made. */
static inline uint64_t random_update(pd_store *st, const char *name, uint64_t *rng)
{
    pd_point p = { rng_below(rng, SIDE), rng_below(rng, SIDE) };
    pd_scene *s = pd_registry_acquire(pd_store_registry(st), name);
    assert_non_null(s);
    uint8_t cur = pd_grid_get(s->grid, p.x, p.y);
    pd_scene_release(s);
    pd_scene_update op = { .op = PD_UPDATE_COST, .cost = (uint8_t)(cur >= 9 || cur == 0 ? 2 : cur + 1),
                           .cells = &p, .n_cells = 1 };
    if (cur != 0 && rng_below(rng, 4) == 0)
        op.op = PD_UPDATE_BLOCK;
    pd_store_update out;
    if (pd_store_update_cells(st, name, &op, 1, &out) != PD_OK)
        fail_msg("update of %s: %s (%s)", name, pd_status_name(out.status), out.message);
    return out.update.version;
}

static inline uint64_t version_of(pd_store *st, const char *name)
{
    pd_scene *s = pd_registry_acquire(pd_store_registry(st), name);
    uint64_t v = s ? s->version : 0;
    pd_scene_release(s);
    return v;
}

/* An open SIDE x SIDE ASCII map, its first `blocked` cells walls. */
static inline void town_map(char buf[(SIDE + 1) * SIDE + 1], int blocked)
{
    char *p = buf;
    for (int y = 0; y < SIDE; y++) {
        for (int x = 0; x < SIDE; x++)
            *p++ = y * SIDE + x < blocked ? '#' : '.';
        *p++ = '\n';
    }
    *p = '\0';
}

/* The config `json` of a temporary directory holding town.txt (map). */
static inline void town_conf_json(const char *dir, const char *map, const char *json, pd_conf *c)
{
    char path[160], err[256] = "";
    snprintf(path, sizeof path, "%s/town.txt", dir);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(map, 1, strlen(map), fp), strlen(map));
    assert_int_equal(fclose(fp), 0);
    if (pd_conf_load_buffer(json, strlen(json), "test", dir, c, err, sizeof err) != 0)
        fail_msg("config: %s", err);
}

/* The config of a temporary directory: scene "town" from town.txt. */
static inline void town_conf(const char *dir, const char *map, pd_conf *c)
{
    town_conf_json(dir, map, "{\"scenes\": [{\"name\": \"town\", \"map\": \"town.txt\", \"format\": \"ascii\"}]}",
                   c);
}

/* A reload through the store, as the server makes one. */
static inline void store_reload(pd_store *st, const pd_conf *c)
{
    char err[256] = "";
    pd_scene_set *set = pd_registry_prepare_reload(pd_store_registry(st), c, err, sizeof err);
    if (!set)
        fail_msg("prepare: %s", err);
    void *rl = pd_store_reload_begin(st, set);
    assert_int_equal(pd_registry_publish(pd_store_registry(st), set), 0);
    pd_store_reload_end(st, rl);
}

/* The tail contract on a store with the config's town: after a new scene
 * "arena" and six updates of each, a tail from a version gives the
 * scene's records after it, in order and no other scene's; from 0 the
 * whole history the log holds (town is the config's: its updates; arena:
 * its creation first); from the config's loaded version the same; from
 * the current version nothing. Both scenes end at version 7. */
static inline void check_tail_from_a_version(pd_store *st, uint64_t *rng)
{
    pd_store_change ch;
    assert_int_equal(pd_store_add_scene(st, open_scene("arena", SIDE), &ch), PD_OK);
    for (int i = 0; i < 6; i++) {
        random_update(st, "town", rng);
        random_update(st, "arena", rng);
    }
    assert_int_equal(version_of(st, "town"), 7);

    tailed g;
    assert_int_equal(tail_of(st, "town", 3, &g), 0);
    assert_int_equal(g.n, 4);
    for (size_t i = 0; i < g.n; i++) {
        assert_int_equal(g.types[i], PD_JOURNAL_UPDATE);
        assert_int_equal(g.versions[i], 4 + i);
    }
    assert_int_equal(tail_of(st, "town", 0, &g), 0);
    assert_int_equal(g.n, 6);
    assert_int_equal(tail_of(st, "town", 1, &g), 0);
    assert_int_equal(g.n, 6);
    assert_int_equal(g.versions[0], 2);
    assert_int_equal(tail_of(st, "arena", 0, &g), 0);
    assert_int_equal(g.n, 7);
    assert_int_equal(g.types[0], PD_JOURNAL_SCENE);
    assert_int_equal(g.versions[6], 7);
    assert_int_equal(tail_of(st, "town", 7, &g), 0);
    assert_int_equal(g.n, 0);
}

#endif
