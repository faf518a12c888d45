/* GET /v1/jobs's answer as bytes: the next page's link (the query as the client gave it, with
 * the cursor) and the page, {"jobs":rows,"next":link|null}. The rows come from the store as
 * JSON text already (core_job_list) and are joined as they are, never parsed again: a page of
 * full results can be megabytes. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

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

/* The next page's path: every argument given, in one fixed order, then before=last. NULL when
 * out of memory. */
static char *next_link(const struct job_list_query *q, const char *last)
{
        char *next = NULL;
        size_t len = 0;
        bool first = true;
        FILE *f = open_memstream(&next, &len);

        if (!f)
                return NULL;
        fputs("/v1/jobs", f);
        url_append(f, &first, "status", q->status);
        url_append(f, &first, "benchmark", q->benchmark);
        url_append(f, &first, "device", q->device);
        url_append(f, &first, "label", q->label);
        url_append(f, &first, "since", q->since);
        url_append(f, &first, "until", q->until);
        url_append(f, &first, "after", q->after);
        url_append(f, &first, "limit", q->limit);
        url_append(f, &first, "include", q->include);
        url_append(f, &first, "before", last);
        if (fclose(f) != 0) {
                free(next);
                return NULL;
        }
        return next;
}

int job_list_page(const struct job_list_query *q, const struct job_rows *rows, char **ret_body,
                  size_t *ret_len, char **ret_next)
{
        char *next = NULL, *page = NULL;
        size_t page_len = 0;
        FILE *f;

        if (rows->more && !(next = next_link(q, rows->last)))
                return -ENOMEM;
        /* {"jobs":[...],"next":...}: the keys in json_dump_compact's (sorted) order, so the
         * page reads exactly as a dumped object would. */
        f = open_memstream(&page, &page_len);
        if (!f) {
                free(next);
                return -ENOMEM;
        }
        fputs("{\"jobs\":", f);
        fwrite(rows->rows, 1, rows->len, f);
        fputs(",\"next\":", f);
        /* The link holds only percent-encoded query values: no quote, no backslash. */
        if (next)
                fprintf(f, "\"%s\"", next);
        else
                fputs("null", f);
        fputc('}', f);
        if (fclose(f) != 0) {
                free(page);
                free(next);
                return -ENOMEM;
        }
        *ret_body = page;
        *ret_len = page_len;
        *ret_next = next;
        return 0;
}
