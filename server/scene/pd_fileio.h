/*
 * pd_fileio.h - the file calls every log the scene layer keeps in
 * data_dir shares: the change journal (pd_journal), the reservation log
 * (pd_reserve_log) and the replica's snapshot cache and its journal
 * (pd_redis_snapshot, pd_redis_journal). The one loop that writes a whole
 * buffer: write(2) and pwrite(2) may write less than asked (a signal, a
 * full disk), and each log once had its own copy of the retry loop; here
 * it is once. And the one way to list a directory (pd_open_dir). The core
 * layer does no I/O, so this is the lowest layer it fits.
 */
#ifndef PD_FILEIO_H
#define PD_FILEIO_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>

/* pd_write_all's `at` for "at the file's offset" (write(2), which moves it). */
#define PD_WRITE_AT_OFFSET (-1)

/* Writes p[0..n) whole to fd: at byte `at` (pwrite(2); the file's offset
 * does not move), or with PD_WRITE_AT_OFFSET at the file's offset
 * (write(2)). Short writes go on where they stopped; EINTR is tried
 * again. 0, or -1 with errno set (EIO for a write that wrote nothing)
 * and an unknown part of p written. */
int pd_write_all(int fd, const void *p, size_t n, int64_t at);

/* opendir(3) of path (close it with closedir(3)), or NULL with errno set.
 * Its descriptor is made by open(2), which ThreadSanitizer sees:
 * opendir(3) makes it inside libc, unseen, and libuv closes sockets by
 * the system call, unseen too, so a closedir of a number a connection
 * the loop accepted and closed had before was reported as a data race
 * (the TSan run of test_e2e_reload failed so once in CI). */
DIR *pd_open_dir(const char *path);

#endif
