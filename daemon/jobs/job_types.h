/* The types the job subsystem (jobs.h) and the API seam (core.h) share: what a submit, a
 * list and a job listener hand over. Here, in the job subsystem, so that jobs.h needs nothing
 * of core.h, the layer above it (tests/lint/include-cycles). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/types.h>

#include "blob.h"
#include "problem.h"
#include "uuid.h"

/* GET /v1/jobs's filters, typed: api/request.c parses and checks the query string into one
 * (job_list_query_parse), so the daemon sees only valid values. */
struct job_filter {
        int state;             /* enum job_state (job_state.h); -1: any */
        const char *benchmark; /* a catalog name; NULL: any */
        ssize_t device;        /* a device index (core_device_index); -1: any */
        const char *label_key; /* with label_value: jobs labelled key:value; NULL: any */
        size_t label_key_len;  /* label_key is not NUL-terminated at this length */
        const char *label_value;
        const char *before; /* a job id (valid): older than this; NULL: none */
        const char *after;  /* a job id (valid): newer than this; NULL: none */
        uint64_t since_ms;  /* created at or after (Unix ms); 0: none */
        uint64_t until_ms;  /* created before; 0: none */
        unsigned limit;     /* rows on a page, 1 to core_list_limit_max() */
        bool with_results;  /* full documents, bounded by list_results_max_bytes */
};

/* A submitted job as the answer shows it: its public document (job), or, where the caller
 * allows it (bytes_ok) and the store's write of the new job is exactly what the answer shows,
 * that write's bytes (body): what json_dump_compact(job) would give, without making job or
 * dumping it (a third of a submit's JSON work). */
struct job_submit_wait;
struct core_submitted {
        bool bytes_ok; /* in: body may come instead of job */
        /* in: the caller can wait for the commit without a thread (core_job_submit returns 2) */
        bool may_wait;
        json_t *job;                  /* out: or NULL when body is set */
        struct job_submit_wait *wait; /* out: when 2 is returned, for core_job_submit_end */
        char *body;                   /* out: malloc'd, body_len bytes and a NUL */
        size_t body_len;
        char id[JOB_ID_MAX]; /* out: the job's id, either way */
};
/* Frees what ret holds (job, body); bytes_ok kept. */
static inline void core_submitted_done(struct core_submitted *ret)
{
        json_decref(ret->job);
        ret->job = NULL;
        free(ret->body);
        ret->body = NULL;
        ret->body_len = 0;
}

/* Called (with the daemon's lock held: it must not call back into core) after the generation
 * moved, with the job's id. One listener; NULL removes it. */
typedef void (*core_job_listener)(const char *id, void *userdata);

/* GET /v1/jobs: one page of rows, newest first. api/ frames it as {"jobs": rows, "next": link}
 * and builds the link from the query it was given and the cursor. */
struct job_rows {
        char *rows; /* the page's jobs as a JSON array's text, malloc'd */
        size_t len;
        size_t count;          /* jobs in rows */
        bool more;             /* another page follows: its cursor is last */
        char last[JOB_ID_MAX]; /* the id of the page's last (oldest) job */
};
