/*
 * test_fileio.c - pd_write_all (server/scene/pd_fileio.h), the one
 * whole-buffer write the journal, the reservation log and the replica's
 * cache share: at an offset (pwrite) or at the file's offset (write), on
 * through short writes and EINTR, and a failure reported with errno;
 * pd_open_dir, the one directory listing. Also pd_cmp_u64
 * (server/core/pd_sort.h), the one u64 comparator.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "pd_fileio.h"
#include "pd_sort.h"

static char path[64];

static int make_file(void)
{
    snprintf(path, sizeof path, "/tmp/pd_fileio_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    return fd;
}

static void read_back(int fd, char *out, size_t n, off_t at)
{
    assert_int_equal(pread(fd, out, n, at), (ssize_t)n);
}

/* At an offset: the bytes land there, the file's offset stays; at the
 * file's offset: they follow what is there and move it. */
static void test_at_an_offset_and_at_the_files_offset(void **state)
{
    (void)state;
    int fd = make_file();
    assert_int_equal(pd_write_all(fd, "hello", 5, PD_WRITE_AT_OFFSET), 0);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 5);
    assert_int_equal(pd_write_all(fd, "J", 1, 0), 0);
    assert_int_equal(pd_write_all(fd, "!!", 2, 8), 0);
    assert_int_equal(lseek(fd, 0, SEEK_CUR), 5); /* pwrite moved nothing */
    assert_int_equal(pd_write_all(fd, "xyz", 3, PD_WRITE_AT_OFFSET), 0);
    char got[10];
    read_back(fd, got, sizeof got, 0);
    assert_memory_equal(got, "Jelloxyz!!", sizeof got);
    assert_int_equal(pd_write_all(fd, "", 0, 3), 0); /* nothing to write: nothing done */
    close(fd);
    unlink(path);
}

/* A file size limit cuts the write short, then refuses the rest: -1 with
 * the system's errno, the part that fit written. */
static void test_a_refused_rest_is_an_error_with_errno(void **state)
{
    (void)state;
    int fd = make_file();
    struct rlimit old, lim;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = 100;
    void (*was)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    char buf[150];
    memset(buf, 'a', sizeof buf);
    errno = 0;
    int rc = pd_write_all(fd, buf, sizeof buf, PD_WRITE_AT_OFFSET);
    int e = errno;
    int rc_at = pd_write_all(fd, buf, 10, 95);
    int e_at = errno;
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, was);
    assert_int_equal(rc, -1);
    assert_int_equal(e, EFBIG);
    assert_int_equal(rc_at, -1);
    assert_int_equal(e_at, EFBIG);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, 100);
    close(fd);
    unlink(path);

    /* A descriptor not open for writing: -1, EBADF. */
    int ro = open("/dev/null", O_RDONLY);
    assert_true(ro >= 0);
    assert_int_equal(pd_write_all(ro, "x", 1, PD_WRITE_AT_OFFSET), -1);
    assert_int_equal(errno, EBADF);
    close(ro);
}

/* ---- short writes and EINTR: a pipe written while signals arrive -------- */

#define PIPE_TOTAL (4u << 20)

static atomic_int signals_caught;
static atomic_int writing;

static void on_signal(int sig)
{
    (void)sig;
    atomic_fetch_add(&signals_caught, 1);
}

typedef struct {
    int fd;
    unsigned char *got;
    size_t n;
} reader_arg;

static void *reader(void *p)
{
    reader_arg *r = p;
    while (r->n < PIPE_TOTAL) {
        /* Small reads: the writer keeps blocking on a full pipe, where a
         * signal interrupts it part way. */
        ssize_t k = read(r->fd, r->got + r->n, 4096);
        if (k <= 0)
            break;
        r->n += (size_t)k;
    }
    return NULL;
}

typedef struct {
    pthread_t target;
} signaller_arg;

static void *signaller(void *p)
{
    signaller_arg *s = p;
    const struct timespec pause = { 0, 50 * 1000 };
    while (atomic_load(&writing)) {
        pthread_kill(s->target, SIGUSR1);
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* Signals without SA_RESTART make write(2) on a blocked pipe return early
 * (a short count, or EINTR): every byte still arrives once, in order. */
static void test_short_writes_and_eintr_go_on(void **state)
{
    (void)state;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: the write comes back early */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    unsigned char *want = malloc(PIPE_TOTAL);
    reader_arg r = { fds[0], malloc(PIPE_TOTAL), 0 };
    assert_non_null(want);
    assert_non_null(r.got);
    for (size_t i = 0; i < PIPE_TOTAL; i++)
        want[i] = (unsigned char)(i * 2654435761u >> 13);
    atomic_store(&writing, 1);
    signaller_arg s = { pthread_self() };
    pthread_t rt, st;
    assert_int_equal(pthread_create(&rt, NULL, reader, &r), 0);
    assert_int_equal(pthread_create(&st, NULL, signaller, &s), 0);
    int rc = pd_write_all(fds[1], want, PIPE_TOTAL, PD_WRITE_AT_OFFSET);
    atomic_store(&writing, 0);
    pthread_join(st, NULL);
    close(fds[1]);
    pthread_join(rt, NULL);
    close(fds[0]);
    sigaction(SIGUSR1, &old, NULL);
    assert_int_equal(rc, 0);
    assert_int_equal(r.n, PIPE_TOTAL);
    assert_memory_equal(r.got, want, PIPE_TOTAL);
    print_message("signals during the write: %d\n", atomic_load(&signals_caught));
    free(want);
    free(r.got);
}

/* The case above need not meet EINTR itself (a signal may land between
 * writes, or after a part was written). Here it must: the pipe is full
 * before the write starts, so write(2) blocks with nothing written, and a
 * signal without SA_RESTART makes it fail with EINTR; pd_write_all must
 * try again, and every byte arrive once. */
typedef struct {
    int fd;
    const unsigned char *p;
    size_t n;
    int rc;
} blocked_writer_arg;

static void *blocked_writer(void *p)
{
    blocked_writer_arg *w = p;
    w->rc = pd_write_all(w->fd, w->p, w->n, PD_WRITE_AT_OFFSET);
    return NULL;
}

static void test_eintr_with_nothing_written_goes_on(void **state)
{
    (void)state;
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART */
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(SIGUSR1, &sa, &old), 0);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    /* Fill the pipe without blocking, then make the write end blocking. */
    const int fl = fcntl(fds[1], F_GETFL);
    assert_int_equal(fcntl(fds[1], F_SETFL, fl | O_NONBLOCK), 0);
    size_t filled = 0;
    unsigned char z[4096] = { 0 };
    for (;;) {
        ssize_t k = write(fds[1], z, sizeof z);
        if (k < 0) {
            assert_int_equal(errno, EAGAIN);
            break;
        }
        filled += (size_t)k;
    }
    assert_int_equal(fcntl(fds[1], F_SETFL, fl), 0);
    enum { N = 3000 };
    unsigned char want[N];
    for (size_t i = 0; i < N; i++)
        want[i] = (unsigned char)(i * 2654435761u >> 11);
    blocked_writer_arg w = { fds[1], want, N, 99 };
    atomic_store(&signals_caught, 0);
    pthread_t wt;
    assert_int_equal(pthread_create(&wt, NULL, blocked_writer, &w), 0);
    /* Several signals, 20 ms apart: the writer is blocked in write(2) for
     * all but perhaps the first. */
    const struct timespec gap = { 0, 20 * 1000 * 1000 };
    for (int i = 0; i < 5; i++) {
        nanosleep(&gap, NULL);
        pthread_kill(wt, SIGUSR1);
    }
    nanosleep(&gap, NULL);
    assert_true(atomic_load(&signals_caught) >= 1);
    /* Drain the fill (the writer goes on, or has given up), wait for the
     * writer, close its end, then read its bytes to the end. */
    unsigned char *got = malloc(filled + N);
    assert_non_null(got);
    size_t n = 0;
    for (size_t until = filled; n < until;) {
        ssize_t k = read(fds[0], got + n, until - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    pthread_join(wt, NULL);
    close(fds[1]);
    while (n < filled + N) {
        ssize_t k = read(fds[0], got + n, filled + N - n);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    sigaction(SIGUSR1, &old, NULL);
    close(fds[0]);
    assert_int_equal(w.rc, 0);
    assert_int_equal(n, filled + N);
    assert_memory_equal(got + filled, want, N);
    free(got);
}

/* A socket made and closed on another thread, with nothing ordering it
 * before the listing (as a connection the loop accepted and closed, and
 * a journal compaction on a pool thread): the directory's descriptor gets
 * its number. Closed as libuv closes one, by the system call itself,
 * which TSan does not see. */
static void *socket_made_and_closed(void *arg)
{
    (void)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (s >= 0)
        syscall(SYS_close, s);
    return NULL;
}

/* pd_open_dir lists a directory, and says ENOENT / ENOTDIR for a path
 * that is none. Run under ThreadSanitizer (make test-tsan), the listing
 * after the socket above reuses its number: with opendir(3), whose
 * descriptor TSan does not see made, closedir was reported as a data race
 * with the other thread's close (failed so before pd_open_dir). */
static void test_open_dir_lists_and_says_why_not(void **state)
{
    (void)state;
    char dir[64], file[96];
    snprintf(dir, sizeof dir, "/tmp/pd_dir_XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(file, sizeof file, "%s/log.1", dir);
    int fd = open(file, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    close(fd);

    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, socket_made_and_closed, NULL), 0);
    const struct timespec settle = { 0, 100 * 1000 * 1000 }; /* no sync: a sleep orders it */
    nanosleep(&settle, NULL);
    DIR *d = pd_open_dir(dir);
    assert_non_null(d);
    int seen = 0, others = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, "log.1") == 0)
            seen++;
        else if (e->d_name[0] != '.')
            others++;
    assert_int_equal(closedir(d), 0);
    pthread_join(t, NULL);
    assert_int_equal(seen, 1);
    assert_int_equal(others, 0);

    errno = 0;
    assert_null(pd_open_dir(file));
    assert_int_equal(errno, ENOTDIR);
    assert_int_equal(unlink(file), 0);
    assert_int_equal(rmdir(dir), 0);
    errno = 0;
    assert_null(pd_open_dir(dir));
    assert_int_equal(errno, ENOENT);
}

static void test_cmp_u64_orders_the_whole_range(void **state)
{
    (void)state;
    /* Values whose difference does not fit an int: a subtraction would
     * order them wrongly. */
    uint64_t v[] = { UINT64_MAX, 0, (uint64_t)1 << 40, 7, UINT64_MAX - 1, (uint64_t)1 << 63, 7 };
    const uint64_t sorted[] = { 0, 7, 7, (uint64_t)1 << 40, (uint64_t)1 << 63, UINT64_MAX - 1, UINT64_MAX };
    qsort(v, sizeof v / sizeof v[0], sizeof v[0], pd_cmp_u64);
    assert_memory_equal(v, sorted, sizeof v);
    uint64_t a = 5, b = 5;
    assert_int_equal(pd_cmp_u64(&a, &b), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_at_an_offset_and_at_the_files_offset),
        cmocka_unit_test(test_a_refused_rest_is_an_error_with_errno),
        cmocka_unit_test(test_short_writes_and_eintr_go_on),
        cmocka_unit_test(test_eintr_with_nothing_written_goes_on),
        cmocka_unit_test(test_open_dir_lists_and_says_why_not),
        cmocka_unit_test(test_cmp_u64_orders_the_whole_range),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
