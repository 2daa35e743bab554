/*
 * pd_status.h - the one closed list of outcomes every layer reports.
 *
 * The numeric values are the wire values of pathd.v1.Status (proto/pathd.proto),
 * so the codec converts with a range check instead of a lookup table. Core
 * search functions only ever return the first group; the rest belong to the
 * scene, worker and net layers but live here so there is a single list.
 */
#ifndef PD_STATUS_H
#define PD_STATUS_H

#include <stddef.h>

typedef enum pd_status {
    PD_OK = 0,
    PD_PARTIAL = 1,             /* succeeded, but with a substituted goal or a cut-off path */
    PD_NO_PATH = 2,             /* start and goal are not connected */
    PD_UNKNOWN_SCENE = 3,
    PD_OUT_OF_BOUNDS = 4,       /* start or goal lies outside the grid */
    PD_START_BLOCKED = 5,
    PD_GOAL_BLOCKED = 6,
    PD_INVALID_ARGUMENT = 7,    /* a field is out of its documented range */
    PD_BUDGET_EXCEEDED = 8,     /* the expansion budget ran out before the goal */
    PD_DEADLINE_EXCEEDED = 9,
    PD_CANCELLED = 10,
    PD_OVERLOADED = 11,         /* retryable: a queue or limit is full right now */
    PD_MALFORMED = 12,          /* a frame that does not decode */
    PD_FRAME_TOO_LARGE = 13,
    PD_INTERNAL = 14,           /* a bug or an allocation failure on our side */
    PD_BUFFER_TOO_SMALL = 15,   /* core only: the caller's path buffer is short;
                                   never sent on the wire (callers grow and re-extract) */
    PD_UNAUTHENTICATED = 16,    /* the connection has not authenticated (or a wrong token) */
    PD_PERMISSION_DENIED = 17,  /* the connection's role does not allow the request */
    /* 18..29 are unused; 30..39 belong to the live world (scenes made at run time). */
    PD_SCENE_EXISTS = 30,       /* CreateScene / CreateInstance: the name is served already */
    PD_SCENE_IN_USE = 31,       /* DropScene: portals name the scene (drop_portals not set) */
    PD_LIMIT_EXCEEDED = 32,     /* a named cap would be passed: scenes (count, cells, memory),
                                   watches, a Batch's items (the in-flight cap) */
    /* 33..39 are unused; 40..49 belong to hearing about changes. */
    PD_STALE_VERSION = 40,      /* retryable: the snapshot is older than the request's min_version */
    PD_WATCH_OVERFLOW = 41,     /* a watcher fell behind by limits.watch_buffer_bytes: its watch ended */
    /* 42..49 belong to replicas (docs/OPERATIONS.md). */
    PD_DRAINING = 42,           /* this replica is draining: unsolicited (id 0) once on every
                                   connection, then the answer to new requests (not Ping,
                                   Cancel or Unwatch) */
    PD_UNAVAILABLE = 43,        /* retryable: the change log cannot be reached (nothing changed;
                                   resend with the same idempotency key), or the scene is not
                                   served until this replica has rebuilt it from the log */
} pd_status;

/* One past the largest value; not every value below it is a status
 * (pd_status_is_answer). */
#define PD_STATUS_COUNT 44

/* 1 for a status that is ever an answer on the wire: every named value but
 * the core-only PD_BUFFER_TOO_SMALL. */
int pd_status_is_answer(unsigned s);

/* Upper-case name as used in docs and the wire enum, e.g. "NO_PATH". */
const char *pd_status_name(pd_status s);

/* Writes the reason for a status into err (cut to errlen; nothing when err
 * is NULL or errlen 0), as every layer's refusals do. */
void pd_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
