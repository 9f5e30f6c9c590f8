/* The plugin verbs (plugin.c, triggers.c): config, triggers, events.
 * Internal to src/cli. */
#ifndef CAPSULE_CLI_PLUGIN_H
#define CAPSULE_CLI_PLUGIN_H

#include "cli/gateway.h"
#include "gateway/registry.h"

/* Loads --caps and opens --state; with cap, finds it (an exit status and
 * a message when any of it fails, else 0 with all three set). */
int plugin_open(const char *verb, const struct common *o, const char *cap, struct gw_registry *reg,
                struct gw_state **st, const struct cap_spec **spec);

int cmd_config(int argc, char **argv);
int cmd_triggers(int argc, char **argv);
int cmd_events(int argc, char **argv);
int cmd_grant(int argc, char **argv);
int cmd_revoke(int argc, char **argv);
int cmd_plugin(int argc, char **argv);

#endif
