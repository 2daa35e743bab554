/*
 * pd_watchers.h - Watch subscriptions (pd_watchers.c): who watches which
 * scene and getting each change to them in version order, all on the loop
 * thread. Sends through the connection (pd_conn.h) and calls nothing above
 * it. The event itself is the query layer's (pd_watch.h).
 */
#ifndef PD_WATCHERS_H
#define PD_WATCHERS_H

#include <stddef.h>
#include <stdint.h>

#include "pd_conn.h"
#include "pd_watch.h"

typedef struct pd__watch_hub pd__watch_hub;

/* The watch state: the server's part that pd_watchers.c owns. */
typedef struct pd__watch_state {
    pd__watch_hub *hub;          /* subscriptions; NULL until the first Watch */
    uint64_t events_total;       /* watch frames queued for watchers */
    uint64_t dropped_total;      /* watches ended by WATCH_OVERFLOW */
} pd__watch_state;

/* _publish hands a change to the scene's watchers (in version order, see
 * pd_watchers.c's top); _start and _stop answer Watch and Unwatch; a closed
 * or lingering connection's watches go with _conn_closed (no frame is
 * sent); a reload's changes are found by comparing the watched scenes'
 * snapshots around the publish (_reload_begin before it, _reload_end
 * after; both take NULL). */
void pd__watch_publish(pd_server *s, const pd_watch_event *ev);
void pd__watch_start(pd__conn *c, const pd_request *req);
void pd__watch_stop(pd__conn *c, const pd_request *req);
void pd__watch_conn_closed(pd__conn *c);
size_t pd__watch_count(const pd_server *s);
/* What publishing has cost since the hub was made, for tests: the
 * subscriptions announcements visited (only the event's scene's), and the
 * event bodies encoded (one per event, whatever its watchers). */
typedef struct pd__watch_work {
    uint64_t visits;
    uint64_t encodes;
} pd__watch_work;
pd__watch_work pd__watch_work_done(const pd_server *s);
void pd__watch_hub_free(pd_server *s);
typedef struct pd__watch_reload pd__watch_reload;
pd__watch_reload *pd__watch_reload_begin(pd_server *s);
void pd__watch_reload_end(pd_server *s, pd__watch_reload *rl);

#endif
