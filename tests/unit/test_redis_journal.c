/*
 * test_redis_journal.c - the replica's local journal file
 * (pd_redis_journal.h) on its own: entries read back in order with their
 * entry ids and g, only UPDATE records kept, a torn tail ends the file
 * (the entries before it stay), a cut keeps only the entries past a
 * snapshot's version, a discard removes the file.
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

#include "pd_redis_journal.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/pd_rj_XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    pd_redis_journal_discard(dir, "arena");
    return rmdir(dir);
}

/* Appends the update of arena making version v (entry 1-v, g 100+v). */
static void append_update(uint64_t v)
{
    pd_scene_update op = { .op = PD_UPDATE_BLOCK, .is_rect = 1, .rect_min = { (int32_t)v, 0 },
                           .rect_max = { (int32_t)v, 0 } };
    pd_journal_record rec = { .type = PD_JOURNAL_UPDATE, .version = v, .ops = &op, .n_ops = 1 };
    snprintf(rec.scene, sizeof rec.scene, "arena");
    char id[32];
    snprintf(id, sizeof id, "1-%llu", (unsigned long long)v);
    assert_int_equal(pd_redis_journal_append(dir, "arena", id, 100 + v, &rec), 0);
}

/* The journal's versions, in order, into vs (at most cap); how many. */
static size_t versions(uint64_t *vs, size_t cap)
{
    pd_redis_journal_entry *e;
    size_t n;
    assert_int_equal(pd_redis_journal_read(dir, "arena", &e, &n), 0);
    for (size_t i = 0; i < n && i < cap; i++) {
        char id[32];
        snprintf(id, sizeof id, "1-%llu", (unsigned long long)e[i].rec.version);
        assert_string_equal(e[i].id, id);
        assert_int_equal(e[i].g, 100 + e[i].rec.version);
        assert_int_equal(e[i].rec.n_ops, 1);
        assert_int_equal(e[i].rec.ops[0].rect_min.x, (int32_t)e[i].rec.version);
        vs[i] = e[i].rec.version;
    }
    pd_redis_journal_free(e, n);
    return n;
}

static void test_append_read_cut_discard(void **state)
{
    (void)state;
    uint64_t vs[8];
    assert_int_equal(versions(vs, 8), 0); /* no file: nothing */
    for (uint64_t v = 2; v <= 5; v++)
        append_update(v);
    pd_journal_record drop = { .type = PD_JOURNAL_DROP, .version = 6 };
    snprintf(drop.scene, sizeof drop.scene, "arena");
    assert_int_equal(pd_redis_journal_append(dir, "arena", "2-0", 107, &drop), 0);
    assert_int_equal(versions(vs, 8), 4);
    assert_int_equal(vs[0], 2);
    assert_int_equal(vs[3], 5);

    /* Half an entry at the end (a crash mid-write): the four before stay. */
    char path[256];
    pd_redis_journal_path(dir, "arena", path, sizeof path);
    FILE *f = fopen(path, "ab");
    assert_non_null(f);
    fwrite("\x03" "1-6" "\x06\0\0\0\0\0\0\0" "\x20\0\0", 1, 15, f);
    fclose(f);
    assert_int_equal(versions(vs, 8), 4);

    /* A snapshot of version 3 cached: 4 and 5 are left. */
    assert_int_equal(pd_redis_journal_cut(dir, "arena", 3), 0);
    assert_int_equal(versions(vs, 8), 2);
    assert_int_equal(vs[0], 4);
    assert_int_equal(vs[1], 5);
    append_update(6); /* appends go on after a cut */
    assert_int_equal(versions(vs, 8), 3);
    assert_int_equal(vs[2], 6);

    pd_redis_journal_discard(dir, "arena");
    assert_int_equal(versions(vs, 8), 0);
    assert_int_not_equal(access(path, F_OK), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_append_read_cut_discard, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
