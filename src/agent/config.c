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

#include "util/conf.h"
#include "util/log.h"

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
	free(cfg->docker.name);
	free(cfg->docker.socket);
	free(cfg->docker.spec_file);
	free(cfg->docker.engine_socket);
	conf_http_clear(&cfg->http);
	if (cfg->server_token) {
		explicit_bzero(cfg->server_token, strlen(cfg->server_token));
		free(cfg->server_token);
	}
	free(cfg);
}

const struct config_plugin *config_find_plugin(const struct config *cfg, const char *id)
{
	for (size_t i = 0; i < cfg->nplugins; i++)
		if (strcmp(cfg->plugins[i].id, id) == 0)
			return &cfg->plugins[i];
	return NULL;
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
	ms = conf_parse_duration(json_string_value(v));
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
	rc = conf_check_keys(v, "timings", config_timing_keys, e);
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

static const char *const config_listener_keys[] = {"socket", "addr", NULL};

static int config_parse_listener(json_t *v, struct config *cfg, struct err *e)
{
	json_t *s;
	int rc;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "listener: expected an object");
	rc = conf_check_keys(v, "listener", config_listener_keys, e);
	if (rc)
		return rc;
	s = json_object_get(v, "socket");
	if (s) {
		rc = conf_get_string(s, "listener.socket", CONF_SOCK_MAX, &cfg->listen_socket, e);
		if (rc)
			return rc;
		if (cfg->listen_socket[0] != '/')
			return err_set(e, CSID_EINVAL, "listener.socket: must be an absolute path");
	}
	s = json_object_get(v, "addr");
	if (s)
		return conf_get_string(s, "listener.addr", 256, &cfg->listen_addr, e);
	return 0;
}

/*
 * "servers": base URLs of csid servers, http:// or https:// and a host, or
 * unix:/PATH for a server on this host (its "socket").
 */
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
		if ((rc = conf_get_string(item, path, CONFIG_SERVER_URL_MAX, &u, e)))
			return rc;
		cfg->servers[cfg->nservers++] = u;
		n = strlen(u);
		for (; n > 0 && u[n - 1] == '/'; n--)
			u[n - 1] = '\0';
		host = strncmp(u, "http://", 7) == 0    ? u + 7
		       : strncmp(u, "https://", 8) == 0 ? u + 8
							: NULL;
		if (strncmp(u, "unix:", 5) == 0 ? !conf_is_unix_addr(u)
						: !host || !host[0] || strchr(host, '/') ||
						      conf_has_ctl(u, n) || strpbrk(u, " \"'\\"))
			return err_set(e, CSID_EINVAL,
				       "%s: expected http://HOST:PORT, https://HOST:PORT or "
				       "unix:/PATH (an absolute socket path of at most %d bytes)",
				       path, CONF_SOCK_MAX);
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

static const char *const config_docker_keys[] = {"name", "socket", "spec_file", "engine_socket",
						 NULL};

/* Fills in the Docker plugin's defaults for name (NULL: "csid"). */
static int config_docker_defaults(struct config_docker *d, const char *name, struct err *e)
{
	char buf[CONF_SOCK_MAX + 64];

	if (!d->name && !(d->name = config_strdup(name ? name : "csid")))
		return err_set(e, CSID_ENOMEM, "config: out of memory");
	if (config_plugin_check_id("docker_plugin.name", d->name, e))
		return CSID_EINVAL;
	if (strlen(d->name) > 64)
		return err_set(e, CSID_EINVAL, "docker_plugin.name: longer than 64 bytes");
	snprintf(buf, sizeof(buf), "/run/docker/plugins/%s.sock", d->name);
	if (!d->socket && strlen(buf) > CONF_SOCK_MAX)
		return err_set(e, CSID_EINVAL, "docker_plugin.socket: default %s too long", buf);
	if (!d->socket && !(d->socket = config_strdup(buf)))
		return err_set(e, CSID_ENOMEM, "config: out of memory");
	if (!d->engine_socket && !(d->engine_socket = config_strdup("/run/docker.sock")))
		return err_set(e, CSID_ENOMEM, "config: out of memory");
	return 0;
}

int config_docker_enable(struct config *cfg, const char *name, struct err *e)
{
	cfg->docker.optional = true;
	return config_docker_defaults(&cfg->docker, name, e);
}

/* "docker_plugin": {"name", "socket", "spec_file", "engine_socket"}, every key optional. */
static int config_parse_docker(json_t *v, struct config *cfg, struct err *e)
{
	struct config_docker *d = &cfg->docker;
	json_t *s;
	int rc;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "docker_plugin: expected an object");
	if ((rc = conf_check_keys(v, "docker_plugin", config_docker_keys, e)))
		return rc;
	if ((s = json_object_get(v, "name")) &&
	    (rc = conf_get_string(s, "docker_plugin.name", 64, &d->name, e)))
		return rc;
	if ((s = json_object_get(v, "socket")) &&
	    (rc = conf_get_string(s, "docker_plugin.socket", CONF_SOCK_MAX, &d->socket, e)))
		return rc;
	if ((s = json_object_get(v, "spec_file")) &&
	    (rc = conf_get_string(s, "docker_plugin.spec_file", CONF_SOCK_MAX, &d->spec_file, e)))
		return rc;
	if ((s = json_object_get(v, "engine_socket")) &&
	    (rc = conf_get_string(s, "docker_plugin.engine_socket", CONF_SOCK_MAX,
				  &d->engine_socket, e)))
		return rc;
	if ((d->socket && d->socket[0] != '/') || (d->spec_file && d->spec_file[0] != '/') ||
	    (d->engine_socket && d->engine_socket[0] && d->engine_socket[0] != '/'))
		return err_set(e, CSID_EINVAL, "docker_plugin: paths must be absolute");
	return config_docker_defaults(d, NULL, e);
}

static const char *const config_top_keys[] = {
    "data_dir", "node_name",    "listener", "timings",       "plugin_log_max_bytes",
    "servers",  "server_token", "plugins",  "docker_plugin", "http",
    NULL};

const struct conf_keyset config_keysets[] = {
    {"", config_top_keys},
    {"listener", config_listener_keys},
    {"timings", config_timing_keys},
    {"plugins[]", config_plugin_keys},
    {"docker_plugin", config_docker_keys},
    {"http", conf_http_keys},
    {NULL, NULL},
};

static int config_parse_json(json_t *root, struct config *cfg, struct err *e)
{
	json_t *v;
	int rc;

	if (!json_is_object(root))
		return err_set(e, CSID_EINVAL, "config: expected a JSON object");
	rc = conf_check_keys(root, "config", config_top_keys, e);
	if (rc)
		return rc;
	v = json_object_get(root, "data_dir");
	if (v) {
		rc = conf_get_string(v, "data_dir", CONF_PATH_MAX, &cfg->data_dir, e);
		if (rc)
			return rc;
		if (!cfg->data_dir[0])
			return err_set(e, CSID_EINVAL, "data_dir: empty");
	}
	v = json_object_get(root, "node_name");
	if (v) {
		rc = conf_get_string(v, "node_name", CONFIG_NODE_NAME_MAX, &cfg->node_name, e);
		if (rc)
			return rc;
		rc = config_plugin_check_id("node_name", cfg->node_name, e);
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
	v = json_object_get(root, "docker_plugin");
	if (v && (rc = config_parse_docker(v, cfg, e)))
		return rc;
	v = json_object_get(root, "http");
	if (v && (rc = conf_http_parse(v, &cfg->http, e)))
		return rc;
	v = json_object_get(root, "plugins");
	if (v)
		return config_plugin_parse_list(v, "plugins", -1, &cfg->plugins, &cfg->nplugins, e);
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

int config_override(struct config *cfg, const char *data_dir, const char *node_name,
		    const char *listen, struct err *e)
{
	int rc = 0;

	if (data_dir && (rc = conf_set_string(&cfg->data_dir, data_dir, e)))
		return rc;
	if (node_name) {
		rc = config_plugin_check_id("-node-name", node_name, e);
		if (!rc)
			rc = conf_set_string(&cfg->node_name, node_name, e);
		if (rc)
			return rc;
	}
	if (!listen)
		return 0;
	if (strncmp(listen, "unix:", 5) == 0 || listen[0] == '/') {
		const char *p = listen[0] == '/' ? listen : listen + 5;

		if (p[0] != '/' || strlen(p) > CONF_SOCK_MAX)
			return err_set(e, CSID_EINVAL,
				       "-listen: unix socket path must be absolute and at most %d "
				       "bytes",
				       CONF_SOCK_MAX);
		return conf_set_string(&cfg->listen_socket, p, e);
	}
	if (!strchr(listen, ':'))
		return err_set(e, CSID_EINVAL, "-listen: expected unix:PATH or HOST:PORT");
	return conf_set_string(&cfg->listen_addr, listen, e);
}

int config_finalize(struct config *cfg, struct err *e)
{
	char buf[CONF_PATH_MAX + 64];
	int rc;

	if ((rc = conf_data_dir(&cfg->data_dir, 256, e)))
		return rc;
	if (!cfg->node_name) {
		char host[256] = "";

		if (gethostname(host, sizeof(host) - 1) != 0 || !host[0])
			snprintf(host, sizeof(host), "localhost");
		if ((rc = conf_set_string(&cfg->node_name, host, e)))
			return rc;
	}
	if (!cfg->listen_socket) {
		snprintf(buf, sizeof(buf), "%s/agent.sock", cfg->data_dir);
		if (strlen(buf) > CONF_SOCK_MAX)
			return err_set(e, CSID_EINVAL,
				       "listener.socket: default %s/agent.sock is longer than %d "
				       "bytes; set listener.socket or -listen",
				       cfg->data_dir, CONF_SOCK_MAX);
		if ((rc = conf_set_string(&cfg->listen_socket, buf, e)))
			return rc;
	}
	return 0;
}
