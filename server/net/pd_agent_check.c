/*
 * pd_agent_check.c - HAProxy's agent-check port (see pd_agent_check.h and
 * docs/OPERATIONS.md, "Draining a replica").
 *
 * HAProxy's `agent-check` connects, reads one line and acts on its words:
 * "ready" cancels a drain, "up" marks the server up (when its health check
 * agrees), "drain" gives it weight 0 - no new connections, the open ones
 * stay - and "down" marks it down. The health check (a Ping through
 * `tcp-check`) can only pass or fail; this port is how a replica that is
 * draining says "take nothing new, but do not cut what is open". HAProxy
 * cannot write to the port (it needs no `agent-send`), so draining is
 * started by a signal to pathd (pd_server.c) and this port only reports.
 *
 * Bounded: nothing is read, each connection gets one write of a few bytes
 * from a static string and is closed when the write is done; past
 * PD_AGENT_MAX_CONNS connections being answered a new one is closed at
 * once, unanswered (HAProxy counts that as an agent failure, which leaves
 * the server as its health check says).
 */
#include "pd_agent_check.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pd_log.h"
#include "pd_server_internal.h"

typedef struct pd__agent_conn {
    uv_tcp_t tcp;
    uv_write_t write;
    pd_server *server;
    int answered;                /* counted in conns: give the slot back when closed */
} pd__agent_conn;

const char *pd__agent_word(pd_serving serving)
{
    switch (serving) {
    case PD_SERVING:
        return "up ready\n";
    case PD_SERVING_DRAINING:
        return "drain\n";
    case PD_NOT_SERVING:
    default:
        return "down\n";
    }
}

static void pd__agent_closed(uv_handle_t *h)
{
    pd__agent_conn *ac = h->data;
    pd_server *s = ac->server;
    if (ac->answered)
        s->agent.conns--;
    s->agent.open--;
    free(ac);
}

static void pd__agent_written(uv_write_t *w, int status)
{
    (void)status; /* a peer that left before the word: nothing to do but close */
    pd__agent_conn *ac = w->data;
    uv_close((uv_handle_t *)&ac->tcp, pd__agent_closed);
}

static void pd__agent_on_connection(uv_stream_t *listener, int status)
{
    pd_server *s = listener->data;
    if (status < 0)
        return; /* libuv closed it already (EMFILE); HAProxy retries next check */
    pd__agent_conn *ac = calloc(1, sizeof *ac);
    if (!ac || uv_tcp_init(s->loop, &ac->tcp) != 0) {
        /* Left in the backlog: the next check's connection tries again. */
        free(ac);
        pd_log_error("agent-check: out of memory accepting a connection");
        return;
    }
    ac->tcp.data = ac;
    ac->write.data = ac;
    ac->server = s;
    s->agent.open++;
    if (uv_accept(listener, (uv_stream_t *)&ac->tcp) != 0 || s->agent.conns >= PD_AGENT_MAX_CONNS) {
        uv_close((uv_handle_t *)&ac->tcp, pd__agent_closed);
        return;
    }
    ac->answered = 1;
    s->agent.conns++;
    const char *word = pd__agent_word(s->agent.serving(s));
    uv_buf_t buf = uv_buf_init((char *)word, (unsigned)strlen(word));
    if (uv_write(&ac->write, (uv_stream_t *)&ac->tcp, &buf, 1, pd__agent_written) != 0)
        uv_close((uv_handle_t *)&ac->tcp, pd__agent_closed);
}

int pd__agent_start(pd_server *s, const char *host, uint16_t port, char *err, size_t errlen)
{
    struct sockaddr_storage addr;
    int rc = strchr(host, ':') ? uv_ip6_addr(host, port, (struct sockaddr_in6 *)&addr)
                               : uv_ip4_addr(host, port, (struct sockaddr_in *)&addr);
    if (rc != 0) {
        snprintf(err, errlen, "agent_check %s:%u: %s", host, (unsigned)port, uv_strerror(rc));
        return -1;
    }
    if ((rc = uv_tcp_init(s->loop, &s->agent.listener)) != 0) {
        snprintf(err, errlen, "agent_check: %s", uv_strerror(rc));
        return -1;
    }
    s->agent.listener.data = s;
    s->agent.listening = 1;
    s->agent.open++;
    struct sockaddr_storage bound;
    int bound_len = (int)sizeof bound;
    if ((rc = uv_tcp_bind(&s->agent.listener, (const struct sockaddr *)&addr, 0)) != 0 ||
        (rc = uv_listen((uv_stream_t *)&s->agent.listener, PD_AGENT_MAX_CONNS, pd__agent_on_connection)) != 0 ||
        (rc = uv_tcp_getsockname(&s->agent.listener, (struct sockaddr *)&bound, &bound_len)) != 0) {
        snprintf(err, errlen, "agent_check on %s:%u: %s", host, (unsigned)port, uv_strerror(rc));
        pd__agent_close(s);
        return -1;
    }
    s->agent.port = bound.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&bound)->sin6_port)
                                                : ntohs(((struct sockaddr_in *)&bound)->sin_port);
    char where[PD_CONF_MAX_ADDRESS];
    pd_log_info("agent-check on %s", pd_conf_format_address(where, host, s->agent.port));
    return 0;
}

static void pd__agent_listener_closed(uv_handle_t *h)
{
    pd_server *s = h->data;
    s->agent.open--;
}

void pd__agent_close(pd_server *s)
{
    uv_handle_t *h = (uv_handle_t *)&s->agent.listener;
    if (s->agent.listening && !uv_is_closing(h))
        uv_close(h, pd__agent_listener_closed);
}
