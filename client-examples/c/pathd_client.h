/*
 * pathd_client.h - a small C client for the pathd pathfinding daemon.
 *
 * This is example code meant to be copied into a game server: it depends only
 * on libc, POSIX sockets and protobuf-c (plus the code protoc-c generates from
 * proto/pathd.proto), never on the daemon's own libraries.
 *
 * Wire format (see docs/PROTOCOL.md): every message is a 4-byte big-endian
 * length followed by one protobuf message; the client sends pathd.v1.Request,
 * the server answers with pathd.v1.Response frames carrying the request's id.
 * A path arrives as one or more PathChunk frames; the last has final = true
 * and carries cost, expansions, search time and scene version. Answers to
 * different requests may arrive in any order.
 *
 * Two ways to call:
 *   - Blocking: pdc_find_path, pdc_find_route, pdc_update_cells, pdc_list_scenes,
 *     pdc_scene_info, pdc_scene_grid, pdc_stats, pdc_ping send one request
 *     (pdc_scene_grid: one per band of rows) and wait for its answer (other
 *     answers that
 *     arrive meanwhile are kept for pdc_recv_result). An OVERLOADED answer is
 *     retried with exponential backoff, at most PDC_RETRY_ATTEMPTS times.
 *   - Pipelined: pdc_send_find_path sends without waiting and returns the
 *     request id; pdc_recv_result hands back completed paths in completion
 *     order, whatever their id. OVERLOADED is handed back, not retried.
 *
 * Flow control: pdc_connect reads GetLimits, and the connection then keeps
 * at most the server's max_inflight_per_conn slots outstanding, counting a
 * Batch's items as the server does (one slot each), so the server never has
 * to refuse it OVERLOADED for its own excess. Requests beyond the cap wait
 * in a local queue, in order, and go out as answers free slots, whenever
 * the connection reads (any blocking call, pdc_recv_result, pdc_watch_next).
 * The queue holds at most PDC_DEFAULT_MAX_QUEUED requests
 * (pdc_set_max_queued); past it a call returns PDC_ERR_QUEUE_FULL and
 * nothing is sent. OVERLOADED that the server gives on its own (its shared
 * job queue is full) is retried by blocking calls after a pause that doubles
 * from PDC_RETRY_BACKOFF_FIRST_MS plus up to half of it at random, at most
 * PDC_RETRY_ATTEMPTS times and within the timeout (pdc_set_retry).
 * pdc_set_flow_control(c, 0) sends everything at once, as before.
 *
 * Return values: every call returns an int that is either a wire status
 * (PDC_OK .. PDC_INTERNAL, >= 0, the server's answer) or a negative client-side
 * error (PDC_ERR_*, the request got no answer). pdc_status_name() names both.
 *
 * Connection loss: when the connection drops (or the server sends something
 * that breaks the protocol), every request still waiting for its answer fails
 * with PDC_ERR_DISCONNECTED (or PDC_ERR_PROTOCOL). Reconnecting: the next
 * BLOCKING call reconnects automatically to the same address (returning
 * PDC_ERR_CONNECT if that fails); the pipelined API never does, call
 * pdc_reconnect() yourself.
 *
 * Replicas (several pathd behind HAProxy; docs/PROTOCOL.md, "Clients and
 * replicas"): a BLOCKING call rides out a replica that dies, restarts or
 * drains, within its retry deadline (pdc_set_retry; default the timeout):
 *   - pdc_set_reconnect (default on): a blocking call that finds no
 *     connection, or loses it with its answer owed, connects again, pausing
 *     between attempts from PDC_RECONNECT_BACKOFF_FIRST_MS doubling up to
 *     PDC_RECONNECT_BACKOFF_MAX_MS (half fixed, half random), and sends its
 *     request again when that is safe: a query always, an update
 *     (pdc_update_cells*, pdc_create_scene, pdc_create_instance,
 *     pdc_drop_scene) when it carries an idempotency key. Reservations made
 *     or released, watches and reloads are never sent twice. Pipelined
 *     requests (pdc_send_find_path*) are not sent again: they fail with
 *     PDC_ERR_DISCONNECTED as before.
 *   - pdc_set_idempotency_keys (default on): every update carries a fresh key
 *     (128 random bits in hex), or the one given with
 *     pdc_set_next_idempotency_key, so the change log applies it once
 *     however often it is sent.
 *   - PDC_STALE_VERSION (the BEHIND) and PDC_UNAVAILABLE (the change
 *     log cannot be reached; nothing changed) are retried after jittered
 *     pauses as PDC_OVERLOADED is, with the same key.
 *   - PDC_DRAINING (sent by a replica about to stop: unsolicited with id 0, or
 *     as an answer): nothing more is sent on that connection; the next
 *     blocking call first reads the answers still owed on it (pipelined
 *     paths), then closes it and connects again (HAProxy picks another
 *     replica), and a request refused DRAINING goes again there at once.
 *     Requests queued behind the in-flight cap go out on the new connection;
 *     a pipelined request sent meanwhile is answered PDC_DRAINING (any
 *     blocking call, or pdc_reconnect, then moves). A new connection whose
 *     Auth or GetLimits is answered DRAINING is closed at once and counts
 *     as one that could not be opened (the reconnect pauses above); one
 *     refused inside pdc_connect is kept but marked draining, so the first
 *     blocking call moves before it sends anything there.
 *     This client is single-threaded, so the old connection's owed answers
 *     are read before the new one opens, not beside it.
 *   - pdc_set_max_conn_age (default PDC_MAX_CONN_AGE_MS, 10 minutes; 0: never):
 *     a connection older than that is replaced the same way at the next
 *     blocking call, since HAProxy never moves a long-lived connection back
 *     to a replica that restarted.
 *   - Watches are not re-established: pdc_watch_next returns
 *     PDC_ERR_DISCONNECTED (lost) or PDC_DRAINING (replaced) once their
 *     connection is gone; watch again to go on.
 *
 * Threads: a pdc_conn is not thread-safe; use one connection per thread, or
 * guard it with your own lock.
 *
 * Lifetime: results own heap memory (waypoints, names); release them with the
 * matching pdc_*_free. A result struct may be reused after it was freed.
 */
#ifndef PATHD_CLIENT_H
#define PATHD_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* Port the daemon listens on unless configured otherwise. */
#define PDC_DEFAULT_SERVER "127.0.0.1:7420"
/* Largest incoming frame accepted, in bytes. A path chunk holds at most a
 * few hundred waypoints (~10 KiB), so 16 MiB only protects the client's
 * memory from a broken or hostile peer; larger frames are a protocol error. */
#define PDC_MAX_FRAME_BYTES (16u * 1024u * 1024u)
/* Most waypoints assembled for one path (24 bytes each, so 96 MiB): more than
 * any sane grid path, and a bound on what a misbehaving server can make us
 * allocate by streaming chunks forever. */
#define PDC_MAX_PATH_WAYPOINTS (4u * 1024u * 1024u)
/* Blocking calls: total attempts when the server answers OVERLOADED, and the
 * backoff between them in milliseconds (doubling from FIRST up to MAX, each
 * plus up to half of it at random). Five attempts wait at most
 * 1.5 x (20+40+80+160) ms, short enough to stay interactive. */
#define PDC_RETRY_ATTEMPTS 5
#define PDC_RETRY_BACKOFF_FIRST_MS 20
#define PDC_RETRY_BACKOFF_MAX_MS 1000
/* Replicas (see the top of this file): the pause between reconnect attempts
 * (doubling from FIRST up to MAX, half fixed and half random), and the age
 * at which a connection is replaced (0 = never). */
#define PDC_RECONNECT_BACKOFF_FIRST_MS 50
#define PDC_RECONNECT_BACKOFF_MAX_MS 2000
#define PDC_MAX_CONN_AGE_MS (10 * 60 * 1000)
/* Longest idempotency key, in bytes without the NUL (printable ASCII). */
#define PDC_IDEMPOTENCY_KEY_MAX 64
/* Largest grid side pdc_scene_grid accepts, in cells: the daemon's own limit
 * (PD_GRID_MAX_SIDE), so a grid is at most 16384 x 16384 bytes (256 MiB). */
#define PDC_MAX_GRID_SIDE 16384
/* pdc_scene_grid starts over when the scene changes between two bands; after
 * this many restarts it gives up, since a scene updated that often will not
 * hold still long enough to be read whole. */
#define PDC_SCENE_GRID_RESTARTS 3
/* Flow control: the in-flight cap assumed until GetLimits answers (the
 * server's default max_inflight_per_conn; kept when a server refuses
 * GetLimits), and the requests a connection queues beyond it. */
#define PDC_DEFAULT_INFLIGHT_CAP 64
#define PDC_DEFAULT_MAX_QUEUED 4096
/* Per-call timeout used when pdc_connect is given 0, in milliseconds. */
#define PDC_DEFAULT_TIMEOUT_MS 5000
/* Room for an error detail text (server Error.message or a client reason). */
#define PDC_MESSAGE_MAX 256

/* Wire statuses (pathd.v1.Status, same numbers and names) and client errors. */
typedef enum pdc_status {
    PDC_OK = 0,
    PDC_PARTIAL = 1,            /* goal substituted or path cut off by a budget */
    PDC_NO_PATH = 2,
    PDC_UNKNOWN_SCENE = 3,
    PDC_OUT_OF_BOUNDS = 4,
    PDC_START_BLOCKED = 5,
    PDC_GOAL_BLOCKED = 6,
    PDC_INVALID_ARGUMENT = 7,
    PDC_BUDGET_EXCEEDED = 8,
    PDC_DEADLINE_EXCEEDED = 9,
    PDC_CANCELLED = 10,
    PDC_OVERLOADED = 11,        /* retryable */
    PDC_MALFORMED = 12,
    PDC_FRAME_TOO_LARGE = 13,
    PDC_INTERNAL = 14,
    PDC_UNAUTHENTICATED = 16,   /* send pdc_auth first, or the token was wrong */
    PDC_PERMISSION_DENIED = 17, /* the token's role does not allow the request */
    PDC_SCENE_EXISTS = 30,      /* pdc_create_scene / pdc_create_instance: name taken */
    PDC_SCENE_IN_USE = 31,      /* pdc_drop_scene: portals name it (pass drop_portals) */
    PDC_LIMIT_EXCEEDED = 32,    /* a named cap (scenes, watches, a batch's size); the
                                   message names it */
    PDC_STALE_VERSION = 40,     /* retryable: the scene is older than min_version;
                                   pdc_stale_version() (and the result's version) say
                                   which version it is at */
    PDC_WATCH_OVERFLOW = 41,    /* a watch's last event: it fell behind and ended */
    PDC_DRAINING = 42,          /* retryable elsewhere: the replica is draining (see
                                   "Replicas" above) */
    PDC_UNAVAILABLE = 43,       /* retryable: the change log cannot be reached */

    PDC_ERR_DISCONNECTED = -1,  /* connection lost or never there; request unanswered */
    PDC_ERR_TIMEOUT = -2,       /* no answer within the timeout */
    PDC_ERR_PROTOCOL = -3,      /* the server sent something that breaks the protocol */
    PDC_ERR_NOMEM = -4,
    PDC_ERR_ARG = -5,           /* bad argument to a pdc_ function */
    PDC_ERR_CONNECT = -6,       /* (re)connecting failed */
    PDC_ERR_IDLE = -7,          /* pdc_recv_result: no request is in flight */
    PDC_ERR_QUEUE_FULL = -8,    /* flow control: max_queued requests already wait for
                                   the in-flight cap; nothing was sent or queued */
} pdc_status;

/* One past the largest wire status (18..29 and 33..39 are unused). */
#define PDC_WIRE_STATUS_COUNT 44

/* "OK", "NO_PATH", ... for wire statuses (the proto enum's names); for client
 * errors "DISCONNECTED", "TIMEOUT", "PROTOCOL_ERROR", ...; "UNKNOWN_STATUS"
 * otherwise. Never NULL. */
const char *pdc_status_name(int status);

/* A start or goal: a cell, or a point in world coordinates. */
typedef struct pdc_point {
    int is_world;               /* 0: cell x,y; 1: world wx,wy */
    int32_t x, y;
    double wx, wy;
} pdc_point;

typedef enum pdc_style {
    PDC_STYLE_CELLS = 0,        /* every cell of the path */
    PDC_STYLE_CORNERS = 1,      /* start, each direction change, goal */
    PDC_STYLE_SMOOTH = 2,       /* string-pulled: straight segments the unit can walk */
} pdc_style;

/* What the server does when the goal cannot be reached from the start. */
typedef enum pdc_goal_mode {
    PDC_GOAL_EXACT = 0,         /* answer NO_PATH */
    PDC_GOAL_NEAREST = 1,       /* go to the reachable cell nearest the goal (PARTIAL) */
    PDC_GOAL_LINE = 2,          /* first reachable cell on the line goal -> start (PARTIAL) */
} pdc_goal_mode;

/* A cell, for avoid lists, windows and cell updates (pdc_cell() below
 * builds a pdc_point instead). */
typedef struct pdc_xy {
    int32_t x, y;
} pdc_xy;

/* Most avoid cells one request may carry (the server's limit). */
#define PDC_MAX_AVOID 4096
/* FindPath.range and FindPath.goals: the server's limits. */
#define PDC_MAX_RANGE 128.0
#define PDC_MAX_GOALS 64

/* A path query. Zero-initialise, then set scene, start and goal: every other
 * field's zero means the server default (unit 1, 8-connected, no budget or
 * deadline, every cell, EXACT goal, no snapping, no times, no avoid cells,
 * no window). */
typedef struct pdc_path_req {
    const char *scene;
    pdc_point start, goal;      /* for unit_size > 1: the unit's top-left cell */
    uint32_t unit_size;         /* agent size in cells; 0 = 1 */
    int connectivity;           /* 0 (= 8), 4 or 8 */
    pdc_style style;
    uint64_t max_expansions;    /* 0 = server default */
    uint32_t deadline_ms;       /* 0 = none; counted from arrival at the server */
    pdc_goal_mode goal_mode;
    int snap;                   /* blocked start/goal: use the nearest open cell */
    int partial_on_cutoff;      /* budget/deadline: path to the best node so far */
    double speed;               /* world units per second; > 0 adds waypoint times */
    double start_time;          /* seconds at the first waypoint */
    const pdc_xy *avoid;        /* cells blocked for this request only; not copied,
                                   must stay valid during the call */
    size_t avoid_count;         /* <= PDC_MAX_AVOID */
    int has_window;             /* 1: the search stays inside window_min..window_max */
    pdc_xy window_min, window_max; /* inclusive cells, min <= max, non-negative */
    double range;               /* cells, 0..PDC_MAX_RANGE: end at the first cell within this
                                   Euclidean distance of the goal (0 = the goal itself) */
    int line_of_sight;          /* with range > 0: only cells that see the goal */
    const pdc_point *goals;     /* instead of goal: the nearest of these (by path cost);
                                   not copied, must stay valid during the call */
    size_t goal_count;          /* 0, or 1..PDC_MAX_GOALS; result.goal_index says which */
    int want_world;             /* 1: waypoints carry world coordinates (wx, wy) too */
    uint64_t min_version;       /* 0 = any; an older scene answers PDC_STALE_VERSION
                                   with the version it is at in scene_version */
    int avoid_reserved;         /* 1: around the scene's reservations at their times,
                                   reserving nothing (needs speed > 0; start_time is
                                   the game time in seconds; a wait is its cell twice) */
} pdc_path_req;

/* How long the server took over one answer (docs/PROTOCOL.md, "Timing"),
 * in microseconds. server_us runs from when the server read the request's
 * last byte to when it handed the answer to the socket (the write itself,
 * and the network, are not in it; the round trip a client measures is
 * always longer); search_us is the part spent in the search proper (0 when
 * nothing was searched: a Ping, a refusal...). server_us - search_us is
 * the request's wait in the server's queues. Both are 0 from a server that
 * does not send them. */
typedef struct pdc_timing {
    uint64_t server_us;
    uint64_t search_us;
} pdc_timing;

typedef struct pdc_waypoint {
    int32_t x, y;               /* cell (a unit's top-left cell) */
    double wx, wy;              /* world coordinates of the cell centre; 0 unless the
                                   request had want_world (the wire carries them only then;
                                   SceneInfo's origin and cell size give them too) */
    double t;                   /* arrival time in seconds; 0 unless the request had speed > 0 */
} pdc_waypoint;

typedef struct pdc_path_result {
    uint64_t id;                /* request id this answers */
    int status;                 /* same value the call returned */
    pdc_waypoint *waypoints;    /* count entries, heap; NULL when count == 0 */
    size_t count;
    double cost;
    uint64_t expansions;
    uint64_t search_micros;
    uint64_t scene_version;
    int has_start_used;         /* 1: the start was snapped to start_used */
    pdc_xy start_used;
    int has_goal_used;          /* 1: the path ends at goal_used, not at the goal */
    pdc_xy goal_used;
    int cutoff;                 /* PDC_BUDGET_EXCEEDED / PDC_DEADLINE_EXCEEDED behind a
                                   cut-off PARTIAL; PDC_OK otherwise */
    uint32_t goal_index;        /* with goals: the index of the goal reached */
    pdc_timing timing;          /* the answer's server-side times (0 in a batch item:
                                   the batch is timed whole, pdc_last_timing) */
    char message[PDC_MESSAGE_MAX]; /* error detail, "" if none */
} pdc_path_result;

void pdc_path_result_free(pdc_path_result *r);

/* Most legs one route may have: an optimal route passes each portal at most
 * once and the daemon allows 4096 portals, so more legs than this can only
 * come from a broken peer. */
#define PDC_MAX_ROUTE_LEGS 4097

/* A cross-scene route query (FindRoute). Zero-initialise, then set the
 * scenes and points; zero elsewhere means the server default (unit 1, every
 * cell, EXACT goal, no times, no budget or deadline). Searches are
 * 8-connected. */
typedef struct pdc_route_req {
    const char *from_scene;
    pdc_point start;            /* in from_scene (a unit's top-left cell) */
    const char *to_scene;
    pdc_point goal;             /* in to_scene */
    uint32_t unit_size;         /* 0 = 1; every scene on the way must serve it */
    pdc_style style;            /* per leg */
    pdc_goal_mode goal_mode;    /* fallbacks in to_scene (PARTIAL, goal_used) */
    double speed;               /* world units per second; > 0 adds times across legs */
    double start_time;          /* seconds at the first waypoint */
    uint64_t max_expansions;    /* per leg search; 0 = server default */
    uint32_t deadline_ms;       /* 0 = none */
    int want_world;             /* 1: waypoints carry world coordinates (wx, wy) too */
} pdc_route_req;

/* One leg: a walk in one scene, then (except on the last leg) a portal. */
typedef struct pdc_route_leg {
    char *scene;
    pdc_waypoint *waypoints;    /* count entries, heap */
    size_t count;
    double cost;                /* in-scene path cost of the leg */
    uint64_t scene_version;
    int has_portal;             /* 0 on the last leg */
    char *portal;               /* portal name; NULL when has_portal == 0 */
    pdc_xy portal_exit;         /* the leg's last cell */
    char *portal_to_scene;      /* the next leg's scene */
    pdc_xy portal_entry;        /* the next leg's first cell */
    double portal_cost;
} pdc_route_leg;

typedef struct pdc_route_result {
    uint64_t id;
    int status;                 /* same value the call returned */
    pdc_route_leg *legs;        /* leg_count entries, heap; NULL when there is no route */
    size_t leg_count;
    double total_cost;          /* leg costs + portal costs */
    uint64_t expansions;        /* planning and leg searches */
    uint64_t micros;            /* server time for the whole route */
    int pinned;                 /* 1: a route pinned in the server's config was followed */
    int has_goal_used;          /* 1: the route ends at goal_used (NEAREST/LINE), PARTIAL */
    pdc_xy goal_used;
    pdc_timing timing;          /* the answer's server-side times */
    char message[PDC_MESSAGE_MAX];
} pdc_route_result;

void pdc_route_result_free(pdc_route_result *r);

typedef struct pdc_scene_summary {
    char *name;
    int32_t width, height;
    uint64_t version;
} pdc_scene_summary;

typedef struct pdc_scene_list {
    pdc_scene_summary *scenes;
    size_t count;
} pdc_scene_list;

void pdc_scene_list_free(pdc_scene_list *l);

typedef struct pdc_scene_details {
    char *name;
    int32_t width, height;
    double origin_x, origin_y;  /* world coordinates of cell (0,0)'s corner */
    double cell_size;
    uint32_t *unit_sizes;
    size_t unit_size_count;
    uint64_t version;
    uint64_t passable_cells;
} pdc_scene_details;

void pdc_scene_details_free(pdc_scene_details *i);

/* A scene's grid (or one of its unit grids) as one snapshot: width * height
 * cell bytes, row-major (cells[y * width + x]); 0 = blocked, 1..255 =
 * passable with that cost. For a unit size K > 1 a cell is passable when a
 * K x K unit may have its top-left corner there, and costs the dearest cell
 * under that footprint. cells is heap memory owned by the struct. */
typedef struct pdc_grid {
    int32_t width, height;
    uint64_t version;           /* the scene version every row was read from */
    uint8_t *cells;
} pdc_grid;

void pdc_grid_free(pdc_grid *g);

typedef enum pdc_update_op {
    PDC_UPDATE_BLOCK = 0,       /* cells become blocked */
    PDC_UPDATE_PASS = 1,        /* cells become passable, cost 1 */
    PDC_UPDATE_COST = 2,        /* cells become passable with `cost` */
    PDC_UPDATE_RESTORE = 3,     /* cells return to the scene's authored state, cost included */
} pdc_update_op;

/* A live obstacle change: a rectangle (is_rect = 1) or a list of cells,
 * applied atomically as a new scene version. */
typedef struct pdc_update_req {
    const char *scene;
    int is_rect;
    pdc_xy rect_min, rect_max;    /* inclusive */
    const pdc_xy *cells;          /* is_rect = 0; not copied */
    size_t cell_count;
    pdc_update_op op;
    uint32_t cost;                /* PDC_UPDATE_COST: 1..255; otherwise 0 */
} pdc_update_req;

typedef struct pdc_update_result {
    uint64_t version;             /* the scene version the update produced */
    uint64_t cells_changed;       /* cells whose value actually changed */
    uint64_t micros;              /* server time to copy, apply and repair */
    /* The agents whose reservations the update cut (UpdateResult.agents_cut,
     * ascending): they must reserve again. Owned by the connection, valid
     * until its next update call or pdc_close; NULL when none. */
    const uint64_t *agents_cut;
    size_t n_agents_cut;
} pdc_update_result;

typedef struct pdc_server_stats {
    uint64_t uptime_ms;
    uint64_t connections;
    uint64_t requests_total;
    uint64_t paths_found;
    uint64_t expansions_total;
    uint64_t queue_depth;
    uint64_t in_flight;
    uint32_t threads;
    uint32_t scenes;
    uint64_t overloaded_total;
    uint64_t malformed_total;
} pdc_server_stats;

/* The limits the server enforces (GetLimits; docs/PROTOCOL.md, "Limits"). */
typedef struct pdc_limits {
    uint32_t max_frame_bytes;          /* largest request payload */
    uint32_t max_inflight_per_conn;    /* a Batch holds one per item */
    uint32_t max_waypoints_per_chunk;
    uint32_t max_connections;
    uint32_t job_queue_capacity;
    uint32_t idle_timeout_ms;          /* 0 = never */
    uint32_t frame_timeout_ms;         /* 0 = none */
    uint64_t default_max_expansions;   /* 0 = unlimited */
    uint32_t max_batch_items;
    uint32_t max_move_points;          /* ValidateMove points */
    uint32_t max_radius_cells;         /* NearestWalkable radius, DistanceToWall max_distance */
    double max_walk_radius;            /* RandomPoint radius */
    double max_tolerance;              /* ValidateMove tolerance */
    uint32_t max_avoid_cells;
    uint32_t max_deadline_ms;
    uint32_t max_unit_size;
    uint32_t scene_grid_band_bytes;
    uint32_t max_message_bytes;
    uint32_t watch_buffer_bytes;       /* a watcher's unread answers before WATCH_OVERFLOW */
    uint32_t max_watch_scenes;         /* scenes one pdc_watch may name */
    uint32_t max_watchers;             /* watches open on the server */
    uint32_t max_watches_per_conn;     /* watches open on one connection */
    uint32_t reservation_ttl_ms;       /* game ms an unrenewed agent keeps its reservations */
    uint32_t max_agents_per_scene;     /* the reservation limits (0 = none) */
    uint32_t max_reservation_entries;
    uint32_t max_reservation_window_ms;
    uint32_t max_agent_bytes;
    uint32_t max_clock_step_ms;        /* game ms a ReservePath's t0_ms may lead the scene's clock */
} pdc_limits;

typedef struct pdc_conn pdc_conn;

/* Connects to "host:port", "[v6addr]:port" (host may be a name; resolved with
 * getaddrinfo, every address tried in turn). timeout_ms bounds the connect and
 * becomes the connection's per-call timeout (0 = PDC_DEFAULT_TIMEOUT_MS).
 * Returns NULL on failure with the reason in err (may be NULL). */
pdc_conn *pdc_connect(const char *host_port, int timeout_ms, char *err, size_t errlen);

/* pdc_connect with flags: PDC_CONNECT_NO_FLOW_CONTROL connects without
 * reading GetLimits and with flow control off (pdc_set_flow_control), for a
 * program that makes one call at a time and wants no extra round trip (as
 * pathctl does). */
#define PDC_CONNECT_NO_FLOW_CONTROL 1u
pdc_conn *pdc_connect_flags(const char *host_port, int timeout_ms, unsigned flags, char *err, size_t errlen);

/* Closes the socket and frees everything, including unfetched results. */
void pdc_close(pdc_conn *c);

/* Drops the current socket (unanswered requests fail with
 * PDC_ERR_DISCONNECTED) and connects again to the same address. Ids keep
 * increasing, so a late answer to an old request can never be mistaken for a
 * new one. With a token from pdc_auth, authenticates again. Returns PDC_OK,
 * PDC_ERR_CONNECT, or the status of that Auth; PDC_DRAINING (Auth or
 * GetLimits answered so: a draining replica) with the connection closed. */
int pdc_reconnect(pdc_conn *c);

/* 1 while the socket is open. */
int pdc_is_connected(const pdc_conn *c);

/* Longest token pdc_auth takes, in bytes with the NUL (the server's cap). */
#define PDC_TOKEN_MAX 128

/* Authenticates with a token from the server's auth.tokens and keeps it, so
 * pdc_reconnect (and the reconnect inside every blocking call) sends it
 * again first. On PDC_OK the role granted ("query", "write" or "admin") is
 * copied into role (may be NULL). A wrong token answers
 * PDC_UNAUTHENTICATED after about a second and the server closes the
 * connection. A server without tokens grants "admin" to everyone. */
int pdc_auth(pdc_conn *c, const char *token, char *role, size_t role_len);

/* Admin: asks the server to reread its config and maps, as SIGHUP does.
 * PDC_OK once the reload has started (its outcome is in the server's log). */
int pdc_reload(pdc_conn *c);

/* Per-call timeout for blocking calls and sends, in milliseconds (> 0). A
 * blocking call's wait in the flow-control queue counts in it. */
void pdc_set_timeout(pdc_conn *c, int timeout_ms);

/* Flow control (see the top of this file). on = 0: every request is sent
 * at once and the server answers the excess OVERLOADED; on = 1 (the
 * default) keeps at most pdc_inflight_cap slots outstanding. */
void pdc_set_flow_control(pdc_conn *c, int on);
/* Most requests queued beyond the cap (PDC_DEFAULT_MAX_QUEUED). */
void pdc_set_max_queued(pdc_conn *c, size_t max_queued);
/* OVERLOADED retries of blocking calls: attempts in all (>= 1; default
 * PDC_RETRY_ATTEMPTS) and the time from the first send after which no pause
 * starts (ms; 0 = the timeout). A value out of range keeps the current one. */
void pdc_set_retry(pdc_conn *c, int attempts, int deadline_ms);
/* Replicas (see the top of this file). Reconnecting and resending within a
 * blocking call: on (default) or off (0: a lost connection fails the call,
 * and the next call connects once). */
void pdc_set_reconnect(pdc_conn *c, int on);
/* A connection older than max_age_ms is replaced at the next blocking call
 * (0 = never; default PDC_MAX_CONN_AGE_MS). */
void pdc_set_max_conn_age(pdc_conn *c, int max_age_ms);
/* A fresh idempotency key on every update: on (default) or off (0: updates
 * carry no key unless given one, and are never sent twice). */
void pdc_set_idempotency_keys(pdc_conn *c, int on);
/* The key the next update call (pdc_update_cells*, pdc_create_scene,
 * pdc_create_instance, pdc_drop_scene) sends, instead of a fresh one:
 * 1..PDC_IDEMPOTENCY_KEY_MAX printable ASCII characters. PDC_ERR_ARG
 * otherwise. */
int pdc_set_next_idempotency_key(pdc_conn *c, const char *key);
/* Connections opened after the first; requests sent again after a lost
 * connection; STALE_VERSION, UNAVAILABLE and DRAINING answers retried. */
uint64_t pdc_reconnects(const pdc_conn *c);
uint64_t pdc_resent(const pdc_conn *c);
uint64_t pdc_replica_retries(const pdc_conn *c);
/* The in-flight cap in use (the server's max_inflight_per_conn once
 * GetLimits answered); 0 with flow control off. */
uint32_t pdc_inflight_cap(const pdc_conn *c);
/* Slots taken now by requests sent and not yet answered (a Batch: its items). */
uint32_t pdc_slots_in_flight(const pdc_conn *c);
/* Requests waiting in the queue, not sent yet. */
size_t pdc_queued(const pdc_conn *c);
/* OVERLOADED answers blocking calls on c have retried so far. */
uint64_t pdc_overloaded_retries(const pdc_conn *c);
/* The limits read on connect (or after pdc_auth): 1 with *out filled, 0
 * when the server did not answer GetLimits. */
int pdc_conn_limits(const pdc_conn *c, pdc_limits *out);

/* Detail of the last failure or non-OK answer on this connection (server
 * message or client reason); "" if none. Valid until the next call. */
const char *pdc_last_error(const pdc_conn *c);

/* The server-side times of the answer the last blocking call on c received
 * (any kind: pdc_ping, pdc_batch, pdc_stats...; pdc_scene_grid: its last
 * band); zeros when that call got no answer. Pipelined paths carry theirs
 * in pdc_path_result.timing. */
pdc_timing pdc_last_timing(const pdc_conn *c);

/* Blocking calls. Each returns the answer's status or a PDC_ERR_*. The output
 * is filled when the status is PDC_OK (find_path: also PDC_PARTIAL, and the
 * metrics of any answered status); free it with the matching _free even on
 * failure (it is then empty). */
int pdc_find_path(pdc_conn *c, const pdc_path_req *req, pdc_path_result *out);
/* A cross-scene route: legs are filled on PDC_OK and PDC_PARTIAL; the
 * metrics also on NO_PATH and other answered statuses. UNKNOWN_SCENE,
 * OUT_OF_BOUNDS, INVALID_ARGUMENT come with a message. */
int pdc_find_route(pdc_conn *c, const pdc_route_req *req, pdc_route_result *out);
/* Applies an UpdateCells request; out (needs no _free) is filled on PDC_OK.
 * A path search sent before this call returned may still run on the old
 * version. */
/* ---- reservations (docs/PROTOCOL.md, "Reservations") ------------------ */

typedef struct pdc_reserve_req {
    const char *scene;
    uint64_t agent;               /* 1 or more */
    uint32_t unit_size;           /* 0 means 1 */
    pdc_xy start, goal;           /* cells */
    int64_t t0_ms;                /* the game's time now */
    double speed;                 /* cells per second */
    int has_window;               /* 0: the server's default (8000 ms) */
    int64_t window_ms;            /* with has_window: 0 = all the way */
    int vanish;                   /* 1: AT_GOAL_VANISH, else PARK */
    /* Moving standing agents aside (issue 34's deadlocks): once this agent
     * has stood on its start this long (game ms), agents holding in its way
     * that stood less long may be re-planned off it; their new plans come
     * back in pdc_reserve_result.displaced and the game must apply them.
     * 0: never. */
    int64_t yield_after_ms;
} pdc_reserve_req;

typedef struct pdc_timed_waypoint {
    int32_t x, y;
    int64_t t_arrive_ms;
    int64_t t_leave_ms;           /* -1: held until reserved again or released */
} pdc_timed_waypoint;

/* An agent a ReservePath moved out of the way: its plan from t0_ms on is
 * replaced by waypoints (the first is where it stood at t0_ms). */
typedef struct pdc_displaced_plan {
    uint64_t agent;
    int64_t t0_ms;
    int64_t reserved_until_ms;    /* -1: no end */
    pdc_timed_waypoint *waypoints; /* malloc'd with the result */
    size_t count;
} pdc_displaced_plan;

typedef struct pdc_reserve_result {
    uint64_t agent;
    pdc_timed_waypoint *waypoints; /* malloc'd: pdc_reserve_result_free */
    size_t count;
    int64_t reserved_until_ms;    /* -1: no end */
    double cost;
    uint64_t expansions, search_micros, scene_version;
    int has_blocking_agent;       /* START_BLOCKED by another agent */
    uint64_t blocking_agent;
    int was_cut;
    pdc_displaced_plan *displaced; /* malloc'd: agents moved aside (yield_after_ms),
                                      in the order they were moved; the game must
                                      apply each plan */
    size_t n_displaced;
} pdc_reserve_result;

/* ReservePath (write role). Returns the status: PDC_OK or PDC_PARTIAL with
 * the plan; START_BLOCKED and NO_PATH fill *out too (no waypoints;
 * blocking_agent says who holds the start); anything else leaves it empty.
 * pdc_last_error says why when not OK. */
int pdc_reserve_path(pdc_conn *c, const pdc_reserve_req *req, pdc_reserve_result *out);
void pdc_reserve_result_free(pdc_reserve_result *r);

/* ReleaseAgent (write role): *released is 1 when the agent had reservations. */
int pdc_release_agent(pdc_conn *c, const char *scene, uint64_t agent, int *released);
/* ReleaseAgent with all (write role): every agent of the scene, and its game
 * clock forgotten (a game whose clock starts over); *released: how many. */
int pdc_release_all(pdc_conn *c, const char *scene, uint64_t *released);

typedef struct pdc_reservation {
    uint64_t agent;
    int32_t x, y, width, height;
    int64_t t0_ms, t1_ms;         /* t1_ms -1: no end */
} pdc_reservation;

typedef struct pdc_reservation_list {
    pdc_reservation *entries;     /* malloc'd: pdc_reservation_list_free */
    size_t count;
    uint64_t matching;
    uint32_t agents;
    uint64_t table_entries, table_bytes;
} pdc_reservation_list;

/* GetReservations: the entries holding any cell of rect (has_rect; else the
 * whole scene) at some time of [from_ms, to_ms) (to_ms 0: no end), at most
 * max_entries (0: the server's cap). */
int pdc_reservations(pdc_conn *c, const char *scene, int has_rect, pdc_xy rect_min, pdc_xy rect_max,
                     int64_t from_ms, int64_t to_ms, uint32_t max_entries, pdc_reservation_list *out);
void pdc_reservation_list_free(pdc_reservation_list *l);

int pdc_update_cells(pdc_conn *c, const pdc_update_req *req, pdc_update_result *out);
/* Several operations on ops[0].scene (every op's scene is ignored but the
 * first's) applied in order as ONE new version; 1..64 of them. */
int pdc_update_cells_many(pdc_conn *c, const pdc_update_req *ops, size_t n_ops, pdc_update_result *out);

/* A scene made at run time (needs role write). Either map/map_len (a map
 * file's bytes in `format`: "ascii", "movingai", "tiled" or "ldtk") or
 * cells with width and height (row-major bytes, 0 blocked, 1..255 cost). */
typedef struct pdc_create_scene_req {
    const char *name;
    const char *format;           /* with map */
    const void *map;
    size_t map_len;
    int32_t width, height;        /* with cells */
    const uint8_t *cells;
    double origin_x, origin_y;
    double cell_size;             /* 0 means 1 */
    const uint32_t *unit_sizes;   /* NULL / 0 means {1} */
    size_t unit_size_count;
} pdc_create_scene_req;

typedef struct pdc_scene_change {
    uint64_t version;             /* the new scene's (1), or the dropped scene's */
    uint64_t own_bytes;           /* what the new scene holds on its own */
    uint64_t scene_bytes;         /* all scenes of the server together, after it */
} pdc_scene_change;

int pdc_create_scene(pdc_conn *c, const pdc_create_scene_req *req, pdc_scene_change *out);
/* A scene that shares `template_scene`'s memory until it is updated. */
int pdc_create_instance(pdc_conn *c, const char *name, const char *template_scene,
                        pdc_scene_change *out);
/* Refused (PDC_SCENE_IN_USE) while portals name the scene, unless
 * drop_portals, which drops them too. */
int pdc_drop_scene(pdc_conn *c, const char *name, int drop_portals, pdc_scene_change *out);
int pdc_list_scenes(pdc_conn *c, pdc_scene_list *out);
int pdc_scene_info(pdc_conn *c, const char *scene, pdc_scene_details *out);
/* The same, refused with PDC_STALE_VERSION (out->version: the version now)
 * while the scene is older than min_version. */
int pdc_scene_info_at(pdc_conn *c, const char *scene, uint64_t min_version, pdc_scene_details *out);
/* After a call answered PDC_STALE_VERSION: the scene's version then. */
uint64_t pdc_stale_version(const pdc_conn *c);
/* Fetches the grid of `scene` for unit_size (0 or 1: the scene grid itself;
 * K: the unit-K grid, which the scene must serve) with GetSceneGrid requests,
 * one per band of rows, and checks that all bands come from one version: if
 * the scene changes between bands it starts over, at most
 * PDC_SCENE_GRID_RESTARTS times. Returns PDC_OK with *out filled, the
 * server's status (UNKNOWN_SCENE, INVALID_ARGUMENT for a unit size the scene
 * does not serve...), PDC_ERR_PROTOCOL when a band does not fit the others
 * (wrong rows, size or byte count, a side above PDC_MAX_GRID_SIDE) or the
 * scene kept changing, or another PDC_ERR_*. The per-call timeout applies to
 * each band. */
int pdc_scene_grid(pdc_conn *c, const char *scene, uint32_t unit_size, pdc_grid *out);
int pdc_stats(pdc_conn *c, pdc_server_stats *out);
/* The server's limits; *out is filled on PDC_OK. */
int pdc_get_limits(pdc_conn *c, pdc_limits *out);
/* Round trip; rtt_micros (may be NULL) gets the measured time. */
int pdc_ping(pdc_conn *c, uint64_t *rtt_micros);

/* Pipelined calls. pdc_send_find_path writes the request (or queues it, when
 * the in-flight cap is reached) and returns at once with its id in *id (ids
 * are assigned here, increasing from 1). It returns PDC_OK,
 * PDC_ERR_ARG, PDC_ERR_DISCONNECTED (never reconnects), PDC_ERR_QUEUE_FULL,
 * or PDC_ERR_TIMEOUT (the socket would not take the bytes; the connection is
 * closed because a half-written frame cannot be taken back). A cancel
 * (pdc_send_cancel) of a request still queued takes it out: it is never
 * sent and pdc_recv_result hands it back CANCELLED. */
int pdc_send_find_path(pdc_conn *c, const pdc_path_req *req, uint64_t *id);

/* Sends n FindPath requests in one write, as redis-benchmark -P does with
 * its pipeline (the server then reads them together), and gives their ids
 * in ids[0..n), increasing; those past the in-flight cap are queued. All or
 * nothing: on any error (the statuses of pdc_send_find_path, PDC_ERR_NOMEM)
 * none of them is in flight or queued. */
int pdc_send_find_paths(pdc_conn *c, const pdc_path_req *reqs, size_t n, uint64_t *ids);

/* Asks the server to stop working on target_id. The target's answer still
 * arrives through pdc_recv_result (CANCELLED, or its normal result if it
 * finished first); any reply to the cancel request itself is discarded. */
int pdc_send_cancel(pdc_conn *c, uint64_t target_id);

/* Hands back the next completed path (any id, in completion order), waiting
 * up to timeout_ms (0: do not wait; < 0: no limit). Returns out->status: a
 * wire status, or a negative PDC_ERR_* for the request out->id (e.g.
 * DISCONNECTED for each request lost with the connection). With out->id == 0
 * it means nothing was completed: PDC_ERR_TIMEOUT, PDC_ERR_IDLE (nothing in
 * flight) or PDC_ERR_DISCONNECTED (nothing in flight, socket closed). */
int pdc_recv_result(pdc_conn *c, int timeout_ms, pdc_path_result *out);

/* Path requests sent (or queued) but not yet handed back by pdc_recv_result. */
size_t pdc_in_flight(const pdc_conn *c);

/* ---- authoritative movement ---------------------------------------------
 * Seven questions a game server asks about what its players claim, answered
 * on one scene snapshot (the answer's version). Points are cells (standing
 * for the cell's centre) or world points (kept to 1/65536 of a cell); for a
 * unit of size K a point is the unit's top-left cell. See docs/PROTOCOL.md. */

typedef enum pdc_query_kind {
    PDC_Q_RAYCAST = 1,          /* a -> b walkable? */
    PDC_Q_VALIDATE_MOVE,        /* moves[] with times, max_speed, tolerance */
    PDC_Q_MOVE_ALONG,           /* from a by (dx, dy), sliding along walls */
    PDC_Q_NEAREST,              /* nearest open cell to a within radius [in b's component] */
    PDC_Q_REACHABLE,            /* a and b connected? */
    PDC_Q_RANDOM_POINT,         /* a cell within walking distance radius of a */
    PDC_Q_DISTANCE_TO_WALL,     /* distance from a to the nearest wall, up to radius */
    PDC_Q_FIND_PATH,            /* batch only: path; answer in result.path */
} pdc_query_kind;

/* Most items in one batch, points in one ValidateMove (the server's limits);
 * at most PDC_MAX_BATCH_PATHS FindPath items per batch, each answered with
 * at most PDC_MAX_BATCH_PATH_WAYPOINTS waypoints (else FRAME_TOO_LARGE). */
#define PDC_MAX_BATCH 256
#define PDC_MAX_BATCH_PATHS 32
#define PDC_MAX_BATCH_PATH_WAYPOINTS 512
#define PDC_MAX_MOVES 256

typedef struct pdc_timed_point {
    pdc_point point;
    double t;                   /* seconds */
} pdc_timed_point;

/* One query. Zero-initialise, then set kind, scene and the fields the kind
 * uses (see pdc_query_kind). */
typedef struct pdc_query {
    pdc_query_kind kind;
    const char *scene;
    uint32_t unit_size;         /* 0 = 1 */
    pdc_point a;                /* from / at / around */
    pdc_point b;                /* to / reachable_from */
    int has_b;                  /* NEAREST: 1 when b (reachable_from) is set */
    double dx, dy;              /* MOVE_ALONG: cells for a cell a, world units for a world a */
    double radius;              /* NEAREST (cells), RANDOM_POINT (walking cost in cells),
                                   DISTANCE_TO_WALL (max distance; 0 = 64) */
    uint64_t seed;              /* RANDOM_POINT: 0 = the server picks (reported back) */
    const pdc_timed_point *moves; /* VALIDATE_MOVE: not copied */
    size_t move_count;          /* 1..PDC_MAX_MOVES */
    double max_speed;           /* VALIDATE_MOVE: world units per second, > 0 */
    double tolerance;           /* VALIDATE_MOVE: allowed excess as a fraction, 0..10 */
    const pdc_path_req *path;   /* FIND_PATH: the request (its scene is used; not copied) */
    uint64_t min_version;       /* 0 = any; an older scene answers PDC_STALE_VERSION with
                                   the version it is at in result.version (FIND_PATH: the
                                   path request's own min_version counts) */
} pdc_query;

/* Why ValidateMove refused a point (proto MoveReason). */
enum {
    PDC_MOVE_VALID = 0,
    PDC_MOVE_OUT_OF_BOUNDS = 1,
    PDC_MOVE_BLOCKED_POINT = 2,
    PDC_MOVE_BLOCKED_SEGMENT = 3,
    PDC_MOVE_TOO_FAST = 4,
    PDC_MOVE_TIME_NOT_INCREASING = 5,
};

/* "valid", "out_of_bounds", ...; "unknown" otherwise. */
const char *pdc_move_reason_name(int reason);

typedef struct pdc_query_result {
    int status;                 /* wire status of this answer (or item) */
    char message[PDC_MESSAGE_MAX]; /* why, when status is not OK */
    uint64_t version;           /* scene version the answer was computed on */
    int yes;                    /* RAYCAST clear, VALIDATE valid, MOVE_ALONG slid,
                                   REACHABLE reachable */
    int has_hit;                /* RAYCAST: the first blocked cell; DISTANCE_TO_WALL: the wall */
    pdc_xy hit;
    int has_cell;               /* RAYCAST last_free, VALIDATE last_valid, MOVE_ALONG end,
                                   NEAREST / RANDOM_POINT cell */
    pdc_xy cell;
    double wx, wy;              /* the world point that goes with cell */
    int32_t first_invalid;      /* VALIDATE: index of the first illegal point, -1 if valid */
    int reason;                 /* VALIDATE: PDC_MOVE_* */
    double distance;            /* NEAREST, DISTANCE_TO_WALL (cells) */
    uint64_t seed;              /* RANDOM_POINT: the seed used */
    uint64_t candidates;        /* RANDOM_POINT: cells within the walking distance */
    pdc_path_result path;       /* FIND_PATH: the path (OK or PARTIAL), owned: free with
                                   pdc_query_result_free */
} pdc_query_result;

/* Frees a FIND_PATH item's waypoints; safe on any result, and twice. */
void pdc_query_result_free(pdc_query_result *r);

/* One query, one round trip. Returns the answer's status (also in
 * out->status) or a PDC_ERR_*. */
int pdc_query_run(pdc_conn *c, const pdc_query *q, pdc_query_result *out);

/* n queries (1..PDC_MAX_BATCH) in one Batch frame; out[i] answers q[i]
 * with its own status. Returns PDC_OK when the batch was answered (look at
 * each out[i].status), the server's status when it refused the whole batch
 * (OVERLOADED when the items exceed the in-flight limit...), or PDC_ERR_*. */
int pdc_batch(pdc_conn *c, const pdc_query *q, size_t n, pdc_query_result *out);

/* ---- watching scenes (docs/PROTOCOL.md, "Watching scenes") ----------- */

/* Scenes one pdc_watch may name (the server may allow fewer:
 * limits.max_watch_scenes, answered PDC_LIMIT_EXCEEDED). */
#define PDC_MAX_WATCH_SCENES 1024

typedef enum pdc_watch_kind {
    PDC_WATCH_STARTED = 0,      /* first event per scene: its version when the watch began */
    PDC_WATCH_UPDATED = 1,      /* an update made `version` (changed rectangle, ops) */
    PDC_WATCH_REPLACED = 2,     /* a reload redefined the scene: `version`, whole grid */
    PDC_WATCH_INSTANCED = 3,    /* `instance` was made from the scene at `version` */
    PDC_WATCH_DROPPED = 4,      /* the scene is gone: its last event */
    PDC_WATCH_ENDED = 5,        /* pdc_unwatch: the watch's last event */
    PDC_WATCH_AGENTS_CUT = 6,   /* the update that made `version` blocked cells these
                                   `agents` had reserved: they lost their reservations
                                   from cut_at_ms on and must reserve again; follows
                                   that update's UPDATED (a long list: several events) */
    PDC_WATCH_AGENTS_DISPLACED = 7, /* a ReservePath (at `version`) moved these `agents`
                                   aside: its answer's displaced plans replace theirs */
    PDC_WATCH_AGENTS_EXPIRED = 8, /* reservation_ttl_ms released these `agents` (not
                                   renewed within it; the scene at `version`): they
                                   hold nothing now (a long list: several events) */
    PDC_WATCH_AGENTS_RELEASED = 9, /* ReleaseAgent all released these `agents` (every
                                   agent of the scene; its game clock starts over) */
} pdc_watch_kind;

/* "started", "updated", "replaced", "instanced", "dropped", "ended",
 * "agents_cut", "agents_displaced", "agents_expired", "agents_released";
 * "unknown" otherwise. */
const char *pdc_watch_kind_name(int kind);

/* One operation of an update, as a watcher hears it. */
typedef struct pdc_watch_op {
    pdc_update_op op;
    uint32_t cost;
    pdc_xy min, max;            /* bounding rectangle of the cells it named */
    uint64_t cells;             /* how many it named */
} pdc_watch_op;

typedef struct pdc_watch_event {
    uint64_t watch_id;          /* pdc_watch's id */
    int status;                 /* PDC_OK; PDC_WATCH_OVERFLOW ends the watch (final) */
    int final;                  /* the watch's last event */
    int kind;                   /* pdc_watch_kind (PDC_OK events only) */
    char scene[64];
    char instance[64];          /* INSTANCED */
    uint64_t version;
    uint64_t incarnation;       /* which scene of this name the event is about: a
                                   name dropped and created again gets a new one */
    int has_changed;            /* UPDATED, REPLACED: changed_min/max are set */
    pdc_xy changed_min, changed_max;
    uint64_t cells_changed;     /* UPDATED */
    pdc_watch_op *ops;          /* UPDATED: op_count entries, heap */
    size_t op_count;
    uint64_t *agents;           /* AGENTS_CUT, _DISPLACED, _EXPIRED: agent_count ids,
                                   ascending, heap */
    size_t agent_count;
    int64_t cut_at_ms;          /* AGENTS_CUT: the game time the cut took effect */
    char message[PDC_MESSAGE_MAX]; /* why, with WATCH_OVERFLOW */
} pdc_watch_event;

void pdc_watch_event_free(pdc_watch_event *e);

/* Subscribes this connection to the scenes' changes. Returns PDC_OK with the
 * watch's id once the server accepted it (its STARTED events wait for
 * pdc_watch_next), or the server's refusal (UNKNOWN_SCENE, LIMIT_EXCEEDED,
 * INVALID_ARGUMENT) or a PDC_ERR_*. Events arriving during other blocking
 * calls are kept, in order, for pdc_watch_next; read them promptly, since
 * the server ends a watch whose events are not read (PDC_WATCH_OVERFLOW). */
int pdc_watch(pdc_conn *c, const char *const *scenes, size_t n, uint64_t *watch_id);

/* The next event of any watch on c, waiting up to timeout_ms (-1: no limit).
 * PDC_OK with *out filled (free with pdc_watch_event_free), PDC_ERR_TIMEOUT,
 * PDC_ERR_IDLE when no watch is open and none is queued, or PDC_ERR_*. */
int pdc_watch_next(pdc_conn *c, int timeout_ms, pdc_watch_event *out);

/* Ends a watch: its ENDED event is queued for pdc_watch_next. */
int pdc_unwatch(pdc_conn *c, uint64_t watch_id);

/* ---- a pool of connections (pathd_pool.c) --------------------------------
 * n connections to one server for a threaded program: a thread borrows one
 * (pdc_pool_acquire: the free one with the least outstanding work, waiting
 * while all are taken), makes any calls on it, blocking or pipelined, and
 * gives it back (pdc_pool_release) with nothing pipelined left to collect.
 * Each connection has its own flow control, so the pool keeps at most
 * n x max_inflight_per_conn requests in flight. */
typedef struct pdc_pool pdc_pool;

/* Opens n connections (as pdc_connect; each reads GetLimits). NULL on
 * failure, with the reason in err. Authenticate each with pdc_auth after
 * acquiring it when the server has tokens (pdc_auth keeps the token for
 * reconnects). */
pdc_pool *pdc_pool_connect(const char *host_port, size_t n, int timeout_ms, char *err, size_t errlen);
pdc_conn *pdc_pool_acquire(pdc_pool *p);
void pdc_pool_release(pdc_pool *p, pdc_conn *c);
size_t pdc_pool_size(const pdc_pool *p);
/* Closes every connection; none may be borrowed. */
void pdc_pool_close(pdc_pool *p);

/* Convenience constructors for pdc_path_req points. */
static inline pdc_point pdc_cell(int32_t x, int32_t y)
{
    pdc_point p = {0, x, y, 0.0, 0.0};
    return p;
}

static inline pdc_point pdc_world(double wx, double wy)
{
    pdc_point p = {1, 0, 0, wx, wy};
    return p;
}

#endif
