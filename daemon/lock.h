/* core_lock: the daemon's one lock. It guards the device table (devices.h) and everything the
 * job files keep (jobs.h); code that reads devices takes it without depending on jobs. */
#pragma once

void core_lock(void);
void core_unlock(void);
