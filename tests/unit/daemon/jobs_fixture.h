/* What the job subsystem's unit tests share: two fake GPUs discovered by the real
 * `umd-worker --list --fake 2` ($UMD_WORKER), a real store in a scratch directory, a struct jobs
 * made by jobs_init over them, and a fake supervisor (jobs_fixture.c) that records what
 * dispatch asks of it and never runs anything: a test finishes a part by calling the callbacks
 * as the supervisor thread would (fx_part_done, fx_worker_state). Store failures are injected
 * with the linker's --wrap of store_put, store_put_part(_doc), store_ticket_wait and
 * store_ticket_poll (fx_fail_*), so the real store still holds whatever it committed;
 * store_get_internal is wrapped to count read-backs. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "core.h"
#include "daemon.h"
#include "jobs.h"
#include "supervisor.h"
#include "uuid.h"

struct fake_call {
        size_t device;
        char job[JOB_ID_MAX];
};

struct fx {
        struct umd_config cfg;
        struct umd_daemon d;
        char *dir;
        struct supervisor_callbacks cb;
        /* What dispatch asked of the fake supervisor, in order. */
        struct fake_call dispatched[32], cancelled[32];
        size_t n_dispatched, n_cancelled;
        size_t retired;     /* supervisor_retire calls */
        int dispatch_errno; /* supervisor_dispatch answers -this when non-zero */
        /* How many of the job files' next store_put, store_ticket_wait and store_ticket_poll calls
         * fail
         * (-ENOMEM, -EIO, -EIO; the real call is made first, so the store has what it had). */
        unsigned fail_put, fail_wait, fail_poll;
        /* How many of the next store_put_part calls fail (-ENOMEM,
         * nothing queued). */
        unsigned fail_put_part;
        /* store_put_part calls with a part's document that were queued. */
        unsigned part_docs;
        /* store_get_internal calls: a waiting job's document read back from the store. */
        unsigned read_backs;
        /* store_get_internal_many: calls, and the jobs they asked for. */
        unsigned batch_reads, batch_jobs;
        /* What supervisor_worker_pid answers for each device (0: no worker). */
        pid_t worker_pids[8];
        /* Looks asked for since fx_attach_looks (job_dispatch's poke). */
        unsigned pokes;
        /* Called once a submit's commit is in, before store_ticket_wait returns (NULL: none). */
        void (*after_commit)(void);
        /* How far the jobs' clock (jobs.h's struct jobs_clock) is ahead of the system's: it
         * runs on from there, and fx_clock_advance moves it; restarts keep it. */
        uint64_t clock_ahead_ms;
};

extern struct fx *fx;

/* cmocka group setup and teardown: fake_devices GPUs (2 unless set before), a fresh state
 * directory, jobs made and the fake supervisor attached. fx_configure, when set, adjusts the
 * configuration after config_init. */
extern void (*fx_configure)(struct umd_config *cfg);
int fx_setup(void **state);
int fx_teardown(void **state);
/* Stops the jobs and the store as umd does at shutdown and makes them again from the same state
 * directory (recovery), with n fake GPUs. crash: as if umd had been killed, its shutdown writes
 * nothing (its store_put calls fail), so the store holds what it held while umd ran. */
void fx_restart(unsigned n_devices, bool crash);
/* Sends the parts whose starts were queued, once those commit, as umd's main loop does. */
void fx_settle_starts(void);

/* Moves the jobs' clock, monotonic and realtime, ms ahead: a delay passes (JOB_PERSIST_DELAY_MS,
 * a look's) without the test sleeping through it. */
void fx_clock_advance(uint64_t ms);
/* The jobs' monotonic clock now (a look's looked_ms, as coexist.c stamps it). */
uint64_t fx_clock_monotonic_ms(void);

/* POST /v1/jobs with body (JSON text): the status (202, 200, 4xx, 5xx); *ret_id the job's id. */
int fx_submit(const char *body, const char *idem, const char *client, char ret_id[JOB_ID_MAX]);
/* DELETE /v1/jobs/{id}: the status. */
int fx_cancel(const char *id, const char *client, bool admin);
/* The job's state as GET /v1/jobs/{id} says it ("?" when it cannot be read), and one field of
 * it (borrowed until the next call). */
const char *fx_state(const char *id);
json_t *fx_field(const char *id, const char *key);
/* Part i of the job as GET shows it (borrowed until the next call). */
json_t *fx_part(const char *id, size_t i);
/* The supervisor reports a part done (outcome) on device dev, then its worker idle. */
void fx_part_done(size_t dev, const char *id, enum part_outcome outcome);
void fx_worker_state(size_t dev, enum worker_state st, const char *reason);
/* As fx_part_done, with the worker's look after the part (look_json: common/ipc.h's "look", or
 * NULL for none). */
void fx_part_done_looked(size_t dev, const char *id, enum part_outcome outcome,
                         const char *look_json);
/* Looks at the GPUs attached as coexist.c attaches them: each look asked for counts in
 * fx->pokes and is taken only when the test calls fx_look. */
void fx_attach_looks(void);
/* A look of umd's own at GPU dev that began now and saw `others` other processes. */
void fx_look(size_t dev, int others);
/* Job id's public document as the store holds it, parsed. 0 or what store_get returns. */
int fx_stored(struct store *s, const char *id, json_t **ret);
