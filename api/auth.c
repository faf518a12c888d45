/* Bearer tokens: parsing the tokens file, refusing one others can read, and resolving an
 * Authorization header to a name and a role. Secrets are kept zero-padded to AUTH_TOKEN_MAX
 * so every comparison touches the same bytes whatever the token, and the lookup compares
 * against every token without stopping at a match: how long a request takes says nothing
 * about how close its token came. Must never log, copy out or quote a secret. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "util.h"

/* A ROLE field's value: the longest role ("admin", "submit", "read"), and room to tell a longer
 * word from it. */
#define ROLE_WORD_MAX 16
/* What is wrong with a tokens file's line: a fixed sentence and the line's number. */
#define LINE_WHY_MAX 160
/* A tokens file's error: its path, the line and LINE_WHY_MAX. */
#define TOKENS_ERR_MAX 512

struct auth_token {
        char name[AUTH_NAME_MAX + 1];
        enum api_role role;
        size_t len;
        unsigned char secret[AUTH_TOKEN_MAX]; /* zero-padded */
};

struct auth_tokens {
        struct auth_token *tokens;
        size_t n, cap;
};

enum api_role auth_role_from_string(const char *s)
{
        if (!s)
                return ROLE_NONE;
        if (strcmp(s, "read") == 0)
                return ROLE_READ;
        if (strcmp(s, "submit") == 0)
                return ROLE_SUBMIT;
        if (strcmp(s, "admin") == 0)
                return ROLE_ADMIN;
        return ROLE_NONE;
}

const char *auth_role_name(enum api_role role)
{
        switch (role) {
        case ROLE_READ:
                return "read";
        case ROLE_SUBMIT:
                return "submit";
        case ROLE_ADMIN:
                return "admin";
        default:
                return "none";
        }
}

/* Zero when equal. Both buffers are AUTH_TOKEN_MAX bytes; the loop has no exit but its end and
 * the accumulator is volatile so the compiler cannot add one. */
static size_t diff_padded(const unsigned char *a, size_t alen, const unsigned char *b, size_t blen)
{
        volatile unsigned char acc = 0;

        for (size_t i = 0; i < AUTH_TOKEN_MAX; i++)
                acc |= (unsigned char)(a[i] ^ b[i]);
        return (size_t)acc | (alen ^ blen);
}

/* Copy s into a zero-padded buffer; a string too long to fit gets a length that matches no
 * stored token, but still costs a full comparison. */
static size_t pad(unsigned char *buf, const char *s, size_t len)
{
        memset(buf, 0, AUTH_TOKEN_MAX);
        if (len > AUTH_TOKEN_MAX) {
                memcpy(buf, s, AUTH_TOKEN_MAX);
                return SIZE_MAX;
        }
        memcpy(buf, s, len);
        return len;
}

bool auth_equal_ct(const char *a, size_t alen, const char *b, size_t blen)
{
        unsigned char pa[AUTH_TOKEN_MAX], pb[AUTH_TOKEN_MAX];
        size_t la = pad(pa, a, alen), lb = pad(pb, b, blen);
        /* Two over-long strings both pad to SIZE_MAX; they are never equal. */
        bool eq = diff_padded(pa, la, pb, lb) == 0 && la != SIZE_MAX;

        explicit_bzero(pa, sizeof(pa));
        explicit_bzero(pb, sizeof(pb));
        return eq;
}

/* ---- the file ---- */

static bool name_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '_' || c == '.' || c == '@';
}

/* RFC 6750's b64token: what a client can put after "Bearer " unquoted. */
static bool token_char(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=';
}

static bool is_blank(char c)
{
        return c == ' ' || c == '\t';
}

struct field {
        const char *s;
        size_t len;
};

/* Split [s, end) at blanks into at most max fields; returns how many there were (which may
 * exceed max: the extras are counted, not stored). */
static size_t split(const char *s, const char *end, struct field *f, size_t max)
{
        size_t n = 0;

        while (s < end) {
                const char *start;

                while (s < end && is_blank(*s))
                        s++;
                if (s == end)
                        break;
                start = s;
                while (s < end && !is_blank(*s))
                        s++;
                if (n < max) {
                        f[n].s = start;
                        f[n].len = (size_t)(s - start);
                }
                n++;
        }
        return n;
}

/* The role a ROLE field names; ROLE_NONE for anything else. */
static enum api_role field_role(const struct field *f)
{
        char role[ROLE_WORD_MAX];

        if (f->len >= sizeof(role))
                return ROLE_NONE;
        memcpy(role, f->s, f->len);
        role[f->len] = '\0';
        return auth_role_from_string(role);
}

static int check_line(const struct field *f, char *why, size_t whylen)
{
        if (f[0].len > AUTH_NAME_MAX) {
                snprintf(why, whylen, "name is longer than %d characters", AUTH_NAME_MAX);
                return -EINVAL;
        }
        for (size_t i = 0; i < f[0].len; i++)
                if (!name_char(f[0].s[i])) {
                        snprintf(why, whylen,
                                 "name may hold only letters, digits and - _ . @ (byte %zu)",
                                 i + 1);
                        return -EINVAL;
                }
        if (field_role(&f[1]) == ROLE_NONE) {
                snprintf(why, whylen, "role must be read, submit or admin");
                return -EINVAL;
        }
        if (f[2].len < AUTH_TOKEN_MIN || f[2].len > AUTH_TOKEN_MAX) {
                snprintf(why, whylen, "token must be %d to %d characters long (it has %zu)",
                         AUTH_TOKEN_MIN, AUTH_TOKEN_MAX, f[2].len);
                return -EINVAL;
        }
        for (size_t i = 0; i < f[2].len; i++)
                if (!token_char(f[2].s[i])) {
                        snprintf(why, whylen,
                                 "token may hold only letters, digits and - . _ ~ + / = "
                                 "(character %zu is not one)",
                                 i + 1);
                        return -EINVAL;
                }
        return 0;
}

static int tokens_add(struct auth_tokens *t, const struct field *f)
{
        struct auth_token *tok;

        if (t->n == t->cap) {
                size_t cap = t->cap ? t->cap * 2 : 8;
                struct auth_token *n = calloc(cap, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                if (t->tokens) {
                        memcpy(n, t->tokens, t->n * sizeof(*n));
                        explicit_bzero(t->tokens, t->n * sizeof(*n));
                        free(t->tokens);
                }
                t->tokens = n;
                t->cap = cap;
        }
        tok = &t->tokens[t->n++];
        memcpy(tok->name, f[0].s, f[0].len);
        tok->name[f[0].len] = '\0';
        tok->role = field_role(&f[1]);
        tok->len = pad(tok->secret, f[2].s, f[2].len);
        return 0;
}

int auth_tokens_parse(const char *text, size_t len, const char *origin, struct auth_tokens **ret,
                      char *err, size_t errlen)
{
        struct auth_tokens *t = calloc(1, sizeof(*t));
        const char *p = text, *end = text + len;
        unsigned line = 0;
        char why[LINE_WHY_MAX];
        int r = 0;

        if (!t)
                return -ENOMEM;
        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                const char *le = eol ? eol : end;
                struct field f[3];
                size_t n;

                line++;
                if (memchr(p, '\0', (size_t)(le - p))) {
                        snprintf(why, sizeof(why), "NUL byte in the line");
                        r = -EINVAL;
                        goto fail;
                }
                if (le > p && le[-1] == '\r')
                        le--;
                n = split(p, le, f, ELEMENTSOF(f));
                p = eol ? eol + 1 : end;
                if (n == 0 || f[0].s[0] == '#')
                        continue;
                if (n != 3) {
                        snprintf(why, sizeof(why), "expected NAME ROLE TOKEN, found %zu field%s", n,
                                 n == 1 ? "" : "s");
                        r = -EINVAL;
                        goto fail;
                }
                r = check_line(f, why, sizeof(why));
                if (r < 0)
                        goto fail;
                for (size_t i = 0; i < t->n; i++)
                        if (auth_equal_ct((const char *)t->tokens[i].secret, t->tokens[i].len,
                                          f[2].s, f[2].len)) {
                                snprintf(why, sizeof(why), "same token as '%s' above",
                                         t->tokens[i].name);
                                r = -EINVAL;
                                goto fail;
                        }
                r = tokens_add(t, f);
                if (r < 0) {
                        auth_tokens_free(t);
                        return r;
                }
        }
        *ret = t;
        return 0;

fail:
        snprintf(err, errlen, "%s:%u: %s", origin, line, why);
        auth_tokens_free(t);
        return r;
}

int auth_tokens_load(const char *path, struct auth_tokens **ret)
{
        _cleanup_close_ int fd = -1;
        _cleanup_free_ char *buf = NULL;
        struct auth_tokens *t = NULL;
        struct stat st;
        size_t len = 0;
        char err[TOKENS_ERR_MAX];
        int r;

        /* O_NONBLOCK: a FIFO at the path must fail the type check below, not block start-up
         * in open() until a writer appears. */
        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return log_error_errno(errno, "tokens_file %s: %m", path);
        if (fstat(fd, &st) < 0)
                return log_error_errno(errno, "tokens_file %s: %m", path);
        if (!S_ISREG(st.st_mode)) {
                log_error("tokens_file %s: not a regular file", path);
                return -EINVAL;
        }
        /* Anyone who can read the file can be admin; anyone who can write it can make
         * themselves one. */
        if (st.st_mode & 077) {
                log_error("tokens_file %s: mode %04o lets its group or others read or write it; "
                          "refusing to start (chmod 600 it)",
                          path, (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        /* Whoever owns the file can chmod it and write themselves an admin token: only root
         * and the user umd runs as may. */
        if (st.st_uid != 0 && st.st_uid != geteuid()) {
                log_error("tokens_file %s: owned by uid %u, neither root nor umd's own user "
                          "(uid %u); refusing to start (chown it)",
                          path, (unsigned)st.st_uid, (unsigned)geteuid());
                return -EPERM;
        }
        if (st.st_size > AUTH_FILE_MAX) {
                log_error("tokens_file %s: larger than %d bytes", path, AUTH_FILE_MAX);
                return -EFBIG;
        }
        buf = malloc((size_t)st.st_size + 1);
        if (!buf)
                return log_error_errno(ENOMEM, "tokens_file %s: %m", path);
        while (len < (size_t)st.st_size) {
                ssize_t k = read(fd, buf + len, (size_t)st.st_size - len);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0) {
                        r = log_error_errno(errno, "tokens_file %s: %m", path);
                        explicit_bzero(buf, len);
                        return r;
                }
                if (k == 0)
                        break;
                len += (size_t)k;
        }
        r = auth_tokens_parse(buf, len, path, &t, err, sizeof(err));
        explicit_bzero(buf, len);
        if (r == -ENOMEM)
                return log_error_errno(r, "tokens_file %s: %m", path);
        if (r < 0) {
                log_error("%s", err);
                return r;
        }
        if (t->n == 0) {
                log_error("tokens_file %s: holds no token (a line is NAME ROLE TOKEN)", path);
                auth_tokens_free(t);
                return -EINVAL;
        }
        *ret = t;
        return 0;
}

size_t auth_tokens_count(const struct auth_tokens *t)
{
        return t ? t->n : 0;
}

int auth_tokens_check_n(const struct auth_tokens *t, const char *authorization, size_t alen,
                        const char **ret_name, enum api_role *ret_role)
{
        unsigned char given[AUTH_TOKEN_MAX];
        const char *v = authorization, *end;
        size_t len, given_len, found = 0, idx = 0;

        if (!v)
                return -ENOKEY;
        end = v + alen;
        while (v < end && is_blank(*v))
                v++;
        /* The scheme is case-insensitive (RFC 9110 11.1). */
        if (end - v < 7 || strncasecmp(v, "Bearer", 6) != 0 || !is_blank(v[6]))
                return -ENOKEY;
        v += 6;
        while (v < end && is_blank(*v))
                v++;
        len = (size_t)(end - v);
        while (len > 0 && is_blank(v[len - 1]))
                len--;
        if (len == 0)
                return -EACCES;
        /* The whole value is the token: a NUL inside it must not end the comparison early
         * ("Bearer TOKEN\0junk" is not TOKEN). */
        if (memchr(v, '\0', len))
                return -EACCES;

        given_len = pad(given, v, len);
        for (size_t i = 0; i < t->n; i++) {
                size_t eq =
                    diff_padded(t->tokens[i].secret, t->tokens[i].len, given, given_len) == 0;
                size_t mask = (size_t)0 - eq;

                idx = (idx & ~mask) | (i & mask);
                found |= eq;
        }
        explicit_bzero(given, sizeof(given));
        if (!found)
                return -EACCES;
        *ret_name = t->tokens[idx].name;
        *ret_role = t->tokens[idx].role;
        return 0;
}

int auth_tokens_check(const struct auth_tokens *t, const char *authorization, const char **ret_name,
                      enum api_role *ret_role)
{
        return auth_tokens_check_n(t, authorization, authorization ? strlen(authorization) : 0,
                                   ret_name, ret_role);
}

struct auth_tokens *auth_tokens_free(struct auth_tokens *t)
{
        if (!t)
                return NULL;
        if (t->tokens) {
                explicit_bzero(t->tokens, t->cap * sizeof(*t->tokens));
                free(t->tokens);
        }
        free(t);
        return NULL;
}
