/* Jobs rendered for people reading a terminal (Accept: text/plain or ?format=text): aligned
 * tables of every measurement, the suite summaries and health verdicts. JSON stays the default;
 * this is a view of the same document, never a second source of numbers. */
#pragma once

#include <jansson.h>

/* A malloc'd, NUL-terminated rendering of a job document as GET /v1/jobs/{id} returns it. */
char *text_render_job(const json_t *job);
