/* The fake model of train_step and embedding_gather (issue 60): each measurement's modelled
 * time and keys by the same rules the GPU follows (bounds, refusals, names), for fake.c to
 * measure with its jitter. A model, never a measurement: the result says fake. */
#pragma once

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* A point's measurement name: "placement@class" or an embedding strategy (under 40 bytes), with
 * room; snprintf cuts a longer one. */
#define FAKE_POINT_NAME_MAX 64
/* Why a model refused (a bound broken, with its numbers): one sentence. */
#define FAKE_WHY_MAX 160

struct fake_point {
        char name[FAKE_POINT_NAME_MAX];
        uint64_t bytes; /* the measurement's bytes */
        double ms;      /* a sample's modelled time */
        json_t *extra;  /* merged into the measurement, owned */
};

struct fake_points {
        struct fake_point *p;
        size_t n;
};

/* 0 with out filled (free with fake_points_free), -EINVAL / -ENOMEM / -ENOTSUP with why.
 * free_bytes: the modelled GPU's free memory, refused past as the worker refuses. */
int fake_train_step(const json_t *params, uint64_t free_bytes, struct fake_points *out, char *why,
                    size_t why_len);
int fake_embedding_gather(const json_t *params, uint64_t free_bytes, struct fake_points *out,
                          char *why, size_t why_len);
void fake_points_free(struct fake_points *pts);
