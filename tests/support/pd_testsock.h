/*
 * pd_testsock.h - the one loopback TCP client the tests share: connect to
 * 127.0.0.1, send everything, read exactly n bytes or one length-prefixed
 * frame, read to the close, wait for the close, all against a deadline.
 *
 * test_server.c (the binary protocol in-process), test_metrics.c (the HTTP
 * responder) and the end-to-end harness (the real daemon) each had their own
 * copy of these; the fake servers of test_client.c and test_render.c use
 * the same reads and writes on their side of the socket. The functions report failures as return values and never
 * assert, so the harness can turn them into its -1/NULL results and the unit
 * tests into cmocka failures with their own messages.
 *
 * Sends use MSG_DONTWAIT behind a poll (so a deadline bounds them) and
 * MSG_NOSIGNAL (a closed peer is EPIPE, not a signal).
 */
#ifndef PD_TESTSOCK_H
#define PD_TESTSOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <protobuf-c/protobuf-c.h>

/* Monotonic milliseconds, for deadlines. */
double pd_ts_now_ms(void);

/* A TCP connection to 127.0.0.1:port with TCP_NODELAY, or -1 (errno set).
 * rcvbuf > 0 sets the receive buffer before connecting, so the window the
 * server sees is that small from the start (and the kernel does not grow
 * it). timeout_ms > 0 also sets SO_RCVTIMEO and SO_SNDTIMEO, which bound
 * the caller's own blocking recv/send calls on the socket. */
int pd_ts_connect(uint16_t port, int rcvbuf, int timeout_ms);

/* 1 when a connection to 127.0.0.1:port is accepted (then closed at
 * once), 0 when it is refused. */
int pd_ts_can_connect(uint16_t port);

/* The socket's own port (the client's side), or -1. */
int pd_ts_local_port(int fd);

/* Waits until fd is ready for `events` or the deadline (pd_ts_now_ms
 * clock) passes: 1 ready, 0 timed out, -1 error. */
int pd_ts_wait(int fd, short events, double deadline_ms);

/* Sends all len bytes within timeout_ms. 0, or -1 (timeout: errno
 * ETIMEDOUT; otherwise send's errno). */
int pd_ts_send_all(int fd, const void *data, size_t len, int timeout_ms);

/* Frames a protobuf message (4-byte big-endian length, then the packed
 * message) into a malloc'd buffer of *len bytes; NULL when out of memory. */
uint8_t *pd_ts_frame(const ProtobufCMessage *msg, size_t *len);

/* Appends one framed message to a growing buffer (*data, *len), so a test
 * can send many frames in one write. 0, or -1 when out of memory (the
 * buffer is left as it was). */
int pd_ts_frame_append(uint8_t **data, size_t *len, const ProtobufCMessage *msg);

/* Frames and sends one message within timeout_ms: 0 or -1. */
int pd_ts_send_msg(int fd, const ProtobufCMessage *msg, int timeout_ms);

/* Reads exactly len bytes within timeout_ms. Returns len; the number of
 * bytes read before the peer closed or reset (0..len-1); or -1 on a
 * timeout (errno ETIMEDOUT) or another error. */
ssize_t pd_ts_recv_exact(int fd, void *buf, size_t len, int timeout_ms);

/* What pd_ts_recv_frame found. */
typedef enum pd_ts_frame_status {
    PD_TS_FRAME_OK = 0,       /* a whole frame */
    PD_TS_FRAME_CLOSED,       /* the peer closed (or reset) before its first byte */
    PD_TS_FRAME_TRUNCATED,    /* the peer closed in the middle of a frame */
    PD_TS_FRAME_TOO_LARGE,    /* the header announced more than max bytes */
    PD_TS_FRAME_TIMEOUT,      /* the deadline passed (or recv failed otherwise) */
    PD_TS_FRAME_NO_MEMORY,
} pd_ts_frame_status;

/* Reads one length-prefixed frame within timeout_ms: its payload, malloc'd
 * (at least 1 byte, so an empty payload is not NULL), with *len set; NULL
 * and *status saying why otherwise. */
uint8_t *pd_ts_recv_frame(int fd, size_t max, int timeout_ms, size_t *len, pd_ts_frame_status *status);

/* Reads until the peer closes, within timeout_ms and at most max bytes:
 * a malloc'd, NUL-terminated buffer with *len bytes, and *reset says
 * whether the close was a reset (ECONNRESET) rather than an orderly one.
 * NULL on a timeout, an error, more than max bytes or no memory. */
char *pd_ts_read_to_close(int fd, size_t max, int timeout_ms, size_t *len, int *reset);

/* Reads and discards until the peer closes (orderly or reset): 1 if it did
 * within timeout_ms, 0 otherwise. */
int pd_ts_wait_closed(int fd, int timeout_ms);

#endif
