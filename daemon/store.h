/* A forward to daemon/store/store.h, the store's interface, for the job subsystem's library alone:
 * its include path (daemon/jobs/meson.build) names daemon/ but not yet daemon/store/, and that file
 * is another change's (issue 59's job_persist) to edit. Remove once it names daemon/store/. */
#pragma once

#include "store/store.h"
