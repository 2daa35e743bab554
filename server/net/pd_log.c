/*
 * pd_log.c - the stderr logger (see pd_log.h).
 *
 * The line is formatted into a stack buffer first and written with one fputs,
 * because stdio locks the stream per call: two threads logging at once give
 * two whole lines, never a mix. Over-long messages are cut, not dropped.
 */
#include "pd_log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Longest line written, in bytes; longer messages end in "...". Map errors
 * with file paths fit comfortably. */
#define PD_LOG_LINE_MAX 1024

static atomic_int pd__log_level = PD_LOG_INFO;

void pd_log_set_level(pd_log_level level)
{
    atomic_store(&pd__log_level, (int)level);
}

int pd_log_level_parse(const char *name, pd_log_level *out)
{
    static const pd_log_level levels[] = {PD_LOG_ERROR, PD_LOG_WARN, PD_LOG_INFO, PD_LOG_DEBUG};
    for (size_t i = 0; i < sizeof levels / sizeof levels[0]; i++) {
        if (strcmp(name, pd_log_level_name(levels[i])) == 0) {
            *out = levels[i];
            return 0;
        }
    }
    return -1;
}

static const char *pd__log_tag(pd_log_level level)
{
    switch (level) {
    case PD_LOG_ERROR:
        return "ERROR";
    case PD_LOG_WARN:
        return "WARN";
    case PD_LOG_INFO:
        return "INFO";
    case PD_LOG_DEBUG:
        return "DEBUG";
    }
    return "?";
}

void pd_log(pd_log_level level, const char *fmt, ...)
{
    if ((int)level > atomic_load(&pd__log_level))
        return;

    char line[PD_LOG_LINE_MAX];
    struct timespec now;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s ",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                     tm.tm_sec, now.tv_nsec / 1000000L, pd__log_tag(level));
    if (n < 0)
        return;

    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;

    size_t used = (size_t)n + (size_t)m;
    if (used > sizeof line - 2) {
        /* Cut: mark the cut and keep room for the newline. */
        memcpy(line + sizeof line - 5, "...", 3);
        used = sizeof line - 2;
    }
    line[used] = '\n';
    line[used + 1] = '\0';
    fputs(line, stderr);
}
