/*
 * pd_journal_loop.h - the journal as the server runs it (pd_journal_loop.c):
 * its replay at start and its everysec fsync and compaction on libuv's
 * threadpool. Calls nothing else in the net layer but the logger.
 */
#ifndef PD_JOURNAL_LOOP_H
#define PD_JOURNAL_LOOP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pd_journal.h"
#include "pd_server.h"

/* The journal state: the server's part that pd_journal_loop.c owns (the
 * log itself is the store's: pd_store_has_log, pd_store_destroy closes it). */
typedef struct pd__journal_state {
    uv_timer_t timer;            /* the everysec fsync and the compaction check */
    int jobs;                    /* journal work on libuv's threadpool */
    int syncing;                 /* an everysec fsync is queued or running */
    int compacting;              /* a compaction is queued or running */
    int compact_wanted;          /* a reload built config scenes anew: compact as soon
                                    as no compaction runs (pd__journal_after_reload) */
} pd__journal_state;

/* pd_server_open_journal and pd_server_journal_state (pd_server.h), which
 * pd_server.c answers with these. */
int pd__journal_open(pd_server *s, char *err, size_t errlen);
int pd__journal_sizes(pd_server *s, uint64_t *log_bytes, uint64_t *snapshot_bytes, int *failed);

/* After a reload that built `built` config scenes anew: asks for a
 * compaction (see pd_journal_loop.c for why). */
void pd__journal_after_reload(pd_server *s, size_t built);

#endif
