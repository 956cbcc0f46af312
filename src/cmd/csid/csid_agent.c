/*
 * `csid agent`: wires the node agent together and runs it.
 *
 * Start: config (file, then flags) -> agent database -> registry restored
 * -> plugins left running by a crashed agent killed and deregistered ->
 * every other restored instance probed, the dead dropped -> server link
 * (when servers are configured: the node's fingerprint sent at start, on
 * every plugin change and as the heartbeat; server_link.h) -> plugin
 * manager -> supervisor starts the configured plugins on the libuv loop
 * (main thread). A startup thread then recovers the mounter (waiting a
 * bounded time for each plugin that owns records) and only then opens the
 * HTTP API, so no request races the recovery; records left pending (a
 * plugin still missing) are retried every resync period.
 *
 * Stop (SIGTERM/SIGINT): the server link stops sending (the servers keep
 * the node's last fingerprint until the TTL), the plugin manager shuts
 * down (so nothing waits for a plugin any more), the API stops accepting
 * and finishes requests in flight, the supervisor deregisters and stops
 * every plugin; mounts are kept (the next agent adopts them).
 * SIGHUP reloads the plugin list (supervisor_apply). Logs are key=value
 * lines on stderr.
 *
 * Start and stop are struct csid_agent_run (csid_agent.h), which `csid
 * dev` runs too; `csid agent` adds its flags, its signals (the reload)
 * and the process-wide setup around one.
 */
#include "csid_agent.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <uv.h>

#include "agent/claims.h"
#include "agent/claims_http.h"
#include "agent/config.h"
#include "agent/held_allocs.h"
#include "agent/mounter.h"
#include "agent/node_plugins.h"
#include "plugins/plugin_manager.h"
#include "plugins/registry.h"
#include "agent/server_link.h"
#include "store/agent_db.h"
#include "plugins/supervisor.h"
#include "api/agent_api.h"
#include "csi/csi_client.h"
#include "csid_flags.h"
#include "model/model.h"
#include "util/clock.h"
#include "util/log.h"
#include "util/mkdir_p.h"
#include "util/sd_notify.h"

struct csid_agent_run {
	uv_loop_t *loop;
	struct config *cfg;
	csid_agent_stopped_fn on_stopped;
	void *ctx;
	char db_path[PATH_MAX];
	int lock_fd; /* flock on <data_dir>/agent.lock: one agent per data_dir */
	sqlite3 *db;
	struct registry *registry;
	struct plugin_manager *pm;
	struct mounter *mounter;
	struct supervisor *sv;
	struct agent_api *api;
	struct node_plugins np; /* the node plugins of the claim flow's mounts */
	struct claims_client *servers; /* the claim flow's client; NULL: no servers configured */
	struct claims *claims;
	struct server_link *link; /* NULL: no servers configured */
	struct held_allocs *held; /* the allocations the link reports */
	char instance_id[SERVER_LINK_INSTANCE_ID_LEN + 1];
	uv_async_t wake;
	pthread_t startup;
	bool startup_started;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool startup_done; /* guarded by mu */
	bool stopping; /* guarded by mu */
	int startup_rc;
	bool shutdown_begun;
	int exit_code;
};

/* `csid agent`'s own state: its flags, signals and the agent. */
struct csid_agent {
	const char *config_path;
	const char *data_dir;
	const char *node_name;
	const char *listen;
	struct csid_agent_run *run;
	uv_loop_t loop;
	uv_signal_t sig_term, sig_int, sig_hup;
	int exit_code;
};

static void csid_agent_usage(FILE *f)
{
	fprintf(f, "usage: csid agent [-config FILE] [-data-dir DIR] [-node-name NAME]\n"
		   "                  [-listen unix:PATH|HOST:PORT] [-log-level LEVEL]\n"
		   "\n"
		   "Runs the node agent. Flags override the JSON config file. SIGTERM/SIGINT\n"
		   "stop it (plugins stopped, mounts kept); SIGHUP reloads the plugin list.\n");
}

static int csid_agent_flags(struct csid_agent *a, int argc, char **argv, const char **level)
{
	const struct csid_flag flags[] = {{"config", &a->config_path, NULL},
					  {"data-dir", &a->data_dir, NULL},
					  {"node-name", &a->node_name, NULL},
					  {"listen", &a->listen, NULL},
					  {"log-level", level, NULL}};

	return csid_flags_parse("agent", flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
				csid_agent_usage);
}

static int csid_agent_load_config(struct csid_agent *a, struct config **out, struct err *e)
{
	struct config *cfg = NULL;
	int rc;

	if (a->config_path)
		rc = config_load(a->config_path, &cfg, e);
	else
		rc = (cfg = config_new()) ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	if (!rc)
		rc = config_override(cfg, a->data_dir, a->node_name, a->listen, e);
	if (!rc)
		rc = config_finalize(cfg, e);
	if (rc) {
		config_free(cfg);
		return rc;
	}
	*out = cfg;
	return 0;
}

/* ---- startup thread: recovery, then the API ---- */

static int csid_agent_recover(struct csid_agent_run *a)
{
	struct mounter_recovery rep = {0};
	struct err e;
	char q[600];
	int rc;

	err_clear(&e);
	rc = mounter_recover(a->mounter, node_plugins_lookup, node_plugins_release, &a->np, &rep,
			     &e);
	log_msg(rc && rc != CSID_EUNAVAIL ? LOG_ERROR : LOG_INFO,
		"msg=\"mount recovery\" adopted=%d rolled_back=%d finished=%d lost=%d pending=%d "
		"orphans=%d error=%s",
		rep.adopted, rep.rolled_back, rep.finished, rep.lost, rep.pending, rep.orphans,
		log_q(q, sizeof(q), rc ? e.msg : "-"));
	return rc;
}

static bool csid_agent_stopping(struct csid_agent_run *a)
{
	bool s;

	pthread_mutex_lock(&a->mu);
	s = a->stopping;
	pthread_mutex_unlock(&a->mu);
	return s;
}

/* The claim flow, with its client when servers are configured. */
static int csid_agent_claims_start(struct csid_agent_run *a, struct err *e)
{
	struct claims_http_config hc = {
	    .servers = (const char *const *)a->cfg->servers,
	    .nservers = a->cfg->nservers,
	    .token = a->cfg->server_token,
	    .instance_id = a->instance_id[0] ? a->instance_id : NULL,
	};
	struct claims_config cc = {
	    .node_name = a->cfg->node_name,
	    .mounter = a->mounter,
	    .lookup = node_plugins_lookup,
	    .release = node_plugins_release,
	    .lookup_ctx = &a->np,
	    .held = a->held,
	    .db_path = a->db_path,
	};
	int rc;

	if (a->cfg->nservers && (rc = claims_http_new(&hc, &a->servers, e)))
		return rc;
	cc.client = a->servers;
	return claims_new(&cc, &a->claims, e);
}

static void *csid_agent_startup_main(void *arg)
{
	struct csid_agent_run *a = arg;
	struct agent_api_config ac = {0};
	struct err e;
	int rc;

	err_clear(&e);
	rc = csid_agent_recover(a);
	/* Only now are the mount records what the node holds: the report starts. */
	held_allocs_attach(a->held, a->mounter);
	if (!csid_agent_stopping(a)) {
		ac.socket_path = a->cfg->listen_socket;
		ac.tcp_addr = a->cfg->listen_addr;
		ac.plugins = a->pm;
		ac.registry = a->registry;
		ac.mounter = a->mounter;
		ac.supervisor = a->sv;
		ac.node_name = a->cfg->node_name;
		ac.data_dir = a->cfg->data_dir;
		ac.plugin_wait_ms = a->cfg->health_timeout_ms;
		ac.server_token = a->cfg->server_token;
		http_limits_from_config(&a->cfg->http, &ac.limits);
		http_tls_from_config(&a->cfg->http, &ac.tls);
		ac.rpc_timeout_ms = a->cfg->rpc_timeout_ms;
		ac.held = a->held;
		a->startup_rc = csid_agent_claims_start(a, &e);
		ac.claims = a->claims;
		ac.docker = &a->cfg->docker;
		if (a->startup_rc == 0)
			a->startup_rc = agent_api_start(&ac, &a->api, &e);
		if (a->startup_rc) {
			char q[600];

			log_error("msg=\"agent api failed to start\" error=%s",
				  log_q(q, sizeof(q), e.msg));
		} else {
			log_info("msg=\"agent ready\" node=%s socket=%s", a->cfg->node_name,
				 a->cfg->listen_socket);
			sd_notify_state("READY=1\nSTATUS=serving the API, mounts recovered");
		}
	}
	pthread_mutex_lock(&a->mu);
	a->startup_done = true;
	pthread_mutex_unlock(&a->mu);
	uv_async_send(&a->wake);
	/* Records whose plugin was missing: retry until none is pending. */
	while (rc == CSID_EUNAVAIL) {
		int64_t until = clock_now_ms(clock_real()) + a->cfg->resync_period_ms;

		pthread_mutex_lock(&a->mu);
		while (!a->stopping && clock_now_ms(clock_real()) < until)
			clock_wait(clock_real(), &a->cond, &a->mu, until);
		pthread_mutex_unlock(&a->mu);
		if (csid_agent_stopping(a))
			break;
		rc = csid_agent_recover(a);
	}
	return NULL;
}

/* ---- shutdown and reload (loop thread) ---- */

static void csid_agent_close_cb(uv_handle_t *h)
{
}

static void csid_agent_sv_done(void *ctx)
{
	struct csid_agent_run *a = ctx;

	if (a->pm)
		plugin_manager_shutdown(a->pm);
	uv_close((uv_handle_t *)&a->wake, csid_agent_close_cb);
	log_info("msg=\"agent stopped\" mounts=kept");
	a->on_stopped(a->ctx, a->exit_code);
}

void csid_agent_run_stop(struct csid_agent_run *a)
{
	bool done;

	pthread_mutex_lock(&a->mu);
	a->stopping = true;
	done = a->startup_done;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->mu);
	/*
	 * The servers keep the node's last fingerprint, not the plugins
	 * stopping now: a restarting agent's node stays as it was, and one
	 * that does not come back goes down after the TTL.
	 */
	server_link_stop(a->link);
	/*
	 * Waits for plugins (the recovery's, a mount's) end at once: nothing
	 * new starts now. RPCs in flight finish within their deadlines.
	 */
	if (a->pm)
		plugin_manager_shutdown(a->pm);
	/* The startup thread wakes us when it is done; shut down then. */
	if (!done || a->shutdown_begun)
		return;
	a->shutdown_begun = true;
	if (a->startup_started)
		pthread_join(a->startup, NULL);
	a->startup_started = false;
	/* Requests waiting on the servers give up at once, so the API's stop does not wait. */
	claims_shutdown(a->claims);
	agent_api_stop(a->api);
	a->api = NULL;
	claims_free(a->claims);
	a->claims = NULL;
	claims_http_free(a->servers);
	a->servers = NULL;
	if (a->sv)
		supervisor_shutdown(a->sv, csid_agent_sv_done, a);
	else
		csid_agent_sv_done(a);
}

static void csid_agent_on_wake(uv_async_t *h)
{
	struct csid_agent_run *a = h->data;

	if (a->startup_rc && !csid_agent_stopping(a)) {
		a->exit_code = 1;
		log_error("msg=\"agent stopping after a failed start\"");
	}
	if (a->startup_rc || csid_agent_stopping(a))
		csid_agent_run_stop(a);
}

void csid_agent_run_reload(struct csid_agent_run *a, const struct config *cfg)
{
	struct err e;
	char q[600];

	err_clear(&e);
	if (csid_agent_stopping(a))
		return;
	if (strcmp(cfg->data_dir, a->cfg->data_dir) != 0)
		log_warn("msg=\"data_dir change needs a restart; ignored\"");
	log_info("msg=\"reloading plugins\" plugins=%zu", cfg->nplugins);
	/* Timings and listeners keep their start values; only the plugin list changes. */
	if (supervisor_apply(a->sv, cfg->plugins, cfg->nplugins, &e) != 0)
		log_error("msg=\"plugin reload failed\" error=%s", log_q(q, sizeof(q), e.msg));
}

/* ---- start ---- */

static void csid_agent_on_health(void *ctx, const struct instance_manager_status *old,
				 const struct instance_manager_status *cur)
{
	struct csid_agent_run *a = ctx;
	char q[600];

	/* Any change may change the node's fingerprint; the link sends it only if it did. */
	server_link_notify(a->link);

	/* Every failed retry too, so that the log shows the retry rate. */
	if (old->health.healthy == cur->health.healthy && old->state == cur->state &&
	    old->attempts == cur->attempts)
		return;
	log_info("msg=\"plugin health\" type=%s plugin=%s instance=%s state=%s healthy=%d "
		 "attempt=%u next_attempt_in_ms=%lld description=%s",
		 registry_type_name(cur->type), cur->name, cur->instance.instance_id,
		 instance_manager_state_name(cur->state), cur->health.healthy, cur->attempts,
		 (long long)cur->retry_delay_ms, log_q(q, sizeof(q), cur->health.description));
}

/*
 * The address the servers reach this agent's API at: its unix socket
 * ("unix:" + listener.socket) when every server is joined at a unix socket
 * (they are all on this host), else "http://" + the TCP listener, unless
 * it has none or listens on every interface (no one address to give).
 * Returns whether there is one, in buf.
 */
static bool csid_agent_address(const struct config *cfg, char *buf, size_t len)
{
	const char *listen = cfg->listen_addr;
	const char *colon = listen ? strrchr(listen, ':') : NULL;
	size_t host = colon ? (size_t)(colon - listen) : 0, local = 0;

	while (local < cfg->nservers && strncmp(cfg->servers[local], "unix:", 5) == 0)
		local++;
	if (local == cfg->nservers && cfg->listen_socket)
		return (size_t)snprintf(buf, len, "unix:%s", cfg->listen_socket) < len;
	if (!colon || host == 0 || (host == 7 && strncmp(listen, "0.0.0.0", 7) == 0) ||
	    (host == 4 && strncmp(listen, "[::]", 4) == 0))
		return false;
	return (size_t)snprintf(buf, len, "http://%s", listen) < len;
}

/* A mount or claim flow changed what the agent holds: the link rebuilds its report. */
static void csid_agent_held_changed(void *ctx)
{
	struct csid_agent_run *a = ctx;

	server_link_notify(a->link);
}

/* Joins the configured servers (before the plugin manager runs, which notifies the link). */
static int csid_agent_link(struct csid_agent_run *a, struct err *e)
{
	struct server_link_config lc = {0};
	struct model_node skeleton = {0};
	char address[300], tag[MODEL_INSTANCE_TAG_LEN + 1];
	int rc;

	if (!a->cfg->nservers) {
		log_info("msg=\"no servers configured: the agent runs alone\"");
		return 0;
	}
	if (csid_agent_address(a->cfg, address, sizeof(address)))
		skeleton.address = address;
	else if (a->cfg->listen_addr)
		log_warn("msg=\"listener.addr listens on every interface: the servers are not told "
			 "an address, so they cannot run controller RPCs through this agent\" "
			 "addr=%s",
			 a->cfg->listen_addr);
	/* Refuse at start a node name or address the servers would refuse every time. */
	skeleton.id = a->cfg->node_name;
	if ((rc = model_node_validate(&skeleton, e)) ||
	    (rc = server_link_instance_id(a->cfg->data_dir, a->instance_id, e)))
		return err_wrap(e, "servers");
	lc.servers = (const char *const *)a->cfg->servers;
	lc.nservers = a->cfg->nservers;
	lc.token = a->cfg->server_token;
	lc.node_name = a->cfg->node_name;
	lc.instance_id = a->instance_id;
	lc.address = skeleton.address;
	lc.pm = a->pm;
	lc.held = a->held;
	lc.timing.heartbeat_ms = a->cfg->heartbeat_ms;
	if ((rc = server_link_new(&lc, &a->link, e)) || (rc = server_link_start(a->link, e)))
		return rc;
	model_node_instance_tag(a->instance_id, tag);
	log_info("msg=\"joining servers\" servers=%zu first=%s node=%s instance_tag=%s "
		 "address=%s heartbeat_ms=%lld token=%s",
		 a->cfg->nservers, a->cfg->servers[0], a->cfg->node_name, tag,
		 skeleton.address ? skeleton.address : "-", (long long)a->cfg->heartbeat_ms,
		 a->cfg->server_token ? "set" : "none");
	return 0;
}

static int csid_agent_open(struct csid_agent_run *a, struct err *e)
{
	struct plugin_manager_config pc = {0};
	struct supervisor_config sc = {0};
	struct mounter_options mo = {0};
	int rc, n;

	if ((rc = mkdir_p(a->cfg->data_dir, e)))
		return rc;
	/* Before touching anything: a second agent on the same data_dir would fight the first. */
	snprintf(a->db_path, sizeof(a->db_path), "%s/agent.lock", a->cfg->data_dir);
	a->lock_fd = open(a->db_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (a->lock_fd < 0)
		return err_errno(e, errno, "open %s", a->db_path);
	if (flock(a->lock_fd, LOCK_EX | LOCK_NB) != 0)
		return err_set(e, CSID_EEXIST, "data_dir %s: another agent is running on it",
			       a->cfg->data_dir);
	snprintf(a->db_path, sizeof(a->db_path), "%s/agent.db", a->cfg->data_dir);
	if ((rc = agent_db_open(a->db_path, &a->db, e)) ||
	    (rc = registry_new(clock_real(), a->db, &a->registry, e)))
		return rc;
	n = registry_restore(a->registry, e);
	if (n < 0)
		return n;
	sc.loop = a->loop;
	sc.data_dir = a->cfg->data_dir;
	sc.node_name = a->cfg->node_name;
	sc.registry = a->registry;
	sc.socket_timeout_ms = a->cfg->socket_timeout_ms;
	sc.health_timeout_ms = a->cfg->health_timeout_ms;
	sc.probe_interval_ms = a->cfg->probe_interval_ms;
	sc.unhealthy_threshold_ms = a->cfg->unhealthy_threshold_ms;
	sc.backoff_base_ms = a->cfg->backoff_base_ms;
	sc.backoff_max_ms = a->cfg->backoff_max_ms;
	sc.reconnect_max_ms = a->cfg->reconnect_max_ms;
	sc.stop_grace_ms = a->cfg->stop_grace_ms;
	sc.log_max_bytes = a->cfg->plugin_log_max_bytes;
	if ((rc = supervisor_new(&sc, &a->sv, e)))
		return rc;
	log_info("msg=\"registry restored\" instances=%d stale_plugins_killed=%d", n,
		 supervisor_cleanup_stale(a->sv));
	n = registry_prune(a->registry, plugin_manager_probe_grpc, NULL, e);
	if (n < 0)
		return n;
	if (n > 0)
		log_info("msg=\"dead restored plugin instances dropped\" count=%d", n);
	pc.registry = a->registry;
	pc.on_health = csid_agent_on_health;
	pc.resync_ms = a->cfg->resync_period_ms;
	pc.probe_interval_ms = a->cfg->probe_interval_ms;
	pc.rpc_timeout_ms = a->cfg->rpc_timeout_ms;
	pc.retry_max_ms = a->cfg->reconnect_max_ms;
	pc.on_health_ctx = a;
	if ((rc = plugin_manager_new(&pc, &a->pm, e)) ||
	    (rc = held_allocs_new(csid_agent_held_changed, a, &a->held, e)) ||
	    (rc = csid_agent_link(a, e)) || (rc = plugin_manager_start(a->pm, e)))
		return rc;
	mo.rpc_timeout_ms = a->cfg->rpc_timeout_ms;
	if ((rc = mounter_open(a->cfg->data_dir, a->db_path, &mo, &a->mounter, e)))
		return rc;
	/* The plugins recovery and the claim flow mount through. */
	a->np.plugins = a->pm;
	a->np.registry = a->registry;
	a->np.supervisor = a->sv;
	a->np.wait_ms = a->cfg->health_timeout_ms;
	return supervisor_apply(a->sv, a->cfg->plugins, a->cfg->nplugins, e);
}

struct csid_agent_run *csid_agent_run_new(uv_loop_t *loop, struct config *cfg,
					  csid_agent_stopped_fn on_stopped, void *ctx)
{
	struct csid_agent_run *a = calloc(1, sizeof(*a));

	if (!a) {
		config_free(cfg);
		return NULL;
	}
	a->loop = loop;
	a->cfg = cfg;
	a->on_stopped = on_stopped;
	a->ctx = ctx;
	a->lock_fd = -1;
	/* Until start there is no startup thread to wait for: a stop stops at once. */
	a->startup_done = true;
	pthread_mutex_init(&a->mu, NULL);
	clock_cond_init(&a->cond);
	uv_async_init(loop, &a->wake, csid_agent_on_wake);
	a->wake.data = a;
	return a;
}

const struct config *csid_agent_run_config(const struct csid_agent_run *a)
{
	return a->cfg;
}

int csid_agent_run_start(struct csid_agent_run *a, struct err *e)
{
	int rc;

	log_info("msg=\"agent starting\" version=%s node=%s data_dir=%s plugins=%zu", CSID_VERSION,
		 a->cfg->node_name, a->cfg->data_dir, a->cfg->nplugins);
	rc = csid_agent_open(a, e);
	if (!rc) {
		pthread_mutex_lock(&a->mu);
		a->startup_done = false;
		pthread_mutex_unlock(&a->mu);
		if (pthread_create(&a->startup, NULL, csid_agent_startup_main, a) != 0)
			rc = err_set(e, CSID_ENOMEM, "cannot start the startup thread");
	}
	if (!rc) {
		a->startup_started = true;
		return 0;
	}
	a->exit_code = 1;
	pthread_mutex_lock(&a->mu);
	a->startup_done = true;
	pthread_mutex_unlock(&a->mu);
	csid_agent_run_stop(a);
	return rc;
}

void csid_agent_run_free(struct csid_agent_run *a)
{
	if (!a)
		return;
	if (a->startup_started)
		pthread_join(a->startup, NULL);
	claims_shutdown(a->claims);
	agent_api_stop(a->api);
	claims_free(a->claims);
	claims_http_free(a->servers);
	/* No health callback (which notifies the link) runs after the shutdown. */
	server_link_stop(a->link);
	if (a->pm)
		plugin_manager_shutdown(a->pm);
	server_link_free(a->link);
	held_allocs_free(a->held);
	plugin_manager_free(a->pm);
	mounter_close(a->mounter);
	supervisor_free(a->sv);
	registry_free(a->registry);
	agent_db_close(a->db);
	config_free(a->cfg);
	if (a->lock_fd >= 0)
		close(a->lock_fd);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cond);
	free(a);
}

/* ---- `csid agent` ---- */

static void csid_agent_on_stopped(void *ctx, int exit_code)
{
	struct csid_agent *m = ctx;

	m->exit_code = exit_code;
	uv_close((uv_handle_t *)&m->sig_term, csid_agent_close_cb);
	uv_close((uv_handle_t *)&m->sig_int, csid_agent_close_cb);
	uv_close((uv_handle_t *)&m->sig_hup, csid_agent_close_cb);
}

static void csid_agent_reload(struct csid_agent *m)
{
	struct config *cfg = NULL;
	struct err e;
	char q[600];

	err_clear(&e);
	if (!m->config_path) {
		log_warn("msg=\"SIGHUP ignored: no config file to reload\"");
		return;
	}
	if (csid_agent_load_config(m, &cfg, &e) != 0) {
		log_error("msg=\"config reload failed, keeping the current plugins\" error=%s",
			  log_q(q, sizeof(q), e.msg));
		return;
	}
	csid_agent_run_reload(m->run, cfg);
	config_free(cfg);
}

static void csid_agent_on_signal(uv_signal_t *h, int signo)
{
	struct csid_agent *m = h->data;

	if (signo == SIGHUP) {
		log_info("msg=\"SIGHUP received\"");
		csid_agent_reload(m);
		return;
	}
	log_info("msg=\"shutting down\" signal=%d", signo);
	sd_notify_state("STOPPING=1");
	csid_agent_run_stop(m->run);
}

static void csid_agent_init_signals(struct csid_agent *m)
{
	uv_signal_t *sigs[] = {&m->sig_term, &m->sig_int, &m->sig_hup};
	int signos[] = {SIGTERM, SIGINT, SIGHUP};

	for (int i = 0; i < 3; i++) {
		uv_signal_init(&m->loop, sigs[i]);
		sigs[i]->data = m;
		uv_signal_start(sigs[i], csid_agent_on_signal, signos[i]);
	}
}

int csid_agent_main(int argc, char **argv)
{
	struct csid_agent m;
	struct config *cfg = NULL;
	const char *level = NULL;
	struct err e;
	char q[600];
	int rc;

	memset(&m, 0, sizeof(m));
	err_clear(&e);
	rc = csid_agent_flags(&m, argc, argv, &level);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (level) {
		if (log_level_parse(level) < 0) {
			fprintf(stderr,
				"csid agent: -log-level: expected debug, info, warn or error\n");
			return 2;
		}
		log_set_level((enum log_level)log_level_parse(level));
	}
	if (csid_agent_load_config(&m, &cfg, &e) != 0 ||
	    csid_flags_client_tls(&cfg->http, &e) != 0) {
		log_error("msg=\"bad configuration\" error=%s", log_q(q, sizeof(q), e.msg));
		config_free(cfg);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Before any thread: libcurl's global setup is not thread-safe. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	uv_loop_init(&m.loop);
	m.run = csid_agent_run_new(&m.loop, cfg, csid_agent_on_stopped, &m);
	if (!m.run) {
		log_error("msg=\"agent failed to start\" error=\"out of memory\"");
		m.exit_code = 1;
	} else {
		csid_agent_init_signals(&m);
		if (csid_agent_run_start(m.run, &e) != 0)
			log_error("msg=\"agent failed to start\" error=%s",
				  log_q(q, sizeof(q), e.msg));
		uv_run(&m.loop, UV_RUN_DEFAULT);
	}
	uv_loop_close(&m.loop);
	csid_agent_run_free(m.run);
	/* Join libuv's pool threads (their gRPC queues go with them) before gRPC stops. */
	uv_library_shutdown();
	csi_grpc_shutdown();
	curl_global_cleanup();
	return m.exit_code;
}
