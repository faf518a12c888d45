/* The text view of train_step's placement matrix and embedding_gather's factors and planner
 * block (issue 60), for text.c. Reads the result's own keys; computes nothing new. */
#pragma once

#include <jansson.h>
#include <stdio.h>

/* A cell of the text view's tables: a number with its unit ("12.3 GB/s", "1.5 GiB", "262,144"),
 * a ratio, or a device's index ("all" for the node worker). */
#define TEXT_CELL_MAX 32

/* Renders result's "placement_matrix" and "embedding" where present; nothing otherwise. */
void text_render_train(FILE *f, const json_t *result);
