/*
 * pathd_pool.c - a pool of pathd_client connections for a threaded game
 * server (see pdc_pool_* in pathd_client.h).
 *
 * A pdc_conn is not thread-safe, so a thread borrows one for a while
 * (pdc_pool_acquire), makes its calls, blocking or pipelined, and gives it
 * back (pdc_pool_release). Each connection keeps its own flow control, so
 * the pool as a whole keeps at most N x max_inflight_per_conn requests in
 * flight, spread over N connections, and the server never has to refuse
 * it OVERLOADED for its own excess.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "pathd_client.h"

struct pdc_pool {
    pthread_mutex_t mu;
    pthread_cond_t freed;       /* signalled when a connection is released */
    size_t n;
    size_t turn;                /* where the search for a free connection starts */
    pdc_conn **conns;
    int *busy;                  /* 1 while a thread holds conns[i] */
};

pdc_pool *pdc_pool_connect(const char *host_port, size_t n, int timeout_ms, char *err, size_t errlen)
{
    char scratch[PDC_MESSAGE_MAX];
    if (!err || errlen == 0) {
        err = scratch;
        errlen = sizeof scratch;
    }
    if (n == 0) {
        snprintf(err, errlen, "a pool needs at least one connection");
        return NULL;
    }
    pdc_pool *p = calloc(1, sizeof *p);
    if (p) {
        p->conns = calloc(n, sizeof *p->conns);
        p->busy = calloc(n, sizeof *p->busy);
    }
    if (!p || !p->conns || !p->busy) {
        snprintf(err, errlen, "out of memory");
        if (p) {
            free(p->conns);
            free(p->busy);
        }
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->freed, NULL);
    for (; p->n < n; p->n++) {
        if (!(p->conns[p->n] = pdc_connect(host_port, timeout_ms, err, errlen))) {
            pdc_pool_close(p);
            return NULL;
        }
    }
    return p;
}

void pdc_pool_close(pdc_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        pdc_close(p->conns[i]);
    pthread_cond_destroy(&p->freed);
    pthread_mutex_destroy(&p->mu);
    free(p->conns);
    free(p->busy);
    free(p);
}

size_t pdc_pool_size(const pdc_pool *p)
{
    return p ? p->n : 0;
}

pdc_conn *pdc_pool_acquire(pdc_pool *p)
{
    if (!p)
        return NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        /* The free connection with the least outstanding work (slots in
         * flight and requests queued, left by pipelined use); ties go in
         * turn, so idle connections share the calls too. */
        size_t best = p->n;
        size_t best_load = 0;
        for (size_t k = 0; k < p->n; k++) {
            size_t i = (p->turn + k) % p->n;
            if (p->busy[i])
                continue;
            size_t load = pdc_slots_in_flight(p->conns[i]) + pdc_queued(p->conns[i]);
            if (best == p->n || load < best_load) {
                best = i;
                best_load = load;
            }
        }
        if (best < p->n) {
            p->busy[best] = 1;
            p->turn = (best + 1) % p->n;
            pthread_mutex_unlock(&p->mu);
            return p->conns[best];
        }
        pthread_cond_wait(&p->freed, &p->mu);
    }
}

void pdc_pool_release(pdc_pool *p, pdc_conn *c)
{
    if (!p || !c)
        return;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->n; i++) {
        if (p->conns[i] == c && p->busy[i]) {
            p->busy[i] = 0;
            pthread_cond_signal(&p->freed);
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
}
