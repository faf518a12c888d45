/* What a worker sends the supervisor: reading its socket, framing its messages (a result stays
 * the worker's bytes) and acting on each: hello (then a cold start's part goes out), heartbeat,
 * result. A message out of protocol kills the worker as a crash. Called on the supervisor
 * thread, with the lock held. */
#include "ipc.h"
#include "jsonraw.h"
#include "log.h"
#include "supervisor_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static void protocol_error(struct slot *w, const char *what)
{
        supervisor_proc_kill(w, KILL_PROTOCOL, "worker protocol error: %s", what);
}

/* seen: what cb.result_paths name in a raw result (ipc_decoder_next_pick), or NULL. */
static void handle_msg(struct supervisor *s, struct slot *w, json_t *msg, json_t *seen,
                       uint64_t now)
{
        const char *type = json_string_value(json_object_get(msg, "type"));

        w->last_heard = now;
        if (strcmp(type, "heartbeat") == 0)
                return;
        if (strcmp(type, "hello") == 0) {
                json_t *proto = json_object_get(msg, "protocol");

                if (!json_is_integer(proto) || json_integer_value(proto) != IPC_PROTOCOL_VERSION) {
                        protocol_error(w, "hello with another protocol version");
                        return;
                }
                if (!json_is_object(json_object_get(msg, "device"))) {
                        protocol_error(w, "hello without a device");
                        return;
                }
                if (w->hello) {
                        log_warning("Device %s: ignoring a second hello", w->dev.id);
                        return;
                }
                w->hello = true;
                log_info("Device %s: worker %d ready", w->dev.id, (int)w->pid);
                if (w->pending_run && w->has_part) {
                        int r = ipc_send_payload(w->fd, w->pending_run, w->pending_run_len);

                        free(w->pending_run);
                        w->pending_run = NULL;
                        w->cold_start_ms = (double)(now - w->spawned_at);
                        /* It died after its hello: its exit status (reaped next) says how. */
                        if (r == -EPIPE || r == -ECONNRESET)
                                return;
                        if (r < 0) {
                                supervisor_proc_kill(w, KILL_SILENT,
                                                     "cannot send job %s after a cold "
                                                     "start",
                                                     w->job);
                                return;
                        }
                        supervisor_set_state(s, w, WORKER_BUSY, "job %s (cold start %.0f ms)",
                                             w->job, w->cold_start_ms);
                        return;
                }
                w->idle_since = now;
                supervisor_set_state(s, w, WORKER_IDLE, "worker %d ready", (int)w->pid);
                return;
        }
        if (strcmp(type, "result") == 0) {
                const char *job = json_string_value(json_object_get(msg, "job"));
                json_t *ok = json_object_get(msg, "ok");
                json_t *result = json_object_get(msg, "result");
                const char *error = json_string_value(json_object_get(msg, "error"));
                json_t *look = json_object_get(msg, "look");

                /* An object, or (read_worker) a raw node holding the worker's canonical bytes of
                 * one, not parsed here: job_dispatch.c reads what it needs of them. */
                bool object = json_is_object(result) || json_raw_get(result, NULL, NULL);

                if (!job || !json_is_boolean(ok) || (json_is_true(ok) && !object) ||
                    (!json_is_true(ok) && !error)) {
                        protocol_error(w, "malformed result");
                        return;
                }
                if (!w->has_part || strcmp(job, w->job) != 0) {
                        log_warning("Device %s: ignoring a result for job %s, not running here",
                                    w->dev.id, job);
                        return;
                }
                if (w->killed != KILL_NONE)
                        return; /* decided already: the kill's outcome stands */
                /* The worker answered: it is healthy, whatever the benchmark said. */
                w->crashes = 0;
                if (w->cancelling)
                        supervisor_finish_part(s, w, PART_CANCELLED, NULL, NULL, look, "cancelled");
                else if (json_is_true(ok))
                        supervisor_finish_part(s, w, PART_SUCCEEDED, result, seen, look, NULL);
                else
                        supervisor_finish_part(s, w, PART_FAILED, NULL, NULL, look, error);
                w->idle_since = now;
                if (w->exit_after_each_part)
                        w->retire_requested = true;
                supervisor_set_state(s, w, WORKER_IDLE, NULL);
                return;
        }
        log_warning("Device %s: ignoring a message of unknown type '%s'", w->dev.id, type);
}

/* A result's object stays the worker's bytes (a raw node), and what the callbacks read of it is
 * picked as the frame is checked. */
static int next_msg(struct supervisor *s, struct slot *w, json_t **ret, json_t **ret_seen)
{
        return ipc_decoder_next_pick(&w->dec, "result", s->cb.result_paths, ret, ret_seen);
}

void supervisor_msg_read(struct supervisor *s, struct slot *w, uint64_t now)
{
        static uint8_t buf[READ_CHUNK]; /* only the supervisor thread reads */
        json_t *msg, *seen;
        int r;

        for (;;) {
                ssize_t n = recv(w->fd, buf, sizeof(buf), MSG_DONTWAIT);

                if (n > 0) {
                        if (ipc_decoder_feed(&w->dec, buf, (size_t)n) < 0) {
                                protocol_error(w, "out of memory buffering its messages");
                                supervisor_proc_close_channel(s, w);
                                return;
                        }
                        if ((size_t)n < sizeof(buf))
                                break;
                        continue;
                }
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        break;
                /* EOF or error: the process is exiting; supervisor_proc_reap() gives the reason.
                 * Whatever was complete before still counts (a result written just before a crash).
                 */
                while (w->dec.len > 0 && next_msg(s, w, &msg, &seen) == 1) {
                        handle_msg(s, w, msg, seen, now);
                        json_decref(msg);
                        json_decref(seen);
                }
                supervisor_proc_close_channel(s, w);
                return;
        }
        while ((r = next_msg(s, w, &msg, &seen)) == 1) {
                handle_msg(s, w, msg, seen, now);
                json_decref(msg);
                json_decref(seen);
        }
        if (r == -EMSGSIZE)
                protocol_error(w, "frame of a bad size");
        else if (r == -EBADMSG)
                protocol_error(w, "frame that is not a JSON message");
        if (r < 0)
                supervisor_proc_close_channel(
                    s, w); /* out of step: nothing more from it can be trusted */
}
