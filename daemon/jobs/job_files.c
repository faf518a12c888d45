/* The job files of the store before SQLite (STATE_DIR/jobs/<id>.json), a JSON format of the job
 * document's and so the job subsystem's, not the store's: reading them once for the store's
 * import into umd.db (each good one's row, made by job_doc.c, handed to the store), setting aside
 * what cannot be read, and writing them for --export from the rows the store reads. */
#include "jobs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "job_doc.h"
#include "jsonutil.h"
#include "store.h"

#include "fileio.h"
#include "log.h"
#include "util.h"
#include "uuid.h"

/* A job file holds a spec and per-device results; results are bounded by max_result_bytes
 * (default far below this), so a bigger file is damage, not data. */
#define JOB_FILE_MAX   (256u * 1024u * 1024u)
#define JOB_SUFFIX     ".json"
#define CORRUPT_SUFFIX ".corrupt"
/* Why a file was set aside, for the log: jansson's parse error (its text is at most 160 bytes)
 * with a few words around it. */
#define WHY_MAX 256

struct dir {
        int dirfd;
        const char *path;
};

static int job_file_name(const char *id, char buf[UUID_STRING_MAX + sizeof(JOB_SUFFIX)])
{
        if (!uuid_is_valid(id))
                return -EINVAL;
        snprintf(buf, UUID_STRING_MAX + sizeof(JOB_SUFFIX), "%s" JOB_SUFFIX, id);
        return 0;
}

static int write_job(int dirfd, const json_t *job)
{
        char name[UUID_STRING_MAX + sizeof(JOB_SUFFIX)];
        const char *id;
        size_t len;
        char *data;
        int r;

        id = json_string_value(json_object_get(job, "id"));
        if (job_file_name(id, name) < 0)
                return log_error_errno(EINVAL, "Refusing to write a job without a valid id");
        data = json_dump_pretty(job, &len);
        if (!data)
                return log_error_errno(ENOMEM, "Cannot serialise job %s", id);
        r = write_file_atomic(dirfd, name, data, len);
        free(data);
        if (r < 0)
                return log_error_errno(r, "Cannot write %s: %m", name);
        return 0;
}

static bool has_suffix(const char *s, const char *suffix)
{
        size_t n = strlen(s), m = strlen(suffix);

        return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* write_file_atomic's temps are ".<name>.tmp.XXXXXX". */
static bool is_temp_name(const char *s)
{
        return s[0] == '.' && strstr(s, ".tmp.") != NULL;
}

/* Rename name to name.corrupt (name.corrupt.N if taken), never replacing an older one. Never
 * fatal: an entry that cannot even be renamed (a name too long for the suffix) is skipped with a
 * warning, and the import renames the whole directory afterwards anyway. Returns 0. */
static int set_aside(struct dir *s, const char *name, const char *why)
{
        char target[NAME_MAX + 1];

        for (unsigned i = 0; i < 100; i++) {
                int n = i == 0
                            ? snprintf(target, sizeof(target), "%s" CORRUPT_SUFFIX, name)
                            : snprintf(target, sizeof(target), "%s" CORRUPT_SUFFIX ".%u", name, i);

                if (n < 0 || (size_t)n >= sizeof(target))
                        break;
                if (renameat2(s->dirfd, name, s->dirfd, target, RENAME_NOREPLACE) == 0) {
                        log_warning("Job file %s/%s is unusable (%s): moved to %s", s->path, name,
                                    why, target);
                        return 0;
                }
                if (errno != EEXIST)
                        break;
        }
        log_warning("Job file %s/%s is unusable (%s) and cannot be renamed: skipped", s->path, name,
                    why);
        return 0;
}

struct found {
        char id[UUID_STRING_MAX];
        json_t *job;
};

/* The row of a job read from a file (job_doc_row_from_file) handed to put (which takes it). */
static int put_row(const json_t *job, int (*put)(struct store_row *row, void *ctx), void *ctx)
{
        struct store_row row = {0};
        int r = job_doc_row_from_file(job, &row);

        if (r < 0)
                return r;
        r = put(&row, ctx);
        store_row_free(&row);
        return r;
}

static int found_cmp(const void *a, const void *b)
{
        return strcasecmp(((const struct found *)a)->id, ((const struct found *)b)->id);
}

/* Reads and checks one job file. 1 and *ret when good, 0 when set aside, <0 on a hard error. */
static int load_one(struct dir *s, job_files_validate_fn validate, const char *name, json_t **ret)
{
        char id[UUID_STRING_MAX] = "";
        const char *file_id;
        size_t n = strlen(name) - strlen(JOB_SUFFIX), len;
        char why[WHY_MAX];
        json_error_t err;
        char *data = NULL;
        json_t *j;
        int r;

        if (n == UUID_STRING_MAX - 1) {
                memcpy(id, name, n);
                id[n] = '\0';
        }
        if (!uuid_is_valid(id))
                return set_aside(s, name, "name is not a job id");

        /* A symlink here points somewhere umd does not own: set aside, never followed. */
        r = read_file_at_flags(s->dirfd, name, O_NOFOLLOW, JOB_FILE_MAX, &data, &len);
        if (r == -ENOMEM)
                return log_error_errno(r, "Cannot read %s/%s: %m", s->path, name);
        if (r < 0) {
                snprintf(why, sizeof(why), "unreadable: %s", strerror(-r));
                return set_aside(s, name, why);
        }
        j = json_parse_strict(data, len, JOB_DOC_JSON_DEPTH, &err);
        free(data);
        if (!j) {
                if (json_error_code(&err) == json_error_out_of_memory)
                        return log_error_errno(ENOMEM, "Cannot parse %s/%s", s->path, name);
                snprintf(why, sizeof(why), "invalid JSON at byte %d: %s", err.position, err.text);
                return set_aside(s, name, why);
        }
        if (!json_is_object(j)) {
                json_decref(j);
                return set_aside(s, name, "not a JSON object");
        }
        file_id = json_string_value(json_object_get(j, "id"));
        if (!file_id || strcasecmp(file_id, id) != 0) {
                json_decref(j);
                return set_aside(s, name, "its \"id\" does not match its name");
        }
        /* Read back as strictly as a submission: nothing downstream trusts a stored shape. */
        if (validate && validate(j, why, sizeof(why)) < 0) {
                json_decref(j);
                return set_aside(s, name, why);
        }
        *ret = j;
        return 1;
}

/* A write that never reached its rename: the job file, if any, is the previous whole version,
 * so the temporary file goes (or is set aside when it cannot: a directory named like one). */
static void drop_temp(struct dir *s, const char *name, unsigned *corrupt, unsigned *stale)
{
        if (unlinkat(s->dirfd, name, 0) < 0 && errno != ENOENT) {
                set_aside(s, name, strerror(errno)); /* not fatal */
                (*corrupt)++;
                return;
        }
        log_info("Removed stale temporary file %s/%s", s->path, name);
        (*stale)++;
}

/* j (taken, whatever the outcome) at the end of *found. 0, or -ENOMEM (logged). */
static int found_add(struct found **found, size_t *n, size_t *cap, json_t *j)
{
        if (*n == *cap) {
                size_t ncap = *cap ? *cap * 2 : 64;
                struct found *nf = realloc(*found, ncap * sizeof(**found));

                if (!nf) {
                        json_decref(j);
                        return log_error_errno(ENOMEM, "Cannot recover jobs");
                }
                *found = nf;
                *cap = ncap;
        }
        snprintf((*found)[*n].id, UUID_STRING_MAX, "%s",
                 json_string_value(json_object_get(j, "id")));
        (*found)[*n].job = j;
        (*n)++;
        return 0;
}

int job_files_import(const char *path, job_files_validate_fn validate,
                     int (*put)(struct store_row *row, void *ctx), void *ctx, unsigned *ret_corrupt)
{
        struct dir dir = {.path = path}, *s = &dir;
        struct found *found = NULL;
        size_t n_found = 0, cap = 0, i = 0;
        unsigned corrupt = 0, stale = 0;
        struct dirent *de;
        DIR *d;
        int fd, r = 0;

        if (!path || !put)
                return -EINVAL;
        s->dirfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (s->dirfd < 0)
                return log_error_errno(errno, "Cannot open %s: %m", s->path);
        /* fdopendir takes the fd: give it a copy so s->dirfd stays ours. */
        fd = fcntl(s->dirfd, F_DUPFD_CLOEXEC, 3);
        if (fd < 0) {
                r = log_error_errno(errno, "Cannot read %s: %m", s->path);
                close(s->dirfd);
                return r;
        }
        d = fdopendir(fd);
        if (!d) {
                r = log_error_errno(errno, "Cannot read %s: %m", s->path);
                close(fd);
                close(s->dirfd);
                return r;
        }
        rewinddir(d);

        for (;;) {
                json_t *j = NULL;

                errno = 0;
                de = readdir(d);
                if (!de) {
                        if (errno != 0)
                                r = log_error_errno(errno, "Cannot read %s: %m", s->path);
                        break;
                }
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (is_temp_name(de->d_name)) {
                        drop_temp(s, de->d_name, &corrupt, &stale);
                        continue;
                }
                if (!has_suffix(de->d_name, JOB_SUFFIX))
                        continue; /* *.corrupt and anything else someone left here */

                r = load_one(s, validate, de->d_name, &j);
                if (r < 0)
                        break;
                if (r == 0) {
                        corrupt++;
                        continue;
                }
                r = found_add(&found, &n_found, &cap, j);
                if (r < 0)
                        break;
        }
        closedir(d);

        if (r == 0 && (corrupt > 0 || stale > 0) && fsync_dir(s->dirfd) < 0)
                log_warning("Cannot sync %s: %m", s->path);
        if (r == 0) {
                if (n_found > 0)
                        qsort(found, n_found, sizeof(*found), found_cmp);
                for (; i < n_found; i++) {
                        r = put_row(found[i].job, put, ctx);
                        json_decref(found[i].job);
                        if (r < 0) {
                                i++;
                                break;
                        }
                        r = 0;
                }
        }
        for (; i < n_found; i++)
                json_decref(found[i].job);
        free(found);

        close(s->dirfd);
        if (r < 0)
                return r;
        if (ret_corrupt)
                *ret_corrupt = corrupt;
        return 0;
}

int job_files_export(int dirfd, const struct store_text *t)
{
        _cleanup_json_ json_t *j = job_doc_internal(t);

        return j ? write_job(dirfd, j) : -EBADMSG;
}
