/*
 * redis_server.h - a redis-server of the test's own for the Redis change
 * log's tests (test_redis_log.c, test_e2e_redis_log.c): started on a free
 * loopback port over a temporary directory, durable before each answer
 * (appendonly, appendfsync always, as deploy/ will run it), bounded in
 * time (its first PING within REDIS_SRV_START_MS), stopped by the test.
 * Include after cmocka.h and hiredis.h.
 *
 * redis-server is in the test package set (scripts/install-deps.sh test):
 * without it the test fails, naming the package; it never skips.
 */
#ifndef REDIS_SERVER_H
#define REDIS_SERVER_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long redis-server may take to answer its first PING. */
#define REDIS_SRV_START_MS 10000

typedef struct redis_srv {
    pid_t pid;                    /* 0: not running */
    int port;                     /* 0 until the first start picks one */
    char dir[64];                 /* its data and redis.log; "" until the first start */
} redis_srv;

/* A loopback port nothing listens on now (the kernel's pick). */
static inline int redis_srv_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/* 1 when redis-server is on PATH. */
static inline int redis_srv_installed(void)
{
    const char *path = getenv("PATH");
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path ? path : "/usr/bin:/bin");
    for (char *save = NULL, *d = strtok_r(buf, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/redis-server", d);
        if (access(p, X_OK) == 0)
            return 1;
    }
    return 0;
}

/* A connection of the test's own (1 s timeouts), or NULL. */
static inline redisContext *redis_srv_connect(const redis_srv *s)
{
    struct timeval tv = { 1, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", s->port, tv);
    if (c && !c->err && redisSetTimeout(c, tv) == REDIS_OK)
        return c;
    if (c)
        redisFree(c);
    return NULL;
}

/* Starts redis-server (the first time on a new port and directory, later
 * on the same ones, so it reloads its AOF) and waits for its PING. */
static inline void redis_srv_start(redis_srv *s)
{
    if (!redis_srv_installed())
        fail_msg("redis-server is not installed: the Redis log's tests need it (Debian package redis-server, "
                 "in scripts/install-deps.sh's test set: `make test` installs it)");
    if (!s->dir[0]) {
        snprintf(s->dir, sizeof s->dir, "/tmp/pd-redis-XXXXXX");
        assert_non_null(mkdtemp(s->dir));
        s->port = redis_srv_free_port();
    }
    char port[16];
    snprintf(port, sizeof port, "%d", s->port);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* Dies with the test (a crash, an abort) rather than live on
         * holding the port and the test runner's output pipe. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int devnull = open("/dev/null", O_RDWR);
        if (devnull >= 0) {
            dup2(devnull, STDIN_FILENO);
            dup2(devnull, STDOUT_FILENO);
            dup2(devnull, STDERR_FILENO);
        }
        execlp("redis-server", "redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", s->dir, "--save", "",
               "--appendonly", "yes", "--appendfsync", "always", "--daemonize", "no", "--loglevel", "warning",
               "--logfile", "redis.log", (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    for (int waited = 0; waited < REDIS_SRV_START_MS; waited += 20) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            s->pid = 0;
            fail_msg("redis-server exited (status %d) before answering; see %s/redis.log", status, s->dir);
        }
        redisContext *c = redis_srv_connect(s);
        if (c) {
            redisReply *r = redisCommand(c, "PING");
            int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "PONG") == 0;
            if (r)
                freeReplyObject(r);
            redisFree(c);
            if (ok)
                return;
        }
        struct timespec ts = { 0, 20 * 1000 * 1000 };
        nanosleep(&ts, NULL);
    }
    fail_msg("redis-server on port %d did not answer PING within %d ms", s->port, REDIS_SRV_START_MS);
}

/* Stops it with sig (SIGKILL: a crash) and waits for the exit. */
static inline void redis_srv_stop(redis_srv *s, int sig)
{
    if (s->pid > 0) {
        kill(s->pid, sig);
        waitpid(s->pid, NULL, 0);
        s->pid = 0;
    }
}

/* A new directory of the test's own under /tmp (pathd's data_dir beside
 * the Redis log), named after tag; out holds at least 64 bytes. */
static inline void redis_srv_temp_dir(char *out, size_t len, const char *tag)
{
    snprintf(out, len, "/tmp/pd_%.32s.XXXXXX", tag);
    if (!mkdtemp(out))
        fail_msg("mkdtemp %s failed", out);
}

/* Removes a directory and what it holds: 0, or -1. */
static inline int redis_srv_rm_dir(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* Stops it and removes its directory: 0, or -1. */
static inline int redis_srv_remove(redis_srv *s)
{
    redis_srv_stop(s, SIGTERM);
    if (!s->dir[0])
        return 0;
    int rc = redis_srv_rm_dir(s->dir);
    s->dir[0] = '\0';
    return rc;
}

#endif
