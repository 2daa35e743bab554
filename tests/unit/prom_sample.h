/*
 * prom_sample.h - reads one sample out of a Prometheus text exposition, for
 * the tests that scrape pathd's /metrics (test_metrics.c renders it in
 * process, test_e2e_memory.c fetches it from the daemon). Include after
 * <cmocka.h>.
 */
#ifndef PROM_SAMPLE_H
#define PROM_SAMPLE_H

#include <stdlib.h>
#include <string.h>

/* The value of the sample line "name value"; fails the test without one. */
static inline double prom_sample(const char *text, const char *name)
{
    const size_t len = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, name, len) == 0 && p[len] == ' ')
            return strtod(p + len + 1, NULL);
    fail_msg("no sample %s", name);
    return -1.0;
}

#endif
