/*
 * pd_fileio.c - pd_write_all, the whole-buffer write every log in
 * data_dir uses, and pd_open_dir (see pd_fileio.h).
 */
#define _GNU_SOURCE
#include "pd_fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

int pd_write_all(int fd, const void *p, size_t n, int64_t at)
{
    const unsigned char *b = p;
    while (n > 0) {
        ssize_t w = at < 0 ? write(fd, b, n) : pwrite(fd, b, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        /* write(2) of n > 0 bytes to a file returns 0 only when it cannot
         * go on; trying again would spin. */
        if (w == 0) {
            errno = EIO;
            return -1;
        }
        b += w;
        n -= (size_t)w;
        if (at >= 0)
            at += w;
    }
    return 0;
}

DIR *pd_open_dir(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    DIR *d = fdopendir(fd);
    if (!d) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return d;
}
