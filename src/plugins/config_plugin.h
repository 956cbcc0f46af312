/*
 * Plugin definitions, as an agent's config lists its node plugins and a
 * server's its controller plugins (agent/config.h, server/server_config.h):
 * {"id", "type", "command", "args", "env"} for a plugin the supervisor
 * runs, or {"id", "type", "socket"} for one started elsewhere. A struct
 * config_plugin owns every string it points to.
 */
#ifndef CSID_PLUGINS_CONFIG_PLUGIN_H
#define CSID_PLUGINS_CONFIG_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "util/err.h"

/* Longest plugin ID accepted (bytes). */
#define CONFIG_ID_MAX 128

enum config_plugin_type {
	CONFIG_PLUGIN_CONTROLLER,
	CONFIG_PLUGIN_NODE,
	CONFIG_PLUGIN_MONOLITH,
};

struct config_env {
	char *name;
	char *value; /* may hold ${CSI_ENDPOINT} / ${CSI_ENDPOINT_PATH} / ${NODE_NAME} */
};

struct config_plugin {
	char *id;
	enum config_plugin_type type;
	/* Supervised plugin: command (absolute or found on PATH), args, env. */
	char *command;
	char **args;
	size_t nargs;
	struct config_env *env;
	size_t nenv;
	/* External plugin: path of its socket (exclusive with command). */
	char *socket;
};

/*
 * Parses v, a JSON array of plugin definitions in the shape of the
 * agent's "plugins" key: {"id", "type", "command", "args", "env"} or
 * {"id", "type", "socket"}. key names the array in messages
 * ("plugins[2].command: ..."). A definition without "type" gets
 * default_type (an enum config_plugin_type), or is refused when it is -1.
 * IDs must be unique. On success *out (n entries) belongs to the caller
 * (config_plugin_clear each, then free); on failure too, with *n the
 * entries filled so far. Returns 0 or CSID_EINVAL / CSID_ENOMEM with e set.
 */
int config_plugin_parse_list(json_t *v, const char *key, int default_type,
			     struct config_plugin **out, size_t *n, struct err *e);

/* The keys of one plugin definition (agent "plugins[]", server "controller_plugins[]"),
 * NULL-terminated. */
extern const char *const config_plugin_keys[];

/*
 * Checks a plugin ID (or node name): 1..CONFIG_ID_MAX bytes, no '/', '\\',
 * "..", control characters, spaces, quotes, '=', '`' or '$'.
 */
int config_plugin_check_id(const char *kind, const char *id, struct err *e);
/* Name of a plugin type ("controller", "node", "monolith"). */
const char *config_plugin_type_name(enum config_plugin_type t);
/* Whether two plugin definitions are identical (same process and socket). */
bool config_plugin_equal(const struct config_plugin *a, const struct config_plugin *b);

/* Deep copy of src into dst (zeroed first); CSID_ENOMEM on failure. */
int config_plugin_copy(struct config_plugin *dst, const struct config_plugin *src);
/* Frees what p owns and zeroes it; NULL is a no-op. */
void config_plugin_clear(struct config_plugin *p);

/*
 * Expands ${CSI_ENDPOINT} (endpoint, a unix:// URL), ${CSI_ENDPOINT_PATH}
 * (the same without its unix:// or unix: scheme: the bare socket path, for
 * plugins that take a path) and ${NODE_NAME} in tmpl. Returns a malloc'd
 * string, or NULL when out of memory.
 */
char *config_plugin_expand(const char *tmpl, const char *endpoint, const char *node_name);

#endif
