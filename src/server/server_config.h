/*
 * Server configuration: the strict JSON file given to `csid server -config
 * FILE`, overridden by command-line flags. Example:
 *
 *   {
 *     "data_dir": "/var/lib/csid-server",
 *     "listen": "127.0.0.1:4646",
 *     "socket": "/run/csid/server.sock",
 *     "store": "sqlite",
 *     "etcd": {"endpoints": ["https://10.0.0.1:2379"], "prefix": "/csid/",
 *              "dial_timeout": "2s", "request_timeout": "10s",
 *              "ca_file": "/etc/csid/etcd-ca.pem", "cert_file": "...", "key_file": "...",
 *              "max_request_bytes": 1572864},
 *     "workers": 4, "plugin_concurrency": 1,
 *     "rpc_timeout": "15s", "backoff_min": "100ms", "backoff_max": "10m",
 *     "node_ttl": "30s", "node_grace": "5m", "leader_ttl": "10s",
 *     "cluster_id": "prod-eu", "server_id": "csid-a",
 *     "log_level": "info",
 *     "acl_tokens": [{"secret": "...", "write": true}],
 *     "agent_token": "...",
 *     "http": {"max_conns_per_client": 100, "header_timeout": "5s", ...},
 *     "controller_plugins": [
 *       {"id": "ebs.csi.aws.com", "socket": "/run/ebs/csi.sock"},
 *       {"id": "hostpath.csi.csid.dev",
 *        "command": "/usr/bin/csi-hostpath", "args": ["--endpoint", "${CSI_ENDPOINT}"],
 *        "env": {"LOG": "debug"}}
 *     ]
 *   }
 *
 * Every key is optional but data_dir (here or -data-dir), and "etcd" with
 * its endpoints when "store" is "etcd" (and only then). Unknown keys,
 * wrong types and bad values are refused with the JSON path of the value
 * ("controller_plugins[1].args[0]: expected a string"); an ACL secret
 * never appears in a message. A struct server_config_file owns every
 * string it points to; its secrets are zeroed when it is freed.
 */
#ifndef CSID_SERVER_SERVER_CONFIG_H
#define CSID_SERVER_SERVER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plugins/config_plugin.h"
#include "util/conf.h"
#include "util/conf_http.h"
#include "util/err.h"

#define SERVER_CONFIG_LISTEN_DEFAULT "127.0.0.1:4646"
#define SERVER_CONFIG_FILE_MAX (1024 * 1024)
#define SERVER_CONFIG_TOKENS_MAX 256
#define SERVER_CONFIG_SECRET_MAX 256
/* Fewest bytes in an ACL secret: a short one is guessable. */
#define SERVER_CONFIG_SECRET_MIN 8
#define SERVER_CONFIG_WORKERS_MAX 256

enum server_config_store {
	SERVER_CONFIG_STORE_SQLITE,
	SERVER_CONFIG_STORE_MEMORY,
	SERVER_CONFIG_STORE_ETCD
};

/* The most etcd endpoints in a config. */
#define SERVER_CONFIG_ETCD_ENDPOINTS_MAX 16

/*
 * "etcd": {...} with "store": "etcd": where the catalogue lives. Every
 * server of one installation names the same cluster and prefix.
 */
struct server_config_etcd {
	char **endpoints; /* "http://HOST:PORT" or "https://HOST:PORT" */
	size_t nendpoints;
	char *prefix; /* "prefix"; NULL: the store's default "/csid/" */
	char *ca_file, *cert_file, *key_file; /* TLS files; NULL: none */
	int64_t dial_timeout_ms, request_timeout_ms; /* 0: the store's defaults */
	size_t max_request_bytes; /* etcd's --max-request-bytes; 0: its default */
	/* The history the leader keeps (server_leader_compact); 0: its default, < 0: all. */
	int64_t compaction_interval_ms;
};

struct server_config_token {
	char *secret; /* never logged nor shown */
	bool write; /* false: read-only */
};

struct server_config_file {
	char *data_dir; /* absolute once finalized */
	char *listen; /* TCP "host:port"; "" for none */
	char *socket; /* unix listener of the API, or NULL */
	enum server_config_store store;
	struct server_config_etcd etcd;
	char *store_path; /* <data_dir>/server.db once finalized (sqlite) */
	char *lock_path; /* <data_dir>/server.lock once finalized */
	int workers; /* 0: reconciler default */
	int plugin_concurrency; /* 0: 1 */
	int64_t rpc_timeout_ms; /* default 15 s */
	int64_t backoff_min_ms, backoff_max_ms; /* 0: reconciler defaults */
	int64_t node_ttl_ms; /* 0: SERVER_NODE_TTL_MS */
	/* How long a node stays down before its claims are released; 0: SERVER_NODE_GRACE_MS. */
	int64_t node_grace_ms;
	/* The election lease of servers sharing an etcd store (server_leader.h); 0: its default. */
	int64_t leader_ttl_ms;
	/* The installation this server belongs to (server_install.h); NULL: the store's. */
	char *cluster_id;
	/* This server's ID among the servers of the installation; NULL: from <data_dir>/server-id.
	 */
	char *server_id;
	/* -update-settings: rewrite the installation's cluster-wide settings with these. */
	bool update_settings;
	int log_level; /* enum log_level, or -1: unset */
	struct server_config_token *tokens;
	size_t ntokens;
	/*
	 * The secret presented to agents (their "server_token") to run
	 * controller RPCs of the plugins they supervise; NULL: none (agents
	 * then refuse). Never logged nor shown.
	 */
	char *agent_token;
	/*
	 * Controller plugins on this host: type CONFIG_PLUGIN_CONTROLLER, with
	 * either socket, or command + args + env (supervised): the agent's
	 * plugin definitions (config_plugin_parse_list), "type" controller by
	 * default, or monolith.
	 */
	struct config_plugin *plugins;
	size_t nplugins;
	struct conf_http http; /* the "http" section (util/conf_http.h) */
};

/* The keys the parser accepts (see struct conf_keyset); ends with {NULL, NULL}. */
extern const struct conf_keyset server_config_keysets[];

/* A config with every default; NULL when out of memory. */
struct server_config_file *server_config_new(void);
/* Frees cfg, zeroing the secrets; NULL is a no-op. */
void server_config_free(struct server_config_file *cfg);

/*
 * Parses a JSON document of len bytes (no NUL needed). Returns 0 and *out
 * (free with server_config_free), or CSID_EINVAL / CSID_ETOOBIG /
 * CSID_ENOMEM with e naming the JSON path of the problem.
 */
int server_config_parse(const char *buf, size_t len, struct server_config_file **out,
			struct err *e);
/* Reads path (at most SERVER_CONFIG_FILE_MAX bytes) and parses it. */
int server_config_load(const char *path, struct server_config_file **out, struct err *e);

/*
 * Applies the flags (NULL: keep the file's value): -data-dir, -listen
 * (HOST:PORT, or "" for no TCP listener), -socket (absolute path),
 * -log-level. Returns 0 or CSID_EINVAL naming the flag.
 */
int server_config_override(struct server_config_file *cfg, const char *data_dir, const char *listen,
			   const char *socket, const char *log_level, struct err *e);

/*
 * Completes a config after the overrides: data_dir required and made
 * absolute, store and lock paths derived, listen defaulted and checked.
 * Returns 0 or CSID_EINVAL with e set.
 */
int server_config_finalize(struct server_config_file *cfg, struct err *e);

/* Checks a TCP listen address "host:port" (port 1..65535; "[v6]:port" too). */
int server_config_check_listen(const char *what, const char *addr, struct err *e);

#endif
