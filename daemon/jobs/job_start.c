/* A part's start (issue 57): the part is marked running and its start queued to the store, and
 * its worker is sent the part only once that start is committed. umd learns that the disk is gone
 * (read-only, failing, full) only from a commit that fails: a part sent before its start was
 * committed ran where nothing of it could be recorded, and after a restart read back queued and
 * ran a second time. A start whose commit fails puts the part back in its queue, never sent; the
 * store is failing by then, so it waits there and says why (job_dispatch.c, store_holds).
 *
 * The start's ticket is awaited without blocking anyone: job_persist_when_done's callback, on the
 * writer's thread, only writes to an eventfd (jobs.start_fd) that the main loop polls, and the
 * main loop sends the part (jobs_starts_committed). Meanwhile the slot (a GPU, or the node) is
 * taken, as for a part sent, and a cancel of the part is passed on once it is sent.
 *
 * The cost is a commit a part: the start shares its batch with what its dispatch's cause wrote
 * (the previous part's end), but that batch, lazy before (STORE_LAZY_MS, a dozen jobs' changes a
 * commit), is now awaited, and a GPU waits for it. With sub-millisecond fake parts umd's CPU a
 * job more than doubled (bench/store/RESULTS.md); a part of a real benchmark is longer than a
 * commit by orders of magnitude. start_commit_wait = false sends a part at once, as before. */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "config.h"
#include "devices.h"
#include "job_internal.h"
#include "job_persist.h"
#include "jobs.h"
#include "lock.h"
#include "log.h"
#include "store.h"
#include "supervisor.h"

int part_send(struct jobs *js, struct job *j, size_t slot)
{
        json_t *doc = job_doc(j);
        json_int_t timeout_s = json_integer_value(json_object_get(doc, "timeout_s"));
        int r =
            doc ? supervisor_dispatch(js->sup, slot, j->id, job_benchmark(j),
                                      json_object_get(doc, "params"), (uint64_t)timeout_s * 1000)
                : -ENOMEM;
        if (r < 0) {
                if (is_node(slot))
                        log_debug("node: dispatch of %s deferred: %s", j->id, strerror(-r));
                else
                        log_debug("device %zu: dispatch of %s deferred: %s", slot, j->id,
                                  strerror(-r));
        }
        return r;
}

/* The writer's thread, with the store's lock held: only says so to the main loop. */
static void start_done(void *arg)
{
        struct jobs *js = arg;
        uint64_t one = 1;

        if (write(js->start_fd, &one, sizeof(one)) < 0)
                log_debug("jobs: cannot wake the main loop: %m"); /* it looks each tick anyway */
}

/* The slot is free again, as before job_start_part took it. */
static void slot_release(struct jobs *js, size_t slot, enum worker_state was)
{
        if (is_node(slot)) {
                js->node_running = false;
                if (js->node_wstate == WORKER_BUSY)
                        js->node_wstate = was;
                return;
        }
        struct device *d = devices_get(slot);
        d->running_jobs = 0;
        if (d->wstate == WORKER_BUSY)
                d->wstate = was;
}

/* Part i of j, marked running but never sent, is queued again as it was. */
static void part_unstart(struct jobs *js, struct job *j, size_t i)
{
        json_t *pd = job_part_doc(j, i);

        j->parts[i].st = JOB_QUEUED;
        job_persist_part_changed(j, i);
        if (j->parts[i].attempts > 0)
                j->parts[i].attempts--;
        json_object_set_new(pd, "state", json_string(job_state_names[JOB_QUEUED]));
        json_object_set_new(pd, "started", json_null());
        if (job_enqueue(js, j, i) < 0)
                job_set_part(js, j, i, JOB_FAILED, NULL, "out of memory while queueing");
        job_update_state(js, j);
        if (j->st == JOB_QUEUED)
                json_object_set_new(job_doc(j), "started", json_null());
        job_changed(js, j);
        (void)job_persist(js, j); /* logged; what the store holds says queued already */
}

/* Part i of j was sent (and its slot marked busy): it runs now. */
static void part_mark_running(struct jobs *js, struct job *j, size_t i)
{
        j->parts[i].waiting_since_ms = 0;
        j->parts[i].attempts++;
        json_object_del(job_part_doc(j, i), "waiting");
        job_set_part(js, j, i, JOB_RUNNING, NULL, NULL);
        job_update_state(js, j);
}

/* The start's outcome r is known: send the part, or queue it again. */
static void start_settle(struct jobs *js, size_t slot, const struct job_start *s, int r)
{
        struct job *j = job_find(js, s->id);

        if (!j || s->part >= j->n_parts || j->parts[s->part].st != JOB_RUNNING)
                return; /* it ended meanwhile (umd stopping), and its slot with it */
        if (r < 0) {
                log_warning("job %s: the start of part %zu could not be committed (%s): it is "
                            "queued again, not run",
                            j->id, s->part, strerror(-r));
                slot_release(js, slot, s->was);
                part_unstart(js, j, s->part);
                /* A store failing holds the queue and says so in its head; otherwise the next
                 * event tries again (a retry now could fail again at once). */
                if (store_commit_error(js->store) != 0)
                        job_dispatch_try(js, slot);
                return;
        }
        /* Paused (its running part asked to stop) or stopping meanwhile: it does not start. */
        bool held = js->quiescing || (!is_node(slot) && devices_get(slot)->paused);
        if (held || part_send(js, j, slot) < 0) {
                slot_release(js, slot, s->was);
                part_unstart(js, j, s->part);
                if (held && !js->quiescing)
                        job_dispatch_try(js, slot); /* the head says why it waits */
                return;
        }
        if (j->cancel_requested && js->sup) /* asked while the start was being committed */
                (void)supervisor_cancel(js->sup, slot, j->id);
}

void job_start_part(struct jobs *js, struct job *j, size_t i, size_t slot, enum worker_state was)
{
        struct job_start *s = &js->starts[slot];
        struct store_ticket *t;

        assert(!s->ticket);
        part_mark_running(js, j, i);
        /* Its row now, the document with its end (job_persist_soon): recovery lays the row over
         * the document, so a restart finds the part running and says it was interrupted. */
        if (!js->cfg->start_commit_wait) { /* sent at once, its start committed with the rest */
                job_persist_part_started(js, j, i);
                struct job_start now = {.part = i, .was = was};
                memcpy(now.id, j->id, sizeof(now.id));
                start_settle(js, slot, &now, 0);
                return;
        }
        if (job_persist_part_started_waited(js, j, i, &t) == 0) {
                s->ticket = t;
                s->part = i;
                s->was = was;
                memcpy(s->id, j->id, sizeof(s->id));
                if (job_persist_when_done(t, start_done, js) > 0)
                        start_done(js);
                return;
        }
        /* Out of memory (logged): the whole document was queued, the part is sent as it always
         * was. */
        struct job_start now = {.part = i, .was = was};
        memcpy(now.id, j->id, sizeof(now.id));
        start_settle(js, slot, &now, 0);
}

void jobs_starts_committed(struct jobs *js)
{
        uint64_t n;

        if (read(js->start_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
                log_debug("jobs: reading the start eventfd: %m");
        core_lock();
        for (size_t slot = 0; js->starts && slot <= devices_count(); slot++) {
                struct job_start *s = &js->starts[slot];
                int r;

                if (!s->ticket || job_persist_poll(s->ticket, &r) == 0)
                        continue;
                s->ticket = NULL;
                start_settle(js, slot, s, r);
        }
        jobs_unlock(js);
}

int jobs_start_fd(struct jobs *js)
{
        return js ? js->start_fd : -1;
}

int job_start_init(struct jobs *js)
{
        js->start_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (js->start_fd < 0)
                return log_error_errno(errno, "eventfd: %m");
        js->starts = calloc(devices_count() + 1, sizeof(*js->starts));
        return js->starts ? 0 : log_error_errno(ENOMEM, "out of memory");
}

void job_start_abandon_locked(struct jobs *js)
{
        assert_locked();
        for (size_t slot = 0; js->starts && slot <= devices_count(); slot++) {
                struct job_start *s = &js->starts[slot];

                if (!s->ticket)
                        continue;
                (void)job_persist_wait(s->ticket);
                s->ticket = NULL;
                struct job *j = job_find(js, s->id);
                if (j && s->part < j->n_parts && j->parts[s->part].st == JOB_RUNNING) {
                        slot_release(js, slot, s->was);
                        part_unstart(js, j, s->part); /* never sent: it runs after the restart */
                }
        }
}

void job_start_free(struct jobs *js)
{
        if (js->start_fd >= 0)
                close(js->start_fd);
        js->start_fd = -1;
        free(js->starts);
        js->starts = NULL;
}
