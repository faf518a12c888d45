/* job_doc.c: every form of a job's document and every conversion of it, for the job files. The
 * internal form is the document the API serves plus "request", "created_ms" and "finished_ms";
 * the store keeps the public form's bytes beside those three and indexed columns, made here
 * (job_doc_row), and never parses a job. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "jobs.h"
#include "store.h"

/* How deep a stored document may nest when it is parsed back (job_doc_parse). */
#define JOB_DOC_JSON_DEPTH 64

/* What clients see of a job: the internal document less the bookkeeping only umd needs
 * (request, created_ms, finished_ms); without results for lists. Shallow: the top level and the
 * part objects are copied, what lies below them is shared. NULL on OOM. A result kept as the
 * worker's bytes (a raw node, jsonraw.h) stays one: such a copy must go through
 * job_doc_public_expand (jobs.h) before anything dumps it. */
json_t *job_doc_public_copy(const json_t *doc, bool with_results);

/* A job's row (internal form, valid "id" and "parts") into *ret: the public document dumped
 * once, results spliced in as their bytes, its summary, the columns. 0, -EINVAL or -ENOMEM,
 * logged; *ret untouched on failure. */
int job_doc_row(const json_t *job, struct store_row *ret);
/* job_doc_row of a job read from the old store's files (job_files.c), its finished_ms made
 * where the old store left it out. */
int job_doc_row_from_file(const json_t *job, struct store_row *ret);
/* The internal form of a stored row (its public document with request, created_ms and
 * finished_ms added). NULL (logged) when the document is not JSON or out of memory. */
json_t *job_doc_internal(const struct store_text *t);
/* What the writer will dump of job: its top level and part objects copied, the rest shared.
 * NULL: out of memory. */
json_t *job_doc_snapshot(const json_t *job);
/* A write of job queued for job_doc_maker to make its row later, outside the caller's lock:
 * a snapshot of job, or with final (a job its caller changes no more, at no level, until the
 * write's outcome is known) a reference to it. 0, -EINVAL (no valid id or parts) or -ENOMEM,
 * logged. */
int job_doc_source(const json_t *job, bool final, void **ret);
extern const struct store_row_maker job_doc_maker;

/* A new job's row, made from its tree while the tree is still the caller's alone (no snapshot,
 * no lock), under a stand-in id: ids are taken in the order jobs are queued, under core_lock,
 * and the dump need not wait for that. job_doc_new_row puts the real id in (p taken, whatever
 * the outcome): *ret is the row for store_put_row. Each 0, -EINVAL or -ENOMEM, logged. */
struct job_doc_new {
        struct store_row row;
        /* Where the stand-in id's characters are in row.doc and in row.summary (a buffer of its
         * own when some part has a result, even a null one). */
        size_t id_at_doc, id_at_sum;
};
int job_doc_new_prepare(const json_t *job, struct job_doc_new **ret);
int job_doc_new_row(struct job_doc_new *p, const char *id, struct store_row *ret);
void job_doc_new_free(struct job_doc_new *p);

/* A part's own document (its object compact, the result spliced in as its bytes), malloc'd,
 * *ret_len long; NULL when out of memory or the part cannot be dumped. */
char *job_doc_part_text(const json_t *part, size_t *ret_len);

/* A document read from the store as a tree, with umd's limits (depth, no NUL). NULL with e set
 * when it is not one. */
json_t *job_doc_parse(const char *text, size_t len, json_error_t *e);

/* The store's reads, parsed (job_doc_internal for the internal form): what store_get,
 * store_get_internal, store_get_internal_many (ret[i] NULL where a job cannot be read, logged),
 * store_find_idempotent (*ret_request the caller's to free) return, as trees; -EBADMSG (logged)
 * for a document that is not JSON. */
int job_doc_get(struct store *s, const char *id, json_t **ret);
int job_doc_get_internal(struct store *s, const char *id, json_t **ret);
int job_doc_get_internal_many(struct store *s, const char *const *ids, size_t n, json_t **ret);
int job_doc_find_idempotent(struct store *s, const char *key, const char *client, json_t **ret_job,
                            char **ret_request);
/* The part objects on device uuid, with a verdict, of the health jobs store_health_docs
 * finds, newest first, as an array. 0 or -errno. */
int job_doc_health_parts(struct store *s, const char *uuid, const char *exclude_id,
                         bool passing_only, size_t max, json_t **ret_parts);
/* A list's label filter (store_query.match, with arg a struct job_doc_label): whether a job's
 * public document has label key (key_len long) set to value. */
struct job_doc_label {
        const char *key;
        size_t key_len;
        const char *value;
};
bool job_doc_label_matches(const char *doc, size_t len, void *arg);
