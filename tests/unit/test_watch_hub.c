/*
 * test_watch_hub.c - the net layer's watch subscriptions (pd_watchers.c)
 * without sockets: a server struct with the config's defaults, connections
 * that are never opened (their answers pile up in their pending queue,
 * where the test reads them back as frames), a registry with real scenes.
 *
 * What the end-to-end test cannot force: events reaching the hub out of
 * version order (a reload publishing while an update's job is still
 * uncollected) must still go out in version order; an event about a
 * version (INSTANCED, DROPPED, AGENTS_CUT) waits for that version's, and
 * an update's several AGENTS_CUT keep their order; a subscription
 * made at version V skips events up to V; the overflow cap ends every
 * watch of the connection that fell behind and no other; a connection
 * that closes takes its watches with it; a scene dropped and made again
 * under its name is another scene to its watchers (issue 29); one
 * connection holds at most limits.max_watches_per_conn watches, and an
 * event costs what its own scene's watchers cost, encoded once for them
 * all (issue 29, finding 12).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "open_scene.h"
#include "pathd.pb-c.h"
#include "pd_frame.h"
#include "pd_server_internal.h"

#define SIDE 8

typedef struct hub_fixture {
    pd_server *s;
    pd__conn *a, *b;
} hub_fixture;

static pd__conn *fake_conn(pd_server *s, uint64_t id)
{
    pd__conn *c = calloc(1, sizeof *c);
    assert_non_null(c);
    c->server = s;
    c->id = id;
    c->next = s->table.conns;
    s->table.conns = c;
    return c;
}

static void add_scene(pd_registry *r, const char *name)
{
    char err[256];
    assert_int_equal(pd_registry_add(r, open_scene(name, SIDE), err, sizeof err), PD_OK);
}

static int setup(void **state)
{
    hub_fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    f->s = calloc(1, sizeof *f->s);
    assert_non_null(f->s);
    f->s->conf = pd_conf_defaults;
    f->s->dispatch.answering = -1;
    f->s->registry = pd_registry_create();
    assert_non_null(f->s->registry);
    add_scene(f->s->registry, "north");
    add_scene(f->s->registry, "south");
    f->a = fake_conn(f->s, 1);
    f->b = fake_conn(f->s, 2);
    *state = f;
    return 0;
}

static void drop_pending(pd__conn *c)
{
    for (uint32_t i = 0; i < c->n_pend; i++)
        free(c->pend[i].base);
    c->n_pend = 0;
    c->pend_bytes = 0;
    c->out_bytes = 0;
}

static int teardown(void **state)
{
    hub_fixture *f = *state;
    pd__conn *c = f->s->table.conns;
    while (c) {
        pd__conn *next = c->next;
        pd__watch_conn_closed(c);
        drop_pending(c);
        free(c->pend);
        free(c);
        c = next;
    }
    pd__watch_hub_free(f->s);
    pd_registry_destroy(f->s->registry);
    free(f->s);
    free(f);
    return 0;
}

/* The frames queued on c since the last call, unpacked (NULL-terminated;
 * free with free_frames), and the queue emptied. */
static Pathd__V1__Response **take_frames(pd__conn *c)
{
    Pathd__V1__Response **out = calloc(c->n_pend + 1, sizeof *out);
    assert_non_null(out);
    for (uint32_t i = 0; i < c->n_pend; i++) {
        const uint8_t *p = (const uint8_t *)c->pend[i].base;
        assert_true(c->pend[i].len >= PD_FRAME_HEADER_BYTES);
        out[i] = pathd__v1__response__unpack(NULL, c->pend[i].len - PD_FRAME_HEADER_BYTES,
                                             p + PD_FRAME_HEADER_BYTES);
        assert_non_null(out[i]);
    }
    drop_pending(c);
    return out;
}

static void free_frames(Pathd__V1__Response **f)
{
    for (size_t i = 0; f[i]; i++)
        pathd__v1__response__free_unpacked(f[i], NULL);
    free(f);
}

static void watch(pd__conn *c, uint64_t id, const char *const *names, size_t n)
{
    pd_request req;
    memset(&req, 0, sizeof req);
    req.id = id;
    req.kind = PD_REQ_WATCH;
    req.u.watch.scenes = calloc(n, sizeof *req.u.watch.scenes);
    assert_non_null(req.u.watch.scenes);
    for (size_t i = 0; i < n; i++)
        snprintf(req.u.watch.scenes[i], sizeof req.u.watch.scenes[i], "%s", names[i]);
    req.u.watch.n_scenes = n;
    pd__watch_start(c, &req);
    pd_request_free(&req);
}

/* The incarnation of the scene served as `name` (0: none is). */
static uint64_t incarnation_of(pd_server *s, const char *name)
{
    pd_scene *sc = pd_registry_acquire(s->registry, name);
    uint64_t inc = sc ? sc->incarnation : 0;
    pd_scene_release(sc);
    return inc;
}

/* An event about incarnation `inc` of scene. */
static void publish_of(pd_server *s, pd_watch_kind kind, const char *scene, uint64_t inc, uint64_t version)
{
    pd_watch_event ev;
    memset(&ev, 0, sizeof ev);
    ev.kind = kind;
    snprintf(ev.scene, sizeof ev.scene, "%s", scene);
    ev.incarnation = inc;
    ev.version = version;
    if (kind == PD_WATCH_INSTANCED)
        snprintf(ev.instance, sizeof ev.instance, "%s-copy", scene);
    pd__watch_publish(s, &ev);
}

/* An event about the scene served as `scene` now. */
static void publish(pd_server *s, pd_watch_kind kind, const char *scene, uint64_t version)
{
    publish_of(s, kind, scene, incarnation_of(s, scene), version);
}

/* The frames' (kind, version) pairs must be exactly want (n of them). */
static void expect_events(Pathd__V1__Response **f, const uint64_t (*want)[2], size_t n)
{
    size_t k = 0;
    for (; f[k]; k++) {
        assert_true(k < n);
        assert_int_equal(f[k]->body_case, PATHD__V1__RESPONSE__BODY_WATCH_EVENT);
        if (f[k]->watch_event->kind != want[k][0] || f[k]->watch_event->version != want[k][1])
            fail_msg("frame %zu: kind %d version %llu, want kind %d version %llu", k,
                     (int)f[k]->watch_event->kind, (unsigned long long)f[k]->watch_event->version,
                     (int)want[k][0], (unsigned long long)want[k][1]);
    }
    assert_int_equal(k, n);
}

static void test_out_of_order_events_go_out_in_version_order(void **state)
{
    hub_fixture *f = *state;
    const char *const north[] = { "north" };
    watch(f->a, 10, north, 1);
    free_frames(take_frames(f->a)); /* WATCH_STARTED at version 1 */

    /* Version 3 (a reload) and an instance of version 3 arrive before the
     * update that made version 2: nothing goes out until it does. */
    publish(f->s, PD_WATCH_REPLACED, "north", 3);
    publish(f->s, PD_WATCH_INSTANCED, "north", 3);
    publish(f->s, PD_WATCH_UPDATED, "north", 4);
    Pathd__V1__Response **fr = take_frames(f->a);
    assert_null(fr[0]);
    free_frames(fr);
    publish(f->s, PD_WATCH_UPDATED, "north", 2);
    fr = take_frames(f->a);
    const uint64_t want[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 2 },
                                 { PATHD__V1__WATCH_EVENT_KIND__SCENE_REPLACED, 3 },
                                 { PATHD__V1__WATCH_EVENT_KIND__SCENE_INSTANCED, 3 },
                                 { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 4 } };
    expect_events(fr, want, 4);
    for (size_t i = 0; fr[i]; i++) {
        assert_int_equal(fr[i]->id, 10);
        assert_false(fr[i]->final);
    }
    free_frames(fr);

    /* A drop waits for the versions before it, and ends the watch. */
    publish(f->s, PD_WATCH_DROPPED, "north", 5);
    fr = take_frames(f->a);
    assert_null(fr[0]);
    free_frames(fr);
    publish(f->s, PD_WATCH_UPDATED, "north", 5);
    fr = take_frames(f->a);
    const uint64_t want2[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 5 },
                                  { PATHD__V1__WATCH_EVENT_KIND__SCENE_DROPPED, 5 } };
    expect_events(fr, want2, 2);
    assert_true(fr[1]->final);
    free_frames(fr);
    assert_int_equal(pd__watch_count(f->s), 0);
    assert_null(f->a->watches);
    publish(f->s, PD_WATCH_UPDATED, "north", 6);
    fr = take_frames(f->a);
    assert_null(fr[0]);
    free_frames(fr);
}

/* An update's AGENTS_CUT events (issue 34) follow its SCENE_UPDATED and
 * keep their order among themselves, also when all of them are held for an
 * earlier version: held events must not be reordered when one leaves the
 * queue (a swap with the last one did that). */
static void test_agents_cut_follows_its_update_in_order(void **state)
{
    hub_fixture *f = *state;
    const char *const north[] = { "north" };
    watch(f->a, 11, north, 1);
    free_frames(take_frames(f->a));
    uint64_t inc = incarnation_of(f->s, "north");
    pd_watch_event ev;
    publish_of(f->s, PD_WATCH_UPDATED, "north", inc, 3);
    for (uint64_t part = 0; part < 3; part++) {
        memset(&ev, 0, sizeof ev);
        ev.kind = PD_WATCH_AGENTS_CUT;
        snprintf(ev.scene, sizeof ev.scene, "north");
        ev.incarnation = inc;
        ev.version = 3;
        ev.agents[0] = 100 + part;
        ev.n_agents = 1;
        ev.cut_at_ms = 250;
        pd__watch_publish(f->s, &ev);
    }
    Pathd__V1__Response **fr = take_frames(f->a);
    assert_null(fr[0]); /* version 2 has not gone out */
    free_frames(fr);
    publish_of(f->s, PD_WATCH_UPDATED, "north", inc, 2);
    fr = take_frames(f->a);
    const uint64_t want[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 2 },
                                 { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 3 },
                                 { PATHD__V1__WATCH_EVENT_KIND__AGENTS_CUT, 3 },
                                 { PATHD__V1__WATCH_EVENT_KIND__AGENTS_CUT, 3 },
                                 { PATHD__V1__WATCH_EVENT_KIND__AGENTS_CUT, 3 } };
    expect_events(fr, want, 5);
    for (size_t k = 2; k < 5; k++) {
        assert_int_equal(fr[k]->watch_event->n_agents, 1);
        assert_int_equal(fr[k]->watch_event->agents[0], 100 + (k - 2));
        assert_int_equal(fr[k]->watch_event->cut_at_ms, 250);
    }
    free_frames(fr);
}

static void test_late_subscriber_skips_what_it_has(void **state)
{
    hub_fixture *f = *state;
    const char *const south[] = { "south" };
    watch(f->a, 1, south, 1);
    free_frames(take_frames(f->a));
    /* An update to version 2 is published by the registry but its job
     * has not come back yet when b subscribes: b starts at version 2 and
     * must not hear of it again; a must. */
    pd_point cell = { 1, 1 };
    pd_scene_update up = { .op = PD_UPDATE_BLOCK, .cells = &cell, .n_cells = 1 };
    pd_scene_update_result res;
    assert_int_equal(pd_registry_update(f->s->registry, "south", &up, &res), PD_OK);
    assert_int_equal(res.version, 2);
    watch(f->b, 7, south, 1);
    Pathd__V1__Response **fr = take_frames(f->b);
    const uint64_t started[][2] = { { PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED, 2 } };
    expect_events(fr, started, 1);
    free_frames(fr);
    publish(f->s, PD_WATCH_UPDATED, "south", 2);
    publish(f->s, PD_WATCH_UPDATED, "south", 3);
    fr = take_frames(f->a);
    const uint64_t want_a[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 2 },
                                   { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 3 } };
    expect_events(fr, want_a, 2);
    free_frames(fr);
    fr = take_frames(f->b);
    const uint64_t want_b[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 3 } };
    expect_events(fr, want_b, 1);
    free_frames(fr);
}

static void test_overflow_ends_only_the_slow_connections_watches(void **state)
{
    hub_fixture *f = *state;
    const char *const both[] = { "north", "south" };
    const char *const north[] = { "north" };
    watch(f->a, 1, both, 2);
    watch(f->a, 2, north, 1);
    watch(f->b, 3, north, 1);
    free_frames(take_frames(f->a));
    free_frames(take_frames(f->b));
    assert_int_equal(pd__watch_count(f->s), 3);

    /* a leaves its answers unread: more than the cap is queued. */
    f->s->conf.watch_buffer_bytes = 4096;
    f->a->pend_bytes = 4096;
    publish(f->s, PD_WATCH_UPDATED, "north", 2);
    f->a->pend_bytes = 0;
    Pathd__V1__Response **fr = take_frames(f->a);
    size_t overflows = 0;
    for (size_t i = 0; fr[i]; i++) {
        assert_int_equal(fr[i]->status, PATHD__V1__STATUS__WATCH_OVERFLOW);
        assert_true(fr[i]->final);
        assert_non_null(strstr(fr[i]->error->message, "watch_buffer_bytes"));
        overflows++;
    }
    assert_int_equal(overflows, 2);
    free_frames(fr);
    assert_int_equal(f->s->watch.dropped_total, 2);
    assert_null(f->a->watches);
    /* b went on: it heard version 2 and hears 3. */
    publish(f->s, PD_WATCH_UPDATED, "north", 3);
    fr = take_frames(f->b);
    const uint64_t want[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 2 },
                                 { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 3 } };
    expect_events(fr, want, 2);
    free_frames(fr);
    assert_int_equal(pd__watch_count(f->s), 1);

    /* A closed connection's watches go with it; the topic too. */
    pd__watch_conn_closed(f->b);
    assert_int_equal(pd__watch_count(f->s), 0);
    publish(f->s, PD_WATCH_UPDATED, "north", 4);
    fr = take_frames(f->b);
    assert_null(fr[0]);
    free_frames(fr);
}

/* Issue 29, finding 5: a scene dropped and made again under its name while
 * the drop's job is still uncollected. A watch started on the new scene
 * must not hear the old one's SCENE_DROPPED (which ends the old one's
 * watch, and only it), and the old one's watchers hear nothing of the new
 * scene. The frames carry their scene's incarnation. */
static void test_dropped_scene_events_miss_its_successor(void **state)
{
    hub_fixture *f = *state;
    const char *const north[] = { "north" };
    uint64_t old_inc = incarnation_of(f->s, "north");
    watch(f->a, 1, north, 1);
    Pathd__V1__Response **fr = take_frames(f->a);
    assert_non_null(fr[0]);
    assert_int_equal(fr[0]->watch_event->incarnation, old_inc);
    free_frames(fr);

    /* The drop and the create have run on the workers; b watches the new
     * scene before the drop's job comes back to the loop. */
    uint64_t dropped_at = 0;
    assert_int_equal(pd_registry_drop(f->s->registry, "north", &dropped_at), PD_OK);
    add_scene(f->s->registry, "north");
    uint64_t new_inc = incarnation_of(f->s, "north");
    assert_int_not_equal(new_inc, old_inc);
    watch(f->b, 2, north, 1);
    fr = take_frames(f->b);
    const uint64_t started[][2] = { { PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED, 1 } };
    expect_events(fr, started, 1);
    assert_int_equal(fr[0]->watch_event->incarnation, new_inc);
    free_frames(fr);
    assert_int_equal(pd__watch_count(f->s), 2);

    publish_of(f->s, PD_WATCH_DROPPED, "north", old_inc, dropped_at);
    fr = take_frames(f->a);
    const uint64_t dropped[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_DROPPED, 1 } };
    expect_events(fr, dropped, 1);
    assert_true(fr[0]->final);
    assert_int_equal(fr[0]->watch_event->incarnation, old_inc);
    free_frames(fr);
    fr = take_frames(f->b);
    if (fr[0])
        fail_msg("the new scene's watch heard a frame of the old one (status %d, kind %d, final %d)",
                 (int)fr[0]->status, fr[0]->watch_event ? (int)fr[0]->watch_event->kind : -1, (int)fr[0]->final);
    free_frames(fr);
    assert_int_equal(pd__watch_count(f->s), 1);
    assert_non_null(f->b->watches);

    /* The new scene's update reaches b only. */
    publish(f->s, PD_WATCH_UPDATED, "north", 2);
    fr = take_frames(f->b);
    const uint64_t updated[][2] = { { PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 2 } };
    expect_events(fr, updated, 1);
    assert_int_equal(fr[0]->watch_event->incarnation, new_inc);
    assert_false(fr[0]->final);
    free_frames(fr);
    fr = take_frames(f->a);
    assert_null(fr[0]);
    free_frames(fr);
}

static void unwatch(pd__conn *c, uint64_t id, uint64_t target)
{
    pd_request req;
    memset(&req, 0, sizeof req);
    req.id = id;
    req.kind = PD_REQ_UNWATCH;
    req.u.unwatch_target = target;
    pd__watch_stop(c, &req);
}

/* The one frame queued on c: a watch event of kind at version (the queue is
 * emptied). Returns its id. */
static uint64_t expect_one(pd__conn *c, uint64_t kind, uint64_t version)
{
    Pathd__V1__Response **fr = take_frames(c);
    const uint64_t want[][2] = { { kind, version } };
    expect_events(fr, want, 1);
    uint64_t id = fr[0]->id;
    free_frames(fr);
    return id;
}

/* The one frame queued on c: a refusal with status and a message naming
 * what (the queue is emptied). */
static void expect_refusal(pd__conn *c, Pathd__V1__Status status, const char *what)
{
    Pathd__V1__Response **fr = take_frames(c);
    assert_non_null(fr[0]);
    assert_null(fr[1]);
    assert_int_equal(fr[0]->status, status);
    assert_true(fr[0]->final);
    if (!strstr(fr[0]->error->message, what))
        fail_msg("message \"%s\" does not name %s", fr[0]->error->message, what);
    free_frames(fr);
}

/* Issue 29, finding 12: one client could take every max_watchers slot. A
 * connection past limits.max_watches_per_conn is answered LIMIT_EXCEEDED
 * naming the key, and nothing is watched; other connections still watch,
 * and an Unwatch or a closed connection gives its slots back. */
static void test_watches_per_connection_are_capped(void **state)
{
    hub_fixture *f = *state;
    const char *const north[] = { "north" };
    const char *const south[] = { "south" };
    f->s->conf.max_watches_per_conn = 2;
    watch(f->a, 1, north, 1);
    watch(f->a, 2, south, 1);
    free_frames(take_frames(f->a));
    watch(f->a, 3, north, 1);
    expect_refusal(f->a, PATHD__V1__STATUS__LIMIT_EXCEEDED, "limits.max_watches_per_conn is 2");
    assert_int_equal(pd__watch_count(f->s), 2);

    watch(f->b, 4, north, 1);
    assert_int_equal(expect_one(f->b, PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED, 1), 4);

    /* The refused watch hears nothing; the two open ones do. */
    publish(f->s, PD_WATCH_UPDATED, "north", 2);
    assert_int_equal(expect_one(f->a, PATHD__V1__WATCH_EVENT_KIND__SCENE_UPDATED, 2), 1);
    free_frames(take_frames(f->b));

    unwatch(f->a, 5, 1);
    free_frames(take_frames(f->a));
    watch(f->a, 6, north, 1);
    assert_int_equal(expect_one(f->a, PATHD__V1__WATCH_EVENT_KIND__WATCH_STARTED, 1), 6);
    watch(f->a, 7, north, 1);
    expect_refusal(f->a, PATHD__V1__STATUS__LIMIT_EXCEEDED, "max_watches_per_conn");

    pd__watch_conn_closed(f->a);
    assert_int_equal(f->a->n_watches, 0);
    watch(f->a, 8, north, 1);
    free_frames(take_frames(f->a));
    assert_int_equal(pd__watch_count(f->s), 2);
}

/* Issue 29, finding 12: updates slowed as watches were opened. An event
 * visits its own scene's subscriptions and no other, however many watches
 * other scenes have, and is encoded once however many watch its scene:
 * counted in the hub, not timed. */
static void test_publish_costs_only_the_scenes_watchers(void **state)
{
    hub_fixture *f = *state;
    enum { OTHERS = 600 };
    const char *const north[] = { "north" };
    const char *const south[] = { "south" };
    f->s->conf.max_watches_per_conn = OTHERS;
    watch(f->a, 1, north, 1);
    for (uint64_t i = 0; i < OTHERS; i++)
        watch(f->b, 100 + i, south, 1);
    free_frames(take_frames(f->a));
    free_frames(take_frames(f->b));
    assert_int_equal(pd__watch_count(f->s), OTHERS + 1);

    pd__watch_work before = pd__watch_work_done(f->s);
    for (uint64_t v = 2; v <= 11; v++)
        publish(f->s, PD_WATCH_UPDATED, "north", v);
    pd__watch_work after = pd__watch_work_done(f->s);
    assert_int_equal(after.visits - before.visits, 10);
    assert_int_equal(after.encodes - before.encodes, 10);
    Pathd__V1__Response **fr = take_frames(f->a);
    size_t n = 0;
    for (; fr[n]; n++)
        assert_int_equal(fr[n]->watch_event->version, n + 2);
    assert_int_equal(n, 10);
    free_frames(fr);
    fr = take_frames(f->b);
    assert_null(fr[0]);
    free_frames(fr);

    /* South's 600 watches: each visited once, the event encoded once, and
     * each frame carries its own watch's id. */
    before = after;
    publish(f->s, PD_WATCH_UPDATED, "south", 2);
    after = pd__watch_work_done(f->s);
    assert_int_equal(after.visits - before.visits, OTHERS);
    assert_int_equal(after.encodes - before.encodes, 1);
    fr = take_frames(f->b);
    unsigned char seen[OTHERS] = { 0 };
    for (n = 0; fr[n]; n++) {
        assert_int_equal(fr[n]->watch_event->version, 2);
        assert_in_range(fr[n]->id, 100, 100 + OTHERS - 1);
        assert_false(seen[fr[n]->id - 100]);
        seen[fr[n]->id - 100] = 1;
    }
    assert_int_equal(n, OTHERS);
    free_frames(fr);

    /* Its drop: the final frames share one encoding too. */
    before = after;
    publish(f->s, PD_WATCH_DROPPED, "south", 2);
    after = pd__watch_work_done(f->s);
    assert_int_equal(after.encodes - before.encodes, 1);
    fr = take_frames(f->b);
    for (n = 0; fr[n]; n++)
        assert_true(fr[n]->final);
    assert_int_equal(n, OTHERS);
    free_frames(fr);
    assert_int_equal(pd__watch_count(f->s), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_out_of_order_events_go_out_in_version_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agents_cut_follows_its_update_in_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_subscriber_skips_what_it_has, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overflow_ends_only_the_slow_connections_watches, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dropped_scene_events_miss_its_successor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_watches_per_connection_are_capped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_costs_only_the_scenes_watchers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
