/*
 * pd_journal.c - the journal of run-time changes: the record format, the
 * files of a data directory, replay at start, appends and compaction (see
 * pd_journal.h for the contract, docs/ARCHITECTURE.md for the layout).
 *
 * Integers are little-endian on disk whatever the host, doubles are their
 * IEEE-754 bits as a u64, so a data directory moves between machines. Cell
 * arrays are zlib-compressed: a grid is mostly long runs of the same byte,
 * and zlib is already linked for Tiled maps.
 */
#define _GNU_SOURCE
#include "pd_journal.h"
#include "pd_clock.h"
#include "pd_fileio.h"
#include "pd_sort.h"
#include "pd_store.h"
#include "pd_world.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

/* Longest file name we make in the directory: "snapshot." + 16 hex digits
 * + ".tmp", with room to spare. */
#define PD__JOURNAL_NAME_MAX 48
/* zlib level for cells: the fastest. A 512x512 map compresses to a few KiB
 * at level 1 already, and compaction runs while updates go on. */
#define PD__JOURNAL_ZLEVEL 1

/* ---- little-endian buffers --------------------------------------------- */

typedef struct pd__wbuf {
    uint8_t *p;
    size_t len, cap;
    int failed;
} pd__wbuf;

static void pd__put(pd__wbuf *b, const void *src, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void pd__put_u8(pd__wbuf *b, uint8_t v)
{
    pd__put(b, &v, 1);
}

static void pd__put_u32(pd__wbuf *b, uint32_t v)
{
    uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    pd__put(b, x, 4);
}

static void pd__put_u64(pd__wbuf *b, uint64_t v)
{
    pd__put_u32(b, (uint32_t)v);
    pd__put_u32(b, (uint32_t)(v >> 32));
}

static void pd__put_f64(pd__wbuf *b, double d)
{
    uint64_t v;
    memcpy(&v, &d, sizeof v);
    pd__put_u64(b, v);
}

static void pd__put_name(pd__wbuf *b, const char *name)
{
    size_t n = strnlen(name, PD_CONF_MAX_NAME);
    if (n == 0 || n >= PD_CONF_MAX_NAME) {
        b->failed = 1;
        return;
    }
    pd__put_u8(b, (uint8_t)n);
    pd__put(b, name, n);
}

/* width * height cells, compressed, with their compressed length first. */
static void pd__put_cells(pd__wbuf *b, const uint8_t *cells, size_t n)
{
    uLongf clen = compressBound((uLong)n);
    uint8_t *z = malloc(clen);
    if (!z || compress2(z, &clen, cells, (uLong)n, PD__JOURNAL_ZLEVEL) != Z_OK || clen > UINT32_MAX) {
        free(z);
        b->failed = 1;
        return;
    }
    pd__put_u32(b, (uint32_t)clen);
    pd__put(b, z, clen);
    free(z);
}

typedef struct pd__rbuf {
    const uint8_t *p;
    size_t len, at;
    int failed;
} pd__rbuf;

static const uint8_t *pd__take(pd__rbuf *b, size_t n)
{
    if (b->failed || b->len - b->at < n) {
        b->failed = 1;
        return NULL;
    }
    const uint8_t *p = b->p + b->at;
    b->at += n;
    return p;
}

static uint8_t pd__get_u8(pd__rbuf *b)
{
    const uint8_t *p = pd__take(b, 1);
    return p ? p[0] : 0;
}

static uint32_t pd__get_u32(pd__rbuf *b)
{
    const uint8_t *p = pd__take(b, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0;
}

static uint64_t pd__get_u64(pd__rbuf *b)
{
    uint64_t lo = pd__get_u32(b);
    return lo | (uint64_t)pd__get_u32(b) << 32;
}

static double pd__get_f64(pd__rbuf *b)
{
    uint64_t v = pd__get_u64(b);
    double d;
    memcpy(&d, &v, sizeof d);
    return d;
}

static int pd__get_name(pd__rbuf *b, char out[PD_CONF_MAX_NAME])
{
    uint8_t n = pd__get_u8(b);
    const uint8_t *p = pd__take(b, n);
    if (!p || n == 0 || n >= PD_CONF_MAX_NAME || memchr(p, '\0', n))
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static uint8_t *pd__get_cells(pd__rbuf *b, size_t n)
{
    uint32_t clen = pd__get_u32(b);
    const uint8_t *z = pd__take(b, clen);
    uint8_t *cells = z ? malloc(n) : NULL;
    uLongf got = (uLongf)n;
    if (!cells || uncompress(cells, &got, z, clen) != Z_OK || got != n) {
        free(cells);
        b->failed = 1;
        return NULL;
    }
    return cells;
}

/* ---- records ------------------------------------------------------------ */

void pd_journal_record_free(pd_journal_record *rec)
{
    if (!rec)
        return;
    free(rec->cells);
    free(rec->authored);
    for (size_t i = 0; rec->ops && i < rec->n_ops; i++)
        free((void *)rec->ops[i].cells);
    free(rec->ops);
    memset(rec, 0, sizeof *rec);
}

static uint32_t pd__crc(const uint8_t *len_le, const uint8_t *payload, size_t n)
{
    uLong crc = crc32(0L, Z_NULL, 0);
    crc = crc32(crc, len_le, 4);
    /* zlib takes lengths as uInt: feed a large payload in pieces. */
    while (n > 0) {
        uInt piece = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, payload, piece);
        payload += piece;
        n -= piece;
    }
    return (uint32_t)crc;
}

int pd_journal_encode(const pd_journal_record *rec, uint8_t **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    pd__wbuf b = { 0 };
    pd__put_u32(&b, 0); /* length and checksum, filled in below */
    pd__put_u32(&b, 0);
    pd__put_u8(&b, (uint8_t)rec->type);
    pd__put_name(&b, rec->scene);
    pd__put_u64(&b, rec->version);
    switch (rec->type) {
    case PD_JOURNAL_SCENE:
    case PD_JOURNAL_BASE: {
        if (!rec->cells || rec->width < 1 || rec->height < 1 || rec->n_unit_sizes < 1 ||
            rec->n_unit_sizes > PD_CONF_MAX_UNIT_SIZES) {
            b.failed = 1;
            break;
        }
        size_t n = (size_t)rec->width * (size_t)rec->height;
        pd__put_u32(&b, rec->base_id);
        pd__put_u8(&b, (uint8_t)(rec->runtime != 0));
        pd__put_f64(&b, rec->origin_x);
        pd__put_f64(&b, rec->origin_y);
        pd__put_f64(&b, rec->cell_size);
        pd__put_u8(&b, (uint8_t)rec->search);
        pd__put_u8(&b, (uint8_t)rec->n_unit_sizes);
        for (size_t i = 0; i < rec->n_unit_sizes; i++)
            pd__put_u8(&b, (uint8_t)rec->unit_sizes[i]);
        pd__put_u32(&b, (uint32_t)rec->width);
        pd__put_u32(&b, (uint32_t)rec->height);
        pd__put_u8(&b, (uint8_t)(rec->authored != NULL));
        pd__put_cells(&b, rec->cells, n);
        if (rec->authored)
            pd__put_cells(&b, rec->authored, n);
        break;
    }
    case PD_JOURNAL_INSTANCE:
        pd__put_name(&b, rec->tmpl);
        pd__put_u64(&b, rec->tmpl_version);
        break;
    case PD_JOURNAL_INSTANCE_OF_BASE:
        pd__put_u32(&b, rec->base_id);
        break;
    case PD_JOURNAL_DROP:
    case PD_JOURNAL_RESET:
        break;
    case PD_JOURNAL_UPDATE:
        if (rec->n_ops < 1 || rec->n_ops > PD_SCENE_MAX_UPDATE_OPS) {
            b.failed = 1;
            break;
        }
        pd__put_u8(&b, (uint8_t)rec->n_ops);
        for (size_t k = 0; k < rec->n_ops; k++) {
            const pd_scene_update *u = &rec->ops[k];
            pd__put_u8(&b, (uint8_t)u->op);
            pd__put_u8(&b, u->cost);
            pd__put_u8(&b, (uint8_t)(u->is_rect != 0));
            if (u->is_rect) {
                pd__put_u32(&b, (uint32_t)u->rect_min.x);
                pd__put_u32(&b, (uint32_t)u->rect_min.y);
                pd__put_u32(&b, (uint32_t)u->rect_max.x);
                pd__put_u32(&b, (uint32_t)u->rect_max.y);
            } else {
                pd__put_u32(&b, (uint32_t)u->n_cells);
                for (size_t i = 0; i < u->n_cells; i++) {
                    pd__put_u32(&b, (uint32_t)u->cells[i].x);
                    pd__put_u32(&b, (uint32_t)u->cells[i].y);
                }
            }
        }
        break;
    default:
        b.failed = 1;
    }
    size_t payload = b.len - PD_JOURNAL_HEADER_BYTES;
    if (b.failed || payload > PD_JOURNAL_MAX_RECORD) {
        free(b.p);
        return -1;
    }
    pd__wbuf hdr = { .p = b.p, .cap = b.cap };
    pd__put_u32(&hdr, (uint32_t)payload);
    pd__put_u32(&hdr, pd__crc(b.p, b.p + PD_JOURNAL_HEADER_BYTES, payload));
    *out = b.p;
    *len = b.len;
    return 0;
}

static int pd__decode_fail(pd_journal_record *rec, char *err, size_t errlen, const char *why)
{
    pd_journal_record_free(rec);
    snprintf(err, errlen, "%s", why);
    return -1;
}

static int pd__decode_update(pd__rbuf *b, pd_journal_record *rec)
{
    uint8_t n_ops = pd__get_u8(b);
    if (n_ops < 1 || n_ops > PD_SCENE_MAX_UPDATE_OPS || !(rec->ops = calloc(n_ops, sizeof *rec->ops)))
        return -1;
    rec->n_ops = n_ops;
    for (size_t k = 0; k < n_ops; k++) {
        pd_scene_update *u = &rec->ops[k];
        uint8_t op = pd__get_u8(b);
        if (op > PD_UPDATE_RESTORE)
            return -1;
        u->op = (pd_update_op)op;
        u->cost = pd__get_u8(b);
        u->is_rect = pd__get_u8(b) != 0;
        if (u->is_rect) {
            u->rect_min.x = (int32_t)pd__get_u32(b);
            u->rect_min.y = (int32_t)pd__get_u32(b);
            u->rect_max.x = (int32_t)pd__get_u32(b);
            u->rect_max.y = (int32_t)pd__get_u32(b);
            continue;
        }
        uint32_t n = pd__get_u32(b);
        /* Each cell takes 8 bytes: a count beyond what is left is corrupt,
         * checked before allocating for it. */
        if (b->failed || n > PD_SCENE_MAX_UPDATE_CELLS || (size_t)n * 8u > b->len - b->at)
            return -1;
        pd_point *cells = n ? malloc(n * sizeof *cells) : NULL;
        if (n && !cells)
            return -1;
        for (uint32_t i = 0; i < n; i++) {
            cells[i].x = (int32_t)pd__get_u32(b);
            cells[i].y = (int32_t)pd__get_u32(b);
        }
        u->cells = cells;
        u->n_cells = n;
    }
    return b->failed ? -1 : 0;
}

int pd_journal_decode(const uint8_t *payload, size_t len, pd_journal_record *rec, char *err,
                      size_t errlen)
{
    memset(rec, 0, sizeof *rec);
    pd__rbuf b = { .p = payload, .len = len };
    rec->type = (pd_journal_type)pd__get_u8(&b);
    if (pd__get_name(&b, rec->scene) != 0)
        return pd__decode_fail(rec, err, errlen, "bad scene name");
    rec->version = pd__get_u64(&b);
    switch (rec->type) {
    case PD_JOURNAL_SCENE:
    case PD_JOURNAL_BASE: {
        rec->base_id = pd__get_u32(&b);
        rec->runtime = pd__get_u8(&b) != 0;
        rec->origin_x = pd__get_f64(&b);
        rec->origin_y = pd__get_f64(&b);
        rec->cell_size = pd__get_f64(&b);
        uint8_t search = pd__get_u8(&b);
        uint8_t n_units = pd__get_u8(&b);
        if (search > PD_CONF_SEARCH_ASTAR || n_units < 1 || n_units > PD_CONF_MAX_UNIT_SIZES)
            return pd__decode_fail(rec, err, errlen, "bad scene settings");
        rec->search = (pd_conf_search)search;
        rec->n_unit_sizes = n_units;
        for (size_t i = 0; i < n_units; i++)
            rec->unit_sizes[i] = pd__get_u8(&b);
        rec->width = (int32_t)pd__get_u32(&b);
        rec->height = (int32_t)pd__get_u32(&b);
        int has_authored = pd__get_u8(&b) != 0;
        if (b.failed || rec->width < 1 || rec->height < 1 || rec->width > PD_GRID_MAX_SIDE ||
            rec->height > PD_GRID_MAX_SIDE)
            return pd__decode_fail(rec, err, errlen, "bad scene size");
        size_t n = (size_t)rec->width * (size_t)rec->height;
        if (!(rec->cells = pd__get_cells(&b, n)) || (has_authored && !(rec->authored = pd__get_cells(&b, n))))
            return pd__decode_fail(rec, err, errlen, "bad cells");
        break;
    }
    case PD_JOURNAL_INSTANCE:
        if (pd__get_name(&b, rec->tmpl) != 0)
            return pd__decode_fail(rec, err, errlen, "bad template name");
        rec->tmpl_version = pd__get_u64(&b);
        break;
    case PD_JOURNAL_INSTANCE_OF_BASE:
        rec->base_id = pd__get_u32(&b);
        break;
    case PD_JOURNAL_DROP:
    case PD_JOURNAL_RESET:
        break;
    case PD_JOURNAL_UPDATE:
        if (pd__decode_update(&b, rec) != 0)
            return pd__decode_fail(rec, err, errlen, "bad update operations");
        break;
    default:
        return pd__decode_fail(rec, err, errlen, "unknown record type");
    }
    if (b.failed)
        return pd__decode_fail(rec, err, errlen, "record shorter than its fields");
    if (b.at != len)
        return pd__decode_fail(rec, err, errlen, "bytes left over after the record's fields");
    return 0;
}

void pd_journal_scan(const uint8_t *buf, size_t len, pd_journal_scan_fn fn, void *user,
                     pd_journal_scan_result *out)
{
    memset(out, 0, sizeof *out);
    size_t at = 0;
    while (at < len) {
        if (len - at < PD_JOURNAL_HEADER_BYTES) {
            snprintf(out->why, sizeof out->why, "torn record header (%zu of %u bytes)", len - at,
                     PD_JOURNAL_HEADER_BYTES);
            out->damaged = 1;
            break;
        }
        const uint8_t *h = buf + at;
        uint32_t n = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
        uint32_t crc = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
        if (n > PD_JOURNAL_MAX_RECORD) {
            snprintf(out->why, sizeof out->why, "record length %" PRIu32 " is over the cap", n);
            out->damaged = 1;
            break;
        }
        if (len - at - PD_JOURNAL_HEADER_BYTES < n) {
            snprintf(out->why, sizeof out->why, "torn record (%zu of %" PRIu32 " payload bytes)",
                     len - at - PD_JOURNAL_HEADER_BYTES, n);
            out->damaged = 1;
            break;
        }
        if (pd__crc(h, h + PD_JOURNAL_HEADER_BYTES, n) != crc) {
            snprintf(out->why, sizeof out->why, "checksum mismatch in a record of %" PRIu32 " bytes", n);
            out->damaged = 1;
            break;
        }
        int stop = fn ? fn(user, h + PD_JOURNAL_HEADER_BYTES, n, at) : 0;
        at += PD_JOURNAL_HEADER_BYTES + (size_t)n;
        out->records++;
        out->good_end = at;
        if (stop)
            break;
    }
}

/* ---- the journal -------------------------------------------------------- */

struct pd_journal {
    char dir[PD_CONF_MAX_DATA_DIR];
    pd_journal_opts opts;         /* as opened (opts.dir is dir) */
    pd_conf_fsync fsync;
    uint64_t compact_bytes;
    int lock_fd;                  /* DATA_DIR/lock, flock'ed */

    /* The change lock: appends, and the switch to a new log. */
    pthread_mutex_t lock;
    int fd;                       /* the current log, opened for appending */
    uint64_t generation;
    /* Written under the change lock, read without it: the loop thread's
     * timer asks for them and must never wait for a change (or a sync) in
     * progress. */
    atomic_uint_fast64_t log_bytes;   /* of the current log */
    atomic_uint_fast64_t snapshot_bytes;  /* of the current snapshot (0 when none) */
    atomic_int failed;            /* a write failed: no more changes */
    char error[PD_CONF_MAX_DATA_DIR + 256];   /* set before failed, then fixed */

    /* Held by a sync while it uses fd, and by the switch while it changes
     * fd, so a sync never runs on a closed (or reused) descriptor. */
    pthread_mutex_t fd_lock;
    /* Appended since the last sync began. A sync clears it before its
     * fdatasync, so an append it may miss sets it again. */
    atomic_int dirty;
    /* One compaction at a time. */
    pthread_mutex_t compact_lock;
};

static void pd__journal_path(const pd_journal *j, const char *kind, uint64_t gen, const char *suffix,
                             char *out, size_t cap)
{
    snprintf(out, cap, "%s/%s.%016" PRIx64 "%s", j->dir, kind, gen, suffix);
}

static int pd__fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* A new file holding only the magic; its descriptor (appending), or -1
 * with errno set. A file whose magic could not be written (a full disk) is
 * removed: left behind empty, it would be taken for the newest log at the
 * next start, appended to without a header, and cut away whole by the
 * start after that. */
static int pd__create_file(const char *path, int extra_flags)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | extra_flags, 0644);
    if (fd < 0)
        return -1;
    if (pd_write_all(fd, (const uint8_t *)PD_JOURNAL_MAGIC, PD_JOURNAL_MAGIC_BYTES, PD_WRITE_AT_OFFSET) != 0) {
        int e = errno;
        unlink(path);
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

/* Gives an open log its magic when it has none yet: an empty file (made by
 * a pathd that crashed, or failed to write, before its magic was on disk).
 * Records are never appended to a file without one. 0, or -1 with errno
 * set; a file with other bytes where the magic belongs is refused (EINVAL:
 * replay has already cut a damaged one back to its magic). */
static int pd__ensure_magic(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0)
        return -1;
    char head[PD_JOURNAL_MAGIC_BYTES];
    if ((size_t)st.st_size >= PD_JOURNAL_MAGIC_BYTES) {
        if (pread(fd, head, sizeof head, 0) != (ssize_t)sizeof head)
            return -1;
        if (memcmp(head, PD_JOURNAL_MAGIC, sizeof head) != 0) {
            errno = EINVAL;
            return -1;
        }
        *size = (uint64_t)st.st_size;
        return 0;
    }
    if (ftruncate(fd, 0) != 0 || pd_write_all(fd, (const uint8_t *)PD_JOURNAL_MAGIC, PD_JOURNAL_MAGIC_BYTES, PD_WRITE_AT_OFFSET) != 0 ||
        fdatasync(fd) != 0)
        return -1;
    *size = PD_JOURNAL_MAGIC_BYTES;
    return 0;
}

pd_conf_fsync pd_journal_fsync_policy(const pd_journal *j)
{
    return j->fsync;
}

const char *pd_journal_error(pd_journal *j)
{
    return j->error;
}

int pd_journal_failed(pd_journal *j)
{
    return atomic_load(&j->failed);
}

int pd_journal_lock(pd_journal *j)
{
    pthread_mutex_lock(&j->lock);
    if (!atomic_load(&j->failed))
        return 0;
    pthread_mutex_unlock(&j->lock);
    return -1;
}

void pd_journal_unlock(pd_journal *j)
{
    pthread_mutex_unlock(&j->lock);
}

/* Appends one encoded record (change lock held). A failed or short write is
 * cut back off, so the file ends on a whole record, and the journal stops
 * taking changes: acknowledging one the log does not hold would break the
 * promise the journal exists for. */
static int pd__append(pd_journal *j, uint8_t *rec, size_t len, int encoded)
{
    if (!encoded) {
        snprintf(j->error, sizeof j->error, "journal: out of memory encoding a record");
        atomic_store(&j->failed, 1);
        return -1;
    }
    if (atomic_load(&j->failed)) {
        free(rec);
        return -1;
    }
    int rc = pd_write_all(j->fd, rec, len, PD_WRITE_AT_OFFSET);
    free(rec);
    if (rc != 0) {
        int e = errno;
        snprintf(j->error, sizeof j->error, "journal: writing log.%016" PRIx64 " in %s: %s", j->generation,
                 j->dir, strerror(e));
        if (ftruncate(j->fd, (off_t)atomic_load(&j->log_bytes)) != 0)
            snprintf(j->error + strlen(j->error), sizeof j->error - strlen(j->error),
                     " (and cutting it back: %s)", strerror(errno));
        atomic_store(&j->failed, 1);
        return -1;
    }
    atomic_fetch_add(&j->log_bytes, len);
    atomic_store(&j->dirty, 1);
    return 0;
}

static int pd__append_record(pd_journal *j, const pd_journal_record *rec)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int ok = pd_journal_encode(rec, &buf, &len) == 0;
    return pd__append(j, buf, len, ok);
}

/* The record of a whole scene: its cells, and its authored cells when an
 * update changed it since it was made. cells and authored are allocated
 * here; free them with pd_journal_record_free. */
static int pd__scene_record(const pd_scene *s, pd_journal_type type, pd_journal_record *rec)
{
    memset(rec, 0, sizeof *rec);
    rec->type = type;
    snprintf(rec->scene, sizeof rec->scene, "%s", s->name);
    rec->version = s->version;
    rec->runtime = s->runtime;
    rec->origin_x = s->origin_x;
    rec->origin_y = s->origin_y;
    rec->cell_size = s->cell_size;
    memcpy(rec->unit_sizes, s->unit_sizes, sizeof rec->unit_sizes);
    rec->n_unit_sizes = s->n_unit_sizes;
    rec->search = s->search;
    rec->width = s->grid->width;
    rec->height = s->grid->height;
    size_t w = (size_t)s->grid->width, n = w * (size_t)s->grid->height;
    const pd_grid *authored = pd_scene_authored_grid(s);
    rec->cells = malloc(n);
    rec->authored = authored ? malloc(n) : NULL;
    if (!rec->cells || (authored && !rec->authored)) {
        pd_journal_record_free(rec);
        return -1;
    }
    for (int32_t y = 0; y < s->grid->height; y++) {
        memcpy(rec->cells + (size_t)y * w, s->grid->cells + pd_grid_index(s->grid, 0, y), w);
        if (authored)
            memcpy(rec->authored + (size_t)y * w, authored->cells + pd_grid_index(authored, 0, y), w);
    }
    return 0;
}

int pd_journal_scene_record(const pd_scene *s, pd_journal_record *rec)
{
    return pd__scene_record(s, PD_JOURNAL_SCENE, rec);
}

int pd_journal_append(pd_journal *j, const pd_journal_record *rec)
{
    return pd__append_record(j, rec);
}

int pd_journal_append_scene(pd_journal *j, const pd_scene *s)
{
    pd_journal_record rec;
    if (pd__scene_record(s, PD_JOURNAL_SCENE, &rec) != 0)
        return pd__append(j, NULL, 0, 0);
    int rc = pd__append_record(j, &rec);
    pd_journal_record_free(&rec);
    return rc;
}

int pd_journal_append_instance(pd_journal *j, const char *name, uint64_t version, const char *tmpl,
                               uint64_t tmpl_version)
{
    pd_journal_record rec = { .type = PD_JOURNAL_INSTANCE, .version = version, .tmpl_version = tmpl_version };
    snprintf(rec.scene, sizeof rec.scene, "%s", name);
    snprintf(rec.tmpl, sizeof rec.tmpl, "%s", tmpl);
    return pd__append_record(j, &rec);
}

static int pd__append_plain(pd_journal *j, pd_journal_type type, const char *name, uint64_t version)
{
    pd_journal_record rec = { .type = type, .version = version };
    snprintf(rec.scene, sizeof rec.scene, "%s", name);
    return pd__append_record(j, &rec);
}

int pd_journal_append_drop(pd_journal *j, const char *name, uint64_t version)
{
    return pd__append_plain(j, PD_JOURNAL_DROP, name, version);
}

int pd_journal_append_reset(pd_journal *j, const char *name, uint64_t version)
{
    return pd__append_plain(j, PD_JOURNAL_RESET, name, version);
}

int pd_journal_append_update(pd_journal *j, const char *name, uint64_t version,
                             const pd_scene_update *ops, size_t n_ops)
{
    pd_journal_record rec = { .type = PD_JOURNAL_UPDATE, .version = version,
                              .ops = (pd_scene_update *)ops, .n_ops = n_ops };
    snprintf(rec.scene, sizeof rec.scene, "%s", name);
    return pd__append_record(j, &rec);
}

int pd_journal_sync(pd_journal *j)
{
    pthread_mutex_lock(&j->fd_lock);
    int rc = atomic_exchange(&j->dirty, 0) ? fdatasync(j->fd) : 0;
    pthread_mutex_unlock(&j->fd_lock);
    return rc;
}

int pd_journal_dirty(pd_journal *j)
{
    return atomic_load(&j->dirty);
}

int pd_journal_wants_compaction(pd_journal *j)
{
    return !pd_journal_failed(j) && atomic_load(&j->log_bytes) > j->compact_bytes;
}

void pd_journal_sizes(pd_journal *j, uint64_t *log_bytes, uint64_t *snapshot_bytes)
{
    *log_bytes = atomic_load(&j->log_bytes);
    *snapshot_bytes = atomic_load(&j->snapshot_bytes);
}

/* ---- replay ------------------------------------------------------------- */

/* The state of one replay: where records go and what they refer to (also
 * pd_journal_replayer, for a change log kept elsewhere). */
typedef struct pd_journal_replayer {
    const pd_journal_opts *opts;  /* NULL: no warnings */
    pd_registry *r;
    pd_world_store *ws;           /* may be NULL */
    pd_scene **config;            /* the config's scenes as loaded, for RESET */
    size_t n_config;
    int config_locks;             /* a replayer (pd_journal_replayer_create): config_lock
                                     guards config, which a reload replaces while a
                                     rebuild may read it */
    pthread_mutex_t config_lock;
    pd_scene **bases;             /* a snapshot's BASE records, by id */
    size_t n_bases;
    const char *file;             /* for messages */
    pd_journal_replay_stats *stats;
    pd_journal_replay_stats own_stats;  /* stats points here without a journal */
} pd__replay;

static void pd__warn(const pd__replay *rp, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void pd__warn(const pd__replay *rp, const char *fmt, ...)
{
    if (!rp->opts || !rp->opts->warn)
        return;
    char msg[PD_LOAD_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rp->opts->warn(rp->opts->warn_user, msg);
}

static pd_scene *pd__scene_from_record(const pd_journal_record *rec, char *err, size_t errlen)
{
    pd_conf_scene cs;
    memset(&cs, 0, sizeof cs);
    snprintf(cs.name, sizeof cs.name, "%s", rec->scene);
    cs.origin_x = rec->origin_x;
    cs.origin_y = rec->origin_y;
    cs.cell_size = rec->cell_size;
    memcpy(cs.unit_sizes, rec->unit_sizes, sizeof cs.unit_sizes);
    cs.n_unit_sizes = rec->n_unit_sizes;
    cs.search = rec->search;
    pd_scene *s = pd_scene_from_cells(&cs, rec->width, rec->height, rec->cells, err, errlen);
    if (!s)
        return NULL;
    if (rec->authored && pd_scene_set_authored(s, rec->authored) != 0) {
        snprintf(err, errlen, "out of memory");
        pd_scene_release(s);
        return NULL;
    }
    s->version = rec->version;
    s->runtime = rec->runtime;
    return s;
}

/* A served copy of t under name at version (it shares t's structures). */
static pd_scene *pd__copy_of(const pd_scene *t, const char *name, uint64_t version, int runtime)
{
    pd_scene *n = pd_scene_instance(t, name);
    if (n) {
        n->version = version;
        n->runtime = runtime;
        /* A config scene put back by RESET is a template of its own. */
        if (!runtime)
            n->template_lineage = 0;
    }
    return n;
}

/* Applies one record: NULL, or why it does not fit the state it finds (the
 * caller reports and skips it; never applied in part: every change below
 * is one registry call that either happens or not). */
static const char *pd__apply(pd__replay *rp, const pd_journal_record *in, char *err, size_t errlen)
{
    /* The cases below read the record as `rec` and write reasons to err. */
    const pd_journal_record rec = *in;
    if (errlen)
        err[0] = '\0';
    pd_scene *cur = pd_registry_acquire(rp->r, rec.scene);
    pd_scene *put = NULL;
    const char *why = NULL;
    switch (rec.type) {
    case PD_JOURNAL_SCENE:
        if (!(put = pd__scene_from_record(&rec, err, errlen)))
            why = err;
        break;
    case PD_JOURNAL_BASE: {
        pd_scene *base = pd__scene_from_record(&rec, err, errlen);
        /* A snapshot numbers its bases 0, 1, ...; a reload's block in a
         * log numbers them from 0 again, replacing the earlier ones. */
        if (base && rec.base_id < rp->n_bases) {
            pd_scene_release(rp->bases[rec.base_id]);
            rp->bases[rec.base_id] = base;
            break;
        }
        pd_scene **grown = base ? realloc(rp->bases, (rp->n_bases + 1) * sizeof *grown) : NULL;
        if (!grown || rec.base_id != rp->n_bases) {
            pd_scene_release(base);
            why = base ? "base ids out of order, or out of memory" : err;
            break;
        }
        rp->bases = grown;
        rp->bases[rp->n_bases++] = base;
        break;
    }
    case PD_JOURNAL_INSTANCE_OF_BASE:
        if (rec.base_id >= rp->n_bases)
            why = "its base is not in the snapshot";
        else if (!(put = pd__copy_of(rp->bases[rec.base_id], rec.scene, rec.version, 1)))
            why = "out of memory";
        break;
    case PD_JOURNAL_INSTANCE: {
        pd_scene *t = pd_registry_acquire(rp->r, rec.tmpl);
        if (!t)
            why = "its template is not served";
        else if (t->version != rec.tmpl_version)
            snprintf(err, errlen, "its template '%s' is at version %" PRIu64 ", not %" PRIu64, rec.tmpl,
                     t->version, rec.tmpl_version), why = err;
        else if (!(put = pd__copy_of(t, rec.scene, rec.version, 1)))
            why = "out of memory";
        pd_scene_release(t);
        break;
    }
    case PD_JOURNAL_DROP:
        /* Its portals went with it when it was dropped (or none named it).
         * A scene not served is already what the record says: a reload
         * dropped a config scene the config no longer has. */
        if (cur && (rp->ws ? pd_world_store_drop_scene(rp->ws, rp->r, rec.scene, 1, NULL, err, errlen)
                           : pd_registry_drop(rp->r, rec.scene, NULL)) != PD_OK)
            why = err[0] ? err : "no such scene";
        break;
    case PD_JOURNAL_RESET: {
        pd_scene *cfg = pd_journal_replayer_config(rp, rec.scene);
        if (!cfg)
            why = "the config has no such scene";
        else if (!(put = pd__copy_of(cfg, rec.scene, rec.version, 0)))
            why = "out of memory";
        pd_scene_release(cfg);
        break;
    }
    case PD_JOURNAL_UPDATE: {
        pd_scene_update_result res;
        pd_status st;
        if (!cur) {
            why = "no such scene";
        } else if (cur->version + 1 != rec.version) {
            snprintf(err, errlen, "the scene is at version %" PRIu64, cur->version);
            why = err;
        } else if ((st = pd_registry_update_many(rp->r, rec.scene, rec.ops, rec.n_ops, &res)) != PD_OK ||
                   res.version != rec.version) {
            snprintf(err, errlen, "%s", st != PD_OK ? pd_status_name(st) : "it changed no cell");
            why = err;
        }
        break;
    }
    default:
        why = "unknown record type";
    }
    if (!why && put && pd_registry_put(rp->r, put) != PD_OK)
        why = "out of memory";
    pd_scene_release(cur);
    return why;
}

static int pd__replay_record(void *user, const uint8_t *payload, size_t len, size_t offset)
{
    pd__replay *rp = user;
    pd_journal_record rec;
    char err[PD_REASON_MAX] = "";
    if (pd_journal_decode(payload, len, &rec, err, sizeof err) != 0) {
        pd__warn(rp, "journal %s: record at offset %zu skipped: %s", rp->file, offset, err);
        rp->stats->skipped++;
        return 0;
    }
    const char *why = pd__apply(rp, &rec, err, sizeof err);
    if (why) {
        pd__warn(rp, "journal %s: record at offset %zu (scene '%s', version %" PRIu64 ") skipped: %s", rp->file,
                 offset, rec.scene, rec.version, why);
        rp->stats->skipped++;
    } else {
        rp->stats->records++;
    }
    pd_journal_record_free(&rec);
    return 0;
}

/* Replays one file; a damaged tail is reported and, with truncate, cut off
 * (a snapshot is written whole and renamed, so its damage is the disk's:
 * reported, and the file left for a human to look at). */
static int pd__replay_file(pd__replay *rp, const char *path, int truncate, char *err, size_t errlen)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "journal: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, errlen, "journal: cannot stat %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    rp->file = path;
    rp->stats->files++;
    rp->stats->bytes += size;
    uint8_t *map = NULL;
    if (size > 0 && (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        snprintf(err, errlen, "journal: cannot map %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    pd_journal_scan_result res;
    size_t keep;
    if (size < PD_JOURNAL_MAGIC_BYTES || memcmp(map, PD_JOURNAL_MAGIC, PD_JOURNAL_MAGIC_BYTES) != 0) {
        /* A file made just before a crash may hold part of its magic. */
        memset(&res, 0, sizeof res);
        res.damaged = size > 0;
        snprintf(res.why, sizeof res.why, "no journal header");
        keep = 0;
    } else {
        pd_journal_scan(map + PD_JOURNAL_MAGIC_BYTES, size - PD_JOURNAL_MAGIC_BYTES, pd__replay_record, rp, &res);
        keep = PD_JOURNAL_MAGIC_BYTES + res.good_end;
    }
    if (map)
        munmap(map, size);
    int rc = 0;
    if (res.damaged) {
        pd__warn(rp, "journal %s: damaged at offset %zu (%s): %" PRIu64 " records kept, %zu bytes %s", path, keep,
                 res.why, res.records, size - keep, truncate ? "truncated" : "ignored");
        if (truncate) {
            rp->stats->truncated_bytes += size - keep;
            /* A file without a whole header gets its magic back. */
            if (ftruncate(fd, (off_t)keep) != 0 ||
                (keep == 0 && pd_write_all(fd, PD_JOURNAL_MAGIC, PD_JOURNAL_MAGIC_BYTES, 0) != 0) ||
                fdatasync(fd) != 0) {
                snprintf(err, errlen, "journal: cannot truncate %s: %s", path, strerror(errno));
                rc = -1;
            }
        }
    }
    close(fd);
    return rc;
}

/* The generations of the snapshots and logs in j->dir, ascending; stale
 * .tmp files (a compaction that did not finish) are removed. */
typedef struct pd__files {
    uint64_t *snaps, *logs;
    size_t n_snaps, n_logs;
} pd__files;

static int pd__push_gen(uint64_t **arr, size_t *n, uint64_t gen)
{
    uint64_t *grown = realloc(*arr, (*n + 1) * sizeof *grown);
    if (!grown)
        return -1;
    grown[(*n)++] = gen;
    *arr = grown;
    return 0;
}

static int pd__list_files(pd_journal *j, pd__files *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    DIR *d = pd_open_dir(j->dir);
    if (!d) {
        snprintf(err, errlen, "journal: cannot read %s: %s", j->dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(d))) {
        char kind[16], tail[8];
        uint64_t gen;
        int n = 0;
        if (sscanf(e->d_name, "%15[a-z].%16" SCNx64 "%n", kind, &gen, &n) != 2 || strlen(e->d_name) < 20)
            continue;
        snprintf(tail, sizeof tail, "%s", e->d_name + n);
        if (strcmp(tail, ".tmp") == 0) {
            unlinkat(dirfd(d), e->d_name, 0);
        } else if (tail[0] == '\0' && strcmp(kind, "snapshot") == 0) {
            rc = pd__push_gen(&f->snaps, &f->n_snaps, gen);
        } else if (tail[0] == '\0' && strcmp(kind, "log") == 0) {
            rc = pd__push_gen(&f->logs, &f->n_logs, gen);
        }
    }
    closedir(d);
    if (rc != 0) {
        snprintf(err, errlen, "journal: out of memory listing %s", j->dir);
        free(f->snaps);
        free(f->logs);
        return -1;
    }
    if (f->n_snaps > 1)
        qsort(f->snaps, f->n_snaps, sizeof *f->snaps, pd_cmp_u64);
    if (f->n_logs > 1)
        qsort(f->logs, f->n_logs, sizeof *f->logs, pd_cmp_u64);
    return 0;
}

/* Removes the snapshots and logs older than generation keep. */
static void pd__remove_before(pd_journal *j, const pd__files *f, uint64_t keep)
{
    char path[PD_CONF_MAX_DATA_DIR + PD__JOURNAL_NAME_MAX];
    for (size_t i = 0; i < f->n_snaps; i++)
        if (f->snaps[i] < keep) {
            pd__journal_path(j, "snapshot", f->snaps[i], "", path, sizeof path);
            unlink(path);
        }
    for (size_t i = 0; i < f->n_logs; i++)
        if (f->logs[i] < keep) {
            pd__journal_path(j, "log", f->logs[i], "", path, sizeof path);
            unlink(path);
        }
}

static void pd__replay_free(pd__replay *rp)
{
    pd_registry_release_list(rp->config, rp->n_config);
    for (size_t i = 0; i < rp->n_bases; i++)
        pd_scene_release(rp->bases[i]);
    free(rp->bases);
    rp->bases = NULL;
    rp->n_bases = 0;
}

/* Replays the newest snapshot and every log from its generation on. */
static int pd__replay_all(pd_journal *j, const pd__files *f, pd__replay *rp, char *err, size_t errlen)
{
    char path[PD_CONF_MAX_DATA_DIR + PD__JOURNAL_NAME_MAX];
    uint64_t from = f->n_snaps ? f->snaps[f->n_snaps - 1] : 0;
    if (f->n_snaps) {
        pd__journal_path(j, "snapshot", from, "", path, sizeof path);
        if (pd__replay_file(rp, path, 0, err, errlen) != 0)
            return -1;
        struct stat st;
        atomic_store(&j->snapshot_bytes, stat(path, &st) == 0 ? (uint64_t)st.st_size : 0);
    }
    /* Bases belong to their snapshot; the instances made of them hold them. */
    for (size_t i = 0; i < rp->n_bases; i++)
        pd_scene_release(rp->bases[i]);
    rp->n_bases = 0;
    for (size_t i = 0; i < f->n_logs; i++) {
        if (f->logs[i] < from)
            continue;
        pd__journal_path(j, "log", f->logs[i], "", path, sizeof path);
        if (pd__replay_file(rp, path, 1, err, errlen) != 0)
            return -1;
    }
    return 0;
}

/* Opens (or makes) the newest log for appending. */
static int pd__open_log(pd_journal *j, const pd__files *f, char *err, size_t errlen)
{
    char path[PD_CONF_MAX_DATA_DIR + PD__JOURNAL_NAME_MAX];
    uint64_t gen = f->n_snaps ? f->snaps[f->n_snaps - 1] : 1;
    if (f->n_logs && f->logs[f->n_logs - 1] > gen)
        gen = f->logs[f->n_logs - 1];
    j->generation = gen;
    pd__journal_path(j, "log", gen, "", path, sizeof path);
    j->fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC); /* read: its magic is checked */
    if (j->fd < 0 && errno == ENOENT) {
        j->fd = pd__create_file(path, O_APPEND);
        if (j->fd >= 0 && (fdatasync(j->fd) != 0 || pd__fsync_dir(j->dir) != 0)) {
            close(j->fd);
            j->fd = -1;
        }
    }
    uint64_t size = 0;
    if (j->fd < 0 || pd__ensure_magic(j->fd, &size) != 0) {
        snprintf(err, errlen, "journal: cannot open %s for appending: %s", path,
                 errno == EINVAL ? "it does not start with a journal header" : strerror(errno));
        return -1;
    }
    atomic_store(&j->log_bytes, size);
    return 0;
}

/* A journal not yet opened: its options (dir copied), its locks. NULL
 * with the reason in err. */
static pd_journal *pd__journal_new(const pd_journal_opts *opts, char *err, size_t errlen)
{
    if (!opts->dir || !opts->dir[0] || strlen(opts->dir) >= PD_CONF_MAX_DATA_DIR) {
        snprintf(err, errlen, "journal: no data_dir, or one longer than %d bytes", PD_CONF_MAX_DATA_DIR - 1);
        return NULL;
    }
    pd_journal *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(err, errlen, "journal: out of memory");
        return NULL;
    }
    snprintf(j->dir, sizeof j->dir, "%s", opts->dir);
    j->opts = *opts;
    j->opts.dir = j->dir;
    j->fsync = opts->fsync;
    j->compact_bytes = opts->compact_bytes;
    j->fd = -1;
    j->lock_fd = -1;
    pthread_mutex_init(&j->lock, NULL);
    pthread_mutex_init(&j->fd_lock, NULL);
    pthread_mutex_init(&j->compact_lock, NULL);
    return j;
}

/* Takes the directory, replays it into r (and ws) and opens the log for
 * appending: 0, or -1 with the reason in err (j is then to be closed). */
static int pd__journal_start(pd_journal *j, pd_registry *r, pd_world_store *ws, pd_journal_replay_stats *stats,
                             char *err, size_t errlen)
{
    pd_journal_replay_stats local;
    if (!stats)
        stats = &local;
    memset(stats, 0, sizeof *stats);
    uint64_t started = pd_clock_us();
    if (j->lock_fd >= 0) {
        snprintf(err, errlen, "journal: %s is open already", j->dir);
        return -1;
    }
    char path[PD_CONF_MAX_DATA_DIR + PD__JOURNAL_NAME_MAX];
    snprintf(path, sizeof path, "%s/lock", j->dir);
    if (mkdir(j->dir, 0755) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "journal: cannot make data_dir %s: %s", j->dir, strerror(errno));
        return -1;
    }
    j->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (j->lock_fd < 0 || flock(j->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        snprintf(err, errlen, "journal: %s: %s", path,
                 errno == EWOULDBLOCK ? "another pathd uses this data_dir" : strerror(errno));
        return -1;
    }
    pd__files f;
    if (pd__list_files(j, &f, err, errlen) != 0)
        return -1;
    pd__replay rp = { .opts = &j->opts, .r = r, .ws = ws, .stats = stats };
    rp.n_config = pd_registry_list(r, &rp.config);
    int rc = pd__replay_all(j, &f, &rp, err, errlen);
    pd__replay_free(&rp);
    if (rc == 0)
        rc = pd__open_log(j, &f, err, errlen);
    if (rc == 0)
        pd__remove_before(j, &f, f.n_snaps ? f.snaps[f.n_snaps - 1] : 0);
    free(f.snaps);
    free(f.logs);
    if (rc != 0)
        return -1;
    stats->generation = j->generation;
    stats->micros = pd_clock_us() - started;
    return 0;
}

pd_journal *pd_journal_open(const pd_journal_opts *opts, pd_registry *r, pd_world_store *ws,
                            pd_journal_replay_stats *stats, char *err, size_t errlen)
{
    if (stats)
        memset(stats, 0, sizeof *stats);
    pd_journal *j = pd__journal_new(opts, err, errlen);
    if (j && pd__journal_start(j, r, ws, stats, err, errlen) != 0) {
        pd_journal_close(j);
        j = NULL;
    }
    return j;
}

void pd_journal_close(pd_journal *j)
{
    if (!j)
        return;
    if (j->fd >= 0) {
        if (j->fsync != PD_CONF_FSYNC_NO)
            (void)fdatasync(j->fd);
        close(j->fd);
    }
    if (j->lock_fd >= 0)
        close(j->lock_fd); /* lets go of the flock */
    pthread_mutex_destroy(&j->lock);
    pthread_mutex_destroy(&j->fd_lock);
    pthread_mutex_destroy(&j->compact_lock);
    free(j);
}

/* ---- compaction --------------------------------------------------------- */

/* Where the records of a snapshot go: its file (fd, counting bytes), or
 * the log (j, for a reload's block of them). */
typedef struct pd__sink {
    pd_journal *j;
    int fd;
    uint64_t *bytes;
    const pd_scene **bases;       /* BASE records written so far; id = index */
    size_t n_bases;
} pd__sink;

static int pd__write_record(int fd, const pd_journal_record *rec, uint64_t *bytes);

static int pd__emit(pd__sink *k, const pd_journal_record *rec)
{
    return k->j ? pd__append_record(k->j, rec) : pd__write_record(k->fd, rec, k->bytes);
}

/* An unchanged instance over cells no served template holds: a BASE record
 * of those cells (once per base, numbered from 0 in this sink), then its
 * INSTANCE_OF_BASE, so it shares them again after a restart. */
static int pd__emit_instance_of_base(pd__sink *k, const pd_scene *s)
{
    size_t id = 0;
    while (id < k->n_bases && k->bases[id] != s->base)
        id++;
    if (id == k->n_bases) {
        const pd_scene **grown = realloc(k->bases, (k->n_bases + 1) * sizeof *grown);
        if (!grown)
            return -1;
        k->bases = grown;
        pd_journal_record base;
        if (pd__scene_record(s->base, PD_JOURNAL_BASE, &base) != 0)
            return -1;
        k->bases[k->n_bases++] = s->base;
        base.base_id = (uint32_t)id;
        int rc = pd__emit(k, &base);
        pd_journal_record_free(&base);
        if (rc != 0)
            return rc;
    }
    pd_journal_record rec = { .type = PD_JOURNAL_INSTANCE_OF_BASE, .version = s->version, .base_id = (uint32_t)id };
    snprintf(rec.scene, sizeof rec.scene, "%s", s->name);
    return pd__emit(k, &rec);
}

/* A scene with its cells (and authored cells). */
static int pd__emit_scene(pd__sink *k, const pd_scene *s)
{
    pd_journal_record rec;
    int rc = pd__scene_record(s, PD_JOURNAL_SCENE, &rec);
    if (rc == 0)
        rc = pd__emit(k, &rec);
    pd_journal_record_free(&rec);
    return rc;
}

/* Writes one record to a snapshot being made. */
static int pd__write_record(int fd, const pd_journal_record *rec, uint64_t *bytes)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    if (pd_journal_encode(rec, &buf, &len) != 0)
        return -1;
    int rc = pd_write_all(fd, buf, len, PD_WRITE_AT_OFFSET);
    free(buf);
    *bytes += len;
    return rc;
}

/* The scene records of a snapshot, in an order replay can follow: every
 * scene that is not an unchanged instance first (a config scene unchanged
 * since it was loaded as RESET, the rest with their cells), then each
 * unchanged instance - by its template's name when the template still
 * serves the snapshot the instance shares, else over a BASE record of the
 * shared cells, written once - so instances still share after a restart. */
static int pd__write_snapshot(int fd, pd_scene **list, size_t n, uint64_t *bytes)
{
    pd__sink k = { .fd = fd, .bytes = bytes };
    int rc = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        for (size_t i = 0; i < n && rc == 0; i++) {
            const pd_scene *s = list[i];
            int config_as_loaded = !s->runtime && !pd_scene_authored_grid(s);
            int shared = !config_as_loaded && s->base && !pd_scene_authored_grid(s);
            if (pass == 0 && config_as_loaded) {
                pd_journal_record rec = { .type = PD_JOURNAL_RESET, .version = s->version };
                snprintf(rec.scene, sizeof rec.scene, "%s", s->name);
                rc = pd__emit(&k, &rec);
            } else if (pass == 0 && !shared) {
                rc = pd__emit_scene(&k, s);
            } else if (pass == 1 && shared) {
                const pd_scene *tmpl = NULL;
                for (size_t t = 0; t < n && !tmpl; t++)
                    if (list[t] == s->base || (list[t]->base == s->base && !pd_scene_authored_grid(list[t]) &&
                                               !list[t]->runtime))
                        tmpl = list[t];
                if (!tmpl) {
                    rc = pd__emit_instance_of_base(&k, s);
                    continue;
                }
                pd_journal_record rec = { .type = PD_JOURNAL_INSTANCE, .version = s->version,
                                          .tmpl_version = tmpl->version };
                snprintf(rec.scene, sizeof rec.scene, "%s", s->name);
                snprintf(rec.tmpl, sizeof rec.tmpl, "%s", tmpl->name);
                rc = pd__emit(&k, &rec);
            }
        }
    }
    free(k.bases);
    return rc;
}

int pd_journal_snapshot(pd_journal *j, pd_registry *r, char *err, size_t errlen)
{
    char path[PD_CONF_MAX_DATA_DIR + PD__JOURNAL_NAME_MAX], tmp[sizeof path];
    pthread_mutex_lock(&j->compact_lock);
    if (pd_journal_lock(j) != 0) {
        snprintf(err, errlen, "%s", j->error);
        pthread_mutex_unlock(&j->compact_lock);
        return -1;
    }
    /* The state now and the log that follows it, taken together under the
     * change lock: every record lands either before the list (and in the
     * snapshot) or after it (in the new log). */
    uint64_t gen = j->generation + 1;
    pd__journal_path(j, "log", gen, "", path, sizeof path);
    int fd = pd__create_file(path, O_APPEND);
    if (fd < 0) {
        snprintf(err, errlen, "journal: cannot make %s: %s", path, strerror(errno));
        pd_journal_unlock(j);
        pthread_mutex_unlock(&j->compact_lock);
        return -1;
    }
    pd_scene **list = NULL;
    size_t n = pd_registry_list(r, &list);
    pthread_mutex_lock(&j->fd_lock);
    /* The old log's records must be on disk before it can be replaced by
     * a snapshot: with "always", the appends since the last sync, and
     * with any policy the file as a whole before its removal. */
    int old_fd = j->fd;
    int synced = fdatasync(old_fd);
    j->fd = fd;
    atomic_store(&j->dirty, 0);
    pthread_mutex_unlock(&j->fd_lock);
    close(old_fd);
    j->generation = gen;
    atomic_store(&j->log_bytes, PD_JOURNAL_MAGIC_BYTES);
    pd_journal_unlock(j);

    int rc = synced;
    uint64_t bytes = PD_JOURNAL_MAGIC_BYTES;
    pd__journal_path(j, "snapshot", gen, ".tmp", tmp, sizeof tmp);
    int sfd = rc == 0 ? pd__create_file(tmp, 0) : -1;
    if (sfd < 0 || pd__write_snapshot(sfd, list, n, &bytes) != 0 || fsync(sfd) != 0 ||
        pd__fsync_dir(j->dir) != 0) {
        snprintf(err, errlen, "journal: writing %s: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (sfd >= 0)
        close(sfd);
    pd_registry_release_list(list, n);
    pd__journal_path(j, "snapshot", gen, "", path, sizeof path);
    if (rc == 0 && (rename(tmp, path) != 0 || pd__fsync_dir(j->dir) != 0)) {
        snprintf(err, errlen, "journal: renaming %s: %s", tmp, strerror(errno));
        rc = -1;
    }
    if (rc == 0)
        atomic_store(&j->snapshot_bytes, bytes);
    else
        unlink(tmp);
    pthread_mutex_unlock(&j->compact_lock);
    return rc;
}

int pd_journal_drop_old(pd_journal *j, char *err, size_t errlen)
{
    pthread_mutex_lock(&j->compact_lock);
    pd__files f;
    int rc = pd__list_files(j, &f, err, errlen);
    if (rc == 0) {
        /* Replay starts at the newest snapshot: what is older is not read. */
        if (f.n_snaps)
            pd__remove_before(j, &f, f.snaps[f.n_snaps - 1]);
        free(f.snaps);
        free(f.logs);
    }
    pthread_mutex_unlock(&j->compact_lock);
    return rc;
}

int pd_journal_compact(pd_journal *j, pd_registry *r, char *err, size_t errlen)
{
    int rc = pd_journal_snapshot(j, r, err, errlen);
    if (rc == 0)
        (void)pd_journal_drop_old(j, err, errlen); /* what stays is not read again */
    return rc;
}

/* ---- a scene's tail ------------------------------------------------------ */

/* One pass of pd_journal_tail over a file. */
typedef struct pd__tail {
    const char *scene;
    uint64_t from;
    int pass;                     /* 0: the snapshot, 1: find `from` in the log, 2: give */
    int held;                     /* the snapshot holds the scene ... */
    uint64_t held_version;        /* ... at this version */
    int found;                    /* pass 1: a record of the log made `from` ... */
    size_t found_at;              /* ... at this offset (the last such) */
    int first_seen;               /* pass 1: the scene's first record in the log ... */
    int first_follows;            /* ... is an UPDATE that made from + 1 */
    int giving;                   /* pass 2: past that record */
    pd_journal_tail_fn fn;
    void *user;
    int stopped;
} pd__tail;

static int pd__tail_record(void *user, const uint8_t *payload, size_t len, size_t offset)
{
    pd__tail *t = user;
    pd_journal_record rec;
    char err[128];
    if (pd_journal_decode(payload, len, &rec, err, sizeof err) != 0)
        return 0; /* replay skips it too */
    if (strcmp(rec.scene, t->scene) == 0) {
        if (t->pass == 0 && rec.type != PD_JOURNAL_DROP) {
            t->held = 1;
            t->held_version = rec.version;
        } else if (t->pass == 1) {
            if (!t->first_seen)
                t->first_follows = rec.type == PD_JOURNAL_UPDATE && rec.version == t->from + 1;
            t->first_seen = 1;
            if (rec.type != PD_JOURNAL_DROP && rec.version == t->from) {
                t->found = 1;
                t->found_at = offset;
            }
        } else if (t->pass == 2 && t->giving && t->fn(t->user, &rec) != 0) {
            t->stopped = 1;
        }
    }
    if (t->pass == 2 && t->found && offset == t->found_at)
        t->giving = 1;
    pd_journal_record_free(&rec);
    return t->stopped;
}

/* Scans one file of the directory with pd__tail_record; a file that is not
 * there scans as empty. */
static int pd__tail_file(pd_journal *j, const char *kind, pd__tail *t, char *err, size_t errlen)
{
    char path[PD_CONF_MAX_DATA_DIR + PD__JOURNAL_NAME_MAX];
    pd__journal_path(j, kind, j->generation, "", path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "journal: cannot read %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    uint8_t *map = NULL;
    if (size > PD_JOURNAL_MAGIC_BYTES &&
        (map = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0)) == MAP_FAILED) {
        snprintf(err, errlen, "journal: cannot map %s: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    close(fd);
    if (map) {
        pd_journal_scan_result res;
        if (memcmp(map, PD_JOURNAL_MAGIC, PD_JOURNAL_MAGIC_BYTES) == 0)
            pd_journal_scan(map + PD_JOURNAL_MAGIC_BYTES, size - PD_JOURNAL_MAGIC_BYTES, pd__tail_record, t, &res);
        munmap(map, size);
    }
    return 0;
}

int pd_journal_tail(pd_journal *j, const char *scene, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                    size_t errlen)
{
    /* No compaction meanwhile: the snapshot and the log read are one
     * generation's, and no record moves from the one to the other. */
    pthread_mutex_lock(&j->compact_lock);
    pd__tail t = { .scene = scene, .from = from, .fn = fn, .user = user };
    int rc = pd__tail_file(j, "snapshot", &t, err, errlen);
    t.pass = 1;
    if (rc == 0)
        rc = pd__tail_file(j, "log", &t, err, errlen);
    /* Without the record that made `from` in the log, the tail starts at
     * the log's start only if that is where the scene stood at `from`: the
     * snapshot holds it at `from`, or (none there) from is 0 or the log's
     * first record of it is the update made on `from` (a config scene
     * updated since it was loaded). */
    if (rc == 0 && !t.found && !(t.held ? t.held_version == from : from == 0 || t.first_follows))
        rc = 1;
    t.pass = 2;
    t.giving = !t.found;
    if (rc == 0)
        rc = pd__tail_file(j, "log", &t, err, errlen);
    pthread_mutex_unlock(&j->compact_lock);
    return rc;
}

/* ---- replaying a change log kept elsewhere ------------------------------- */

pd_journal_replayer *pd_journal_replayer_create(pd_registry *r, pd_world_store *ws)
{
    pd_journal_replayer *rp = calloc(1, sizeof *rp);
    if (rp) {
        rp->r = r;
        rp->ws = ws;
        rp->stats = &rp->own_stats;
        rp->n_config = pd_registry_list(r, &rp->config);
        rp->config_locks = pthread_mutex_init(&rp->config_lock, NULL) == 0;
        if (!rp->config_locks) {
            pd__replay_free(rp);
            free(rp);
            return NULL;
        }
    }
    return rp;
}

pd_scene *pd_journal_replayer_config(pd_journal_replayer *rp, const char *name)
{
    if (rp->config_locks)
        pthread_mutex_lock(&rp->config_lock);
    pd_scene *cfg = NULL;
    for (size_t i = 0; i < rp->n_config && !cfg; i++)
        if (strcmp(rp->config[i]->name, name) == 0)
            pd_scene_retain(cfg = rp->config[i]);
    if (rp->config_locks)
        pthread_mutex_unlock(&rp->config_lock);
    return cfg;
}

void pd_journal_replayer_set_config(pd_journal_replayer *rp, pd_scene **scenes, size_t n)
{
    pthread_mutex_lock(&rp->config_lock);
    pd_scene **old = rp->config;
    size_t n_old = rp->n_config;
    rp->config = scenes;
    rp->n_config = n;
    pthread_mutex_unlock(&rp->config_lock);
    pd_registry_release_list(old, n_old);
}

const char *pd_journal_replay_one(pd_journal_replayer *rp, const pd_journal_record *rec, char *err, size_t errlen)
{
    return pd__apply(rp, rec, err, errlen);
}

void pd_journal_replayer_destroy(pd_journal_replayer *rp)
{
    if (!rp)
        return;
    pd__replay_free(rp);
    if (rp->config_locks)
        pthread_mutex_destroy(&rp->config_lock);
    free(rp);
}

/* ---- reloads ------------------------------------------------------------ */

struct pd_journal_reload {
    pd_scene **fresh;             /* the set's scenes, retained */
    size_t n_fresh;
    pd_scene **before;            /* what was served before the publish */
    size_t n_before;
};

pd_journal_reload *pd_journal_reload_begin(pd_journal *j, pd_registry *r, const pd_scene_set *set)
{
    pd_journal_reload *rl = calloc(1, sizeof *rl);
    size_t n = 0;
    pd_scene *const *scenes = pd_scene_set_scenes(set, &n);
    /* A scene the set keeps goes on as it is: nothing to record. */
    if (rl && n && !(rl->fresh = malloc(n * sizeof *rl->fresh))) {
        free(rl);
        rl = NULL;
    }
    if (!rl) {
        snprintf(j->error, sizeof j->error, "journal: out of memory recording a reload");
        atomic_store(&j->failed, 1);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (pd_scene_set_kept(set, i))
            continue;
        pd_scene_retain(scenes[i]);
        rl->fresh[rl->n_fresh++] = scenes[i];
    }
    rl->n_before = pd_registry_list(r, &rl->before);
    return rl;
}

/* The scene served before the publish under name, or NULL. */
static const pd_scene *pd__served_before(const pd_journal_reload *rl, const char *name)
{
    for (size_t i = 0; i < rl->n_before; i++)
        if (strcmp(rl->before[i]->name, name) == 0)
            return rl->before[i];
    return NULL;
}

/* Whether s descends, through instances, from a config scene this reload
 * built anew (the one served before under that config scene's name). */
static int pd__from_replaced_template(const pd_journal_reload *rl, const pd_scene *s)
{
    if (!s->runtime || !s->template_lineage)
        return 0;
    for (size_t i = 0; i < rl->n_fresh; i++) {
        const pd_scene *was = pd__served_before(rl, rl->fresh[i]->name);
        if (was && was != rl->fresh[i] && was->lineage == s->template_lineage)
            return 1;
    }
    return 0;
}

/* Records the cells of every instance of a config scene the reload built
 * anew: their INSTANCE records (and updates) would replay onto the new map
 * after a restart. An unchanged instance is written as a snapshot writes
 * one whose template moved on (BASE, numbered from 0 in this block, and
 * INSTANCE_OF_BASE), a changed one as a SCENE record. A failed append
 * marks the journal failed, as every append does. */
static void pd__record_orphans(pd_journal *j, const pd_journal_reload *rl, pd_scene **served, size_t n)
{
    pd__sink k = { .j = j };
    for (size_t i = 0; i < n; i++) {
        const pd_scene *s = served[i];
        if (!pd__from_replaced_template(rl, s))
            continue;
        int rc = s->base && !pd_scene_authored_grid(s) ? pd__emit_instance_of_base(&k, s) : pd__emit_scene(&k, s);
        if (rc != 0 && !pd_journal_failed(j))
            pd__append(j, NULL, 0, 0); /* out of memory: the journal takes no more changes */
    }
    free(k.bases);
}

void pd_journal_reload_end(pd_journal *j, pd_registry *r, pd_journal_reload *rl)
{
    if (!rl)
        return;
    pd_scene **served = NULL;
    size_t n_served = pd_registry_list(r, &served);
    pd__record_orphans(j, rl, served, n_served);
    pd_registry_release_list(served, n_served);
    for (size_t i = 0; i < rl->n_fresh; i++) {
        pd_scene *now = pd_registry_acquire(r, rl->fresh[i]->name);
        if (now == rl->fresh[i])
            pd_journal_append_reset(j, now->name, now->version);
        pd_scene_release(now);
    }
    for (size_t i = 0; i < rl->n_before; i++) {
        pd_scene *now = pd_registry_acquire(r, rl->before[i]->name);
        if (!now)
            pd_journal_append_drop(j, rl->before[i]->name, rl->before[i]->version);
        pd_scene_release(now);
    }
    pd_registry_release_list(rl->fresh, rl->n_fresh);
    pd_registry_release_list(rl->before, rl->n_before);
    free(rl);
}

/* ---- the journal as the store's change log ------------------------------ */

static int pd__log_lock(void *log)
{
    return pd_journal_lock(log);
}

static void pd__log_unlock(void *log)
{
    pd_journal_unlock(log);
}

static int pd__log_append(void *log, const pd_journal_record *rec)
{
    return pd_journal_append(log, rec);
}

static int pd__log_sync(void *log)
{
    return pd_journal_sync(log);
}

static int pd__log_dirty(void *log)
{
    return pd_journal_dirty(log);
}

static const char *pd__log_why(void *log)
{
    return pd_journal_error(log);
}

static int pd__log_failed(void *log)
{
    return pd_journal_failed(log);
}

static void *pd__log_reload_begin(void *log, pd_registry *r, const pd_scene_set *set)
{
    pd_journal *j = log;
    if (pd_journal_lock(j) != 0)
        return NULL;
    pd_journal_reload *rl = pd_journal_reload_begin(j, r, set);
    if (!rl)
        pd_journal_unlock(j);
    return rl;
}

static void pd__log_reload_end(void *log, pd_registry *r, void *state)
{
    pd_journal_reload_end(log, r, state);
    pd_journal_unlock(log);
}

static int pd__log_replay(void *log, pd_registry *r, pd_world_store *ws, pd_journal_replay_stats *stats, char *err,
                          size_t errlen)
{
    return pd__journal_start(log, r, ws, stats, err, errlen);
}

static int pd__log_tail(void *log, const char *scene, uint64_t from, pd_journal_tail_fn fn, void *user, char *err,
                        size_t errlen)
{
    return pd_journal_tail(log, scene, from, fn, user, err, errlen);
}

static int pd__log_snapshot(void *log, pd_registry *r, char *err, size_t errlen)
{
    return pd_journal_snapshot(log, r, err, errlen);
}

static int pd__log_compact(void *log, char *err, size_t errlen)
{
    return pd_journal_drop_old(log, err, errlen);
}

static int pd__log_wants_compaction(void *log)
{
    return pd_journal_wants_compaction(log);
}

static void pd__log_sizes(void *log, uint64_t *log_bytes, uint64_t *snapshot_bytes)
{
    pd_journal_sizes(log, log_bytes, snapshot_bytes);
}

static void pd__log_close(void *log)
{
    pd_journal_close(log);
}

static const pd_changelog_ops pd__journal_log_ops = {
    .lock = pd__log_lock,
    .unlock = pd__log_unlock,
    .append = pd__log_append,
    .sync = pd__log_sync,
    .dirty = pd__log_dirty,
    .why = pd__log_why,
    .failed = pd__log_failed,
    .reload_begin = pd__log_reload_begin,
    .reload_end = pd__log_reload_end,
    .replay = pd__log_replay,
    .tail = pd__log_tail,
    .snapshot = pd__log_snapshot,
    .compact = pd__log_compact,
    .wants_compaction = pd__log_wants_compaction,
    .sizes = pd__log_sizes,
    .close = pd__log_close,
};

pd_changelog pd_journal_changelog(pd_journal *j)
{
    return (pd_changelog){ .ops = j ? &pd__journal_log_ops : NULL, .log = j };
}

pd_changelog pd_journal_file_log(const pd_journal_opts *opts, char *err, size_t errlen)
{
    return pd_journal_changelog(pd__journal_new(opts, err, errlen));
}
