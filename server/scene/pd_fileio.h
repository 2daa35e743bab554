/*
 * pd_fileio.h - the one loop that writes a whole buffer to a file, for
 * every log the scene layer keeps in data_dir: the change journal
 * (pd_journal), the reservation log (pd_reserve_log) and the replica's
 * snapshot cache and its journal (pd_redis_snapshot, pd_redis_journal).
 * write(2) and pwrite(2) may write less than asked (a signal, a full
 * disk), and each log once had its own copy of the retry loop; here it is
 * once. The core layer does no I/O, so this is the lowest layer it fits.
 */
#ifndef PD_FILEIO_H
#define PD_FILEIO_H

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

#endif
