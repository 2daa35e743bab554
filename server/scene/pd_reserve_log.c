/*
 * pd_reserve_log.c - the reservation log (pd_reserve_log.h): the records
 * of a table's changes, their file in data_dir, and applying one to a
 * table by validation at replay.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "pd_fileio.h"
#include "pd_reserve_log.h"

static const char pd__magic[8] = { 'p', 'a', 't', 'h', 'd', 'R', '1', '\n' };

/* ---- encoding -------------------------------------------------------------- */

static int pd__room(pd_reserve_log_buf *b, size_t more)
{
    if (b->failed)
        return -1;
    if (b->cap - b->n >= more)
        return 0;
    size_t cap = b->cap ? b->cap : 256u;
    while (cap - b->n < more)
        cap *= 2u;
    unsigned char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = 1;
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

/* Little-endian: v's low `bytes` bytes at p. */
static void pd__le(unsigned char *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (unsigned char)(v >> (8u * i));
}

static uint64_t pd__from_le(const unsigned char *p, unsigned bytes)
{
    uint64_t v = 0;
    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8u * i);
    return v;
}

/* Appends v as `bytes` little-endian bytes; room was made. */
static void pd__put(pd_reserve_log_buf *b, uint64_t v, unsigned bytes)
{
    pd__le(b->p + b->n, v, bytes);
    b->n += bytes;
}

static uint32_t pd__crc(const unsigned char *len_le, const unsigned char *payload, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, len_le, 4);
    while (n > 0) {
        uInt piece = n > UINT_MAX ? UINT_MAX : (uInt)n;
        crc = crc32(crc, payload, piece);
        payload += piece;
        n -= piece;
    }
    return (uint32_t)crc;
}

/* The body's size for op (payload after kind and name). */
static size_t pd__body_size(const pd_reserve_op *op)
{
    switch (op->kind) {
    case PD_RESERVE_OP_REPLACE:
        return 8 + 4 + 8 + 4 + op->n * 24u;
    case PD_RESERVE_OP_RELEASE:
        return 8;
    case PD_RESERVE_OP_TOUCH:
    case PD_RESERVE_OP_SPEED:
    case PD_RESERVE_OP_RENEWED:
        return 16;
    case PD_RESERVE_OP_COLLECT:
    case PD_RESERVE_OP_EXPIRE:
        return 8;
    case PD_RESERVE_OP_BLOCK:
        return 16 + 8;
    case PD_RESERVE_OP_BLOCK_CELLS:
        return 8 + 4 + op->n_cells * 8u;
    case PD_RESERVE_OP_CLOCK:
        return 16;
    case PD_RESERVE_OP_RESTORE:
        return 8 + 8 + 8 + 1 + 4 + op->n * 28u;
    case PD_RESERVE_OP_RELEASE_ALL:
        return 0;
    }
    return SIZE_MAX;
}

int pd_reserve_log_encode(pd_reserve_log_buf *b, const char *scene, const pd_reserve_op *op)
{
    const size_t name_len = strlen(scene);
    const size_t body = op ? pd__body_size(op) : 0;
    if (name_len > 255 || body > PD_RESERVE_LOG_MAX_RECORD || (op && op->n > UINT32_MAX) ||
        (op && op->n_cells > UINT32_MAX)) {
        b->failed = 1;
        return -1;
    }
    const size_t payload = 2 + name_len + body;
    if (payload > PD_RESERVE_LOG_MAX_RECORD) {
        b->failed = 1;
        return -1;
    }
    if (pd__room(b, 8 + payload) != 0)
        return -1;
    const size_t start = b->n;
    b->n += 8; /* length and checksum, below */
    pd__put(b, op ? (uint64_t)op->kind : PD_RESERVE_LOG_RESET, 1);
    pd__put(b, name_len, 1);
    memcpy(b->p + b->n, scene, name_len);
    b->n += name_len;
    if (op) {
        uint64_t bits;
        switch (op->kind) {
        case PD_RESERVE_OP_REPLACE:
            pd__put(b, op->agent, 8);
            pd__put(b, op->unit, 4);
            pd__put(b, (uint64_t)op->at_ms, 8);
            pd__put(b, op->n, 4);
            for (size_t i = 0; i < op->n; i++) {
                pd__put(b, (uint32_t)op->wp[i].x, 4);
                pd__put(b, (uint32_t)op->wp[i].y, 4);
                pd__put(b, (uint64_t)op->wp[i].t_arrive_ms, 8);
                pd__put(b, (uint64_t)op->wp[i].t_leave_ms, 8);
            }
            break;
        case PD_RESERVE_OP_RELEASE:
            pd__put(b, op->agent, 8);
            break;
        case PD_RESERVE_OP_TOUCH:
        case PD_RESERVE_OP_RENEWED:
            pd__put(b, op->agent, 8);
            pd__put(b, (uint64_t)op->at_ms, 8);
            break;
        case PD_RESERVE_OP_SPEED:
            memcpy(&bits, &op->speed, sizeof bits);
            pd__put(b, op->agent, 8);
            pd__put(b, bits, 8);
            break;
        case PD_RESERVE_OP_COLLECT:
        case PD_RESERVE_OP_EXPIRE:
            pd__put(b, (uint64_t)op->at_ms, 8);
            break;
        case PD_RESERVE_OP_BLOCK:
            pd__put(b, (uint32_t)op->x0, 4);
            pd__put(b, (uint32_t)op->y0, 4);
            pd__put(b, (uint32_t)op->x1, 4);
            pd__put(b, (uint32_t)op->y1, 4);
            pd__put(b, (uint64_t)op->at_ms, 8);
            break;
        case PD_RESERVE_OP_BLOCK_CELLS:
            pd__put(b, (uint64_t)op->at_ms, 8);
            pd__put(b, op->n_cells, 4);
            for (size_t i = 0; i < op->n_cells; i++) {
                pd__put(b, (uint32_t)op->cells[i].x, 4);
                pd__put(b, (uint32_t)op->cells[i].y, 4);
            }
            break;
        case PD_RESERVE_OP_CLOCK:
            pd__put(b, (uint64_t)op->at_ms, 8);
            pd__put(b, (uint64_t)op->maintained_ms, 8);
            break;
        case PD_RESERVE_OP_RESTORE:
            memcpy(&bits, &op->speed, sizeof bits);
            pd__put(b, op->agent, 8);
            pd__put(b, (uint64_t)op->at_ms, 8);
            pd__put(b, bits, 8);
            pd__put(b, op->was_cut ? 1u : 0u, 1);
            pd__put(b, op->n, 4);
            for (size_t i = 0; i < op->n; i++) {
                const pd_reserve_raw *e = &op->raw[i];
                pd__put(b, (uint64_t)e->t0, 8);
                pd__put(b, (uint64_t)e->t1, 8);
                pd__put(b, (uint32_t)e->x, 4);
                pd__put(b, (uint32_t)e->y, 4);
                pd__put(b, (uint8_t)e->dx, 1);
                pd__put(b, (uint8_t)e->dy, 1);
                pd__put(b, e->unit, 1);
                pd__put(b, e->cut, 1);
            }
            break;
        case PD_RESERVE_OP_RELEASE_ALL:
            break;
        }
    }
    pd__le(b->p + start, payload, 4);
    pd__le(b->p + start + 4, pd__crc(b->p + start, b->p + start + 8, payload), 4);
    return 0;
}

void pd_reserve_log_buf_free(pd_reserve_log_buf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* pd_reserve_export's ops, encoded for the table being dumped. */
typedef struct pd__dump {
    pd_reserve_log_buf *b;
    const char *scene;
} pd__dump;

static void pd__dump_op(void *user, const pd_reserve_op *op)
{
    pd__dump *d = user;
    (void)pd_reserve_log_encode(d->b, d->scene, op);
}

int pd_reserve_log_dump(pd_reserve_log_buf *b, const char *scene, const pd_reserve *t)
{
    (void)pd_reserve_log_encode(b, scene, NULL);
    pd__dump d = { b, scene };
    (void)pd_reserve_export(t, pd__dump_op, &d);
    return b->failed ? -1 : 0;
}

/* ---- decoding -------------------------------------------------------------- */

/* Decodes one payload into op (kind 0: RESET); wp and cells are malloc'd
 * into *wp / *cells (the caller frees). 0, or -1 when it does not parse. */
static int pd__parse(const unsigned char *p, size_t n, char *scene, pd_reserve_op *op, pd_waypoint **wp,
                     pd_point **cells, pd_reserve_raw **raw)
{
    memset(op, 0, sizeof *op);
    if (n < 2 || (size_t)p[1] + 2u > n || p[1] == 0)
        return -1;
    const unsigned kind = p[0];
    const size_t name_len = p[1];
    memcpy(scene, p + 2, name_len);
    scene[name_len] = '\0';
    if (memchr(scene, '\0', name_len))
        return -1;
    p += 2 + name_len;
    n -= 2 + name_len;
    if (kind == PD_RESERVE_LOG_RESET)
        return n == 0 ? 0 : -1;
    if (kind > PD_RESERVE_OP_RELEASE_ALL)
        return -1;
    op->kind = (pd_reserve_op_kind)kind;
    /* The counted kinds: check the count against what is left. */
    if (kind == PD_RESERVE_OP_REPLACE) {
        if (n < 24)
            return -1;
        op->n = (size_t)pd__from_le(p + 20, 4);
        if (n != 24 + op->n * 24u)
            return -1;
    } else if (kind == PD_RESERVE_OP_RESTORE) {
        if (n < 29)
            return -1;
        op->n = (size_t)pd__from_le(p + 25, 4);
        if (n != 29 + op->n * 28u)
            return -1;
    } else if (kind == PD_RESERVE_OP_BLOCK_CELLS) {
        if (n < 12)
            return -1;
        op->n_cells = (size_t)pd__from_le(p + 8, 4);
        if (n != 12 + op->n_cells * 8u)
            return -1;
    } else if (n != pd__body_size(op)) {
        return -1;
    }
    uint64_t bits;
    switch (op->kind) {
    case PD_RESERVE_OP_REPLACE:
        op->agent = pd__from_le(p, 8);
        op->unit = (uint32_t)pd__from_le(p + 8, 4);
        op->at_ms = (int64_t)pd__from_le(p + 12, 8);
        if (!(*wp = malloc((op->n ? op->n : 1u) * sizeof **wp)))
            return -1;
        for (size_t i = 0; i < op->n; i++) {
            const unsigned char *q = p + 24 + i * 24u;
            (*wp)[i] = (pd_waypoint){ .x = (int32_t)(uint32_t)pd__from_le(q, 4),
                                      .y = (int32_t)(uint32_t)pd__from_le(q + 4, 4),
                                      .t_arrive_ms = (int64_t)pd__from_le(q + 8, 8),
                                      .t_leave_ms = (int64_t)pd__from_le(q + 16, 8) };
        }
        op->wp = *wp;
        break;
    case PD_RESERVE_OP_RELEASE:
        op->agent = pd__from_le(p, 8);
        break;
    case PD_RESERVE_OP_TOUCH:
    case PD_RESERVE_OP_RENEWED:
        op->agent = pd__from_le(p, 8);
        op->at_ms = (int64_t)pd__from_le(p + 8, 8);
        break;
    case PD_RESERVE_OP_SPEED:
        op->agent = pd__from_le(p, 8);
        bits = pd__from_le(p + 8, 8);
        memcpy(&op->speed, &bits, sizeof bits);
        break;
    case PD_RESERVE_OP_COLLECT:
    case PD_RESERVE_OP_EXPIRE:
        op->at_ms = (int64_t)pd__from_le(p, 8);
        break;
    case PD_RESERVE_OP_BLOCK:
        op->x0 = (int32_t)(uint32_t)pd__from_le(p, 4);
        op->y0 = (int32_t)(uint32_t)pd__from_le(p + 4, 4);
        op->x1 = (int32_t)(uint32_t)pd__from_le(p + 8, 4);
        op->y1 = (int32_t)(uint32_t)pd__from_le(p + 12, 4);
        op->at_ms = (int64_t)pd__from_le(p + 16, 8);
        break;
    case PD_RESERVE_OP_BLOCK_CELLS:
        op->at_ms = (int64_t)pd__from_le(p, 8);
        if (!(*cells = malloc((op->n_cells ? op->n_cells : 1u) * sizeof **cells)))
            return -1;
        for (size_t i = 0; i < op->n_cells; i++)
            (*cells)[i] = (pd_point){ (int32_t)(uint32_t)pd__from_le(p + 12 + i * 8u, 4),
                                      (int32_t)(uint32_t)pd__from_le(p + 16 + i * 8u, 4) };
        op->cells = *cells;
        break;
    case PD_RESERVE_OP_CLOCK:
        op->at_ms = (int64_t)pd__from_le(p, 8);
        op->maintained_ms = (int64_t)pd__from_le(p + 8, 8);
        break;
    case PD_RESERVE_OP_RESTORE:
        op->agent = pd__from_le(p, 8);
        op->at_ms = (int64_t)pd__from_le(p + 8, 8);
        bits = pd__from_le(p + 16, 8);
        memcpy(&op->speed, &bits, sizeof bits);
        op->was_cut = p[24];
        if (!(*raw = calloc(op->n ? op->n : 1u, sizeof **raw)))
            return -1;
        for (size_t i = 0; i < op->n; i++) {
            const unsigned char *q = p + 29 + i * 28u;
            (*raw)[i] = (pd_reserve_raw){ .t0 = (int64_t)pd__from_le(q, 8),
                                          .t1 = (int64_t)pd__from_le(q + 8, 8),
                                          .x = (int32_t)(uint32_t)pd__from_le(q + 16, 4),
                                          .y = (int32_t)(uint32_t)pd__from_le(q + 20, 4),
                                          .dx = (int8_t)q[24],
                                          .dy = (int8_t)q[25],
                                          .unit = q[26],
                                          .cut = q[27] };
        }
        op->raw = *raw;
        break;
    case PD_RESERVE_OP_RELEASE_ALL:
        break;
    }
    return 0;
}

size_t pd_reserve_log_decode(const unsigned char *p, size_t n, pd_reserve_log_fn fn, void *user)
{
    size_t at = 0;
    char scene[256];
    while (n - at >= 8) {
        const size_t len = (size_t)pd__from_le(p + at, 4);
        if (len > PD_RESERVE_LOG_MAX_RECORD || len > n - at - 8 ||
            pd__crc(p + at, p + at + 8, len) != (uint32_t)pd__from_le(p + at + 4, 4))
            break;
        pd_reserve_op op;
        pd_waypoint *wp = NULL;
        pd_point *cells = NULL;
        pd_reserve_raw *raw = NULL;
        const int ok = pd__parse(p + at + 8, len, scene, &op, &wp, &cells, &raw) == 0;
        if (ok)
            fn(user, scene, op.kind ? &op : NULL);
        free(wp);
        free(cells);
        free(raw);
        if (!ok)
            break;
        at += 8 + len;
    }
    return at;
}

pd_status pd_reserve_log_apply(pd_reserve *t, const pd_reserve_op *op)
{
    /* The limits bound changes being decided, not changes made: off for
     * this one, back for the next decision (a replica checks them before
     * it appends, with the table caught up). */
    const pd_reserve_limits none = { 0 }, kept = *pd_reserve_get_limits(t);
    pd_reserve_set_limits(t, &none);
    pd_status st = PD_OK;
    switch (op->kind) {
    case PD_RESERVE_OP_REPLACE:
        st = pd_reserve_replace(t, op->agent, op->unit, op->at_ms, op->wp, op->n, NULL);
        break;
    case PD_RESERVE_OP_RELEASE:
        (void)pd_reserve_release(t, op->agent);
        break;
    case PD_RESERVE_OP_RELEASE_ALL:
        (void)pd_reserve_release_all(t, NULL, 0);
        break;
    case PD_RESERVE_OP_TOUCH:
        (void)pd_reserve_touch(t, op->agent, op->at_ms);
        break;
    case PD_RESERVE_OP_COLLECT:
        (void)pd_reserve_collect(t, op->at_ms);
        break;
    case PD_RESERVE_OP_EXPIRE:
        (void)pd_reserve_expire(t, op->at_ms, NULL, 0);
        break;
    case PD_RESERVE_OP_BLOCK:
        (void)pd_reserve_block(t, op->x0, op->y0, op->x1, op->y1, op->at_ms, NULL, 0);
        break;
    case PD_RESERVE_OP_BLOCK_CELLS:
        (void)pd_reserve_block_cells(t, op->cells, op->n_cells, op->at_ms, NULL, 0);
        break;
    case PD_RESERVE_OP_SPEED:
        pd_reserve_note_speed(t, op->agent, op->speed);
        break;
    case PD_RESERVE_OP_RENEWED:
        pd_reserve_set_renewed(t, op->agent, op->at_ms);
        break;
    case PD_RESERVE_OP_CLOCK:
    case PD_RESERVE_OP_RESTORE:
        st = pd_reserve_restore(t, op, NULL);
        break;
    }
    pd_reserve_set_limits(t, &kept);
    return st;
}

/* ---- the file -------------------------------------------------------------- */

struct pd_reserve_log {
    pthread_mutex_t lock;
    int fd;
    int fsync_always;
    uint64_t size;           /* bytes in the file, all whole records */
    uint64_t written;        /* bytes written, for pd_reserve_log_sync_due */
    uint64_t synced;         /* ... of them fdatasynced */
    int failed;
    uint64_t base;           /* bytes of the last compaction's file (0: none yet) */
    char dir[PATH_MAX];
    char path[PATH_MAX];
    char why[PATH_MAX + 128];
};

/* Reads the whole file; NULL with *n 0 when it is empty. -1 on error. */
static int pd__slurp(int fd, unsigned char **out, size_t *n)
{
    struct stat st;
    *out = NULL;
    *n = 0;
    if (fstat(fd, &st) != 0)
        return -1;
    if (st.st_size == 0)
        return 0;
    unsigned char *p = malloc((size_t)st.st_size);
    if (!p)
        return -1;
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, p + got, (size_t)st.st_size - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    *out = p;
    *n = got;
    return 0;
}

pd_reserve_log *pd_reserve_log_open(const char *dir, int fsync_always, pd_reserve_log_fn fn, void *user,
                                    pd_reserve_log_stats *stats, char *err, size_t errlen)
{
    pd_reserve_log *l = calloc(1, sizeof *l);
    if (!l) {
        snprintf(err, errlen, "reservation log: out of memory");
        return NULL;
    }
    memset(stats, 0, sizeof *stats);
    l->fsync_always = fsync_always;
    snprintf(l->dir, sizeof l->dir, "%s", dir);
    snprintf(l->path, sizeof l->path, "%s/reservations.log", dir);
    l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (l->fd < 0) {
        snprintf(err, errlen, "reservation log %s: %s", l->path, strerror(errno));
        free(l);
        return NULL;
    }
    unsigned char *p = NULL;
    size_t n = 0;
    if (pd__slurp(l->fd, &p, &n) != 0) {
        snprintf(err, errlen, "reservation log %s: cannot read: %s", l->path, strerror(errno ? errno : ENOMEM));
        close(l->fd);
        free(l);
        return NULL;
    }
    if (n > 0 && (n < sizeof pd__magic || memcmp(p, pd__magic, sizeof pd__magic) != 0)) {
        snprintf(err, errlen, "reservation log %s: not a pathd reservation log (no \"pathdR1\" magic)", l->path);
        free(p);
        close(l->fd);
        free(l);
        return NULL;
    }
    size_t whole = sizeof pd__magic;
    if (n > 0) {
        whole += pd_reserve_log_decode(p + sizeof pd__magic, n - sizeof pd__magic, fn, user);
        stats->bytes = whole;
    }
    /* records: counted by the caller's fn; here the damage only. */
    if (n == 0 || whole < n) {
        stats->truncated_bytes = n > whole ? n - whole : 0;
        /* An empty file gets its magic; a torn or damaged tail goes. */
        if ((n == 0 && pd_write_all(l->fd, pd__magic, sizeof pd__magic, 0) != 0) ||
            ftruncate(l->fd, (off_t)whole) != 0 || fdatasync(l->fd) != 0) {
            snprintf(err, errlen, "reservation log %s: cannot repair: %s", l->path, strerror(errno));
            free(p);
            close(l->fd);
            free(l);
            return NULL;
        }
    }
    free(p);
    l->size = l->written = l->synced = whole;
    if (pthread_mutex_init(&l->lock, NULL) != 0) {
        snprintf(err, errlen, "reservation log: mutex");
        close(l->fd);
        free(l);
        return NULL;
    }
    return l;
}

int pd_reserve_log_write(pd_reserve_log *l, const unsigned char *p, size_t n, uint64_t *end)
{
    pthread_mutex_lock(&l->lock);
    if (l->failed) {
        pthread_mutex_unlock(&l->lock);
        return -1;
    }
    const uint64_t at = l->size;
    if (pd_write_all(l->fd, p, n, (int64_t)at) != 0) {
        snprintf(l->why, sizeof l->why, "write to %s failed: %s", l->path, strerror(errno));
        l->failed = 1;
        /* No half record stays for a later one to follow. */
        if (ftruncate(l->fd, (off_t)at) != 0)
            snprintf(l->why, sizeof l->why, "write to %s failed and could not be cut back", l->path);
        pthread_mutex_unlock(&l->lock);
        return -1;
    }
    l->size += n;
    l->written = l->size;
    if (end)
        *end = l->size;
    pthread_mutex_unlock(&l->lock);
    return 0;
}

int pd_reserve_log_settle(pd_reserve_log *l, uint64_t end)
{
    if (!l->fsync_always)
        return pd_reserve_log_failed(l, NULL, 0) ? -1 : 0;
    /* Writers that came meanwhile share one fdatasync: one that finds its
     * bytes synced by another's skips its own. */
    pthread_mutex_lock(&l->lock);
    const int done = l->synced >= end, failed = l->failed;
    pthread_mutex_unlock(&l->lock);
    if (failed)
        return -1;
    return done ? 0 : pd_reserve_log_sync(l);
}

int pd_reserve_log_sync(pd_reserve_log *l)
{
    pthread_mutex_lock(&l->lock);
    const uint64_t upto = l->written;
    const int failed = l->failed;
    pthread_mutex_unlock(&l->lock);
    if (failed)
        return -1;
    if (fdatasync(l->fd) != 0) {
        pthread_mutex_lock(&l->lock);
        snprintf(l->why, sizeof l->why, "fdatasync of %s failed: %s", l->path, strerror(errno));
        l->failed = 1;
        pthread_mutex_unlock(&l->lock);
        return -1;
    }
    pthread_mutex_lock(&l->lock);
    if (upto > l->synced)
        l->synced = upto;
    pthread_mutex_unlock(&l->lock);
    return 0;
}

int pd_reserve_log_sync_due(pd_reserve_log *l)
{
    pthread_mutex_lock(&l->lock);
    const int due = !l->failed && l->written > l->synced;
    pthread_mutex_unlock(&l->lock);
    return due;
}

int pd_reserve_log_failed(pd_reserve_log *l, char *why, size_t len)
{
    pthread_mutex_lock(&l->lock);
    const int failed = l->failed;
    if (failed && why && len)
        snprintf(why, len, "%s", l->why);
    pthread_mutex_unlock(&l->lock);
    return failed;
}

int pd_reserve_log_compaction_due(pd_reserve_log *l, uint64_t floor)
{
    pthread_mutex_lock(&l->lock);
    const int due = !l->failed && l->size > floor && l->size / PD_RESERVE_LOG_COMPACT_RATIO > l->base;
    pthread_mutex_unlock(&l->lock);
    return due;
}

int pd_reserve_log_rewrite(pd_reserve_log *l, const unsigned char *p, size_t n, char *err, size_t errlen)
{
    char tmp[PATH_MAX + 8];
    snprintf(tmp, sizeof tmp, "%s.new", l->path);
    int fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "reservation log compaction: %s: %s", tmp, strerror(errno));
        return -1;
    }
    if (pd_write_all(fd, pd__magic, sizeof pd__magic, 0) != 0 ||
        pd_write_all(fd, p, n, sizeof pd__magic) != 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "reservation log compaction: writing %s: %s", tmp, strerror(errno));
        close(fd);
        (void)unlink(tmp);
        return -1;
    }
    pthread_mutex_lock(&l->lock);
    int rc = -1;
    if (l->failed) {
        snprintf(err, errlen, "reservation log compaction: the log has failed");
    } else if (rename(tmp, l->path) != 0) {
        snprintf(err, errlen, "reservation log compaction: rename %s: %s", tmp, strerror(errno));
    } else {
        /* The new file is the log from here on: dup2 puts it under the
         * descriptor appends and fdatasyncs use, so no one ever holds a
         * closed one. A rename not yet on disk leaves the old file, which
         * holds the same state: the directory's fsync only makes it last. */
        if (dup2(fd, l->fd) < 0) {
            snprintf(l->why, sizeof l->why, "compaction of %s: dup2: %s", l->path, strerror(errno));
            l->failed = 1;
            snprintf(err, errlen, "reservation log compaction: %s", l->why);
        } else {
            l->size = l->written = l->synced = l->base = sizeof pd__magic + n;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&l->lock);
    close(fd);
    if (rc != 0) {
        (void)unlink(tmp);
        return -1;
    }
    int dfd = open(l->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    return 0;
}

uint64_t pd_reserve_log_bytes(pd_reserve_log *l)
{
    pthread_mutex_lock(&l->lock);
    const uint64_t n = l->size;
    pthread_mutex_unlock(&l->lock);
    return n;
}

void pd_reserve_log_close(pd_reserve_log *l)
{
    if (!l)
        return;
    if (l->written > l->synced && !l->failed)
        (void)fdatasync(l->fd);
    close(l->fd);
    pthread_mutex_destroy(&l->lock);
    free(l);
}
