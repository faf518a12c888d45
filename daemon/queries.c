/* Reading jobs: one job (from memory while it is open, else the store's committed bytes), the
 * filtered and paged list (its filters, times and next-page URL), and the counts for STATUS=
 * and /v1/health. Nothing here changes a queue or a running count, so the lock is released
 * with core_unlock (no metrics to publish). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "catalog.h"
#include "config.h"
#include "core.h"
#include "devices.h"
#include "jobs.h"
#include "jobs_internal.h"
#include "jsonutil.h"
#include "log.h"
#include "queue.h"
#include "store.h"
#include "util.h"
#include "uuid.h"

void jobs_counts(size_t *ret_queued, size_t *ret_running, size_t *ret_total)
{
        core_lock();
        *ret_queued = jobs_queued_total();
        *ret_running = jobs_running_locked();
        *ret_total = js.store ? store_count(js.store) : 0;
        core_unlock();
}

const char *jobs_store_damage(void)
{
        return store_damage(js.store);
}

/* A store read's outcome r for job id as the API says it: 0, or a 404 / 500 problem. */
int store_read_problem(int r, const char *id, struct problem *p)
{
        if (r == -ENOENT)
                return problem_set(p, 404, "id", "no job %s", id);
        if (r < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        return 0;
}

int core_job_get(const char *id, json_t **ret_job, struct problem *p)
{
        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        core_lock();
        jobs_prune_finished();
        struct job *j = job_find(id);
        if (j)
                *ret_job = job_public(j->doc);
        core_unlock();
        if (j) {
                /* What a client reads is on disk: wait for the commit of what it shows. */
                store_sync(js.store);
                return 0;
        }
        /* Not in memory: finished, and committed before it left memory. */
        return store_read_problem(store_get(js.store, id, ret_job), id, p);
}

int core_job_get_finished(const char *id, struct blob **ret_body, struct problem *p)
{
        bool in_memory;

        if (!uuid_is_valid(id))
                return problem_set(p, 400, "id", "'%.64s' is not a job id (a UUID)", id);
        /* No pruning here: it walks every job in memory on each GET, under the one lock the
         * supervisor and submits need too. jobs_retry_unsaved prunes every store_retry_ms;
         * until then a committed job is served from memory, the same bytes. */
        core_lock();
        in_memory = job_find(id) != NULL;
        core_unlock();
        if (in_memory)
                return 1;
        /* Not in memory: finished, and committed before it left memory. */
        return store_read_problem(store_get_finished(js.store, id, ret_body), id, p);
}

/* Append "?name=v" or "&name=v" to f, percent-encoding v. A stream rather than a fixed
 * buffer: the filter values are bounded only by the request's length, and a cut link would
 * send the client a query that no longer parses. */
static void url_append(FILE *f, bool *first, const char *name, const char *v)
{
        static const char hex[] = "0123456789ABCDEF";

        if (!v)
                return;
        fprintf(f, "%s%s=", *first ? "?" : "&", name);
        *first = false;
        for (const unsigned char *c = (const unsigned char *)v; *c; c++) {
                if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                    (*c >= '0' && *c <= '9') || strchr("-_.~", *c))
                        fputc(*c, f);
                else
                        fprintf(f, "%%%c%c", hex[*c >> 4], hex[*c & 15]);
        }
}

/* A list's since/until: Unix milliseconds, or RFC 3339 with a Z or numeric offset. */
static int parse_time_ms(const char *s, uint64_t *ret)
{
        struct tm tm = {0};
        unsigned frac_ms = 0, digits = 0;
        int off = 0, oh, om, n = 0;
        uint64_t v;

        if (parse_uint64(s, 1, UINT64_C(253402300799999), &v) == 0) {
                *ret = v;
                return 0;
        }
        if (sscanf(s, "%4d-%2d-%2d%*[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                   &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
            n != 19)
                return -EINVAL;
        s += n;
        if (*s == '.') {
                for (s++; *s >= '0' && *s <= '9'; s++, digits++)
                        if (digits < 3)
                                frac_ms = frac_ms * 10 + (unsigned)(*s - '0');
                if (digits == 0)
                        return -EINVAL;
                for (; digits < 3; digits++)
                        frac_ms *= 10;
        }
        if (*s == 'Z' || *s == 'z') {
                s++;
        } else if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d%n", &oh, &om, &n) == 2 &&
                   n == 5 && oh < 24 && om < 60) {
                off = (*s == '-' ? -1 : 1) * (oh * 60 + om) * 60;
                s += 6;
        } else {
                return -EINVAL;
        }
        if (*s || tm.tm_year < 1970 || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
            tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
                return -EINVAL;
        tm.tm_year -= 1900;
        tm.tm_mon -= 1;
        time_t t = timegm(&tm);
        if (t == (time_t)-1 || (int64_t)t - off < 0)
                return -EINVAL;
        *ret = (uint64_t)((int64_t)t - off) * 1000u + frac_ms;
        return 0;
}

int core_job_list(const struct job_filter *f, struct job_page *ret_page, struct problem *p)
{
        int status = -1;
        ssize_t dev = -1;
        uint64_t limit = 50;
        const char *lk = NULL, *lv = NULL;
        size_t lklen = 0;
        struct store_query q = {0};

        if (f->status && (status = job_state_from_string(f->status)) < 0)
                return problem_set(p, 400, "status", "unknown status '%.32s' (%s)", f->status,
                                   job_state_names_list);
        if (f->limit && parse_uint64(f->limit, 1, js.cfg->list_limit_max, &limit) < 0)
                return problem_set(p, 400, "limit",
                                   "must be a whole number from 1 to %u "
                                   "(list_limit_max)",
                                   js.cfg->list_limit_max);
        if (f->before && !uuid_is_valid(f->before))
                return problem_set(p, 400, "before", "must be a job id (a UUID)");
        if (f->after && !uuid_is_valid(f->after))
                return problem_set(p, 400, "after", "must be a job id (a UUID)");
        if (f->include && strcmp(f->include, "results") != 0)
                return problem_set(p, 400, "include", "the one value is 'results'");
        if (f->benchmark && !catalog_find(f->benchmark))
                return problem_set(p, 400, "benchmark",
                                   "unknown benchmark '%.64s' (see GET /v1/benchmarks)",
                                   f->benchmark);
        if (f->label) {
                const char *colon = strchr(f->label, ':');
                if (!colon || colon == f->label)
                        return problem_set(p, 400, "label", "must be KEY:VALUE");
                lk = f->label;
                lklen = (size_t)(colon - f->label);
                lv = colon + 1;
        }

        if (f->since && parse_time_ms(f->since, &q.since_ms) < 0)
                return problem_set(p, 400, "since",
                                   "must be a time in RFC 3339 (2026-01-31T12:00:00Z) or Unix "
                                   "milliseconds");
        if (f->until && parse_time_ms(f->until, &q.until_ms) < 0)
                return problem_set(p, 400, "until",
                                   "must be a time in RFC 3339 (2026-01-31T12:00:00Z) or Unix "
                                   "milliseconds");

        char uuid[UUID_STRING_MAX + 64] = "";
        core_lock();
        if (f->device && (dev = devices_lookup(f->device)) < 0) {
                core_unlock();
                return problem_set(p, 400, "device", "unknown device '%.64s'", f->device);
        }
        if (dev >= 0)
                snprintf(uuid, sizeof(uuid), "%s", devices_get((size_t)dev)->uuid);
        core_unlock();

        q.state = status >= 0 ? job_state_names[status] : NULL;
        q.benchmark = f->benchmark;
        q.uuid = dev >= 0 ? uuid : NULL;
        q.label_key = lk;
        q.label_key_len = lklen;
        q.label_value = lv;
        q.before = f->before;
        q.after = f->after;
        q.limit = (size_t)limit;
        q.with_results = f->include != NULL;
        q.max_bytes = js.cfg->list_results_max_bytes;
        /* No store_sync here, unlike a job's GET: every change a client was answered about is
         * committed before that answer (submit, cancel) or before a GET shows it, so waiting
         * for the writer would only add the commits in flight of changes nobody saw yet (and
         * under load that wait was most of a list's time: p99 1.4 s, bench/load/RESULTS.md). */
        char *arr = NULL, last[UUID_STRING_MAX];
        size_t arr_len = 0, n = 0;
        bool more = false;
        if (store_list_raw(js.store, &q, &arr, &arr_len, &n, last, &more) < 0)
                return problem_set(p, 500, "",
                                   "the job store cannot be read (see the daemon's log)");
        char *next = NULL;
        size_t next_len = 0;
        if (more) {
                FILE *nf = open_memstream(&next, &next_len);
                bool first = true;

                if (nf) {
                        fputs("/v1/jobs", nf);
                        url_append(nf, &first, "status", f->status);
                        url_append(nf, &first, "benchmark", f->benchmark);
                        url_append(nf, &first, "device", f->device);
                        url_append(nf, &first, "label", f->label);
                        url_append(nf, &first, "since", f->since);
                        url_append(nf, &first, "until", f->until);
                        url_append(nf, &first, "after", f->after);
                        url_append(nf, &first, "limit", f->limit);
                        url_append(nf, &first, "include", f->include);
                        url_append(nf, &first, "before", last);
                        if (fclose(nf) != 0) {
                                free(next);
                                next = NULL;
                        }
                }
        }
        /* {"jobs":[...],"next":...}: the keys in json_dump_compact's (sorted) order, so the
         * page reads exactly as a dumped object would. */
        char *page = NULL;
        size_t page_len = 0;
        FILE *pf = (!more || next) ? open_memstream(&page, &page_len) : NULL;
        if (pf) {
                fputs("{\"jobs\":", pf);
                fwrite(arr, 1, arr_len, pf);
                fputs(",\"next\":", pf);
                /* The link holds only percent-encoded query values: no quote, no backslash. */
                if (next)
                        fprintf(pf, "\"%s\"", next);
                else
                        fputs("null", pf);
                fputc('}', pf);
                if (fclose(pf) != 0) {
                        free(page);
                        page = NULL;
                }
        }
        free(arr);
        if (!page) {
                free(next);
                return problem_set(p, 500, NULL, "out of memory building the page");
        }
        ret_page->body = page;
        ret_page->len = page_len;
        ret_page->next = next;
        ret_page->count = n;
        return 0;
}

json_t *jobs_node_json_locked(void)
{
        if (!have_node())
                return NULL;
        bool warm = js.node_wstate == WORKER_IDLE || js.node_wstate == WORKER_BUSY;
        /* Its crashes and restarts are the supervisor's (the node is its slot after the GPUs). */
        return json_pack(
            "{s:s, s:s, s:I, s:s, s:b, s:b, s:I, s:I, s:O?, s:o}", "uuid", "node", "device", "all",
            "gpus", (json_int_t)devices_count(), "state",
            device_state_names[device_state_of_worker(js.node_wstate)], "warm", warm, "running",
            js.node_running, "restarts",
            (json_int_t)(js.sup ? supervisor_restarts(js.sup, node_index()) : 0), "crashes",
            (json_int_t)(js.sup ? supervisor_crashes(js.sup, node_index()) : 0), "last_health",
            js.node_last_verdict, "last_health_by_tier",
            js.node_verdict_by_tier ? json_incref(js.node_verdict_by_tier) : json_object());
}
