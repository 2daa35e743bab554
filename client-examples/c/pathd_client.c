/*
 * pathd_client.c - implementation of the pathd C client (see pathd_client.h).
 *
 * One non-blocking TCP socket per connection, waited on with poll() so every
 * call can honour a timeout. Incoming bytes go into one growable read buffer;
 * complete frames are unpacked with protobuf-c and dispatched into a small
 * table of requests still waiting for answers ("pending"), keyed by id. Path
 * chunks are appended to their entry until the final chunk completes it.
 * Blocking calls pump frames until their own entry completes; anything else
 * that completes meanwhile stays in the table for pdc_recv_result.
 */
#include "pathd_client.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "pathd.pb-c.h"

#define PDC__HEADER_BYTES 4
/* First size of the read buffer: holds a few typical path chunks per recv(),
 * and grows only when a single frame is larger. */
#define PDC__READ_BUFFER_INITIAL (64u * 1024u)
/* Longest "host:port" we accept, in characters (a DNS name is at most 253). */
#define PDC__HOST_PORT_MAX 300

typedef enum pdc__kind {
    PDC__KIND_PATH,             /* answered by PathChunk frames, assembled here */
    PDC__KIND_OTHER,            /* answered by one frame, kept as the Response */
    PDC__KIND_ROUTE,            /* answered by RouteLeg frames and a RouteResult */
    PDC__KIND_WATCH,            /* an open watch: its frames queue as events until
                                   the final one */
} pdc__kind;

/* A request held back by flow control until the in-flight cap has room:
 * its whole frame, packed when it was queued. */
typedef struct pdc__queued {
    uint64_t id;
    uint32_t slots;
    int multi;                  /* answered in several frames (path, route) */
    uint8_t *frame;
    size_t len;
} pdc__queued;

/* A request sent that holds in-flight slots on the server until its last
 * answer frame: kept apart from the pending table, since a blocking call
 * that times out forgets its entry while the server still counts it. */
typedef struct pdc__held {
    uint64_t id;
    uint32_t slots;
    int multi;
} pdc__held;

/* A request still waiting for its answer, or answered but not yet taken. */
typedef struct pdc__pending {
    uint64_t id;
    pdc__kind kind;
    uint64_t done_order;        /* 0 while waiting; completion order once done */
    int status;
    uint32_t chunks;            /* path chunks received so far (next expected seq) */
    pdc_waypoint *waypoints;
    size_t count, capacity;
    double cost;
    uint64_t expansions, search_micros, scene_version;
    int has_start_used, has_goal_used;
    pdc_xy start_used, goal_used;
    int cutoff;
    uint32_t goal_index;
    pdc_timing timing;          /* from the answer's final frame */
    Pathd__V1__Response *response; /* KIND_OTHER: the answer frame */
    pdc_route_result *route;    /* KIND_ROUTE: legs assembled so far (heap) */
    size_t leg_capacity;        /* KIND_ROUTE: waypoint room in the open leg */
    uint32_t leg_frames;        /* KIND_ROUTE: frames of the open leg so far */
    int leg_open;               /* KIND_ROUTE: the last leg has not ended yet */
    size_t route_waypoints;     /* KIND_ROUTE: over every leg, against the cap */
    char message[PDC_MESSAGE_MAX];
} pdc__pending;

struct pdc_conn {
    int fd;                     /* -1 while disconnected */
    char host_port[PDC__HOST_PORT_MAX + 1];
    int timeout_ms;
    uint64_t next_id;
    uint8_t *rbuf;
    size_t rcap, rstart, rend;  /* unconsumed bytes are rbuf[rstart, rend) */
    pdc__pending *pending;
    size_t npending, cap_pending;
    uint64_t completions;       /* source of done_order */
    /* With hundreds of requests in flight, finding an answer's entry and
     * the next finished path must not scan the table (its entries are a few
     * hundred bytes each): */
    uint32_t *index;            /* id -> pending slot + 1 (0: empty), open
                                   addressing, linear probing */
    size_t index_mask;          /* index size - 1 (a power of two), or 0 */
    uint64_t *paths_done;       /* ids of finished paths in completion order, a
                                   ring; an id whose entry has gone is skipped */
    size_t done_head, done_len, done_cap;
    size_t paths, paths_waiting; /* KIND_PATH entries; those not finished yet */
    Pathd__V1__Response **events;  /* watch frames not yet taken by pdc_watch_next,
                                   events[event_head..nevents) in arrival order */
    size_t event_head, nevents, cap_events;
    uint64_t stale_version;     /* Error.version of the last STALE_VERSION answer */
    pdc_timing last_timing;     /* of the answer the last blocking call received */
    char token[PDC_TOKEN_MAX];  /* from pdc_auth; sent again after each reconnect */
    /* Flow control (pdc_set_flow_control): at most cap slots outstanding,
     * the rest queued, at most max_queued. */
    int flow_control;
    uint32_t cap;               /* the server's max_inflight_per_conn */
    uint32_t used;              /* slots of the requests in held[] */
    pdc__held *held;
    size_t nheld, cap_held;
    pdc__queued *queue;         /* a ring: queue[(q_head + k) % q_cap] */
    size_t q_head, q_len, q_cap;
    size_t max_queued;
    int limits_known;
    pdc_limits limits;          /* read on connect when limits_known */
    uint64_t *agents_cut;       /* the last update's (pdc_update_result.agents_cut) */
    size_t cap_agents_cut;
    int retry_attempts;         /* OVERLOADED: attempts in all, within... */
    int retry_deadline_ms;      /* ...this long from the first send (0: the timeout) */
    uint64_t rng;               /* xorshift state for the backoff's jitter */
    uint64_t overloaded_retries;
    /* Replicas (see "Replicas" in pathd_client.h). */
    int reconnect;              /* reconnect and resend within a blocking call */
    int keys;                   /* a fresh idempotency key on every update */
    int max_age_ms;             /* 0: connections are never replaced for age */
    int draining;               /* the server said DRAINING: send nothing more here */
    int in_connect;             /* inside pdc_reconnect (Auth, GetLimits): no recovery */
    int64_t connected_at;       /* pdc__now_ms() when the socket opened */
    uint64_t opened, reconnects, resent, replica_retries;
    char next_key[PDC_IDEMPOTENCY_KEY_MAX + 1]; /* pdc_set_next_idempotency_key */
    char key[PDC_IDEMPOTENCY_KEY_MAX + 1];      /* the key of the update being sent */
    char error[PDC_MESSAGE_MAX];
};

static const char *const pdc__wire_names[PDC_WIRE_STATUS_COUNT] = {
    "OK", "PARTIAL", "NO_PATH", "UNKNOWN_SCENE", "OUT_OF_BOUNDS",
    "START_BLOCKED", "GOAL_BLOCKED", "INVALID_ARGUMENT", "BUDGET_EXCEEDED",
    "DEADLINE_EXCEEDED", "CANCELLED", "OVERLOADED", "MALFORMED",
    "FRAME_TOO_LARGE", "INTERNAL", "UNKNOWN_STATUS" /* 15: never sent */, "UNAUTHENTICATED",
    "PERMISSION_DENIED",
    [PDC_SCENE_EXISTS] = "SCENE_EXISTS",
    [PDC_SCENE_IN_USE] = "SCENE_IN_USE",
    [PDC_LIMIT_EXCEEDED] = "LIMIT_EXCEEDED",
    [PDC_STALE_VERSION] = "STALE_VERSION",
    [PDC_WATCH_OVERFLOW] = "WATCH_OVERFLOW",
    [PDC_DRAINING] = "DRAINING",
    [PDC_UNAVAILABLE] = "UNAVAILABLE",
};

static int pdc__authenticate(pdc_conn *c, char *role, size_t role_len);
static int pdc__read_limits(pdc_conn *c);

/* Indexed by -status. */
static const char *const pdc__client_names[] = {
    "UNKNOWN_STATUS", "DISCONNECTED", "TIMEOUT", "PROTOCOL_ERROR", "NO_MEMORY",
    "BAD_ARGUMENT", "CONNECT_FAILED", "IDLE", "QUEUE_FULL",
};

const char *pdc_status_name(int status)
{
    if (status >= 0 && status < PDC_WIRE_STATUS_COUNT)
        return pdc__wire_names[status] ? pdc__wire_names[status] : "UNKNOWN_STATUS";
    if (status < 0 && -(long)status < (long)(sizeof pdc__client_names / sizeof pdc__client_names[0]))
        return pdc__client_names[-status];
    return "UNKNOWN_STATUS";
}

/* ---- time ---------------------------------------------------------------- */

static int64_t pdc__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t pdc__now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* A deadline of -1 means "no limit". */
static int64_t pdc__deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : pdc__now_ms() + timeout_ms;
}

/* Milliseconds left for poll(): -1 for no limit, 0 once passed. */
static int pdc__remaining_ms(int64_t deadline)
{
    if (deadline < 0)
        return -1;
    int64_t left = deadline - pdc__now_ms();
    if (left <= 0)
        return 0;
    return left > 1000000 ? 1000000 : (int)left;
}

static void pdc__sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* ---- pending table -------------------------------------------------------- */

static void pdc__pending_release(pdc__pending *p)
{
    if (p->route) {
        pdc_route_result_free(p->route);
        free(p->route);
        p->route = NULL;
    }
    free(p->waypoints);
    if (p->response)
        pathd__v1__response__free_unpacked(p->response, NULL);
    p->waypoints = NULL;
    p->response = NULL;
}

/* The index's home bucket for id (Fibonacci hashing: ids are sequential). */
static size_t pdc__index_home(const pdc_conn *c, uint64_t id)
{
    return (size_t)((id * 0x9E3779B97F4A7C15ull) >> 32) & c->index_mask;
}

/* The index bucket holding id, or the empty bucket where it would go. */
static size_t pdc__index_bucket(const pdc_conn *c, uint64_t id)
{
    size_t b = pdc__index_home(c, id);
    while (c->index[b] && c->pending[c->index[b] - 1].id != id)
        b = (b + 1) & c->index_mask;
    return b;
}

/* Rebuilds the index at twice the table's capacity, so that it stays at
 * most half full; 0 when out of memory. */
static int pdc__index_rebuild(pdc_conn *c)
{
    size_t size = 32;
    while (size < 2 * c->cap_pending)
        size *= 2;
    uint32_t *index = calloc(size, sizeof *index);
    if (!index)
        return 0;
    free(c->index);
    c->index = index;
    c->index_mask = size - 1;
    for (size_t i = 0; i < c->npending; i++)
        c->index[pdc__index_bucket(c, c->pending[i].id)] = (uint32_t)(i + 1);
    return 1;
}

/* Takes id out of the index, moving later entries of its probe run back
 * (linear probing's deletion, which needs no tombstones). */
static void pdc__index_delete(pdc_conn *c, uint64_t id)
{
    size_t hole = pdc__index_bucket(c, id);
    c->index[hole] = 0;
    for (size_t b = (hole + 1) & c->index_mask; c->index[b]; b = (b + 1) & c->index_mask) {
        size_t home = pdc__index_home(c, c->pending[c->index[b] - 1].id);
        /* The entry at b may fill the hole unless its home lies in (hole, b]. */
        if (((b - home) & c->index_mask) >= ((b - hole) & c->index_mask)) {
            c->index[hole] = c->index[b];
            c->index[b] = 0;
            hole = b;
        }
    }
}

static pdc__pending *pdc__pending_find(pdc_conn *c, uint64_t id)
{
    if (!c->index)
        return NULL;
    uint32_t slot = c->index[pdc__index_bucket(c, id)];
    return slot ? &c->pending[slot - 1] : NULL;
}

static pdc__pending *pdc__pending_add(pdc_conn *c, uint64_t id, pdc__kind kind)
{
    if (c->npending == c->cap_pending) {
        size_t cap = c->cap_pending ? c->cap_pending * 2 : 16;
        if (cap > UINT32_MAX - 1)
            return NULL;
        pdc__pending *grown = realloc(c->pending, cap * sizeof *grown);
        if (!grown)
            return NULL;
        c->pending = grown;
        c->cap_pending = cap;
    }
    if ((!c->index || c->index_mask + 1 < 2 * c->cap_pending) && !pdc__index_rebuild(c))
        return NULL;
    pdc__pending *p = &c->pending[c->npending++];
    memset(p, 0, sizeof *p);
    p->id = id;
    p->kind = kind;
    c->index[pdc__index_bucket(c, id)] = (uint32_t)c->npending;
    if (kind == PDC__KIND_PATH) {
        c->paths++;
        c->paths_waiting++;
    }
    return p;
}

/* Removes an entry by moving the last one into its slot; the caller has
 * already taken or released what the entry owned. */
static void pdc__pending_remove(pdc_conn *c, pdc__pending *p)
{
    size_t i = (size_t)(p - c->pending);
    if (p->kind == PDC__KIND_PATH) {
        c->paths--;
        if (!p->done_order)
            c->paths_waiting--;
    }
    pdc__index_delete(c, p->id);
    c->pending[i] = c->pending[--c->npending];
    if (i < c->npending)
        c->index[pdc__index_bucket(c, c->pending[i].id)] = (uint32_t)(i + 1);
}

/* Queues a finished path's id for pdc_recv_result. Out of memory, the ring
 * keeps what it has and the entry waits for pdc__paths_done_rescan. */
static void pdc__paths_done_push(pdc_conn *c, uint64_t id)
{
    if (c->done_len == c->done_cap) {
        size_t cap = c->done_cap ? c->done_cap * 2 : 64;
        uint64_t *grown = malloc(cap * sizeof *grown);
        if (!grown)
            return;
        for (size_t k = 0; k < c->done_len; k++)
            grown[k] = c->paths_done[(c->done_head + k) % c->done_cap];
        free(c->paths_done);
        c->paths_done = grown;
        c->done_cap = cap;
        c->done_head = 0;
    }
    c->paths_done[(c->done_head + c->done_len++) % c->done_cap] = id;
}

static void pdc__complete(pdc_conn *c, pdc__pending *p, int status, const char *message)
{
    p->status = status;
    p->done_order = ++c->completions;
    if (p->kind == PDC__KIND_PATH) {
        c->paths_waiting--;
        pdc__paths_done_push(c, p->id);
    }
    if (message && message[0])
        snprintf(p->message, sizeof p->message, "%s", message);
}

/* The connection is gone: the server forgets its requests, so nothing holds
 * a slot, and what was queued will never be sent (its entries fail with
 * the others). */
static void pdc__flow_reset(pdc_conn *c)
{
    for (size_t k = 0; k < c->q_len; k++)
        free(c->queue[(c->q_head + k) % c->q_cap].frame);
    c->q_head = c->q_len = 0;
    c->nheld = 0;
    c->used = 0;
}

/* Closes the socket after a transport or protocol failure and fails every
 * request still waiting with `status`: a stream that broke cannot be trusted
 * to deliver their answers any more. */
static void pdc__fail(pdc_conn *c, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->error, sizeof c->error, fmt, ap);
    va_end(ap);
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    c->rstart = c->rend = 0;
    pdc__flow_reset(c);
    for (size_t i = 0; i < c->npending; i++) {
        pdc__pending *p = &c->pending[i];
        if (p->done_order)
            continue;
        /* Half a path is no path: drop what arrived before the failure. */
        free(p->waypoints);
        p->waypoints = NULL;
        p->count = p->capacity = 0;
        if (p->route) {
            pdc_route_result_free(p->route);
            free(p->route);
            p->route = NULL;
        }
        pdc__complete(c, p, status, c->error);
    }
}

/* ---- connecting --------------------------------------------------------- */

/* Splits "host:port" / "[v6]:port" into its parts; 0 on success. */
static int pdc__split_host_port(const char *hp, char *host, size_t hostlen,
                                char *port, size_t portlen)
{
    const char *colon;
    const char *host_start = hp;
    size_t host_len;
    if (hp[0] == '[') {
        const char *close_br = strchr(hp, ']');
        if (!close_br || close_br[1] != ':')
            return -1;
        host_start = hp + 1;
        host_len = (size_t)(close_br - host_start);
        colon = close_br + 1;
    } else {
        colon = strrchr(hp, ':');
        if (!colon || memchr(hp, ':', (size_t)(colon - hp)))
            return -1;          /* no port, or a bare IPv6 address without [] */
        host_len = (size_t)(colon - hp);
    }
    const char *port_str = colon + 1;
    size_t port_len = strlen(port_str);
    if (host_len == 0 || host_len >= hostlen || port_len == 0 || port_len >= portlen)
        return -1;
    long port_num = 0;
    for (size_t i = 0; i < port_len; i++) {
        if (port_str[i] < '0' || port_str[i] > '9')
            return -1;
        port_num = port_num * 10 + (port_str[i] - '0');
        if (port_num > 65535)
            return -1;
    }
    if (port_num == 0)
        return -1;
    memcpy(host, host_start, host_len);
    host[host_len] = '\0';
    memcpy(port, port_str, port_len + 1);
    return 0;
}

/* Tries one resolved address with a non-blocking connect bounded by the
 * deadline. Returns the connected socket or -1 with errno set. */
static int pdc__connect_one(const struct addrinfo *ai, int64_t deadline)
{
    int fd = socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
    if (fd < 0)
        return -1;
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
        fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        goto fail;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS)
            goto fail;
        struct pollfd pfd = {fd, POLLOUT, 0};
        int r;
        do {
            r = poll(&pfd, 1, pdc__remaining_ms(deadline));
        } while (r < 0 && errno == EINTR);
        if (r == 0) {
            errno = ETIMEDOUT;
            goto fail;
        }
        if (r < 0)
            goto fail;
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0)
            goto fail;
        if (soerr != 0) {
            errno = soerr;
            goto fail;
        }
    }
    /* Requests are small and latency matters more than packet count. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

static int pdc__open_socket(pdc_conn *c, char *err, size_t errlen)
{
    char host[PDC__HOST_PORT_MAX + 1], port[8];
    if (pdc__split_host_port(c->host_port, host, sizeof host, port, sizeof port) != 0) {
        snprintf(err, errlen, "bad server address \"%s\" (want HOST:PORT or [V6]:PORT)",
                 c->host_port);
        return PDC_ERR_ARG;
    }
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    struct addrinfo *list = NULL;
    int gai = getaddrinfo(host, port, &hints, &list);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(gai));
        return PDC_ERR_CONNECT;
    }
    int64_t deadline = pdc__deadline_after(c->timeout_ms);
    int last_errno = 0;
    for (struct addrinfo *ai = list; ai; ai = ai->ai_next) {
        int fd = pdc__connect_one(ai, deadline);
        if (fd >= 0) {
            freeaddrinfo(list);
            c->fd = fd;
            c->rstart = c->rend = 0;
            c->draining = 0;
            c->connected_at = pdc__now_ms();
            if (c->opened++)
                c->reconnects++;
            return PDC_OK;
        }
        last_errno = errno;
    }
    freeaddrinfo(list);
    snprintf(err, errlen, "cannot connect to %s: %s", c->host_port, strerror(last_errno));
    return PDC_ERR_CONNECT;
}

pdc_conn *pdc_connect(const char *host_port, int timeout_ms, char *err, size_t errlen)
{
    return pdc_connect_flags(host_port, timeout_ms, 0, err, errlen);
}

pdc_conn *pdc_connect_flags(const char *host_port, int timeout_ms, unsigned flags, char *err, size_t errlen)
{
    char scratch[PDC_MESSAGE_MAX];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    err[0] = '\0';
    if (!host_port || strlen(host_port) > PDC__HOST_PORT_MAX || timeout_ms < 0) {
        snprintf(err, errlen, "bad server address or timeout");
        return NULL;
    }
    pdc_conn *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    c->fd = -1;
    c->next_id = 1;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : PDC_DEFAULT_TIMEOUT_MS;
    c->flow_control = !(flags & PDC_CONNECT_NO_FLOW_CONTROL);
    c->cap = PDC_DEFAULT_INFLIGHT_CAP;
    c->max_queued = PDC_DEFAULT_MAX_QUEUED;
    c->retry_attempts = PDC_RETRY_ATTEMPTS;
    c->reconnect = 1;
    c->keys = 1;
    c->max_age_ms = PDC_MAX_CONN_AGE_MS;
    c->rng = pdc__now_us() ^ (uint64_t)(uintptr_t)c ^ 0x9e3779b97f4a7c15u;
    if (c->rng == 0)
        c->rng = 1;
    snprintf(c->host_port, sizeof c->host_port, "%s", host_port);
    if (pdc__open_socket(c, err, errlen) != PDC_OK) {
        free(c);
        return NULL;
    }
    /* As inside pdc_reconnect: a draining server's refusal is not chased
     * here (the connection stays; the first blocking call moves). It is
     * marked draining so that first call moves before it sends, rather
     * than spending a retry attempt on a connection already refused. */
    c->in_connect = 1;
    if (pdc__read_limits(c) == PDC_DRAINING)
        c->draining = 1;
    c->in_connect = 0;
    return c;
}

void pdc_close(pdc_conn *c)
{
    if (!c)
        return;
    if (c->fd >= 0)
        close(c->fd);
    pdc__flow_reset(c);
    free(c->queue);
    free(c->held);
    for (size_t i = 0; i < c->npending; i++)
        pdc__pending_release(&c->pending[i]);
    for (size_t i = c->event_head; i < c->nevents; i++)
        pathd__v1__response__free_unpacked(c->events[i], NULL);
    free(c->events);
    free(c->pending);
    free(c->index);
    free(c->paths_done);
    free(c->agents_cut);
    free(c->rbuf);
    free(c);
}

int pdc_reconnect(pdc_conn *c)
{
    if (!c)
        return PDC_ERR_ARG;
    if (c->fd >= 0)
        pdc__fail(c, PDC_ERR_DISCONNECTED, "connection closed by pdc_reconnect");
    char err[PDC_MESSAGE_MAX];
    int r = pdc__open_socket(c, err, sizeof err);
    if (r != PDC_OK) {
        snprintf(c->error, sizeof c->error, "%s", err);
        return PDC_ERR_CONNECT;
    }
    const int nested = c->in_connect;
    c->in_connect = 1;
    const char *what = "Auth";
    r = c->token[0] ? pdc__authenticate(c, NULL, 0) : PDC_OK;
    if (r == PDC_OK) {
        what = "GetLimits";
        r = pdc__read_limits(c);
    }
    c->in_connect = nested;
    if (r == PDC_DRAINING) {
        /* A draining replica answers Auth (before it looks at the token)
         * and GetLimits DRAINING: this connection is given up at once, and
         * a blocking call connects again after the reconnect backoff
         * (pdc__reopen), as when connecting fails, so it neither fails at
         * once nor hammers the replica; the balancer picks another. Nothing
         * else was sent on it: the queue waits for the next. */
        snprintf(c->error, sizeof c->error, "%s on the new connection was answered DRAINING "
                 "(a draining replica): connection closed", what);
        close(c->fd);
        c->fd = -1;
        c->rstart = c->rend = 0;
        c->nheld = 0;
        c->used = 0;
    }
    return r;
}

void pdc_set_reconnect(pdc_conn *c, int on)
{
    if (c)
        c->reconnect = on != 0;
}

void pdc_set_max_conn_age(pdc_conn *c, int max_age_ms)
{
    if (c && max_age_ms >= 0)
        c->max_age_ms = max_age_ms;
}

void pdc_set_idempotency_keys(pdc_conn *c, int on)
{
    if (c)
        c->keys = on != 0;
}

int pdc_set_next_idempotency_key(pdc_conn *c, const char *key)
{
    if (!c || !key || !key[0] || strlen(key) > PDC_IDEMPOTENCY_KEY_MAX)
        return PDC_ERR_ARG;
    for (const char *k = key; *k; k++)
        if (*k <= ' ' || *k > '~')
            return PDC_ERR_ARG;
    snprintf(c->next_key, sizeof c->next_key, "%s", key);
    return PDC_OK;
}

uint64_t pdc_reconnects(const pdc_conn *c)
{
    return c ? c->reconnects : 0;
}

uint64_t pdc_resent(const pdc_conn *c)
{
    return c ? c->resent : 0;
}

uint64_t pdc_replica_retries(const pdc_conn *c)
{
    return c ? c->replica_retries : 0;
}

int pdc_is_connected(const pdc_conn *c)
{
    return c && c->fd >= 0;
}

void pdc_set_timeout(pdc_conn *c, int timeout_ms)
{
    if (c && timeout_ms > 0)
        c->timeout_ms = timeout_ms;
}

pdc_timing pdc_last_timing(const pdc_conn *c)
{
    pdc_timing none = {0, 0};
    return c ? c->last_timing : none;
}

const char *pdc_last_error(const pdc_conn *c)
{
    return c ? c->error : "no connection";
}

size_t pdc_in_flight(const pdc_conn *c)
{
    return c ? c->paths : 0;
}

/* ---- sending ---------------------------------------------------------------- */

/* Packs req as one frame (length prefix, then the message) at out, which has
 * room for PDC__HEADER_BYTES + its packed size (given as len). */
static void pdc__pack_frame(const Pathd__V1__Request *req, size_t len, uint8_t *out)
{
    out[0] = (uint8_t)(len >> 24);
    out[1] = (uint8_t)(len >> 16);
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
    pathd__v1__request__pack(req, out + PDC__HEADER_BYTES);
}

/* Writes buf[0, total) whole. A timeout or error after part of it went out
 * leaves the stream unusable, so both close the connection. */
static int pdc__send_bytes(pdc_conn *c, const uint8_t *buf, size_t total)
{
    size_t sent = 0;
    int64_t deadline = pdc__deadline_after(c->timeout_ms);
    while (sent < total) {
        ssize_t n = send(c->fd, buf + sent, total - sent, MSG_NOSIGNAL);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            struct pollfd pfd = {c->fd, POLLOUT, 0};
            int r = poll(&pfd, 1, pdc__remaining_ms(deadline));
            if (r == 0) {
                pdc__fail(c, PDC_ERR_DISCONNECTED, "send timed out after %d ms; connection closed",
                          c->timeout_ms);
                return PDC_ERR_TIMEOUT;
            }
            continue;
        }
        pdc__fail(c, PDC_ERR_DISCONNECTED, "send failed: %s", strerror(errno));
        return PDC_ERR_DISCONNECTED;
    }
    return PDC_OK;
}

/* Writes one whole frame (see pdc__send_bytes). */
static int pdc__send_frame(pdc_conn *c, const Pathd__V1__Request *req)
{
    if (c->fd < 0)
        return PDC_ERR_DISCONNECTED;
    size_t len = pathd__v1__request__get_packed_size(req);
    if (len > PDC_MAX_FRAME_BYTES)
        return PDC_ERR_ARG;
    uint8_t stack_buf[512];
    uint8_t *buf = len + PDC__HEADER_BYTES <= sizeof stack_buf
                       ? stack_buf : malloc(len + PDC__HEADER_BYTES);
    if (!buf)
        return PDC_ERR_NOMEM;
    pdc__pack_frame(req, len, buf);
    int result = pdc__send_bytes(c, buf, len + PDC__HEADER_BYTES);
    if (buf != stack_buf)
        free(buf);
    return result;
}

/* ---- flow control ------------------------------------------------------------
 * The server counts some requests against max_inflight_per_conn (one slot
 * each, a Batch one per item) and answers the excess OVERLOADED. A
 * connection with flow control keeps at most `cap` slots outstanding and
 * queues the rest, in order, sending them as answers free slots (pdc__pump,
 * run whenever a frame is read), as HTTP/2 clients respect
 * MAX_CONCURRENT_STREAMS. */

/* The slots req takes on the server: the kinds it hands to a worker
 * (server/net/pd_dispatch.c, pd__inflight_ok); Ping, GetLimits, Watch,
 * Cancel... are answered on its event loop and take none. A Batch over the
 * cap counts as the cap: it goes alone, for the server to refuse it. */
static uint32_t pdc__slots(const pdc_conn *c, const Pathd__V1__Request *req)
{
    uint32_t n;
    switch (req->body_case) {
    case PATHD__V1__REQUEST__BODY_FIND_PATH:
    case PATHD__V1__REQUEST__BODY_FIND_ROUTE:
    case PATHD__V1__REQUEST__BODY_UPDATE_CELLS:
    case PATHD__V1__REQUEST__BODY_CREATE_SCENE:
    case PATHD__V1__REQUEST__BODY_CREATE_INSTANCE:
    case PATHD__V1__REQUEST__BODY_DROP_SCENE:
    case PATHD__V1__REQUEST__BODY_RAYCAST:
    case PATHD__V1__REQUEST__BODY_VALIDATE_MOVE:
    case PATHD__V1__REQUEST__BODY_MOVE_ALONG:
    case PATHD__V1__REQUEST__BODY_NEAREST:
    case PATHD__V1__REQUEST__BODY_REACHABLE:
    case PATHD__V1__REQUEST__BODY_RANDOM_POINT:
    case PATHD__V1__REQUEST__BODY_DISTANCE_TO_WALL:
        n = 1;
        break;
    case PATHD__V1__REQUEST__BODY_BATCH:
        n = req->batch ? (uint32_t)req->batch->n_items : 0;
        break;
    default:
        return 0;
    }
    return n > c->cap ? c->cap : n;
}

/* Whether a request of `slots` may be sent now rather than queued: flow
 * control is off, it takes no slot, or nothing queued is ahead of it and
 * the cap has room. */
static int pdc__fits(const pdc_conn *c, uint32_t slots)
{
    return !c->flow_control || slots == 0 || (c->q_len == 0 && c->used + slots <= c->cap);
}

/* Room in held[] for `more` entries, made before the sends they record. */
static int pdc__hold_reserve(pdc_conn *c, size_t more)
{
    if (c->nheld + more <= c->cap_held)
        return PDC_OK;
    size_t cap = c->cap_held ? c->cap_held : 64;
    while (cap < c->nheld + more)
        cap *= 2;
    pdc__held *grown = realloc(c->held, cap * sizeof *grown);
    if (!grown)
        return PDC_ERR_NOMEM;
    c->held = grown;
    c->cap_held = cap;
    return PDC_OK;
}

/* Records a request just sent that takes slots (room reserved). */
static void pdc__hold(pdc_conn *c, uint64_t id, uint32_t slots, int multi)
{
    if (!c->flow_control || slots == 0 || c->nheld == c->cap_held)
        return;
    c->held[c->nheld++] = (pdc__held){id, slots, multi};
    c->used += slots;
}

/* A frame of request `id` arrived: gives back its slots if it was the last
 * one. Returns 1 when slots were freed. */
static int pdc__release(pdc_conn *c, uint64_t id, int final)
{
    for (size_t k = 0; k < c->nheld; k++) {
        if (c->held[k].id != id)
            continue;
        if (c->held[k].multi && !final)
            return 0;
        c->used -= c->held[k].slots;
        c->held[k] = c->held[--c->nheld];
        return 1;
    }
    return 0;
}

/* Queues request req (its id set) as a packed frame. */
static int pdc__enqueue(pdc_conn *c, const Pathd__V1__Request *req, uint32_t slots, int multi)
{
    size_t len = pathd__v1__request__get_packed_size(req);
    if (len > PDC_MAX_FRAME_BYTES)
        return PDC_ERR_ARG;
    if (c->q_len == c->q_cap) {
        size_t cap = c->q_cap ? c->q_cap * 2 : 64;
        pdc__queued *grown = malloc(cap * sizeof *grown);
        if (!grown)
            return PDC_ERR_NOMEM;
        for (size_t k = 0; k < c->q_len; k++)
            grown[k] = c->queue[(c->q_head + k) % c->q_cap];
        free(c->queue);
        c->queue = grown;
        c->q_cap = cap;
        c->q_head = 0;
    }
    uint8_t *frame = malloc(len + PDC__HEADER_BYTES);
    if (!frame)
        return PDC_ERR_NOMEM;
    pdc__pack_frame(req, len, frame);
    c->queue[(c->q_head + c->q_len++) % c->q_cap] =
        (pdc__queued){req->id, slots, multi, frame, len + PDC__HEADER_BYTES};
    return PDC_OK;
}

/* PDC_ERR_QUEUE_FULL (with the reason in c->error) when `more` requests
 * would not fit in the queue. */
static int pdc__queue_room(pdc_conn *c, size_t more)
{
    if (c->q_len <= c->max_queued && more <= c->max_queued - c->q_len)
        return PDC_OK;
    snprintf(c->error, sizeof c->error,
             "%zu requests already wait for this connection's in-flight cap of %u (max_queued %zu); "
             "nothing was sent", c->q_len, c->cap, c->max_queued);
    return PDC_ERR_QUEUE_FULL;
}

/* Sends the queued requests the cap has room for, in order; drops those
 * whose blocking call gave up (timed out) meanwhile. */
static void pdc__pump(pdc_conn *c)
{
    while (c->q_len > 0 && c->fd >= 0 && !c->draining) {
        pdc__queued q = c->queue[c->q_head];
        if (pdc__pending_find(c, q.id) &&
            ((c->flow_control && c->used + q.slots > c->cap) || pdc__hold_reserve(c, 1) != PDC_OK))
            return;
        c->q_head = (c->q_head + 1) % c->q_cap;
        c->q_len--;
        int r = pdc__pending_find(c, q.id) ? pdc__send_bytes(c, q.frame, q.len) : PDC_ERR_IDLE;
        free(q.frame);
        if (r == PDC_OK)
            pdc__hold(c, q.id, q.slots, q.multi);
        else if (r != PDC_ERR_IDLE)
            return; /* pdc__fail closed the connection and failed everything */
    }
}

/* Takes a queued request out before it is sent (a cancel, a timeout);
 * 1 when it was there. */
static int pdc__unqueue(pdc_conn *c, uint64_t id)
{
    for (size_t k = 0; k < c->q_len; k++) {
        pdc__queued *q = &c->queue[(c->q_head + k) % c->q_cap];
        if (q->id != id)
            continue;
        free(q->frame);
        for (size_t j = k; j + 1 < c->q_len; j++)
            c->queue[(c->q_head + j) % c->q_cap] = c->queue[(c->q_head + j + 1) % c->q_cap];
        c->q_len--;
        return 1;
    }
    return 0;
}

/* A pause of backoff_ms plus up to half of it at random (xorshift64), so
 * clients refused together do not all retry together. */
static uint64_t pdc__rand(pdc_conn *c)
{
    c->rng ^= c->rng << 13;
    c->rng ^= c->rng >> 7;
    c->rng ^= c->rng << 17;
    return c->rng;
}

static int pdc__jittered(pdc_conn *c, int backoff_ms)
{
    return backoff_ms + (int)(pdc__rand(c) % (uint64_t)(backoff_ms / 2 + 1));
}

void pdc_set_flow_control(pdc_conn *c, int on)
{
    if (!c)
        return;
    c->flow_control = on != 0;
    if (on)
        pdc__pump(c);
}

void pdc_set_max_queued(pdc_conn *c, size_t max_queued)
{
    if (c)
        c->max_queued = max_queued;
}

void pdc_set_retry(pdc_conn *c, int attempts, int deadline_ms)
{
    if (!c)
        return;
    if (attempts >= 1)
        c->retry_attempts = attempts;
    if (deadline_ms >= 0)
        c->retry_deadline_ms = deadline_ms;
}

uint32_t pdc_inflight_cap(const pdc_conn *c)
{
    return c && c->flow_control ? c->cap : 0;
}

uint32_t pdc_slots_in_flight(const pdc_conn *c)
{
    return c ? c->used : 0;
}

size_t pdc_queued(const pdc_conn *c)
{
    return c ? c->q_len : 0;
}

uint64_t pdc_overloaded_retries(const pdc_conn *c)
{
    return c ? c->overloaded_retries : 0;
}

int pdc_conn_limits(const pdc_conn *c, pdc_limits *out)
{
    if (!c || !out || !c->limits_known)
        return 0;
    *out = c->limits;
    return 1;
}

/* Reads GetLimits for flow control; a server that refuses it (no token
 * yet, an older pathd) leaves the default cap. It goes out with an id of
 * its own, the largest, so the caller's ids still run 1, 2, 3... Returns
 * PDC_DRAINING when a draining server refused it (pdc_reconnect then gives
 * the connection up), else PDC_OK. */
static int pdc__read_limits(pdc_conn *c)
{
    if (!c->flow_control || c->fd < 0)
        return PDC_OK;
    pdc_limits l;
    const uint64_t next_id = c->next_id;
    c->next_id = UINT64_MAX;
    const int r = pdc_get_limits(c, &l);
    c->next_id = next_id;
    if (r != PDC_OK)
        return r == PDC_DRAINING ? r : PDC_OK;
    c->limits = l;
    c->limits_known = 1;
    if (l.max_inflight_per_conn > 0)
        c->cap = l.max_inflight_per_conn;
    return PDC_OK;
}

/* ---- receiving ------------------------------------------------------------ */

/* Makes room for `need` unconsumed bytes starting at rstart. */
static int pdc__reserve(pdc_conn *c, size_t need)
{
    if (c->rstart + need <= c->rcap)
        return PDC_OK;
    if (c->rstart > 0) {
        memmove(c->rbuf, c->rbuf + c->rstart, c->rend - c->rstart);
        c->rend -= c->rstart;
        c->rstart = 0;
    }
    if (need <= c->rcap)
        return PDC_OK;
    size_t cap = need > PDC__READ_BUFFER_INITIAL ? need : PDC__READ_BUFFER_INITIAL;
    uint8_t *grown = realloc(c->rbuf, cap);
    if (!grown)
        return PDC_ERR_NOMEM;
    c->rbuf = grown;
    c->rcap = cap;
    return PDC_OK;
}

/* Reads until one whole frame is buffered and unpacks it. Returns PDC_OK with
 * *out set, PDC_ERR_TIMEOUT (connection intact, partial bytes kept), or the
 * failure that pdc__fail has already applied to the connection. */
static int pdc__read_frame(pdc_conn *c, int64_t deadline, Pathd__V1__Response **out)
{
    for (;;) {
        if (c->fd < 0)
            return PDC_ERR_DISCONNECTED;
        size_t avail = c->rend - c->rstart;
        size_t need = PDC__HEADER_BYTES;
        if (avail >= PDC__HEADER_BYTES) {
            const uint8_t *h = c->rbuf + c->rstart;
            uint32_t len = (uint32_t)h[0] << 24 | (uint32_t)h[1] << 16 |
                           (uint32_t)h[2] << 8 | (uint32_t)h[3];
            /* Checked before anything is allocated for the frame. */
            if (len > PDC_MAX_FRAME_BYTES) {
                pdc__fail(c, PDC_ERR_PROTOCOL,
                          "server sent a %u-byte frame, above the %u-byte limit",
                          len, PDC_MAX_FRAME_BYTES);
                return PDC_ERR_PROTOCOL;
            }
            need = PDC__HEADER_BYTES + (size_t)len;
            if (avail >= need) {
                Pathd__V1__Response *resp = pathd__v1__response__unpack(
                    NULL, len, c->rbuf + c->rstart + PDC__HEADER_BYTES);
                c->rstart += need;
                if (c->rstart == c->rend)
                    c->rstart = c->rend = 0;
                if (!resp) {
                    pdc__fail(c, PDC_ERR_PROTOCOL, "server sent a frame that does not decode");
                    return PDC_ERR_PROTOCOL;
                }
                *out = resp;
                return PDC_OK;
            }
        }
        if (pdc__reserve(c, need) != PDC_OK) {
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory for a %zu-byte frame", need);
            return PDC_ERR_NOMEM;
        }
        ssize_t n = recv(c->fd, c->rbuf + c->rend, c->rcap - c->rend, 0);
        if (n > 0) {
            c->rend += (size_t)n;
            continue;
        }
        if (n == 0) {
            pdc__fail(c, PDC_ERR_DISCONNECTED, "server closed the connection");
            return PDC_ERR_DISCONNECTED;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            pdc__fail(c, PDC_ERR_DISCONNECTED, "receive failed: %s", strerror(errno));
            return PDC_ERR_DISCONNECTED;
        }
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int r = poll(&pfd, 1, pdc__remaining_ms(deadline));
        if (r == 0)
            return PDC_ERR_TIMEOUT;
        if (r < 0 && errno != EINTR) {
            pdc__fail(c, PDC_ERR_DISCONNECTED, "poll failed: %s", strerror(errno));
            return PDC_ERR_DISCONNECTED;
        }
    }
}

/* How many waypoints a frame's packed arrays hold; -1 when the arrays that
 * are present disagree on it (a broken peer). */
static long pdc__points_count(const Pathd__V1__Waypoints *m)
{
    if (m == NULL)
        return 0;
    size_t n = m->n_dx;
    if (m->n_dy != n || (m->n_t != 0 && m->n_t != n) || (m->n_wx != 0 && m->n_wx != n) || m->n_wy != m->n_wx)
        return -1;
    return (long)n;
}

/* Writes a frame's waypoints to dst: cells by running sums over the deltas
 * (the first is absolute), times and world centres when they were sent. */
static void pdc__points_decode(const Pathd__V1__Waypoints *m, pdc_waypoint *dst)
{
    uint32_t x = 0, y = 0;   /* unsigned: a hostile delta must not be undefined behaviour */
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->n_dx; i++) {
        x += (uint32_t)m->dx[i];
        y += (uint32_t)m->dy[i];
        dst[i] = (pdc_waypoint){(int32_t)x, (int32_t)y, m->n_wx ? m->wx[i] : 0, m->n_wx ? m->wy[i] : 0,
                                m->n_t ? m->t[i] : 0};
    }
}

static int pdc__append_chunk(pdc_conn *c, pdc__pending *p, const Pathd__V1__PathChunk *chunk)
{
    if (chunk->seq != p->chunks) {
        pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: path chunk %u arrived, expected %u",
                  (unsigned long long)p->id, chunk->seq, p->chunks);
        return PDC_ERR_PROTOCOL;
    }
    p->chunks++;
    long pts = pdc__points_count(chunk->points);
    if (pts < 0) {
        pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: path chunk %u has waypoint arrays of different lengths",
                  (unsigned long long)p->id, chunk->seq);
        return PDC_ERR_PROTOCOL;
    }
    size_t n = (size_t)pts;
    if (n > PDC_MAX_PATH_WAYPOINTS - p->count) {
        pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: path longer than %u waypoints",
                  (unsigned long long)p->id, PDC_MAX_PATH_WAYPOINTS);
        return PDC_ERR_PROTOCOL;
    }
    if (p->count + n > p->capacity) {
        size_t cap = p->capacity ? p->capacity : 64;
        while (cap < p->count + n)
            cap *= 2;
        pdc_waypoint *grown = realloc(p->waypoints, cap * sizeof *grown);
        if (!grown) {
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory for %zu waypoints", cap);
            return PDC_ERR_NOMEM;
        }
        p->waypoints = grown;
        p->capacity = cap;
    }
    pdc__points_decode(chunk->points, p->waypoints + p->count);
    p->count += n;
    return PDC_OK;
}

/* The totals a path's final chunk carries. */
static void pdc__chunk_totals(pdc__pending *p, const Pathd__V1__PathChunk *chunk)
{
    p->cost = chunk->cost;
    p->expansions = chunk->expansions;
    p->search_micros = chunk->search_micros;
    p->scene_version = chunk->scene_version;
    if (chunk->start_used) {
        p->has_start_used = 1;
        p->start_used = (pdc_xy){chunk->start_used->x, chunk->start_used->y};
    }
    if (chunk->goal_used) {
        p->has_goal_used = 1;
        p->goal_used = (pdc_xy){chunk->goal_used->x, chunk->goal_used->y};
    }
    p->cutoff = (int)chunk->cutoff;
    p->goal_index = chunk->goal_index;
}

static char *pdc__strdup(const char *s)
{
    size_t n = strlen(s ? s : "") + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s ? s : "", n);
    return d;
}

/* Adds one RouteLeg frame to the route being assembled: a new leg starts at
 * seq 0 with the next leg index; an open leg continues with the next seq in
 * the same scene. Anything else breaks the protocol. */
static int pdc__route_leg_frame(pdc_conn *c, pdc__pending *p, const Pathd__V1__RouteLeg *f)
{
    pdc_route_result *r = p->route;
    unsigned long long id = (unsigned long long)p->id;
    pdc_route_leg *leg;
    if (p->leg_open) {
        leg = &r->legs[r->leg_count - 1];
        if (f->leg != r->leg_count - 1 || f->seq != p->leg_frames || strcmp(leg->scene, f->scene ? f->scene : "")) {
            pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: route frame leg %u seq %u arrived, expected leg %zu seq %u",
                      id, f->leg, f->seq, r->leg_count - 1, p->leg_frames);
            return PDC_ERR_PROTOCOL;
        }
    } else {
        if (f->leg != r->leg_count || f->seq != 0) {
            pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: route frame leg %u seq %u arrived, expected leg %zu seq 0",
                      id, f->leg, f->seq, r->leg_count);
            return PDC_ERR_PROTOCOL;
        }
        if (r->leg_count >= PDC_MAX_ROUTE_LEGS) {
            pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: route longer than %u legs", id, PDC_MAX_ROUTE_LEGS);
            return PDC_ERR_PROTOCOL;
        }
        pdc_route_leg *grown = realloc(r->legs, (r->leg_count + 1) * sizeof *grown);
        if (!grown) {
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory for %zu route legs", r->leg_count + 1);
            return PDC_ERR_NOMEM;
        }
        r->legs = grown;
        leg = &r->legs[r->leg_count++];
        memset(leg, 0, sizeof *leg);
        if (!(leg->scene = pdc__strdup(f->scene))) {
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory for a scene name");
            return PDC_ERR_NOMEM;
        }
        p->leg_open = 1;
        p->leg_frames = 0;
        p->leg_capacity = 0;
    }
    p->leg_frames++;

    long pts = pdc__points_count(f->points);
    if (pts < 0) {
        pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: route leg %u has waypoint arrays of different lengths", id,
                  f->leg);
        return PDC_ERR_PROTOCOL;
    }
    size_t n = (size_t)pts;
    if (n > PDC_MAX_PATH_WAYPOINTS - p->route_waypoints) {
        pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: route longer than %u waypoints", id, PDC_MAX_PATH_WAYPOINTS);
        return PDC_ERR_PROTOCOL;
    }
    if (leg->count + n > p->leg_capacity) {
        size_t cap = p->leg_capacity ? p->leg_capacity : 64;
        while (cap < leg->count + n)
            cap *= 2;
        pdc_waypoint *grown = realloc(leg->waypoints, cap * sizeof *grown);
        if (!grown) {
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory for %zu waypoints", cap);
            return PDC_ERR_NOMEM;
        }
        leg->waypoints = grown;
        p->leg_capacity = cap;
    }
    pdc__points_decode(f->points, leg->waypoints + leg->count);
    leg->count += n;
    p->route_waypoints += n;
    leg->scene_version = f->scene_version;
    if (!f->leg_end)
        return PDC_OK;

    p->leg_open = 0;
    if (f->total_waypoints != leg->count) {
        pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: leg %u says %u waypoints, %zu arrived", id, f->leg,
                  f->total_waypoints, leg->count);
        return PDC_ERR_PROTOCOL;
    }
    leg->cost = f->cost;
    if (f->portal) {
        const Pathd__V1__PortalHop *h = f->portal;
        leg->has_portal = 1;
        leg->portal = pdc__strdup(h->name);
        leg->portal_to_scene = pdc__strdup(h->to_scene);
        if (!leg->portal || !leg->portal_to_scene) {
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory for a portal name");
            return PDC_ERR_NOMEM;
        }
        if (h->exit)
            leg->portal_exit = (pdc_xy){h->exit->x, h->exit->y};
        if (h->entry)
            leg->portal_entry = (pdc_xy){h->entry->x, h->entry->y};
        leg->portal_cost = h->cost;
    }
    return PDC_OK;
}

/* Files one frame of a route answer: a leg frame, the final RouteResult, or
 * a final error. */
static int pdc__route_frame(pdc_conn *c, pdc__pending *p, const Pathd__V1__Response *resp)
{
    if (!p->route && !(p->route = calloc(1, sizeof *p->route))) {
        pdc__fail(c, PDC_ERR_NOMEM, "out of memory for a route");
        return PDC_ERR_NOMEM;
    }
    if (resp->body_case == PATHD__V1__RESPONSE__BODY_ROUTE_LEG && resp->route_leg) {
        if (resp->final) {
            pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: a route leg frame is marked final",
                      (unsigned long long)p->id);
            return PDC_ERR_PROTOCOL;
        }
        return pdc__route_leg_frame(c, p, resp->route_leg);
    }
    if (resp->body_case == PATHD__V1__RESPONSE__BODY_ROUTE_RESULT && resp->route_result) {
        const Pathd__V1__RouteResult *rr = resp->route_result;
        pdc_route_result *r = p->route;
        if (p->leg_open || rr->legs != r->leg_count) {
            pdc__fail(c, PDC_ERR_PROTOCOL, "request %llu: route result counts %u legs, %zu arrived%s",
                      (unsigned long long)p->id, rr->legs, r->leg_count, p->leg_open ? " (one unfinished)" : "");
            return PDC_ERR_PROTOCOL;
        }
        r->total_cost = rr->total_cost;
        r->expansions = rr->expansions;
        r->micros = rr->micros;
        r->pinned = rr->pinned != 0;
        if (rr->goal_used) {
            r->has_goal_used = 1;
            r->goal_used = (pdc_xy){rr->goal_used->x, rr->goal_used->y};
        }
    }
    return PDC_OK;
}

/* Queues a watch frame for pdc_watch_next (takes resp). */
static int pdc__event_push(pdc_conn *c, Pathd__V1__Response *resp)
{
    if (c->event_head > 0 && c->nevents == c->cap_events) {
        memmove(c->events, c->events + c->event_head, (c->nevents - c->event_head) * sizeof *c->events);
        c->nevents -= c->event_head;
        c->event_head = 0;
    }
    if (c->nevents == c->cap_events) {
        size_t cap = c->cap_events ? c->cap_events * 2 : 16;
        Pathd__V1__Response **grown = realloc(c->events, cap * sizeof *grown);
        if (!grown)
            return PDC_ERR_NOMEM;
        c->events = grown;
        c->cap_events = cap;
    }
    c->events[c->nevents++] = resp;
    return PDC_OK;
}

/* Files one frame under its request. Takes ownership of resp. */
static void pdc__dispatch_frame(pdc_conn *c, Pathd__V1__Response *resp)
{
    /* Why an answer is not OK: Response.message on a path or route that
     * was searched for and not found (NO_PATH, a blocked end...), or
     * Error.message on a refusal. */
    const char *msg = resp->message && resp->message[0]                            ? resp->message
                      : resp->body_case == PATHD__V1__RESPONSE__BODY_ERROR && resp->error ? resp->error->message
                                                                                        : "";
    /* A status newer than this client (pdc_status_name says only
     * UNKNOWN_STATUS): the message names its number, so the caller and the
     * log see which one. The call still returns the number. */
    char newer[PDC_MESSAGE_MAX];
    if (strcmp(pdc_status_name((int)resp->status), "UNKNOWN_STATUS") == 0) {
        snprintf(newer, sizeof newer, "status %d, unknown to this client%s%s", (int)resp->status,
                 msg[0] ? ": " : "", msg);
        msg = newer;
    }
    if (resp->id == 0 && resp->status == PATHD__V1__STATUS__DRAINING) {
        /* The replica is draining: nothing more is sent here; the next
         * blocking call reads what is owed, then moves (pdc__retire). */
        c->draining = 1;
        pathd__v1__response__free_unpacked(resp, NULL);
        return;
    }
    if (resp->id == 0) {
        /* A connection-level error (frame too large, malformed, too many
         * connections): the server closes after it, so close our side too
         * and fail everything waiting with that status. */
        if (resp->status != PATHD__V1__STATUS__OK)
            pdc__fail(c, (int)resp->status, "server: %s%s%s",
                      pdc_status_name((int)resp->status), msg[0] ? ": " : "", msg);
        pathd__v1__response__free_unpacked(resp, NULL);
        return;
    }
    pdc__pending *p = pdc__pending_find(c, resp->id);
    if (!p || p->done_order) {
        /* An answer to a cancel, or to a request given up after a timeout. */
        pathd__v1__response__free_unpacked(resp, NULL);
        return;
    }
    if (resp->status == PATHD__V1__STATUS__STALE_VERSION && resp->body_case == PATHD__V1__RESPONSE__BODY_ERROR &&
        resp->error)
        c->stale_version = p->scene_version = resp->error->version;
    if (p->kind == PDC__KIND_WATCH) {
        if (pdc__event_push(c, resp) != PDC_OK) {
            pathd__v1__response__free_unpacked(resp, NULL);
            pdc__fail(c, PDC_ERR_NOMEM, "out of memory queueing a watch event");
            return;
        }
        if (resp->final)
            pdc__pending_remove(c, p);
        return;
    }
    if (resp->final || p->kind == PDC__KIND_OTHER)
        p->timing = (pdc_timing){resp->server_us, resp->search_us};
    if (p->kind == PDC__KIND_OTHER) {
        /* Non-path answers are single frames; complete on the first one even
         * if a server forgets to set final. */
        p->response = resp;
        pdc__complete(c, p, (int)resp->status, msg);
        return;
    }
    if (p->kind == PDC__KIND_ROUTE) {
        if (pdc__route_frame(c, p, resp) != PDC_OK) {
            pathd__v1__response__free_unpacked(resp, NULL);
            return;
        }
    } else if (resp->body_case == PATHD__V1__RESPONSE__BODY_PATH && resp->path) {
        const Pathd__V1__PathChunk *chunk = resp->path;
        if (pdc__append_chunk(c, p, chunk) != PDC_OK) {
            pathd__v1__response__free_unpacked(resp, NULL);
            return;
        }
        if (resp->final) {
            if (chunk->total_waypoints != 0 && chunk->total_waypoints != p->count) {
                pdc__fail(c, PDC_ERR_PROTOCOL,
                          "request %llu: final chunk says %u waypoints, %zu arrived",
                          (unsigned long long)p->id, chunk->total_waypoints, p->count);
                pathd__v1__response__free_unpacked(resp, NULL);
                return;
            }
            pdc__chunk_totals(p, chunk);
        }
    }
    if (resp->final)
        pdc__complete(c, p, (int)resp->status, msg);
    pathd__v1__response__free_unpacked(resp, NULL);
}

/* Files one frame (pdc__dispatch_frame); when it ends a request that held
 * in-flight slots, sends what the queue may send now. */
static void pdc__dispatch(pdc_conn *c, Pathd__V1__Response *resp)
{
    const int freed = pdc__release(c, resp->id, resp->final);
    pdc__dispatch_frame(c, resp);
    if (freed)
        pdc__pump(c);
}

/* Pumps frames until request `id` completes or the deadline passes. On a
 * timeout the request is forgotten (a late answer is then ignored) and, when
 * it was sent and runs on a worker (`counted`: it takes in-flight slots),
 * cancelled: without the Cancel the server searched on for an answer nobody
 * reads, up to the request's own deadline, holding a worker and its slots
 * (the Go, Node and Python clients cancel too). The Cancel has an id of its
 * own, as pdc_send_cancel's: pathd acknowledges it with that id, and an
 * acknowledgement with id 0 would read as a connection-level error. */
static int pdc__wait_for(pdc_conn *c, uint64_t id, int counted, int64_t deadline, pdc__pending *taken)
{
    for (;;) {
        pdc__pending *p = pdc__pending_find(c, id);
        if (!p)
            return PDC_ERR_PROTOCOL;
        if (p->done_order) {
            *taken = *p;
            pdc__pending_remove(c, p);
            return taken->status;
        }
        Pathd__V1__Response *resp = NULL;
        int r = pdc__read_frame(c, deadline, &resp);
        if (r == PDC_ERR_TIMEOUT) {
            const int queued = pdc__unqueue(c, id);
            pdc__pending_release(p);
            pdc__pending_remove(c, p);
            /* Not on a draining connection, where nothing more is sent; its
             * answer's slots come back when it arrives (pdc__release). A
             * failed send closed the connection, which ends the search too. */
            if (counted && !queued && c->fd >= 0 && !c->draining)
                (void)pdc_send_cancel(c, id);
            snprintf(c->error, sizeof c->error, "no answer within %d ms%s", c->timeout_ms,
                     queued ? " (still queued behind the in-flight cap; never sent)" : "");
            return PDC_ERR_TIMEOUT;
        }
        if (r == PDC_OK)
            pdc__dispatch(c, resp);
        /* On other errors pdc__fail completed the entry; the loop returns it. */
    }
}

/* Sends req (kind decides how its answer is assembled) and registers it,
 * or, when the in-flight cap has no room, queues it (PDC_ERR_QUEUE_FULL
 * when the queue is full too). */
static int pdc__send_tracked(pdc_conn *c, Pathd__V1__Request *req, pdc__kind kind, uint64_t *id)
{
    if (c->fd < 0) {
        snprintf(c->error, sizeof c->error, "not connected");
        return PDC_ERR_DISCONNECTED;
    }
    const uint32_t slots = pdc__slots(c, req);
    const int now = pdc__fits(c, slots), multi = kind == PDC__KIND_PATH || kind == PDC__KIND_ROUTE;
    int r = now ? pdc__hold_reserve(c, 1) : pdc__queue_room(c, 1);
    if (r != PDC_OK)
        return r;
    req->id = c->next_id++;
    if (!pdc__pending_add(c, req->id, kind))
        return PDC_ERR_NOMEM;
    r = now ? pdc__send_frame(c, req) : pdc__enqueue(c, req, slots, multi);
    if (r != PDC_OK) {
        pdc__pending *p = pdc__pending_find(c, req->id);
        pdc__pending_release(p);
        pdc__pending_remove(c, p);
        return r;
    }
    if (now)
        pdc__hold(c, req->id, slots, multi);
    *id = req->id;
    return PDC_OK;
}

/* ---- replicas (pathd_client.h, "Replicas") ------------------------------ */

/* The idempotency_key field of an update request, or NULL for other kinds. */
static char **pdc__key_field(Pathd__V1__Request *req)
{
    switch (req->body_case) {
    case PATHD__V1__REQUEST__BODY_UPDATE_CELLS: return &req->update_cells->idempotency_key;
    case PATHD__V1__REQUEST__BODY_CREATE_SCENE: return &req->create_scene->idempotency_key;
    case PATHD__V1__REQUEST__BODY_CREATE_INSTANCE: return &req->create_instance->idempotency_key;
    case PATHD__V1__REQUEST__BODY_DROP_SCENE: return &req->drop_scene->idempotency_key;
    default: return NULL;
    }
}

/* Gives an update its key (c->key, which lives until the next call): the
 * one from pdc_set_next_idempotency_key, else 128 random bits in hex. */
static void pdc__key_update(pdc_conn *c, Pathd__V1__Request *req)
{
    char **field = pdc__key_field(req);
    if (!field)
        return;
    if (c->next_key[0]) {
        memcpy(c->key, c->next_key, sizeof c->key);
        c->next_key[0] = '\0';
    } else if (c->keys) {
        uint8_t bits[16];
        if (getrandom(bits, sizeof bits, 0) != (ssize_t)sizeof bits) {
            /* No kernel randomness: the jitter generator, unique enough per
             * connection for a key (a clash only merges two updates' retries). */
            for (size_t i = 0; i < sizeof bits; i++)
                bits[i] = (uint8_t)pdc__rand(c);
        }
        for (size_t i = 0; i < sizeof bits; i++)
            snprintf(c->key + 2 * i, 3, "%02x", bits[i]);
    } else {
        return;
    }
    *field = c->key;
}

/* Whether req may be sent again after its connection was lost with its
 * answer owed: a query, or an update that carries an idempotency key. */
static int pdc__resendable(Pathd__V1__Request *req)
{
    char **field = pdc__key_field(req);
    if (field)
        return *field && (*field)[0];
    switch (req->body_case) {
    case PATHD__V1__REQUEST__BODY_CANCEL:
    case PATHD__V1__REQUEST__BODY_RELOAD:
    case PATHD__V1__REQUEST__BODY_WATCH:
    case PATHD__V1__REQUEST__BODY_UNWATCH:
    case PATHD__V1__REQUEST__BODY_RESERVE_PATH:
    case PATHD__V1__REQUEST__BODY_RELEASE_AGENT:
        return 0;
    default:
        return 1;
    }
}

/* A pause of about backoff_ms: half of it fixed, half at random ("equal
 * jitter"), so clients that lost the same replica do not reconnect in step. */
static int pdc__equal_jitter(pdc_conn *c, int backoff_ms)
{
    const int half = backoff_ms / 2;
    return half + (int)(pdc__rand(c) % (uint64_t)(half + 1));
}

static int pdc__doubled(int ms, int max)
{
    return ms * 2 > max ? max : ms * 2;
}

/* Connects again (fd < 0), with jittered backoff until deadline when
 * reconnecting is on; then sends what waited in the queue. */
static int pdc__reopen(pdc_conn *c, int64_t deadline)
{
    int backoff_ms = PDC_RECONNECT_BACKOFF_FIRST_MS;
    for (;;) {
        int r = pdc_reconnect(c);
        if (r == PDC_OK)
            pdc__pump(c);
        /* (PDC_DRAINING: refused on connect, the connection given up.) */
        if ((r != PDC_ERR_CONNECT && r != PDC_DRAINING) || !c->reconnect)
            return r;
        const int pause_ms = pdc__equal_jitter(c, backoff_ms);
        if (pdc__remaining_ms(deadline) < pause_ms) {
            /* Given up: the error no longer promises another attempt. */
            if (r == PDC_DRAINING)
                snprintf(c->error, sizeof c->error, "every new connection was answered DRAINING "
                         "until the retry deadline");
            return r;
        }
        pdc__sleep_ms(pause_ms);
        backoff_ms = pdc__doubled(backoff_ms, PDC_RECONNECT_BACKOFF_MAX_MS);
    }
}

/* Whether a request sent on this connection (not one still queued, not a
 * watch) has not been answered yet. */
static int pdc__owed(const pdc_conn *c)
{
    for (size_t i = 0; i < c->npending; i++) {
        const pdc__pending *p = &c->pending[i];
        if (p->done_order || p->kind == PDC__KIND_WATCH)
            continue;
        int queued = 0;
        for (size_t k = 0; k < c->q_len && !queued; k++)
            queued = c->queue[(c->q_head + k) % c->q_cap].id == p->id;
        if (!queued)
            return 1;
    }
    return 0;
}

/* Replaces a draining or too old connection: reads the answers still owed
 * on it (until deadline), ends its watches with PDC_DRAINING, closes it
 * and connects again; what waited in the queue goes out on the new one. */
static int pdc__retire(pdc_conn *c, int64_t deadline)
{
    c->draining = 1;
    while (c->fd >= 0 && pdc__owed(c)) {
        Pathd__V1__Response *resp = NULL;
        int r = pdc__read_frame(c, deadline, &resp);
        if (r == PDC_ERR_TIMEOUT)
            break;
        if (r == PDC_OK)
            pdc__dispatch(c, resp);
    }
    if (c->fd >= 0 && pdc__owed(c))
        pdc__fail(c, PDC_ERR_DISCONNECTED, "a draining connection still owed answers at the deadline");
    if (c->fd >= 0) {
        for (size_t i = 0; i < c->npending; i++)
            if (c->pending[i].kind == PDC__KIND_WATCH && !c->pending[i].done_order)
                pdc__complete(c, &c->pending[i], PDC_DRAINING,
                              "the connection was replaced (draining or max connection age)");
        close(c->fd);
        c->fd = -1;
        c->rstart = c->rend = 0;
        c->nheld = 0;           /* the server forgets a closed connection's slots */
        c->used = 0;
    }
    return pdc__reopen(c, deadline);
}

static int pdc__aged(const pdc_conn *c)
{
    return c->max_age_ms > 0 && pdc__now_ms() - c->connected_at > c->max_age_ms;
}

/* The blocking round trip shared by every blocking call: (re)connect,
 * replacing a draining or too old connection, send, wait; send again a
 * request lost with its connection when that is safe, and retry
 * OVERLOADED, STALE_VERSION, UNAVAILABLE (after a jittered pause) and
 * DRAINING (at once, on a new connection) within the retry deadline.
 * *taken receives the completed entry (caller releases it). */
static int pdc__call(pdc_conn *c, Pathd__V1__Request *req, pdc__kind kind, pdc__pending *taken)
{
    memset(taken, 0, sizeof *taken);
    int backoff_ms = PDC_RETRY_BACKOFF_FIRST_MS, lost_ms = PDC_RECONNECT_BACKOFF_FIRST_MS;
    const int64_t retry_deadline =
        pdc__deadline_after(c->retry_deadline_ms > 0 ? c->retry_deadline_ms : c->timeout_ms);
    const int recover = !c->in_connect;
    pdc__key_update(c, req);
    for (int attempt = 1;;) {
        c->error[0] = '\0';
        c->last_timing = (pdc_timing){0, 0};
        if (recover && c->fd >= 0 && (c->draining || pdc__aged(c)))
            pdc__retire(c, retry_deadline);
        if (c->fd < 0 && (recover ? pdc__reopen(c, retry_deadline) : pdc_reconnect(c)) != PDC_OK)
            return PDC_ERR_CONNECT;
        uint64_t id;
        int r = pdc__send_tracked(c, req, kind, &id);
        if (r == PDC_OK)
            r = pdc__wait_for(c, id, pdc__slots(c, req) > 0, pdc__deadline_after(c->timeout_ms), taken);
        else if (r != PDC_ERR_DISCONNECTED)
            return r;
        c->last_timing = taken->timing;
        if (r == PDC_ERR_DISCONNECTED && recover && c->reconnect && pdc__resendable(req)) {
            const int pause_ms = pdc__equal_jitter(c, lost_ms);
            if (pdc__remaining_ms(retry_deadline) >= pause_ms) {
                pdc__pending_release(taken);
                memset(taken, 0, sizeof *taken);
                c->resent++;
                pdc__sleep_ms(pause_ms);
                lost_ms = pdc__doubled(lost_ms, PDC_RECONNECT_BACKOFF_MAX_MS);
                continue;
            }
        }
        /* Retryable answers go again after a jittered pause (DRAINING: at
         * once, elsewhere), unless that was the last attempt or the pause
         * would end past the deadline. */
        const int retryable = r == PDC_OVERLOADED || r == PDC_STALE_VERSION || r == PDC_UNAVAILABLE ||
                              (r == PDC_DRAINING && recover);
        const int pause_ms = retryable && r != PDC_DRAINING ? pdc__jittered(c, backoff_ms) : 0;
        if (!retryable || attempt >= c->retry_attempts || pdc__remaining_ms(retry_deadline) < pause_ms) {
            if (r != PDC_OK && r != PDC_PARTIAL && taken->message[0])
                snprintf(c->error, sizeof c->error, "%s", taken->message);
            return r;
        }
        pdc__pending_release(taken);
        memset(taken, 0, sizeof *taken);
        if (r == PDC_OVERLOADED)
            c->overloaded_retries++;
        else
            c->replica_retries++;
        if (r == PDC_DRAINING)
            c->draining = 1;
        pdc__sleep_ms(pause_ms);
        backoff_ms = pdc__doubled(backoff_ms, PDC_RETRY_BACKOFF_MAX_MS);
        attempt++;
    }
}

/* ---- path requests -------------------------------------------------------- */

/* The protobuf objects one FindPath request needs: all on the caller's stack
 * except the avoid cells, whose number varies (pdc__find_msg_free). */
typedef struct pdc__find_msg {
    Pathd__V1__Request req;
    Pathd__V1__FindPath fp;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell, goal_cell;
    Pathd__V1__WorldPoint start_world, goal_world;
    Pathd__V1__Rect window;
    Pathd__V1__Cell window_min, window_max;
    Pathd__V1__Cell *avoid_cells;
    Pathd__V1__Cell **avoid_ptrs;
    Pathd__V1__Point *goals;        /* goal_count entries, with their cells / world points */
    Pathd__V1__Point **goal_ptrs;
    Pathd__V1__Cell *goal_cells;
    Pathd__V1__WorldPoint *goal_worlds;
} pdc__find_msg;

static void pdc__point_to_wire(const pdc_point *src, Pathd__V1__Point *dst,
                               Pathd__V1__Cell *cell, Pathd__V1__WorldPoint *world)
{
    pathd__v1__point__init(dst);
    if (src->is_world) {
        pathd__v1__world_point__init(world);
        world->x = src->wx;
        world->y = src->wy;
        dst->kind_case = PATHD__V1__POINT__KIND_WORLD;
        dst->world = world;
    } else {
        pathd__v1__cell__init(cell);
        cell->x = src->x;
        cell->y = src->y;
        dst->kind_case = PATHD__V1__POINT__KIND_CELL;
        dst->cell = cell;
    }
}

static void pdc__cell_to_wire(pdc_xy src, Pathd__V1__Cell *dst)
{
    pathd__v1__cell__init(dst);
    dst->x = src.x;
    dst->y = src.y;
}

/* Heap copies of n cells in the form protobuf-c packs: an array of cells and
 * an array of pointers to them. 0 or PDC_ERR_NOMEM. */
static int pdc__cells_to_wire(const pdc_xy *src, size_t n, Pathd__V1__Cell **cells,
                              Pathd__V1__Cell ***ptrs)
{
    *cells = malloc(n * sizeof **cells);
    *ptrs = malloc(n * sizeof **ptrs);
    if (!*cells || !*ptrs) {
        free(*cells);
        free(*ptrs);
        *cells = NULL;
        *ptrs = NULL;
        return PDC_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        pdc__cell_to_wire(src[i], &(*cells)[i]);
        (*ptrs)[i] = &(*cells)[i];
    }
    return PDC_OK;
}

static void pdc__find_msg_free(pdc__find_msg *m)
{
    free(m->avoid_cells);
    free(m->avoid_ptrs);
    free(m->goals);
    free(m->goal_ptrs);
    free(m->goal_cells);
    free(m->goal_worlds);
    m->avoid_cells = NULL;
    m->avoid_ptrs = NULL;
    m->goals = NULL;
    m->goal_ptrs = NULL;
    m->goal_cells = NULL;
    m->goal_worlds = NULL;
}

/* FindPath.goals as the wire wants them: heap arrays (pdc__find_msg_free). */
static int pdc__goals_to_wire(const pdc_path_req *r, pdc__find_msg *m)
{
    size_t n = r->goal_count;
    m->goals = calloc(n, sizeof *m->goals);
    m->goal_ptrs = calloc(n, sizeof *m->goal_ptrs);
    m->goal_cells = calloc(n, sizeof *m->goal_cells);
    m->goal_worlds = calloc(n, sizeof *m->goal_worlds);
    if (!m->goals || !m->goal_ptrs || !m->goal_cells || !m->goal_worlds)
        return PDC_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        pdc__point_to_wire(&r->goals[i], &m->goals[i], &m->goal_cells[i], &m->goal_worlds[i]);
        m->goal_ptrs[i] = &m->goals[i];
    }
    m->fp.n_goals = n;
    m->fp.goals = m->goal_ptrs;
    m->fp.goal = NULL;
    return PDC_OK;
}

/* Checks what the server would refuse anyway (so a typo fails fast, without a
 * round trip) and builds the message. Free it with pdc__find_msg_free. */
static int pdc__build_find(const pdc_path_req *r, pdc__find_msg *m)
{
    memset(m, 0, sizeof *m);
    if (!r || !r->scene || !r->scene[0])
        return PDC_ERR_ARG;
    if (r->connectivity != 0 && r->connectivity != 4 && r->connectivity != 8)
        return PDC_ERR_ARG;
    if (r->style != PDC_STYLE_CELLS && r->style != PDC_STYLE_CORNERS && r->style != PDC_STYLE_SMOOTH)
        return PDC_ERR_ARG;
    if (r->goal_mode != PDC_GOAL_EXACT && r->goal_mode != PDC_GOAL_NEAREST && r->goal_mode != PDC_GOAL_LINE)
        return PDC_ERR_ARG;
    /* NaN fails both comparisons. */
    if (!(r->speed >= 0 && r->speed <= 1e308) || !(r->start_time >= -1e308 && r->start_time <= 1e308))
        return PDC_ERR_ARG;
    if (r->avoid_count > PDC_MAX_AVOID || (r->avoid_count > 0 && !r->avoid))
        return PDC_ERR_ARG;
    if (r->has_window && (r->window_min.x < 0 || r->window_min.y < 0 || r->window_min.x > r->window_max.x ||
                          r->window_min.y > r->window_max.y))
        return PDC_ERR_ARG;
    if (!(r->range >= 0 && r->range <= PDC_MAX_RANGE) || (r->line_of_sight && !(r->range > 0)) ||
        r->goal_count > PDC_MAX_GOALS || (r->goal_count > 0 && !r->goals))
        return PDC_ERR_ARG;
    pathd__v1__request__init(&m->req);
    pathd__v1__find_path__init(&m->fp);
    m->fp.scene = (char *)r->scene;
    pdc__point_to_wire(&r->start, &m->start, &m->start_cell, &m->start_world);
    pdc__point_to_wire(&r->goal, &m->goal, &m->goal_cell, &m->goal_world);
    m->fp.start = &m->start;
    m->fp.goal = &m->goal;
    m->fp.unit_size = r->unit_size;
    m->fp.connectivity = r->connectivity == 4   ? PATHD__V1__CONNECTIVITY__CONNECTIVITY_4
                         : r->connectivity == 8 ? PATHD__V1__CONNECTIVITY__CONNECTIVITY_8
                                                : PATHD__V1__CONNECTIVITY__CONNECTIVITY_DEFAULT;
    m->fp.max_expansions = r->max_expansions;
    m->fp.deadline_ms = r->deadline_ms;
    m->fp.style = r->style == PDC_STYLE_SMOOTH    ? PATHD__V1__WAYPOINT_STYLE__STYLE_SMOOTH
                  : r->style == PDC_STYLE_CORNERS ? PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS
                                                  : PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS;
    m->fp.goal_mode = r->goal_mode == PDC_GOAL_NEAREST ? PATHD__V1__GOAL_MODE__GOAL_NEAREST
                      : r->goal_mode == PDC_GOAL_LINE  ? PATHD__V1__GOAL_MODE__GOAL_LINE
                                                       : PATHD__V1__GOAL_MODE__GOAL_EXACT;
    m->fp.snap = r->snap != 0;
    m->fp.partial_on_cutoff = r->partial_on_cutoff != 0;
    m->fp.speed = r->speed;
    m->fp.want_world = r->want_world != 0;
    m->fp.start_time = r->start_time;
    if (r->has_window) {
        pathd__v1__rect__init(&m->window);
        pdc__cell_to_wire(r->window_min, &m->window_min);
        pdc__cell_to_wire(r->window_max, &m->window_max);
        m->window.min = &m->window_min;
        m->window.max = &m->window_max;
        m->fp.window = &m->window;
    }
    if (r->avoid_count > 0) {
        if (pdc__cells_to_wire(r->avoid, r->avoid_count, &m->avoid_cells, &m->avoid_ptrs) != PDC_OK)
            return PDC_ERR_NOMEM;
        m->fp.n_avoid = r->avoid_count;
        m->fp.avoid = m->avoid_ptrs;
    }
    m->fp.range = r->range;
    m->fp.line_of_sight = r->line_of_sight != 0;
    m->fp.min_version = r->min_version;
    m->fp.avoid_reserved = r->avoid_reserved != 0;
    if (r->goal_count > 0 && pdc__goals_to_wire(r, m) != PDC_OK)
        return PDC_ERR_NOMEM;
    m->req.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    m->req.find_path = &m->fp;
    return PDC_OK;
}

/* Moves an assembled path out of a table entry into the caller's result. */
static void pdc__path_take(pdc__pending *p, pdc_path_result *out)
{
    out->id = p->id;
    out->status = p->status;
    out->waypoints = p->count ? p->waypoints : NULL;
    if (!p->count)
        free(p->waypoints);
    out->count = p->count;
    out->cost = p->cost;
    out->expansions = p->expansions;
    out->search_micros = p->search_micros;
    out->scene_version = p->scene_version;
    out->has_start_used = p->has_start_used;
    out->start_used = p->start_used;
    out->has_goal_used = p->has_goal_used;
    out->goal_used = p->goal_used;
    out->cutoff = p->cutoff;
    out->goal_index = p->goal_index;
    out->timing = p->timing;
    snprintf(out->message, sizeof out->message, "%s", p->message);
    p->waypoints = NULL;
    pdc__pending_release(p);
}

void pdc_path_result_free(pdc_path_result *r)
{
    if (!r)
        return;
    free(r->waypoints);
    memset(r, 0, sizeof *r);
}

int pdc_find_path(pdc_conn *c, const pdc_path_req *req, pdc_path_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    pdc__find_msg m;
    int r = c ? pdc__build_find(req, &m) : PDC_ERR_ARG;
    if (r != PDC_OK) {
        if (c)
            pdc__find_msg_free(&m);
        out->status = r;
        return r;
    }
    pdc__pending taken;
    r = pdc__call(c, &m.req, PDC__KIND_PATH, &taken);
    pdc__find_msg_free(&m);
    pdc__path_take(&taken, out);
    out->status = r;
    if (r < 0 && !out->message[0])
        snprintf(out->message, sizeof out->message, "%s", c->error);
    return r;
}

void pdc_route_result_free(pdc_route_result *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->leg_count; i++) {
        free(r->legs[i].scene);
        free(r->legs[i].waypoints);
        free(r->legs[i].portal);
        free(r->legs[i].portal_to_scene);
    }
    free(r->legs);
    memset(r, 0, sizeof *r);
}

int pdc_find_route(pdc_conn *c, const pdc_route_req *r, pdc_route_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    /* What the server would refuse anyway fails here, without a round trip. */
    if (!c || !r || !r->from_scene || !r->from_scene[0] || !r->to_scene || !r->to_scene[0] ||
        (r->style != PDC_STYLE_CELLS && r->style != PDC_STYLE_CORNERS && r->style != PDC_STYLE_SMOOTH) ||
        (r->goal_mode != PDC_GOAL_EXACT && r->goal_mode != PDC_GOAL_NEAREST && r->goal_mode != PDC_GOAL_LINE) ||
        !(r->speed >= 0 && r->speed <= 1e308) || !(r->start_time >= -1e308 && r->start_time <= 1e308)) {
        out->status = PDC_ERR_ARG;
        return PDC_ERR_ARG;
    }
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__FindRoute fr = PATHD__V1__FIND_ROUTE__INIT;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell, goal_cell;
    Pathd__V1__WorldPoint start_world, goal_world;
    fr.from_scene = (char *)r->from_scene;
    fr.to_scene = (char *)r->to_scene;
    pdc__point_to_wire(&r->start, &start, &start_cell, &start_world);
    pdc__point_to_wire(&r->goal, &goal, &goal_cell, &goal_world);
    fr.start = &start;
    fr.goal = &goal;
    fr.unit_size = r->unit_size;
    fr.style = r->style == PDC_STYLE_SMOOTH    ? PATHD__V1__WAYPOINT_STYLE__STYLE_SMOOTH
               : r->style == PDC_STYLE_CORNERS ? PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS
                                               : PATHD__V1__WAYPOINT_STYLE__STYLE_CELLS;
    fr.goal_mode = r->goal_mode == PDC_GOAL_NEAREST ? PATHD__V1__GOAL_MODE__GOAL_NEAREST
                   : r->goal_mode == PDC_GOAL_LINE  ? PATHD__V1__GOAL_MODE__GOAL_LINE
                                                    : PATHD__V1__GOAL_MODE__GOAL_EXACT;
    fr.speed = r->speed;
    fr.want_world = r->want_world != 0;
    fr.start_time = r->start_time;
    fr.max_expansions = r->max_expansions;
    fr.deadline_ms = r->deadline_ms;
    req.body_case = PATHD__V1__REQUEST__BODY_FIND_ROUTE;
    req.find_route = &fr;

    pdc__pending taken;
    int st = pdc__call(c, &req, PDC__KIND_ROUTE, &taken);
    if (taken.route) {
        *out = *taken.route;
        free(taken.route);
        taken.route = NULL;
    }
    /* Legs belong to an answered route only; an error drops any that came. */
    if (st != PDC_OK && st != PDC_PARTIAL) {
        double total = out->total_cost;
        uint64_t expansions = out->expansions, micros = out->micros;
        pdc_route_result_free(out);
        out->total_cost = total;
        out->expansions = expansions;
        out->micros = micros;
    }
    out->id = taken.id;
    out->status = st;
    out->timing = taken.timing;
    snprintf(out->message, sizeof out->message, "%s", st < 0 && !taken.message[0] ? c->error : taken.message);
    pdc__pending_release(&taken);
    return st;
}

int pdc_send_find_path(pdc_conn *c, const pdc_path_req *req, uint64_t *id)
{
    pdc__find_msg m;
    if (!c || !id)
        return PDC_ERR_ARG;
    int r = pdc__build_find(req, &m);
    if (r == PDC_OK)
        r = pdc__send_tracked(c, &m.req, PDC__KIND_PATH, id);
    pdc__find_msg_free(&m);
    return r;
}

/* Appends req as one frame to *buf (grown as needed). PDC_OK, PDC_ERR_ARG
 * for a frame over PDC_MAX_FRAME_BYTES, or PDC_ERR_NOMEM. */
static int pdc__append_frame(const Pathd__V1__Request *req, uint8_t **buf, size_t *used, size_t *cap)
{
    size_t len = pathd__v1__request__get_packed_size(req);
    if (len > PDC_MAX_FRAME_BYTES)
        return PDC_ERR_ARG;
    size_t need = *used + PDC__HEADER_BYTES + len;
    if (need > *cap) {
        size_t grown_cap = *cap ? *cap : 4096;
        while (grown_cap < need)
            grown_cap *= 2;
        uint8_t *grown = realloc(*buf, grown_cap);
        if (!grown)
            return PDC_ERR_NOMEM;
        *buf = grown;
        *cap = grown_cap;
    }
    pdc__pack_frame(req, len, *buf + *used);
    *used = need;
    return PDC_OK;
}

int pdc_send_find_paths(pdc_conn *c, const pdc_path_req *reqs, size_t n, uint64_t *ids)
{
    if (!c || !reqs || !ids || n == 0)
        return PDC_ERR_ARG;
    if (c->fd < 0) {
        snprintf(c->error, sizeof c->error, "not connected");
        return PDC_ERR_DISCONNECTED;
    }
    /* The first `now` go out in one write; flow control queues the rest. */
    size_t now = n;
    if (c->flow_control) {
        size_t room = c->q_len == 0 && c->used < c->cap ? c->cap - c->used : 0;
        now = n < room ? n : room;
    }
    int r = now < n ? pdc__queue_room(c, n - now) : PDC_OK;
    if (r != PDC_OK)
        return r;
    uint8_t *buf = NULL;
    size_t used = 0, cap = 0, registered = 0, queued = 0;
    const uint64_t first = c->next_id;
    for (size_t i = 0; i < n && r == PDC_OK; i++) {
        pdc__find_msg m;
        r = pdc__build_find(&reqs[i], &m);
        m.req.id = first + i;
        if (r == PDC_OK && i < now)
            r = pdc__append_frame(&m.req, &buf, &used, &cap);
        else if (r == PDC_OK && (r = pdc__enqueue(c, &m.req, 1, 1)) == PDC_OK)
            queued++;
        pdc__find_msg_free(&m);
    }
    while (r == PDC_OK && registered < n) {
        if (pdc__pending_add(c, first + registered, PDC__KIND_PATH))
            registered++;
        else
            r = PDC_ERR_NOMEM;
    }
    if (r == PDC_OK && c->flow_control)
        r = pdc__hold_reserve(c, now);
    if (r == PDC_OK) {
        c->next_id = first + n;
        if (now > 0)
            r = pdc__send_bytes(c, buf, used);
    }
    free(buf);
    if (r != PDC_OK) {
        /* None of them is in flight: forget every entry registered or
         * queued above (a failed send has emptied the queue already). */
        while (queued > 0 && c->q_len > 0) {
            free(c->queue[(c->q_head + c->q_len - 1) % c->q_cap].frame);
            c->q_len--;
            queued--;
        }
        for (size_t i = 0; i < registered; i++) {
            pdc__pending *p = pdc__pending_find(c, first + i);
            pdc__pending_release(p);
            pdc__pending_remove(c, p);
        }
        return r;
    }
    for (size_t i = 0; i < n; i++) {
        ids[i] = first + i;
        if (i < now)
            pdc__hold(c, first + i, 1, 1);
    }
    return PDC_OK;
}

int pdc_send_cancel(pdc_conn *c, uint64_t target_id)
{
    if (!c || target_id == 0)
        return PDC_ERR_ARG;
    pdc__pending *queued = pdc__pending_find(c, target_id);
    if (queued && !queued->done_order && pdc__unqueue(c, target_id)) {
        /* Never sent: answered here, as the server would have. */
        pdc__complete(c, queued, PDC_CANCELLED, "cancelled while queued in the client; never sent");
        return PDC_OK;
    }
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Cancel cancel = PATHD__V1__CANCEL__INIT;
    cancel.target_id = target_id;
    req.id = c->next_id++;
    req.body_case = PATHD__V1__REQUEST__BODY_CANCEL;
    req.cancel = &cancel;
    return pdc__send_frame(c, &req);
}

/* The finished path to hand out next (the first to finish), or NULL. */
static pdc__pending *pdc__paths_done_next(pdc_conn *c)
{
    while (c->done_len > 0) {
        uint64_t id = c->paths_done[c->done_head];
        c->done_head = (c->done_head + 1) % c->done_cap;
        c->done_len--;
        pdc__pending *p = pdc__pending_find(c, id);
        if (p && p->kind == PDC__KIND_PATH && p->done_order)
            return p;
    }
    if (c->paths == c->paths_waiting)
        return NULL;
    /* Finished paths the ring could not take (it was out of memory). */
    pdc__pending *first = NULL;
    for (size_t i = 0; i < c->npending; i++) {
        pdc__pending *p = &c->pending[i];
        if (p->kind == PDC__KIND_PATH && p->done_order && (!first || p->done_order < first->done_order))
            first = p;
    }
    return first;
}

int pdc_recv_result(pdc_conn *c, int timeout_ms, pdc_path_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c) {
        out->status = PDC_ERR_ARG;
        return PDC_ERR_ARG;
    }
    int64_t deadline = pdc__deadline_after(timeout_ms);
    for (;;) {
        pdc__pending *first = pdc__paths_done_next(c);
        if (first) {
            pdc__pending copy = *first;
            pdc__pending_remove(c, first);
            pdc__path_take(&copy, out);
            return out->status;
        }
        if (c->paths_waiting == 0) {
            out->status = c->fd < 0 ? PDC_ERR_DISCONNECTED : PDC_ERR_IDLE;
            return out->status;
        }
        Pathd__V1__Response *resp = NULL;
        int r = pdc__read_frame(c, deadline, &resp);
        if (r == PDC_ERR_TIMEOUT) {
            out->status = PDC_ERR_TIMEOUT;
            return out->status;
        }
        if (r == PDC_OK)
            pdc__dispatch(c, resp);
    }
}

/* ---- other requests ------------------------------------------------------- */

/* Runs a single-frame request and checks that an OK answer has the expected
 * body. On PDC_OK *resp_out is the answer (caller frees it). */
static int pdc__call_other(pdc_conn *c, Pathd__V1__Request *req,
                           Pathd__V1__Response__BodyCase expect, Pathd__V1__Response **resp_out)
{
    *resp_out = NULL;
    if (!c)
        return PDC_ERR_ARG;
    pdc__pending taken;
    int r = pdc__call(c, req, PDC__KIND_OTHER, &taken);
    if (r == PDC_OK && (!taken.response || taken.response->body_case != expect)) {
        snprintf(c->error, sizeof c->error, "answer to request %llu has the wrong body",
                 (unsigned long long)taken.id);
        r = PDC_ERR_PROTOCOL;
    }
    if (r == PDC_OK) {
        *resp_out = taken.response;
        taken.response = NULL;
    }
    pdc__pending_release(&taken);
    return r;
}

int pdc_list_scenes(pdc_conn *c, pdc_scene_list *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__ListScenes body = PATHD__V1__LIST_SCENES__INIT;
    req.body_case = PATHD__V1__REQUEST__BODY_LIST_SCENES;
    req.list_scenes = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_SCENE_LIST, &resp);
    if (r != PDC_OK)
        return r;
    const Pathd__V1__SceneList *sl = resp->scene_list;
    if (sl->n_scenes) {
        out->scenes = calloc(sl->n_scenes, sizeof *out->scenes);
        if (!out->scenes)
            r = PDC_ERR_NOMEM;
    }
    for (size_t i = 0; r == PDC_OK && i < sl->n_scenes; i++) {
        const Pathd__V1__SceneSummary *s = sl->scenes[i];
        pdc_scene_summary *d = &out->scenes[i];
        d->name = strdup(s->name ? s->name : "");
        if (!d->name) {
            r = PDC_ERR_NOMEM;
            break;
        }
        d->width = s->width;
        d->height = s->height;
        d->version = s->version;
        out->count = i + 1;
    }
    pathd__v1__response__free_unpacked(resp, NULL);
    if (r != PDC_OK)
        pdc_scene_list_free(out);
    return r;
}

void pdc_scene_list_free(pdc_scene_list *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->count; i++)
        free(l->scenes[i].name);
    free(l->scenes);
    memset(l, 0, sizeof *l);
}

int pdc_scene_info(pdc_conn *c, const char *scene, pdc_scene_details *out)
{
    return pdc_scene_info_at(c, scene, 0, out);
}

uint64_t pdc_stale_version(const pdc_conn *c)
{
    return c ? c->stale_version : 0;
}

int pdc_scene_info_at(pdc_conn *c, const char *scene, uint64_t min_version, pdc_scene_details *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!scene || !scene[0])
        return PDC_ERR_ARG;
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneInfo body = PATHD__V1__GET_SCENE_INFO__INIT;
    body.scene = (char *)scene;
    body.min_version = min_version;
    req.body_case = PATHD__V1__REQUEST__BODY_SCENE_INFO;
    req.scene_info = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_SCENE_INFO, &resp);
    if (r == PDC_STALE_VERSION)
        out->version = c->stale_version;
    if (r != PDC_OK)
        return r;
    const Pathd__V1__SceneInfo *si = resp->scene_info;
    out->name = strdup(si->name ? si->name : "");
    if (si->n_unit_sizes)
        out->unit_sizes = malloc(si->n_unit_sizes * sizeof *out->unit_sizes);
    if (!out->name || (si->n_unit_sizes && !out->unit_sizes)) {
        r = PDC_ERR_NOMEM;
    } else {
        out->width = si->width;
        out->height = si->height;
        out->origin_x = si->origin_x;
        out->origin_y = si->origin_y;
        out->cell_size = si->cell_size;
        if (si->n_unit_sizes)
            memcpy(out->unit_sizes, si->unit_sizes, si->n_unit_sizes * sizeof *out->unit_sizes);
        out->unit_size_count = si->n_unit_sizes;
        out->version = si->version;
        out->passable_cells = si->passable_cells;
    }
    pathd__v1__response__free_unpacked(resp, NULL);
    if (r != PDC_OK)
        pdc_scene_details_free(out);
    return r;
}

void pdc_scene_details_free(pdc_scene_details *i)
{
    if (!i)
        return;
    free(i->name);
    free(i->unit_sizes);
    memset(i, 0, sizeof *i);
}

/* Asks for the band of rows starting at row_start; on PDC_OK *resp is the
 * answer (caller frees). */
static int pdc__scene_grid_band(pdc_conn *c, const char *scene, uint32_t unit_size, int32_t row_start,
                                Pathd__V1__Response **resp)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetSceneGrid body = PATHD__V1__GET_SCENE_GRID__INIT;
    body.scene = (char *)scene;
    body.unit_size = unit_size;
    body.row_start = row_start;
    body.row_count = 0;         /* as many as the server puts in one band */
    req.body_case = PATHD__V1__REQUEST__BODY_SCENE_GRID;
    req.scene_grid = &body;
    return pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_SCENE_GRID, resp);
}

/* Checks one band against the request (rows from `row`) and against itself.
 * Returns 0, or -1 with the reason in c->error. */
static int pdc__scene_grid_band_ok(pdc_conn *c, const Pathd__V1__SceneGrid *g, int32_t row)
{
    if (g->row_start != row || g->row_count < 1 || g->row_count > g->height - row) {
        snprintf(c->error, sizeof c->error, "scene grid band of rows %d+%d does not continue at row %d of %d",
                 (int)g->row_start, (int)g->row_count, (int)row, (int)g->height);
        return -1;
    }
    if (g->cells.len != (size_t)g->row_count * (size_t)g->width) {
        snprintf(c->error, sizeof c->error, "scene grid band has %zu cell bytes; %d rows of %d need %zu",
                 g->cells.len, (int)g->row_count, (int)g->width, (size_t)g->row_count * (size_t)g->width);
        return -1;
    }
    return 0;
}

int pdc_scene_grid(pdc_conn *c, const char *scene, uint32_t unit_size, pdc_grid *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !scene || !scene[0])
        return PDC_ERR_ARG;
    int restarts = 0;
    int32_t row = 0;
    int r;
    for (;;) {
        Pathd__V1__Response *resp = NULL;
        const Pathd__V1__SceneGrid *g = NULL;
        int changed = 0;
        r = pdc__scene_grid_band(c, scene, unit_size, row, &resp);
        if (r == PDC_OUT_OF_BOUNDS && row > 0) {
            /* The rows read so far lay inside the grid, so it was replaced
             * by a smaller one meanwhile. */
            changed = 1;
            r = PDC_OK;
        } else if (r == PDC_OK) {
            g = resp->scene_grid;
            if (g->width < 1 || g->height < 1 || g->width > PDC_MAX_GRID_SIDE || g->height > PDC_MAX_GRID_SIDE) {
                snprintf(c->error, sizeof c->error, "scene grid of %dx%d cells is outside 1..%d a side",
                         (int)g->width, (int)g->height, PDC_MAX_GRID_SIDE);
                r = PDC_ERR_PROTOCOL;
            } else if (out->cells && g->version != out->version) {
                changed = 1;
            } else if (pdc__scene_grid_band_ok(c, g, row) != 0) {
                r = PDC_ERR_PROTOCOL;
            } else if (out->cells && (g->width != out->width || g->height != out->height)) {
                snprintf(c->error, sizeof c->error,
                         "scene grid is %dx%d in one band and %dx%d in another of version %llu", (int)out->width,
                         (int)out->height, (int)g->width, (int)g->height, (unsigned long long)g->version);
                r = PDC_ERR_PROTOCOL;
            }
        }
        if (changed) {
            /* The scene changed between two bands, so the rows read so far
             * belong to an older version: start again from the top. */
            pdc_grid_free(out);
            row = 0;
            if (++restarts > PDC_SCENE_GRID_RESTARTS) {
                snprintf(c->error, sizeof c->error, "scene %s changed during each of %d attempts to read its grid",
                         scene, restarts);
                r = PDC_ERR_PROTOCOL;
            }
        } else if (r == PDC_OK && !out->cells) {
            out->cells = malloc((size_t)g->width * (size_t)g->height);
            if (!out->cells) {
                snprintf(c->error, sizeof c->error, "out of memory for a %dx%d grid", (int)g->width,
                         (int)g->height);
                r = PDC_ERR_NOMEM;
            }
            out->width = g->width;
            out->height = g->height;
            out->version = g->version;
        }
        if (r == PDC_OK && !changed) {
            memcpy(out->cells + (size_t)row * (size_t)out->width, g->cells.data, g->cells.len);
            row += g->row_count;
        }
        if (resp)
            pathd__v1__response__free_unpacked(resp, NULL);
        if (r != PDC_OK || (!changed && row == out->height))
            break;
    }
    if (r != PDC_OK)
        pdc_grid_free(out);
    return r;
}

void pdc_grid_free(pdc_grid *g)
{
    if (!g)
        return;
    free(g->cells);
    memset(g, 0, sizeof *g);
}

int pdc_stats(pdc_conn *c, pdc_server_stats *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetStats body = PATHD__V1__GET_STATS__INIT;
    req.body_case = PATHD__V1__REQUEST__BODY_STATS;
    req.stats = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_STATS, &resp);
    if (r != PDC_OK)
        return r;
    const Pathd__V1__Stats *s = resp->stats;
    out->uptime_ms = s->uptime_ms;
    out->connections = s->connections;
    out->requests_total = s->requests_total;
    out->paths_found = s->paths_found;
    out->expansions_total = s->expansions_total;
    out->queue_depth = s->queue_depth;
    out->in_flight = s->in_flight;
    out->threads = s->threads;
    out->scenes = s->scenes;
    out->overloaded_total = s->overloaded_total;
    out->malformed_total = s->malformed_total;
    pathd__v1__response__free_unpacked(resp, NULL);
    return PDC_OK;
}

int pdc_get_limits(pdc_conn *c, pdc_limits *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetLimits body = PATHD__V1__GET_LIMITS__INIT;
    req.body_case = PATHD__V1__REQUEST__BODY_LIMITS;
    req.limits = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_LIMITS, &resp);
    if (r != PDC_OK)
        return r;
    const Pathd__V1__Limits *l = resp->limits;
    out->max_frame_bytes = l->max_frame_bytes;
    out->max_inflight_per_conn = l->max_inflight_per_conn;
    out->max_waypoints_per_chunk = l->max_waypoints_per_chunk;
    out->max_connections = l->max_connections;
    out->job_queue_capacity = l->job_queue_capacity;
    out->idle_timeout_ms = l->idle_timeout_ms;
    out->frame_timeout_ms = l->frame_timeout_ms;
    out->default_max_expansions = l->default_max_expansions;
    out->max_batch_items = l->max_batch_items;
    out->max_move_points = l->max_move_points;
    out->max_radius_cells = l->max_radius_cells;
    out->max_walk_radius = l->max_walk_radius;
    out->max_tolerance = l->max_tolerance;
    out->max_avoid_cells = l->max_avoid_cells;
    out->max_deadline_ms = l->max_deadline_ms;
    out->max_unit_size = l->max_unit_size;
    out->scene_grid_band_bytes = l->scene_grid_band_bytes;
    out->max_message_bytes = l->max_message_bytes;
    out->watch_buffer_bytes = l->watch_buffer_bytes;
    out->max_watch_scenes = l->max_watch_scenes;
    out->max_watchers = l->max_watchers;
    out->max_watches_per_conn = l->max_watches_per_conn;
    out->reservation_ttl_ms = l->reservation_ttl_ms;
    out->max_agents_per_scene = l->max_agents_per_scene;
    out->max_reservation_entries = l->max_reservation_entries;
    out->max_reservation_window_ms = l->max_reservation_window_ms;
    out->max_agent_bytes = l->max_agent_bytes;
    out->max_clock_step_ms = l->max_clock_step_ms;
    pathd__v1__response__free_unpacked(resp, NULL);
    return PDC_OK;
}

/* Checks one operation as the server would. */
static int pdc__update_ok(const pdc_update_req *req)
{
    if (req->op != PDC_UPDATE_BLOCK && req->op != PDC_UPDATE_PASS && req->op != PDC_UPDATE_COST &&
        req->op != PDC_UPDATE_RESTORE)
        return 0;
    if (req->op == PDC_UPDATE_COST ? req->cost < 1 || req->cost > 255 : req->cost != 0)
        return 0;
    return req->is_rect ? req->rect_min.x <= req->rect_max.x && req->rect_min.y <= req->rect_max.y
                        : req->cell_count != 0 && req->cells != NULL;
}

/* The wire form of one operation; what it allocates goes to *cells / *ptrs. */
typedef struct pdc__wire_op {
    Pathd__V1__Rect rect;
    Pathd__V1__Cell rmin, rmax;
    Pathd__V1__CellList list;
    Pathd__V1__Cell *cells, **ptrs;
    Pathd__V1__UpdateOp op;
} pdc__wire_op;

static int pdc__op_to_wire(const pdc_update_req *req, pdc__wire_op *w)
{
    memset(w, 0, sizeof *w);
    w->rect = (Pathd__V1__Rect)PATHD__V1__RECT__INIT;
    w->list = (Pathd__V1__CellList)PATHD__V1__CELL_LIST__INIT;
    w->op = req->op == PDC_UPDATE_COST      ? PATHD__V1__UPDATE_OP__UPDATE_COST
            : req->op == PDC_UPDATE_PASS    ? PATHD__V1__UPDATE_OP__UPDATE_PASS
            : req->op == PDC_UPDATE_RESTORE ? PATHD__V1__UPDATE_OP__UPDATE_RESTORE
                                            : PATHD__V1__UPDATE_OP__UPDATE_BLOCK;
    if (req->is_rect) {
        pdc__cell_to_wire(req->rect_min, &w->rmin);
        pdc__cell_to_wire(req->rect_max, &w->rmax);
        w->rect.min = &w->rmin;
        w->rect.max = &w->rmax;
        return PDC_OK;
    }
    if (pdc__cells_to_wire(req->cells, req->cell_count, &w->cells, &w->ptrs) != PDC_OK)
        return PDC_ERR_NOMEM;
    w->list.n_cells = req->cell_count;
    w->list.cells = w->ptrs;
    return PDC_OK;
}

static int pdc__update_answer(pdc_conn *c, Pathd__V1__Request *msg, pdc_update_result *out)
{
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, msg, PATHD__V1__RESPONSE__BODY_UPDATE, &resp);
    if (r != PDC_OK)
        return r;
    out->version = resp->update->version;
    out->cells_changed = resp->update->cells_changed;
    out->micros = resp->update->micros;
    /* The cut agents live in the connection until its next update. */
    const size_t n = resp->update->n_agents_cut;
    if (n > c->cap_agents_cut) {
        uint64_t *grown = realloc(c->agents_cut, n * sizeof *grown);
        if (!grown) {
            pathd__v1__response__free_unpacked(resp, NULL);
            snprintf(c->error, sizeof c->error, "out of memory for %zu cut agents (the update was applied)", n);
            return PDC_ERR_NOMEM;
        }
        c->agents_cut = grown;
        c->cap_agents_cut = n;
    }
    if (n)
        memcpy(c->agents_cut, resp->update->agents_cut, n * sizeof *c->agents_cut);
    out->agents_cut = n ? c->agents_cut : NULL;
    out->n_agents_cut = n;
    pathd__v1__response__free_unpacked(resp, NULL);
    return PDC_OK;
}

/* ---- reservations -------------------------------------------------------- */

/* A plan's timed waypoints into a malloc'd array; 0, or -1 out of memory. */
static int pdc__timed_copy(Pathd__V1__TimedWaypoint *const *w, size_t n, pdc_timed_waypoint **out, size_t *count)
{
    *count = 0;
    if (!n)
        return 0;
    if (!(*out = calloc(n, sizeof **out)))
        return -1;
    for (size_t i = 0; i < n; i++)
        (*out)[i] = (pdc_timed_waypoint){w[i]->x, w[i]->y, w[i]->t_arrive_ms, w[i]->t_leave_ms};
    *count = n;
    return 0;
}

int pdc_reserve_path(pdc_conn *c, const pdc_reserve_req *req, pdc_reserve_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !req || !req->scene || !req->scene[0])
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__ReservePath body = PATHD__V1__RESERVE_PATH__INIT;
    Pathd__V1__Point start = PATHD__V1__POINT__INIT, goal = PATHD__V1__POINT__INIT;
    Pathd__V1__Cell start_cell = PATHD__V1__CELL__INIT, goal_cell = PATHD__V1__CELL__INIT;
    pdc__cell_to_wire(req->start, &start_cell);
    pdc__cell_to_wire(req->goal, &goal_cell);
    start.kind_case = PATHD__V1__POINT__KIND_CELL;
    start.cell = &start_cell;
    goal.kind_case = PATHD__V1__POINT__KIND_CELL;
    goal.cell = &goal_cell;
    body.scene = (char *)req->scene;
    body.agent = req->agent;
    body.unit_size = req->unit_size;
    body.start = &start;
    body.goal = &goal;
    body.t0_ms = req->t0_ms;
    body.speed = req->speed;
    if (req->has_window) {
        body.window_case = PATHD__V1__RESERVE_PATH__WINDOW_WINDOW_MS;
        body.window_ms = req->window_ms;
    }
    body.at_goal = req->vanish ? PATHD__V1__AT_GOAL__AT_GOAL_VANISH : PATHD__V1__AT_GOAL__AT_GOAL_PARK;
    body.yield_after_ms = req->yield_after_ms;
    msg.body_case = PATHD__V1__REQUEST__BODY_RESERVE_PATH;
    msg.reserve_path = &body;
    pdc__pending taken;
    int r = pdc__call(c, &msg, PDC__KIND_OTHER, &taken);
    const Pathd__V1__ReservePathResult *m =
        taken.response && taken.response->body_case == PATHD__V1__RESPONSE__BODY_RESERVE_PATH
            ? taken.response->reserve_path
            : NULL;
    if (m) {
        out->agent = m->agent;
        out->reserved_until_ms = m->reserved_until_ms;
        out->cost = m->cost;
        out->expansions = m->expansions;
        out->search_micros = m->search_micros;
        out->scene_version = m->scene_version;
        out->has_blocking_agent = m->has_blocking_agent;
        out->blocking_agent = m->blocking_agent;
        out->was_cut = m->was_cut;
        if (pdc__timed_copy(m->waypoints, m->n_waypoints, &out->waypoints, &out->count) != 0)
            r = PDC_ERR_NOMEM;
        if (m->n_displaced && !(out->displaced = calloc(m->n_displaced, sizeof *out->displaced)))
            r = PDC_ERR_NOMEM;
        for (size_t d = 0; out->displaced && d < m->n_displaced; d++) {
            const Pathd__V1__DisplacedPlan *dp = m->displaced[d];
            pdc_displaced_plan *o = &out->displaced[d];
            o->agent = dp->agent;
            o->t0_ms = dp->t0_ms;
            o->reserved_until_ms = dp->reserved_until_ms;
            out->n_displaced = d + 1;
            if (pdc__timed_copy(dp->waypoints, dp->n_waypoints, &o->waypoints, &o->count) != 0)
                r = PDC_ERR_NOMEM;
        }
        if (r == PDC_ERR_NOMEM)
            snprintf(c->error, sizeof c->error, "out of memory for the plans of the answer (they were reserved)");
    } else if (r == PDC_OK || r == PDC_PARTIAL) {
        snprintf(c->error, sizeof c->error, "answer to request %llu has the wrong body",
                 (unsigned long long)taken.id);
        r = PDC_ERR_PROTOCOL;
    }
    pdc__pending_release(&taken);
    return r;
}

void pdc_reserve_result_free(pdc_reserve_result *r)
{
    if (!r)
        return;
    free(r->waypoints);
    r->waypoints = NULL;
    r->count = 0;
    for (size_t d = 0; d < r->n_displaced; d++)
        free(r->displaced[d].waypoints);
    free(r->displaced);
    r->displaced = NULL;
    r->n_displaced = 0;
}

/* ReleaseAgent of one agent, or every agent with all: how many went. */
static int pdc__release_agents(pdc_conn *c, const char *scene, uint64_t agent, int all, uint64_t *released)
{
    *released = 0;
    if (!c || !scene || !scene[0])
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__ReleaseAgent body = PATHD__V1__RELEASE_AGENT__INIT;
    body.scene = (char *)scene;
    body.agent = agent;
    body.all = all != 0;
    msg.body_case = PATHD__V1__REQUEST__BODY_RELEASE_AGENT;
    msg.release_agent = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &msg, PATHD__V1__RESPONSE__BODY_RELEASE, &resp);
    if (r != PDC_OK)
        return r;
    /* a server before agents_released says only whether any went */
    *released = resp->release->agents_released ? resp->release->agents_released : resp->release->released != 0;
    pathd__v1__response__free_unpacked(resp, NULL);
    return PDC_OK;
}

int pdc_release_agent(pdc_conn *c, const char *scene, uint64_t agent, int *released)
{
    uint64_t n;
    const int r = pdc__release_agents(c, scene, agent, 0, &n);
    if (released)
        *released = n != 0;
    return r;
}

int pdc_release_all(pdc_conn *c, const char *scene, uint64_t *released)
{
    uint64_t n;
    const int r = pdc__release_agents(c, scene, 0, 1, &n);
    if (released)
        *released = n;
    return r;
}

int pdc_reservations(pdc_conn *c, const char *scene, int has_rect, pdc_xy rect_min, pdc_xy rect_max,
                     int64_t from_ms, int64_t to_ms, uint32_t max_entries, pdc_reservation_list *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !scene || !scene[0])
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__GetReservations body = PATHD__V1__GET_RESERVATIONS__INIT;
    Pathd__V1__Rect rect = PATHD__V1__RECT__INIT;
    Pathd__V1__Cell rmin = PATHD__V1__CELL__INIT, rmax = PATHD__V1__CELL__INIT;
    body.scene = (char *)scene;
    if (has_rect) {
        pdc__cell_to_wire(rect_min, &rmin);
        pdc__cell_to_wire(rect_max, &rmax);
        rect.min = &rmin;
        rect.max = &rmax;
        body.rect = &rect;
    }
    body.from_ms = from_ms;
    body.to_ms = to_ms;
    body.max_entries = max_entries;
    msg.body_case = PATHD__V1__REQUEST__BODY_RESERVATIONS;
    msg.reservations = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &msg, PATHD__V1__RESPONSE__BODY_RESERVATIONS, &resp);
    if (r != PDC_OK)
        return r;
    const Pathd__V1__ReservationList *m = resp->reservations;
    out->matching = m->matching;
    out->agents = m->agents;
    out->table_entries = m->table_entries;
    out->table_bytes = m->table_bytes;
    if (m->n_entries && !(out->entries = calloc(m->n_entries, sizeof *out->entries)))
        r = PDC_ERR_NOMEM;
    for (size_t i = 0; out->entries && i < m->n_entries; i++) {
        const Pathd__V1__Reservation *e = m->entries[i];
        out->entries[i] = (pdc_reservation){e->agent, e->x, e->y, e->width, e->height, e->t0_ms, e->t1_ms};
        out->count = i + 1;
    }
    pathd__v1__response__free_unpacked(resp, NULL);
    return r;
}

void pdc_reservation_list_free(pdc_reservation_list *l)
{
    if (!l)
        return;
    free(l->entries);
    l->entries = NULL;
    l->count = 0;
}

int pdc_update_cells(pdc_conn *c, const pdc_update_req *req, pdc_update_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !req || !req->scene || !req->scene[0] || !pdc__update_ok(req))
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__UpdateCells body = PATHD__V1__UPDATE_CELLS__INIT;
    pdc__wire_op w;
    if (pdc__op_to_wire(req, &w) != PDC_OK)
        return PDC_ERR_NOMEM;
    body.scene = (char *)req->scene;
    body.op = w.op;
    body.cost = req->cost;
    if (req->is_rect) {
        body.target_case = PATHD__V1__UPDATE_CELLS__TARGET_RECT;
        body.rect = &w.rect;
    } else {
        body.target_case = PATHD__V1__UPDATE_CELLS__TARGET_CELLS;
        body.cells = &w.list;
    }
    msg.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
    msg.update_cells = &body;
    int r = pdc__update_answer(c, &msg, out);
    free(w.cells);
    free(w.ptrs);
    return r;
}

int pdc_update_cells_many(pdc_conn *c, const pdc_update_req *ops, size_t n_ops, pdc_update_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !ops || n_ops < 1 || n_ops > 64 || !ops[0].scene || !ops[0].scene[0])
        return PDC_ERR_ARG;
    for (size_t i = 0; i < n_ops; i++)
        if (!pdc__update_ok(&ops[i]))
            return PDC_ERR_ARG;
    pdc__wire_op *w = calloc(n_ops, sizeof *w);
    Pathd__V1__CellOp *wire = calloc(n_ops, sizeof *wire);
    Pathd__V1__CellOp **ptrs = calloc(n_ops, sizeof *ptrs);
    size_t made = 0;
    int r = w && wire && ptrs ? PDC_OK : PDC_ERR_NOMEM;
    for (; r == PDC_OK && made < n_ops; made++) {
        if ((r = pdc__op_to_wire(&ops[made], &w[made])) != PDC_OK)
            break;
        Pathd__V1__CellOp *o = &wire[made];
        *o = (Pathd__V1__CellOp)PATHD__V1__CELL_OP__INIT;
        o->op = w[made].op;
        o->cost = ops[made].cost;
        if (ops[made].is_rect) {
            o->target_case = PATHD__V1__CELL_OP__TARGET_RECT;
            o->rect = &w[made].rect;
        } else {
            o->target_case = PATHD__V1__CELL_OP__TARGET_CELLS;
            o->cells = &w[made].list;
        }
        ptrs[made] = o;
    }
    if (r == PDC_OK) {
        Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
        Pathd__V1__UpdateCells body = PATHD__V1__UPDATE_CELLS__INIT;
        body.scene = (char *)ops[0].scene;
        body.n_ops = n_ops;
        body.ops = ptrs;
        msg.body_case = PATHD__V1__REQUEST__BODY_UPDATE_CELLS;
        msg.update_cells = &body;
        r = pdc__update_answer(c, &msg, out);
    }
    for (size_t i = 0; w && i < n_ops; i++) {
        free(w[i].cells);
        free(w[i].ptrs);
    }
    free(w);
    free(wire);
    free(ptrs);
    return r;
}

/* Sends a scene change and reads its SceneChange answer. */
static int pdc__scene_change(pdc_conn *c, Pathd__V1__Request *msg, pdc_scene_change *out)
{
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, msg, PATHD__V1__RESPONSE__BODY_SCENE_CHANGE, &resp);
    if (r != PDC_OK)
        return r;
    out->version = resp->scene_change->version;
    out->own_bytes = resp->scene_change->own_bytes;
    out->scene_bytes = resp->scene_change->scene_bytes;
    pathd__v1__response__free_unpacked(resp, NULL);
    return PDC_OK;
}

int pdc_create_scene(pdc_conn *c, const pdc_create_scene_req *req, pdc_scene_change *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !req || !req->name || !req->name[0] || (!req->map == !req->cells))
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__CreateScene body = PATHD__V1__CREATE_SCENE__INIT;
    body.name = (char *)req->name;
    if (req->map) {
        body.format = (char *)(req->format ? req->format : "");
        body.map.data = (uint8_t *)req->map;
        body.map.len = req->map_len;
    } else {
        body.width = req->width;
        body.height = req->height;
        body.cells.data = (uint8_t *)req->cells;
        body.cells.len = req->width > 0 && req->height > 0 ? (size_t)req->width * (size_t)req->height : 0;
    }
    body.origin_x = req->origin_x;
    body.origin_y = req->origin_y;
    body.cell_size = req->cell_size;
    body.unit_sizes = (uint32_t *)req->unit_sizes;
    body.n_unit_sizes = req->unit_sizes ? req->unit_size_count : 0;
    msg.body_case = PATHD__V1__REQUEST__BODY_CREATE_SCENE;
    msg.create_scene = &body;
    return pdc__scene_change(c, &msg, out);
}

int pdc_create_instance(pdc_conn *c, const char *name, const char *template_scene,
                        pdc_scene_change *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !name || !name[0] || !template_scene || !template_scene[0])
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__CreateInstance body = PATHD__V1__CREATE_INSTANCE__INIT;
    body.name = (char *)name;
    body.template_ = (char *)template_scene;
    msg.body_case = PATHD__V1__REQUEST__BODY_CREATE_INSTANCE;
    msg.create_instance = &body;
    return pdc__scene_change(c, &msg, out);
}

int pdc_drop_scene(pdc_conn *c, const char *name, int drop_portals, pdc_scene_change *out)
{
    if (!out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    if (!c || !name || !name[0])
        return PDC_ERR_ARG;
    Pathd__V1__Request msg = PATHD__V1__REQUEST__INIT;
    Pathd__V1__DropScene body = PATHD__V1__DROP_SCENE__INIT;
    body.name = (char *)name;
    body.drop_portals = drop_portals != 0;
    msg.body_case = PATHD__V1__REQUEST__BODY_DROP_SCENE;
    msg.drop_scene = &body;
    return pdc__scene_change(c, &msg, out);
}

/* Sends Auth with the kept token and waits for its answer. */
static int pdc__authenticate(pdc_conn *c, char *role, size_t role_len)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Auth body = PATHD__V1__AUTH__INIT;
    body.token = c->token;
    req.body_case = PATHD__V1__REQUEST__BODY_AUTH;
    req.auth = &body;
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_AUTH, &resp);
    if (r != PDC_OK)
        return r;
    if (role && role_len > 0)
        snprintf(role, role_len, "%s", resp->auth->role ? resp->auth->role : "");
    pathd__v1__response__free_unpacked(resp, NULL);
    return PDC_OK;
}

int pdc_auth(pdc_conn *c, const char *token, char *role, size_t role_len)
{
    if (!c || !token || strlen(token) >= sizeof c->token)
        return PDC_ERR_ARG;
    snprintf(c->token, sizeof c->token, "%s", token);
    int r = pdc__authenticate(c, role, role_len);
    if (r == PDC_OK && !c->limits_known)
        (void)pdc__read_limits(c); /* refused before the token came */
    return r;
}

int pdc_reload(pdc_conn *c)
{
    if (!c)
        return PDC_ERR_ARG;
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Reload body = PATHD__V1__RELOAD__INIT;
    req.body_case = PATHD__V1__REQUEST__BODY_RELOAD;
    req.reload = &body;
    pdc__pending taken;
    int r = pdc__call(c, &req, PDC__KIND_OTHER, &taken);
    pdc__pending_release(&taken);
    return r;
}

int pdc_ping(pdc_conn *c, uint64_t *rtt_micros)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Ping body = PATHD__V1__PING__INIT;
    /* Any value the server could not guess works; the clock is at hand. */
    body.nonce = pdc__now_us() ^ 0x9e3779b97f4a7c15ull;
    req.body_case = PATHD__V1__REQUEST__BODY_PING;
    req.ping = &body;
    uint64_t start = pdc__now_us();
    Pathd__V1__Response *resp;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_PONG, &resp);
    if (r != PDC_OK)
        return r;
    if (resp->pong->nonce != body.nonce) {
        snprintf(c->error, sizeof c->error, "pong carries the wrong nonce");
        r = PDC_ERR_PROTOCOL;
    }
    if (rtt_micros)
        *rtt_micros = pdc__now_us() - start;
    pathd__v1__response__free_unpacked(resp, NULL);
    return r;
}

/* ---- movement queries ------------------------------------------------------ */

const char *pdc_move_reason_name(int reason)
{
    static const char *const names[] = {"valid", "out_of_bounds", "blocked_point", "blocked_segment", "too_fast",
                                        "time_not_increasing"};
    return reason >= 0 && (size_t)reason < sizeof names / sizeof names[0] ? names[reason] : "unknown";
}

/* Everything one query needs on the wire, owned by the caller's stack or a
 * batch's array. */
typedef struct pdc__query_msg {
    Pathd__V1__Query query;
    union {
        Pathd__V1__Raycast raycast;
        Pathd__V1__ValidateMove validate;
        Pathd__V1__MoveAlong move;
        Pathd__V1__NearestWalkable nearest;
        Pathd__V1__IsReachable reachable;
        Pathd__V1__RandomPoint random;
        Pathd__V1__DistanceToWall wall;
    } u;
    Pathd__V1__Point a, b;
    Pathd__V1__Cell a_cell, b_cell;
    Pathd__V1__WorldPoint a_world, b_world;
    Pathd__V1__TimedPoint *timed;      /* VALIDATE: move_count entries */
    Pathd__V1__TimedPoint **timed_ptrs;
    Pathd__V1__Point *points;
    Pathd__V1__Cell *cells;
    Pathd__V1__WorldPoint *worlds;
    pdc__find_msg find;                /* FIND_PATH: the FindPath and its arrays */
} pdc__query_msg;

static void pdc__query_msg_free(pdc__query_msg *m)
{
    pdc__find_msg_free(&m->find);
    free(m->timed);
    free(m->timed_ptrs);
    free(m->points);
    free(m->cells);
    free(m->worlds);
}

/* Builds m->query from q; PDC_ERR_ARG for a query the server would refuse
 * for its shape alone, PDC_ERR_NOMEM. */
static int pdc__build_query_body(const pdc_query *q, pdc__query_msg *m);

static int pdc__build_query(const pdc_query *q, pdc__query_msg *m)
{
    int r = pdc__build_query_body(q, m);
    /* Every movement query has min_version at the same field number; the
     * kinds' messages differ, so each is set by name. */
    switch (m->query.kind_case) {
    case PATHD__V1__QUERY__KIND_RAYCAST: m->u.raycast.min_version = q->min_version; break;
    case PATHD__V1__QUERY__KIND_VALIDATE_MOVE: m->u.validate.min_version = q->min_version; break;
    case PATHD__V1__QUERY__KIND_MOVE_ALONG: m->u.move.min_version = q->min_version; break;
    case PATHD__V1__QUERY__KIND_NEAREST: m->u.nearest.min_version = q->min_version; break;
    case PATHD__V1__QUERY__KIND_REACHABLE: m->u.reachable.min_version = q->min_version; break;
    case PATHD__V1__QUERY__KIND_RANDOM_POINT: m->u.random.min_version = q->min_version; break;
    case PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL: m->u.wall.min_version = q->min_version; break;
    default: break;
    }
    return r;
}

static int pdc__build_query_body(const pdc_query *q, pdc__query_msg *m)
{
    memset(m, 0, sizeof *m);
    pathd__v1__query__init(&m->query);
    if (q->kind == PDC_Q_FIND_PATH) {
        if (!q->path)
            return PDC_ERR_ARG;
        int r = pdc__build_find(q->path, &m->find);
        m->query.kind_case = PATHD__V1__QUERY__KIND_FIND_PATH;
        m->query.find_path = &m->find.fp;
        return r;
    }
    if (!q->scene || !q->scene[0])
        return PDC_ERR_ARG;
    pdc__point_to_wire(&q->a, &m->a, &m->a_cell, &m->a_world);
    pdc__point_to_wire(&q->b, &m->b, &m->b_cell, &m->b_world);
    char *scene = (char *)q->scene;
    switch (q->kind) {
    case PDC_Q_RAYCAST:
        pathd__v1__raycast__init(&m->u.raycast);
        m->u.raycast.scene = scene;
        m->u.raycast.unit_size = q->unit_size;
        m->u.raycast.from = &m->a;
        m->u.raycast.to = &m->b;
        m->query.kind_case = PATHD__V1__QUERY__KIND_RAYCAST;
        m->query.raycast = &m->u.raycast;
        return PDC_OK;
    case PDC_Q_VALIDATE_MOVE: {
        if (!q->moves || q->move_count == 0 || q->move_count > PDC_MAX_MOVES)
            return PDC_ERR_ARG;
        size_t n = q->move_count;
        m->timed = calloc(n, sizeof *m->timed);
        m->timed_ptrs = calloc(n, sizeof *m->timed_ptrs);
        m->points = calloc(n, sizeof *m->points);
        m->cells = calloc(n, sizeof *m->cells);
        m->worlds = calloc(n, sizeof *m->worlds);
        if (!m->timed || !m->timed_ptrs || !m->points || !m->cells || !m->worlds)
            return PDC_ERR_NOMEM;
        for (size_t i = 0; i < n; i++) {
            pathd__v1__timed_point__init(&m->timed[i]);
            pdc__point_to_wire(&q->moves[i].point, &m->points[i], &m->cells[i], &m->worlds[i]);
            m->timed[i].point = &m->points[i];
            m->timed[i].t = q->moves[i].t;
            m->timed_ptrs[i] = &m->timed[i];
        }
        pathd__v1__validate_move__init(&m->u.validate);
        m->u.validate.scene = scene;
        m->u.validate.unit_size = q->unit_size;
        m->u.validate.n_moves = n;
        m->u.validate.moves = m->timed_ptrs;
        m->u.validate.max_speed = q->max_speed;
        m->u.validate.tolerance = q->tolerance;
        m->query.kind_case = PATHD__V1__QUERY__KIND_VALIDATE_MOVE;
        m->query.validate_move = &m->u.validate;
        return PDC_OK;
    }
    case PDC_Q_MOVE_ALONG:
        pathd__v1__move_along__init(&m->u.move);
        m->u.move.scene = scene;
        m->u.move.unit_size = q->unit_size;
        m->u.move.from = &m->a;
        m->u.move.dx = q->dx;
        m->u.move.dy = q->dy;
        m->query.kind_case = PATHD__V1__QUERY__KIND_MOVE_ALONG;
        m->query.move_along = &m->u.move;
        return PDC_OK;
    case PDC_Q_NEAREST:
        pathd__v1__nearest_walkable__init(&m->u.nearest);
        m->u.nearest.scene = scene;
        m->u.nearest.unit_size = q->unit_size;
        m->u.nearest.at = &m->a;
        m->u.nearest.radius = (uint32_t)q->radius;
        m->u.nearest.reachable_from = q->has_b ? &m->b : NULL;
        m->query.kind_case = PATHD__V1__QUERY__KIND_NEAREST;
        m->query.nearest = &m->u.nearest;
        return PDC_OK;
    case PDC_Q_REACHABLE:
        pathd__v1__is_reachable__init(&m->u.reachable);
        m->u.reachable.scene = scene;
        m->u.reachable.unit_size = q->unit_size;
        m->u.reachable.from = &m->a;
        m->u.reachable.to = &m->b;
        m->query.kind_case = PATHD__V1__QUERY__KIND_REACHABLE;
        m->query.reachable = &m->u.reachable;
        return PDC_OK;
    case PDC_Q_RANDOM_POINT:
        pathd__v1__random_point__init(&m->u.random);
        m->u.random.scene = scene;
        m->u.random.unit_size = q->unit_size;
        m->u.random.around = &m->a;
        m->u.random.radius = q->radius;
        m->u.random.seed = q->seed;
        m->query.kind_case = PATHD__V1__QUERY__KIND_RANDOM_POINT;
        m->query.random_point = &m->u.random;
        return PDC_OK;
    case PDC_Q_DISTANCE_TO_WALL:
        pathd__v1__distance_to_wall__init(&m->u.wall);
        m->u.wall.scene = scene;
        m->u.wall.unit_size = q->unit_size;
        m->u.wall.at = &m->a;
        m->u.wall.max_distance = (uint32_t)q->radius;
        m->query.kind_case = PATHD__V1__QUERY__KIND_DISTANCE_TO_WALL;
        m->query.distance_to_wall = &m->u.wall;
        return PDC_OK;
    default:
        return PDC_ERR_ARG;
    }
}

static void pdc__take_cell(const Pathd__V1__Cell *c, int *has, pdc_xy *out)
{
    if (c) {
        *has = 1;
        *out = (pdc_xy){c->x, c->y};
    }
}

static void pdc__take_world(const Pathd__V1__WorldPoint *w, pdc_query_result *out)
{
    if (w) {
        out->wx = w->x;
        out->wy = w->y;
    }
}

/* Copies one answer body (the same sub-messages serve a single query's
 * Response and a batch item); returns 0 when the body is not the kind's. */
static int pdc__take_query_result(pdc_query_kind kind, int body, const void *msg, pdc_query_result *out)
{
    switch (kind) {
    case PDC_Q_RAYCAST: {
        const Pathd__V1__RaycastResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_RAYCAST || !r)
            return 0;
        out->version = r->version;
        out->yes = r->clear;
        pdc__take_cell(r->hit, &out->has_hit, &out->hit);
        pdc__take_cell(r->last_free, &out->has_cell, &out->cell);
        pdc__take_world(r->last_free_world, out);
        return 1;
    }
    case PDC_Q_VALIDATE_MOVE: {
        const Pathd__V1__ValidateMoveResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_VALIDATE_MOVE || !r)
            return 0;
        out->version = r->version;
        out->yes = r->valid;
        out->first_invalid = r->first_invalid;
        out->reason = (int)r->reason;
        pdc__take_cell(r->last_valid, &out->has_cell, &out->cell);
        pdc__take_world(r->last_valid_world, out);
        return 1;
    }
    case PDC_Q_MOVE_ALONG: {
        const Pathd__V1__MoveAlongResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_MOVE_ALONG || !r)
            return 0;
        out->version = r->version;
        out->yes = r->slid;
        pdc__take_cell(r->end, &out->has_cell, &out->cell);
        pdc__take_world(r->end_world, out);
        return 1;
    }
    case PDC_Q_NEAREST: {
        const Pathd__V1__NearestResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_NEAREST || !r)
            return 0;
        out->version = r->version;
        out->distance = r->distance;
        pdc__take_cell(r->cell, &out->has_cell, &out->cell);
        pdc__take_world(r->world, out);
        return 1;
    }
    case PDC_Q_REACHABLE: {
        const Pathd__V1__ReachableResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_REACHABLE || !r)
            return 0;
        out->version = r->version;
        out->yes = r->reachable;
        return 1;
    }
    case PDC_Q_RANDOM_POINT: {
        const Pathd__V1__RandomPointResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_RANDOM_POINT || !r)
            return 0;
        out->version = r->version;
        out->seed = r->seed;
        out->candidates = r->candidates;
        pdc__take_cell(r->cell, &out->has_cell, &out->cell);
        pdc__take_world(r->world, out);
        return 1;
    }
    default: {
        const Pathd__V1__DistanceToWallResult *r = msg;
        if (body != PATHD__V1__QUERY_RESULT__KIND_DISTANCE_TO_WALL || !r)
            return 0;
        out->version = r->version;
        out->distance = r->distance;
        pdc__take_cell(r->wall, &out->has_hit, &out->hit);
        return 1;
    }
    }
}

/* The Response body of a single query of each kind, and the batch item
 * case it corresponds to (the numbering differs between the two oneofs). */
static int pdc__response_item_case(int response_case)
{
    return response_case - PATHD__V1__RESPONSE__BODY_RAYCAST + PATHD__V1__QUERY_RESULT__KIND_RAYCAST;
}

static void pdc__query_result_reset(pdc_query_result *out)
{
    memset(out, 0, sizeof *out);
    out->first_invalid = -1;
}

int pdc_query_run(pdc_conn *c, const pdc_query *q, pdc_query_result *out)
{
    if (!out)
        return PDC_ERR_ARG;
    pdc__query_result_reset(out);
    if (!c || !q || q->kind == PDC_Q_FIND_PATH) /* alone, a path is pdc_find_path's */
        return PDC_ERR_ARG;
    pdc__query_msg m;
    int r = pdc__build_query(q, &m);
    if (r != PDC_OK) {
        pdc__query_msg_free(&m);
        return out->status = r;
    }
    /* A Request's body oneof has the same members as Query's, numbered
     * from Raycast = 40 in the same order. */
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    req.body_case = (Pathd__V1__Request__BodyCase)(PATHD__V1__REQUEST__BODY_RAYCAST + (m.query.kind_case - 1));
    req.raycast = m.query.raycast;
    Pathd__V1__Response__BodyCase expect =
        (Pathd__V1__Response__BodyCase)(PATHD__V1__RESPONSE__BODY_RAYCAST + (m.query.kind_case - 1));
    Pathd__V1__Response *resp = NULL;
    r = pdc__call_other(c, &req, expect, &resp);
    pdc__query_msg_free(&m);
    out->status = r;
    if (r != PDC_OK) {
        snprintf(out->message, sizeof out->message, "%s", pdc_last_error(c));
        if (r == PDC_STALE_VERSION)
            out->version = c->stale_version;
        return r;
    }
    if (!pdc__take_query_result(q->kind, pdc__response_item_case((int)resp->body_case), resp->raycast, out)) {
        snprintf(c->error, sizeof c->error, "answer has no result body");
        r = out->status = PDC_ERR_PROTOCOL;
    }
    pathd__v1__response__free_unpacked(resp, NULL);
    return r;
}

/* A batch item's path answer: its one chunk (maybe without waypoints),
 * assembled as a streamed path's are. */
static int pdc__take_item_path(pdc_conn *c, const Pathd__V1__QueryResult *it, pdc_path_result *out)
{
    const Pathd__V1__PathChunk *chunk = it->path;
    pdc__pending tmp;
    memset(&tmp, 0, sizeof tmp);
    snprintf(tmp.message, sizeof tmp.message, "%s", it->message ? it->message : "");
    int r = pdc__append_chunk(c, &tmp, chunk);
    if (r != PDC_OK) {
        pdc__pending_release(&tmp);
        return r;
    }
    pdc__chunk_totals(&tmp, chunk);
    tmp.status = (int)it->status;
    pdc__path_take(&tmp, out);
    return PDC_OK;
}

void pdc_query_result_free(pdc_query_result *r)
{
    if (r)
        pdc_path_result_free(&r->path);
}

int pdc_batch(pdc_conn *c, const pdc_query *q, size_t n, pdc_query_result *out)
{
    if (!out || !c || !q || n == 0 || n > PDC_MAX_BATCH)
        return PDC_ERR_ARG;
    for (size_t i = 0; i < n; i++)
        pdc__query_result_reset(&out[i]);
    pdc__query_msg *msgs = calloc(n, sizeof *msgs);
    Pathd__V1__Query **items = calloc(n, sizeof *items);
    int r = msgs && items ? PDC_OK : PDC_ERR_NOMEM;
    size_t built = 0;
    for (; r == PDC_OK && built < n; built++) {
        r = pdc__build_query(&q[built], &msgs[built]);
        items[built] = &msgs[built].query;
    }
    Pathd__V1__Response *resp = NULL;
    if (r == PDC_OK) {
        Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
        Pathd__V1__Batch batch = PATHD__V1__BATCH__INIT;
        batch.n_items = n;
        batch.items = items;
        req.body_case = PATHD__V1__REQUEST__BODY_BATCH;
        req.batch = &batch;
        r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY_BATCH, &resp);
    }
    for (size_t i = 0; msgs && i < built; i++)
        pdc__query_msg_free(&msgs[i]);
    free(msgs);
    free(items);
    if (r != PDC_OK)
        return r;
    const Pathd__V1__BatchResult *b = resp->batch;
    if (b->n_items != n) {
        snprintf(c->error, sizeof c->error, "batch of %zu answered with %zu items", n, b->n_items);
        r = PDC_ERR_PROTOCOL;
    }
    for (size_t i = 0; r == PDC_OK && i < n; i++) {
        const Pathd__V1__QueryResult *it = b->items[i];
        out[i].status = (int)it->status;
        if (q[i].kind == PDC_Q_FIND_PATH) {
            out[i].path.status = out[i].status;
            out[i].path.scene_version = out[i].version = it->version;
            snprintf(out[i].message, sizeof out[i].message, "%s", it->message ? it->message : "");
            snprintf(out[i].path.message, sizeof out[i].path.message, "%s", out[i].message);
            if (it->kind_case == PATHD__V1__QUERY_RESULT__KIND_PATH && it->path)
                r = pdc__take_item_path(c, it, &out[i].path);
            continue;
        }
        if (it->status != PATHD__V1__STATUS__OK) {
            snprintf(out[i].message, sizeof out[i].message, "%s", it->message ? it->message : "");
            out[i].version = it->version;
            continue;
        }
        if (!pdc__take_query_result(q[i].kind, (int)it->kind_case, it->raycast, &out[i])) {
            snprintf(c->error, sizeof c->error, "batch item %zu has no result of its kind", i);
            r = PDC_ERR_PROTOCOL;
        }
    }
    pathd__v1__response__free_unpacked(resp, NULL);
    return r;
}

/* ---- watching scenes ---------------------------------------------------- */

const char *pdc_watch_kind_name(int kind)
{
    static const char *const names[] = { "started", "updated", "replaced", "instanced", "dropped", "ended",
                                           "agents_cut", "agents_displaced", "agents_expired",
                                           "agents_released" };
    return kind >= 0 && kind < (int)(sizeof names / sizeof names[0]) ? names[kind] : "unknown";
}

void pdc_watch_event_free(pdc_watch_event *e)
{
    if (!e)
        return;
    free(e->ops);
    free(e->agents);
    memset(e, 0, sizeof *e);
}

/* A queued frame as the caller's event; takes and frees resp. */
static int pdc__event_take(pdc_conn *c, Pathd__V1__Response *resp, pdc_watch_event *out)
{
    memset(out, 0, sizeof *out);
    out->watch_id = resp->id;
    out->status = (int)resp->status;
    out->final = resp->final;
    int r = PDC_OK;
    if (resp->body_case == PATHD__V1__RESPONSE__BODY_ERROR && resp->error) {
        snprintf(out->message, sizeof out->message, "%s", resp->error->message ? resp->error->message : "");
    } else if (resp->body_case == PATHD__V1__RESPONSE__BODY_WATCH_EVENT && resp->watch_event) {
        const Pathd__V1__WatchEvent *ev = resp->watch_event;
        out->kind = (int)ev->kind;
        snprintf(out->scene, sizeof out->scene, "%s", ev->scene ? ev->scene : "");
        snprintf(out->instance, sizeof out->instance, "%s", ev->instance ? ev->instance : "");
        out->version = ev->version;
        out->incarnation = ev->incarnation;
        out->cells_changed = ev->cells_changed;
        if (ev->changed && ev->changed->min && ev->changed->max) {
            out->has_changed = 1;
            out->changed_min = (pdc_xy){ ev->changed->min->x, ev->changed->min->y };
            out->changed_max = (pdc_xy){ ev->changed->max->x, ev->changed->max->y };
        }
        if (ev->n_ops && !(out->ops = calloc(ev->n_ops, sizeof *out->ops))) {
            r = PDC_ERR_NOMEM;
        } else {
            for (size_t k = 0; k < ev->n_ops; k++) {
                const Pathd__V1__WatchOp *op = ev->ops[k];
                out->ops[k].op = (pdc_update_op)op->op;
                out->ops[k].cost = op->cost;
                out->ops[k].cells = op->cells;
                if (op->bounds && op->bounds->min && op->bounds->max) {
                    out->ops[k].min = (pdc_xy){ op->bounds->min->x, op->bounds->min->y };
                    out->ops[k].max = (pdc_xy){ op->bounds->max->x, op->bounds->max->y };
                }
            }
            out->op_count = ev->n_ops;
        }
        out->cut_at_ms = ev->cut_at_ms;
        if (r == PDC_OK && ev->n_agents) {
            if (!(out->agents = malloc(ev->n_agents * sizeof *out->agents))) {
                r = PDC_ERR_NOMEM;
            } else {
                memcpy(out->agents, ev->agents, ev->n_agents * sizeof *out->agents);
                out->agent_count = ev->n_agents;
            }
        }
    } else {
        snprintf(c->error, sizeof c->error, "watch %llu sent a frame with no event", (unsigned long long)resp->id);
        r = PDC_ERR_PROTOCOL;
    }
    pathd__v1__response__free_unpacked(resp, NULL);
    return r;
}

/* Drops watches a failed connection completed; returns their status, or
 * PDC_OK when none had failed. */
static int pdc__watch_failures(pdc_conn *c)
{
    int status = PDC_OK;
    for (size_t i = 0; i < c->npending;) {
        pdc__pending *p = &c->pending[i];
        if (p->kind == PDC__KIND_WATCH && p->done_order) {
            status = p->status;
            pdc__pending_remove(c, p);
        } else {
            i++;
        }
    }
    return status;
}

int pdc_watch(pdc_conn *c, const char *const *scenes, size_t n, uint64_t *watch_id)
{
    if (!c || !scenes || n == 0 || n > PDC_MAX_WATCH_SCENES || !watch_id)
        return PDC_ERR_ARG;
    for (size_t i = 0; i < n; i++)
        if (!scenes[i] || !scenes[i][0])
            return PDC_ERR_ARG;
    c->error[0] = '\0';
    /* Not on a draining or too old connection: a new watch belongs on the next. */
    if (c->fd >= 0 && (c->draining || pdc__aged(c)))
        pdc__retire(c, pdc__deadline_after(c->timeout_ms));
    if (c->fd < 0 && pdc_reconnect(c) != PDC_OK)
        return PDC_ERR_CONNECT;
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Watch body = PATHD__V1__WATCH__INIT;
    body.scenes = (char **)scenes;
    body.n_scenes = n;
    req.body_case = PATHD__V1__REQUEST__BODY_WATCH;
    req.watch = &body;
    uint64_t id;
    int r = pdc__send_tracked(c, &req, PDC__KIND_WATCH, &id);
    if (r != PDC_OK)
        return r;
    int64_t deadline = pdc__deadline_after(c->timeout_ms);
    for (;;) {
        /* The watch's first frame: its first STARTED event, or the refusal. */
        for (size_t i = c->event_head; i < c->nevents; i++) {
            Pathd__V1__Response *resp = c->events[i];
            if (resp->id != id)
                continue;
            if (resp->status == PATHD__V1__STATUS__OK) {
                *watch_id = id;
                return PDC_OK;
            }
            memmove(c->events + i, c->events + i + 1, (c->nevents - i - 1) * sizeof *c->events);
            c->nevents--;
            r = (int)resp->status;
            snprintf(c->error, sizeof c->error, "%s",
                     resp->body_case == PATHD__V1__RESPONSE__BODY_ERROR && resp->error && resp->error->message
                         ? resp->error->message : "");
            pathd__v1__response__free_unpacked(resp, NULL);
            return r;
        }
        pdc__pending *p = pdc__pending_find(c, id);
        if (p && p->done_order) {
            r = p->status;
            pdc__pending_remove(c, p);
            return r;
        }
        Pathd__V1__Response *resp = NULL;
        r = pdc__read_frame(c, deadline, &resp);
        if (r == PDC_ERR_TIMEOUT) {
            if ((p = pdc__pending_find(c, id)))
                pdc__pending_remove(c, p);
            snprintf(c->error, sizeof c->error, "no answer to Watch within %d ms", c->timeout_ms);
            return r;
        }
        if (r == PDC_OK)
            pdc__dispatch(c, resp);
    }
}

int pdc_watch_next(pdc_conn *c, int timeout_ms, pdc_watch_event *out)
{
    if (!c || !out)
        return PDC_ERR_ARG;
    memset(out, 0, sizeof *out);
    int64_t deadline = pdc__deadline_after(timeout_ms);
    for (;;) {
        if (c->event_head < c->nevents) {
            Pathd__V1__Response *resp = c->events[c->event_head++];
            if (c->event_head == c->nevents)
                c->event_head = c->nevents = 0;
            return pdc__event_take(c, resp, out);
        }
        int failed = pdc__watch_failures(c);
        if (failed != PDC_OK)
            return failed;
        size_t open = 0;
        for (size_t i = 0; i < c->npending; i++)
            open += c->pending[i].kind == PDC__KIND_WATCH;
        if (open == 0)
            return c->fd < 0 ? PDC_ERR_DISCONNECTED : PDC_ERR_IDLE;
        Pathd__V1__Response *resp = NULL;
        int r = pdc__read_frame(c, deadline, &resp);
        if (r == PDC_ERR_TIMEOUT)
            return r;
        if (r == PDC_OK)
            pdc__dispatch(c, resp);
    }
}

int pdc_unwatch(pdc_conn *c, uint64_t watch_id)
{
    Pathd__V1__Request req = PATHD__V1__REQUEST__INIT;
    Pathd__V1__Unwatch body = PATHD__V1__UNWATCH__INIT;
    body.watch_id = watch_id;
    req.body_case = PATHD__V1__REQUEST__BODY_UNWATCH;
    req.unwatch = &body;
    Pathd__V1__Response *resp = NULL;
    int r = pdc__call_other(c, &req, PATHD__V1__RESPONSE__BODY__NOT_SET, &resp);
    if (resp)
        pathd__v1__response__free_unpacked(resp, NULL);
    return r;
}
