/*
 * bench_file.h - the benchmarks' one way to read a map file whole (they
 * parse it with pd_mapfile.h themselves). Not for the daemon: no size
 * cap, no error text.
 */
#ifndef BENCH_FILE_H
#define BENCH_FILE_H

#include <stdio.h>
#include <stdlib.h>

/* The file's bytes (malloc'd; *len of them), or NULL. */
static inline char *bench_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    *len = buf ? fread(buf, 1, (size_t)n, f) : 0;
    fclose(f);
    return buf;
}

#endif
