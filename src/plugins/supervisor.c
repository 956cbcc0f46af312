/*
 * Plugin supervisor core: the lifecycle of plugin instances on the libuv
 * loop (start, wait for the socket, probe until healthy, register,
 * heartbeat, restart with backoff, replace on update, stop). Processes,
 * logs and directories are in supervisor_proc.c. See supervisor.h for the
 * behaviour and supervisor_int.h for the data model.
 *
 * Every callback of the loop ends with supervisor_publish(), which copies
 * the state into the status array that supervisor_snapshot() hands to
 * other threads under a mutex.
 */
#include "plugins/supervisor_int.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csi/csi_client.h"
#include "util/clock.h"
#include "util/log.h"

/* Socket polling while an instance starts (ms). */
#define SUPERVISOR_SOCKET_POLL_MS 5
#define SUPERVISOR_EXTERNAL_POLL_MS 200
/* First retry of a failing startup probe; doubles up to the cap. */
#define SUPERVISOR_PROBE_RETRY_MS 20
#define SUPERVISOR_PROBE_RETRY_MAX_MS 1000
/* Deadline of each startup/heartbeat RPC. */
#define SUPERVISOR_RPC_TIMEOUT_MS 5000

static void supervisor_start_instance(struct supervisor_plugin *p);
static void supervisor_stop_instance(struct supervisor_instance *inst, const char *why);
static void supervisor_maybe_free_instance(struct supervisor_instance *inst);
static void supervisor_check_done(struct supervisor *sv);
static void supervisor_restart_cb(uv_timer_t *t);

static const char *const supervisor_event_names[] = {
    "started", "registered", "healthy",  "unhealthy", "failed",
    "exited",  "restarting", "stopping", "stopped",
};

const char *supervisor_event_name(enum supervisor_event_kind k)
{
	if ((unsigned)k >= sizeof(supervisor_event_names) / sizeof(supervisor_event_names[0]))
		return "unknown";
	return supervisor_event_names[k];
}

int64_t supervisor_backoff_ms(unsigned attempt, int64_t base_ms, int64_t max_ms, uint64_t rnd)
{
	int64_t d = base_ms > 0 ? base_ms : 1;
	int64_t quarter;

	if (max_ms < d)
		max_ms = d;
	for (unsigned i = 0; i < attempt && d < max_ms; i++)
		d = d > max_ms / 2 ? max_ms : d * 2;
	if (d > max_ms)
		d = max_ms;
	quarter = d / 4;
	return d - quarter + (int64_t)(rnd % (uint64_t)(quarter + 1));
}

/* ---- events and status ---- */

static void supervisor_emit(struct supervisor *sv, enum supervisor_event_kind kind,
			    const char *plugin_id, const char *instance_id, const char *message,
			    int64_t delay_ms)
{
	struct supervisor_event ev = {kind, plugin_id, instance_id, message ? message : "",
				      delay_ms};
	char q[300];
	enum log_level level = LOG_INFO;

	if (kind == SUPERVISOR_EVENT_UNHEALTHY || kind == SUPERVISOR_EVENT_FAILED ||
	    kind == SUPERVISOR_EVENT_EXITED)
		level = LOG_WARN;
	log_msg(level, "msg=\"plugin %s\" plugin=%s instance=%s delay_ms=%lld reason=%s",
		supervisor_event_name(kind), plugin_id, instance_id, (long long)delay_ms,
		log_q(q, sizeof(q), ev.message[0] ? ev.message : "-"));
	if (sv->cfg.on_event)
		sv->cfg.on_event(sv->cfg.on_event_ctx, &ev);
}

static const char *supervisor_state_name(const struct supervisor_plugin *p)
{
	if (!p->cur)
		return p->restart_pending ? "backoff" : "stopped";
	switch (p->cur->state) {
	case SUPERVISOR_STARTING:
		return "starting";
	case SUPERVISOR_PROBING:
		return "probing";
	case SUPERVISOR_RUNNING:
		return "running";
	case SUPERVISOR_STOPPING:
		return "stopping";
	}
	return "unknown";
}

static void supervisor_publish(struct supervisor *sv)
{
	struct supervisor_status *st;
	size_t n = 0, i = 0;

	for (struct supervisor_plugin *p = sv->plugins; p; p = p->next)
		n++;
	st = calloc(n ? n : 1, sizeof(*st));
	if (!st)
		return;
	for (struct supervisor_plugin *p = sv->plugins; p; p = p->next, i++) {
		struct supervisor_status *s = &st[i];
		struct supervisor_instance *inst = p->cur;

		/* During an update, report the instance that serves. */
		if (p->old && (!inst || !inst->registered))
			inst = p->old;
		snprintf(s->id, sizeof(s->id), "%s", p->def.id);
		s->type = p->def.type;
		s->external = p->def.socket != NULL;
		s->state = supervisor_state_name(p);
		s->restarts = p->restarts;
		s->attempt = p->attempt;
		s->next_restart_ms = p->restart_pending ? p->next_restart_ms : 0;
		snprintf(s->message, sizeof(s->message), "%s", p->message);
		if (inst) {
			snprintf(s->instance_id, sizeof(s->instance_id), "%s", inst->id);
			s->pid = inst->proc_running ? inst->pid : 0;
			s->healthy = inst->healthy;
			s->registered = inst->registered;
			snprintf(s->endpoint, sizeof(s->endpoint), "%s", inst->endpoint);
		}
	}
	pthread_mutex_lock(&sv->mu);
	free(sv->status);
	sv->status = st;
	sv->nstatus = n;
	pthread_mutex_unlock(&sv->mu);
}

int supervisor_snapshot(struct supervisor *sv, struct supervisor_status **out, size_t *n)
{
	int rc = 0;

	pthread_mutex_lock(&sv->mu);
	*n = sv->nstatus;
	*out = calloc(sv->nstatus ? sv->nstatus : 1, sizeof(**out));
	if (*out)
		memcpy(*out, sv->status, sv->nstatus * sizeof(**out));
	else
		rc = CSID_ENOMEM;
	pthread_mutex_unlock(&sv->mu);
	return rc;
}

/* ---- registration ---- */

static int supervisor_register(struct supervisor_instance *inst, struct err *e)
{
	struct supervisor *sv = inst->sv;

	switch (inst->def.type) {
	case CONFIG_PLUGIN_MONOLITH:
		return registry_register_monolith(sv->cfg.registry, inst->def.id, inst->id,
						  inst->endpoint, e);
	case CONFIG_PLUGIN_CONTROLLER:
		return registry_register(sv->cfg.registry, REGISTRY_CONTROLLER, inst->def.id,
					 inst->id, inst->endpoint, e);
	case CONFIG_PLUGIN_NODE:
		return registry_register(sv->cfg.registry, REGISTRY_NODE, inst->def.id, inst->id,
					 inst->endpoint, e);
	}
	return err_set(e, CSID_EINVAL, "unknown plugin type");
}

void supervisor_deregister(struct supervisor *sv, const char *id, enum config_plugin_type type,
			   const char *instance_id)
{
	struct err e;
	int rc;

	err_clear(&e);
	if (type == CONFIG_PLUGIN_MONOLITH)
		rc = registry_deregister_monolith(sv->cfg.registry, id, instance_id, &e);
	else
		rc = registry_deregister(sv->cfg.registry,
					 type == CONFIG_PLUGIN_NODE ? REGISTRY_NODE
								    : REGISTRY_CONTROLLER,
					 id, instance_id, &e);
	if (rc && rc != CSID_ENOTFOUND) {
		char q[300];

		log_error("msg=\"plugin deregistration failed\" plugin=%s instance=%s error=%s", id,
			  instance_id, log_q(q, sizeof(q), e.msg));
	}
}

/* ---- probing ---- */

static void supervisor_probe_work(uv_work_t *w)
{
	struct supervisor_instance *inst = w->data;
	struct supervisor *sv = inst->sv;
	struct csi_status st = {0};
	struct err e;
	int rc;

	err_clear(&e);
	inst->probe_msg[0] = '\0';
	if (!inst->client) {
		if (sv->cfg.connect)
			rc =
			    sv->cfg.connect(sv->cfg.connect_ctx, inst->endpoint, &inst->client, &e);
		else
			rc = csi_client_grpc_new(inst->endpoint, &inst->client, &e);
		if (rc) {
			inst->probe_rc = rc;
			snprintf(inst->probe_msg, sizeof(inst->probe_msg), "connect: %s", e.msg);
			return;
		}
	}
	if (!inst->info_done) {
		Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
		Csi__V1__GetPluginInfoResponse *resp = NULL;

		rc = csi_get_plugin_info(inst->client, &req, &resp, SUPERVISOR_RPC_TIMEOUT_MS, &st);
		if (rc) {
			inst->probe_rc = rc;
			snprintf(inst->probe_msg, sizeof(inst->probe_msg), "GetPluginInfo: %s: %s",
				 csi_code_name(st.code), st.message);
			return;
		}
		if (!resp->name || !resp->name[0]) {
			csi_msg_free(&resp->base);
			inst->probe_rc = CSID_EPROTO;
			snprintf(inst->probe_msg, sizeof(inst->probe_msg),
				 "GetPluginInfo: empty plugin name");
			return;
		}
		csi_msg_free(&resp->base);
		inst->info_done = true;
	}
	{
		Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
		Csi__V1__ProbeResponse *resp = NULL;

		rc = csi_probe(inst->client, &req, &resp, SUPERVISOR_RPC_TIMEOUT_MS, &st);
		if (rc) {
			inst->probe_rc = rc;
			snprintf(inst->probe_msg, sizeof(inst->probe_msg), "Probe: %s: %s",
				 csi_code_name(st.code), st.message);
			return;
		}
		/* CSI: an unset `ready` means ready. */
		inst->probe_rc = (resp->ready && !resp->ready->value) ? CSID_EUNAVAIL : 0;
		if (inst->probe_rc)
			snprintf(inst->probe_msg, sizeof(inst->probe_msg), "Probe: not ready");
		csi_msg_free(&resp->base);
	}
}

static void supervisor_after_probe(uv_work_t *w, int status);

static void supervisor_queue_probe(struct supervisor_instance *inst)
{
	if (inst->work_busy || inst->closing)
		return;
	inst->work.data = inst;
	if (uv_queue_work(inst->sv->cfg.loop, &inst->work, supervisor_probe_work,
			  supervisor_after_probe) == 0)
		inst->work_busy = true;
}

static void supervisor_arm(struct supervisor_instance *inst, int64_t delay_ms);

/* A healthy run of at least the backoff cap earns a fresh backoff sequence. */
static void supervisor_note_run(struct supervisor_instance *inst, int64_t now)
{
	if (inst->plugin && inst->healthy_since_ms &&
	    now - inst->healthy_since_ms >= inst->sv->cfg.backoff_max_ms)
		inst->plugin->attempt = 0;
}

/* The current instance failed: stop it and schedule a new one after a backoff. */
static void supervisor_fail(struct supervisor_instance *inst, enum supervisor_event_kind kind,
			    const char *why)
{
	struct supervisor_plugin *p = inst->plugin;
	struct supervisor *sv = inst->sv;
	int64_t now = (int64_t)uv_now(sv->cfg.loop);
	int64_t delay;

	if (!p)
		return;
	snprintf(p->message, sizeof(p->message), "%s", why);
	supervisor_emit(sv, kind, p->def.id, inst->id, why, 0);
	if (p->old == inst) {
		/* An instance being replaced died: the new one carries on. */
		p->old = NULL;
		supervisor_stop_instance(inst, why);
		return;
	}
	supervisor_note_run(inst, now);
	p->cur = NULL;
	supervisor_stop_instance(inst, why);
	if (sv->shutting_down || p->removed)
		return;
	delay = supervisor_backoff_ms(p->attempt, sv->cfg.backoff_base_ms, sv->cfg.backoff_max_ms,
				      supervisor_rand(sv));
	p->attempt++;
	p->restart_pending = true;
	p->next_restart_ms = clock_wall_ms(clock_real()) + delay;
	supervisor_emit(sv, SUPERVISOR_EVENT_RESTARTING, p->def.id, inst->id, why, delay);
	uv_timer_start(&p->restart_timer, supervisor_restart_cb, (uint64_t)delay, 0);
}

static void supervisor_restart_cb(uv_timer_t *t)
{
	struct supervisor_plugin *p = t->data;

	p->restart_pending = false;
	p->next_restart_ms = 0;
	if (!p->sv->shutting_down && !p->removed && !p->cur) {
		p->restarts++;
		supervisor_start_instance(p);
	}
	supervisor_publish(p->sv);
}

/* The instance is registered and healthy: it is active, so an instance it replaces can go. */
static void supervisor_became_active(struct supervisor_instance *inst)
{
	struct supervisor_plugin *p = inst->plugin;

	if (p && p->cur == inst && p->old) {
		struct supervisor_instance *old = p->old;
		char why[96];

		p->old = NULL;
		snprintf(why, sizeof(why), "replaced by instance %s", inst->id);
		supervisor_stop_instance(old, why);
	}
}

static void supervisor_on_probe_result(struct supervisor_instance *inst)
{
	struct supervisor *sv = inst->sv;
	struct supervisor_plugin *p = inst->plugin;
	int64_t now = (int64_t)uv_now(sv->cfg.loop);
	bool ok = inst->probe_rc == 0;
	struct err e;

	err_clear(&e);
	if (inst->state == SUPERVISOR_PROBING) {
		if (ok && supervisor_register(inst, &e) != 0) {
			ok = false;
			snprintf(inst->probe_msg, sizeof(inst->probe_msg), "register: %s", e.msg);
		}
		if (ok) {
			inst->registered = true;
			inst->healthy = true;
			inst->healthy_since_ms = now;
			inst->state = SUPERVISOR_RUNNING;
			p->message[0] = '\0';
			supervisor_emit(sv, SUPERVISOR_EVENT_REGISTERED, inst->def.id, inst->id,
					inst->endpoint, 0);
			supervisor_became_active(inst);
			supervisor_arm(inst, sv->cfg.probe_interval_ms);
			return;
		}
		snprintf(p->message, sizeof(p->message), "%s", inst->probe_msg);
		if (now >= inst->deadline_ms && !inst->external) {
			char why[400];

			snprintf(why, sizeof(why), "not healthy within %lldms: %s",
				 (long long)sv->cfg.health_timeout_ms, inst->probe_msg);
			supervisor_fail(inst, SUPERVISOR_EVENT_FAILED, why);
			return;
		}
		if (now >= inst->deadline_ms && !inst->fail_reported) {
			inst->fail_reported = true;
			supervisor_emit(sv, SUPERVISOR_EVENT_UNHEALTHY, inst->def.id, inst->id,
					inst->probe_msg, 0);
		}
		if (now >= inst->deadline_ms) {
			/* Down for good (external): back off further, log each retry. */
			char q[600];

			inst->retry_ms = supervisor_backoff_ms(
			    inst->probe_attempts++, SUPERVISOR_PROBE_RETRY_MAX_MS,
			    sv->cfg.reconnect_max_ms, supervisor_rand(sv));
			log_info("msg=\"plugin still down\" plugin=%s instance=%s attempt=%u "
				 "next_attempt_in_ms=%lld error=%s",
				 inst->def.id, inst->id, inst->probe_attempts,
				 (long long)inst->retry_ms, log_q(q, sizeof(q), inst->probe_msg));
		}
		supervisor_arm(inst, inst->retry_ms);
		inst->retry_ms *= 2;
		if (inst->retry_ms > SUPERVISOR_PROBE_RETRY_MAX_MS)
			inst->retry_ms = SUPERVISOR_PROBE_RETRY_MAX_MS;
		return;
	}
	/* RUNNING: the heartbeat. */
	if (ok && !inst->healthy) {
		inst->healthy = true;
		inst->healthy_since_ms = now;
		inst->unhealthy_since_ms = 0;
		p->message[0] = '\0';
		supervisor_emit(sv, SUPERVISOR_EVENT_HEALTHY, inst->def.id, inst->id, "", 0);
		supervisor_became_active(inst);
	} else if (!ok) {
		snprintf(p->message, sizeof(p->message), "%s", inst->probe_msg);
		if (inst->healthy) {
			supervisor_note_run(inst, now);
			inst->healthy = false;
			inst->healthy_since_ms = 0;
			inst->unhealthy_since_ms = now;
			supervisor_emit(sv, SUPERVISOR_EVENT_UNHEALTHY, inst->def.id, inst->id,
					inst->probe_msg, 0);
		}
		if (!inst->external &&
		    now - inst->unhealthy_since_ms >= sv->cfg.unhealthy_threshold_ms) {
			char why[400];

			snprintf(why, sizeof(why), "unhealthy for %lldms: %s",
				 (long long)(now - inst->unhealthy_since_ms), inst->probe_msg);
			supervisor_fail(inst, SUPERVISOR_EVENT_FAILED, why);
			return;
		}
	}
	supervisor_arm(inst, sv->cfg.probe_interval_ms);
}

static void supervisor_after_probe(uv_work_t *w, int status)
{
	struct supervisor_instance *inst = w->data;
	struct supervisor *sv = inst->sv;

	inst->work_busy = false;
	if (inst->closing || !inst->plugin || inst->state == SUPERVISOR_STOPPING) {
		supervisor_maybe_free_instance(inst);
	} else {
		if (status != 0) {
			inst->probe_rc = CSID_ECANCELED;
			snprintf(inst->probe_msg, sizeof(inst->probe_msg), "probe canceled");
		}
		supervisor_on_probe_result(inst);
	}
	supervisor_publish(sv);
}

static bool supervisor_socket_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static void supervisor_on_timer(uv_timer_t *t)
{
	struct supervisor_instance *inst = t->data;
	struct supervisor *sv = inst->sv;
	int64_t now = (int64_t)uv_now(sv->cfg.loop);

	switch (inst->state) {
	case SUPERVISOR_STARTING:
		if (supervisor_socket_exists(inst->sock)) {
			inst->state = SUPERVISOR_PROBING;
			inst->deadline_ms = now + sv->cfg.health_timeout_ms;
			inst->retry_ms = SUPERVISOR_PROBE_RETRY_MS;
			inst->probe_attempts = 0;
			supervisor_queue_probe(inst);
		} else if (!inst->external && now >= inst->deadline_ms) {
			char why[200];

			snprintf(why, sizeof(why), "socket did not appear within %lldms",
				 (long long)sv->cfg.socket_timeout_ms);
			supervisor_fail(inst, SUPERVISOR_EVENT_FAILED, why);
		} else {
			supervisor_arm(inst, inst->external ? SUPERVISOR_EXTERNAL_POLL_MS
							    : SUPERVISOR_SOCKET_POLL_MS);
		}
		break;
	case SUPERVISOR_PROBING:
	case SUPERVISOR_RUNNING:
		supervisor_queue_probe(inst);
		break;
	case SUPERVISOR_STOPPING:
		if (inst->proc_running) {
			log_warn(
			    "msg=\"plugin did not stop in time, killing\" plugin=%s instance=%s "
			    "pid=%d",
			    inst->def.id, inst->id, inst->pid);
			kill(-inst->pid, SIGKILL);
			kill(inst->pid, SIGKILL);
		}
		break;
	}
	supervisor_publish(sv);
}

static void supervisor_arm(struct supervisor_instance *inst, int64_t delay_ms)
{
	if (inst->closing)
		return;
	uv_timer_start(&inst->timer, supervisor_on_timer, (uint64_t)(delay_ms > 0 ? delay_ms : 0),
		       0);
}

static void supervisor_on_exit(uv_process_t *proc, int64_t status, int signo)
{
	struct supervisor_instance *inst = proc->data;
	struct supervisor *sv = inst->sv;
	char why[128];

	inst->proc_running = false;
	if (signo)
		snprintf(why, sizeof(why), "exited on signal %d", signo);
	else
		snprintf(why, sizeof(why), "exited with status %lld", (long long)status);
	if (inst->plugin && inst->state != SUPERVISOR_STOPPING) {
		supervisor_fail(inst, SUPERVISOR_EVENT_EXITED, why);
	} else {
		log_info("msg=\"plugin process ended\" plugin=%s instance=%s reason=\"%s\"",
			 inst->def.id, inst->id, why);
		supervisor_maybe_free_instance(inst);
	}
	supervisor_publish(sv);
}

static void supervisor_instance_free(struct supervisor_instance *inst)
{
	struct supervisor *sv = inst->sv;
	struct supervisor_instance **pp;

	for (pp = &sv->dying; *pp; pp = &(*pp)->next) {
		if (*pp == inst) {
			*pp = inst->next;
			break;
		}
	}
	supervisor_proc_forget(inst);
	supervisor_emit(sv, SUPERVISOR_EVENT_STOPPED, inst->def.id, inst->id, "", 0);
	csi_client_free(inst->client);
	config_plugin_clear(&inst->def);
	free(inst);
	supervisor_check_done(sv);
}

static void supervisor_on_close(uv_handle_t *h)
{
	struct supervisor_instance *inst = h->data;

	inst->open_handles--;
	if (inst->open_handles == 0 && !inst->work_busy)
		supervisor_instance_free(inst);
}

void supervisor_close_handle(struct supervisor_instance *inst, uv_handle_t *h)
{
	if (!uv_is_closing(h)) {
		h->data = inst;
		uv_close(h, supervisor_on_close);
	}
}

/*
 * Once a detached instance has no process, closes its handles; the last
 * close (or the end of a probe in flight) frees it.
 */
static void supervisor_maybe_free_instance(struct supervisor_instance *inst)
{
	if (inst->plugin || inst->proc_running)
		return;
	if (!inst->closing) {
		inst->closing = true;
		uv_timer_stop(&inst->timer);
		supervisor_close_handle(inst, (uv_handle_t *)&inst->timer);
		if (inst->proc_init)
			supervisor_close_handle(inst, (uv_handle_t *)&inst->proc);
		for (int i = 0; i < 2; i++)
			if (inst->pipe_open[i])
				supervisor_close_handle(inst, (uv_handle_t *)&inst->pipes[i]);
	}
	if (inst->open_handles == 0 && !inst->work_busy)
		supervisor_instance_free(inst);
}

/* Detaches inst from its plugin, deregisters it and stops its process. */
static void supervisor_stop_instance(struct supervisor_instance *inst, const char *why)
{
	struct supervisor *sv = inst->sv;

	if (inst->plugin) {
		if (inst->plugin->cur == inst)
			inst->plugin->cur = NULL;
		if (inst->plugin->old == inst)
			inst->plugin->old = NULL;
		inst->plugin = NULL;
	}
	inst->next = sv->dying;
	sv->dying = inst;
	if (inst->registered) {
		supervisor_deregister(sv, inst->def.id, inst->def.type, inst->id);
		inst->registered = false;
	}
	inst->healthy = false;
	inst->state = SUPERVISOR_STOPPING;
	supervisor_emit(sv, SUPERVISOR_EVENT_STOPPING, inst->def.id, inst->id, why, 0);
	if (inst->proc_running) {
		kill(-inst->pid, SIGTERM);
		kill(inst->pid, SIGTERM);
		uv_timer_start(&inst->timer, supervisor_on_timer, (uint64_t)sv->cfg.stop_grace_ms,
			       0);
	}
	supervisor_maybe_free_instance(inst);
}

static void supervisor_start_instance(struct supervisor_plugin *p)
{
	struct supervisor *sv = p->sv;
	struct supervisor_instance *inst;
	struct err e;
	int rc;

	err_clear(&e);
	inst = calloc(1, sizeof(*inst));
	if (!inst || config_plugin_copy(&inst->def, &p->def) != 0) {
		free(inst);
		log_error("msg=\"plugin start failed\" plugin=%s error=\"out of memory\"",
			  p->def.id);
		return;
	}
	inst->sv = sv;
	inst->plugin = p;
	inst->log_fd = -1;
	inst->external = p->def.socket != NULL;
	supervisor_proc_instance_id(inst);
	uv_timer_init(sv->cfg.loop, &inst->timer);
	inst->timer.data = inst;
	inst->open_handles = 1;
	p->cur = inst;
	inst->state = SUPERVISOR_STARTING;
	rc = supervisor_proc_prepare(inst, &e);
	if (!rc && !inst->external)
		rc = supervisor_proc_spawn(inst, supervisor_on_exit, &e);
	if (rc) {
		supervisor_fail(inst, SUPERVISOR_EVENT_FAILED, e.msg);
		return;
	}
	inst->deadline_ms = (int64_t)uv_now(sv->cfg.loop) + sv->cfg.socket_timeout_ms;
	supervisor_emit(sv, SUPERVISOR_EVENT_STARTED, p->def.id, inst->id, inst->endpoint, 0);
	supervisor_arm(inst, 0);
}

/* ---- plugins ---- */

static void supervisor_plugin_timer_closed(uv_handle_t *h)
{
	struct supervisor_plugin *p = h->data;
	struct supervisor *sv = p->sv;

	config_plugin_clear(&p->def);
	free(p);
	supervisor_check_done(sv);
}

static void supervisor_remove_plugin(struct supervisor_plugin *p, const char *why)
{
	struct supervisor *sv = p->sv;
	struct supervisor_plugin **pp;

	for (pp = &sv->plugins; *pp; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	p->removed = true;
	p->restart_pending = false;
	uv_timer_stop(&p->restart_timer);
	if (p->cur)
		supervisor_stop_instance(p->cur, why);
	if (p->old)
		supervisor_stop_instance(p->old, why);
	uv_close((uv_handle_t *)&p->restart_timer, supervisor_plugin_timer_closed);
}

static void supervisor_update_plugin(struct supervisor_plugin *p, const struct config_plugin *def)
{
	struct config_plugin copy;

	if (config_plugin_copy(&copy, def) != 0) {
		log_error("msg=\"plugin update failed\" plugin=%s error=\"out of memory\"",
			  def->id);
		return;
	}
	config_plugin_clear(&p->def);
	p->def = copy;
	log_info("msg=\"plugin definition changed\" plugin=%s", def->id);
	if (p->cur && p->cur->registered && !p->old) {
		/* Keep it serving until the new instance is active. */
		p->old = p->cur;
		p->cur = NULL;
	} else if (p->cur) {
		supervisor_stop_instance(p->cur, "definition changed before it became active");
	}
	p->restart_pending = false;
	uv_timer_stop(&p->restart_timer);
	p->attempt = 0;
	p->restarts++;
	supervisor_start_instance(p);
}

int supervisor_apply(struct supervisor *sv, const struct config_plugin *plugins, size_t n,
		     struct err *e)
{
	struct supervisor_plugin *p, *next;

	if (sv->shutting_down)
		return err_set(e, CSID_EPRECOND, "supervisor: shutting down");
	for (p = sv->plugins; p; p = next) {
		bool keep = false;

		next = p->next;
		for (size_t i = 0; i < n; i++)
			if (strcmp(plugins[i].id, p->def.id) == 0)
				keep = true;
		if (!keep) {
			log_info("msg=\"plugin removed from config\" plugin=%s", p->def.id);
			supervisor_remove_plugin(p, "removed from config");
		}
	}
	for (size_t i = 0; i < n; i++) {
		for (p = sv->plugins; p; p = p->next)
			if (strcmp(plugins[i].id, p->def.id) == 0)
				break;
		if (p) {
			if (!config_plugin_equal(&p->def, &plugins[i]))
				supervisor_update_plugin(p, &plugins[i]);
			continue;
		}
		p = calloc(1, sizeof(*p));
		if (!p || config_plugin_copy(&p->def, &plugins[i]) != 0) {
			free(p);
			supervisor_publish(sv);
			return err_set(e, CSID_ENOMEM, "supervisor: out of memory");
		}
		p->sv = sv;
		uv_timer_init(sv->cfg.loop, &p->restart_timer);
		p->restart_timer.data = p;
		p->next = sv->plugins;
		sv->plugins = p;
		supervisor_proc_prune(sv, p->def.id);
		supervisor_start_instance(p);
	}
	supervisor_publish(sv);
	return 0;
}

static void supervisor_check_done(struct supervisor *sv)
{
	if (sv->shutting_down && !sv->plugins && !sv->dying && !sv->done_called) {
		sv->done_called = true;
		log_info("msg=\"supervisor stopped\"");
		if (sv->done)
			sv->done(sv->done_ctx);
	}
}

int supervisor_shutdown(struct supervisor *sv, void (*done)(void *ctx), void *ctx)
{
	if (sv->shutting_down)
		return CSID_EPRECOND;
	sv->shutting_down = true;
	sv->done = done;
	sv->done_ctx = ctx;
	while (sv->plugins)
		supervisor_remove_plugin(sv->plugins, "agent shutting down");
	supervisor_publish(sv);
	supervisor_check_done(sv);
	return 0;
}

static uint64_t supervisor_default_random(void *ctx)
{
	struct supervisor *sv = ctx;

	/* xorshift64: jitter needs spread, not secrecy. */
	sv->rng ^= sv->rng << 13;
	sv->rng ^= sv->rng >> 7;
	sv->rng ^= sv->rng << 17;
	return sv->rng;
}

uint64_t supervisor_rand(struct supervisor *sv)
{
	if (sv->cfg.random)
		return sv->cfg.random(sv->cfg.random_ctx);
	return supervisor_default_random(sv);
}

static int64_t supervisor_or(int64_t v, int64_t def)
{
	return v > 0 ? v : def;
}

int supervisor_new(const struct supervisor_config *cfg, struct supervisor **out, struct err *e)
{
	struct supervisor *sv;

	*out = NULL;
	if (!cfg->loop || !cfg->data_dir || !cfg->registry)
		return err_set(e, CSID_EINVAL,
			       "supervisor: loop, data_dir and registry are required");
	sv = calloc(1, sizeof(*sv));
	if (!sv)
		return err_set(e, CSID_ENOMEM, "supervisor: out of memory");
	sv->cfg = *cfg;
	sv->data_dir = strdup(cfg->data_dir);
	sv->node_name = strdup(cfg->node_name ? cfg->node_name : "");
	if (!sv->data_dir || !sv->node_name) {
		free(sv->data_dir);
		free(sv->node_name);
		free(sv);
		return err_set(e, CSID_ENOMEM, "supervisor: out of memory");
	}
	sv->cfg.data_dir = sv->data_dir;
	sv->cfg.node_name = sv->node_name;
	sv->cfg.socket_timeout_ms = supervisor_or(cfg->socket_timeout_ms, 30000);
	sv->cfg.health_timeout_ms = supervisor_or(cfg->health_timeout_ms, 30000);
	sv->cfg.probe_interval_ms = supervisor_or(cfg->probe_interval_ms, 30000);
	sv->cfg.unhealthy_threshold_ms = supervisor_or(cfg->unhealthy_threshold_ms, 60000);
	sv->cfg.backoff_base_ms = supervisor_or(cfg->backoff_base_ms, 1000);
	sv->cfg.backoff_max_ms = supervisor_or(cfg->backoff_max_ms, 60000);
	sv->cfg.reconnect_max_ms = supervisor_or(cfg->reconnect_max_ms, 30000);
	sv->cfg.stop_grace_ms = cfg->stop_grace_ms >= 0 ? cfg->stop_grace_ms : 5000;
	sv->cfg.log_max_bytes = supervisor_or(cfg->log_max_bytes, 1024 * 1024);
	sv->rng = uv_hrtime() ^ ((uint64_t)getpid() << 32) ^ 0x9e3779b97f4a7c15ULL;
	pthread_mutex_init(&sv->mu, NULL);
	*out = sv;
	return 0;
}

void supervisor_free(struct supervisor *sv)
{
	if (!sv)
		return;
	pthread_mutex_destroy(&sv->mu);
	free(sv->status);
	free(sv->data_dir);
	free(sv->node_name);
	free(sv);
}
