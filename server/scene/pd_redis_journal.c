/*
 * pd_redis_journal.c - the replica's local journal of the Redis log's
 * entries, beside the snapshot cache (see pd_redis_journal.h). A cache:
 * written without fsync, trusted only after the caller has checked its
 * last entry against the log.
 */
#include "pd_redis_journal.h"
#include "pd_fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PD__RJ_MAGIC_BYTES 8u

/* Appends and cuts of every journal (one tail and one compaction per
 * process: contention is nil). */
static pthread_mutex_t pd__rj_lock = PTHREAD_MUTEX_INITIALIZER;
/* The journal the tail appended to last, kept open (a catch-up appends
 * thousands of records a second to one scene's journal); under the lock,
 * closed before a cut or a discard replaces or removes the file. */
static char pd__rj_open_path[1024];
static int pd__rj_open_fd = -1;

static void pd__rj_close_open(void)
{
    if (pd__rj_open_fd >= 0)
        close(pd__rj_open_fd);
    pd__rj_open_fd = -1;
    pd__rj_open_path[0] = '\0';
}

void pd_redis_cache_path(const char *cache_dir, const char *scene, const char *suffix, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "%s/", cache_dir);
    for (const unsigned char *p = (const unsigned char *)scene; *p && n + 3 < len; p++)
        n += (size_t)snprintf(buf + n, len - n, "%02x", *p);
    snprintf(buf + n, len - n, "%s", suffix);
}

void pd_redis_journal_path(const char *cache_dir, const char *scene, char *buf, size_t len)
{
    pd_redis_cache_path(cache_dir, scene, PD_REDIS_JOURNAL_SUFFIX, buf, len);
}

/* The entry's head: id length, id, g. Its size, or 0 when the id is too long. */
static size_t pd__rj_head(uint8_t *head, const char *id, uint64_t g)
{
    size_t il = strlen(id), n = 0;
    if (il >= 64)
        return 0;
    head[n++] = (uint8_t)il;
    memcpy(head + n, id, il);
    n += il;
    for (int i = 0; i < 8; i++)
        head[n++] = (uint8_t)(g >> (8 * i));
    return n;
}

/* Appends one entry to the file at path; keep: the fd stays open for the
 * next append (the tail's), else it is closed (a cut's tmp file). */
static int pd__rj_append_locked(const char *path, const char *id, uint64_t g, const pd_journal_record *rec, int keep)
{
    uint8_t *framed = NULL, head[1 + 64 + 8];
    size_t len = 0, hn = pd__rj_head(head, id, g);
    if (hn == 0 || pd_journal_encode(rec, &framed, &len) != 0)
        return -1;
    int fd = keep && pd__rj_open_fd >= 0 && strcmp(path, pd__rj_open_path) == 0 ? pd__rj_open_fd : -1;
    if (fd < 0) {
        if (keep)
            pd__rj_close_open();
        fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        struct stat st;
        if (fd >= 0 && (fstat(fd, &st) != 0 ||
                        (st.st_size == 0 &&
                         pd_write_all(fd, (const uint8_t *)PD_REDIS_JOURNAL_MAGIC, PD__RJ_MAGIC_BYTES, PD_WRITE_AT_OFFSET) != 0))) {
            close(fd);
            fd = -1;
        }
        if (fd >= 0 && keep) {
            pd__rj_open_fd = fd;
            snprintf(pd__rj_open_path, sizeof pd__rj_open_path, "%s", path);
        }
    }
    int ok = fd >= 0 && pd_write_all(fd, head, hn, PD_WRITE_AT_OFFSET) == 0 && pd_write_all(fd, framed, len, PD_WRITE_AT_OFFSET) == 0;
    if (fd >= 0 && (!keep || !ok)) {
        if (fd == pd__rj_open_fd)
            pd__rj_close_open(); /* a failed write may have left half an entry: reopen (it ends the file) */
        else
            close(fd);
    }
    free(framed);
    return ok ? 0 : -1;
}

int pd_redis_journal_append(const char *cache_dir, const char *scene, const char *id, uint64_t g,
                            const pd_journal_record *rec)
{
    if (rec->type != PD_JOURNAL_UPDATE)
        return 0;
    char path[1024];
    pd_redis_journal_path(cache_dir, scene, path, sizeof path);
    pthread_mutex_lock(&pd__rj_lock);
    int rc = pd__rj_append_locked(path, id, g, rec, 1);
    pthread_mutex_unlock(&pd__rj_lock);
    return rc;
}

typedef struct pd__rj_one {
    pd_journal_record *rec;
    int decoded;
    size_t end;
} pd__rj_one;

static int pd__rj_record(void *user, const uint8_t *payload, size_t len, size_t offset)
{
    pd__rj_one *o = user;
    char why[128];
    o->decoded = pd_journal_decode(payload, len, o->rec, why, sizeof why) == 0;
    o->end = offset + PD_JOURNAL_HEADER_BYTES + len;
    return 1; /* one record per entry */
}

void pd_redis_journal_free(pd_redis_journal_entry *e, size_t n)
{
    for (size_t i = 0; i < n; i++)
        pd_journal_record_free(&e[i].rec);
    free(e);
}

uint8_t *pd_redis_cache_slurp(const char *path, uint64_t max, size_t *size)
{
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    struct stat st;
    uint8_t *buf = NULL;
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0 && (uint64_t)st.st_size <= max &&
        (buf = malloc((size_t)st.st_size)) != NULL && fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size)
        *size = (size_t)st.st_size;
    fclose(f);
    if (*size == 0) {
        free(buf);
        buf = NULL;
    }
    return buf;
}

static int pd__rj_read_path(const char *path, pd_redis_journal_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    size_t size = 0;
    uint8_t *buf = pd_redis_cache_slurp(path, UINT64_MAX, &size);
    int rc = 0;
    size_t cap = 0, off = PD__RJ_MAGIC_BYTES;
    if (size < off || memcmp(buf, PD_REDIS_JOURNAL_MAGIC, PD__RJ_MAGIC_BYTES) != 0)
        off = size; /* not a journal: nothing in it */
    while (off < size) {
        size_t il = buf[off];
        if (il >= 64 || size - off < 1 + il + 8)
            break; /* torn */
        if (*n == cap) {
            size_t nc = cap ? 2 * cap : 64;
            pd_redis_journal_entry *g = realloc(*out, nc * sizeof *g);
            if (!g) {
                rc = -1;
                break;
            }
            *out = g;
            cap = nc;
        }
        pd_redis_journal_entry *e = &(*out)[*n];
        memset(e, 0, sizeof *e);
        memcpy(e->id, buf + off + 1, il);
        e->id[il] = '\0';
        off += 1 + il;
        for (int i = 0; i < 8; i++)
            e->g |= (uint64_t)buf[off + (size_t)i] << (8 * i);
        off += 8;
        pd__rj_one one = { .rec = &e->rec };
        pd_journal_scan_result res;
        pd_journal_scan(buf + off, size - off, pd__rj_record, &one, &res);
        if (!one.decoded)
            break; /* torn or damaged: the file ends here */
        off += one.end;
        (*n)++;
    }
    free(buf);
    if (rc != 0) {
        pd_redis_journal_free(*out, *n);
        *out = NULL;
        *n = 0;
    }
    return rc;
}

int pd_redis_journal_read(const char *cache_dir, const char *scene, pd_redis_journal_entry **out, size_t *n)
{
    char path[1024];
    pd_redis_journal_path(cache_dir, scene, path, sizeof path);
    pthread_mutex_lock(&pd__rj_lock);
    int rc = pd__rj_read_path(path, out, n);
    pthread_mutex_unlock(&pd__rj_lock);
    return rc;
}

int pd_redis_journal_cut(const char *cache_dir, const char *scene, uint64_t version)
{
    char path[1024], tmp[1040];
    pd_redis_journal_path(cache_dir, scene, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    pthread_mutex_lock(&pd__rj_lock);
    pd__rj_close_open(); /* the file is replaced */
    pd_redis_journal_entry *e;
    size_t n;
    int rc = pd__rj_read_path(path, &e, &n);
    if (rc == 0) {
        unlink(tmp);
        for (size_t i = 0; rc == 0 && i < n; i++)
            if (e[i].rec.version > version)
                rc = pd__rj_append_locked(tmp, e[i].id, e[i].g, &e[i].rec, 0);
        pd_redis_journal_free(e, n);
        if (rc == 0 && rename(tmp, path) != 0 && errno == ENOENT)
            unlink(path); /* nothing past the snapshot: no journal */
        else if (rc != 0)
            unlink(tmp);
    }
    pthread_mutex_unlock(&pd__rj_lock);
    return rc;
}

void pd_redis_journal_discard(const char *cache_dir, const char *scene)
{
    char path[1024];
    pd_redis_journal_path(cache_dir, scene, path, sizeof path);
    pthread_mutex_lock(&pd__rj_lock);
    pd__rj_close_open();
    unlink(path);
    pthread_mutex_unlock(&pd__rj_lock);
}
