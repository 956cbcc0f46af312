/*
 * Agent configuration parser. The JSON document is walked with jansson
 * into a struct config that owns plain C strings; every key of every
 * object is checked against a fixed list so that a typo is an error, not a
 * silently ignored setting. Errors name the JSON path of the offending
 * value ("plugins[2].args[0]: expected a string"). Defaults come from
 * config_new(); flags are applied by config_override() and the derived
 * values (absolute data_dir, default socket) by config_finalize().
 */
#include "agent/config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "util/log.h"

/* sun_path holds 108 bytes including the terminating NUL. */
#define CONFIG_SOCK_MAX 107
#define CONFIG_PATH_MAX 4096
#define CONFIG_ARGS_MAX 256
#define CONFIG_ARG_LEN_MAX 4096
#define CONFIG_NODE_NAME_MAX 256

static char *config_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

struct config *config_new(void)
{
	struct config *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->probe_interval_ms = 30000;
	cfg->health_timeout_ms = 30000;
	cfg->resync_period_ms = 30000;
	cfg->backoff_base_ms = 1000;
	cfg->backoff_max_ms = 60000;
	cfg->unhealthy_threshold_ms = 60000;
	cfg->socket_timeout_ms = 30000;
	cfg->stop_grace_ms = 5000;
	cfg->rpc_timeout_ms = 15000;
	cfg->reconnect_max_ms = 30000;
	cfg->plugin_log_max_bytes = 1024 * 1024;
	cfg->heartbeat_ms = 10000;
	return cfg;
}

void config_plugin_clear(struct config_plugin *p)
{
	if (!p)
		return;
	free(p->id);
	free(p->command);
	free(p->socket);
	for (size_t i = 0; i < p->nargs; i++)
		free(p->args[i]);
	free(p->args);
	for (size_t i = 0; i < p->nenv; i++) {
		free(p->env[i].name);
		free(p->env[i].value);
	}
	free(p->env);
	memset(p, 0, sizeof(*p));
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->nplugins; i++)
		config_plugin_clear(&cfg->plugins[i]);
	free(cfg->plugins);
	for (size_t i = 0; i < cfg->nservers; i++)
		free(cfg->servers[i]);
	free(cfg->servers);
	free(cfg->data_dir);
	free(cfg->node_name);
	free(cfg->listen_socket);
	free(cfg->listen_addr);
	config_http_clear(&cfg->http);
	if (cfg->server_token) {
		explicit_bzero(cfg->server_token, strlen(cfg->server_token));
		free(cfg->server_token);
	}
	free(cfg);
}

int config_plugin_copy(struct config_plugin *dst, const struct config_plugin *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->type = src->type;
	dst->id = config_strdup(src->id);
	dst->command = config_strdup(src->command);
	dst->socket = config_strdup(src->socket);
	if ((src->id && !dst->id) || (src->command && !dst->command) ||
	    (src->socket && !dst->socket))
		goto fail;
	if (src->nargs) {
		dst->args = calloc(src->nargs, sizeof(*dst->args));
		if (!dst->args)
			goto fail;
		for (; dst->nargs < src->nargs; dst->nargs++) {
			dst->args[dst->nargs] = strdup(src->args[dst->nargs]);
			if (!dst->args[dst->nargs])
				goto fail;
		}
	}
	if (src->nenv) {
		dst->env = calloc(src->nenv, sizeof(*dst->env));
		if (!dst->env)
			goto fail;
		for (; dst->nenv < src->nenv; dst->nenv++) {
			struct config_env *d = &dst->env[dst->nenv];

			d->name = strdup(src->env[dst->nenv].name);
			d->value = strdup(src->env[dst->nenv].value);
			if (!d->name || !d->value) {
				dst->nenv++;
				goto fail;
			}
		}
	}
	return 0;
fail:
	config_plugin_clear(dst);
	return CSID_ENOMEM;
}

static bool config_streq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool config_plugin_equal(const struct config_plugin *a, const struct config_plugin *b)
{
	if (!config_streq(a->id, b->id) || a->type != b->type ||
	    !config_streq(a->command, b->command) || !config_streq(a->socket, b->socket) ||
	    a->nargs != b->nargs || a->nenv != b->nenv)
		return false;
	for (size_t i = 0; i < a->nargs; i++)
		if (strcmp(a->args[i], b->args[i]) != 0)
			return false;
	for (size_t i = 0; i < a->nenv; i++)
		if (strcmp(a->env[i].name, b->env[i].name) != 0 ||
		    strcmp(a->env[i].value, b->env[i].value) != 0)
			return false;
	return true;
}

const struct config_plugin *config_find_plugin(const struct config *cfg, const char *id)
{
	for (size_t i = 0; i < cfg->nplugins; i++)
		if (strcmp(cfg->plugins[i].id, id) == 0)
			return &cfg->plugins[i];
	return NULL;
}

const char *config_plugin_type_name(enum config_plugin_type t)
{
	switch (t) {
	case CONFIG_PLUGIN_CONTROLLER:
		return "controller";
	case CONFIG_PLUGIN_NODE:
		return "node";
	case CONFIG_PLUGIN_MONOLITH:
		return "monolith";
	}
	return "unknown";
}

static bool config_has_ctl(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return true;
	return false;
}

int config_check_id(const char *kind, const char *id, struct err *e)
{
	size_t len = id ? strlen(id) : 0;

	if (len == 0)
		return err_set(e, CSID_EINVAL, "%s is empty", kind);
	if (len > CONFIG_ID_MAX)
		return err_set(e, CSID_EINVAL, "%s is longer than %d bytes", kind, CONFIG_ID_MAX);
	if (strchr(id, '/') || strchr(id, '\\'))
		return err_set(e, CSID_EINVAL, "%s must not contain '/' or '\\'", kind);
	if (strstr(id, ".."))
		return err_set(e, CSID_EINVAL, "%s must not contain \"..\"", kind);
	if (strcmp(id, ".") == 0)
		return err_set(e, CSID_EINVAL, "%s must not be \".\"", kind);
	if (config_has_ctl(id, len))
		return err_set(e, CSID_EINVAL, "%s must not contain control characters", kind);
	/* IDs appear unquoted in key=value logs and in paths: keep them plain. */
	if (strpbrk(id, " \"'=`$"))
		return err_set(e, CSID_EINVAL,
			       "%s must not contain spaces, quotes, '=', '`' or '$'", kind);
	return 0;
}

int64_t config_parse_duration(const char *s)
{
	int64_t total = 0;

	if (!s || !*s)
		return -1;
	if (strcmp(s, "0") == 0)
		return 0;
	while (*s) {
		int64_t whole = 0, frac = 0, fscale = 1, unit;
		int digits = 0;

		while (*s >= '0' && *s <= '9') {
			if (whole > INT64_MAX / 100)
				return -1;
			whole = whole * 10 + (*s++ - '0');
			digits++;
		}
		if (*s == '.') {
			s++;
			while (*s >= '0' && *s <= '9') {
				if (fscale < 1000000) {
					frac = frac * 10 + (*s - '0');
					fscale *= 10;
				}
				s++;
				digits++;
			}
		}
		if (!digits)
			return -1;
		if (strncmp(s, "ms", 2) == 0) {
			unit = 1;
			s += 2;
		} else if (*s == 's') {
			unit = 1000;
			s++;
		} else if (*s == 'm') {
			unit = 60000;
			s++;
		} else if (*s == 'h') {
			unit = 3600000;
			s++;
		} else {
			return -1;
		}
		/* Durations longer than a year are a mistake, not a setting. */
		if (whole > 366LL * 24 * 3600 * 1000 / unit)
			return -1;
		total += whole * unit + frac * unit / fscale;
		if (total > 366LL * 24 * 3600 * 1000)
			return -1;
	}
	return total;
}

/* ---- JSON walking ---- */

static int config_check_keys(json_t *obj, const char *path, const char *const *allowed,
			     struct err *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		bool ok = false;

		for (int i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				ok = true;
		if (!ok) {
			char q[160];

			return err_set(e, CSID_EINVAL, "%s: unknown key %.100s", path,
				       log_q(q, sizeof(q), key));
		}
	}
	return 0;
}

/* Copies a JSON string with no NUL and at most max bytes; the path names it in errors. */
static int config_get_string(json_t *v, const char *path, size_t max, char **out, struct err *e)
{
	size_t len;

	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", path);
	len = json_string_length(v);
	if (len > max)
		return err_set(e, CSID_EINVAL, "%s: longer than %zu bytes", path, max);
	if (memchr(json_string_value(v), '\0', len))
		return err_set(e, CSID_EINVAL, "%s: contains a NUL byte", path);
	*out = strdup(json_string_value(v));
	if (!*out)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", path);
	return 0;
}

static int config_get_duration(json_t *obj, const char *key, int64_t min, int64_t *out,
			       struct err *e)
{
	json_t *v = json_object_get(obj, key);
	int64_t ms;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL,
			       "timings.%s: expected a duration string such as \"30s\"", key);
	ms = config_parse_duration(json_string_value(v));
	if (ms < 0)
		return err_set(e, CSID_EINVAL,
			       "timings.%s: invalid duration (use e.g. \"100ms\", \"30s\", \"1m\")",
			       key);
	if (ms < min)
		return err_set(e, CSID_EINVAL, "timings.%s: must be at least %lldms", key,
			       (long long)min);
	*out = ms;
	return 0;
}

/* Checks that every ${...} in s names a variable config_expand() knows. */
static int config_check_vars(const char *s, const char *path, struct err *e)
{
	for (const char *p = strstr(s, "${"); p; p = strstr(p + 2, "${")) {
		if (strncmp(p, "${CSI_ENDPOINT}", 15) != 0 &&
		    strncmp(p, "${CSI_ENDPOINT_PATH}", 20) != 0 &&
		    strncmp(p, "${NODE_NAME}", 12) != 0)
			return err_set(e, CSID_EINVAL,
				       "%s: unknown variable (only ${CSI_ENDPOINT}, "
				       "${CSI_ENDPOINT_PATH} and ${NODE_NAME} are expanded)",
				       path);
	}
	return 0;
}

static int config_parse_args(json_t *v, const char *path, struct config_plugin *p, struct err *e)
{
	char sub[96];
	size_t i;
	json_t *a;

	if (!json_is_array(v))
		return err_set(e, CSID_EINVAL, "%s.args: expected an array of strings", path);
	if (json_array_size(v) > CONFIG_ARGS_MAX)
		return err_set(e, CSID_EINVAL, "%s.args: more than %d arguments", path,
			       CONFIG_ARGS_MAX);
	p->args = calloc(json_array_size(v) + 1, sizeof(*p->args));
	if (!p->args)
		return err_set(e, CSID_ENOMEM, "%s.args: out of memory", path);
	json_array_foreach(v, i, a)
	{
		int rc;

		snprintf(sub, sizeof(sub), "%s.args[%zu]", path, i);
		rc = config_get_string(a, sub, CONFIG_ARG_LEN_MAX, &p->args[i], e);
		if (rc)
			return rc;
		p->nargs++;
		rc = config_check_vars(p->args[i], sub, e);
		if (rc)
			return rc;
	}
	return 0;
}

static int config_parse_env(json_t *v, const char *path, struct config_plugin *p, struct err *e)
{
	const char *key;
	json_t *val;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "%s.env: expected an object of strings", path);
	if (json_object_size(v) > CONFIG_ARGS_MAX)
		return err_set(e, CSID_EINVAL, "%s.env: more than %d variables", path,
			       CONFIG_ARGS_MAX);
	p->env = calloc(json_object_size(v) + 1, sizeof(*p->env));
	if (!p->env)
		return err_set(e, CSID_ENOMEM, "%s.env: out of memory", path);
	json_object_foreach(v, key, val)
	{
		struct config_env *env = &p->env[p->nenv];
		char sub[96];
		size_t klen = strlen(key);
		int rc;

		if (klen == 0 || klen > 256 || strchr(key, '=') || config_has_ctl(key, klen))
			return err_set(e, CSID_EINVAL,
				       "%s.env: invalid variable name (empty, too long, or holds "
				       "'=' or a control character)",
				       path);
		snprintf(sub, sizeof(sub), "%s.env.%.40s", path, key);
		env->name = strdup(key);
		if (!env->name)
			return err_set(e, CSID_ENOMEM, "%s: out of memory", sub);
		p->nenv++;
		rc = config_get_string(val, sub, CONFIG_ARG_LEN_MAX, &env->value, e);
		if (rc)
			return rc;
		rc = config_check_vars(env->value, sub, e);
		if (rc)
			return rc;
	}
	return 0;
}

static const char *const config_plugin_keys[] = {"id",  "type",   "command", "args",
						 "env", "socket", NULL};

static int config_parse_plugin(json_t *obj, const char *key, size_t idx, int default_type,
			       struct config_plugin *p, struct err *e)
{
	char path[96], sub[128];
	const char *type;
	json_t *v;
	int rc;

	snprintf(path, sizeof(path), "%.64s[%zu]", key, idx);
	if (!json_is_object(obj))
		return err_set(e, CSID_EINVAL, "%s: expected an object", path);
	rc = config_check_keys(obj, path, config_plugin_keys, e);
	if (rc)
		return rc;
	snprintf(sub, sizeof(sub), "%s.id", path);
	v = json_object_get(obj, "id");
	if (!v)
		return err_set(e, CSID_EINVAL, "%s: missing", sub);
	rc = config_get_string(v, sub, CONFIG_ID_MAX * 2, &p->id, e);
	if (!rc)
		rc = config_check_id(sub, p->id, e);
	if (rc)
		return rc;
	v = json_object_get(obj, "type");
	type = v ? json_string_value(v) : NULL;
	if (!v && default_type >= 0)
		p->type = (enum config_plugin_type)default_type;
	else if (type && strcmp(type, "controller") == 0)
		p->type = CONFIG_PLUGIN_CONTROLLER;
	else if (type && strcmp(type, "node") == 0)
		p->type = CONFIG_PLUGIN_NODE;
	else if (type && strcmp(type, "monolith") == 0)
		p->type = CONFIG_PLUGIN_MONOLITH;
	else
		return err_set(e, CSID_EINVAL,
			       "%s.type: expected \"controller\", \"node\" or \"monolith\"", path);
	v = json_object_get(obj, "socket");
	if (v) {
		snprintf(sub, sizeof(sub), "%s.socket", path);
		rc = config_get_string(v, sub, CONFIG_SOCK_MAX, &p->socket, e);
		if (rc)
			return rc;
		if (p->socket[0] != '/' || config_has_ctl(p->socket, strlen(p->socket)))
			return err_set(e, CSID_EINVAL, "%s: must be an absolute path", sub);
		if (json_object_get(obj, "command") || json_object_get(obj, "args") ||
		    json_object_get(obj, "env"))
			return err_set(e, CSID_EINVAL,
				       "%s: \"socket\" excludes \"command\", \"args\" and \"env\"",
				       path);
		return 0;
	}
	v = json_object_get(obj, "command");
	if (!v)
		return err_set(e, CSID_EINVAL, "%s: needs either \"command\" or \"socket\"", path);
	snprintf(sub, sizeof(sub), "%s.command", path);
	rc = config_get_string(v, sub, CONFIG_PATH_MAX, &p->command, e);
	if (rc)
		return rc;
	if (!p->command[0] || config_has_ctl(p->command, strlen(p->command)))
		return err_set(e, CSID_EINVAL, "%s: empty or holds a control character", sub);
	v = json_object_get(obj, "args");
	if (v) {
		rc = config_parse_args(v, path, p, e);
		if (rc)
			return rc;
	}
	v = json_object_get(obj, "env");
	if (v)
		return config_parse_env(v, path, p, e);
	return 0;
}

int config_parse_plugin_list(json_t *v, const char *key, int default_type,
			     struct config_plugin **out, size_t *n, struct err *e)
{
	size_t i;
	json_t *item;

	if (!json_is_array(v))
		return err_set(e, CSID_EINVAL, "%s: expected an array", key);
	if (json_array_size(v) > CONFIG_ARGS_MAX)
		return err_set(e, CSID_EINVAL, "%s: more than %d plugins", key, CONFIG_ARGS_MAX);
	*out = calloc(json_array_size(v) + 1, sizeof(**out));
	if (!*out)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", key);
	json_array_foreach(v, i, item)
	{
		int rc = config_parse_plugin(item, key, i, default_type, &(*out)[i], e);

		(*n)++;
		if (rc)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (strcmp((*out)[j].id, (*out)[i].id) == 0)
				return err_set(e, CSID_EINVAL,
					       "%s[%zu].id: duplicate of %s[%zu].id", key, i, key,
					       j);
	}
	return 0;
}

static const char *const config_timing_keys[] = {
    "probe_interval", "health_timeout",      "resync_period",  "backoff_base",
    "backoff_max",    "unhealthy_threshold", "socket_timeout", "stop_grace",
    "rpc_timeout",    "reconnect_max",       "heartbeat",      NULL,
};

static int config_parse_timings(json_t *v, struct config *cfg, struct err *e)
{
	int rc;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "timings: expected an object");
	rc = config_check_keys(v, "timings", config_timing_keys, e);
	if (!rc)
		rc = config_get_duration(v, "probe_interval", 10, &cfg->probe_interval_ms, e);
	if (!rc)
		rc = config_get_duration(v, "health_timeout", 10, &cfg->health_timeout_ms, e);
	if (!rc)
		rc = config_get_duration(v, "resync_period", 10, &cfg->resync_period_ms, e);
	if (!rc)
		rc = config_get_duration(v, "backoff_base", 1, &cfg->backoff_base_ms, e);
	if (!rc)
		rc = config_get_duration(v, "backoff_max", 1, &cfg->backoff_max_ms, e);
	if (!rc)
		rc = config_get_duration(v, "unhealthy_threshold", 10, &cfg->unhealthy_threshold_ms,
					 e);
	if (!rc)
		rc = config_get_duration(v, "socket_timeout", 10, &cfg->socket_timeout_ms, e);
	if (!rc)
		rc = config_get_duration(v, "stop_grace", 0, &cfg->stop_grace_ms, e);
	if (!rc)
		rc = config_get_duration(v, "rpc_timeout", 10, &cfg->rpc_timeout_ms, e);
	if (!rc)
		rc = config_get_duration(v, "reconnect_max", 100, &cfg->reconnect_max_ms, e);
	if (!rc)
		rc = config_get_duration(v, "heartbeat", 100, &cfg->heartbeat_ms, e);
	if (!rc && cfg->heartbeat_ms > 10 * 60 * 1000)
		rc = err_set(e, CSID_EINVAL, "timings.heartbeat: must be at most 10m");
	if (!rc && cfg->backoff_max_ms < cfg->backoff_base_ms)
		rc = err_set(e, CSID_EINVAL, "timings.backoff_max: shorter than backoff_base");
	return rc;
}

static int config_parse_listener(json_t *v, struct config *cfg, struct err *e)
{
	static const char *const keys[] = {"socket", "addr", NULL};
	json_t *s;
	int rc;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "listener: expected an object");
	rc = config_check_keys(v, "listener", keys, e);
	if (rc)
		return rc;
	s = json_object_get(v, "socket");
	if (s) {
		rc = config_get_string(s, "listener.socket", CONFIG_SOCK_MAX, &cfg->listen_socket,
				       e);
		if (rc)
			return rc;
		if (cfg->listen_socket[0] != '/')
			return err_set(e, CSID_EINVAL, "listener.socket: must be an absolute path");
	}
	s = json_object_get(v, "addr");
	if (s)
		return config_get_string(s, "listener.addr", 256, &cfg->listen_addr, e);
	return 0;
}

/* "servers": base URLs of csid servers, http:// or https:// and a host. */
static int config_parse_servers(json_t *v, struct config *cfg, struct err *e)
{
	char path[64];
	json_t *item;
	size_t i;
	int rc;

	if (!json_is_array(v) || json_array_size(v) == 0)
		return err_set(e, CSID_EINVAL, "servers: expected a non-empty array of URLs");
	if (json_array_size(v) > CONFIG_SERVERS_MAX)
		return err_set(e, CSID_EINVAL, "servers: more than %d", CONFIG_SERVERS_MAX);
	cfg->servers = calloc(json_array_size(v), sizeof(*cfg->servers));
	if (!cfg->servers)
		return err_set(e, CSID_ENOMEM, "servers: out of memory");
	json_array_foreach(v, i, item)
	{
		char *u, *host;
		size_t n;

		snprintf(path, sizeof(path), "servers[%zu]", i);
		if ((rc = config_get_string(item, path, CONFIG_SERVER_URL_MAX, &u, e)))
			return rc;
		cfg->servers[cfg->nservers++] = u;
		n = strlen(u);
		for (; n > 0 && u[n - 1] == '/'; n--)
			u[n - 1] = '\0';
		host = strncmp(u, "http://", 7) == 0    ? u + 7
		       : strncmp(u, "https://", 8) == 0 ? u + 8
							: NULL;
		if (!host || !host[0] || strchr(host, '/') || config_has_ctl(u, n) ||
		    strpbrk(u, " \"'\\"))
			return err_set(e, CSID_EINVAL,
				       "%s: expected http://HOST:PORT or https://HOST:PORT", path);
		for (size_t j = 0; j + 1 < cfg->nservers; j++)
			if (strcmp(cfg->servers[j], u) == 0)
				return err_set(e, CSID_EINVAL, "%s: same as servers[%zu]", path, j);
	}
	return 0;
}

/*
 * "server_token": a secret, so messages name the key, never the value. It
 * goes into an HTTP header, so no space or control character either.
 */
static int config_parse_token(json_t *v, struct config *cfg, struct err *e)
{
	const char *t = json_string_value(v);
	size_t len = json_string_length(v);

	if (!json_is_string(v) || len < 8 || len > CONFIG_TOKEN_MAX)
		return err_set(e, CSID_EINVAL, "server_token: expected a string of 8 to %d bytes",
			       CONFIG_TOKEN_MAX);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)t[i] <= 0x20 || t[i] == 0x7f)
			return err_set(e, CSID_EINVAL,
				       "server_token: contains a space or control character");
	cfg->server_token = config_strdup(t);
	return cfg->server_token ? 0 : err_set(e, CSID_ENOMEM, "config: out of memory");
}

static const char *const config_top_keys[] = {
    "data_dir", "node_name",    "listener", "timings", "plugin_log_max_bytes",
    "servers",  "server_token", "plugins",  "http",    NULL};

static int config_parse_json(json_t *root, struct config *cfg, struct err *e)
{
	json_t *v;
	int rc;

	if (!json_is_object(root))
		return err_set(e, CSID_EINVAL, "config: expected a JSON object");
	rc = config_check_keys(root, "config", config_top_keys, e);
	if (rc)
		return rc;
	v = json_object_get(root, "data_dir");
	if (v) {
		rc = config_get_string(v, "data_dir", CONFIG_PATH_MAX, &cfg->data_dir, e);
		if (rc)
			return rc;
		if (!cfg->data_dir[0])
			return err_set(e, CSID_EINVAL, "data_dir: empty");
	}
	v = json_object_get(root, "node_name");
	if (v) {
		rc = config_get_string(v, "node_name", CONFIG_NODE_NAME_MAX, &cfg->node_name, e);
		if (rc)
			return rc;
		rc = config_check_id("node_name", cfg->node_name, e);
		if (rc)
			return rc;
	}
	v = json_object_get(root, "listener");
	if (v && (rc = config_parse_listener(v, cfg, e)))
		return rc;
	v = json_object_get(root, "timings");
	if (v && (rc = config_parse_timings(v, cfg, e)))
		return rc;
	v = json_object_get(root, "plugin_log_max_bytes");
	if (v) {
		if (!json_is_integer(v) || json_integer_value(v) < 4096)
			return err_set(e, CSID_EINVAL,
				       "plugin_log_max_bytes: expected an integer >= 4096");
		cfg->plugin_log_max_bytes = json_integer_value(v);
	}
	v = json_object_get(root, "servers");
	if (v && (rc = config_parse_servers(v, cfg, e)))
		return rc;
	v = json_object_get(root, "server_token");
	if (v && (rc = config_parse_token(v, cfg, e)))
		return rc;
	v = json_object_get(root, "http");
	if (v && (rc = config_http_parse(v, &cfg->http, e)))
		return rc;
	v = json_object_get(root, "plugins");
	if (v)
		return config_parse_plugin_list(v, "plugins", -1, &cfg->plugins, &cfg->nplugins, e);
	return 0;
}

int config_parse(const char *buf, size_t len, struct config **out, struct err *e)
{
	struct config *cfg = NULL;
	json_error_t jerr;
	json_t *root = NULL;
	int rc;

	*out = NULL;
	if (len > CONFIG_FILE_MAX)
		return err_set(e, CSID_ETOOBIG, "config: larger than %d bytes", CONFIG_FILE_MAX);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(e, CSID_EINVAL, "config: line %d column %d: %.200s", jerr.line,
			       jerr.column, jerr.text);
	cfg = config_new();
	if (!cfg) {
		rc = err_set(e, CSID_ENOMEM, "config: out of memory");
		goto out;
	}
	rc = config_parse_json(root, cfg, e);
	if (rc)
		goto out;
	*out = cfg;
	cfg = NULL;
out:
	config_free(cfg);
	json_decref(root);
	return rc;
}

int config_load(const char *path, struct config **out, struct err *e)
{
	char *buf = NULL;
	size_t len;
	FILE *f;
	int rc;

	*out = NULL;
	f = fopen(path, "rb");
	if (!f)
		return err_errno(e, errno, "config %s", path);
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (!buf) {
		rc = err_set(e, CSID_ENOMEM, "config %s: out of memory", path);
		goto out;
	}
	len = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
	if (ferror(f)) {
		rc = err_errno(e, EIO, "config %s: read", path);
		goto out;
	}
	rc = config_parse(buf, len, out, e);
	if (rc)
		err_wrap(e, "config %s", path);
out:
	free(buf);
	fclose(f);
	return rc;
}

static int config_replace(char **dst, const char *src, struct err *e)
{
	char *s = strdup(src);

	if (!s)
		return err_set(e, CSID_ENOMEM, "config: out of memory");
	free(*dst);
	*dst = s;
	return 0;
}

int config_override(struct config *cfg, const char *data_dir, const char *node_name,
		    const char *listen, struct err *e)
{
	int rc = 0;

	if (data_dir && (rc = config_replace(&cfg->data_dir, data_dir, e)))
		return rc;
	if (node_name) {
		rc = config_check_id("-node-name", node_name, e);
		if (!rc)
			rc = config_replace(&cfg->node_name, node_name, e);
		if (rc)
			return rc;
	}
	if (!listen)
		return 0;
	if (strncmp(listen, "unix:", 5) == 0 || listen[0] == '/') {
		const char *p = listen[0] == '/' ? listen : listen + 5;

		if (p[0] != '/' || strlen(p) > CONFIG_SOCK_MAX)
			return err_set(e, CSID_EINVAL,
				       "-listen: unix socket path must be absolute and at most %d "
				       "bytes",
				       CONFIG_SOCK_MAX);
		return config_replace(&cfg->listen_socket, p, e);
	}
	if (!strchr(listen, ':'))
		return err_set(e, CSID_EINVAL, "-listen: expected unix:PATH or HOST:PORT");
	return config_replace(&cfg->listen_addr, listen, e);
}

int config_finalize(struct config *cfg, struct err *e)
{
	char cwd[CONFIG_PATH_MAX], buf[CONFIG_PATH_MAX + 64];
	int rc;

	if (!cfg->data_dir || !cfg->data_dir[0])
		return err_set(e, CSID_EINVAL, "data_dir: not set (config or -data-dir)");
	if (cfg->data_dir[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return err_errno(e, errno, "data_dir: getcwd");
		snprintf(buf, sizeof(buf), "%s/%s", cwd, cfg->data_dir);
		if ((rc = config_replace(&cfg->data_dir, buf, e)))
			return rc;
	}
	if (strlen(cfg->data_dir) >= CONFIG_PATH_MAX - 256)
		return err_set(e, CSID_EINVAL, "data_dir: too long");
	if (!cfg->node_name) {
		char host[256] = "";

		if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
			snprintf(host, sizeof(host), "localhost");
		if ((rc = config_replace(&cfg->node_name, host, e)))
			return rc;
	}
	if (!cfg->listen_socket) {
		snprintf(buf, sizeof(buf), "%s/agent.sock", cfg->data_dir);
		if (strlen(buf) > CONFIG_SOCK_MAX)
			return err_set(e, CSID_EINVAL,
				       "listener.socket: default %s/agent.sock is longer than %d "
				       "bytes; set listener.socket or -listen",
				       cfg->data_dir, CONFIG_SOCK_MAX);
		if ((rc = config_replace(&cfg->listen_socket, buf, e)))
			return rc;
	}
	return 0;
}

char *config_expand(const char *tmpl, const char *endpoint, const char *node_name)
{
	size_t cap = strlen(tmpl) + 1, len = 0;
	const char *p = tmpl, *path = endpoint;
	char *out;

	/* The bare socket path, for plugins that take a path rather than a URL. */
	if (strncmp(endpoint, "unix://", 7) == 0)
		path = endpoint + 7;
	else if (strncmp(endpoint, "unix:", 5) == 0)
		path = endpoint + 5;

	for (const char *q = strstr(tmpl, "${"); q; q = strstr(q + 2, "${"))
		cap += strlen(endpoint) + strlen(node_name);
	out = malloc(cap);
	if (!out)
		return NULL;
	while (*p) {
		const char *val = NULL;
		size_t skip = 0;

		if (strncmp(p, "${CSI_ENDPOINT}", 15) == 0) {
			val = endpoint;
			skip = 15;
		} else if (strncmp(p, "${CSI_ENDPOINT_PATH}", 20) == 0) {
			val = path;
			skip = 20;
		} else if (strncmp(p, "${NODE_NAME}", 12) == 0) {
			val = node_name;
			skip = 12;
		}
		if (val) {
			memcpy(out + len, val, strlen(val));
			len += strlen(val);
			p += skip;
		} else {
			out[len++] = *p++;
		}
	}
	out[len] = '\0';
	return out;
}
