/*
 * harness.h - end-to-end test harness: runs the real pathd binary on an
 * ephemeral loopback port and gives the tests what they need to talk to it.
 *
 * Each test writes a fresh config into its own temporary directory (listen
 * "127.0.0.1:0", the scenes below), forks and execs PD_BINARY_DIR/server/pathd,
 * and learns the port from the daemon's "listening on HOST:PORT" log line.
 * The daemon's stderr is copied to a log file for the whole run; stopping it
 * (SIGTERM) must give exit status 0 within the grace period, and the log must
 * hold no sanitizer report, otherwise the log is printed and the test fails.
 *
 * Scenes every config serves:
 *   "rooms"   tests/data/integ_rooms.txt (ascii, 24x12, origin (-10.5, 4),
 *             cell size 0.5): walls, a sealed pocket, a cost-3 patch.
 *   "den520d" the Moving AI den520d map, read from the subset in the
 *             repository (tests/data/movingai), whose .scen file gives
 *             optimal costs.
 *   "serpent" a PDI_SERPENT_SIZE square serpentine written into the temp dir
 *             at start: the one path from (0,0) to its far end threads every
 *             corridor, so a search takes long enough (~0.5 M expansions) to
 *             still be running while a test cancels, overloads or stops it.
 *
 * Besides the pathd_client library the tests get raw-socket helpers that
 * speak the framing by hand (for bad input and for replies the library hides,
 * such as the Cancel acknowledgement).
 *
 * Every wait here is bounded in time; nothing talks to anything but
 * 127.0.0.1.
 */
#ifndef PDI_HARNESS_H
#define PDI_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pathd.pb-c.h"
#include "pathd_client.h"

/* How long pathd gets to print its "listening on" line: scene loading is
 * quick, but sanitizer builds start slowly (a TSan daemon on the shared
 * 2-core machine at load average 14 passed 10 s loading three scenes). */
#define PDI_START_TIMEOUT_MS 60000
/* Beyond the configured shutdown grace, how long a stopping daemon gets to
 * exit: the server's own cancel wait (1 s) and flush time (2 s) plus slack
 * for sanitizer builds writing their exit reports. */
#define PDI_STOP_SLACK_MS 15000
/* Client timeout for any one answer. Generous: a TSan daemon is ~10x slower. */
#define PDI_CALL_TIMEOUT_MS 30000
/* Side of the generated serpentine scene, in cells (odd, so the last row is
 * a corridor). 1023 gives 512 corridors and a 524,286-step path: about
 * 0.1-0.2 s of search in an optimised build, seconds under TSan. */
#define PDI_SERPENT_SIZE 1023
/* Largest log printed on failure, in bytes (the tail is kept). */
#define PDI_LOG_PRINT_MAX (64 * 1024)
/* See pdi_limits.small_quarantine: recent frees are still checked. */
#define PDI_ASAN_QUARANTINE_MB 4
/* Longest line of a config or path built here. */
#define PDI_PATH_MAX 512

/* Optional config settings; a zero field leaves the daemon's default. */
typedef struct pdi_limits {
    uint32_t threads;                 /* 0: the harness uses 2 (the machine's cores) */
    uint32_t max_frame_bytes;
    uint32_t max_waypoints_per_chunk;
    uint32_t max_inflight_per_conn;
    uint32_t max_connections;
    uint32_t job_queue_capacity;
    uint32_t shutdown_grace_ms;
    uint64_t write_high_watermark;
    uint64_t write_low_watermark;
    uint64_t buffer_budget_bytes;
    uint32_t frame_timeout_ms;
    uint64_t worker_retained_bytes;
    uint32_t watch_buffer_bytes;
    uint32_t max_watch_scenes;
    uint32_t max_watchers;
    uint32_t max_watches_per_conn;
    uint32_t metrics_scene_series;
    uint32_t max_scenes;
    uint32_t max_scene_cells;
    uint64_t max_scene_bytes;
    const char *listen;               /* NULL: "127.0.0.1:0" (a free loopback port) */
    int metrics;                      /* 1: metrics_listen on a free loopback port (pdi_metrics_get) */
    const char *log_level;            /* NULL: "info" */
    const char *extra_scenes_json;    /* appended to "scenes", e.g. ",{...}"; NULL: none */
    const char *auth_json;            /* the config's "auth" object, e.g. "{\"tokens\": [...]}"; NULL: none */
    const char *extra_json;           /* more top-level keys, each line ending in a comma,
                                         e.g. "\"data_dir\": \"/tmp/d\","; NULL: none */
    /* Not config: 1 runs the daemon with AddressSanitizer's quarantine of
     * freed memory capped at PDI_ASAN_QUARANTINE_MB, for tests that bound
     * its RSS (the default quarantine holds up to 256 MiB of freed blocks,
     * which would swamp any bound). No effect in other builds. */
    int small_quarantine;
} pdi_limits;

typedef struct pdi_daemon {
    pid_t pid;                        /* 0 when not running */
    uint16_t port;
    char addr[64];                    /* "127.0.0.1:PORT" for pdc_connect and pathctl */
    char dir[64];                     /* temporary directory: config, serpent map, log */
    char config_path[PDI_PATH_MAX];
    char log_path[PDI_PATH_MAX];
    int exit_status;                  /* after pdi_daemon_stop: the wait status */
    uint32_t grace_ms;                /* the config's shutdown grace (default 5000) */
    int stderr_fd;                    /* read end of the daemon's stderr pipe */
    int log_fd;
    int drainer_running;
    unsigned long drainer;            /* pthread_t, kept opaque to spare includes */
} pdi_daemon;

/* ---- daemon ------------------------------------------------------------ */

/* Writes the config (and the serpent map) into a new temp dir and starts
 * pathd on it. Returns 0, or -1 after printing why (and the log). */
int pdi_daemon_start(pdi_daemon *d, const pdi_limits *limits);

/* Rewrites d's config file (atomically, via rename, so a reload never reads
 * half a file). Returns 0 or -1. */
int pdi_write_config(const pdi_daemon *d, const pdi_limits *limits);

/* Replaces d's config file with arbitrary text (for broken configs). */
int pdi_write_config_text(const pdi_daemon *d, const char *text);

/* Sends a signal to the running daemon. */
int pdi_daemon_signal(const pdi_daemon *d, int sig);

/* SIGTERM, then waits for the exit. Returns 0 only when pathd exited with
 * status 0 within its grace period plus PDI_STOP_SLACK_MS and its log holds
 * no sanitizer report; otherwise prints why and the log, kills it if it is
 * still running, and returns -1. */
int pdi_daemon_stop(pdi_daemon *d);

/* cmocka fixtures: start a daemon into *state (heap) / stop it, requiring a
 * clean exit, and free it. A test file's setup calls pdi_fixture_start with
 * its limits; pdi_fixture_stop is the teardown as is. */
int pdi_fixture_start(void **state, const pdi_limits *limits);
int pdi_fixture_stop(void **state);

/* After the daemon exited (pdi_daemon_wait_exit): 0 when its status was 0
 * and its log holds no sanitizer report, else prints why and the log, -1. */
int pdi_daemon_check_exit(const pdi_daemon *d);

/* Waits up to timeout_ms for the daemon to exit by itself; fills
 * d->exit_status. Returns 0 when it exited, -1 on timeout. */
int pdi_daemon_wait_exit(pdi_daemon *d, int timeout_ms);

/* Test teardown: kills a daemon still running (printing its log, since that
 * means the test failed), and removes the temp dir. Safe to call twice. */
void pdi_daemon_cleanup(pdi_daemon *d);

/* 1 when the log holds a sanitizer report (ASan, UBSan, TSan, LSan). */
int pdi_log_has_sanitizer_report(const pdi_daemon *d);

/* 1 when the log contains needle; pdi_wait_log polls up to timeout_ms. */
int pdi_log_contains(const pdi_daemon *d, const char *needle);
int pdi_wait_log(const pdi_daemon *d, const char *needle, int timeout_ms);
/* How many times needle occurs in the log. */
int pdi_log_count(const pdi_daemon *d, const char *needle);

/* Polls up to timeout_ms until needle occurs at least count times in the
 * log; 1 when it does. */
int pdi_wait_log_count(const pdi_daemon *d, const char *needle, int count, int timeout_ms);

/* The port a log line gives right after marker (e.g. "agent-check on
 * 127.0.0.1:"), waiting up to PDI_START_TIMEOUT_MS for the line; 0 after
 * printing why. */
uint16_t pdi_log_port(const pdi_daemon *d, const char *marker);

/* Prints the daemon's log (tail) to stderr. */
void pdi_print_log(const pdi_daemon *d);

/* The daemon's resident set from /proc/PID/status (VmRSS), KiB; -1 if unknown. */
long pdi_daemon_rss_kib(const pdi_daemon *d);

/* Runs pathd to completion with the given arguments (argv[0] is supplied),
 * capturing stdout and stderr together into out. Returns the exit status
 * (0..255), or -1 if it did not exit within timeout_ms or died by a signal. */
int pdi_run_pathd(const char *const *args, int timeout_ms, char *out, size_t outlen);

/* Paths of the built binaries. */
const char *pdi_pathd_binary(void);
const char *pdi_pathctl_binary(void);

/* qsort's comparator of uint64_t, ascending (round trips, versions, ids):
 * the tests link only the client, so not the server's pd_cmp_u64. */
int pdi_cmp_u64(const void *a, const void *b);

/* ---- clients ----------------------------------------------------------- */

/* The metrics port the daemon bound (read from its "metrics on" log line),
 * or 0 after printing why. */
uint16_t pdi_metrics_port(const pdi_daemon *d);

/* GET /metrics from a daemon started with limits.metrics: its address comes
 * from the "metrics on http://..." log line. Returns the body (heap, the
 * caller frees it) or NULL after printing why. */
char *pdi_metrics_get(const pdi_daemon *d);
/* GET /metrics until its body contains needle, for up to timeout_ms: a
 * worker may write an answer itself before the loop counts its job, so a
 * scrape right after an answer can miss that answer's count. Returns the
 * last body (heap; the caller frees it), NULL when no scrape answered. */
char *pdi_metrics_wait(const pdi_daemon *d, const char *needle, int timeout_ms);
/* The same for any path on the metrics port, e.g. "/livez". */
char *pdi_metrics_http_get(const pdi_daemon *d, const char *path);

/* pdc_connect to the daemon with PDI_CALL_TIMEOUT_MS; NULL on failure. */
pdc_conn *pdi_connect(const pdi_daemon *d);

/* The control client: a fresh connection that must answer a ping and find
 * one known den520d path with the right cost. Fails the test (cmocka) if not. */
void pdi_assert_daemon_serves(const pdi_daemon *d);

/* Milliseconds on CLOCK_MONOTONIC. */
double pdi_now_ms(void);
/* Nanoseconds on CLOCK_MONOTONIC (the server's clock for Response.server_us). */
uint64_t pdi_now_ns(void);

/* Checks an answer's server-side times against what the client saw (fails
 * the test, naming `what`, if not): server_us > 0 and no longer than the
 * round trip measured from sent_ns (pdi_now_ns before the request was sent)
 * to now, rounded up to whole microseconds as the server rounds; search_us
 * no longer than server_us, and > 0 exactly when `searched` (the answer
 * ran a search or movement query). */
void pdi_check_timing(pdc_timing t, uint64_t sent_ns, int searched, const char *what);
void pdi_sleep_ms(int ms);

/* ---- scene state across restarts ---------------------------------------
 *
 * For tests that restart pathd on the same durable store (journal, Redis
 * log): what clients see of the scenes before, compared with what they see
 * after. */

/* Daemon d, not started yet: pdi_daemon_cleanup is safe on it, and a
 * fixture may start and stop it more than once. */
void pdi_daemon_init(pdi_daemon *d);

/* kill -9 of the running daemon: it must be gone within 10 s; then its
 * temp dir is removed (pdi_daemon_cleanup). */
void pdi_daemon_kill9(pdi_daemon *d);

/* UpdateCells on the rect (x0, y0)-(x1, y1) with op (and cost, for
 * PDC_UPDATE_COST): the client's status, and on PDC_OK *version. */
int pdi_update_rect(pdc_conn *c, const char *scene, pdc_update_op op, uint32_t cost, int32_t x0, int32_t y0,
                    int32_t x1, int32_t y1, uint64_t *version);

/* A world as clients see it: every scene's name, version and grids. */
typedef struct pdi_world {
    size_t n;
    char *names[16];
    uint64_t versions[16];
    pdc_grid grids[16], unit2[16];
} pdi_world;

/* Reads every scene but the big, never-changed ones of the harness config
 * (den520d, serpent): version (SceneInfo), unit-1 grid (GetSceneGrid, at
 * that version) and, when it serves unit 2, the unit-2 grid. */
void pdi_world_read(pdc_conn *c, pdi_world *w);
/* Fails the test (cmocka) unless a and b hold the same scenes, versions
 * and cells. */
void pdi_world_assert_equal(const pdi_world *a, const pdi_world *b);
int pdi_world_has(const pdi_world *w, const char *name);
void pdi_world_free(pdi_world *w);

/* ---- Moving AI data ---------------------------------------------------- */

/* The Moving AI subset in the repository (tests/data/movingai). */
const char *pdi_movingai_dir(void);

typedef struct pdi_scenario {
    int32_t sx, sy, gx, gy;
    double optimal;     /* as printed in the .scen file */
    double tolerance;   /* half a unit in the last printed digit, + 1e-9 */
} pdi_scenario;

/* Loads up to max den520d scenarios spread evenly over the whole file (so
 * every length bucket is represented). Returns how many, 0 on error. */
size_t pdi_load_scenarios(pdi_scenario *out, size_t max);

/* A map read independently of the daemon's parser: cost[y*width+x] is 0 for
 * a blocked cell, else the multiplier for entering it (1 on Moving AI maps). */
typedef struct pdi_grid {
    int32_t width, height;
    uint8_t *cost;
} pdi_grid;

int pdi_grid_load_den520d(pdi_grid *g);
/* tests/data/integ_rooms.txt, the "rooms" scene. */
int pdi_grid_load_rooms(pdi_grid *g);
/* Any ascii scene file, read the way the rooms loader reads it: '.' costs 1,
 * '1'..'9' that cost, anything else is blocked; lines starting with ';' are
 * comments. Returns 0 or -1. */
int pdi_grid_load_ascii(pdi_grid *g, const char *path);
void pdi_grid_free(pdi_grid *g);
int pdi_grid_open(const pdi_grid *g, int32_t x, int32_t y);

/* Walks a returned path under the search rules (8-connected, straight step
 * 1 and diagonal sqrt(2) times the entered cell's cost, no corner cutting)
 * and sums its cost. Returns 0 and *cost, or -1 with the reason in why when
 * a step is not a legal move or a cell is blocked. */
int pdi_grid_path_cost(const pdi_grid *g, const pdc_waypoint *wp, size_t n, double *cost,
                       char *why, size_t whylen);

/* The optimal cost by plain Dijkstra under the same rules (an oracle for
 * small maps only: O(cells^2)); -1 when the goal is unreachable. */
double pdi_grid_dijkstra(const pdi_grid *g, int32_t sx, int32_t sy, int32_t gx, int32_t gy);

/* The serpent scene's far end (the goal of the long search) and the cost of
 * the one path to it from (0,0): every corridor plus two steps per gap. */
void pdi_serpent_goal(int32_t *x, int32_t *y);
double pdi_serpent_cost(void);

/* ---- raw sockets ------------------------------------------------------- */

/* A blocking TCP connection to 127.0.0.1:port; -1 on failure. */
int pdi_raw_connect(uint16_t port);
/* The same with a 4 KiB receive buffer, set before connecting: the server
 * sees a small window, and a large answer fills it and its send buffer. */
int pdi_raw_connect_small_window(uint16_t port);

/* Sends all bytes (bounded by PDI_CALL_TIMEOUT_MS). Returns 0 or -1. */
int pdi_raw_send(int fd, const void *buf, size_t len);

/* Frames and sends one Request. Returns 0 or -1. */
int pdi_raw_send_request(int fd, const Pathd__V1__Request *req);

/* Reads one Response frame, waiting up to timeout_ms. Returns it (free with
 * pathd__v1__response__free_unpacked(r, NULL)) or NULL on EOF, timeout or a
 * frame that does not decode; *eof (may be NULL) says whether the peer closed. */
Pathd__V1__Response *pdi_raw_recv(int fd, int timeout_ms, int *eof);

/* Reads and discards until the peer closes; 1 if it did within timeout_ms. */
int pdi_raw_wait_closed(int fd, int timeout_ms);

/* A FindPath request with its sub-messages, so tests can build one on the
 * stack and tweak fields (m.fp.deadline_ms = 1, ...). Cell points. */
typedef struct pdi_fp_msg {
    Pathd__V1__Request req;
    Pathd__V1__FindPath fp;
    Pathd__V1__Point start, goal;
    Pathd__V1__Cell start_cell, goal_cell;
} pdi_fp_msg;

void pdi_fp_init(pdi_fp_msg *m, uint64_t id, const char *scene, int32_t sx, int32_t sy,
                 int32_t gx, int32_t gy);

/* Ping and Cancel requests (the message owns its body). */
typedef struct pdi_small_msg {
    Pathd__V1__Request req;
    Pathd__V1__Ping ping;
    Pathd__V1__Cancel cancel;
} pdi_small_msg;

void pdi_ping_init(pdi_small_msg *m, uint64_t id, uint64_t nonce);
void pdi_cancel_init(pdi_small_msg *m, uint64_t id, uint64_t target_id);

/* Pings on fd (request id, nonce) and reads the answer: it must be a final
 * OK Pong echoing nonce (cmocka fails the test if not). Returns
 * Pong.serving. Only for when nothing else is awaited on fd. */
Pathd__V1__ServingState pdi_raw_ping(int fd, uint64_t id, uint64_t nonce);

/* Reads Responses until the final frame for id arrives, dropping every other
 * frame on the way (so only for when nothing else is awaited on fd).
 * Returns it, or NULL on timeout or EOF. */
Pathd__V1__Response *pdi_raw_recv_final(int fd, uint64_t id, int timeout_ms);

/* Reads until the final answer of every id in ids has arrived, in any order,
 * into out[i] (free each with pathd__v1__response__free_unpacked); other
 * frames are dropped. Fails the test (cmocka) on timeout or EOF. */
void pdi_raw_collect(int fd, const uint64_t *ids, Pathd__V1__Response **out, size_t n);
void pdi_raw_free_all(Pathd__V1__Response **r, size_t n);

/* Runs two serpent searches at once and waits for both, so both workers have
 * allocated their search contexts: a worker's first search on the serpent
 * is several times slower than later ones. ids 1 and 2 are used on fd. */
void pdi_warm_up(int fd);

/* Sends one serpent search (STYLE_CORNERS) with the given deadline (0: none). */
void pdi_send_serpent(int fd, uint64_t id, uint32_t deadline_ms);
void pdi_send_cancel(int fd, uint64_t id, uint64_t target);


/* ---- issue 4: footprint oracles and helpers ------------------------------
 *
 * Independent references for unit sizes, avoid cells, windows, fallbacks and
 * smoothing, written from the rules in docs/PROTOCOL.md and never from the
 * server's code: a unit of size k at anchor (x, y) covers x..x+k-1 by
 * y..y+k-1; it may stand there when every covered cell is on the grid and
 * passable, and entering the anchor costs the most expensive covered cell.
 * A diagonal step needs the (k+1) x (k+1) box spanned by both footprints to
 * be passable, which is the same as the unit fitting at both orthogonal
 * neighbours (no corner cutting). Avoid cells and the window restrict anchors
 * and count for the corner rule like blocked ones.
 */

/* Most cells an oracle grid may have: the O(V^2) Dijkstra below is for
 * hand-made and small generated maps only. */
#define PDI_ORACLE_MAX_CELLS (64 * 64)

/* What one query may do, as the daemon is asked to do it. Zero = unit 1,
 * 8-connected, no avoid cells, no window. */
typedef struct pdi_rules {
    uint32_t unit;
    int connect4;
    const pdc_xy *avoid;
    size_t avoid_count;
    int has_window;
    pdc_xy window_min, window_max;
} pdi_rules;

/* 1 when a unit of the rules' size fits at anchor (x, y), is not on an avoid
 * cell and lies inside the window. */
int pdi_rules_open(const pdi_grid *g, const pdi_rules *r, int32_t x, int32_t y);

/* The cost of entering anchor (x, y): the largest cost under the footprint. */
double pdi_unit_cost(const pdi_grid *g, uint32_t unit, int32_t x, int32_t y);

/* The cost of one move under the rules, or -1 when it is not a legal move. */
double pdi_rules_step(const pdi_grid *g, const pdi_rules *r, int32_t x0, int32_t y0, int32_t x1,
                      int32_t y1);

/* Walks a returned cell path under the rules (every waypoint an open anchor,
 * every step a legal move) and sums its cost. 0 and *cost, or -1 and why. */
int pdi_rules_path_cost(const pdi_grid *g, const pdi_rules *r, const pdc_waypoint *wp, size_t n,
                        double *cost, char *why, size_t whylen);

/* Dijkstra from (sx, sy) over the explicitly built graph of anchors:
 * dist[y * width + x] gets the optimal cost to every anchor, INFINITY where
 * unreachable (everywhere when the start is not open). dist holds
 * width * height doubles. Returns 0, or -1 when the grid is too large. */
int pdi_rules_dijkstra_all(const pdi_grid *g, const pdi_rules *r, int32_t sx, int32_t sy,
                           double *dist);

/* One optimal cost; -1 when the goal is unreachable. */
double pdi_rules_dijkstra(const pdi_grid *g, const pdi_rules *r, int32_t sx, int32_t sy, int32_t gx,
                          int32_t gy);

/* The cells the segment between the centres of a and b touches, in walking
 * order from a to b, into out (at most cap; returns how many there are).
 * Where the segment passes exactly through a cell corner, the two cells
 * beside the corner come before the diagonal one, the smaller y first. */
size_t pdi_supercover(pdc_xy a, pdc_xy b, pdc_xy *out, size_t cap);

/* 1 when every cell of the segment's supercover is open under the rules:
 * the unit can slide along it without touching a blocked cell. */
int pdi_segment_clear(const pdi_grid *g, const pdi_rules *r, pdc_xy a, pdc_xy b);

/* Euclidean length of the waypoint polyline, in cells. */
double pdi_polyline_length(const pdc_waypoint *wp, size_t n);

/* Writes text into a new file /tmp/pathd-e2e4-XXXXXX (path gets its name)
 * for scenes a test generates (the config names their format, so no
 * extension is needed); the caller unlinks it. 0 or -1. */
int pdi_write_temp_map(const char *text, char *path, size_t cap);

#endif
