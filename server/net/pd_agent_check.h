/*
 * pd_agent_check.h - HAProxy's agent-check port (config "agent_check",
 * docs/OPERATIONS.md): every connection is told one line, the word HAProxy
 * acts on, and closed. Nothing is read. The server's part (pd__agent_state)
 * and its functions; the word comes from the server through the `serving`
 * hook it sets (the one place the serving state is decided:
 * pd__server_serving in pd_server.c). Not for use outside server/net.
 */
#ifndef PD_AGENT_CHECK_H
#define PD_AGENT_CHECK_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "pd_codec.h"

typedef struct pd_server pd_server;

/* Connections answered at once; more are closed unanswered (HAProxy opens
 * one per check and server, so a few is plenty; the cap bounds what a
 * flood of connects can hold). */
#define PD_AGENT_MAX_CONNS 32

/* The agent's part of the server struct (pd_server_internal.h). */
typedef struct pd__agent_state {
    pd_serving (*serving)(pd_server *s); /* set by pd_server_create */
    uv_tcp_t listener;
    int listening;               /* the listener was initialised (it needs a close) */
    int open;                    /* handles not yet called back from uv_close */
    uint32_t conns;              /* connections being answered */
    uint16_t port;               /* the bound port, 0 when off */
} pd__agent_state;

/* The word for a serving state, with its newline: "up ready\n" (serving),
 * "drain\n" (draining: no new connections, the open ones stay), "down\n"
 * (not serving: HAProxy marks the server down). */
const char *pd__agent_word(pd_serving serving);
/* Binds and listens on host:port (numeric host; port 0: any). Returns 0, or
 * -1 with why in err. */
int pd__agent_start(pd_server *s, const char *host, uint16_t port, char *err, size_t errlen);
/* Stops listening; connections being answered finish. */
void pd__agent_close(pd_server *s);

#endif
