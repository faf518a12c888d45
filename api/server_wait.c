/* The reads that asked to ?wait=: each holds its connection suspended (no thread held,
 * max_waiters at most) until a job it waits for changes, its deadline passes or umd stops, and
 * is then asked again. It never answers a request itself: server_request.c does, when
 * libmicrohttpd calls it again for the resumed connection. */
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <strings.h>

#include "config.h"
#include "server_internal.h"
#include "util.h"

/* With wait_lock held: unlist r and let libmicrohttpd call server_on_request for it again. */
static void waiter_resume_locked(struct api_server *s, struct request_ctx *r)
{
        if (!r->waiting)
                return;
        if (r->wprev)
                r->wprev->wnext = r->wnext;
        else
                s->waiters = r->wnext;
        if (r->wnext)
                r->wnext->wprev = r->wprev;
        r->wprev = r->wnext = NULL;
        r->waiting = false;
        s->n_waiters--;
        server_conn_resume(s, r->conn);
}

/* Hold the connection of a read that asked to wait. 0: suspended (libmicrohttpd calls
 * server_on_request again when it is resumed); -EAGAIN: a job changed since the handler read it,
 * ask again now; -ETIME: the deadline passed or umd is stopping, answer now; -EBUSY: max_waiters
 * are waiting already. */
int server_wait_suspend(struct MHD_Connection *c, struct request_ctx *r,
                        const struct api_reply *rep)
{
        struct api_server *s = r->srv;
        uint64_t now = now_monotonic_ms();
        int ret = 0;

        /* The deadline counts from the first ask, not from each wake-up. */
        if (r->wait_deadline_ms == 0)
                r->wait_deadline_ms = now + rep->wait_ms;
        if (now >= r->wait_deadline_ms)
                return -ETIME;
        pthread_mutex_lock(&s->wait_lock);
        if (s->stopping)
                ret = -ETIME;
        else if (core_jobs_generation() != rep->wait_gen)
                ret = -EAGAIN;
        else if (s->n_waiters >= s->cfg->max_waiters)
                ret = -EBUSY;
        if (ret == 0) {
                snprintf(r->wait_id, sizeof(r->wait_id), "%s", rep->wait_id);
                r->conn = c;
                r->waiting = true;
                r->wprev = NULL;
                r->wnext = s->waiters;
                if (s->waiters)
                        s->waiters->wprev = r;
                s->waiters = r;
                s->n_waiters++;
                /* Under wait_lock: no wake-up can come between listing and suspending. */
                MHD_suspend_connection(c);
        }
        pthread_mutex_unlock(&s->wait_lock);
        if (ret == 0) {
                /* The reaper keeps the deadline; it may be sooner than its next round. */
                pthread_mutex_lock(&s->conns_lock);
                pthread_cond_signal(&s->reaper_cond);
                pthread_mutex_unlock(&s->conns_lock);
        }
        return ret;
}

/* The jobs' listener, called with core_lock held: wake who waits for this job, and every list
 * waiting for something new (each asks again and goes back to waiting if nothing it wants
 * came). */
void server_wait_job_changed(const char *id, void *userdata)
{
        struct api_server *s = userdata;

        pthread_mutex_lock(&s->wait_lock);
        for (struct request_ctx *r = s->waiters, *next; r; r = next) {
                next = r->wnext;
                if (!r->wait_id[0] || strcasecmp(r->wait_id, id) == 0)
                        waiter_resume_locked(s, r);
        }
        pthread_mutex_unlock(&s->wait_lock);
}

/* Resume waiters whose deadline passed (all of them when stopping); the earliest deadline
 * left, 0 when none. */
uint64_t server_wait_expire(struct api_server *s, uint64_t now)
{
        uint64_t next = 0;

        pthread_mutex_lock(&s->wait_lock);
        for (struct request_ctx *r = s->waiters, *n; r; r = n) {
                n = r->wnext;
                if (s->stopping || now >= r->wait_deadline_ms)
                        waiter_resume_locked(s, r);
                else if (!next || r->wait_deadline_ms < next)
                        next = r->wait_deadline_ms;
        }
        pthread_mutex_unlock(&s->wait_lock);
        return next;
}

/* Answer every ?wait= now; none may stay suspended when a daemon stops. */
void server_wait_stop(struct api_server *s)
{
        pthread_mutex_lock(&s->wait_lock);
        s->stopping = true;
        pthread_mutex_unlock(&s->wait_lock);
        core_set_job_listener(NULL, NULL);
        (void)server_wait_expire(s, now_monotonic_ms());
}
