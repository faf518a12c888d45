/* Every form of a job's document and every conversion of it (job_doc.h): the public form of a
 * job (job_doc_public_copy, job_doc_public_expand); a job's row for the store, made from its
 * document (job_doc_row: the public document dumped once with each part's result spliced in as
 * the worker's bytes, its summary and its indexed columns), lazily through the store's row maker
 * from the shallow snapshot a change is queued as (job_doc_maker); a new job's row made before its
 * id is known (job_doc_new_prepare); a part's own document; and a stored document parsed back
 * (job_doc_parse). The store takes and returns bytes and never sees this JSON. */
#include "job_doc.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "job_state.h"
#include "jsonraw.h"
#include "jsonutil.h"
#include "store.h"
#include "util.h"
#include "uuid.h"
#include "log.h"

/* ---- the public form of a job ---- */

/* What clients see: the internal document less the bookkeeping only umd needs; without results
 * for lists. Shallow: what lies below the top level and the part objects is shared, results kept
 * as the worker's bytes included (job_doc_public_expand parses those, outside the caller's lock).
 */
json_t *job_doc_public_copy(const json_t *doc, bool with_results)
{
        json_t *j = json_copy((json_t *)doc), *parts = json_array();
        size_t i;
        json_t *p;

        if (!j || !parts) {
                json_decref(j);
                json_decref(parts);
                return NULL;
        }
        json_object_del(j, "request");
        json_object_del(j, "created_ms");
        json_object_del(j, "finished_ms");
        json_array_foreach(json_object_get(doc, "parts"), i, p)
        {
                json_t *c = json_copy(p);
                if (c && !with_results)
                        json_object_del(c, "result");
                if (!c || json_array_append_new(parts, c) < 0) {
                        json_decref(j);
                        json_decref(parts);
                        return NULL;
                }
        }
        if (json_object_set_new(j, "parts", parts) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int job_doc_public_expand(json_t *pub)
{
        size_t i;
        json_t *p;

        json_array_foreach(json_object_get(pub, "parts"), i, p)
        {
                json_t *res = json_object_get(p, "result");

                if (json_raw_get(res, NULL, NULL) &&
                    json_object_set_new(p, "result", json_raw_tree(res)) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* strdup that keeps NULL, setting *oom when a copy fails. */
static char *dup_or_null(const char *v, bool *oom)
{
        char *c;

        if (!v)
                return NULL;
        c = strdup(v);
        if (!c)
                *oom = true;
        return c;
}

/* What a part's result is dumped as before its bytes are spliced in: a string no parsed
 * document holds (it starts with NUL), which jansson writes as RESULT_MARK. */
#define RESULT_MARK_VALUE "\0result"
#define RESULT_MARK       "\"\\u0000result\""
#define RESULT_KEY        "\"result\":"

/* The bytes of a part's result: a raw node's own (the worker's compact dump), else its dump,
 * left in *ret_dump for the caller to free. 0 or -ENOMEM. */
static int result_bytes(const json_t *res, const char **ret, size_t *ret_len, char **ret_dump)
{
        if (json_raw_get(res, ret, ret_len))
                return 0;
        /* Every part of a job not yet final has one: a dump would cost more than the row's
         * other work for it. */
        if (json_is_null(res)) {
                *ret = "null";
                *ret_len = strlen("null");
                return 0;
        }
        *ret_dump = json_dump_compact(res, ret_len);
        if (!*ret_dump)
                return -ENOMEM;
        *ret = *ret_dump;
        return 0;
}

/* The row's document and summary from text, the public document dumped with each of its
 * n_results parts' result a mark: the document with the results' bytes in place of the marks,
 * the summary without the member at all (a dump of the parts without "result" is those bytes).
 * So a result is never parsed nor dumped again for the row, and the job is dumped once.
 * 0, -ENOMEM or -EINVAL (a mark not found: cannot be). */
static int splice_results(const char *text, size_t len, const json_t *parts, size_t n_results,
                          struct store_row *row)
{
        const size_t mark = strlen(RESULT_MARK), key = strlen(RESULT_KEY);
        size_t cap = len + 1, dpos = 0, spos = 0, dcur = 0, scur = 0, i, k = 0;
        char **dumps = calloc(n_results, sizeof(*dumps));
        const char **bytes = calloc(n_results, sizeof(*bytes));
        size_t *lens = calloc(n_results, sizeof(*lens));
        int r = -ENOMEM;
        json_t *p;

        if (!dumps || !bytes || !lens)
                goto out;
        json_array_foreach(parts, i, p)
        {
                const json_t *res = json_object_get(p, "result");

                if (!res)
                        continue;
                if (k == n_results || result_bytes(res, &bytes[k], &lens[k], &dumps[k]) < 0)
                        goto out;
                cap += lens[k++];
        }
        row->doc = malloc(cap);
        row->summary = malloc(len + 1);
        if (!row->doc || !row->summary)
                goto out;
        r = -EINVAL;
        for (k = 0; k < n_results; k++) {
                const char *at = memmem(text + dcur, len - dcur, RESULT_MARK, mark);
                size_t off, cut_from, cut_to;

                if (!at)
                        goto out;
                off = (size_t)(at - text);
                /* Never a part's first member ("device" sorts before it), but cut it right if
                 * it were: with the comma after it instead of the one before. */
                if (off >= key + 1 && memcmp(text + off - key, RESULT_KEY, key) == 0 &&
                    text[off - key - 1] == ',') {
                        cut_from = off - key - 1;
                        cut_to = off + mark;
                } else if (off >= key + 1 && memcmp(text + off - key, RESULT_KEY, key) == 0) {
                        cut_from = off - key;
                        cut_to = off + mark + (off + mark < len && text[off + mark] == ',');
                } else
                        goto out;
                memcpy(row->doc + dpos, text + dcur, off - dcur);
                dpos += off - dcur;
                memcpy(row->doc + dpos, bytes[k], lens[k]);
                dpos += lens[k];
                dcur = off + mark;
                memcpy(row->summary + spos, text + scur, cut_from - scur);
                spos += cut_from - scur;
                scur = cut_to;
        }
        memcpy(row->doc + dpos, text + dcur, len - dcur);
        row->doc_len = dpos + len - dcur;
        row->doc[row->doc_len] = '\0';
        memcpy(row->summary + spos, text + scur, len - scur);
        row->sum_len = spos + len - scur;
        row->summary[row->sum_len] = '\0';
        r = 0;
out:
        for (k = 0; dumps && k < n_results; k++)
                free(dumps[k]);
        free(dumps);
        free(bytes);
        free(lens);
        return r;
}

int job_doc_row(const json_t *job, struct store_row *ret)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        json_t *parts = json_object_get(job, "parts"), *fin = json_object_get(job, "finished_ms");
        _cleanup_json_ json_t *mark = NULL;
        _cleanup_free_ char *text = NULL;
        struct store_row row = {0};
        bool oom = false;
        size_t n_results = 0, len;
        json_t *p;
        size_t i;
        int r;

        if (!id || !uuid_is_valid(id) || !json_is_array(parts))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        /* The public document is the internal one less three keys, dumped once as if it had
         * none of them (no new top level is built). The summary (what lists serve) is the same
         * bytes unless some part has a result, which is all a queued or running job ever has. */
        struct json_override ov[] = {
            {"request", NULL}, {"created_ms", NULL}, {"finished_ms", NULL}, {"parts", NULL}};
        size_t n_ov = 3; /* the fourth, the parts' results as marks, where some part has one */
        json_array_foreach(parts, i, p) n_results += json_object_get(p, "result") != NULL;
        if (n_results > 0) {
                /* Each part dumped as if its result were a mark: no part is copied for it. */
                mark = json_stringn_nocheck(RESULT_MARK_VALUE, sizeof(RESULT_MARK_VALUE) - 1);
                if (!mark)
                        goto oom;
                ov[n_ov++] = (struct json_override){"parts", NULL, "result", mark};
        }
        /* No result is in this dump (each is a mark, its bytes spliced in after), so nothing in
         * it is deeper than umd's dumper goes or other than UTF-8 (what jansson made): NULL is
         * out of memory. */
        text = json_dump_compact_with(job, ov, n_ov, &len);
        if (!text)
                goto oom;
        if (n_results == 0) {
                row.doc = text;
                text = NULL;
                row.doc_len = len;
                row.summary = row.doc;
                row.sum_len = row.doc_len;
        } else {
                r = splice_results(text, len, parts, n_results, &row);
                if (r == -EINVAL) {
                        store_row_free(&row);
                        return log_error_errno(EIO,
                                               "Job %s: a result's place not found in its "
                                               "dump",
                                               id);
                }
                if (r < 0)
                        goto oom;
        }

        str_copy_cut(row.id, sizeof(row.id), id);
        row.state = dup_or_null(json_string_value(json_object_get(job, "state")), &oom);
        row.benchmark = dup_or_null(json_string_value(json_object_get(job, "benchmark")), &oom);
        row.client = dup_or_null(json_string_value(json_object_get(job, "client")), &oom);
        row.idem = dup_or_null(json_string_value(json_object_get(job, "idempotency_key")), &oom);
        row.request = dup_or_null(json_string_value(json_object_get(job, "request")), &oom);
        row.priority = dup_or_null(json_string_value(json_object_get(job, "priority")), &oom);
        row.cancel_requested = json_is_true(json_object_get(job, "cancel_requested"));
        row.created_ms = json_integer_value(json_object_get(job, "created_ms"));
        row.finished = json_is_integer(fin);
        row.finished_ms = json_integer_value(fin);
        row.parts = calloc(json_array_size(parts) ?: 1, sizeof(*row.parts));
        if (!row.parts)
                goto oom;
        json_array_foreach(parts, i, p)
        {
                struct store_part_row *pr = &row.parts[row.n_parts++];

                pr->uuid = dup_or_null(json_string_value(json_object_get(p, "uuid")) ?: "", &oom);
                pr->state = dup_or_null(json_string_value(json_object_get(p, "state")) ?: "", &oom);
                pr->verdict = dup_or_null(
                    json_string_value(json_object_get(json_object_get(p, "verdict"), "verdict")),
                    &oom);
        }
        if (oom)
                goto oom;
        *ret = row;
        return 0;
oom:
        store_row_free(&row);
        return log_error_errno(ENOMEM, "Cannot serialise job %s", id);
}

/* What the writer will dump of job: a new top level and new part objects, the rest shared. The
 * callers change a job only at those two levels (a key set to a new value), and leave what lies
 * below alone once it is in the document, so the writer can dump the copy without their lock
 * while they go on; jansson's reference counts are atomic. NULL: out of memory. */
json_t *job_doc_snapshot(const json_t *job)
{
        json_t *snap = json_copy((json_t *)job), *parts = json_array(), *p;
        size_t i;

        if (!snap || !parts)
                goto oom;
        json_array_foreach(json_object_get(job, "parts"), i, p)
        {
                if (json_array_append_new(parts, json_copy(p)) < 0)
                        goto oom;
        }
        if (json_object_set_new(snap, "parts", parts) < 0) {
                parts = NULL; /* taken, and freed, by the failed set */
                goto oom;
        }
        return snap;
oom:
        json_decref(parts);
        json_decref(snap);
        return NULL;
}

int job_doc_row_from_file(const json_t *job, struct store_row *ret)
{
        _cleanup_json_ json_t *copy = json_copy((json_t *)job);

        if (!copy)
                return -ENOMEM;
        /* The old store kept finished_ms only once final; a final job without it would look
         * unfinished here. */
        int st = job_state_from_string(json_string_value(json_object_get(copy, "state")));
        if (!json_is_integer(json_object_get(copy, "finished_ms")) && st != JOB_QUEUED &&
            st != JOB_RUNNING) {
                json_t *c = json_object_get(copy, "created_ms");
                json_object_set_new(copy, "finished_ms",
                                    json_is_integer(c)
                                        ? json_incref(c)
                                        : json_integer((json_int_t)now_realtime_ms()));
        }
        return job_doc_row(copy, ret);
}

int job_doc_source(const json_t *job, bool final, void **ret)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        json_t *src;

        assert(ret);
        if (!id || !uuid_is_valid(id) || !json_is_array(json_object_get(job, "parts")))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        /* Under the caller's lock it pays a shallow copy, or a reference to a job that no one
         * changes again; the dumps (one, two when results must leave the summary) come after
         * the lock is let go (job_doc_maker). */
        src = final ? json_incref((json_t *)job) : job_doc_snapshot(job);
        if (!src)
                return log_error_errno(ENOMEM, "Cannot queue job %s's change", id);
        *ret = src;
        return 0;
}

static int maker_make(void *src, struct store_row *ret)
{
        return job_doc_row(src, ret);
}

static void maker_drop(void *src)
{
        json_decref(src);
}

const struct store_row_maker job_doc_maker = {.make = maker_make, .drop = maker_drop};

/* The offset of the top level's id in a document's bytes, just past its opening quote: keys
 * come sorted and those before "id" hold scalars only, so its first appearance as a key is the
 * top level's (a string holding the pattern has its quotes escaped). false: not there. */
static bool find_id(const char *doc, size_t len, const char *id, size_t *ret)
{
        char key[sizeof("\"id\":\"\"") + UUID_STRING_MAX];
        int n = snprintf(key, sizeof(key), "\"id\":\"%s\"", id);
        const char *at = memmem(doc, len, key, (size_t)n);

        if (!at)
                return false;
        *ret = (size_t)(at - doc) + strlen("\"id\":\"");
        return true;
}

int job_doc_new_prepare(const json_t *job, struct job_doc_new **ret)
{
        const char *id = json_string_value(json_object_get(job, "id"));
        struct job_doc_new *p;
        int r;

        assert(ret);
        if (!id || !uuid_is_valid(id))
                return log_error_errno(EINVAL, "Refusing to store a job without id or parts");
        p = calloc(1, sizeof(*p));
        if (!p)
                return log_error_errno(ENOMEM, "Cannot queue a new job's write");
        r = job_doc_row(job, &p->row);
        if (r < 0) {
                free(p);
                return r;
        }
        if (!find_id(p->row.doc, p->row.doc_len, id, &p->id_at_doc) ||
            !find_id(p->row.summary, p->row.sum_len, id, &p->id_at_sum)) {
                job_doc_new_free(p);
                return log_error_errno(EINVAL, "Job %s: its id not found in its document", id);
        }
        *ret = p;
        return 0;
}

int job_doc_new_row(struct job_doc_new *p, const char *id, struct store_row *ret)
{
        size_t len;

        assert(p && ret);
        if (!id || !uuid_is_valid(id) || (len = strlen(id)) != strlen(p->row.id)) {
                job_doc_new_free(p);
                return log_error_errno(EINVAL, "Refusing to store a new job under '%s': not an id",
                                       id ? id : "(none)");
        }
        memcpy(p->row.doc + p->id_at_doc, id, len);
        if (p->row.summary != p->row.doc)
                memcpy(p->row.summary + p->id_at_sum, id, len);
        str_copy_cut(p->row.id, sizeof(p->row.id), id);
        p->row.fresh = true;
        *ret = p->row;
        free(p);
        return 0;
}

void job_doc_new_free(struct job_doc_new *p)
{
        if (!p)
                return;
        store_row_free(&p->row);
        free(p);
}

/* The part's own document: its object compact, the result spliced in as its bytes (a worker's
 * raw node is dumped by no one). Member order is no matter: recovery parses it. NULL when out of
 * memory or the part cannot be dumped (nothing in it is deeper than umd's dumper goes, but a
 * caller that gets NULL writes the whole document instead, which says why). */
char *job_doc_part_text(const json_t *part, size_t *ret_len)
{
        static const char key[] = "{\"result\":";
        const json_t *res = json_object_get(part, "result");
        struct json_override ov = {"result", NULL};
        _cleanup_free_ char *rest = NULL, *dump = NULL;
        const char *bytes;
        size_t rest_len, len;
        char *out;

        rest = res ? json_dump_compact_with(part, &ov, 1, &rest_len)
                   : json_dump_compact(part, &rest_len);
        if (!rest || rest_len < 2 || rest[0] != '{')
                return NULL;
        if (!res) {
                char *whole = rest;

                rest = NULL;
                *ret_len = rest_len;
                return whole;
        }
        if (result_bytes(res, &bytes, &len, &dump) < 0)
                return NULL;
        /* {"result":BYTES then, after a comma unless the rest is {}, the rest less its { */
        out = malloc(sizeof(key) - 1 + len + rest_len + 1);
        if (!out)
                return NULL;
        size_t n = sizeof(key) - 1;
        memcpy(out, key, n);
        memcpy(out + n, bytes, len);
        n += len;
        if (rest_len > 2)
                out[n++] = ',';
        memcpy(out + n, rest + 1, rest_len - 1);
        n += rest_len - 1;
        out[n] = '\0';
        *ret_len = n;
        return out;
}

/* ---- a stored document parsed back ---- */

/* A document the store hands back, as a tree: umd wrote it with json_dump_compact (results
 * spliced in as the worker's canonical bytes), so it is built without jansson's parser (a third
 * of a read-back job's dispatch), and parsed strictly only when that fails. NULL: not a JSON
 * object or array (or out of memory). */
static json_t *parse_stored(const char *text, size_t len)
{
        json_error_t err;
        json_t *j = json_canonical_load(text, len, JOB_DOC_JSON_DEPTH);

        if (j && (json_is_object(j) || json_is_array(j)))
                return j;
        json_decref(j);
        return json_parse_strict(text, len, JOB_DOC_JSON_DEPTH, &err);
}

json_t *job_doc_internal(const struct store_text *t)
{
        json_t *j = parse_stored(t->doc, t->doc_len);

        if (!j || !json_is_object(j)) {
                json_decref(j);
                log_error("store: a stored job is not a JSON object");
                return NULL;
        }
        if ((t->request && json_object_set_new(j, "request", json_string(t->request)) < 0) ||
            json_object_set_new(j, "created_ms", json_integer(t->created_ms)) < 0 ||
            (t->finished &&
             json_object_set_new(j, "finished_ms", json_integer(t->finished_ms)) < 0)) {
                json_decref(j);
                log_error("store: out of memory reading a job back");
                return NULL;
        }
        return j;
}

/* A stored row's text made a tree by its public document alone or with the extras. 0 or
 * -EBADMSG (logged). */
static int tree_of(const char *id, struct store_text *t, bool internal, json_t **ret)
{
        json_t *j = internal ? job_doc_internal(t) : parse_stored(t->doc, t->doc_len);

        store_text_free(t);
        if (!j)
                return log_error_errno(EBADMSG, "store: job %s is not valid JSON", id);
        *ret = j;
        return 0;
}

int job_doc_get(struct store *s, const char *id, json_t **ret)
{
        struct store_text t;
        int r = store_get(s, id, &t);

        return r < 0 ? r : tree_of(id, &t, false, ret);
}

int job_doc_get_internal(struct store *s, const char *id, json_t **ret)
{
        struct store_text t;
        int r = store_get_internal(s, id, &t);

        return r < 0 ? r : tree_of(id, &t, true, ret);
}

int job_doc_get_internal_many(struct store *s, const char *const *ids, size_t n, json_t **ret)
{
        _cleanup_free_ struct store_text *t = calloc(n ?: 1, sizeof(*t));
        int r;

        for (size_t i = 0; i < n; i++)
                ret[i] = NULL;
        if (!t)
                return log_error_errno(ENOMEM, "Cannot read %zu jobs back", n);
        r = store_get_internal_many(s, ids, n, t);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (t[i].doc)
                        (void)tree_of(ids[i], &t[i], true, &ret[i]); /* logged */
        return 0;
}

int job_doc_find_idempotent(struct store *s, const char *key, const char *client, json_t **ret_job,
                            char **ret_request)
{
        struct store_text t;
        json_t *j;
        int r = store_find_idempotent(s, key, client, &t);

        if (r < 0)
                return r;
        j = parse_stored(t.doc, t.doc_len);
        if (!j) {
                store_text_free(&t);
                return log_error_errno(EIO, "store: cannot look up an idempotency key");
        }
        *ret_job = j;
        *ret_request = t.request;
        t.request = NULL;
        store_text_free(&t);
        return 0;
}

struct health_parts {
        const char *uuid;
        json_t *out;
};

/* store_health_docs's callback: the part of doc on the device, with its verdict, appended. */
static int health_part(const char *doc, size_t len, void *arg)
{
        struct health_parts *h = arg;
        _cleanup_json_ json_t *j = parse_stored(doc, len);
        size_t i;
        json_t *p;

        json_array_foreach(json_object_get(j, "parts"), i, p)
        {
                const char *u = json_string_value(json_object_get(p, "uuid"));

                if (u && strcasecmp(u, h->uuid) == 0 && json_object_get(p, "verdict"))
                        return json_array_append(h->out, p) < 0 ? -ENOMEM : 0;
        }
        return 0;
}

int job_doc_health_parts(struct store *s, const char *uuid, const char *exclude_id,
                         bool passing_only, size_t max, json_t **ret_parts)
{
        struct health_parts h = {.uuid = uuid, .out = json_array()};
        int r;

        if (!h.out)
                return -ENOMEM;
        r = store_health_docs(s, uuid, exclude_id, passing_only, max, health_part, &h);
        if (r < 0) {
                json_decref(h.out);
                return r;
        }
        *ret_parts = h.out;
        return 0;
}

bool job_doc_label_matches(const char *doc, size_t len, void *arg)
{
        const struct job_doc_label *l = arg;
        _cleanup_json_ json_t *job = parse_stored(doc, len);
        const char *k;
        json_t *v;

        json_object_foreach(json_object_get(job, "labels"), k, v)
        {
                if (strlen(k) == l->key_len && strncmp(k, l->key, l->key_len) == 0 &&
                    json_is_string(v) && strcmp(json_string_value(v), l->value) == 0)
                        return true;
        }
        return false;
}

json_t *job_doc_parse(const char *text, size_t len, json_error_t *e)
{
        return json_parse_strict(text, len, JOB_DOC_JSON_DEPTH, e);
}
