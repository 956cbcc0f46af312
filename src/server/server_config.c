/*
 * Server configuration parser. The document is walked with jansson; every
 * object's keys are checked against a fixed list, so a typo is an error
 * rather than a setting silently ignored, and every error names the JSON
 * path of the value at fault. Durations use the agent's syntax
 * (conf_parse_duration: "100ms", "15s", "1m"), plugin IDs the model's
 * rules (model_plugin_id_check), and a controller plugin becomes the
 * agent's struct config_plugin, so the supervisor runs it unchanged.
 */
#include "server/server_config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "model/model.h"
#include "server/server_install.h"
#include "server/server_leader.h"
#include "util/conf.h"
#include "util/log.h"

#define SERVER_CONFIG_SOCK_MAX 107
#define SERVER_CONFIG_LISTEN_MAX 256
/* A setting's JSON path ("controller_plugins[12].env.NAME"). */
#define SERVER_CONFIG_JPATH 128

struct server_config_file *server_config_new(void)
{
	struct server_config_file *cfg = calloc(1, sizeof(*cfg));

	if (!cfg)
		return NULL;
	cfg->rpc_timeout_ms = 15000;
	cfg->log_level = -1;
	return cfg;
}

void server_config_free(struct server_config_file *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->ntokens; i++) {
		char *s = cfg->tokens[i].secret;

		if (s) {
			explicit_bzero(s, strlen(s));
			free(s);
		}
	}
	free(cfg->tokens);
	if (cfg->agent_token) {
		explicit_bzero(cfg->agent_token, strlen(cfg->agent_token));
		free(cfg->agent_token);
	}
	for (size_t i = 0; i < cfg->nplugins; i++)
		config_plugin_clear(&cfg->plugins[i]);
	free(cfg->plugins);
	conf_http_clear(&cfg->http);
	free(cfg->data_dir);
	free(cfg->listen);
	free(cfg->socket);
	for (size_t i = 0; i < cfg->etcd.nendpoints; i++)
		free(cfg->etcd.endpoints[i]);
	free(cfg->etcd.endpoints);
	free(cfg->etcd.prefix);
	free(cfg->etcd.ca_file);
	free(cfg->etcd.cert_file);
	free(cfg->etcd.key_file);
	free(cfg->store_path);
	free(cfg->lock_path);
	free(cfg->cluster_id);
	free(cfg->server_id);
	free(cfg);
}

static bool server_config_has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* Refuses every key of obj that is not in allowed; path names obj. */
static int server_config_keys(json_t *obj, const char *path, const char *const *allowed,
			      struct err *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		size_t i = 0;
		char q[160];

		while (allowed[i] && strcmp(allowed[i], key) != 0)
			i++;
		if (!allowed[i])
			return err_set(e, CSID_EINVAL, "%s%sunknown key %.100s", path,
				       path[0] ? ": " : "", log_q(q, sizeof(q), key));
	}
	return 0;
}

/*
 * A string value without NUL nor control characters, 1..max bytes
 * (0..max when allow_empty), copied to *out (replacing what was there).
 */
static int server_config_str(json_t *v, const char *path, size_t max, bool allow_empty, char **out,
			     struct err *e)
{
	const char *s;
	size_t len;
	char *copy;

	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", path);
	s = json_string_value(v);
	len = json_string_length(v);
	if (len > max)
		return err_set(e, CSID_EINVAL, "%s: longer than %zu bytes", path, max);
	if (!len && !allow_empty)
		return err_set(e, CSID_EINVAL, "%s: empty", path);
	if (strlen(s) != len || server_config_has_ctl(s))
		return err_set(e, CSID_EINVAL, "%s: holds a NUL or control character", path);
	copy = strdup(s);
	if (!copy)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", path);
	free(*out);
	*out = copy;
	return 0;
}

static int server_config_abs_path(json_t *v, const char *path, size_t max, char **out,
				  struct err *e)
{
	int rc = server_config_str(v, path, max, false, out, e);

	if (!rc && (*out)[0] != '/')
		rc = err_set(e, CSID_EINVAL, "%s: must be an absolute path", path);
	return rc;
}

static int server_config_duration(json_t *root, const char *key, int64_t min, int64_t *out,
				  struct err *e)
{
	json_t *v = json_object_get(root, key);
	int64_t ms;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a duration string such as \"15s\"",
			       key);
	ms = conf_parse_duration(json_string_value(v));
	if (ms < 0)
		return err_set(e, CSID_EINVAL,
			       "%s: invalid duration (use e.g. \"100ms\", \"15s\", \"1m\")", key);
	if (ms < min)
		return err_set(e, CSID_EINVAL, "%s: must be at least %lldms", key, (long long)min);
	*out = ms;
	return 0;
}

static int server_config_int(json_t *root, const char *key, int min, int max, int *out,
			     struct err *e)
{
	json_t *v = json_object_get(root, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
		return err_set(e, CSID_EINVAL, "%s: expected an integer from %d to %d", key, min,
			       max);
	*out = (int)json_integer_value(v);
	return 0;
}

int server_config_check_listen(const char *what, const char *addr, struct err *e)
{
	const char *colon = strrchr(addr, ':'), *host_end;
	char *end;
	long port;

	if (!colon || colon == addr)
		return err_set(e, CSID_EINVAL, "%s: expected HOST:PORT", what);
	host_end = colon;
	if (addr[0] == '[' && colon[-1] != ']')
		return err_set(e, CSID_EINVAL, "%s: an IPv6 host is written [ADDR]:PORT", what);
	if (addr[0] != '[' && memchr(addr, ':', (size_t)(host_end - addr)))
		return err_set(e, CSID_EINVAL, "%s: an IPv6 host is written [ADDR]:PORT", what);
	errno = 0;
	port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || errno || port < 1 || port > 65535)
		return err_set(e, CSID_EINVAL, "%s: port must be from 1 to 65535", what);
	if (server_config_has_ctl(addr) || strpbrk(addr, " /"))
		return err_set(e, CSID_EINVAL, "%s: holds a space, '/' or control character", what);
	return 0;
}

static const char *const server_config_token_keys[] = {"secret", "write", NULL};

static int server_config_tokens(json_t *v, struct server_config_file *cfg, struct err *e)
{
	size_t i;
	json_t *t;

	if (!json_is_array(v))
		return err_set(e, CSID_EINVAL, "acl_tokens: expected an array");
	if (json_array_size(v) > SERVER_CONFIG_TOKENS_MAX)
		return err_set(e, CSID_EINVAL, "acl_tokens: more than %d tokens",
			       SERVER_CONFIG_TOKENS_MAX);
	cfg->tokens = calloc(json_array_size(v) + 1, sizeof(*cfg->tokens));
	if (!cfg->tokens)
		return err_set(e, CSID_ENOMEM, "acl_tokens: out of memory");
	json_array_foreach(v, i, t)
	{
		struct server_config_token *tok = &cfg->tokens[i];
		char path[SERVER_CONFIG_JPATH];
		json_t *w;
		int rc;

		snprintf(path, sizeof(path), "acl_tokens[%zu]", i);
		if (!json_is_object(t))
			return err_set(e, CSID_EINVAL, "%s: expected an object", path);
		if ((rc = server_config_keys(t, path, server_config_token_keys, e)))
			return rc;
		snprintf(path, sizeof(path), "acl_tokens[%zu].secret", i);
		if (!json_object_get(t, "secret"))
			return err_set(e, CSID_EINVAL, "%s: missing", path);
		cfg->ntokens++;
		rc = server_config_str(json_object_get(t, "secret"), path, SERVER_CONFIG_SECRET_MAX,
				       false, &tok->secret, e);
		if (rc)
			return rc;
		if (strlen(tok->secret) < SERVER_CONFIG_SECRET_MIN)
			return err_set(e, CSID_EINVAL, "%s: shorter than %d bytes", path,
				       SERVER_CONFIG_SECRET_MIN);
		for (size_t j = 0; j < i; j++)
			if (strcmp(cfg->tokens[j].secret, tok->secret) == 0)
				return err_set(e, CSID_EINVAL, "%s: same as acl_tokens[%zu].secret",
					       path, j);
		w = json_object_get(t, "write");
		if (w && !json_is_boolean(w))
			return err_set(e, CSID_EINVAL,
				       "acl_tokens[%zu].write: expected true or false", i);
		tok->write = w && json_is_true(w);
	}
	return 0;
}

/* "command": [program, args...] into p->command and p->args. */
/*
 * controller_plugins: the agent's plugin definitions (one parser for both
 * configs); "type" defaults to controller, and may be monolith (the
 * server drives its controller side). The IDs are the ones volumes name
 * their plugin with, so they follow the model's domain notation.
 */
static int server_config_plugins(json_t *v, struct server_config_file *cfg, struct err *e)
{
	int rc = config_plugin_parse_list(v, "controller_plugins", CONFIG_PLUGIN_CONTROLLER,
					  &cfg->plugins, &cfg->nplugins, e);

	for (size_t i = 0; !rc && i < cfg->nplugins; i++) {
		if (cfg->plugins[i].type == CONFIG_PLUGIN_NODE)
			return err_set(e, CSID_EINVAL,
				       "controller_plugins[%zu].type: a node plugin runs on the "
				       "agents, not on the server",
				       i);
		if ((rc = model_plugin_id_check(cfg->plugins[i].id, e)))
			return err_wrap(e, "controller_plugins[%zu].id", i);
	}
	return rc;
}

static const char *const server_config_etcd_keys[] = {
    "endpoints", "prefix",   "dial_timeout",      "request_timeout",     "ca_file",
    "cert_file", "key_file", "max_request_bytes", "compaction_interval", NULL};

/* "etcd": {"endpoints", "prefix", timeouts, TLS files, "max_request_bytes"}. */
static int server_config_etcd(json_t *v, struct server_config_etcd *ec, struct err *e)
{
	json_t *eps = json_object_get(v, "endpoints"), *x;
	char path[SERVER_CONFIG_JPATH];
	size_t i;
	int rc;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "etcd: expected an object");
	if ((rc = server_config_keys(v, "etcd", server_config_etcd_keys, e)))
		return rc;
	if (!json_is_array(eps) || json_array_size(eps) == 0 ||
	    json_array_size(eps) > SERVER_CONFIG_ETCD_ENDPOINTS_MAX)
		return err_set(e, CSID_EINVAL, "etcd.endpoints: expected an array of 1 to %d URLs",
			       SERVER_CONFIG_ETCD_ENDPOINTS_MAX);
	ec->endpoints = calloc(json_array_size(eps), sizeof(*ec->endpoints));
	if (!ec->endpoints)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	json_array_foreach(eps, i, x)
	{
		snprintf(path, sizeof(path), "etcd.endpoints[%zu]", i);
		if ((rc = server_config_str(x, path, SERVER_CONFIG_LISTEN_MAX, false,
					    &ec->endpoints[i], e)))
			return rc;
		ec->nendpoints++;
		if (strncmp(ec->endpoints[i], "http://", 7) != 0 &&
		    strncmp(ec->endpoints[i], "https://", 8) != 0)
			return err_set(e, CSID_EINVAL,
				       "%s: expected http://HOST:PORT or https://HOST:PORT", path);
	}
	if ((x = json_object_get(v, "prefix"))) {
		if ((rc = server_config_str(x, "etcd.prefix", 256, false, &ec->prefix, e)))
			return rc;
		if (ec->prefix[0] != '/' || ec->prefix[strlen(ec->prefix) - 1] != '/')
			return err_set(e, CSID_EINVAL, "etcd.prefix: must start and end with '/'");
	}
	if (((x = json_object_get(v, "ca_file")) &&
	     (rc = server_config_abs_path(x, "etcd.ca_file", CONF_PATH_MAX, &ec->ca_file, e))) ||
	    ((x = json_object_get(v, "cert_file")) &&
	     (rc =
		  server_config_abs_path(x, "etcd.cert_file", CONF_PATH_MAX, &ec->cert_file, e))) ||
	    ((x = json_object_get(v, "key_file")) &&
	     (rc = server_config_abs_path(x, "etcd.key_file", CONF_PATH_MAX, &ec->key_file, e))))
		return rc;
	if (!ec->cert_file != !ec->key_file)
		return err_set(e, CSID_EINVAL, "etcd: cert_file and key_file go together");
	if ((rc = server_config_duration(v, "dial_timeout", 10, &ec->dial_timeout_ms, e)) ||
	    (rc = server_config_duration(v, "request_timeout", 100, &ec->request_timeout_ms, e)) ||
	    (rc = server_config_duration(v, "compaction_interval", 0, &ec->compaction_interval_ms,
					 e)))
		return err_wrap(e, "etcd");
	/* "0s": keep every revision (etcd compacts by itself, or someone else does). */
	if (json_object_get(v, "compaction_interval") && ec->compaction_interval_ms == 0)
		ec->compaction_interval_ms = -1;
	else if (ec->compaction_interval_ms > 0 && ec->compaction_interval_ms < 1000)
		return err_set(e, CSID_EINVAL,
			       "etcd.compaction_interval: expected \"0s\" (off) or at least 1s");
	if ((x = json_object_get(v, "max_request_bytes"))) {
		if (!json_is_integer(x) || json_integer_value(x) < 64 * 1024 ||
		    json_integer_value(x) > 1024 * 1024 * 1024)
			return err_set(e, CSID_EINVAL,
				       "etcd.max_request_bytes: expected an integer from 65536 to "
				       "1073741824");
		ec->max_request_bytes = (size_t)json_integer_value(x);
	}
	return 0;
}

static int server_config_scalars(json_t *root, struct server_config_file *cfg, struct err *e)
{
	json_t *v;
	int rc;

	if ((v = json_object_get(root, "data_dir")) &&
	    (rc = server_config_str(v, "data_dir", CONF_PATH_MAX, false, &cfg->data_dir, e)))
		return rc;
	if ((v = json_object_get(root, "listen"))) {
		rc =
		    server_config_str(v, "listen", SERVER_CONFIG_LISTEN_MAX, true, &cfg->listen, e);
		if (!rc && cfg->listen[0])
			rc = server_config_check_listen("listen", cfg->listen, e);
		if (rc)
			return rc;
	}
	if ((v = json_object_get(root, "socket")) &&
	    (rc = server_config_abs_path(v, "socket", SERVER_CONFIG_SOCK_MAX, &cfg->socket, e)))
		return rc;
	if ((v = json_object_get(root, "store"))) {
		const char *s = json_is_string(v) ? json_string_value(v) : "";

		if (strcmp(s, "sqlite") == 0)
			cfg->store = SERVER_CONFIG_STORE_SQLITE;
		else if (strcmp(s, "memory") == 0)
			cfg->store = SERVER_CONFIG_STORE_MEMORY;
		else if (strcmp(s, "etcd") == 0)
			cfg->store = SERVER_CONFIG_STORE_ETCD;
		else
			return err_set(e, CSID_EINVAL,
				       "store: expected \"sqlite\", \"memory\" or \"etcd\"");
	}
	if ((v = json_object_get(root, "log_level"))) {
		cfg->log_level = json_is_string(v) ? log_level_parse(json_string_value(v)) : -1;
		if (cfg->log_level < 0)
			return err_set(e, CSID_EINVAL,
				       "log_level: expected \"debug\", \"info\", \"warn\" or "
				       "\"error\"");
	}
	if ((rc = server_config_int(root, "workers", 1, SERVER_CONFIG_WORKERS_MAX, &cfg->workers,
				    e)) ||
	    (rc = server_config_int(root, "plugin_concurrency", 1, SERVER_CONFIG_WORKERS_MAX,
				    &cfg->plugin_concurrency, e)))
		return rc;
	if ((rc = server_config_duration(root, "rpc_timeout", 10, &cfg->rpc_timeout_ms, e)) ||
	    (rc = server_config_duration(root, "backoff_min", 1, &cfg->backoff_min_ms, e)) ||
	    (rc = server_config_duration(root, "backoff_max", 1, &cfg->backoff_max_ms, e)) ||
	    (rc = server_config_duration(root, "node_ttl", 100, &cfg->node_ttl_ms, e)) ||
	    (rc = server_config_duration(root, "node_grace", 100, &cfg->node_grace_ms, e)) ||
	    (rc = server_config_duration(root, "leader_ttl", SERVER_LEADER_TTL_MIN_MS,
					 &cfg->leader_ttl_ms, e)))
		return rc;
	if ((v = json_object_get(root, "cluster_id")) &&
	    ((rc = server_config_str(v, "cluster_id", SERVER_INSTALL_ID_MAX, false,
				     &cfg->cluster_id, e)) ||
	     !server_install_id_ok(cfg->cluster_id)))
		return rc ? rc
			  : err_set(e, CSID_EINVAL,
				    "cluster_id: expected 1 to %d of [A-Za-z0-9._-]",
				    SERVER_INSTALL_ID_MAX);
	if ((v = json_object_get(root, "server_id")) &&
	    ((rc = server_config_str(v, "server_id", SERVER_LEADER_ID_MAX, false, &cfg->server_id,
				     e)) ||
	     !server_install_id_ok(cfg->server_id)))
		return rc ? rc
			  : err_set(e, CSID_EINVAL, "server_id: expected 1 to %d of [A-Za-z0-9._-]",
				    SERVER_INSTALL_ID_MAX);
	if (cfg->leader_ttl_ms > SERVER_LEADER_TTL_MAX_MS)
		return err_set(e, CSID_EINVAL, "leader_ttl: at most %ds",
			       SERVER_LEADER_TTL_MAX_MS / 1000);
	if ((v = json_object_get(root, "agent_token"))) {
		rc = server_config_str(v, "agent_token", SERVER_CONFIG_SECRET_MAX, false,
				       &cfg->agent_token, e);
		if (rc)
			return rc;
		if (strlen(cfg->agent_token) < SERVER_CONFIG_SECRET_MIN)
			return err_set(e, CSID_EINVAL, "agent_token: shorter than %d bytes",
				       SERVER_CONFIG_SECRET_MIN);
	}
	if (cfg->backoff_min_ms && cfg->backoff_max_ms && cfg->backoff_max_ms < cfg->backoff_min_ms)
		return err_set(e, CSID_EINVAL, "backoff_max: shorter than backoff_min");
	return 0;
}

static const char *const server_config_top_keys[] = {
    "data_dir",    "listen",      "socket",      "store",
    "etcd",        "workers",     "rpc_timeout", "backoff_min",
    "backoff_max", "node_ttl",    "node_grace",  "plugin_concurrency",
    "acl_tokens",  "agent_token", "log_level",   "controller_plugins",
    "http",        "leader_ttl",  "cluster_id",  "server_id",
    NULL};

const struct conf_keyset server_config_keysets[] = {
    {"", server_config_top_keys},      {"acl_tokens[]", server_config_token_keys},
    {"etcd", server_config_etcd_keys}, {"controller_plugins[]", config_plugin_keys},
    {"http", conf_http_keys},          {NULL, NULL},
};

/* Walks a decoded document (root is consumed) into a new config. */
static int server_config_from_json(json_t *root, struct server_config_file **out, struct err *e)
{
	struct server_config_file *cfg = NULL;
	json_t *v;
	int rc;

	if (!json_is_object(root)) {
		rc = err_set(e, CSID_EINVAL, "config: expected a JSON object");
		goto out;
	}
	cfg = server_config_new();
	if (!cfg) {
		rc = err_set(e, CSID_ENOMEM, "config: out of memory");
		goto out;
	}
	rc = server_config_keys(root, "", server_config_top_keys, e);
	if (!rc)
		rc = server_config_scalars(root, cfg, e);
	if (!rc && (v = json_object_get(root, "acl_tokens")))
		rc = server_config_tokens(v, cfg, e);
	if (!rc && (v = json_object_get(root, "controller_plugins")))
		rc = server_config_plugins(v, cfg, e);
	if (!rc && (v = json_object_get(root, "etcd")))
		rc = server_config_etcd(v, &cfg->etcd, e);
	if (!rc && cfg->store == SERVER_CONFIG_STORE_ETCD && cfg->etcd.nendpoints == 0)
		rc = err_set(e, CSID_EINVAL, "etcd: \"store\": \"etcd\" needs etcd.endpoints");
	if (!rc && cfg->store != SERVER_CONFIG_STORE_ETCD && cfg->etcd.nendpoints > 0)
		rc = err_set(e, CSID_EINVAL, "etcd: set, but \"store\" is not \"etcd\"");
	if (!rc && (v = json_object_get(root, "http")))
		rc = conf_http_parse(v, &cfg->http, e);
	if (rc)
		goto out;
	*out = cfg;
	cfg = NULL;
out:
	server_config_free(cfg);
	json_decref(root);
	return rc;
}

int server_config_parse(const char *buf, size_t len, struct server_config_file **out, struct err *e)
{
	json_error_t jerr;
	json_t *root;

	*out = NULL;
	if (len > SERVER_CONFIG_FILE_MAX)
		return err_set(e, CSID_ETOOBIG, "config: larger than %d bytes",
			       SERVER_CONFIG_FILE_MAX);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(e, CSID_EINVAL, "config: line %d column %d: %.200s", jerr.line,
			       jerr.column, jerr.text);
	return server_config_from_json(root, out, e);
}

int server_config_load(const char *path, struct server_config_file **out, struct err *e)
{
	json_error_t jerr;
	struct stat st;
	json_t *root;
	int rc;

	*out = NULL;
	if (stat(path, &st) != 0)
		return err_errno(e, errno, "config %s", path);
	if (st.st_size > SERVER_CONFIG_FILE_MAX)
		return err_set(e, CSID_ETOOBIG, "config %s: larger than %d bytes", path,
			       SERVER_CONFIG_FILE_MAX);
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
	if (!root)
		return err_set(e, CSID_EINVAL, "config %s: line %d column %d: %.200s", path,
			       jerr.line, jerr.column, jerr.text);
	rc = server_config_from_json(root, out, e);
	if (rc)
		err_wrap(e, "config %s", path);
	return rc;
}

int server_config_override(struct server_config_file *cfg, const char *data_dir, const char *listen,
			   const char *socket, const char *log_level, struct err *e)
{
	int rc;

	if (data_dir) {
		if (!data_dir[0])
			return err_set(e, CSID_EINVAL, "-data-dir: empty");
		if ((rc = conf_set_string(&cfg->data_dir, data_dir, e)))
			return rc;
	}
	if (listen) {
		if (listen[0] && (rc = server_config_check_listen("-listen", listen, e)))
			return rc;
		if ((rc = conf_set_string(&cfg->listen, listen, e)))
			return rc;
	}
	if (socket) {
		if (socket[0] != '/' || strlen(socket) > SERVER_CONFIG_SOCK_MAX)
			return err_set(e, CSID_EINVAL,
				       "-socket: must be an absolute path of at most %d bytes",
				       SERVER_CONFIG_SOCK_MAX);
		if ((rc = conf_set_string(&cfg->socket, socket, e)))
			return rc;
	}
	if (log_level) {
		cfg->log_level = log_level_parse(log_level);
		if (cfg->log_level < 0)
			return err_set(e, CSID_EINVAL,
				       "-log-level: expected debug, info, warn or error");
	}
	return 0;
}

int server_config_finalize(struct server_config_file *cfg, struct err *e)
{
	char buf[CONF_PATH_MAX + 64];
	int rc;

	if ((rc = conf_data_dir(&cfg->data_dir, 64, e)))
		return rc;
	if (!cfg->listen && (rc = conf_set_string(&cfg->listen, SERVER_CONFIG_LISTEN_DEFAULT, e)))
		return rc;
	snprintf(buf, sizeof(buf), "%s/server.db", cfg->data_dir);
	if ((rc = conf_set_string(&cfg->store_path, buf, e)))
		return rc;
	snprintf(buf, sizeof(buf), "%s/server.lock", cfg->data_dir);
	return conf_set_string(&cfg->lock_path, buf, e);
}
