/* The durable job store: STATE_DIR/jobs/<id>.json, one file a job, each state change written
 * atomically (temp, fsync, rename, fsync dir). Owns nothing in memory but the directory fd:
 * the in-memory index lives in jobs.c, built from what store_recover() hands back. */
#pragma once

#include <jansson.h>
#include <stddef.h>

struct store;

/* Open (creating STATE_DIR/jobs with 0750 if needed). 0 or -errno, logged. */
int store_open(const char *state_dir, struct store **ret);
void store_close(struct store *s);

/* Write the job document (must have a valid "id"). 0 or -errno, logged. */
int store_put(struct store *s, const json_t *job);
/* Remove jobs/<id>.json. 0, -ENOENT or -errno. */
int store_delete(struct store *s, const char *id);

/* Called once per job found by store_recover, in ascending id order (UUIDv7 = submission
 * order). The callback takes a reference if it keeps job. Return <0 to abort, >0 to have the
 * job's file set aside as corrupt (a document that is valid JSON but not a valid job). */
typedef int (*store_recover_fn)(json_t *job, void *userdata);
/* Recovery at start: delete stale temp files, rename unreadable or invalid files to
 * <name>.corrupt (logging each), then call fn for every good job in id order.
 * Does not change any job: the caller decides about running/queued ones and store_put()s them.
 * 0 or -errno. ret_corrupt (optional) counts files set aside. */
int store_recover(struct store *s, store_recover_fn fn, void *userdata, unsigned *ret_corrupt);
