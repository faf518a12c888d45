/* What jansson costs umd a job: parse, compact sorted dump, unsorted dump and deep copy of one
 * stored document, each timed over many rounds on this CPU. A finished two-part job of
 * bench/store/cpu's load is 3.2 KB; its writer dumps it once and its parts' results are parsed
 * once each, so these figures bound what JSON alone costs a job (bench/store/RESULTS.md, "Where
 * a job's CPU goes").
 * Build: cc -O2 bench/store/jansson-cost.c -ljansson -o /tmp/jansson-cost
 * Run:   /tmp/jansson-cost bench/store/job-2parts.json
 * (job-2parts.json: a finished job of that load, from a fake GPU.) */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ROUNDS 20000

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
        json_error_t e;
        json_t *doc;
        char *text;
        size_t len;
        double t;

        if (argc != 2) {
                fprintf(stderr, "usage: %s DOC.json\n", argv[0]);
                return 2;
        }
        doc = json_load_file(argv[1], 0, &e);
        if (!doc) {
                fprintf(stderr, "%s: %s\n", argv[1], e.text);
                return 1;
        }
        text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
        if (!text) {
                fprintf(stderr, "out of memory\n");
                return 1;
        }
        len = strlen(text);

        t = now_s();
        for (int i = 0; i < ROUNDS; i++)
                json_decref(json_loadb(text, len, JSON_REJECT_DUPLICATES, &e));
        printf("parse (%zu B): %.1f us\n", len, (now_s() - t) / ROUNDS * 1e6);
        t = now_s();
        for (int i = 0; i < ROUNDS; i++)
                free(json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS));
        printf("dump, compact sorted: %.1f us\n", (now_s() - t) / ROUNDS * 1e6);
        t = now_s();
        for (int i = 0; i < ROUNDS; i++)
                free(json_dumps(doc, JSON_COMPACT));
        printf("dump, compact unsorted: %.1f us\n", (now_s() - t) / ROUNDS * 1e6);
        t = now_s();
        for (int i = 0; i < ROUNDS; i++)
                json_decref(json_deep_copy(doc));
        printf("deep copy: %.1f us\n", (now_s() - t) / ROUNDS * 1e6);
        free(text);
        json_decref(doc);
        return 0;
}
