/* Recovery's read of the store (store.h's store_recover): the unfinished jobs' columns and their
 * parts' rows, from indexes alone, in id order, and for the jobs the callback asks for, their
 * internal documents as text (the stored bytes with request and created_ms appended, no parse).
 * What to make of them is the job subsystem's (daemon/jobs/job_recover.c). */
#include "store_internal.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sys/types.h>

#include "log.h"

/* An int64_t in decimal: 19 digits, a sign and the NUL, rounded up. */
#define INT64_TEXT_MAX 24

/* What store_recover keeps of a job's parts' rows while the callback runs: the strings are
 * copied into one buffer, reused from job to job (a row's pointers last only to its next
 * step). */
struct open_parts {
        struct store_open_part *parts;
        size_t cap;
        char *buf;
        size_t buf_len, buf_cap;
};

/* The internal document as text: the stored one (an object) with request (quoted by the query)
 * and created_ms appended, as job_doc_internal adds them to the tree. Pieces copied, no
 * formatting: this runs once for each of thousands of queued jobs before READY. A stored document
 * that is not an object is handed on as it is, for whoever parses it to refuse. */
static char *internal_text(sqlite3_stmt *st, int doc_col, int req_col, int created_col,
                           size_t *ret_len)
{
        static const char req_key[] = "\"request\":", created_key[] = "\"created_ms\":";
        const char *doc = (const char *)sqlite3_column_text(st, doc_col);
        size_t len = (size_t)sqlite3_column_bytes(st, doc_col);
        const char *req = NULL;
        size_t req_len = 0, n = 0;
        char num[INT64_TEXT_MAX], *out;
        int num_len;

        if (!doc)
                return NULL;
        if (len < 2 || doc[0] != '{' || doc[len - 1] != '}') {
                out = strndup(doc, len);
                *ret_len = out ? len : 0;
                return out;
        }
        if (sqlite3_column_type(st, req_col) != SQLITE_NULL) {
                req = (const char *)sqlite3_column_text(st, req_col);
                req_len = (size_t)sqlite3_column_bytes(st, req_col);
        }
        num_len =
            snprintf(num, sizeof(num), "%" PRId64, (int64_t)sqlite3_column_int64(st, created_col));
        /* "{...", ",\"request\":" req, ",\"created_ms\":" num, "}" */
        out = malloc(len + 1 + sizeof(req_key) + req_len + 1 + sizeof(created_key) +
                     (size_t)num_len + 1);
        if (!out)
                return NULL;
        memcpy(out, doc, len - 1);
        n = len - 1;
        if (req) {
                if (n > 1)
                        out[n++] = ',';
                memcpy(out + n, req_key, sizeof(req_key) - 1);
                n += sizeof(req_key) - 1;
                memcpy(out + n, req, req_len);
                n += req_len;
        }
        if (n > 1)
                out[n++] = ',';
        memcpy(out + n, created_key, sizeof(created_key) - 1);
        n += sizeof(created_key) - 1;
        memcpy(out + n, num, (size_t)num_len);
        n += (size_t)num_len;
        out[n++] = '}';
        *ret_len = n;
        return out;
}

/* Columns of R_OPEN. */
enum {
        O_ID,
        O_STATE,
        O_PRIORITY,
        O_CANCEL,
        O_CLIENT,
        O_IDEM,
        O_CREATED,
};

/* Parts store_recover hands on for a job: one a GPU (64 at most, as fake_devices) or one on the
 * node. A job with more would be handed on with fewer, which its check finds different from its
 * document, recovering it from that. */
#define OPEN_PARTS_MAX 64

/* Appends s (NUL included) to op's buffer; its offset, or -1 (out of memory). Offsets, not
 * pointers: the buffer moves as it grows. */
static ssize_t open_parts_keep(struct open_parts *op, const char *s)
{
        size_t n = strlen(s) + 1, at = op->buf_len;

        if (op->buf_len + n > op->buf_cap) {
                size_t cap = op->buf_cap ? op->buf_cap : 256;
                while (cap < op->buf_len + n)
                        cap *= 2;
                char *b = realloc(op->buf, cap);
                if (!b)
                        return -1;
                op->buf = b;
                op->buf_cap = cap;
        }
        memcpy(op->buf + at, s, n);
        op->buf_len += n;
        return (ssize_t)at;
}

/* R_OPEN_PARTS, walked beside R_OPEN: rc is its last step's result (SQLITE_ROW: on a row), 0
 * before the first. */
struct parts_walk {
        sqlite3_stmt *st;
        int rc;
};

/* A walk that meets more rows than this of jobs that are not open (finished jobs' parts lie
 * between the open ones) searches for the next open job instead: a long history then costs a
 * search a job, not a read of every row. */
#define PARTS_SKIP_MAX 16

static void parts_walk_seek(struct parts_walk *w, const char *id)
{
        sqlite3_reset(w->st);
        sqlite3_bind_text(w->st, 1, id, -1, SQLITE_TRANSIENT);
        w->rc = sqlite3_step(w->st);
}

/* The walk's row's job_id against id, in the key's collation (NOCASE: ASCII folded, as
 * strcasecmp does in the C locale). A row whose job_id cannot be read sorts first. */
static int parts_walk_cmp(struct parts_walk *w, const char *id)
{
        const char *at = (const char *)sqlite3_column_text(w->st, 0);
        return at ? strcasecmp(at, id) : -1;
}

/* Job id's parts' rows into op, by idx (a gap is left NULL; an index past what a job may have is
 * ignored: its rows were written from a document that had it). Called for ascending ids. 0,
 * -ENOMEM or -EIO. */
static int open_parts_read(struct open_parts *op, struct parts_walk *w, const char *id,
                           size_t *ret_n)
{
        ssize_t offs[3 * OPEN_PARTS_MAX];
        size_t n = 0, skipped = 0;

        op->buf_len = 0;
        if (w->rc == 0)
                parts_walk_seek(w, id);
        while (w->rc == SQLITE_ROW && parts_walk_cmp(w, id) < 0) {
                if (++skipped > PARTS_SKIP_MAX) {
                        parts_walk_seek(w, id);
                        skipped = 0;
                        continue;
                }
                w->rc = sqlite3_step(w->st);
        }
        for (; w->rc == SQLITE_ROW && parts_walk_cmp(w, id) == 0; w->rc = sqlite3_step(w->st)) {
                sqlite3_int64 idx = sqlite3_column_int64(w->st, 1);
                const char *uuid = (const char *)sqlite3_column_text(w->st, 2);
                const char *state = (const char *)sqlite3_column_text(w->st, 3);
                const char *doc = (const char *)sqlite3_column_text(w->st, 4);

                if (idx < 0 || idx >= OPEN_PARTS_MAX || !uuid || !state)
                        continue; /* the document's check will say: job_checked */
                while (n <= (size_t)idx) {
                        offs[3 * n] = offs[3 * n + 1] = offs[3 * n + 2] = -1;
                        n++;
                }
                offs[3 * idx] = open_parts_keep(op, uuid);
                offs[3 * idx + 1] = open_parts_keep(op, state);
                offs[3 * idx + 2] = doc ? open_parts_keep(op, doc) : -1;
                if (offs[3 * idx] < 0 || offs[3 * idx + 1] < 0 || (doc && offs[3 * idx + 2] < 0))
                        return -ENOMEM;
        }
        if (w->rc == SQLITE_NOMEM)
                return -ENOMEM;
        if (w->rc != SQLITE_ROW && w->rc != SQLITE_DONE)
                return log_error_errno(EIO, "SQLite: cannot read the parts of job %s: %s", id,
                                       sqlite3_errstr(w->rc));
        if (n > op->cap) {
                struct store_open_part *p = realloc(op->parts, n * sizeof(*p));
                if (!p)
                        return -ENOMEM;
                op->parts = p;
                op->cap = n;
        }
        for (size_t i = 0; i < n; i++) {
                op->parts[i].uuid = offs[3 * i] < 0 ? NULL : op->buf + offs[3 * i];
                op->parts[i].state = offs[3 * i + 1] < 0 ? NULL : op->buf + offs[3 * i + 1];
                op->parts[i].doc = offs[3 * i + 2] < 0 ? NULL : op->buf + offs[3 * i + 2];
        }
        *ret_n = n;
        return 0;
}

/* o's text by R_OPEN_TEXT (NULL, with 0, when the row has none). 0, -ENOMEM or -EIO. */
static int open_text_read(sqlite3_stmt *st, struct store_open_job *o)
{
        int rc, r = 0;

        sqlite3_bind_text(st, 1, o->id, -1, SQLITE_STATIC);
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
                o->text = internal_text(st, 0, 1, 2, &o->text_len);
                if (!o->text && sqlite3_column_type(st, 0) != SQLITE_NULL)
                        r = -ENOMEM;
        } else if (rc != SQLITE_DONE)
                r = log_error_errno(EIO, "SQLite: cannot read job %s: %s", o->id,
                                    sqlite3_errstr(rc));
        sqlite3_reset(st);
        sqlite3_clear_bindings(st);
        return r;
}

int store_recover(struct store *s, store_open_fn fn, void *userdata)
{
        struct open_parts op = {0};
        struct parts_walk w = {0};
        struct reader *rd;
        sqlite3_stmt *st;
        int rc, r;

        r = store_read_take(s, &rd);
        if (r < 0)
                return r;
        st = rd->st[R_OPEN];
        w.st = rd->st[R_OPEN_PARTS];
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
                struct store_open_job o = {
                    .id = (const char *)sqlite3_column_text(st, O_ID),
                    .state = (const char *)sqlite3_column_text(st, O_STATE),
                    .priority = (const char *)sqlite3_column_text(st, O_PRIORITY),
                    .client = (const char *)sqlite3_column_text(st, O_CLIENT),
                    .idempotency_key = (const char *)sqlite3_column_text(st, O_IDEM),
                    .cancel_requested = sqlite3_column_type(st, O_CANCEL) == SQLITE_NULL
                                            ? -1
                                            : sqlite3_column_int(st, O_CANCEL) != 0,
                    .created_ms = sqlite3_column_int64(st, O_CREATED),
                };

                if (!o.id) {
                        log_warning("store: an unfinished job has no id; skipped");
                        continue;
                }
                r = open_parts_read(&op, &w, o.id, &o.n_parts);
                if (r < 0)
                        break;
                o.parts = op.parts;
                r = fn(&o, userdata);
                if (r == STORE_OPEN_WANT_TEXT) {
                        r = open_text_read(rd->st[R_OPEN_TEXT], &o);
                        if (r == 0)
                                r = fn(&o, userdata);
                        free(o.text);
                }
                if (r < 0)
                        break;
        }
        sqlite3_reset(st);
        sqlite3_reset(w.st);
        sqlite3_clear_bindings(w.st);
        store_read_give(s, rd);
        free(op.parts);
        free(op.buf);
        if (r == -ENOMEM)
                return log_error_errno(ENOMEM, "store: out of memory reading unfinished jobs");
        if (r < 0)
                return r;
        if (rc != SQLITE_DONE)
                return log_error_errno(EIO, "SQLite: cannot read unfinished jobs: %s",
                                       sqlite3_errstr(rc));
        return 0;
}
