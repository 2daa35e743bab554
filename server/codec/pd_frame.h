/*
 * pd_frame.h - incremental reader for length-prefixed frames.
 *
 * Wire format: 4-byte big-endian payload length, then the payload. The reader
 * owns one growable buffer per connection. libuv's alloc callback asks it for
 * space (pd_frame_reader_space), the read callback commits what arrived
 * (pd_frame_reader_commit), and pd_frame_reader_next hands out complete
 * payloads in order. The length is checked against the cap as soon as the
 * 4 header bytes are in, before any buffer grows for that frame, so a header
 * claiming 4 GiB costs nothing.
 *
 * A connection with nothing buffered needs no buffer of its own: the
 * caller may lend the reader a larger shared one for one read
 * (pd_frame_reader_lend), take the complete frames straight out of it and
 * then settle (pd_frame_reader_settle), which copies only what is left - a
 * partial frame, or frames left for later - into the reader's own buffer.
 * Busy connections then read many frames per read call, and idle ones hold
 * no read buffer at all.
 *
 * Lifetime: a payload pointer returned by _next stays valid until the next
 * call to _space, _commit, _next or _settle on the same reader.
 */
#ifndef PD_FRAME_H
#define PD_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "pd_status.h"

#define PD_FRAME_HEADER_BYTES 4
/* Initial read buffer per connection: small, because 10,000 idle connections
 * must fit in ~100 MiB; it grows up to header + cap only for large frames. */
#define PD_FRAME_INITIAL_BUFFER 512

typedef struct pd_frame_reader {
    uint8_t *buf;
    size_t cap;          /* bytes allocated (or lent) */
    size_t start;        /* first unconsumed byte */
    size_t end;          /* one past the last received byte */
    uint32_t max_frame;  /* largest payload accepted */
    uint8_t *own;        /* while lent: the reader's own buffer (may be NULL) */
    size_t own_cap;
    int lent;            /* buf is a lent buffer, not the reader's */
} pd_frame_reader;

void pd_frame_reader_init(pd_frame_reader *r, uint32_t max_frame);
void pd_frame_reader_free(pd_frame_reader *r);

/* Bytes buffered but not yet handed out (tests, and idle-memory accounting). */
size_t pd_frame_reader_pending(const pd_frame_reader *r);

/* Bytes the reader's own buffer holds allocated (a lent one not counted). */
size_t pd_frame_reader_bytes(const pd_frame_reader *r);

/* Reads into buf (size bytes, owned by the caller) until _settle: only
 * when nothing is pending; returns 0, or -1 leaving the reader as it was.
 * _commit and _next work on buf meanwhile; _space must not be called. */
int pd_frame_reader_lend(pd_frame_reader *r, uint8_t *buf, size_t size);

/* Ends a lend: the unconsumed bytes move into the reader's own buffer
 * (grown to hold them; freed when nothing is left). A no-op when nothing
 * is lent. Returns 0, or -1 when that buffer cannot grow (the reader is
 * then empty and the caller should close the connection). */
int pd_frame_reader_settle(pd_frame_reader *r);

/* Gives a writable region of at least 1 byte (up to `suggested`; 0 means no
 * preference) at the end of the buffer. Grows the buffer only for a frame
 * whose header passed the cap, to exactly header + its length. Returns 0, or
 * -1 when no space can be given: allocation failure, a refused header with
 * the buffer full, or a whole frame still buffered (drain _next first). */
int pd_frame_reader_space(pd_frame_reader *r, size_t suggested, uint8_t **out, size_t *avail);

/* Records that n bytes were written into the region from _space. */
void pd_frame_reader_commit(pd_frame_reader *r, size_t n);

/* Returns PD_OK with the next payload in *payload / *len (len may be 0),
 * PD_PARTIAL when no complete frame is buffered yet, or PD_FRAME_TOO_LARGE
 * when the next header exceeds max_frame (the connection should be answered
 * and closed; the reader keeps answering FRAME_TOO_LARGE). Once everything is
 * consumed, a buffer that grew for a large frame shrinks back to
 * PD_FRAME_INITIAL_BUFFER. */
pd_status pd_frame_reader_next(pd_frame_reader *r, const uint8_t **payload, size_t *len);

void pd_frame_put_header(uint8_t out[PD_FRAME_HEADER_BYTES], uint32_t payload_len);
/* The payload length a header holds. */
uint32_t pd_frame_get_header(const uint8_t p[PD_FRAME_HEADER_BYTES]);

#endif
