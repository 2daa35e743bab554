/*
 * pd_reason.h - the sizes of the error-text buffers (char err[...]) that
 * every layer from conf up hands to a function that may fail. Defined
 * once, here in the lowest layer that has such buffers, so a reason
 * written by a parser fits the buffer of each caller that wraps it.
 */
#ifndef PD_REASON_H
#define PD_REASON_H

/* Error-text sizes, in bytes with the NUL, for the buffers every layer
 * from here up hands to a function that may fail (char err[...]); the
 * formatting is snprintf's, so a longer text is cut short, never overrun.
 * PD_REASON_SHORT_MAX: what one decoder or parser says about one value
 * (an address, a layer's data, libxml2's last error), before the caller
 * adds where it happened; 160 keeps that line under a terminal's width
 * with room for the prefix. */
#define PD_REASON_SHORT_MAX 160
/* PD_REASON_MAX: one reason with where it happened (a JSON key path, up to
 * PD_CONF_JSON_PATH_MAX, or a file and offset, and the short reason). */
#define PD_REASON_MAX 256
/* PD_LOAD_ERR_MAX: a load's or a replay's full error line, which names
 * the file (a path, often long) before the reason: PD_REASON_MAX plus a
 * path's worth. */
#define PD_LOAD_ERR_MAX 512

#endif
