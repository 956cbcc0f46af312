/*
 * Agent configuration: the JSON file given to `csid agent -config FILE`,
 * overridden by command-line flags. Example:
 *
 *   {
 *     "data_dir": "/var/lib/csid",
 *     "node_name": "node-1",
 *     "listener": {"socket": "/var/lib/csid/agent.sock", "addr": "127.0.0.1:4650"},
 *     "timings": {"probe_interval": "30s", "health_timeout": "30s",
 *                 "resync_period": "30s", "backoff_base": "1s", "backoff_max": "1m",
 *                 "unhealthy_threshold": "1m", "socket_timeout": "30s",
 *                 "stop_grace": "5s", "rpc_timeout": "15s", "reconnect_max": "30s",
 *                 "heartbeat": "10s"},
 *     "servers": ["http://10.0.0.1:4646", "http://10.0.0.2:4646"],
 *     "server_token": "...",
 *     "plugin_log_max_bytes": 1048576,
 *     "http": {"max_conns_per_client": 100, "header_timeout": "5s", ...},
 *     "plugins": [
 *       {"id": "hostpath.csi.csid.dev", "type": "monolith",
 *        "command": "/usr/bin/csi-hostpath",
 *        "args": ["--endpoint", "${CSI_ENDPOINT}", "--node-id", "${NODE_NAME}"],
 *        "env": {"LOG": "debug"}},
 *       {"id": "nfs.csi.k8s.io", "type": "node", "socket": "/run/nfs/csi.sock"}
 *     ]
 *   }
 *
 * In args and env values, ${CSI_ENDPOINT} is the instance's socket as a
 * unix:// URL, ${CSI_ENDPOINT_PATH} the same socket as a bare path (for
 * plugins that take --csi-address=/path), ${NODE_NAME} the node name.
 *
 * servers: the csid servers the agent joins (http:// or https:// base
 * URLs), tried in order with failover; none: the agent runs alone.
 * server_token (a token with write access when the servers have ACL
 * tokens) is sent to them (X-Csid-Token), and is what a server presents
 * (its agent_token) to run controller RPCs here; never logged nor quoted
 * in a message. heartbeat is how often the agent sends its node's fingerprint
 * (default 10 s; it must stay well under the server's node_ttl, 30 s by
 * default). These three are read at start: a SIGHUP reload applies the
 * plugins only. With servers, node_name must be a server ID (letters,
 * digits, '.', '_' and '-'), or the agent does not start.
 *
 * Validation is strict: unknown keys, wrong types, bad durations and hostile
 * plugin IDs are reported with the JSON path of the offending value. A
 * struct config owns every string it points to.
 */
#ifndef CSID_AGENT_CONFIG_H
#define CSID_AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/conf_http.h"
#include "plugins/config_plugin.h"
#include "util/conf.h"
#include "util/err.h"

/* Servers an agent may list, and the longest server URL and token (bytes). */
#define CONFIG_SERVERS_MAX 16
#define CONFIG_SERVER_URL_MAX 256
#define CONFIG_TOKEN_MAX 256
/* Config files larger than this are refused. */
#define CONFIG_FILE_MAX (1024 * 1024)

/* The agent config's keysets; ends with {NULL, NULL}. */
extern const struct conf_keyset config_keysets[];

/*
 * "docker_plugin": {"name": "csid", "socket": "/run/docker/plugins/csid.sock",
 *                   "spec_file": "/etc/docker/plugins/csid.spec",
 *                   "engine_socket": "/run/docker.sock"}
 * The Docker/Podman volume plugin (api/docker_plugin.h); absent: off.
 * name defaults to "csid" (letters, digits, '.', '_', '-'; at most 64
 * bytes), socket to /run/docker/plugins/<name>.sock; spec_file (optional)
 * is written with "unix://<socket>" for engines that look for spec files;
 * engine_socket is the Docker engine's API, asked for the processes of
 * the containers that mount (default /run/docker.sock; "" for none).
 */
struct config_docker {
	char *name; /* NULL: off */
	char *socket;
	char *spec_file; /* NULL: none */
	char *engine_socket; /* NULL: none */
	/* Set by `csid dev`: a socket that cannot be bound is a warning, not a failure. */
	bool optional;
};

struct config {
	char *data_dir;
	char *node_name;
	char *listen_socket; /* unix socket of the HTTP API (never NULL once finalized) */
	char *listen_addr; /* optional TCP "host:port" */
	int64_t probe_interval_ms;
	int64_t health_timeout_ms;
	int64_t resync_period_ms;
	int64_t backoff_base_ms;
	int64_t backoff_max_ms;
	int64_t unhealthy_threshold_ms;
	int64_t socket_timeout_ms;
	int64_t stop_grace_ms;
	int64_t rpc_timeout_ms; /* deadline of each node RPC of a mount (default 15 s) */
	/*
	 * Cap of the delay between retries of a plugin that is down (a
	 * connect, fingerprint or Probe failed), which doubles from 100 ms
	 * with jitter (default 30 s).
	 */
	int64_t reconnect_max_ms;
	int64_t plugin_log_max_bytes;
	char **servers; /* base URLs, no trailing slash */
	size_t nservers;
	/*
	 * The secret shared with the servers (a write ACL token of theirs):
	 * the agent sends it with its node's fingerprint, and a server
	 * presents it to run controller RPCs through this agent. NULL: none.
	 * Never logged; wiped on free.
	 */
	char *server_token;
	int64_t heartbeat_ms;
	struct config_plugin *plugins;
	size_t nplugins;
	struct config_docker docker;
	struct conf_http http; /* the "http" section: listener bounds, TLS */
};

/* A config with every default and no plugin; NULL when out of memory. */
struct config *config_new(void);
/* Frees cfg and everything it owns; NULL is a no-op. */
void config_free(struct config *cfg);

/*
 * Parses and validates a JSON document of len bytes (no NUL needed).
 * Returns 0 and a new config in *out (free with config_free), or
 * CSID_EINVAL / CSID_ETOOBIG / CSID_ENOMEM with e naming the problem.
 */
int config_parse(const char *buf, size_t len, struct config **out, struct err *e);
/* Reads path (at most CONFIG_FILE_MAX bytes) and parses it. */
int config_load(const char *path, struct config **out, struct err *e);

/*
 * Applies flag overrides (NULL = keep the file's value). listen is
 * "unix:PATH", an absolute socket path, or "host:port" for TCP.
 */
int config_override(struct config *cfg, const char *data_dir, const char *node_name,
		    const char *listen, struct err *e);
/*
 * Completes a config after overrides: data_dir made absolute, node_name
 * defaulted to the host name, listen_socket defaulted to
 * <data_dir>/agent.sock, and the result checked again (a socket path that
 * fits, a data_dir). Returns 0 or CSID_EINVAL with e set.
 */
int config_finalize(struct config *cfg, struct err *e);

/*
 * Turns the Docker plugin on with name (NULL: "csid") and its defaults,
 * as `csid dev` does. Returns 0 or CSID_EINVAL / CSID_ENOMEM.
 */
int config_docker_enable(struct config *cfg, const char *name, struct err *e);

/* Looks a plugin up by ID; NULL when absent. */
const struct config_plugin *config_find_plugin(const struct config *cfg, const char *id);
#endif
