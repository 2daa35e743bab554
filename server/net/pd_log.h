/*
 * pd_log.h - a tiny leveled logger that writes one line per message to stderr.
 *
 * Every line reads "2024-05-01T12:00:00.123Z LEVEL message": a UTC timestamp
 * with milliseconds, so lines from several daemons sort together, then the
 * level in upper case. Each line goes out in a single fputs call, so lines
 * from different threads never interleave mid-line.
 *
 * The level (pd_log_level from pd_conf.h) is process-wide and may be changed
 * at any time from any thread (SIGHUP reload sets it). Only the net layer and
 * main.c log: the layers below report through return values and messages.
 */
#ifndef PD_LOG_H
#define PD_LOG_H

#include "pd_conf.h"

void pd_log_set_level(pd_log_level level);

/* Parses "error", "warn", "info" or "debug". Returns 0, or -1 if unknown. */
int pd_log_level_parse(const char *name, pd_log_level *out);

void pd_log(pd_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#define pd_log_error(...) pd_log(PD_LOG_ERROR, __VA_ARGS__)
#define pd_log_warn(...) pd_log(PD_LOG_WARN, __VA_ARGS__)
#define pd_log_info(...) pd_log(PD_LOG_INFO, __VA_ARGS__)
#define pd_log_debug(...) pd_log(PD_LOG_DEBUG, __VA_ARGS__)

#endif
