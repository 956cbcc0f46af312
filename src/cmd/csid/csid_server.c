/*
 * `csid server`: wires the control plane together and runs it.
 *
 * Start: config (file, then flags) -> data_dir created and locked (flock
 * on <data_dir>/server.lock: a second server on the same data_dir is
 * refused before it touches anything) -> state store (SQLite file
 * <data_dir>/server.db, memory or etcd) -> the installation check
 * (server/server_install.h: refused when this server belongs to another
 * installation or disagrees on a cluster-wide setting) -> host controller plugins on the
 * libuv loop (main thread) -> controllers behind agents (the host's
 * first for the plugins it runs) -> server core and its reconciler ->
 * HTTP API.
 *
 * Stop (SIGTERM/SIGINT): the API stops accepting and finishes the
 * requests in flight, the reconciler drains (each step bounded by its RPC
 * deadline), the controller plugins are stopped, the store closed; exit 0.
 * Logs are key=value lines on stderr.
 *
 * Start and stop are struct csid_server_run (csid_server.h), which `csid
 * dev` runs too; `csid server` adds its flags, its signals and the
 * process-wide setup around one.
 */
#include "csid_server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <uv.h>

#include "api/server_api.h"
#include "csi/csi_client.h"
#include "csid_agent.h"
#include "csid_flags.h"
#include "server/controllers.h"
#include "server/controllers_remote.h"
#include "server/server.h"
#include "server/server_config.h"
#include "server/server_install.h"
#include "server/server_leader.h"
#include "store/store.h"
#include "util/log.h"
#include "util/mkdir_p.h"
#include "util/sd_notify.h"

struct csid_server_run {
	uv_loop_t *loop;
	struct server_config_file *cfg;
	csid_server_stopped_fn on_stopped;
	void *ctx;
	int lock_fd;
	struct store *store;
	struct controllers *ctl;
	struct controllers_remote *remote;
	struct server *server;
	struct server_api *api;
	struct server_api_token *tokens;
	bool stopping;
	int exit_code;
};

/* `csid server`'s own state: its flags, signals and the control plane. */
struct csid_server {
	const char *flag_config, *flag_data_dir, *flag_listen, *flag_socket, *flag_level;
	bool flag_update_settings;
	struct server_config_file *cfg;
	struct csid_server_run *run;
	uv_loop_t loop;
	uv_signal_t sig_term, sig_int;
	int exit_code;
};

static void csid_server_usage(FILE *f)
{
	fprintf(f, "usage: csid server [-config FILE] [-data-dir DIR] [-listen HOST:PORT]\n"
		   "                   [-socket PATH] [-log-level LEVEL] [-update-settings]\n"
		   "\n"
		   "Runs the control plane: state store, controller plugins, reconciler and\n"
		   "the HTTP API (default 127.0.0.1:4646; -listen \"\" for none). Flags\n"
		   "override the JSON config file. SIGTERM/SIGINT drain and stop it.\n"
		   "-update-settings writes this server's cluster-wide settings (node_ttl,\n"
		   "node_grace, leader_ttl, backoff_min, backoff_max) into the installation\n"
		   "record instead of refusing to start when they differ from it.\n");
}

static int csid_server_flags(struct csid_server *s, int argc, char **argv)
{
	const struct csid_flag flags[] = {{"config", &s->flag_config, NULL},
					  {"data-dir", &s->flag_data_dir, NULL},
					  {"listen", &s->flag_listen, NULL},
					  {"socket", &s->flag_socket, NULL},
					  {"log-level", &s->flag_level, NULL},
					  {"update-settings", NULL, &s->flag_update_settings}};

	return csid_flags_parse("server", flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
				csid_server_usage);
}

static int csid_server_config(struct csid_server *s, struct err *e)
{
	int rc;

	if (s->flag_config)
		rc = server_config_load(s->flag_config, &s->cfg, e);
	else
		rc = (s->cfg = server_config_new()) ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	if (!rc)
		rc = server_config_override(s->cfg, s->flag_data_dir, s->flag_listen,
					    s->flag_socket, s->flag_level, e);
	if (!rc)
		rc = server_config_finalize(s->cfg, e);
	if (!rc)
		s->cfg->update_settings = s->flag_update_settings;
	return rc;
}

/* Creates and locks the data_dir, then opens the store. */
static int csid_server_open_store(struct csid_server_run *s, struct err *e)
{
	const struct server_config_file *cfg = s->cfg;
	int rc;

	if ((rc = mkdir_p(cfg->data_dir, e)))
		return err_wrap(e, "data_dir");
	s->lock_fd = open(cfg->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (s->lock_fd < 0)
		return err_errno(e, errno, "open %s", cfg->lock_path);
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return err_set(e, CSID_EEXIST,
			       "data_dir %s: another csid server is running on it (%s is locked)",
			       cfg->data_dir, cfg->lock_path);
	if (cfg->store == SERVER_CONFIG_STORE_MEMORY)
		return store_mem_new(&s->store, e);
	if (cfg->store == SERVER_CONFIG_STORE_ETCD) {
		const struct server_config_etcd *ec = &cfg->etcd;
		struct store_etcd_config sc = {
		    .endpoints = (const char *const *)ec->endpoints,
		    .nendpoints = ec->nendpoints,
		    .prefix = ec->prefix,
		    .ca_file = ec->ca_file,
		    .cert_file = ec->cert_file,
		    .key_file = ec->key_file,
		    .dial_timeout_ms = ec->dial_timeout_ms,
		    .request_timeout_ms = ec->request_timeout_ms,
		    .max_request_bytes = ec->max_request_bytes,
		};

		rc = store_etcd_open(&sc, &s->store, e);
		return rc ? err_wrap(e, "store") : 0;
	}
	rc = store_sqlite_open(cfg->store_path, &s->store, e);
	return rc ? err_wrap(e, "store") : 0;
}

/*
 * The installation check (server/server_install.h) before anything is
 * served: this server's cluster-wide settings against the record; *inst
 * gets the ones it runs with.
 */
static int csid_server_installation(struct csid_server_run *s, struct server_install *inst,
				    struct err *e)
{
	const struct server_config_file *cfg = s->cfg;
	struct server_install_opts o = {0};
	int rc;

	o.want_id = cfg->cluster_id;
	o.update_settings = cfg->update_settings;
	o.set.node_ttl_ms = cfg->node_ttl_ms ? cfg->node_ttl_ms : SERVER_NODE_TTL_MS;
	o.set.node_grace_ms = cfg->node_grace_ms ? cfg->node_grace_ms : SERVER_NODE_GRACE_MS;
	o.set.leader_ttl_ms = cfg->leader_ttl_ms ? cfg->leader_ttl_ms : SERVER_LEADER_TTL_MS;
	o.set.backoff_min_ms =
	    cfg->backoff_min_ms ? cfg->backoff_min_ms : RECONCILER_BACKOFF_MIN_MS;
	o.set.backoff_max_ms =
	    cfg->backoff_max_ms ? cfg->backoff_max_ms : RECONCILER_BACKOFF_MAX_MS;
	rc = server_install_check(s->store, &o, inst, e);
	return rc ? err_wrap(e, "store") : 0;
}

static int csid_server_open(struct csid_server_run *s, struct err *e)
{
	const struct server_config_file *cfg = s->cfg;
	char server_id[SERVER_LEADER_ID_MAX + 1];
	struct server_install inst;
	struct controllers_config cc = {0};
	struct controllers_remote_config rc_cfg = {0};
	struct server_config sc = {0};
	struct server_api_config ac = {0};
	int rc;

	if ((rc = csid_server_open_store(s, e)) || (rc = csid_server_installation(s, &inst, e)))
		return rc;
	if (cfg->server_id)
		snprintf(server_id, sizeof(server_id), "%s", cfg->server_id);
	else if ((rc = server_leader_stored_id(cfg->data_dir, server_id, sizeof(server_id), e)))
		return err_wrap(e, "server ID");
	cc.loop = s->loop;
	cc.data_dir = cfg->data_dir;
	cc.plugins = cfg->plugins;
	cc.nplugins = cfg->nplugins;
	cc.rpc_timeout_ms = cfg->rpc_timeout_ms;
	if ((rc = controllers_new(&cc, &s->ctl, e)))
		return rc;
	rc_cfg.store = s->store;
	rc_cfg.token = cfg->agent_token;
	rc_cfg.host = controllers_seam(s->ctl);
	if ((rc = controllers_remote_new(&rc_cfg, &s->remote, e)))
		return rc;
	sc.store = s->store;
	sc.controllers = controllers_remote_seam(s->remote);
	sc.workers = cfg->workers;
	/* The cluster-wide settings as the installation has them. */
	sc.backoff_min_ms = inst.set.backoff_min_ms;
	sc.backoff_max_ms = inst.set.backoff_max_ms;
	sc.rpc_timeout_ms = cfg->rpc_timeout_ms;
	sc.plugin_concurrency = cfg->plugin_concurrency;
	sc.node_ttl_ms = inst.set.node_ttl_ms;
	sc.node_grace_ms = inst.set.node_grace_ms;
	sc.leader_ttl_ms = inst.set.leader_ttl_ms;
	sc.compact_ms = cfg->etcd.compaction_interval_ms;
	sc.server_id = server_id;
	sc.address = cfg->listen;
	sc.local_controllers = controllers_local;
	sc.local_controllers_ctx = s->ctl;
	if ((rc = server_new(&sc, &s->server, e)) || (rc = server_start(s->server, e)))
		return rc;
	if (cfg->ntokens && !(s->tokens = calloc(cfg->ntokens, sizeof(*s->tokens))))
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (size_t i = 0; i < cfg->ntokens; i++) {
		s->tokens[i].secret = cfg->tokens[i].secret;
		s->tokens[i].write = cfg->tokens[i].write;
	}
	ac.server = s->server;
	ac.tcp_addr = cfg->listen;
	ac.socket_path = cfg->socket;
	ac.tokens = s->tokens;
	ac.ntokens = cfg->ntokens;
	http_limits_from_config(&cfg->http, &ac.limits);
	http_tls_from_config(&cfg->http, &ac.tls);
	ac.plaintext_secrets = cfg->http.allow_plaintext_secrets;
	return server_api_start(&ac, &s->api, e);
}

struct csid_server_run *csid_server_run_new(uv_loop_t *loop, struct server_config_file *cfg,
					    csid_server_stopped_fn on_stopped, void *ctx)
{
	struct csid_server_run *s = calloc(1, sizeof(*s));

	if (!s) {
		server_config_free(cfg);
		return NULL;
	}
	s->loop = loop;
	s->cfg = cfg;
	s->on_stopped = on_stopped;
	s->ctx = ctx;
	s->lock_fd = -1;
	return s;
}

const struct server_config_file *csid_server_run_config(const struct csid_server_run *s)
{
	return s->cfg;
}

/* The controller plugins are gone: the control plane has stopped. */
static void csid_server_plugins_done(void *ctx)
{
	struct csid_server_run *s = ctx;

	log_info("msg=\"server stopped\"");
	s->on_stopped(s->ctx, s->exit_code);
}

/* API first (no new work), then the reconciler, then the plugins (loop thread). */
void csid_server_run_stop(struct csid_server_run *s)
{
	struct err e;

	if (s->stopping)
		return;
	s->stopping = true;
	err_clear(&e);
	server_api_stop(s->api);
	s->api = NULL;
	server_free(s->server);
	s->server = NULL;
	if (!s->ctl || controllers_shutdown(s->ctl, csid_server_plugins_done, s, &e) != 0)
		csid_server_plugins_done(s);
}

int csid_server_run_start(struct csid_server_run *s, struct err *e)
{
	int rc;

	log_info("msg=\"server starting\" version=%s data_dir=%s store=%s controller_plugins=%zu",
		 CSID_VERSION, s->cfg->data_dir,
		 s->cfg->store == SERVER_CONFIG_STORE_MEMORY ? "memory"
		 : s->cfg->store == SERVER_CONFIG_STORE_ETCD ? "etcd"
							     : "sqlite",
		 s->cfg->nplugins);
	rc = csid_server_open(s, e);
	if (rc) {
		s->exit_code = 1;
		csid_server_run_stop(s);
		return rc;
	}
	log_info("msg=\"server ready\" listen=%s socket=%s",
		 s->cfg->listen[0] ? s->cfg->listen : "-", s->cfg->socket ? s->cfg->socket : "-");
	return 0;
}

void csid_server_run_free(struct csid_server_run *s)
{
	if (!s)
		return;
	server_api_stop(s->api);
	server_free(s->server);
	controllers_remote_free(s->remote);
	controllers_free(s->ctl);
	store_close(s->store);
	free(s->tokens);
	server_config_free(s->cfg);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(s);
}

static void csid_server_close_cb(uv_handle_t *h)
{
}

static void csid_server_on_stopped(void *ctx, int exit_code)
{
	struct csid_server *s = ctx;

	s->exit_code = exit_code;
	uv_close((uv_handle_t *)&s->sig_term, csid_server_close_cb);
	uv_close((uv_handle_t *)&s->sig_int, csid_server_close_cb);
}

static void csid_server_on_signal(uv_signal_t *h, int signo)
{
	struct csid_server *s = h->data;

	log_info("msg=\"shutting down\" signal=%d", signo);
	sd_notify_state("STOPPING=1");
	csid_server_run_stop(s->run);
}

int csid_server_main(int argc, char **argv)
{
	struct csid_server s;
	struct err e;
	char q[600];
	int rc;

	memset(&s, 0, sizeof(s));
	err_clear(&e);
	rc = csid_server_flags(&s, argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (csid_server_config(&s, &e) != 0) {
		log_error("msg=\"bad configuration\" error=%s", log_q(q, sizeof(q), e.msg));
		server_config_free(s.cfg);
		return 2;
	}
	if (s.cfg->log_level >= 0)
		log_set_level((enum log_level)s.cfg->log_level);
	if (csid_flags_client_tls(&s.cfg->http, &e) != 0) {
		log_error("msg=\"bad configuration\" error=%s", log_q(q, sizeof(q), e.msg));
		server_config_free(s.cfg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	uv_loop_init(&s.loop);
	s.run = csid_server_run_new(&s.loop, s.cfg, csid_server_on_stopped, &s);
	s.cfg = NULL;
	if (!s.run) {
		log_error("msg=\"server failed to start\" error=\"out of memory\"");
		uv_loop_close(&s.loop);
		return 1;
	}
	uv_signal_init(&s.loop, &s.sig_term);
	uv_signal_init(&s.loop, &s.sig_int);
	s.sig_term.data = s.sig_int.data = &s;
	uv_signal_start(&s.sig_term, csid_server_on_signal, SIGTERM);
	uv_signal_start(&s.sig_int, csid_server_on_signal, SIGINT);
	if (csid_server_run_start(s.run, &e) != 0)
		log_error("msg=\"server failed to start\" error=%s", log_q(q, sizeof(q), e.msg));
	else
		sd_notify_state("READY=1\nSTATUS=serving the API");
	uv_run(&s.loop, UV_RUN_DEFAULT);
	uv_loop_close(&s.loop);
	csid_server_run_free(s.run);
	/* Join libuv's pool threads (their gRPC queues go with them) before gRPC stops. */
	uv_library_shutdown();
	csi_grpc_shutdown();
	return s.exit_code;
}
