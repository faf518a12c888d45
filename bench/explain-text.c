/* Renders bench-driver JSON lines (stdin) with api/text.c, as GET /v1/jobs/{id}?format=text
 * would for a job holding that result: the explain sentences of a real GPU run without the
 * daemon. Build: cc -Iapi -Icommon bench/explain-text.c api/text.c build/common/libumdcommon.a
 * -ljansson -o /tmp/explain-text */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "text.h"

int main(void)
{
        char line[1 << 20];
        int n = 0;

        while (fgets(line, sizeof(line), stdin)) {
                json_t *in = json_loads(line, 0, NULL);
                if (!in)
                        continue;
                char id[32];
                snprintf(id, sizeof(id), "bench-driver-%d", ++n);
                json_t *job = json_pack(
                    "{s:s, s:O, s:s, s:O, s:[{s:i, s:O, s:s, s:O}]}", "id", id, "benchmark",
                    json_object_get(in, "benchmark"), "state", "succeeded", "params",
                    json_object_get(in, "params"), "parts", "device", 0, "uuid",
                    json_object_get(json_object_get(json_object_get(in, "result"), "context"),
                                    "device_uuid"),
                    "state", "succeeded", "result", json_object_get(in, "result"));
                char *text = job ? text_render_job(job) : NULL;
                if (text)
                        fputs(text, stdout);
                free(text);
                json_decref(job);
                json_decref(in);
        }
        return 0;
}
