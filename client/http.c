/* libcurl for umdctl (see http.h). One easy handle reused for every request of a run, so a
 * --wait loop keeps its connection. */
#include "http.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "answer.h"

/* A bearer token file: one token and white space; a longer one is cut, and then refused. */
#define TOKEN_FILE_MAX 4096

#define MAX_BODY (64u * 1024 * 1024) /* a page of jobs with results stays far below this */

static int read_token(const char *path, char **ret)
{
        char buf[TOKEN_FILE_MAX];
        FILE *f = fopen(path, "re");

        if (!f) {
                int r = -errno;
                fprintf(stderr, "umdctl: cannot read token file %s: %s\n", path, strerror(errno));
                return r;
        }
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        char *s = buf;
        while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
                s++;
        size_t k = strcspn(s, "\r\n");
        while (k > 0 && (s[k - 1] == ' ' || s[k - 1] == '\t'))
                k--;
        s[k] = 0;
        /* A token is one word; a line with spaces is most likely umd's own tokens file
         * ("NAME ROLE TOKEN"), which must not be sent as is. */
        if (!*s || strpbrk(s, " \t")) {
                fprintf(stderr, "umdctl: %s must hold the bearer token alone on its first line\n",
                        path);
                return -EINVAL;
        }
        if (asprintf(ret, "Authorization: Bearer %s", s) < 0)
                return -ENOMEM;
        return 0;
}

int http_open(struct http *h, const char *url, const char *unix_socket, const char *token_file)
{
        int r;

        memset(h, 0, sizeof(*h));
        if (token_file) {
                r = read_token(token_file, &h->auth_header);
                if (r < 0)
                        return r;
        }
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
                fprintf(stderr, "umdctl: libcurl failed to initialise\n");
                return -EIO;
        }
        h->curl = curl_easy_init();
        h->base = strdup(url);
        if (!h->curl || !h->base) {
                fprintf(stderr, "umdctl: out of memory\n");
                return -ENOMEM;
        }
        size_t n = strlen(h->base);
        while (n > 0 && h->base[n - 1] == '/')
                h->base[--n] = 0;
        h->unix_socket = unix_socket;
        return 0;
}

void http_close(struct http *h)
{
        if (h->curl)
                curl_easy_cleanup(h->curl);
        free(h->base);
        free(h->auth_header);
        memset(h, 0, sizeof(*h));
        curl_global_cleanup();
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *user)
{
        struct http_answer *a = user;
        size_t n = size * nmemb;

        if (a->len + n > MAX_BODY)
                return 0; /* makes curl fail the transfer: an answer this big is not umd's */
        char *grown = realloc(a->body, a->len + n + 1);
        if (!grown)
                return 0;
        a->body = grown;
        memcpy(a->body + a->len, data, n);
        a->len += n;
        a->body[a->len] = 0;
        return n;
}

uint64_t http_now_ms(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int http_request(struct http *h, const char *method, const char *path, const json_t *body,
                 long timeout_ms, struct http_answer *ret)
{
        CURL *c = h->curl;
        struct curl_slist *headers = NULL;
        char *url = NULL, *data = NULL;
        char *ct = NULL;
        CURLcode cr;

        memset(ret, 0, sizeof(*ret));
        if (h->deadline_ms) {
                uint64_t now = http_now_ms();
                if (now >= h->deadline_ms) {
                        snprintf(ret->error, sizeof(ret->error), "no time left for %s %s", method,
                                 path);
                        ret->body = strdup("");
                        return -ETIMEDOUT;
                }
                if ((uint64_t)timeout_ms > h->deadline_ms - now)
                        timeout_ms = (long)(h->deadline_ms - now);
        }
        if (asprintf(&url, "%s%s", h->base, path) < 0) {
                snprintf(ret->error, sizeof(ret->error), "out of memory");
                return -EIO;
        }
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, ret);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "umdctl");
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, ret->error);
        if (h->unix_socket)
                curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, h->unix_socket);
        headers = curl_slist_append(headers, "Accept: application/json, text/plain");
        if (h->auth_header)
                headers = curl_slist_append(headers, h->auth_header);
        if (body) {
                data = json_dumps(body, JSON_COMPACT);
                headers = curl_slist_append(headers, "Content-Type: application/json");
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, data ? data : "");
        } else if (!strcmp(method, "POST")) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);

        cr = curl_easy_perform(c);
        if (cr == CURLE_OK) {
                curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &ret->status);
                if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct)
                        ret->content_type = strdup(ct);
        } else if (!ret->error[0]) {
                snprintf(ret->error, sizeof(ret->error), "%s", curl_easy_strerror(cr));
        }
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
        curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
        curl_slist_free_all(headers);
        free(data);
        free(url);
        if (!ret->body)
                ret->body = strdup("");
        text_clean(ret->error, false);
        if (cr == CURLE_OPERATION_TIMEDOUT)
                return -ETIMEDOUT;
        return cr == CURLE_OK ? 0 : -EIO;
}

void http_answer_free(struct http_answer *a)
{
        free(a->body);
        free(a->content_type);
        a->body = a->content_type = NULL;
}

json_t *http_answer_json(const struct http_answer *a)
{
        json_t *j;

        if (!a->body || !a->len)
                return NULL;
        j = json_loadb(a->body, a->len, 0, NULL);
        if (j && json_clean_strings(j) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

void http_answer_describe(const struct http_answer *a, char *buf, size_t len)
{
        json_t *j = http_answer_json(a);
        const char *title = json_string_value(json_object_get(j, "title"));
        const char *detail = json_string_value(json_object_get(j, "detail"));
        const char *field = json_string_value(json_object_get(j, "field"));

        if (title || detail) {
                snprintf(buf, len, "HTTP %ld %s: %s%s%s%s", a->status, title ? title : "",
                         detail ? detail : "", field ? " (field '" : "", field ? field : "",
                         field ? "')" : "");
        } else {
                /* not a problem document: the status and the first line of whatever came */
                size_t n = a->body ? strcspn(a->body, "\r\n") : 0;
                snprintf(buf, len, "HTTP %ld: %.*s", a->status, (int)(n > 160 ? 160 : n),
                         a->body ? a->body : "");
        }
        text_clean(buf, false);
        json_decref(j);
}
