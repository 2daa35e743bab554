/*
 * pd_watchers.c - who watches which scene, and getting each change to them in
 * version order. Runs on the loop thread only; the worker pool and the
 * scene layer know nothing of it.
 *
 * A Watch request is one watch (pd__watch): a connection, the request id
 * its frames answer, and one subscription per scene it named. Every scene
 * watched by anyone is a topic (pd__topic, found by name and incarnation in
 * a small hash table) listing its subscriptions. Changes arrive here from
 * the loop thread as pd_watch_events: an update's or a scene change's when
 * its job completes (pd_dispatch.c), a reload's when it publishes
 * (pd_reload.c).
 *
 * Cost. An event costs the loop what its own scene's watchers cost and
 * nothing more: the topic is found by hash, and only its subscriptions are
 * visited, however many watches other scenes have. The event is encoded
 * once (pd_codec_encode_watch_body); each watch's frame is that body with
 * its request id in front. A connection holds at most
 * limits.max_watches_per_conn watches, so one client cannot take every
 * limits.max_watchers slot.
 *
 * Incarnations. A scene dropped and made again under its name is another
 * scene (pd_scene.incarnation), whose versions start over; and the event
 * of the drop can reach the loop after the new scene is served and
 * watched (its job is collected later). Each event names the incarnation
 * it is about and goes to that incarnation's topic only, so a watch of the
 * new scene never hears the old one's events, nor the old one's watchers
 * the new one's.
 *
 * Order. Each scene's versions are made one after another, but their
 * events can reach the loop out of order: a reload publishing version 7
 * while the job that made version 6 has not been collected yet. A topic
 * therefore remembers the newest version it has announced; a version-making
 * event (UPDATED, REPLACED) goes out when it is the next one, an event
 * about a version (INSTANCED, DROPPED, AGENTS_CUT) once that version went
 * out, and anything early is held until the events before it arrive
 * (AGENTS_DISPLACED, a ReservePath's, is about the version it planned on;
 * AGENTS_EXPIRED, the idle sweep's, about the version served when it ran).
 * An update's AGENTS_CUT events (one job's list, pd_kind.event) thus follow
 * its SCENE_UPDATED, held or not, and keep their order among themselves. Every version
 * made while the server runs comes with exactly one event, so nothing is
 * held for long; should that ever fail, at PD__WATCH_MAX_HELD held events
 * they go out in version order anyway, and the gap shows in the versions.
 * A subscription made at version V skips events up to V (its WATCH_STARTED
 * frame already said V).
 *
 * Falling behind. Before an event is queued on a connection, its unread
 * answers are checked against limits.watch_buffer_bytes; past it every
 * watch of that connection ends with a WATCH_OVERFLOW frame (the connection
 * stays open: its other requests are served, and it may Watch again).
 */
#include "pd_server_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pd_index.h"
#include "pd_log.h"

/* Events a topic holds back waiting for an earlier version's, at most. */
#define PD__WATCH_MAX_HELD 64

/* Topic hash buckets to start with; doubled when topics outnumber them. */
#define PD__WATCH_BUCKETS 64

typedef struct pd__topic pd__topic;
typedef struct pd__watch pd__watch;

/* One scene of one watch. */
typedef struct pd__sub {
    pd__watch *watch;
    pd__topic *topic;            /* NULL once ended (its scene was dropped) */
    uint64_t baseline;           /* the version its WATCH_STARTED frame gave */
    uint64_t stamp;              /* the last announcement that visited it */
    struct pd__sub *prev, *next; /* in the topic's list */
} pd__sub;

struct pd__watch {
    pd__conn *conn;
    uint64_t id;                 /* the Watch request's id: every frame answers it */
    size_t live;                 /* subscriptions not ended */
    pd__watch *next;             /* in the connection's list */
    size_t n_subs;
    pd__sub subs[];
};

struct pd__topic {
    char scene[PD_CONF_MAX_NAME];
    uint64_t incarnation;        /* of the scene its subscriptions watch */
    uint64_t announced;          /* newest version whose event went out */
    pd__sub *subs;
    pd_watch_event **held;       /* events waiting for an earlier version's */
    size_t n_held;
    pd__topic *next;             /* in its hash bucket */
};

struct pd__watch_hub {
    pd__topic **buckets;
    size_t n_buckets;            /* power of two */
    size_t n_topics;
    size_t n_watches;
    uint64_t seq;                /* announcements made, for pd__sub.stamp */
    pd__watch_work work;         /* what publishing has cost (pd__watch_work_done) */
};

/* One event's bytes as its watchers share them: the body of its frames,
 * encoded at the first frame that needs it (final or not: a DROPPED event
 * is final for the watch it ends). */
typedef struct pd__event_bytes {
    const pd_watch_event *ev;
    uint8_t *body[2];
    size_t len[2];
} pd__event_bytes;

static void pd__event_bytes_free(pd__event_bytes *eb)
{
    free(eb->body[0]);
    free(eb->body[1]);
}

static pd__topic **pd__topic_slot(pd__watch_hub *hub, const char *scene, uint64_t incarnation)
{
    pd__topic **pp = &hub->buckets[pd_index_hash(scene) & (hub->n_buckets - 1)];
    while (*pp && ((*pp)->incarnation != incarnation || strcmp((*pp)->scene, scene) != 0))
        pp = &(*pp)->next;
    return pp;
}

static pd__topic *pd__topic_find(pd__watch_hub *hub, const char *scene, uint64_t incarnation)
{
    return hub ? *pd__topic_slot(hub, scene, incarnation) : NULL;
}

/* Doubles the bucket array once topics outnumber it; a failed grow only
 * makes chains longer. */
static void pd__hub_grow(pd__watch_hub *hub)
{
    if (hub->n_topics < hub->n_buckets)
        return;
    size_t n = hub->n_buckets * 2;
    pd__topic **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t i = 0; i < hub->n_buckets; i++)
        while (hub->buckets[i]) {
            pd__topic *t = hub->buckets[i];
            hub->buckets[i] = t->next;
            size_t k = pd_index_hash(t->scene) & (n - 1);
            t->next = b[k];
            b[k] = t;
        }
    free(hub->buckets);
    hub->buckets = b;
    hub->n_buckets = n;
}

static pd__watch_hub *pd__hub(pd_server *s)
{
    if (s->watch.hub)
        return s->watch.hub;
    pd__watch_hub *hub = calloc(1, sizeof *hub);
    if (hub && !(hub->buckets = calloc(PD__WATCH_BUCKETS, sizeof *hub->buckets))) {
        free(hub);
        hub = NULL;
    }
    if (hub)
        hub->n_buckets = PD__WATCH_BUCKETS;
    s->watch.hub = hub;
    return hub;
}

static void pd__topic_free(pd__topic *t)
{
    for (size_t i = 0; i < t->n_held; i++)
        free(t->held[i]);
    free(t->held);
    free(t);
}

/* Takes sub off its topic, and the topic away once nobody watches it. */
static void pd__sub_end(pd__watch_hub *hub, pd__sub *sub)
{
    pd__topic *t = sub->topic;
    if (!t)
        return;
    if (sub->prev)
        sub->prev->next = sub->next;
    else
        t->subs = sub->next;
    if (sub->next)
        sub->next->prev = sub->prev;
    sub->topic = NULL;
    sub->watch->live--;
    if (t->subs)
        return;
    pd__topic **pp = pd__topic_slot(hub, t->scene, t->incarnation);
    *pp = t->next;
    hub->n_topics--;
    pd__topic_free(t);
}

/* Ends every subscription of w, unlinks it from its connection and frees it. */
static void pd__watch_free(pd_server *s, pd__watch *w)
{
    for (size_t i = 0; i < w->n_subs; i++)
        pd__sub_end(s->watch.hub, &w->subs[i]);
    for (pd__watch **pp = &w->conn->watches; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            w->conn->n_watches--;
            break;
        }
    s->watch.hub->n_watches--;
    free(w);
}

/* Ends every watch of c with WATCH_OVERFLOW: it has not read its answers. */
static void pd__overflow(pd__conn *c, size_t backlog)
{
    pd_server *s = c->server;
    pd_log_warn("conn %" PRIu64 ": %zu answer bytes unread (limits.watch_buffer_bytes %" PRIu32
                "); ending its watches",
                c->id, backlog, s->conf.watch_buffer_bytes);
    while (c->watches) {
        pd__watch *w = c->watches;
        size_t len = 0;
        char msg[PD__MESSAGE_MAX];
        snprintf(msg, sizeof msg,
                 "watch ended: %zu answer bytes were not read (limits.watch_buffer_bytes %" PRIu32
                 "); read faster, then Watch again from the versions you have",
                 backlog, s->conf.watch_buffer_bytes);
        uint8_t *buf = pd_codec_encode_error(w->id, PD_WATCH_OVERFLOW, msg, &len);
        pd__conn_send(c, buf, len);
        s->watch.dropped_total++;
        pd__watch_free(s, w);
    }
}

/* Queues eb's event for w unless its connection has fallen behind; returns
 * 0, or -1 when that ended every watch of the connection, w included. */
static int pd__deliver(pd__watch *w, pd__event_bytes *eb, int final)
{
    pd__conn *c = w->conn;
    pd_server *s = c->server;
    size_t len = 0;
    uint8_t *buf = NULL;
    final = final != 0;
    if (!eb->body[final] && (eb->body[final] = pd_codec_encode_watch_body(eb->ev, final, &eb->len[final])))
        s->watch.hub->work.encodes++;
    if (eb->body[final])
        buf = pd_codec_frame_with_id(w->id, eb->body[final], eb->len[final], &len);
    size_t backlog = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) + c->pend_bytes;
    if (buf && backlog + len > s->conf.watch_buffer_bytes) {
        free(buf);
        pd__overflow(c, backlog);
        return -1;
    }
    s->watch.events_total++;
    /* Sending may close connections (this one, or others to keep the
     * buffer budget); their watches stay until their close callback
     * (pd__watch_conn_closed), so no subscription vanishes under a caller. */
    pd__conn_send(c, buf, len);
    return 0;
}

/* 1 when ev may go out now: the versions before it have. */
static int pd__ready(const pd__topic *t, const pd_watch_event *ev)
{
    if (ev->kind == PD_WATCH_UPDATED || ev->kind == PD_WATCH_REPLACED)
        return ev->version <= t->announced + 1;
    return ev->version <= t->announced;
}

/* Sends eb's event to every subscription of t that has not seen its version
 * yet. DROPPED ends them (and t with the last one): returns 1 when t is
 * gone. */
static int pd__announce_to(pd_server *s, pd__topic *t, pd__event_bytes *eb)
{
    pd__watch_hub *hub = s->watch.hub;
    const pd_watch_event *ev = eb->ev;
    int dropped = ev->kind == PD_WATCH_DROPPED;
    if ((ev->kind == PD_WATCH_UPDATED || ev->kind == PD_WATCH_REPLACED) && ev->version > t->announced)
        t->announced = ev->version;
    uint64_t seq = ++hub->seq;
    pd__sub *sub = t->subs;
    while (sub) {
        pd__sub *next = sub->next;
        pd__watch *w = sub->watch;
        hub->work.visits++;
        /* An instance, agents moved aside by a ReservePath, or released
         * by expiry or ReleaseAgent all happen at a version without making
         * one: a subscription made at that version has not heard of them yet. */
        int at_version = ev->kind == PD_WATCH_INSTANCED || ev->kind == PD_WATCH_AGENTS_DISPLACED ||
                         ev->kind == PD_WATCH_AGENTS_EXPIRED || ev->kind == PD_WATCH_AGENTS_RELEASED;
        int due = sub->stamp != seq &&
                  (dropped || (at_version ? ev->version >= sub->baseline : ev->version > sub->baseline));
        sub->stamp = seq;
        if (!due) {
            sub = next;
            continue;
        }
        int last = dropped && w->live == 1;
        if (pd__deliver(w, eb, last) != 0) {
            /* The overflow ended every watch of that connection: maybe
             * other subscriptions of t, maybe t. Start over; the stamps
             * skip those already served. */
            if (!(t = pd__topic_find(hub, ev->scene, ev->incarnation)))
                return 1;
            sub = t->subs;
            continue;
        }
        if (dropped) {
            int only = !sub->prev && !next;
            pd__sub_end(hub, sub);
            if (last)
                pd__watch_free(s, w);
            if (only)
                return 1;
        }
        sub = next;
    }
    return 0;
}

/* pd__announce_to with the event's bytes made for it, and freed after. */
static int pd__announce(pd_server *s, pd__topic *t, const pd_watch_event *ev)
{
    pd__event_bytes eb = {.ev = ev};
    int gone = pd__announce_to(s, t, &eb);
    pd__event_bytes_free(&eb);
    return gone;
}

/* 1 when a should go out before b: the older version first; at one
 * version the event that made it before the events about it. Otherwise
 * (equal) the one held first, as the caller scans in held order. */
static int pd__before(const pd_watch_event *a, const pd_watch_event *b)
{
    if (a->version != b->version)
        return a->version < b->version;
    int a_makes = a->kind == PD_WATCH_UPDATED || a->kind == PD_WATCH_REPLACED;
    int b_makes = b->kind == PD_WATCH_UPDATED || b->kind == PD_WATCH_REPLACED;
    return a_makes && !b_makes;
}

/* Sends what t holds that the announced version now lets through, oldest
 * first; with `force`, everything. Returns 1 when t is gone. */
static int pd__release_held(pd_server *s, pd__topic *t, int force)
{
    for (;;) {
        size_t best = t->n_held;
        for (size_t i = 0; i < t->n_held; i++)
            if ((force || pd__ready(t, t->held[i])) && (best == t->n_held || pd__before(t->held[i], t->held[best])))
                best = i;
        if (best == t->n_held)
            return 0;
        pd_watch_event *ev = t->held[best];
        /* Shifted down, not swapped: events held in one order (an update's
         * several AGENTS_CUT) keep it. */
        memmove(&t->held[best], &t->held[best + 1], (t->n_held - best - 1) * sizeof *t->held);
        t->n_held--;
        int gone = pd__announce(s, t, ev);
        free(ev);
        if (gone)
            return 1;
    }
}

void pd__watch_publish(pd_server *s, const pd_watch_event *ev)
{
    pd__topic *t = pd__topic_find(s->watch.hub, ev->scene, ev->incarnation);
    if (!t)
        return;
    if (!pd__ready(t, ev)) {
        pd_watch_event **grown = t->n_held < PD__WATCH_MAX_HELD
                                     ? realloc(t->held, (t->n_held + 1) * sizeof *grown) : NULL;
        pd_watch_event *copy = grown ? malloc(sizeof *copy) : NULL;
        if (grown)
            t->held = grown;
        if (copy) {
            *copy = *ev;
            t->held[t->n_held++] = copy;
            return;
        }
        pd_log_warn("watch of scene '%s': version %" PRIu64 " goes out before version %" PRIu64
                    " (%zu events waited for it)",
                    ev->scene, ev->version, t->announced + 1, t->n_held);
        if (pd__release_held(s, t, 1))
            return;
    }
    if (pd__announce(s, t, ev))
        return;
    pd__release_held(s, t, 0);
}

/* ---- requests ---------------------------------------------------------- */

static pd__watch *pd__watch_of(const pd__conn *c, uint64_t id)
{
    for (pd__watch *w = c->watches; w; w = w->next)
        if (w->id == id)
            return w;
    return NULL;
}

/* Subscribes sub to its scene's topic, made when new at the scene's version. */
static int pd__subscribe(pd__watch_hub *hub, pd__sub *sub, const pd_scene *scene)
{
    pd__topic **pp = pd__topic_slot(hub, scene->name, scene->incarnation);
    pd__topic *t = *pp;
    if (!t) {
        if (!(t = calloc(1, sizeof *t)))
            return -1;
        memcpy(t->scene, scene->name, sizeof t->scene);
        t->incarnation = scene->incarnation;
        t->announced = scene->version;
        *pp = t;
        hub->n_topics++;
        pd__hub_grow(hub);
    }
    sub->topic = t;
    sub->baseline = scene->version;
    sub->next = t->subs;
    if (t->subs)
        t->subs->prev = sub;
    t->subs = sub;
    sub->watch->live++;
    return 0;
}

void pd__watch_start(pd__conn *c, const pd_request *req)
{
    pd_server *s = c->server;
    const pd_watch_req *wr = &req->u.watch;
    if (wr->n_scenes > s->conf.max_watch_scenes) {
        pd__send_error(c, req->id, PD_LIMIT_EXCEEDED, "watch names %zu scenes; limits.max_watch_scenes is %" PRIu32,
                       wr->n_scenes, s->conf.max_watch_scenes);
        return;
    }
    size_t open = s->watch.hub ? s->watch.hub->n_watches : 0;
    if (open >= s->conf.max_watchers) {
        pd__send_error(c, req->id, PD_LIMIT_EXCEEDED, "%zu watches are open on this server (limits.max_watchers)",
                       open);
        return;
    }
    if (c->n_watches >= s->conf.max_watches_per_conn) {
        pd__send_error(c, req->id, PD_LIMIT_EXCEEDED,
                       "%" PRIu32 " watches are open on this connection; limits.max_watches_per_conn is %" PRIu32
                       ": Unwatch one, or name several scenes in one Watch",
                       c->n_watches, s->conf.max_watches_per_conn);
        return;
    }
    if (pd__watch_of(c, req->id)) {
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT,
                       "a watch with request id %" PRIu64 " is open on this connection: use another id", req->id);
        return;
    }
    pd_scene **scenes = calloc(wr->n_scenes, sizeof *scenes);
    pd__watch *w = calloc(1, sizeof *w + wr->n_scenes * sizeof w->subs[0]);
    pd__watch_hub *hub = pd__hub(s);
    if (!scenes || !w || !hub) {
        free(scenes);
        free(w);
        pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
        return;
    }
    size_t got = 0;
    while (got < wr->n_scenes && (scenes[got] = pd_registry_acquire(s->registry, wr->scenes[got])))
        got++;
    if (got < wr->n_scenes) {
        pd__send_error(c, req->id, PD_UNKNOWN_SCENE, "unknown scene '%s': nothing is watched", wr->scenes[got]);
        free(w);
    } else {
        w->conn = c;
        w->id = req->id;
        w->n_subs = wr->n_scenes;
        w->next = c->watches;
        c->watches = w;
        c->n_watches++;
        hub->n_watches++;
        for (size_t i = 0; i < w->n_subs; i++) {
            w->subs[i].watch = w;
            if (pd__subscribe(hub, &w->subs[i], scenes[i]) != 0) {
                pd__watch_free(s, w);
                pd__send_error(c, req->id, PD_INTERNAL, "out of memory");
                w = NULL;
                break;
            }
        }
        if (w)
            pd__observe(s, PD_OK);
        for (size_t i = 0; w && i < w->n_subs; i++) {
            pd_watch_event ev = {.kind = PD_WATCH_STARTED, .incarnation = scenes[i]->incarnation,
                                 .version = scenes[i]->version};
            memcpy(ev.scene, scenes[i]->name, sizeof ev.scene);
            pd__event_bytes eb = {.ev = &ev};
            int ended = pd__deliver(w, &eb, 0) != 0;
            pd__event_bytes_free(&eb);
            if (ended)
                break;
        }
    }
    for (size_t i = 0; i < got; i++)
        pd_scene_release(scenes[i]);
    free(scenes);
}

void pd__watch_stop(pd__conn *c, const pd_request *req)
{
    pd_server *s = c->server;
    pd__watch *w = pd__watch_of(c, req->u.unwatch_target);
    if (!w) {
        pd__send_error(c, req->id, PD_INVALID_ARGUMENT, "no watch with request id %" PRIu64 " on this connection",
                       req->u.unwatch_target);
        return;
    }
    pd_watch_event ev = {.kind = PD_WATCH_ENDED};
    size_t len = 0;
    uint8_t *buf = pd_codec_encode_watch_event(w->id, &ev, 1, &len);
    pd__conn_send(c, buf, len);
    pd__watch_free(s, w);
    pd__observe(s, PD_OK);
    buf = pd_codec_encode_ack(req->id, PD_OK, &len);
    pd__conn_send(c, buf, len);
}

void pd__watch_conn_closed(pd__conn *c)
{
    while (c->watches)
        pd__watch_free(c->server, c->watches);
}

size_t pd__watch_count(const pd_server *s)
{
    return s->watch.hub ? s->watch.hub->n_watches : 0;
}

pd__watch_work pd__watch_work_done(const pd_server *s)
{
    pd__watch_work none = {0, 0};
    return s->watch.hub ? s->watch.hub->work : none;
}

void pd__watch_hub_free(pd_server *s)
{
    pd__watch_hub *hub = s->watch.hub;
    if (!hub)
        return;
    /* Every connection, and so every watch, is gone by now. */
    for (size_t i = 0; i < hub->n_buckets; i++)
        while (hub->buckets[i]) {
            pd__topic *t = hub->buckets[i];
            hub->buckets[i] = t->next;
            pd__topic_free(t);
        }
    free(hub->buckets);
    free(hub);
    s->watch.hub = NULL;
}

/* ---- reloads ----------------------------------------------------------- */

struct pd__watch_reload {
    size_t n;
    pd_scene **before;           /* per topic, retained: the scene it watches as served
                                    before the publish (NULL: that one was not) */
    char (*names)[PD_CONF_MAX_NAME];
    uint64_t *incarnations;
};

pd__watch_reload *pd__watch_reload_begin(pd_server *s)
{
    pd__watch_hub *hub = s->watch.hub;
    if (!hub || hub->n_topics == 0)
        return NULL;
    pd__watch_reload *rl = calloc(1, sizeof *rl);
    if (rl && (!(rl->before = calloc(hub->n_topics, sizeof *rl->before)) ||
               !(rl->names = calloc(hub->n_topics, sizeof *rl->names)) ||
               !(rl->incarnations = calloc(hub->n_topics, sizeof *rl->incarnations)))) {
        free(rl->before);
        free(rl->names);
        free(rl);
        rl = NULL;
    }
    if (!rl) {
        pd_log_error("reload: out of memory noting the watched scenes; watchers will not hear of it");
        return NULL;
    }
    for (size_t i = 0; i < hub->n_buckets; i++)
        for (pd__topic *t = hub->buckets[i]; t; t = t->next) {
            pd_scene *served = pd_registry_acquire(s->registry, t->scene);
            if (served && served->incarnation != t->incarnation) {
                /* Dropped, and made again: its drop's job tells its watchers. */
                pd_scene_release(served);
                served = NULL;
            }
            memcpy(rl->names[rl->n], t->scene, sizeof rl->names[0]);
            rl->incarnations[rl->n] = t->incarnation;
            rl->before[rl->n++] = served;
        }
    return rl;
}

void pd__watch_reload_end(pd_server *s, pd__watch_reload *rl)
{
    if (!rl)
        return;
    for (size_t i = 0; i < rl->n; i++) {
        pd_scene *was = rl->before[i];
        if (!was)
            continue;
        pd_scene *now = pd_registry_acquire(s->registry, rl->names[i]);
        if (now != was) {
            /* A new snapshot of the same scene: a new definition. None, or
             * another scene under the name (a drop and a create on the
             * workers meanwhile): the watched one is gone. */
            int same = now && now->incarnation == rl->incarnations[i];
            pd_watch_event ev = {.kind = same ? PD_WATCH_REPLACED : PD_WATCH_DROPPED,
                                 .incarnation = rl->incarnations[i]};
            memcpy(ev.scene, rl->names[i], sizeof ev.scene);
            ev.version = same ? now->version : was->version;
            if (same) {
                ev.has_changed = 1;
                ev.changed_max = (pd_point){ now->grid->width - 1, now->grid->height - 1 };
            }
            pd__watch_publish(s, &ev);
        }
        pd_scene_release(now);
        pd_scene_release(was);
    }
    free(rl->before);
    free(rl->names);
    free(rl->incarnations);
    free(rl);
}
