/* core_lock: the daemon's one lock. It guards the device table (devices.h) and everything the
 * job files keep (jobs.h); code that reads devices takes it without depending on jobs. It
 * records whether the calling thread holds it, so that every function named *_locked can say
 * so with assert_locked() instead of a comment. */
#pragma once

#include <assert.h>
#include <stdbool.h>

void core_lock(void);
void core_unlock(void);
/* Whether the calling thread holds core_lock. */
bool core_lock_held(void);
/* Runs fn right after the calling thread releases core_lock, or at once when it does not hold
 * it. For waking a thread whose first act is to take core_lock: woken while the lock is still
 * held, it only wakes to sleep again on the lock, two more switches for nothing; and for work
 * the holder itself should do, but not while others wait for the lock (the store's dumps of
 * the changes it queued). A fn asked twice in one hold runs once; fns run in the order first
 * asked; at most four different ones a hold (asserted). */
void core_after_unlock(void (*fn)(void));
/* The same for a fn of an object: asked twice in one hold with the same arg, it runs once. */
void core_after_unlock_arg(void (*fn)(void *arg), void *arg);

/* Work to do under core_lock that its asker need not wait for: queued without blocking, it runs
 * at once when the lock is free, else in the holder's core_unlock, after the release, under a
 * hold of its own (so no asker ever waits for a holder, and nothing queued is left behind: the
 * holder looks once it has let go, and an asker that saw the lock held queued first). run is
 * called with the lock held, oldest first, and owns d from then on (frees it). */
struct core_deferred {
        struct core_deferred *next;
        void (*run)(struct core_deferred *d);
};
void core_defer(struct core_deferred *d);
/* Runs what is queued now (lock held): for a subsystem that goes away with what its work
 * points at. */
void core_run_deferred_locked(void);

/* At the top of every *_locked function: aborts (in builds with assertions) when the caller
 * does not hold core_lock. A macro, so that the message names the function that was misused. */
#define assert_locked() assert(core_lock_held())
