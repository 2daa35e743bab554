/*
 * harness.c - runs the real pathd for the end-to-end tests (see harness.h).
 *
 * The daemon is a child process: fork, then exec at once (the test process
 * may already have threads, so the child does nothing but dup2 and exec).
 * PR_SET_PDEATHSIG makes the kernel kill it if the test process dies, so a
 * crashed or timed-out test never leaves a daemon behind. Its stdout and
 * stderr go into one pipe; the harness reads that pipe until the "listening
 * on" line, then a drainer thread copies the rest into the log file until
 * the daemon exits and the pipe reaches EOF.
 */
#include "harness.h"
#include "pd_testsock.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#include <setjmp.h>
#include <stddef.h>
#include <cmocka.h>

/* Bytes of daemon output kept in memory while waiting for "listening on". */
#define PDI__START_BUF 65536
/* Largest Response frame the raw client accepts (the daemon's chunks are
 * ~11 KiB; anything near this is a bug worth seeing as a failure). */
#define PDI__MAX_RESPONSE (16u * 1024u * 1024u)
/* Largest log read back into memory for searching, in bytes. */
#define PDI__LOG_READ_MAX (32u * 1024u * 1024u)
/* Threads the daemon gets unless a test says otherwise: the machine has 2
 * cores, and out-of-order tests need at least 2 workers. */
#define PDI__DEFAULT_THREADS 2
/* The daemon's shutdown grace when the config sets none (config/README.md). */
#define PDI__DEFAULT_GRACE_MS 5000

static const char *const pdi__sanitizer_markers[] = {
    "ERROR: AddressSanitizer", "runtime error:", "WARNING: ThreadSanitizer",
    "ERROR: ThreadSanitizer", "LeakSanitizer", "ERROR: UndefinedBehaviorSanitizer",
};

double pdi_now_ms(void)
{
    return pd_ts_now_ms();
}

uint64_t pdi_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void pdi_check_timing(pdc_timing t, uint64_t sent_ns, int searched, const char *what)
{
    uint64_t rtt_us = (pdi_now_ns() - sent_ns + 999u) / 1000u;
    if (t.server_us == 0 || t.server_us > rtt_us)
        fail_msg("%s: server_us %llu, round trip %llu us (want 0 < server_us <= round trip)", what,
                 (unsigned long long)t.server_us, (unsigned long long)rtt_us);
    if (t.search_us > t.server_us)
        fail_msg("%s: search_us %llu exceeds server_us %llu", what, (unsigned long long)t.search_us,
                 (unsigned long long)t.server_us);
    if ((t.search_us > 0) != (searched != 0))
        fail_msg("%s: search_us %llu, but the answer %s", what, (unsigned long long)t.search_us,
                 searched ? "ran a search" : "searched nothing");
}

void pdi_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

const char *pdi_pathd_binary(void)
{
    return PD_BINARY_DIR "/server/pathd";
}

const char *pdi_pathctl_binary(void)
{
    return PD_BINARY_DIR "/client-examples/c/pathctl";
}

const char *pdi_movingai_dir(void)
{
    return PD_MOVINGAI_DIR;
}

/* ---- files --------------------------------------------------------------- */

static int pdi__write_file(const char *path, const char *data, size_t len)
{
    char tmp[PDI_PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, 1, len, f) == len;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* Reads up to max bytes of a file into a NUL-terminated heap buffer. */
static char *pdi__read_file(const char *path, size_t max, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap + 1);
    while (buf) {
        if (len == cap) {
            if (cap >= max)
                break;
            cap *= 2;
            char *grown = realloc(buf, cap + 1);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        size_t n = fread(buf + len, 1, cap - len, f);
        if (n == 0)
            break;
        len += n;
    }
    fclose(f);
    if (buf) {
        buf[len] = '\0';
        if (len_out)
            *len_out = len;
    }
    return buf;
}

/* The serpentine: even rows are corridors, odd rows walls with one gap,
 * alternately at the right and the left end. */
static int pdi__write_serpent(const char *path)
{
    const int n = PDI_SERPENT_SIZE;
    size_t len = (size_t)n * (size_t)(n + 1);
    char *map = malloc(len);
    if (!map)
        return -1;
    for (int y = 0; y < n; y++) {
        char *row = map + (size_t)y * (size_t)(n + 1);
        if (y % 2 == 0) {
            memset(row, '.', (size_t)n);
        } else {
            memset(row, '#', (size_t)n);
            row[y % 4 == 1 ? n - 1 : 0] = '.';
        }
        row[n] = '\n';
    }
    int rc = pdi__write_file(path, map, len);
    free(map);
    return rc;
}

void pdi_serpent_goal(int32_t *x, int32_t *y)
{
    /* Corridor k (row 2k) runs rightwards for even k; the last corridor,
     * k = (n-1)/2, is odd when n = 1023, so its far end is the left edge. */
    const int32_t n = PDI_SERPENT_SIZE, last = (n - 1) / 2;
    *y = n - 1;
    *x = (last % 2 == 0) ? n - 1 : 0;
}

double pdi_serpent_cost(void)
{
    const double n = PDI_SERPENT_SIZE, corridors = (PDI_SERPENT_SIZE + 1) / 2;
    /* No diagonal shortcut exists at a gap: the wall beside it blocks the
     * corner. So each corridor costs n-1 straight steps and each of the
     * corridors-1 gaps two vertical ones. */
    return corridors * (n - 1) + 2.0 * (corridors - 1);
}

static int pdi__append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int pdi__append(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap - *len)
        return -1;
    *len += (size_t)n;
    return 0;
}

static int pdi__config_text(const pdi_limits *l, char *buf, size_t cap)
{
    static const pdi_limits none;
    if (!l)
        l = &none;
    size_t len = 0;
    int bad = 0;
    bad |= pdi__append(buf, cap, &len, "{\n  \"listen\": \"%s\",\n  \"threads\": %u,\n"
                       "  \"log_level\": \"%s\",\n",
                       l->listen ? l->listen : "127.0.0.1:0", l->threads ? l->threads : PDI__DEFAULT_THREADS,
                       l->log_level ? l->log_level : "info");
    if (l->auth_json)
        bad |= pdi__append(buf, cap, &len, "  \"auth\": %s,\n", l->auth_json);
    if (l->extra_json)
        bad |= pdi__append(buf, cap, &len, "  %s\n", l->extra_json);
    if (l->metrics)
        bad |= pdi__append(buf, cap, &len, "  \"metrics_listen\": \"127.0.0.1:0\",\n");
    struct {
        const char *key;
        uint64_t value;
    } limits[] = {
        {"max_frame_bytes", l->max_frame_bytes},
        {"max_waypoints_per_chunk", l->max_waypoints_per_chunk},
        {"max_inflight_per_conn", l->max_inflight_per_conn},
        {"max_connections", l->max_connections},
        {"job_queue_capacity", l->job_queue_capacity},
        {"shutdown_grace_ms", l->shutdown_grace_ms},
        {"write_high_watermark", l->write_high_watermark},
        {"write_low_watermark", l->write_low_watermark},
        {"buffer_budget_bytes", l->buffer_budget_bytes},
        {"frame_timeout_ms", l->frame_timeout_ms},
        {"worker_retained_bytes", l->worker_retained_bytes},
        {"watch_buffer_bytes", l->watch_buffer_bytes},
        {"max_watch_scenes", l->max_watch_scenes},
        {"max_watchers", l->max_watchers},
        {"max_watches_per_conn", l->max_watches_per_conn},
        {"metrics_scene_series", l->metrics_scene_series},
        {"max_scenes", l->max_scenes},
        {"max_scene_cells", l->max_scene_cells},
        {"max_scene_bytes", l->max_scene_bytes},
    };
    const char *sep = "  \"limits\": {";
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        if (limits[i].value == 0)
            continue;
        bad |= pdi__append(buf, cap, &len, "%s\n    \"%s\": %llu", sep, limits[i].key,
                           (unsigned long long)limits[i].value);
        sep = ",";
    }
    if (sep[0] == ',')
        bad |= pdi__append(buf, cap, &len, "\n  },\n");
    bad |= pdi__append(
        buf, cap, &len,
        "  \"scenes\": [\n"
        "    {\"name\": \"rooms\", \"map\": \"%s/integ_rooms.txt\", \"format\": \"ascii\",\n"
        "     \"origin\": [-10.5, 4], \"cell_size\": 0.5, \"unit_sizes\": [1, 2]},\n"
        "    {\"name\": \"den520d\", \"map\": \"%s/maps/den520d.map\", \"format\": \"movingai\"},\n"
        "    {\"name\": \"serpent\", \"map\": \"serpent.txt\", \"format\": \"ascii\"}%s\n"
        "  ]\n}\n",
        PD_TEST_DATA_DIR, pdi_movingai_dir(), l->extra_scenes_json ? l->extra_scenes_json : "");
    return bad ? -1 : 0;
}

int pdi_write_config(const pdi_daemon *d, const pdi_limits *limits)
{
    char text[8192];
    if (pdi__config_text(limits, text, sizeof text) != 0)
        return -1;
    return pdi_write_config_text(d, text);
}

int pdi_write_config_text(const pdi_daemon *d, const char *text)
{
    return pdi__write_file(d->config_path, text, strlen(text));
}

/* ---- the daemon ---------------------------------------------------------- */

static int pdi__write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

static void *pdi__drain(void *arg)
{
    pdi_daemon *d = arg;
    char buf[4096];
    for (;;) {
        ssize_t n = read(d->stderr_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        pdi__write_all(d->log_fd, buf, (size_t)n);
    }
    return NULL;
}

/* fork + exec with stdout and stderr into a new pipe; returns the pid and
 * the pipe's read end in *out_fd, or -1. argv is prepared by the caller, so
 * the child only calls async-signal-safe functions. */
static pid_t pdi__spawn(char *const argv[], char *const envp[], int *out_fd, int die_with_parent)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    /* Neither end may leak into other children; dup2 below clears the flag
     * on the copies the daemon gets as stdout and stderr. */
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        if (die_with_parent)
            prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execve(argv[0], argv, envp);
        _exit(127);
    }
    close(fds[1]);
    *out_fd = fds[0];
    return pid;
}

/* The daemon's environment: ours, with ASAN_OPTIONS extended when the
 * quarantine is to be capped (later options override earlier ones). Built
 * before fork, because the child may only call async-signal-safe functions. */
static char **pdi__child_env(int small_quarantine)
{
    size_t n = 0;
    while (environ[n])
        n++;
    char **env = calloc(n + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t k = 0;
    const char *asan = "";
    for (size_t i = 0; i < n; i++) {
        if (small_quarantine && strncmp(environ[i], "ASAN_OPTIONS=", 13) == 0)
            asan = environ[i] + 13;
        else
            env[k++] = strdup(environ[i]);
    }
    if (small_quarantine) {
        char *opt = malloc(strlen(asan) + 128);
        if (opt)
            sprintf(opt, "ASAN_OPTIONS=%s%squarantine_size_mb=%d", asan, asan[0] ? ":" : "",
                    PDI_ASAN_QUARANTINE_MB);
        env[k++] = opt;
    }
    for (size_t i = 0; i < k; i++) {
        if (!env[i]) {
            for (size_t j = 0; j < k; j++)
                free(env[j]);
            free(env);
            return NULL;
        }
    }
    return env;
}

static void pdi__free_env(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

/* Looks for "listening on HOST:PORT\n" in the output so far. */
static int pdi__find_port(const char *text, uint16_t *port)
{
    const char *p = strstr(text, "listening on ");
    if (!p)
        return 0;
    const char *eol = strchr(p, '\n');
    if (!eol)
        return 0;
    const char *colon = NULL;
    for (const char *q = p; q < eol; q++)
        if (*q == ':')
            colon = q;
    if (!colon)
        return -1;
    long v = strtol(colon + 1, NULL, 10);
    if (v <= 0 || v > 65535)
        return -1;
    *port = (uint16_t)v;
    return 1;
}

int pdi_daemon_start(pdi_daemon *d, const pdi_limits *limits)
{
    memset(d, 0, sizeof *d);
    d->stderr_fd = -1;
    d->log_fd = -1;
    snprintf(d->dir, sizeof d->dir, "/tmp/pathd-integ-XXXXXX");
    if (!mkdtemp(d->dir)) {
        fprintf(stderr, "harness: mkdtemp: %s\n", strerror(errno));
        d->dir[0] = '\0';
        return -1;
    }
    d->grace_ms = (limits && limits->shutdown_grace_ms) ? limits->shutdown_grace_ms : PDI__DEFAULT_GRACE_MS;
    snprintf(d->config_path, sizeof d->config_path, "%s/pathd.json", d->dir);
    snprintf(d->log_path, sizeof d->log_path, "%s/pathd.log", d->dir);
    char serpent[PDI_PATH_MAX];
    snprintf(serpent, sizeof serpent, "%s/serpent.txt", d->dir);
    if (pdi__write_serpent(serpent) != 0 || pdi_write_config(d, limits) != 0) {
        fprintf(stderr, "harness: cannot write the config into %s\n", d->dir);
        return -1;
    }
    d->log_fd = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (d->log_fd < 0)
        return -1;
    if (access(pdi_pathd_binary(), X_OK) != 0) {
        fprintf(stderr, "harness: %s is not built\n", pdi_pathd_binary());
        return -1;
    }

    char *argv[] = {(char *)pdi_pathd_binary(), "--config", d->config_path, NULL};
    char **envp = pdi__child_env(limits && limits->small_quarantine);
    d->pid = envp ? pdi__spawn(argv, envp, &d->stderr_fd, 1) : -1;
    pdi__free_env(envp);
    if (d->pid < 0) {
        d->pid = 0;
        fprintf(stderr, "harness: cannot start %s: %s\n", argv[0], strerror(errno));
        return -1;
    }

    char *seen = calloc(1, PDI__START_BUF + 1);
    size_t seen_len = 0;
    double deadline = pdi_now_ms() + PDI_START_TIMEOUT_MS;
    int found = 0;
    while (seen && !found) {
        int left = (int)(deadline - pdi_now_ms());
        if (left <= 0)
            break;
        struct pollfd pfd = {d->stderr_fd, POLLIN, 0};
        int pr = poll(&pfd, 1, left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        char buf[4096];
        ssize_t n = read(d->stderr_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the daemon exited before listening */
        pdi__write_all(d->log_fd, buf, (size_t)n);
        size_t take = (size_t)n < PDI__START_BUF - seen_len ? (size_t)n : PDI__START_BUF - seen_len;
        memcpy(seen + seen_len, buf, take);
        seen_len += take;
        seen[seen_len] = '\0';
        found = pdi__find_port(seen, &d->port);
    }
    free(seen);
    if (found != 1) {
        if (pdi_daemon_wait_exit(d, 0) == 0)
            fprintf(stderr, "harness: pathd exited (wait status %d) before listening\n", d->exit_status);
        else
            fprintf(stderr, "harness: pathd did not log a usable \"listening on\" line within %d ms\n",
                    PDI_START_TIMEOUT_MS);
        pdi_daemon_cleanup(d);
        return -1;
    }
    snprintf(d->addr, sizeof d->addr, "127.0.0.1:%u", (unsigned)d->port);

    pthread_t t;
    if (pthread_create(&t, NULL, pdi__drain, d) != 0) {
        pdi_daemon_cleanup(d);
        return -1;
    }
    d->drainer = (unsigned long)t;
    d->drainer_running = 1;
    return 0;
}

int pdi_daemon_signal(const pdi_daemon *d, int sig)
{
    return d->pid > 0 ? kill(d->pid, sig) : -1;
}

int pdi_daemon_wait_exit(pdi_daemon *d, int timeout_ms)
{
    if (d->pid <= 0)
        return -1;
    double deadline = pdi_now_ms() + timeout_ms;
    for (;;) {
        int st;
        pid_t r = waitpid(d->pid, &st, WNOHANG);
        if (r == d->pid) {
            d->exit_status = st;
            d->pid = 0;
            break;
        }
        if (r < 0 && errno != EINTR)
            return -1;
        if (pdi_now_ms() >= deadline)
            return -1;
        pdi_sleep_ms(5);
    }
    if (d->drainer_running) {
        pthread_join((pthread_t)d->drainer, NULL);
        d->drainer_running = 0;
    }
    return 0;
}

static void pdi__kill_now(pdi_daemon *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGKILL);
        int st;
        while (waitpid(d->pid, &st, 0) < 0 && errno == EINTR) {
        }
        d->exit_status = st;
        d->pid = 0;
    }
    if (d->drainer_running) {
        pthread_join((pthread_t)d->drainer, NULL);
        d->drainer_running = 0;
    }
}

int pdi_daemon_stop(pdi_daemon *d)
{
    uint32_t grace_ms = d->grace_ms;
    if (d->pid <= 0) {
        fprintf(stderr, "harness: pathd is not running\n");
        return -1;
    }
    pdi_daemon_signal(d, SIGTERM);
    if (pdi_daemon_wait_exit(d, (int)grace_ms + PDI_STOP_SLACK_MS) != 0) {
        fprintf(stderr, "harness: pathd did not exit within %u ms after SIGTERM\n",
                grace_ms + PDI_STOP_SLACK_MS);
        pdi__kill_now(d);
        pdi_print_log(d);
        return -1;
    }
    return pdi_daemon_check_exit(d);
}

int pdi_daemon_check_exit(const pdi_daemon *d)
{
    int st = d->exit_status;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (WIFSIGNALED(st))
            fprintf(stderr, "harness: pathd died of signal %d\n", WTERMSIG(st));
        else
            fprintf(stderr, "harness: pathd exited with status %d\n", WEXITSTATUS(st));
        pdi_print_log(d);
        return -1;
    }
    if (pdi_log_has_sanitizer_report(d)) {
        fprintf(stderr, "harness: pathd's log holds a sanitizer report\n");
        pdi_print_log(d);
        return -1;
    }
    return 0;
}

static void pdi__remove_dir(const char *dir)
{
    DIR *dh = opendir(dir);
    if (!dh)
        return;
    struct dirent *e;
    while ((e = readdir(dh)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char p[PDI_PATH_MAX * 2];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        unlink(p);
    }
    closedir(dh);
    rmdir(dir);
}

void pdi_daemon_cleanup(pdi_daemon *d)
{
    int failed = d->pid > 0;
    if (failed) {
        fprintf(stderr, "harness: pathd (pid %d) still running at teardown; killing it\n", (int)d->pid);
        pdi__kill_now(d);
        pdi_print_log(d);
    } else if (d->dir[0] && pdi_log_has_sanitizer_report(d)) {
        failed = 1;
        pdi_print_log(d);
    }
    if (d->stderr_fd >= 0)
        close(d->stderr_fd);
    if (d->log_fd >= 0)
        close(d->log_fd);
    d->stderr_fd = d->log_fd = -1;
    if (d->dir[0]) {
        if (failed) {
            /* The config and the log tell what happened; the generated
             * serpent map (1 MiB) is not worth keeping. */
            char serpent[PDI_PATH_MAX];
            snprintf(serpent, sizeof serpent, "%s/serpent.txt", d->dir);
            unlink(serpent);
            fprintf(stderr, "harness: keeping %s for inspection\n", d->dir);
        } else {
            pdi__remove_dir(d->dir);
        }
        d->dir[0] = '\0';
    }
}

int pdi_fixture_start(void **state, const pdi_limits *limits)
{
    pdi_daemon *d = calloc(1, sizeof *d);
    if (!d)
        return -1;
    if (pdi_daemon_start(d, limits) != 0) {
        /* cmocka runs no teardown after a failed setup. */
        pdi_daemon_cleanup(d);
        free(d);
        *state = NULL;
        return -1;
    }
    *state = d;
    return 0;
}

int pdi_fixture_stop(void **state)
{
    pdi_daemon *d = *state;
    int rc = 0;
    if (!d)
        return 0;
    if (d->pid > 0)
        rc = pdi_daemon_stop(d);
    pdi_daemon_cleanup(d);
    free(d);
    *state = NULL;
    return rc;
}

int pdi_log_contains(const pdi_daemon *d, const char *needle)
{
    char *text = pdi__read_file(d->log_path, PDI__LOG_READ_MAX, NULL);
    int found = text && strstr(text, needle) != NULL;
    free(text);
    return found;
}

int pdi_log_count(const pdi_daemon *d, const char *needle)
{
    char *text = pdi__read_file(d->log_path, PDI__LOG_READ_MAX, NULL);
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    free(text);
    return n;
}

int pdi_wait_log(const pdi_daemon *d, const char *needle, int timeout_ms)
{
    double deadline = pdi_now_ms() + timeout_ms;
    do {
        if (pdi_log_contains(d, needle))
            return 1;
        pdi_sleep_ms(10);
    } while (pdi_now_ms() < deadline);
    return pdi_log_contains(d, needle);
}

int pdi_wait_log_count(const pdi_daemon *d, const char *needle, int count, int timeout_ms)
{
    double deadline = pdi_now_ms() + timeout_ms;
    while (pdi_log_count(d, needle) < count && pdi_now_ms() < deadline)
        pdi_sleep_ms(20);
    return pdi_log_count(d, needle) >= count;
}

char *pdi_metrics_get(const pdi_daemon *d)
{
    return pdi_metrics_http_get(d, "/metrics");
}

char *pdi_metrics_wait(const pdi_daemon *d, const char *needle, int timeout_ms)
{
    char *text = NULL;
    for (int waited = 0;; waited += 5) {
        free(text);
        text = pdi_metrics_get(d);
        if (!text || strstr(text, needle) || waited >= timeout_ms)
            return text;
        pdi_sleep_ms(5);
    }
}

uint16_t pdi_log_port(const pdi_daemon *d, const char *marker)
{
    if (!pdi_wait_log(d, marker, PDI_START_TIMEOUT_MS)) {
        fprintf(stderr, "harness: no \"%s\" line in the log\n", marker);
        return 0;
    }
    char *log = pdi__read_file(d->log_path, PDI__LOG_READ_MAX, NULL);
    const char *at = log ? strstr(log, marker) : NULL;
    unsigned port = 0;
    if (!at || sscanf(at + strlen(marker), "%u", &port) != 1 || port == 0 || port > 65535) {
        fprintf(stderr, "harness: cannot read the port after \"%s\" from the log\n", marker);
        port = 0;
    }
    free(log);
    return (uint16_t)port;
}

uint16_t pdi_metrics_port(const pdi_daemon *d)
{
    return pdi_log_port(d, "metrics on http://127.0.0.1:");
}

char *pdi_metrics_http_get(const pdi_daemon *d, const char *path)
{
    uint16_t port = pdi_metrics_port(d);
    if (port == 0)
        return NULL;
    char req[PDI_PATH_MAX + 64];
    int req_len = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    int fd = req_len < 0 || (size_t)req_len >= sizeof req ? -1 : pd_ts_connect(port, 0, 0);
    if (fd < 0 || pd_ts_send_all(fd, req, (size_t)req_len, PDI_CALL_TIMEOUT_MS) != 0) {
        fprintf(stderr, "harness: GET %s on port %u: %s\n", path, (unsigned)port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    /* The responder closes after the body (HTTP/1.0); a reset is a failure. */
    size_t len = 0;
    int reset = 0;
    char *buf = pd_ts_read_to_close(fd, PDI__MAX_RESPONSE, PDI_CALL_TIMEOUT_MS, &len, &reset);
    if (buf && reset) {
        free(buf);
        buf = NULL;
    }
    close(fd);
    if (!buf)
        return NULL;
    char *body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) != 0 || !strstr(buf, " 200 ") || !body) {
        fprintf(stderr, "harness: %s answered: %.200s\n", path, buf);
        free(buf);
        return NULL;
    }
    memmove(buf, body + 4, strlen(body + 4) + 1);
    return buf;
}

int pdi_log_has_sanitizer_report(const pdi_daemon *d)
{
    char *text = pdi__read_file(d->log_path, PDI__LOG_READ_MAX, NULL);
    int found = 0;
    for (size_t i = 0; text && i < sizeof pdi__sanitizer_markers / sizeof pdi__sanitizer_markers[0]; i++)
        found |= strstr(text, pdi__sanitizer_markers[i]) != NULL;
    free(text);
    return found;
}

void pdi_print_log(const pdi_daemon *d)
{
    size_t len = 0;
    char *text = pdi__read_file(d->log_path, PDI__LOG_READ_MAX, &len);
    if (!text) {
        fprintf(stderr, "harness: no log at %s\n", d->log_path);
        return;
    }
    const char *from = len > PDI_LOG_PRINT_MAX ? text + len - PDI_LOG_PRINT_MAX : text;
    fprintf(stderr, "---- pathd log %s%s ----\n%s---- end of pathd log ----\n", d->log_path,
            from == text ? "" : " (tail)", from);
    free(text);
}

long pdi_daemon_rss_kib(const pdi_daemon *d)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)d->pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    return kib;
}

int pdi_run_pathd(const char *const *args, int timeout_ms, char *out, size_t outlen)
{
    char *argv[16];
    size_t n = 0;
    argv[n++] = (char *)pdi_pathd_binary();
    for (size_t i = 0; args[i] && n < sizeof argv / sizeof argv[0] - 1; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    int fd;
    pid_t pid = pdi__spawn(argv, environ, &fd, 1);
    if (pid < 0)
        return -1;
    size_t len = 0;
    double deadline = pdi_now_ms() + timeout_ms;
    for (;;) {
        int left = (int)(deadline - pdi_now_ms());
        if (left <= 0)
            break;
        struct pollfd pfd = {fd, POLLIN, 0};
        int pr = poll(&pfd, 1, left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        char buf[4096];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out && outlen > 1) {
            size_t take = (size_t)r < outlen - 1 - len ? (size_t)r : outlen - 1 - len;
            memcpy(out + len, buf, take);
            len += take;
        }
    }
    if (out && outlen > 0)
        out[len] = '\0';
    close(fd);
    int st = 0;
    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            break;
        if (pdi_now_ms() >= deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        pdi_sleep_ms(5);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ---- clients --------------------------------------------------------------- */

pdc_conn *pdi_connect(const pdi_daemon *d)
{
    char err[256];
    pdc_conn *c = pdc_connect(d->addr, PDI_CALL_TIMEOUT_MS, err, sizeof err);
    if (!c)
        fprintf(stderr, "harness: connect %s: %s\n", d->addr, err);
    return c;
}

void pdi_assert_daemon_serves(const pdi_daemon *d)
{
    pdi_scenario sc[2];
    assert_int_equal(pdi_load_scenarios(sc, 2), 2);
    pdc_conn *c = pdi_connect(d);
    assert_non_null(c);
    int ping = pdc_ping(c, NULL);
    if (ping != PDC_OK)
        fprintf(stderr, "control ping: %s (%s)\n", pdc_status_name(ping), pdc_last_error(c));
    assert_int_equal(ping, PDC_OK);
    /* The file's last scenario is its longest: a real search, not a trivial one. */
    pdc_path_req req = {0};
    req.scene = "den520d";
    req.start = pdc_cell(sc[1].sx, sc[1].sy);
    req.goal = pdc_cell(sc[1].gx, sc[1].gy);
    pdc_path_result r = {0};
    int st = pdc_find_path(c, &req, &r);
    if (st != PDC_OK)
        fprintf(stderr, "control path: %s (%s)\n", pdc_status_name(st), pdc_last_error(c));
    assert_int_equal(st, PDC_OK);
    assert_true(fabs(r.cost - sc[1].optimal) <= sc[1].tolerance);
    pdc_path_result_free(&r);
    pdc_close(c);
}

/* ---- Moving AI data ------------------------------------------------------------ */

/* Half a unit in the last printed digit. The Dragon Age files print six
 * significant digits with trailing zeros dropped ("2" means 2.00000), so the
 * sixth significant digit bounds the rounding too; the smaller bound is the
 * true one. */
static double pdi__tolerance(const char *printed, double value)
{
    const char *dot = strchr(printed, '.');
    int decimals = 0;
    if (dot)
        for (const char *p = dot + 1; *p >= '0' && *p <= '9'; p++)
            decimals++;
    double last_digit = 0.5 * pow(10.0, -decimals);
    double sixth_significant = value > 0 ? 0.5 * pow(10.0, floor(log10(value)) - 5.0) : last_digit;
    return (last_digit < sixth_significant ? last_digit : sixth_significant) + 1e-9;
}

size_t pdi_load_scenarios(pdi_scenario *out, size_t max)
{
    char path[PDI_PATH_MAX];
    snprintf(path, sizeof path, "%s/scen/den520d.map.scen", pdi_movingai_dir());
    size_t len = 0;
    char *text = pdi__read_file(path, PDI__LOG_READ_MAX, &len);
    if (!text) {
        fprintf(stderr, "harness: cannot read %s (the Moving AI subset in tests/data/movingai)\n", path);
        return 0;
    }
    /* Collect the problem lines (everything after "version 1"). */
    size_t n_lines = 0, cap = 1024;
    char **lines = malloc(cap * sizeof *lines);
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); lines && line;
         line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "version", 7) == 0 || line[0] == '\0')
            continue;
        if (n_lines == cap) {
            char **grown = realloc(lines, 2 * cap * sizeof *lines);
            if (!grown)
                break;
            lines = grown;
            cap *= 2;
        }
        lines[n_lines++] = line;
    }
    size_t got = 0;
    for (size_t i = 0; lines && i < max && n_lines > 0; i++) {
        size_t idx = max == 1 ? 0 : i * (n_lines - 1) / (max - 1);
        int bucket, w, h, sx, sy, gx, gy;
        char map[256], printed[64];
        if (sscanf(lines[idx], "%d %255s %d %d %d %d %d %d %63s", &bucket, map, &w, &h, &sx, &sy, &gx,
                   &gy, printed) != 9)
            continue;
        out[got].sx = sx;
        out[got].sy = sy;
        out[got].gx = gx;
        out[got].gy = gy;
        out[got].optimal = strtod(printed, NULL);
        out[got].tolerance = pdi__tolerance(printed, out[got].optimal);
        got++;
    }
    free(lines);
    free(text);
    return got;
}

int pdi_grid_load_den520d(pdi_grid *g)
{
    memset(g, 0, sizeof *g);
    char path[PDI_PATH_MAX];
    snprintf(path, sizeof path, "%s/maps/den520d.map", pdi_movingai_dir());
    char *text = pdi__read_file(path, PDI__LOG_READ_MAX, NULL);
    if (!text)
        return -1;
    const char *p = strstr(text, "height ");
    const char *q = strstr(text, "width ");
    const char *m = strstr(text, "\nmap");
    if (!p || !q || !m || sscanf(p, "height %d", &g->height) != 1 || sscanf(q, "width %d", &g->width) != 1 ||
        g->width <= 0 || g->height <= 0) {
        free(text);
        return -1;
    }
    g->cost = calloc((size_t)g->width * (size_t)g->height, 1);
    const char *row = strchr(m + 1, '\n');
    for (int32_t y = 0; g->cost && row && y < g->height; y++) {
        row++;
        for (int32_t x = 0; x < g->width && row[x] && row[x] != '\n' && row[x] != '\r'; x++)
            g->cost[(size_t)y * (size_t)g->width + (size_t)x] = row[x] == '.' || row[x] == 'G';
        row = strchr(row, '\n');
    }
    free(text);
    return g->cost ? 0 : -1;
}

int pdi_grid_load_rooms(pdi_grid *g)
{
    return pdi_grid_load_ascii(g, PD_TEST_DATA_DIR "/integ_rooms.txt");
}

int pdi_grid_load_ascii(pdi_grid *g, const char *path)
{
    memset(g, 0, sizeof *g);
    char *text = pdi__read_file(path, PDI__LOG_READ_MAX, NULL);
    if (!text)
        return -1;
    /* Two passes over the non-comment rows: measure, then fill. */
    for (int pass = 0; pass < 2; pass++) {
        int32_t y = 0;
        for (const char *line = text; *line;) {
            const char *eol = strchr(line, '\n');
            size_t len = eol ? (size_t)(eol - line) : strlen(line);
            if (len > 0 && line[len - 1] == '\r')
                len--;
            if (len > 0 && line[0] != ';') {
                if (pass == 0) {
                    g->width = (int32_t)len;
                } else {
                    for (size_t x = 0; x < len && (int32_t)x < g->width; x++) {
                        char ch = line[x];
                        g->cost[(size_t)y * (size_t)g->width + x] =
                            ch == '.' ? 1 : (ch >= '1' && ch <= '9') ? (uint8_t)(ch - '0') : 0;
                    }
                }
                y++;
            }
            line = eol ? eol + 1 : line + len;
        }
        if (pass == 0) {
            g->height = y;
            g->cost = calloc((size_t)g->width * (size_t)g->height, 1);
            if (!g->cost || g->width == 0) {
                free(text);
                return -1;
            }
        }
    }
    free(text);
    return 0;
}

void pdi_grid_free(pdi_grid *g)
{
    free(g->cost);
    g->cost = NULL;
}

int pdi_grid_open(const pdi_grid *g, int32_t x, int32_t y)
{
    return x >= 0 && y >= 0 && x < g->width && y < g->height && g->cost[(size_t)y * (size_t)g->width + (size_t)x];
}

static double pdi__cell_cost(const pdi_grid *g, int32_t x, int32_t y)
{
    return g->cost[(size_t)y * (size_t)g->width + (size_t)x];
}

/* The cost of one move, or -1 if it is not a legal move. */
static double pdi__step_cost(const pdi_grid *g, int32_t x0, int32_t y0, int32_t x1, int32_t y1)
{
    int32_t dx = x1 - x0, dy = y1 - y0;
    if ((dx == 0 && dy == 0) || dx < -1 || dx > 1 || dy < -1 || dy > 1 || !pdi_grid_open(g, x1, y1))
        return -1;
    if (dx != 0 && dy != 0) {
        if (!pdi_grid_open(g, x0 + dx, y0) || !pdi_grid_open(g, x0, y0 + dy))
            return -1;
        return sqrt(2.0) * pdi__cell_cost(g, x1, y1);
    }
    return pdi__cell_cost(g, x1, y1);
}

int pdi_grid_path_cost(const pdi_grid *g, const pdc_waypoint *wp, size_t n, double *cost, char *why,
                       size_t whylen)
{
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pdi_grid_open(g, wp[i].x, wp[i].y)) {
            snprintf(why, whylen, "waypoint %zu (%d,%d) is blocked or outside", i, wp[i].x, wp[i].y);
            return -1;
        }
        if (i == 0)
            continue;
        double step = pdi__step_cost(g, wp[i - 1].x, wp[i - 1].y, wp[i].x, wp[i].y);
        if (step < 0) {
            snprintf(why, whylen, "step %zu (%d,%d)->(%d,%d) is not a legal move", i, wp[i - 1].x,
                     wp[i - 1].y, wp[i].x, wp[i].y);
            return -1;
        }
        total += step;
    }
    *cost = total;
    return 0;
}

double pdi_grid_dijkstra(const pdi_grid *g, int32_t sx, int32_t sy, int32_t gx, int32_t gy)
{
    size_t n = (size_t)g->width * (size_t)g->height;
    double *dist = malloc(n * sizeof *dist);
    uint8_t *done = calloc(n, 1);
    double result = -1;
    if (!dist || !done || !pdi_grid_open(g, sx, sy) || !pdi_grid_open(g, gx, gy))
        goto out;
    for (size_t i = 0; i < n; i++)
        dist[i] = INFINITY;
    dist[(size_t)sy * (size_t)g->width + (size_t)sx] = 0;
    for (;;) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!done[i] && dist[i] < INFINITY && (best == n || dist[i] < dist[best]))
                best = i;
        if (best == n)
            break;
        done[best] = 1;
        int32_t x = (int32_t)(best % (size_t)g->width), y = (int32_t)(best / (size_t)g->width);
        if (x == gx && y == gy) {
            result = dist[best];
            break;
        }
        for (int32_t dy = -1; dy <= 1; dy++)
            for (int32_t dx = -1; dx <= 1; dx++) {
                double step = pdi__step_cost(g, x, y, x + dx, y + dy);
                if (step < 0)
                    continue;
                size_t j = (size_t)(y + dy) * (size_t)g->width + (size_t)(x + dx);
                if (dist[best] + step < dist[j])
                    dist[j] = dist[best] + step;
            }
    }
out:
    free(dist);
    free(done);
    return result;
}

/* ---- raw sockets ----------------------------------------------------------- */

/* The sockets themselves are pd_testsock's (tests/support), shared with
 * the unit tests; these wrap them in the harness's -1/NULL conventions. */
int pdi_raw_connect(uint16_t port)
{
    return pd_ts_connect(port, 0, 0);
}

int pdi_raw_connect_small_window(uint16_t port)
{
    return pd_ts_connect(port, 4096, 0);
}

int pdi_raw_send(int fd, const void *buf, size_t len)
{
    return pd_ts_send_all(fd, buf, len, PDI_CALL_TIMEOUT_MS);
}

int pdi_raw_send_request(int fd, const Pathd__V1__Request *req)
{
    return pd_ts_send_msg(fd, &req->base, PDI_CALL_TIMEOUT_MS);
}

Pathd__V1__Response *pdi_raw_recv(int fd, int timeout_ms, int *eof)
{
    size_t len;
    pd_ts_frame_status st;
    uint8_t *payload = pd_ts_recv_frame(fd, PDI__MAX_RESPONSE, timeout_ms, &len, &st);
    if (eof)
        *eof = st == PD_TS_FRAME_CLOSED || st == PD_TS_FRAME_TRUNCATED;
    if (!payload)
        return NULL;
    Pathd__V1__Response *resp = pathd__v1__response__unpack(NULL, len, payload);
    free(payload);
    return resp;
}

Pathd__V1__Response *pdi_raw_recv_final(int fd, uint64_t id, int timeout_ms)
{
    double deadline = pdi_now_ms() + timeout_ms;
    for (;;) {
        int left = (int)(deadline - pdi_now_ms());
        if (left <= 0)
            return NULL;
        Pathd__V1__Response *r = pdi_raw_recv(fd, left, NULL);
        if (!r)
            return NULL;
        if (r->id == id && r->final)
            return r;
        pathd__v1__response__free_unpacked(r, NULL);
    }
}

int pdi_raw_wait_closed(int fd, int timeout_ms)
{
    return pd_ts_wait_closed(fd, timeout_ms);
}

void pdi_fp_init(pdi_fp_msg *m, uint64_t id, const char *scene, int32_t sx, int32_t sy, int32_t gx,
                 int32_t gy)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__find_path__init(&m->fp);
    pathd__v1__point__init(&m->start);
    pathd__v1__point__init(&m->goal);
    pathd__v1__cell__init(&m->start_cell);
    pathd__v1__cell__init(&m->goal_cell);
    m->start_cell.x = sx;
    m->start_cell.y = sy;
    m->goal_cell.x = gx;
    m->goal_cell.y = gy;
    m->start.kind_case = PATHD__V1__POINT__KIND_CELL;
    m->start.cell = &m->start_cell;
    m->goal.kind_case = PATHD__V1__POINT__KIND_CELL;
    m->goal.cell = &m->goal_cell;
    m->fp.scene = (char *)scene;
    m->fp.start = &m->start;
    m->fp.goal = &m->goal;
    m->req.id = id;
    m->req.body_case = PATHD__V1__REQUEST__BODY_FIND_PATH;
    m->req.find_path = &m->fp;
}

void pdi_ping_init(pdi_small_msg *m, uint64_t id, uint64_t nonce)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__ping__init(&m->ping);
    m->ping.nonce = nonce;
    m->req.id = id;
    m->req.body_case = PATHD__V1__REQUEST__BODY_PING;
    m->req.ping = &m->ping;
}

Pathd__V1__ServingState pdi_raw_ping(int fd, uint64_t id, uint64_t nonce)
{
    pdi_small_msg ping;
    pdi_ping_init(&ping, id, nonce);
    assert_int_equal(pdi_raw_send_request(fd, &ping.req), 0);
    Pathd__V1__Response *r = pdi_raw_recv_final(fd, id, PDI_CALL_TIMEOUT_MS);
    assert_non_null(r);
    assert_int_equal(r->status, PATHD__V1__STATUS__OK);
    assert_int_equal(r->body_case, PATHD__V1__RESPONSE__BODY_PONG);
    assert_true(r->pong->nonce == nonce);
    Pathd__V1__ServingState serving = r->pong->serving;
    pathd__v1__response__free_unpacked(r, NULL);
    return serving;
}

void pdi_cancel_init(pdi_small_msg *m, uint64_t id, uint64_t target_id)
{
    pathd__v1__request__init(&m->req);
    pathd__v1__cancel__init(&m->cancel);
    m->cancel.target_id = target_id;
    m->req.id = id;
    m->req.body_case = PATHD__V1__REQUEST__BODY_CANCEL;
    m->req.cancel = &m->cancel;
}

void pdi_raw_collect(int fd, const uint64_t *ids, Pathd__V1__Response **out, size_t n)
{
    memset(out, 0, n * sizeof *out);
    for (size_t got = 0; got < n;) {
        Pathd__V1__Response *r = pdi_raw_recv(fd, PDI_CALL_TIMEOUT_MS, NULL);
        if (!r) {
            pdi_raw_free_all(out, n);
            fail_msg("no answer within %d ms (have %zu of %zu)", PDI_CALL_TIMEOUT_MS, got, n);
        }
        size_t i = 0;
        while (i < n && !(ids[i] == r->id && r->final))
            i++;
        if (i == n || out[i]) {
            int repeated = i < n;
            pathd__v1__response__free_unpacked(r, NULL);
            if (repeated) {
                pdi_raw_free_all(out, n);
                fail_msg("a second final answer for id %llu", (unsigned long long)ids[i]);
            }
            continue;
        }
        out[i] = r;
        got++;
    }
}

void pdi_raw_free_all(Pathd__V1__Response **r, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (r[i])
            pathd__v1__response__free_unpacked(r[i], NULL);
        r[i] = NULL;
    }
}

void pdi_send_serpent(int fd, uint64_t id, uint32_t deadline_ms)
{
    int32_t gx, gy;
    pdi_serpent_goal(&gx, &gy);
    pdi_fp_msg m;
    pdi_fp_init(&m, id, "serpent", 0, 0, gx, gy);
    m.fp.style = PATHD__V1__WAYPOINT_STYLE__STYLE_CORNERS;
    m.fp.deadline_ms = deadline_ms;
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
}

void pdi_send_cancel(int fd, uint64_t id, uint64_t target)
{
    pdi_small_msg m;
    pdi_cancel_init(&m, id, target);
    assert_int_equal(pdi_raw_send_request(fd, &m.req), 0);
}

void pdi_warm_up(int fd)
{
    pdi_send_serpent(fd, 1, 0);
    pdi_send_serpent(fd, 2, 0);
    const uint64_t ids[] = {1, 2};
    Pathd__V1__Response *r[2];
    pdi_raw_collect(fd, ids, r, 2);
    int ok = r[0]->status == PATHD__V1__STATUS__OK && r[1]->status == PATHD__V1__STATUS__OK;
    pdi_raw_free_all(r, 2);
    assert_true(ok);
}

/* ---- issue 4: footprint oracles and helpers ---------------------------------- */

static int pdi__unit_fits(const pdi_grid *g, uint32_t unit, int32_t x, int32_t y)
{
    int32_t k = unit ? (int32_t)unit : 1;
    for (int32_t dy = 0; dy < k; dy++)
        for (int32_t dx = 0; dx < k; dx++)
            if (!pdi_grid_open(g, x + dx, y + dy))
                return 0;
    return 1;
}

int pdi_rules_open(const pdi_grid *g, const pdi_rules *r, int32_t x, int32_t y)
{
    if (!pdi__unit_fits(g, r->unit, x, y))
        return 0;
    for (size_t i = 0; i < r->avoid_count; i++)
        if (r->avoid[i].x == x && r->avoid[i].y == y)
            return 0;
    if (r->has_window && (x < r->window_min.x || x > r->window_max.x || y < r->window_min.y ||
                          y > r->window_max.y))
        return 0;
    return 1;
}

double pdi_unit_cost(const pdi_grid *g, uint32_t unit, int32_t x, int32_t y)
{
    int32_t k = unit ? (int32_t)unit : 1;
    double most = 0;
    for (int32_t dy = 0; dy < k; dy++)
        for (int32_t dx = 0; dx < k; dx++)
            if (pdi_grid_open(g, x + dx, y + dy) && pdi__cell_cost(g, x + dx, y + dy) > most)
                most = pdi__cell_cost(g, x + dx, y + dy);
    return most;
}

double pdi_rules_step(const pdi_grid *g, const pdi_rules *r, int32_t x0, int32_t y0, int32_t x1,
                      int32_t y1)
{
    int32_t dx = x1 - x0, dy = y1 - y0;
    if ((dx == 0 && dy == 0) || dx < -1 || dx > 1 || dy < -1 || dy > 1 || !pdi_rules_open(g, r, x0, y0) ||
        !pdi_rules_open(g, r, x1, y1))
        return -1;
    double enter = pdi_unit_cost(g, r->unit, x1, y1);
    if (dx != 0 && dy != 0) {
        if (r->connect4 || !pdi_rules_open(g, r, x0 + dx, y0) || !pdi_rules_open(g, r, x0, y0 + dy))
            return -1;
        return sqrt(2.0) * enter;
    }
    return enter;
}

int pdi_rules_path_cost(const pdi_grid *g, const pdi_rules *r, const pdc_waypoint *wp, size_t n,
                        double *cost, char *why, size_t whylen)
{
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pdi_rules_open(g, r, wp[i].x, wp[i].y)) {
            snprintf(why, whylen, "waypoint %zu (%d,%d) is not an open anchor for unit %u", i, wp[i].x,
                     wp[i].y, r->unit ? r->unit : 1);
            return -1;
        }
        if (i == 0)
            continue;
        double step = pdi_rules_step(g, r, wp[i - 1].x, wp[i - 1].y, wp[i].x, wp[i].y);
        if (step < 0) {
            snprintf(why, whylen, "step %zu (%d,%d)->(%d,%d) is not a legal move for unit %u", i,
                     wp[i - 1].x, wp[i - 1].y, wp[i].x, wp[i].y, r->unit ? r->unit : 1);
            return -1;
        }
        total += step;
    }
    *cost = total;
    return 0;
}

int pdi_rules_dijkstra_all(const pdi_grid *g, const pdi_rules *r, int32_t sx, int32_t sy, double *dist)
{
    size_t n = (size_t)g->width * (size_t)g->height;
    if (n > PDI_ORACLE_MAX_CELLS)
        return -1;
    uint8_t done[PDI_ORACLE_MAX_CELLS];
    memset(done, 0, n);
    for (size_t i = 0; i < n; i++)
        dist[i] = INFINITY;
    if (!pdi_rules_open(g, r, sx, sy))
        return 0;
    dist[(size_t)sy * (size_t)g->width + (size_t)sx] = 0;
    for (;;) {
        size_t best = n;
        for (size_t i = 0; i < n; i++)
            if (!done[i] && dist[i] < INFINITY && (best == n || dist[i] < dist[best]))
                best = i;
        if (best == n)
            break;
        done[best] = 1;
        int32_t x = (int32_t)(best % (size_t)g->width), y = (int32_t)(best / (size_t)g->width);
        for (int32_t dy = -1; dy <= 1; dy++)
            for (int32_t dx = -1; dx <= 1; dx++) {
                double step = pdi_rules_step(g, r, x, y, x + dx, y + dy);
                if (step < 0)
                    continue;
                size_t j = (size_t)(y + dy) * (size_t)g->width + (size_t)(x + dx);
                if (dist[best] + step < dist[j])
                    dist[j] = dist[best] + step;
            }
    }
    return 0;
}

double pdi_rules_dijkstra(const pdi_grid *g, const pdi_rules *r, int32_t sx, int32_t sy, int32_t gx,
                          int32_t gy)
{
    static _Thread_local double dist[PDI_ORACLE_MAX_CELLS];
    if (pdi_rules_dijkstra_all(g, r, sx, sy, dist) != 0 || !pdi_grid_open(g, gx, gy))
        return -1;
    double d = dist[(size_t)gy * (size_t)g->width + (size_t)gx];
    return d < INFINITY ? d : -1;
}

static void pdi__cover_add(pdc_xy *out, size_t cap, size_t *n, int32_t x, int32_t y)
{
    if (*n < cap)
        out[*n] = (pdc_xy){x, y};
    (*n)++;
}

size_t pdi_supercover(pdc_xy a, pdc_xy b, pdc_xy *out, size_t cap)
{
    int64_t nx = llabs((long long)b.x - a.x), ny = llabs((long long)b.y - a.y);
    int32_t sx = b.x > a.x ? 1 : -1, sy = b.y > a.y ? 1 : -1;
    int32_t x = a.x, y = a.y;
    size_t n = 0;
    pdi__cover_add(out, cap, &n, x, y);
    for (int64_t ix = 0, iy = 0; ix < nx || iy < ny;) {
        /* Which grid line the segment from the centre crosses next: the
         * vertical one at (ix + 1/2) / nx of the way, or the horizontal one
         * at (iy + 1/2) / ny; equal means it passes through their corner. */
        int64_t decision = (1 + 2 * ix) * ny - (1 + 2 * iy) * nx;
        if (decision == 0) {
            if (sy < 0) {
                pdi__cover_add(out, cap, &n, x, y + sy);
                pdi__cover_add(out, cap, &n, x + sx, y);
            } else {
                pdi__cover_add(out, cap, &n, x + sx, y);
                pdi__cover_add(out, cap, &n, x, y + sy);
            }
            x += sx;
            y += sy;
            ix++;
            iy++;
        } else if (decision < 0) {
            x += sx;
            ix++;
        } else {
            y += sy;
            iy++;
        }
        pdi__cover_add(out, cap, &n, x, y);
    }
    return n;
}

int pdi_segment_clear(const pdi_grid *g, const pdi_rules *r, pdc_xy a, pdc_xy b)
{
    size_t cap = (size_t)(llabs((long long)b.x - a.x) + llabs((long long)b.y - a.y)) * 2 + 2;
    pdc_xy *cells = malloc(cap * sizeof *cells);
    if (!cells)
        return 0;
    size_t n = pdi_supercover(a, b, cells, cap);
    int clear = n <= cap;
    for (size_t i = 0; clear && i < n; i++)
        clear = pdi_rules_open(g, r, cells[i].x, cells[i].y);
    free(cells);
    return clear;
}

double pdi_polyline_length(const pdc_waypoint *wp, size_t n)
{
    double len = 0;
    for (size_t i = 1; i < n; i++)
        len += hypot((double)wp[i].x - wp[i - 1].x, (double)wp[i].y - wp[i - 1].y);
    return len;
}

int pdi_write_temp_map(const char *text, char *path, size_t cap)
{
    if (cap < sizeof "/tmp/pathd-e2e4-XXXXXX")
        return -1;
    snprintf(path, cap, "/tmp/pathd-e2e4-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t len = strlen(text);
    int rc = pdi__write_all(fd, text, len);
    if (close(fd) != 0 || rc != 0) {
        unlink(path);
        return -1;
    }
    return 0;
}

/* ---- scene state across restarts ------------------------------------------ */

void pdi_daemon_init(pdi_daemon *d)
{
    memset(d, 0, sizeof *d);
    d->stderr_fd = d->log_fd = -1;
}

void pdi_daemon_kill9(pdi_daemon *d)
{
    assert_int_equal(pdi_daemon_signal(d, SIGKILL), 0);
    assert_int_equal(pdi_daemon_wait_exit(d, 10000), 0);
    pdi_daemon_cleanup(d);
}

int pdi_update_rect(pdc_conn *c, const char *scene, pdc_update_op op, uint32_t cost, int32_t x0, int32_t y0,
                    int32_t x1, int32_t y1, uint64_t *version)
{
    pdc_update_req u = { .scene = scene, .is_rect = 1, .rect_min = { x0, y0 }, .rect_max = { x1, y1 }, .op = op,
                         .cost = cost };
    pdc_update_result r;
    int st = pdc_update_cells(c, &u, &r);
    if (st == PDC_OK)
        *version = r.version;
    return st;
}

void pdi_world_free(pdi_world *w)
{
    for (size_t i = 0; i < w->n; i++) {
        free(w->names[i]);
        pdc_grid_free(&w->grids[i]);
        pdc_grid_free(&w->unit2[i]);
    }
    memset(w, 0, sizeof *w);
}

void pdi_world_read(pdc_conn *c, pdi_world *w)
{
    memset(w, 0, sizeof *w);
    pdc_scene_list list;
    assert_int_equal(pdc_list_scenes(c, &list), PDC_OK);
    for (size_t i = 0; i < list.count; i++) {
        const char *name = list.scenes[i].name;
        if (strcmp(name, "den520d") == 0 || strcmp(name, "serpent") == 0)
            continue;
        assert_true(w->n < 16);
        size_t k = w->n++;
        w->names[k] = strdup(name);
        pdc_scene_details info;
        assert_int_equal(pdc_scene_info(c, name, &info), PDC_OK);
        w->versions[k] = info.version;
        int serves2 = 0;
        for (size_t u = 0; u < info.unit_size_count; u++)
            serves2 |= info.unit_sizes[u] == 2;
        pdc_scene_details_free(&info);
        assert_int_equal(pdc_scene_grid(c, name, 1, &w->grids[k]), PDC_OK);
        assert_int_equal(w->grids[k].version, w->versions[k]);
        if (serves2)
            assert_int_equal(pdc_scene_grid(c, name, 2, &w->unit2[k]), PDC_OK);
    }
    pdc_scene_list_free(&list);
}

void pdi_world_assert_equal(const pdi_world *a, const pdi_world *b)
{
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        assert_string_equal(a->names[i], b->names[i]);
        if (a->versions[i] != b->versions[i])
            fail_msg("scene '%s': version %llu before, %llu after the restart", a->names[i],
                     (unsigned long long)a->versions[i], (unsigned long long)b->versions[i]);
        assert_int_equal(a->grids[i].width, b->grids[i].width);
        assert_int_equal(a->grids[i].height, b->grids[i].height);
        assert_memory_equal(a->grids[i].cells, b->grids[i].cells,
                            (size_t)a->grids[i].width * (size_t)a->grids[i].height);
        assert_int_equal(a->unit2[i].width, b->unit2[i].width);
        if (a->unit2[i].cells)
            assert_memory_equal(a->unit2[i].cells, b->unit2[i].cells,
                                (size_t)a->unit2[i].width * (size_t)a->unit2[i].height);
    }
}

int pdi_world_has(const pdi_world *w, const char *name)
{
    for (size_t i = 0; i < w->n; i++)
        if (strcmp(w->names[i], name) == 0)
            return 1;
    return 0;
}

int pdi_cmp_u64(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}
