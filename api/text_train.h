/* The text view of train_step's placement matrix and embedding_gather's factors and planner
 * block (issue 60), for text.c. Reads the result's own keys; computes nothing new. */
#pragma once

#include <jansson.h>
#include <stdio.h>

/* Renders result's "placement_matrix" and "embedding" where present; nothing otherwise. */
void text_render_train(FILE *f, const json_t *result);
