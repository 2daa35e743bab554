/*
 * pd_frame.c - incremental reader for length-prefixed frames (see pd_frame.h).
 *
 * One buffer per connection holds [start, end) of received but unconsumed
 * bytes. Three rules keep its memory bounded no matter what a peer sends:
 *  - a frame's length is compared with max_frame as soon as its 4 header
 *    bytes are buffered, and the buffer only grows for a frame that passed;
 *  - consumed bytes are dropped by moving the unconsumed tail to the front
 *    before the buffer is asked for more space, so a long-lived connection
 *    reuses the same bytes instead of creeping forward;
 *  - once everything has been handed out, a buffer that grew for one large
 *    frame shrinks back to PD_FRAME_INITIAL_BUFFER, so idle connections stay
 *    small.
 * The largest buffer ever allocated is PD_FRAME_HEADER_BYTES + max_frame, or
 * PD_FRAME_INITIAL_BUFFER when that is larger.
 */
#include "pd_frame.h"

#include <stdlib.h>
#include <string.h>

uint32_t pd_frame_get_header(const uint8_t p[PD_FRAME_HEADER_BYTES])
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

void pd_frame_put_header(uint8_t out[PD_FRAME_HEADER_BYTES], uint32_t payload_len)
{
    out[0] = (uint8_t)(payload_len >> 24);
    out[1] = (uint8_t)(payload_len >> 16);
    out[2] = (uint8_t)(payload_len >> 8);
    out[3] = (uint8_t)payload_len;
}

void pd_frame_reader_init(pd_frame_reader *r, uint32_t max_frame)
{
    memset(r, 0, sizeof *r);
    r->max_frame = max_frame;
}

void pd_frame_reader_free(pd_frame_reader *r)
{
    free(r->lent ? r->own : r->buf);
    r->buf = NULL;
    r->cap = 0;
    r->start = 0;
    r->end = 0;
    r->own = NULL;
    r->own_cap = 0;
    r->lent = 0;
}

size_t pd_frame_reader_pending(const pd_frame_reader *r)
{
    return r->end - r->start;
}

size_t pd_frame_reader_bytes(const pd_frame_reader *r)
{
    return r->lent ? r->own_cap : r->cap;
}

int pd_frame_reader_lend(pd_frame_reader *r, uint8_t *buf, size_t size)
{
    if (r->lent || r->start != r->end || buf == NULL || size == 0)
        return -1;
    r->own = r->buf;
    r->own_cap = r->cap;
    r->buf = buf;
    r->cap = size;
    r->start = 0;
    r->end = 0;
    r->lent = 1;
    return 0;
}

int pd_frame_reader_settle(pd_frame_reader *r)
{
    if (!r->lent)
        return 0;
    const uint8_t *left = r->buf + r->start;
    size_t pending = r->end - r->start;
    uint8_t *own = r->own;
    size_t own_cap = r->own_cap;
    r->lent = 0;
    r->own = NULL;
    r->own_cap = 0;
    r->start = 0;
    r->end = 0;
    if (pending == 0) {
        free(own);
        r->buf = NULL;
        r->cap = 0;
        return 0;
    }
    if (own_cap < pending) {
        size_t cap = pending > PD_FRAME_INITIAL_BUFFER ? pending : PD_FRAME_INITIAL_BUFFER;
        uint8_t *grown = realloc(own, cap);
        if (grown == NULL) {
            free(own);
            r->buf = NULL;
            r->cap = 0;
            return -1;
        }
        own = grown;
        own_cap = cap;
    }
    memcpy(own, left, pending);
    r->buf = own;
    r->cap = own_cap;
    r->end = pending;
    return 0;
}

/* Resizes the buffer to exactly new_cap bytes (which must hold the pending
 * bytes, already moved to the front). Returns 0, or -1 leaving it unchanged. */
static int pd__frame_resize(pd_frame_reader *r, size_t new_cap)
{
    uint8_t *grown = realloc(r->buf, new_cap);
    if (grown == NULL)
        return -1;
    r->buf = grown;
    r->cap = new_cap;
    return 0;
}

/* Moves the unconsumed bytes to the front of the buffer. Only called where
 * no payload pointer handed out by _next may still be in use. */
static void pd__frame_compact(pd_frame_reader *r)
{
    size_t pending = r->end - r->start;
    if (r->start == 0)
        return;
    if (pending > 0)
        memmove(r->buf, r->buf + r->start, pending);
    r->start = 0;
    r->end = pending;
}

/* Gives back the memory of a buffer that grew for a large frame once nothing
 * is left in it. A failed shrink keeps the larger buffer, which still works. */
static void pd__frame_shrink_if_drained(pd_frame_reader *r)
{
    if (r->start != r->end)
        return;
    r->start = 0;
    r->end = 0;
    if (r->cap > PD_FRAME_INITIAL_BUFFER && !r->lent)
        (void)pd__frame_resize(r, PD_FRAME_INITIAL_BUFFER);
}

int pd_frame_reader_space(pd_frame_reader *r, size_t suggested, uint8_t **out, size_t *avail)
{
    size_t want;
    size_t pending;
    size_t tail;

    *out = NULL;
    *avail = 0;
    if (r->buf == NULL && pd__frame_resize(r, PD_FRAME_INITIAL_BUFFER) != 0)
        return -1;
    pd__frame_shrink_if_drained(r);
    pd__frame_compact(r);

    /* How much buffer the next read needs. With a whole header buffered we
     * know the frame's size: room for all of it, so it arrives in as few
     * reads as possible, but nothing for a frame that will be refused. */
    pending = r->end;
    want = pending + 1;
    if (pending >= PD_FRAME_HEADER_BYTES) {
        uint32_t len = pd_frame_get_header(r->buf);
        size_t frame_bytes;
        if (len > r->max_frame)
            want = r->cap;
        else if ((frame_bytes = (size_t)len + PD_FRAME_HEADER_BYTES) > pending)
            want = frame_bytes;
        else if (r->cap > pending)
            want = r->cap;
        else
            return -1; /* a whole frame is buffered: the caller must drain _next first */
    }
    if (want > r->cap && pd__frame_resize(r, want) != 0)
        return -1;

    tail = r->cap - r->end;
    if (tail == 0)
        return -1; /* only reached for a refused header with a full buffer */
    *out = r->buf + r->end;
    *avail = (suggested > 0 && suggested < tail) ? suggested : tail;
    return 0;
}

void pd_frame_reader_commit(pd_frame_reader *r, size_t n)
{
    size_t tail = r->cap - r->end;
    r->end += n < tail ? n : tail;
}

pd_status pd_frame_reader_next(pd_frame_reader *r, const uint8_t **payload, size_t *len)
{
    size_t pending;
    uint32_t frame_len;

    *payload = NULL;
    *len = 0;
    pd__frame_shrink_if_drained(r);
    pending = r->end - r->start;
    if (pending < PD_FRAME_HEADER_BYTES)
        return PD_PARTIAL;
    frame_len = pd_frame_get_header(r->buf + r->start);
    if (frame_len > r->max_frame)
        return PD_FRAME_TOO_LARGE;
    if (pending - PD_FRAME_HEADER_BYTES < frame_len)
        return PD_PARTIAL;
    *payload = r->buf + r->start + PD_FRAME_HEADER_BYTES;
    *len = frame_len;
    r->start += PD_FRAME_HEADER_BYTES + (size_t)frame_len;
    return PD_OK;
}
