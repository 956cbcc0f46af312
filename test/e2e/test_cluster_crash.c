/*
 * Chaos test of the whole node path: one real `csid server`, one real
 * `csid agent` joined to it, supervising csi-hostpath as a monolith with
 * controller publish on. Each run picks (seeded) an operation - create a
 * volume and wait until it is ready, mount it for an allocation through
 * the agent, unmount it, delete it and wait until it is gone - a victim
 * (the server, the agent, the plugin process, or all three at once) and a
 * delay; it starts the operation, kills the victim with SIGKILL after the
 * delay, restarts what died (the agent restarts its plugin by itself),
 * and re-issues the interrupted operation until it succeeds, as a
 * scheduler would (every operation is idempotent). Sometimes the
 * scheduler undoes a create or a mount instead (delete, unmount), and
 * sometimes the re-issued operation is struck again, so recovery itself
 * is interrupted. The plugin also dies exactly before or after one of
 * the operation's RPCs, through its fault script. Then, within a
 * deadline:
 *   - the server holds exactly the volumes the test created and did not
 *     delete, all ready; a volume has one claim, by the allocation the
 *     test mounted, exactly while it is mounted (no claim lost or
 *     duplicated, no claim freed twice), and one publication to the node,
 *     published, exactly then;
 *   - the agent records exactly those mounts, published, each a real
 *     mount point at the path the mount answered;
 *   - nothing is mounted under the agent's directory that no record
 *     explains (no orphan; /proc/self/mountinfo);
 *   - csi-hostpath holds exactly the server's volumes, published to the
 *     node exactly while claimed.
 * The kills are timed to land inside the operation (the delay is drawn
 * within the operation's measured duration); the test counts how many
 * landed before, while and after it was in flight. At the end everything
 * is killed at rest and restarted, then every volume is unmounted and
 * deleted: nothing may be left. The seed is printed;
 * CSID_CLUSTER_CRASH_SEED=<seed> replays a sequence (the same operations,
 * victims and fractions of the delays) and CSID_CLUSTER_CRASH_RUNS sets
 * the number of runs (default 50). Every process and mount is cleaned
 * up at teardown, also after a failure.
 *
 * The same campaign runs again on three servers sharing a real etcd
 * (leader_ttl 2s), the agent given all three: a "server" victim is the
 * leader, and the test's own requests go to another server meanwhile.
 * CSID_CLUSTER_CRASH_ETCD_RUNS sets its runs (default 12).
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "agent_proc.h"
#include "csi/csi_client.h"
#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "server_proc.h"

#define T_HP AGENT_PROC_HP_ID
#define T_NODE "node-chaos"
#define T_TOKEN "chaos-e2e-token-5c2"
#define T_START_MS 60000
/* One attempt of an operation; all retries of it; convergence after a run. */
#define T_ATTEMPT_MS 30000
#define T_RETRY_MS 90000
#define T_CONVERGE_MS 30000
#define T_VOLS_MAX 96
#define T_LIVE_MAX 4
/* How long a fault-script crash may take to happen (a controller unpublish follows an unmount). */
#define T_RPC_WAIT_MS 5000
/* Servers sharing one etcd in the cluster variant; one on SQLite otherwise. */
#define T_SERVERS_MAX 3

enum t_kind { T_CREATE, T_MOUNT, T_UNMOUNT, T_DELETE, T_KINDS };
/*
 * T_ALL: the plugin, the agent and the server at once (a power cut of the
 * node). T_RPC: the plugin dies (exit 137, as hard as a kill -9) exactly
 * before or after one of the operation's RPCs took effect, through its
 * fault script, so the windows between an RPC and its record are hit.
 */
enum t_victim { T_SERVER, T_AGENT, T_PLUGIN, T_ALL, T_RPC, T_VICTIMS };

static const char *const t_kind_name[] = {"create", "mount", "unmount", "delete"};
static const char *const t_victim_name[] = {"server", "agent", "plugin", "plugin+agent+server",
					    "plugin at an RPC"};

/* The plugin RPCs each operation makes (through the server or the agent). */
static const char *const t_rpcs[T_KINDS][3] = {
    {"CreateVolume", "CreateVolume", "CreateVolume"},
    {"ControllerPublishVolume", "NodeStageVolume", "NodePublishVolume"},
    {"NodeUnpublishVolume", "NodeUnstageVolume", "ControllerUnpublishVolume"},
    {"DeleteVolume", "DeleteVolume", "DeleteVolume"},
};

/* What the test believes of one volume. */
struct t_vol {
	char id[16];
	bool exists; /* created and not deleted */
	char alloc[16]; /* the allocation it is mounted for ("" none) */
	char path[512]; /* where the mount answered it is */
};

struct t_env {
	/*
	 * The servers: one on SQLite, or T_SERVERS_MAX on one etcd (then a
	 * "server" victim is the leader, and the requests go to `cur`, a
	 * server that is not being killed, while the agent fails over).
	 */
	struct server_proc srv[T_SERVERS_MAX];
	int nsrv;
	struct etcd_proc etcd;
	atomic_int cur;
	int victim_srv; /* the server killed last */
	struct agent_proc *a;
	struct t_vol vols[T_VOLS_MAX];
	int nvols;
	uint64_t rng;
	int64_t est_ms[T_KINDS]; /* how long an undisturbed operation takes */
	int before[T_VICTIMS]; /* kills before the operation's first request was sent */
	int mid[T_VICTIMS]; /* kills that landed while the operation was in flight */
	int after[T_VICTIMS]; /* kills after it had finished (or with nothing to kill) */
	int retried; /* runs whose operation had to be re-issued */
	uint64_t seed;
	int run;
	char what[320]; /* the run's operations, victims and delays */
};

/* One attempt of an operation, on a thread of its own. */
struct t_op {
	struct t_env *t;
	enum t_kind kind;
	struct t_vol *v;
	char alloc[16];
	bool ok;
	long status; /* of the first request */
	char path[512]; /* a mount's answer */
	char err[256];
	int64_t t0, t1;
};

/* The seeded generator (xorshift64): every random choice of the test comes from it. */
static uint32_t t_rnd(struct t_env *t)
{
	t->rng ^= t->rng << 13;
	t->rng ^= t->rng >> 7;
	t->rng ^= t->rng << 17;
	return (uint32_t)t->rng;
}

/* The server requests go to. */
static struct server_proc *t_srv(struct t_env *t)
{
	return &t->srv[atomic_load(&t->cur)];
}

/* Sets up the servers (etcd: T_SERVERS_MAX of them on one etcd), the agent, its plugin. */
static int t_setup_mode(void **state, bool etcd)
{
	struct t_env *t = calloc(1, sizeof(*t));
	char servers[1024], listener[160], cfg[1024], store[256] = "", list[600] = "";
	const char *edits[] = {"\"--no-controller-publish\", ",
			       "",
			       "\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"stop_grace\": \"3s\"}",
			       "\"stop_grace\": \"3s\", \"heartbeat\": \"200ms\","
			       " \"reconnect_max\": \"300ms\"}",
			       "\"node_name\": \"node-e2e\",",
			       listener,
			       NULL};
	int port = server_proc_free_port();

	*state = t;
	if (!t || port < 0)
		return -1;
	t->nsrv = etcd ? T_SERVERS_MAX : 1;
	atomic_init(&t->cur, 0);
	if (etcd) {
		if (etcd_proc_start(&t->etcd) != 0)
			return -1;
		snprintf(store, sizeof(store),
			 " \"store\": \"etcd\", \"leader_ttl\": \"2s\", \"etcd\": {\"endpoints\":"
			 " [\"%s\"], \"prefix\": \"/chaos/\"},",
			 t->etcd.url);
	}
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"node_ttl\": \"10s\","
		 " \"acl_tokens\": [{\"secret\": \"" T_TOKEN "\", \"write\": true}],%s"
		 " \"agent_token\": \"" T_TOKEN "\", \"backoff_min\": \"10ms\","
		 " \"backoff_max\": \"200ms\", \"rpc_timeout\": \"5s\"}",
		 store);
	for (int i = 0; i < t->nsrv; i++) {
		struct server_proc *s = &t->srv[i];
		size_t o = strlen(list);

		if (server_proc_init(s) != 0 || server_proc_write_config(s, cfg, NULL) != 0 ||
		    server_proc_start(s) != 0 || !server_proc_wait_ready(s, T_START_MS)) {
			server_proc_dump_log(s, "server setup failed");
			return -1;
		}
		http_client_token(s->http, T_TOKEN);
		snprintf(list + o, sizeof(list) - o, "%s\"%s\"", i ? ", " : "", s->base);
	}
	snprintf(listener, sizeof(listener),
		 "\"node_name\": \"" T_NODE "\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},",
		 port);
	snprintf(servers, sizeof(servers),
		 "\"plugin_log_max_bytes\": 65536, \"servers\": [%s],"
		 " \"server_token\": \"" T_TOKEN "\",",
		 list);
	if (agent_proc_setup_hostpath((void **)&t->a, edits) != 0)
		return -1;
	if (!server_proc_wait_plugin(t_srv(t), T_HP, T_START_MS)) {
		server_proc_dump_log(t_srv(t), "plugin never healthy on the server");
		return -1;
	}
	return 0;
}

static int t_setup(void **state)
{
	return t_setup_mode(state, false);
}

static int t_setup_etcd(void **state)
{
	return t_setup_mode(state, true);
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	/* The agent first: its cleanup kills the plugin and detaches every mount. */
	agent_proc_teardown((void **)&t->a);
	for (int i = 0; i < t->nsrv; i++)
		server_proc_cleanup(&t->srv[i]);
	if (t->nsrv > 1)
		etcd_proc_cleanup(&t->etcd);
	free(t);
	return 0;
}

/* What failed, where (seed, run, operation, victim, delay), and every process's log. */
static void t_dump(struct t_env *t, const char *why)
{
	fprintf(stderr,
		"FAILED: seed %llu, run %d: %s: %s (replay: CSID_CLUSTER_CRASH_SEED=%llu)\n",
		(unsigned long long)t->seed, t->run, t->what, why, (unsigned long long)t->seed);
	for (int i = 0; i < t->nsrv; i++)
		server_proc_dump_log(&t->srv[i], why);
	if (!t->a)
		return;
	agent_proc_dump_log(t->a, why);
	agent_proc_dump_plugin_logs(t->a);
}

/* ---- one attempt of an operation ---- */

/* A string member of o, "" when there is none. */
static const char *t_str(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/* Polls GET /v1/volume/<id> until it answers want (200 with state ready, or 404). */
static bool t_op_wait(struct t_op *o, struct http_client *h, bool gone)
{
	int64_t deadline = hpp_now_ms() + T_ATTEMPT_MS;
	char path[64];

	snprintf(path, sizeof(path), "/v1/volume/%s", o->v->id);
	while (hpp_now_ms() < deadline) {
		json_t *doc = NULL;
		long st = http_client_json(h, "GET", path, NULL, &doc);
		const char *state = json_string_value(json_object_get(doc, "state"));
		bool done = gone ? st == 404 : st == 200 && state && strcmp(state, "ready") == 0;

		json_decref(doc);
		if (done)
			return true;
		/* The server is gone: this attempt failed, the caller re-issues it. */
		if (st < 0) {
			snprintf(o->err, sizeof(o->err), "GET %s: no answer", path);
			return false;
		}
		hpp_pause_ms(10);
	}
	snprintf(o->err, sizeof(o->err), "%s: not %s after %d ms", o->v->id,
		 gone ? "gone" : "ready", T_ATTEMPT_MS);
	return false;
}

/* The server side: create or delete, then wait for the volume to be ready or gone. */
static void t_op_server(struct t_op *o)
{
	struct http_client *h = http_client_new(t_srv(o->t)->base);
	char path[64], *ans = NULL;
	bool create = o->kind == T_CREATE;

	if (!h) {
		snprintf(o->err, sizeof(o->err), "out of memory");
		return;
	}
	http_client_token(h, T_TOKEN);
	snprintf(path, sizeof(path), "/v1/volume/%s/%s", o->v->id, create ? "create" : "delete");
	o->status = http_client_do(h, create ? "PUT" : "DELETE", path,
				   create ? "{\"plugin_id\": \"" T_HP
					    "\", \"capacity_min\": \"1MiB\", \"capabilities\":"
					    " [{\"access_mode\": \"single-node-single-writer\","
					    " \"attachment_mode\": \"file-system\"}]}"
					  : NULL,
				   &ans, NULL, 10000);
	/* A delete re-issued after its volume went away finds nothing: done. */
	if (o->status == 200 || (!create && o->status == 404))
		o->ok = t_op_wait(o, h, !create);
	else
		snprintf(o->err, sizeof(o->err), "%s %s: %ld %.200s", create ? "PUT" : "DELETE",
			 path, o->status, ans ? ans : "");
	free(ans);
	http_client_free(h);
}

/* The node side: mount or unmount through the agent. */
static void t_op_agent(struct t_op *o)
{
	char path[128], body[64];
	json_t *doc = NULL;

	if (o->kind == T_MOUNT) {
		snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount", o->v->id);
		snprintf(body, sizeof(body), "{\"alloc_id\": \"%s\"}", o->alloc);
		o->status = agent_proc_http(o->t->a, "PUT", path, body, &doc);
	} else {
		snprintf(path, sizeof(path), "/v1/agent/volumes/%s/mount/%s", o->v->id, o->alloc);
		o->status = agent_proc_http(o->t->a, "DELETE", path, NULL, &doc);
	}
	o->ok = o->status == 200;
	if (o->ok && o->kind == T_MOUNT)
		snprintf(o->path, sizeof(o->path), "%s", t_str(doc, "path"));
	if (!o->ok)
		snprintf(o->err, sizeof(o->err), "%s: %ld %.200s", path, o->status,
			 t_str(doc, "error"));
	json_decref(doc);
}

/* One attempt of o (a thread's body): sets ok, err and the times. */
static void *t_op_main(void *arg)
{
	struct t_op *o = arg;

	o->ok = false;
	o->err[0] = '\0';
	o->t0 = hpp_now_ms();
	if (o->kind == T_CREATE || o->kind == T_DELETE)
		t_op_server(o);
	else
		t_op_agent(o);
	o->t1 = hpp_now_ms();
	return NULL;
}

/*
 * Times one undisturbed create, mount, unmount and delete of a volume of
 * its own, the first estimates of how long each kind takes: the kills'
 * delays are drawn over them (t_strike_draw), so a guess far from this
 * machine's figures would put most kills of a short campaign after the
 * operation.
 */
static void t_calibrate(struct t_env *t)
{
	struct t_vol v = {.id = "calibrate"};

	for (int k = 0; k < T_KINDS; k++) {
		struct t_op o = {.t = t, .kind = (enum t_kind)k, .v = &v, .alloc = "calibrate"};

		t_op_main(&o);
		if (!o.ok)
			fail_msg("calibration, %s: %s", t_kind_name[k], o.err);
		t->est_ms[k] = o.t1 - o.t0 > 1 ? o.t1 - o.t0 : 1;
	}
	fprintf(stderr,
		"undisturbed: create %lld ms, mount %lld ms, unmount %lld ms, delete %lld ms\n",
		(long long)t->est_ms[T_CREATE], (long long)t->est_ms[T_MOUNT],
		(long long)t->est_ms[T_UNMOUNT], (long long)t->est_ms[T_DELETE]);
}

/* ---- the victims ---- */

/*
 * The victims are killed and started again while the operation's thread
 * runs: these helpers return what went wrong (NULL: nothing) instead of
 * failing the test, which the caller does once the thread is joined.
 */
static const char *t_start_server(struct t_env *t)
{
	struct server_proc *s = &t->srv[t->victim_srv];

	if (server_proc_start(s) != 0 || !server_proc_wait_ready(s, T_START_MS))
		return "the server did not start again";
	return NULL;
}

/*
 * The server a "server" victim is: the only one, or the leader (when one
 * says who leads; else any). Requests move to the next one first.
 */
static int t_pick_victim(struct t_env *t)
{
	json_t *st = NULL;
	const char *addr;
	int v = 0;

	if (t->nsrv > 1 &&
	    server_proc_http(t_srv(t), "GET", "/v1/status/leader", NULL, &st) == 200) {
		addr = json_string_value(json_object_get(json_object_get(st, "leader"), "address"));
		v = (atomic_load(&t->cur) + 1) % t->nsrv;
		for (int i = 0; addr && i < t->nsrv; i++)
			if (strcmp(addr, t->srv[i].addr) == 0)
				v = i;
	}
	json_decref(st);
	atomic_store(&t->cur, (v + 1) % t->nsrv);
	return v;
}

static const char *t_start_agent(struct t_env *t)
{
	if (agent_proc_start(t->a) != 0 || agent_proc_wait_ready(t->a, T_START_MS) != 0 ||
	    !agent_proc_wait_healthy(t->a, T_HP, T_START_MS))
		return "the agent did not start again with a healthy plugin";
	return NULL;
}

/* The plugin's process, as the agent's supervisor reports it; 0 when none. */
static pid_t t_plugin_pid(struct t_env *t)
{
	struct agent_proc_plugin p;

	if (agent_proc_plugin(t->a, T_HP, "node", &p) != 0 || !p.found)
		return 0;
	return (pid_t)p.pid;
}

/*
 * Kills the victim with SIGKILL: the kill's time (ms), or -1 when there
 * was nothing to kill; *bad says what went wrong.
 */
static int64_t t_kill(struct t_env *t, enum t_victim victim, pid_t plugin, const char **bad)
{
	int64_t now = hpp_now_ms();

	/* Between restarts the agent may have no plugin process: nothing to kill. */
	if ((victim == T_PLUGIN || victim == T_ALL) &&
	    (plugin <= 0 || kill(plugin, SIGKILL) != 0) && victim == T_PLUGIN)
		return -1;
	if ((victim == T_AGENT || victim == T_ALL) &&
	    agent_proc_stop(t->a, SIGKILL, 10000) != 128 + SIGKILL)
		*bad = "the agent was not running when it was to be killed";
	if (victim == T_SERVER || victim == T_ALL)
		t->victim_srv = t_pick_victim(t);
	if ((victim == T_SERVER || victim == T_ALL) &&
	    server_proc_stop(&t->srv[t->victim_srv], SIGKILL, 10000) < 0)
		*bad = "the server was not running when it was to be killed";
	return now;
}

/* Starts again what died (a plugin alone is restarted by its agent); what went wrong. */
static const char *t_restart(struct t_env *t, enum t_victim victim)
{
	const char *bad = NULL;

	if (victim == T_SERVER || victim == T_ALL)
		bad = t_start_server(t);
	if (!bad && (victim == T_AGENT || victim == T_ALL))
		bad = t_start_agent(t);
	return bad;
}

/* Whether the plugin process old is gone (the supervisor reaped it or runs another). */
static bool t_plugin_gone(struct t_env *t, pid_t old)
{
	return old <= 0 || kill(old, 0) != 0 || t_plugin_pid(t) != old;
}

/*
 * T_RPC: the plugin's fault script (a rule such as "NodeStageVolume
 * crash=after", written by the caller) makes it exit at the RPC while
 * the operation runs; once it died (or after T_RPC_WAIT_MS) the rule is
 * removed, so its next instance serves the retries. Returns when the
 * death was seen (ms), or -1; *bad says what went wrong.
 */
static int64_t t_rpc_crash(struct t_env *t, pid_t old, const char **bad)
{
	int64_t deadline = hpp_now_ms() + T_RPC_WAIT_MS, seen = -1;

	while (hpp_now_ms() < deadline) {
		if (t_plugin_gone(t, old)) {
			seen = hpp_now_ms();
			break;
		}
		hpp_pause_ms(1);
	}
	if (agent_proc_write_faults(t->a, "") != 0)
		*bad = "cannot clear the plugin's fault script";
	return seen;
}

/* ---- the model ---- */

/* Volumes that exist and are not mounted; that are mounted. */
static bool t_v_free(const struct t_vol *v)
{
	return v->exists && !v->alloc[0];
}

static bool t_v_mounted(const struct t_vol *v)
{
	return v->exists && v->alloc[0];
}

/* A volume for which want(v) holds, picked at random; NULL when none. */
static struct t_vol *t_pick(struct t_env *t, bool (*want)(const struct t_vol *))
{
	int idx[T_VOLS_MAX], n = 0;

	for (int i = 0; i < t->nvols; i++)
		if (want(&t->vols[i]))
			idx[n++] = i;
	return n ? &t->vols[idx[t_rnd(t) % (uint32_t)n]] : NULL;
}

/* How many volumes the test created and did not delete. */
static int t_live(struct t_env *t)
{
	int n = 0;

	for (int i = 0; i < t->nvols; i++)
		n += t->vols[i].exists;
	return n;
}

/* Picks the run's operation (and its volume) so that it applies to the model. */
static void t_choose(struct t_env *t, int run, struct t_op *o)
{
	enum t_kind kind = (enum t_kind)(t_rnd(t) % T_KINDS);

	o->v = NULL;
	if (kind == T_MOUNT || kind == T_DELETE)
		o->v = t_pick(t, t_v_free);
	else if (kind == T_UNMOUNT)
		o->v = t_pick(t, t_v_mounted);
	if (kind == T_CREATE || !o->v) {
		if (t_live(t) < T_LIVE_MAX && t->nvols < T_VOLS_MAX) {
			kind = T_CREATE;
		} else {
			o->v = t_pick(t, t_v_mounted);
			kind = T_UNMOUNT;
			if (!o->v) {
				o->v = t_pick(t, t_v_free);
				kind = T_DELETE;
			}
		}
	}
	o->kind = kind;
	if (kind == T_CREATE) {
		o->v = &t->vols[t->nvols++];
		snprintf(o->v->id, sizeof(o->v->id), "vol-%03d", run);
	}
	if (kind == T_MOUNT)
		snprintf(o->alloc, sizeof(o->alloc), "alloc-%03d", run);
	else if (kind == T_UNMOUNT)
		snprintf(o->alloc, sizeof(o->alloc), "%s", o->v->alloc);
}

/* ---- the invariants ---- */

/* Sets msg (size T_MSG) and returns false: what does not hold (yet). */
#define T_MSG 512
#define T_NO(...) (snprintf(msg, T_MSG, __VA_ARGS__), false)

/* The model of volume id, or NULL. */
static struct t_vol *t_find(struct t_env *t, const char *id)
{
	for (int i = 0; i < t->nvols; i++)
		if (strcmp(t->vols[i].id, id) == 0)
			return &t->vols[i];
	return NULL;
}

/* One volume of the server against the model. */
static bool t_check_volume(json_t *v, const struct t_vol *m, char *msg)
{
	json_t *c = json_array_get(json_object_get(v, "claims"), 0);
	json_t *p = json_array_get(json_object_get(v, "publications"), 0);
	json_t *past = json_object_get(v, "past_claims"), *x, *y;
	size_t nc = json_array_size(json_object_get(v, "claims"));
	size_t np = json_array_size(json_object_get(v, "publications")), i, k;

	if (strcmp(t_str(v, "state"), "ready") != 0)
		return T_NO("%s: state %s", m->id, t_str(v, "state"));
	if (!m->alloc[0] && nc)
		return T_NO("%s: unmounted, but claimed by %s (%s)", m->id, t_str(c, "alloc_id"),
			    t_str(c, "state"));
	if (!m->alloc[0] && np)
		return T_NO("%s: unmounted, but published to %s (%s)", m->id, t_str(p, "node_id"),
			    t_str(p, "state"));
	if (m->alloc[0] &&
	    (nc != 1 || strcmp(t_str(c, "alloc_id"), m->alloc) != 0 ||
	     strcmp(t_str(c, "state"), "claimed") != 0 || strcmp(t_str(c, "node_id"), T_NODE) != 0))
		return T_NO("%s: mounted for %s, but %zu claims, the first %s (%s)", m->id,
			    m->alloc, nc, nc ? t_str(c, "alloc_id") : "-",
			    nc ? t_str(c, "state") : "-");
	if (m->alloc[0] && (np != 1 || strcmp(t_str(p, "node_id"), T_NODE) != 0 ||
			    strcmp(t_str(p, "state"), "published") != 0))
		return T_NO("%s: mounted, but %zu publications, the first %s", m->id, np,
			    np ? t_str(p, "state") : "-");
	/*
	 * Allocation IDs are never reused, but a mount that failed after its
	 * claim released it, and the re-issued mount claimed anew: two past
	 * claims of one allocation claimed at the same time were one claim
	 * freed twice.
	 */
	json_array_foreach(past, i, x)
	{
		json_array_foreach(past, k, y)
		{
			if (k > i && strcmp(t_str(x, "alloc_id"), t_str(y, "alloc_id")) == 0 &&
			    json_integer_value(json_object_get(x, "claimed_ms")) ==
				json_integer_value(json_object_get(y, "claimed_ms")))
				return T_NO("%s: claim of %s freed twice", m->id,
					    t_str(x, "alloc_id"));
		}
	}
	return true;
}

/* The server's volumes against the model; *list gets them (the caller's). */
static bool t_check_server(struct t_env *t, json_t **list, char *msg)
{
	json_t *v;
	size_t i;
	int live = 0;

	if (server_proc_http(t_srv(t), "GET", "/v1/volumes?per_page=1000", NULL, list) != 200)
		return T_NO("the server does not list its volumes");
	json_array_foreach(json_object_get(*list, "volumes"), i, v)
	{
		struct t_vol *m = t_find(t, t_str(v, "id"));

		if (!m || !m->exists)
			return T_NO("%s: on the server, but %s", t_str(v, "id"),
				    m ? "deleted" : "never created");
		if (!t_check_volume(v, m, msg))
			return false;
		live++;
	}
	if (live != t_live(t))
		return T_NO("the server has %d volumes, the test created %d", live, t_live(t));
	return true;
}

/* How many mount points /proc/self/mountinfo lists at exactly path. */
static int t_mount_count(const char *path)
{
	char line[4096], mp[1024];
	FILE *f = fopen("/proc/self/mountinfo", "r");
	int n = 0;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%*s %*s %*s %*s %1023s", mp) == 1 && strcmp(mp, path) == 0)
			n++;
	fclose(f);
	return n;
}

/* Whether a mount point under dir is neither a target nor a staging path of recs. */
static bool t_check_orphans(const char *dir, json_t *recs, char *msg)
{
	char line[4096], mp[1024];
	size_t dlen = strlen(dir), i;
	FILE *f = fopen("/proc/self/mountinfo", "r");
	bool ok = true;
	json_t *r;

	if (!f)
		return T_NO("cannot read /proc/self/mountinfo");
	while (ok && fgets(line, sizeof(line), f)) {
		bool known = false;

		if (sscanf(line, "%*s %*s %*s %*s %1023s", mp) != 1 ||
		    strncmp(mp, dir, dlen) != 0 || mp[dlen] != '/')
			continue;
		json_array_foreach(recs, i, r)
		{
			known = known || strcmp(t_str(r, "target_path"), mp) == 0 ||
				strcmp(t_str(r, "staging_path"), mp) == 0;
		}
		if (!known)
			ok = T_NO("orphan mount %s: no record explains it", mp);
	}
	fclose(f);
	return ok;
}

/* The agent's mount records and the mount table against the model. */
static bool t_check_agent(struct t_env *t, char *msg)
{
	json_t *doc = NULL, *recs, *r;
	bool ok = true;
	size_t i;
	int mounted = 0, want = 0;

	if (agent_proc_http(t->a, "GET", "/v1/agent/mounts", NULL, &doc) != 200 || !doc) {
		json_decref(doc);
		return T_NO("the agent does not list its mounts");
	}
	recs = json_object_get(doc, "mounts");
	json_array_foreach(recs, i, r)
	{
		struct t_vol *m = t_find(t, t_str(r, "volume_id"));
		const char *target = t_str(r, "target_path");

		if (!ok)
			break;
		if (!m || !m->exists || strcmp(m->alloc, t_str(r, "alloc_id")) != 0)
			ok = T_NO("agent record %s/%s (%s): not mounted by the test",
				  t_str(r, "volume_id"), t_str(r, "alloc_id"), t_str(r, "state"));
		else if (strcmp(t_str(r, "state"), "published") != 0)
			ok = T_NO("agent record %s/%s: state %s", m->id, m->alloc,
				  t_str(r, "state"));
		else if (strcmp(target, m->path) != 0)
			ok = T_NO("%s/%s: mounted at %s, the mount answered %s", m->id, m->alloc,
				  target, m->path);
		else if (t_mount_count(target) != 1)
			ok = T_NO("%s/%s: %s is mounted %d times", m->id, m->alloc, target,
				  t_mount_count(target));
		else if (t_mount_count(t_str(r, "staging_path")) != 1)
			ok =
			    T_NO("%s/%s: staging path %s is mounted %d times", m->id, m->alloc,
				 t_str(r, "staging_path"), t_mount_count(t_str(r, "staging_path")));
		mounted++;
	}
	for (int j = 0; j < t->nvols; j++)
		want += t->vols[j].exists && t->vols[j].alloc[0];
	if (ok && mounted != want)
		ok = T_NO("the agent records %d mounts, the test mounted %d", mounted, want);
	if (ok)
		ok = t_check_orphans(t->a->dir, recs, msg);
	json_decref(doc);
	return ok;
}

/* csi-hostpath's volumes against the server's list: the same, published while claimed. */
static bool t_check_plugin(struct t_env *t, json_t *list, char *msg)
{
	Csi__V1__ListVolumesRequest req = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *resp = NULL;
	struct agent_proc_plugin p;
	struct hpp_client cl;
	bool ok = true;
	json_t *v;
	size_t i;

	if (agent_proc_plugin(t->a, T_HP, "controller", &p) != 0 || !p.healthy || !p.endpoint[0])
		return T_NO("the controller plugin is not healthy");
	if (hpp_client_open(&cl, p.endpoint) != 0)
		return T_NO("cannot open %s", p.endpoint);
	req.max_entries = 1000;
	if (hpp_client_call(&cl, CSI_RPC_LIST_VOLUMES, &req, &resp, 5000) != 0) {
		ok = T_NO("ListVolumes failed: %s", cl.st.message);
		hpp_client_close(&cl);
		return ok;
	}
	if (resp->n_entries != json_array_size(json_object_get(list, "volumes")))
		ok = T_NO("csi-hostpath holds %zu volumes, the server %zu", resp->n_entries,
			  json_array_size(json_object_get(list, "volumes")));
	json_array_foreach(json_object_get(list, "volumes"), i, v)
	{
		const char *ext = t_str(v, "external_id");
		bool claimed = json_array_size(json_object_get(v, "claims")) > 0, found = false;

		for (size_t k = 0; ok && k < resp->n_entries; k++) {
			Csi__V1__ListVolumesResponse__Entry *e = resp->entries[k];
			bool pub = e->status && e->status->n_published_node_ids > 0;

			if (strcmp(e->volume->volume_id, ext) != 0)
				continue;
			found = true;
			if (pub != claimed)
				ok = T_NO("%s: published in csi-hostpath %d, claimed %d",
					  t_str(v, "id"), pub, claimed);
		}
		if (ok && !found)
			ok = T_NO("%s (%s): not in csi-hostpath", t_str(v, "id"), ext);
	}
	hpp_client_close(&cl);
	return ok;
}

/* Whether every invariant holds now; msg says which does not. */
static bool t_converged(struct t_env *t, char *msg)
{
	json_t *list = NULL;
	bool ok =
	    t_check_server(t, &list, msg) && t_check_agent(t, msg) && t_check_plugin(t, list, msg);

	json_decref(list);
	return ok;
}

/* Polls until every invariant holds; fails the test with the last one that did not. */
static void t_check(struct t_env *t, int run, const char *what)
{
	int64_t deadline = hpp_now_ms() + T_CONVERGE_MS;
	char msg[T_MSG] = "";

	while (!t_converged(t, msg)) {
		if (hpp_now_ms() >= deadline) {
			t_dump(t, msg);
			fail_msg("seed %llu, run %d (%s): after %d ms: %s",
				 (unsigned long long)t->seed, run, what, T_CONVERGE_MS, msg);
		}
		hpp_pause_ms(20);
	}
}

/* ---- the runs ---- */

/* Runs o once on this thread, again and again until it succeeds. */
static int t_retry(struct t_env *t, struct t_op *o, const char *what)
{
	int64_t deadline = hpp_now_ms() + T_RETRY_MS;
	int n = 0;

	while (!o->ok) {
		if (hpp_now_ms() >= deadline) {
			t_dump(t, o->err);
			fail_msg("seed %llu, run %d (%s): re-issued %d times, last: %s",
				 (unsigned long long)t->seed, t->run, what, n, o->err);
		}
		if (n > 0)
			hpp_pause_ms(50);
		t_op_main(o);
		n++;
	}
	return n;
}

/* A kill: its victim, and its delay or (T_RPC) the plugin's fault rule. */
struct t_strike {
	enum t_victim victim;
	int64_t delay;
	char rule[80];
};

/* Draws a strike on an operation of kind (always the same number of draws). */
static void t_strike_draw(struct t_env *t, enum t_kind kind, struct t_strike *k)
{
	k->victim = (enum t_victim)(t_rnd(t) % T_VICTIMS);
	/*
	 * Over the operation's usual duration and a little beyond, so the
	 * kills cover all of it; the few that land after it keep the
	 * estimate up to date. A replayed seed draws the same fractions.
	 */
	k->delay = (int64_t)(t_rnd(t) % 1000) * (t->est_ms[kind] * 5 / 4) / 1000;
	snprintf(k->rule, sizeof(k->rule), "%s crash%s", t_rpcs[kind][t_rnd(t) % 3],
		 t_rnd(t) % 2 ? "=after" : "");
}

/* Appends to t->what (what the run did, for its log line and failures). */
static void t_say(struct t_env *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void t_say(struct t_env *t, const char *fmt, ...)
{
	size_t n = strlen(t->what);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(t->what + n, sizeof(t->what) - n, fmt, ap);
	va_end(ap);
}

/* Appends a description of k on an operation to t->what. */
static void t_strike_say(struct t_env *t, const struct t_op *o, const struct t_strike *k)
{
	bool alloc = o->kind == T_MOUNT || o->kind == T_UNMOUNT;

	t_say(t, "%s %s%s%s, ", t_kind_name[o->kind], o->v->id, alloc ? " for " : "",
	      alloc ? o->alloc : "");
	if (k->victim == T_RPC)
		t_say(t, "plugin dies at \"%s\"", k->rule);
	else
		t_say(t, "kill -9 %s after %lld ms", t_victim_name[k->victim], (long long)k->delay);
}

/*
 * Runs one attempt of o on a thread while k strikes: the victim is killed
 * (and started again) or the plugin dies at its RPC. Counts where the
 * kill landed; returns it in words.
 */
static const char *t_strike(struct t_env *t, struct t_op *o, const struct t_strike *k)
{
	const char *bad = NULL;
	int64_t killed;
	pid_t plugin;
	pthread_t th;
	bool mid;

	plugin = k->victim != T_SERVER && k->victim != T_AGENT ? t_plugin_pid(t) : 0;
	if (k->victim == T_RPC) {
		char text[96];

		snprintf(text, sizeof(text), "%s\n", k->rule);
		assert_int_equal(agent_proc_write_faults(t->a, text), 0);
	}
	assert_int_equal(pthread_create(&th, NULL, t_op_main, o), 0);
	if (k->victim == T_RPC) {
		killed = t_rpc_crash(t, plugin, &bad);
	} else {
		hpp_pause_ms((int)k->delay);
		killed = t_kill(t, k->victim, plugin, &bad);
		if (!bad)
			bad = t_restart(t, k->victim);
	}
	pthread_join(th, NULL);
	if (bad) {
		t_dump(t, bad);
		fail_msg("seed %llu, run %d (%s): %s", (unsigned long long)t->seed, t->run, t->what,
			 bad);
	}
	mid = killed >= 0 && o->t1 > killed && o->t0 <= killed;
	/* The plugin dies inside an RPC; its death may be seen after the failed op answered. */
	if (k->victim == T_RPC && killed >= 0 && !o->ok)
		mid = true;
	/* Only an attempt that ended before its kill tells how long an undisturbed one takes. */
	if (o->ok && k->victim != T_RPC && killed >= 0 && o->t1 <= killed)
		t->est_ms[o->kind] = (t->est_ms[o->kind] + (o->t1 - o->t0)) / 2;
	if (mid) {
		t->mid[k->victim]++;
		return "mid-op";
	}
	if (killed >= 0 && o->t0 > killed) {
		t->before[k->victim]++;
		return "before the op";
	}
	t->after[k->victim]++;
	return "after the op";
}

/* One run: an operation, one or two strikes, the retries, the model, the checks. */
static void t_run(struct t_env *t, int run)
{
	struct t_op o = {.t = t};
	struct t_strike k1, k2;
	const char *landed, *landed2 = NULL;
	int64_t first_ms;
	int retries;
	bool undo, twice;

	t->run = run;
	t->what[0] = '\0';
	t_choose(t, run, &o);
	t_strike_draw(t, o.kind, &k1);
	/*
	 * Sometimes the scheduler changes its mind: a create or a mount is
	 * followed by its inverse (delete, unmount) instead of being
	 * re-issued, whether the first attempt succeeded or not.
	 */
	undo = t_rnd(t) % 4 == 0 && (o.kind == T_CREATE || o.kind == T_MOUNT);
	/* Sometimes the re-issued operation is struck too (recovery interrupted). */
	twice = t_rnd(t) % 4 == 0;
	t_strike_draw(t, undo ? (o.kind == T_CREATE ? T_DELETE : T_UNMOUNT) : o.kind, &k2);
	t_strike_say(t, &o, &k1);
	landed = t_strike(t, &o, &k1);
	first_ms = o.t1 - o.t0;
	if (undo) {
		o.kind = o.kind == T_CREATE ? T_DELETE : T_UNMOUNT;
		o.ok = false;
		t_say(t, "; undone: %s", t_kind_name[o.kind]);
	}
	if (twice && !o.ok) {
		t_say(t, "; struck again: ");
		t_strike_say(t, &o, &k2);
		landed2 = t_strike(t, &o, &k2);
	}
	retries = t_retry(t, &o, t->what);
	t->retried += retries > 0;
	fprintf(stderr, "run %d: %s: %s%s%s (the op took %lld ms), then %d attempts\n", run,
		t->what, landed, landed2 ? ", then " : "", landed2 ? landed2 : "",
		(long long)first_ms, retries);
	/* What the last operation left (an undone one leaves the model as it was). */
	if (o.kind == T_CREATE)
		o.v->exists = true;
	else if (o.kind == T_DELETE)
		o.v->exists = false;
	if (o.kind == T_MOUNT) {
		snprintf(o.v->alloc, sizeof(o.v->alloc), "%s", o.alloc);
		snprintf(o.v->path, sizeof(o.v->path), "%s", o.path);
	} else if (o.kind == T_UNMOUNT) {
		o.v->alloc[0] = o.v->path[0] = '\0';
	}
	t_check(t, run, t->what);
}

/*
 * The end: everything is killed at once and restarted with nothing in
 * flight, the state checked; then every volume is unmounted and deleted,
 * and nothing may be left: no volume, claim, mount record, mount point
 * or plugin volume.
 */
static void t_wind_down(struct t_env *t, int run)
{
	const char *bad = NULL;

	t->run = run;
	snprintf(t->what, sizeof(t->what), "kill -9 of everything at rest, then clean up");
	t_kill(t, T_ALL, t_plugin_pid(t), &bad);
	if (!bad)
		bad = t_restart(t, T_ALL);
	if (bad) {
		t_dump(t, bad);
		fail_msg("seed %llu, wind-down: %s", (unsigned long long)t->seed, bad);
	}
	t_check(t, run, t->what);
	for (int i = 0; i < t->nvols; i++) {
		struct t_vol *v = &t->vols[i];
		struct t_op o = {.t = t, .kind = T_UNMOUNT, .v = v};

		if (!v->exists)
			continue;
		if (v->alloc[0]) {
			snprintf(o.alloc, sizeof(o.alloc), "%s", v->alloc);
			t_retry(t, &o, t->what);
			v->alloc[0] = v->path[0] = '\0';
		}
		o.kind = T_DELETE;
		o.ok = false;
		t_retry(t, &o, t->what);
		v->exists = false;
	}
	t_check(t, run, t->what);
}

/* The campaign: runs (or $runs_env) seeded runs, then the wind-down. */
static void t_campaign(struct t_env *t, const char *runs_env, int runs)
{
	const char *env_seed = getenv("CSID_CLUSTER_CRASH_SEED");
	const char *env_runs = getenv(runs_env);
	uint64_t seed = env_seed ? strtoull(env_seed, NULL, 10) : (uint64_t)time(NULL);
	int mid = 0, kills = 0;
	int64_t t0 = hpp_now_ms();

	runs = env_runs ? atoi(env_runs) : runs;
	fprintf(stderr,
		"cluster crash test (%d server%s): seed %llu, %d runs (replay: "
		"CSID_CLUSTER_CRASH_SEED=%llu)\n",
		t->nsrv, t->nsrv > 1 ? "s on etcd" : " on SQLite", (unsigned long long)seed, runs,
		(unsigned long long)seed);
	t->seed = seed;
	t->rng = seed * 2654435761u + 1;
	t_calibrate(t);
	for (int run = 0; run < runs; run++)
		t_run(t, run);
	t_wind_down(t, runs);
	for (int v = 0; v < T_VICTIMS; v++) {
		fprintf(stderr, "kills of the %s: %d before, %d mid-op, %d after the op\n",
			t_victim_name[v], t->before[v], t->mid[v], t->after[v]);
		mid += t->mid[v];
		kills += t->before[v] + t->mid[v] + t->after[v];
	}
	fprintf(stderr,
		"%d runs in %lld ms: %d kills, %d of them mid-op; %d runs re-issued their op\n",
		runs, (long long)(hpp_now_ms() - t0), kills, mid, t->retried);
	/* The delays are drawn within the operations' durations: most kills must land inside. */
	assert_true(mid * 2 > kills);
}

static void test_cluster_kill9_converges(void **state)
{
	t_campaign(*state, "CSID_CLUSTER_CRASH_RUNS", 50);
}

/* The same on three servers sharing etcd: a "server" victim is the leader. */
static void test_cluster_kill9_converges_etcd(void **state)
{
	t_campaign(*state, "CSID_CLUSTER_CRASH_ETCD_RUNS", 12);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_cluster_kill9_converges, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_cluster_kill9_converges_etcd, t_setup_etcd,
					    t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
