/*
 * pd_testsock.c - the loopback TCP client the tests share (see
 * pd_testsock.h): connect, send all, read exactly, read a frame, read to
 * the close, each bounded by a deadline so a server that stops answering
 * fails a test instead of hanging it.
 */
#include "pd_testsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

double pd_ts_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static struct sockaddr_in pd_ts__loopback(uint16_t port)
{
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return sa;
}

int pd_ts_connect(uint16_t port, int rcvbuf, int timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf) != 0)
        goto fail;
    if (timeout_ms > 0) {
        struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
            goto fail;
    }
    struct sockaddr_in sa = pd_ts__loopback(port);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        goto fail;
    /* Small requests go out at once rather than waiting on Nagle. */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
fail:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

int pd_ts_can_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in sa = pd_ts__loopback(port);
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

int pd_ts_local_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
        return -1;
    return ntohs(sa.sin_port);
}

int pd_ts_wait(int fd, short events, double deadline_ms)
{
    for (;;) {
        double left = deadline_ms - pd_ts_now_ms();
        struct pollfd pfd = {fd, events, 0};
        int pr = poll(&pfd, 1, left > 0 ? (int)left + 1 : 0);
        if (pr < 0 && errno == EINTR)
            continue;
        return pr < 0 ? -1 : pr;
    }
}

int pd_ts_send_all(int fd, const void *data, size_t len, int timeout_ms)
{
    const uint8_t *p = data;
    double deadline = pd_ts_now_ms() + timeout_ms;
    while (len > 0) {
        int ready = pd_ts_wait(fd, POLLOUT, deadline);
        if (ready == 0)
            errno = ETIMEDOUT;
        if (ready <= 0)
            return -1;
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pd_ts_frame_append(uint8_t **data, size_t *len, const ProtobufCMessage *msg)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    uint8_t *grown = realloc(*data, *len + 4 + n);
    if (!grown)
        return -1;
    uint8_t *p = grown + *len;
    p[0] = (uint8_t)(n >> 24);
    p[1] = (uint8_t)(n >> 16);
    p[2] = (uint8_t)(n >> 8);
    p[3] = (uint8_t)n;
    protobuf_c_message_pack(msg, p + 4);
    *data = grown;
    *len += 4 + n;
    return 0;
}

uint8_t *pd_ts_frame(const ProtobufCMessage *msg, size_t *len)
{
    uint8_t *data = NULL;
    *len = 0;
    if (pd_ts_frame_append(&data, len, msg) != 0)
        return NULL;
    return data;
}

int pd_ts_send_msg(int fd, const ProtobufCMessage *msg, int timeout_ms)
{
    size_t len;
    uint8_t *buf = pd_ts_frame(msg, &len);
    if (!buf)
        return -1;
    int rc = pd_ts_send_all(fd, buf, len, timeout_ms);
    free(buf);
    return rc;
}

/* Reads exactly len bytes before the deadline (see pd_ts_recv_exact). */
static ssize_t pd_ts__recv_until(int fd, uint8_t *buf, size_t len, double deadline)
{
    size_t got = 0;
    while (got < len) {
        int ready = pd_ts_wait(fd, POLLIN, deadline);
        if (ready == 0)
            errno = ETIMEDOUT;
        if (ready <= 0)
            return -1;
        ssize_t n = recv(fd, buf + got, len - got, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return (ssize_t)got;
        if (n < 0)
            return -1;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

ssize_t pd_ts_recv_exact(int fd, void *buf, size_t len, int timeout_ms)
{
    return pd_ts__recv_until(fd, buf, len, pd_ts_now_ms() + timeout_ms);
}

uint8_t *pd_ts_recv_frame(int fd, size_t max, int timeout_ms, size_t *len, pd_ts_frame_status *status)
{
    double deadline = pd_ts_now_ms() + timeout_ms;
    uint8_t h[4];
    *len = 0;
    ssize_t n = pd_ts__recv_until(fd, h, 4, deadline);
    if (n != 4) {
        *status = n < 0 ? PD_TS_FRAME_TIMEOUT : n == 0 ? PD_TS_FRAME_CLOSED : PD_TS_FRAME_TRUNCATED;
        return NULL;
    }
    size_t want = ((size_t)h[0] << 24) | ((size_t)h[1] << 16) | ((size_t)h[2] << 8) | h[3];
    if (want > max) {
        *status = PD_TS_FRAME_TOO_LARGE;
        return NULL;
    }
    uint8_t *payload = malloc(want ? want : 1);
    if (!payload) {
        *status = PD_TS_FRAME_NO_MEMORY;
        return NULL;
    }
    n = pd_ts__recv_until(fd, payload, want, deadline);
    if (n < 0 || (size_t)n != want) {
        *status = n < 0 ? PD_TS_FRAME_TIMEOUT : PD_TS_FRAME_TRUNCATED;
        free(payload);
        return NULL;
    }
    *status = PD_TS_FRAME_OK;
    *len = want;
    return payload;
}

char *pd_ts_read_to_close(int fd, size_t max, int timeout_ms, size_t *len, int *reset)
{
    double deadline = pd_ts_now_ms() + timeout_ms;
    size_t cap = 4096, got = 0;
    char *buf = malloc(cap);
    *len = 0;
    *reset = 0;
    while (buf) {
        if (got + 1 == cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger)
                break;
            buf = bigger;
            cap *= 2;
        }
        if (pd_ts_wait(fd, POLLIN, deadline) <= 0)
            break;
        ssize_t n = recv(fd, buf + got, cap - 1 - got, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            *reset = n < 0;
            buf[got] = '\0';
            *len = got;
            return buf;
        }
        if (n < 0)
            break;
        got += (size_t)n;
        if (got > max)
            break;
    }
    free(buf);
    return NULL;
}

int pd_ts_wait_closed(int fd, int timeout_ms)
{
    double deadline = pd_ts_now_ms() + timeout_ms;
    uint8_t buf[4096];
    for (;;) {
        if (pd_ts_wait(fd, POLLIN, deadline) <= 0)
            return 0;
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno == ECONNRESET))
            return 1;
        if (n < 0 && errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
            return 0;
    }
}
