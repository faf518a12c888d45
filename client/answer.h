/* What umdctl accepts from the far end: the shape of each umd document it reads (a job, a page
 * of jobs, a device, the device list, a health verdict, the text view of a job), whether an
 * error answer is one of umd's own problem documents, and the printable form of the strings in
 * them. Pure functions, no I/O, so the unit tests drive them. Whatever answers at umd's URL may
 * be something else (a reverse proxy's HTML page, a captive portal, an old umd, a hostile
 * server): nothing it sends is printed raw or trusted as a verdict before it passed here. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Each returns true when j has the shape umdctl relies on; false for anything else (NULL
 * included). Only what umdctl reads is checked: umd may add members. */

/* A job: an object with a string "id" (equal to want_id unless that is NULL), a string
 * "state" and a "parts" array of parts (objects with a string "state", a "uuid" that is one
 * word, and a "device" that is an integer index or the string "all"). */
bool answer_is_job(const json_t *j, const char *want_id);
/* GET /v1/jobs: an object with a "jobs" array of jobs and a "next" that is a string, null or
 * absent. */
bool answer_is_job_page(const json_t *j);
/* A device: an object with a one-word "uuid", an integer "index", a string "state" and a boolean
 * "paused"; "last_health", when present and not null, a verdict. */
bool answer_is_device(const json_t *j);
/* GET /v1/devices: an array of devices (possibly empty: umd owns no GPU). */
bool answer_is_device_list(const json_t *j);
/* A health verdict: an object whose "verdict" is "pass", "warn" or "fail" and whose "reasons",
 * when present, is an array of strings. */
bool answer_is_verdict(const json_t *j);
/* The text view of job id (GET /v1/jobs/ID?format=text): umd's table starts "job ID". */
bool answer_is_job_text(const char *content_type, const char *body, const char *id);

/* Whether an error answer is umd's own RFC 9457 problem: Content-Type application/problem+json,
 * a body with umd's problem type (https://umd.dev/problems/...), a title, a detail and a
 * status equal to the HTTP status. A proxy's error page is not. */
bool answer_is_umd_problem(long status, const char *content_type, const char *body, size_t len);

/* Make a server string printable, in place, for a terminal and for the scripts that read
 * umdctl's lines. Tab, CR, LF, VT and FF become a space (a field stays on its line; with
 * keep_lines, LF and tab are kept and CR is dropped, for a multi-line table), every other C0
 * control, DEL and each C1 control (U+0080..U+009F as UTF-8) is dropped. Returns the new length.
 */
size_t text_clean(char *s, bool keep_lines);
/* text_clean (one line) on every string value in j, in place. Members' names are left: umdctl
 * prints them only as JSON, where jansson escapes controls. 0 or -ENOMEM. */
int json_clean_strings(json_t *j);
