/* umdctl health (cmd_health.c). */
#pragma once

#include "cli.h"
#include "http.h"

/* The exit code the worst verdict calls for (cli.h), after printing each GPU's. */
int cmd_health(struct http *h, const struct umdctl_args *a);
