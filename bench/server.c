/*
 * Benchmark of the control plane (not a test: it prints figures and
 * targets, and fails only when a run breaks). Five measures, each on a
 * SQLite store in a private directory under /tmp (or $CSID_BENCH_DIR):
 *   1. claim + release cycles through the HTTP API, over plaintext HTTP and
 *      again over HTTPS (certificates made with openssl, keep-alive): the server in this
 *      process (server_new + server_api_start on a free port) with a
 *      zero-latency in-process controller (a struct csi_client answering
 *      every RPC at once), driven by several keep-alive libcurl clients on
 *      distinct volumes. A client's cycle is the agent's: PUT claim, GET
 *      the volume with blocking queries until the reconciler has done
 *      ControllerPublishVolume, PUT release. Two rates: API round trips per
 *      second (every request while the clients run), and cycles to freed
 *      per second (cycles / time until the reconciler has unpublished and
 *      freed every claim);
 *   2. a restarted server settling 10,000 ready volumes: from server_new
 *      to the reconciler idle (server_start enqueues every volume before
 *      it returns, so queued == 0 after it means every one was worked);
 *   3. 10,000 volumes to create through a zero-latency CSI plugin served by
 *      csi_server on a real unix socket, reached with csi_client_grpc_new:
 *      from server_new until every volume is ready, for a few worker and
 *      plugin_concurrency settings;
 *   4. GET /v1/volumes (first page of 100) with 100,000 volumes stored,
 *      against a `csid server` child: median and p99 of 200 requests;
 *   5. that child's peak RSS (VmHWM) after it settled the 100,000 volumes
 *      and served every page of the list once;
 *   6. that child's GET /v1/metrics: when its catalogue counts show every
 *      volume, median and p99 of 200 scrapes, resident memory around them.
 *
 *   6. measure 1 again (plaintext) with the store on a one-member etcd
 *      (`etcd`) or a three-member one (`etcd3`): Debian's /usr/bin/etcd,
 *      started on free loopback ports with its data on /dev/shm (or
 *      $CSID_BENCH_ETCD_DIR; bench_on_etcd says why), beside the SQLite
 *      figures; both print the store writes per cycle (indexes: on etcd
 *      concurrent transactions share one), and on etcd its CPU, its Range
 *      and Txn calls per cycle and the store's transactions per cycle
 *      with the Txns they went in (store_etcd_txn.c coalesces). Then
 *      the watch latency: a claim through server A until a blocking query
 *      on server B (same etcd prefix) answers, and below the API a write
 *      through store A until store B's store_wait returns it.
 *
 *   bench_server [repeats [cycles|plain|settle|create [W:P]|big|etcd|etcd3]]
 *
 * repeats defaults to 3; a name runs that measure only (plain: measure 1
 * over plaintext HTTP only); create W:P runs
 * only W workers with plugin_concurrency P. CSID_BENCH_REUSE=R makes each
 * client's cycles of measure 1 go round R volumes instead of a new one
 * each (a catalogue whose volumes are claimed again and again; a claim
 * made before the reconciler freed the volume's last one is made again a
 * moment later, and counted). CSID_BENCH_HISTORY=1 gives every
 * volume a full claim history first (a volume used often before; measure
 * 1's releases then drop its oldest past claim). CSID_BENCH_NOWAIT=1 runs
 * measure 1's claim + release cycles only, not those that wait for the
 * publication (for profiles of the one figure). CSID_BENCH_KEEP=1 keeps the
 * directory (stores, server log).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "api/server_api.h"
#include "bench_stat.h"
#include "csi/csi_client.h"
#include "csi/csi_server.h"
#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "http_client.h"
#include "model/model.h"
#include "server/server.h"
#include "server_proc.h"
#include "store/store.h"
#include "test_pki.h"

extern char **environ;

#define BENCH_PLUGIN "bench.csi.csid.dev"
#define BENCH_NODE "node-1"
#define BENCH_CLIENTS 8
#define BENCH_CYCLES 4000 /* per repeat, over BENCH_CLIENTS clients; $CSID_BENCH_CYCLES */
#define BENCH_SETTLE_VOLUMES 10000
#define BENCH_CREATE_VOLUMES 10000
#define BENCH_LIST_VOLUMES 100000
#define BENCH_LIST_REQUESTS 200
#define BENCH_TXN 64 /* volumes per fill transaction (with their histories, 128 ops: the most) */
#define BENCH_WAIT_MS 120000
/* CREATE_DELETE_VOLUME and PUBLISH_UNPUBLISH_VOLUME (CSI capability values 1, 2). */
#define BENCH_CAPS ((1ULL << 1) | (1ULL << 2))

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench_die(const char *what, const char *detail)
{
	fflush(stdout);
	fprintf(stdout, "bench server: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(1);
}

/* Cycles per repeat: BENCH_CYCLES, or fewer under valgrind ($CSID_BENCH_CYCLES). */
static int bench_ncycles(void)
{
	const char *v = getenv("CSID_BENCH_CYCLES");
	int n = v ? atoi(v) : BENCH_CYCLES;

	return n >= BENCH_CLIENTS && n <= BENCH_CYCLES ? n : BENCH_CYCLES;
}

/* CSID_BENCH_REUSE: how many volumes each client's cycles go round (0: a new one each cycle). */
static int bench_reuse(void)
{
	const char *v = getenv("CSID_BENCH_REUSE");
	int n = v ? atoi(v) : 0;

	return n > 0 && n <= bench_ncycles() / BENCH_CLIENTS ? n : 0;
}

static void bench_dir(char *out, size_t len)
{
	const char *base = getenv("CSID_BENCH_DIR") ? getenv("CSID_BENCH_DIR") : "/tmp";

	snprintf(out, len, "%s/csb-XXXXXX", base);
	if (!mkdtemp(out))
		bench_die("mkdtemp", out);
}

/* ---- a zero-latency controller in this process ---- */

/* Answers every RPC at once with an empty response of its type. */
struct bench_fake {
	struct csi_client client;
	atomic_int calls[CSI_RPC_COUNT];
};

static int bench_fake_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			   ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct bench_fake *f = (struct bench_fake *)c;
	const ProtobufCMessageDescriptor *d = csi_rpc_info(rpc)->response;
	ProtobufCMessage *m = calloc(1, d->sizeof_message);

	atomic_fetch_add(&f->calls[rpc], 1);
	if (!m)
		bench_die("out of memory", NULL);
	d->message_init(m);
	*resp = m;
	st->code = CSI_OK;
	st->message[0] = '\0';
	return 0;
}

static void bench_fake_free(struct csi_client *c)
{
}

static int bench_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
			 uint64_t *caps, struct err *e)
{
	*client = ctx;
	*caps = BENCH_CAPS;
	return 0;
}

static void bench_release(void *ctx, const char *plugin_id, struct csi_client *client)
{
}

/* The plugins view: one healthy controller of BENCH_PLUGIN on the server's host. */
static size_t bench_local(void *ctx, struct server_local_controller *out, size_t cap,
			  struct arena *a)
{
	if (cap < 1)
		return 0;
	out[0] =
	    (struct server_local_controller){BENCH_PLUGIN, true, "healthy", "1.0.0", BENCH_CAPS};
	return 1;
}

/* ---- a zero-latency CSI plugin on a unix socket ---- */

static int bench_plugin_handler(void *ctx, enum csi_rpc rpc, const ProtobufCMessage *req,
				ProtobufCMessage **resp, struct arena *a, char *msg)
{
	const Csi__V1__CreateVolumeRequest *cr = (const Csi__V1__CreateVolumeRequest *)req;
	Csi__V1__CreateVolumeResponse *r;
	Csi__V1__Volume *v;

	if (rpc != CSI_RPC_CREATE_VOLUME) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "not in this benchmark");
		return CSI_UNIMPLEMENTED;
	}
	r = arena_alloc(a, sizeof(*r));
	v = arena_alloc(a, sizeof(*v));
	if (!r || !v)
		return CSI_RESOURCE_EXHAUSTED;
	csi__v1__create_volume_response__init(r);
	csi__v1__volume__init(v);
	v->volume_id = arena_printf(a, "ext-%s", cr->name);
	v->capacity_bytes = cr->capacity_range ? cr->capacity_range->required_bytes : 0;
	r->volume = v;
	*resp = &r->base;
	return CSI_OK;
}

/* The controller seam over one shared gRPC client (thread-safe). */
static int bench_grpc_acquire(void *ctx, const char *plugin_id, struct csi_client **client,
			      uint64_t *caps, struct err *e)
{
	*client = ctx;
	*caps = BENCH_CAPS;
	return 0;
}

/* ---- filling a store ---- */

/* The etcd members the stores are on (measure 6); none: SQLite. */
#define BENCH_MEMBERS_MAX 3
static struct etcd_proc bench_members[BENCH_MEMBERS_MAX];
static size_t bench_nmembers;

/* Opens the store named path: the SQLite file, or on etcd the prefix "/<path>/". */
static void bench_store_open(const char *path, struct store **st)
{
	struct err e;

	err_clear(&e);
	if (bench_nmembers > 0) {
		const char *ep[BENCH_MEMBERS_MAX];
		char prefix[300];
		struct store_etcd_config cfg = {
		    .endpoints = ep, .nendpoints = bench_nmembers, .prefix = prefix};

		for (size_t i = 0; i < bench_nmembers; i++)
			ep[i] = bench_members[i].url;

		snprintf(prefix, sizeof(prefix), "%s/", path);
		if (store_etcd_open(&cfg, st, &e) != 0)
			bench_die("open etcd store", e.msg);
		return;
	}
	if (store_sqlite_open(path, st, &e) != 0)
		bench_die("open store", e.msg);
}

/* Writes n volumes vol-NNNNNNN (ready, or creating) into the store at path. */
/*
 * A claim history of MODEL_PAST_CLAIMS_MAX freed claims for vol (what a
 * volume used that often before carries), into *text (len bytes).
 */
static void bench_history(const char *vol, char **text, size_t *len)
{
	struct model_claim past[MODEL_PAST_CLAIMS_MAX];
	char alloc[MODEL_PAST_CLAIMS_MAX][48];
	struct err e;

	for (int i = 0; i < MODEL_PAST_CLAIMS_MAX; i++) {
		snprintf(alloc[i], sizeof(alloc[i]), "alloc-past-%d-%s", i, vol);
		past[i] = (struct model_claim){
		    .alloc_id = alloc[i],
		    .node_id = BENCH_NODE,
		    .plugin_node_id = BENCH_NODE,
		    .mode = MODEL_CLAIM_WRITE,
		    .cap = {MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM},
		    .state = MODEL_CLAIM_FREED,
		    .claimed_ms = 1700000000000 + i * 60000,
		    .updated_ms = 1700000000000 + i * 60000 + 30000,
		    .note = "released"};
	}
	if (model_history_append(NULL, 0, NULL, past, MODEL_PAST_CLAIMS_MAX, text, len, NULL, &e) !=
	    0)
		bench_die("history", e.msg);
}

/*
 * Stores n ready volumes vol-0000000... in path; with CSID_BENCH_HISTORY
 * set, each with a full claim history (a volume used often before: every
 * release then drops the oldest past claim).
 */
static void bench_fill(const char *path, int n, enum model_volume_state state)
{
	bool history = getenv("CSID_BENCH_HISTORY") != NULL;
	struct store_op ops[2 * BENCH_TXN];
	char *texts[2 * BENCH_TXN], ids[BENCH_TXN][32];
	struct store *st = NULL;
	struct err e;
	int k = 0;

	err_clear(&e);
	bench_store_open(path, &st);
	for (int i = 0; i < n; i++) {
		struct arena *a = arena_new();
		struct model_volume *v = a ? arena_alloc(a, sizeof(*v)) : NULL;
		size_t len = 0;

		if (!v)
			bench_die("out of memory", NULL);
		snprintf(ids[k], sizeof(ids[k]), "vol-%07d", i);
		v->id = ids[k];
		v->name = ids[k];
		v->plugin_id = BENCH_PLUGIN;
		v->capacity_min = 1 << 30;
		v->caps = arena_alloc(a, sizeof(*v->caps));
		v->caps[0] = (struct model_capability){MODEL_ACCESS_SINGLE_NODE_WRITER,
						       MODEL_ATTACH_FILE_SYSTEM};
		v->ncaps = 1;
		v->fs_type = "ext4";
		if (model_map_put(a, &v->parameters, "type", "ssd", &e) != 0)
			bench_die("model", e.msg);
		v->state = state;
		if (state == MODEL_VOL_READY) {
			v->external_id = arena_printf(a, "ext-%s", ids[k]);
			v->capacity = 1 << 30;
		}
		v->created_ms = v->updated_ms = 1700000000000;
		if (model_volume_encode(v, MODEL_VIEW_STORE, &texts[k], &len, &e) != 0)
			bench_die("encode", e.msg);
		ops[k] = (struct store_op){STORE_OP_PUT, STORE_VOLUME, ids[k], texts[k], len, 0};
		texts[BENCH_TXN + k] = NULL;
		if (history) {
			bench_history(ids[k], &texts[BENCH_TXN + k], &len);
			ops[BENCH_TXN + k] = (struct store_op){STORE_OP_PUT, STORE_CLAIM_HISTORY,
							       ids[k],       texts[BENCH_TXN + k],
							       len,          0};
		}
		arena_free(a);
		if (++k == BENCH_TXN || i == n - 1) {
			/* The histories after the volumes: one transaction for both. */
			if (history)
				memmove(&ops[k], &ops[BENCH_TXN], (size_t)k * sizeof(ops[0]));
			if (store_txn(st, ops, (size_t)(history ? 2 * k : k), NULL, &e) != 0)
				bench_die("fill", e.msg);
			for (int j = 0; j < k; j++) {
				free(texts[j]);
				free(texts[BENCH_TXN + j]);
			}
			k = 0;
		}
	}
	store_close(st);
}

/* ---- the server in this process ---- */

static int bench_free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	if (port < 0)
		bench_die("no free port", NULL);
	return port;
}

struct bench_srv {
	struct store *store;
	struct server *server;
	struct server_api *api;
	char base[80];
};

/* A directory of test_pki.h certificates: the API is served over HTTPS with them; NULL: plaintext.
 */
static const char *bench_pki;

static void bench_srv_start(struct bench_srv *b, const char *db, struct reconciler_controllers ctl,
			    int workers, int concurrency, bool api)
{
	struct server_config sc = {0};
	struct err e;
	char addr[32];

	err_clear(&e);
	memset(b, 0, sizeof(*b));
	bench_store_open(db, &b->store);
	sc.store = b->store;
	sc.controllers = ctl;
	sc.workers = workers;
	sc.plugin_concurrency = concurrency;
	sc.node_ttl_ms = 3600 * 1000;
	sc.local_controllers = bench_local;
	if (server_new(&sc, &b->server, &e) != 0 || server_start(b->server, &e) != 0)
		bench_die("server start", e.msg);
	if (!api)
		return;
	/* A port the kernel just handed out and took back: free unless raced. */
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", bench_free_port());
	{
		struct server_api_config ac = {.server = b->server, .tcp_addr = addr};
		char cert[300], key[300];

		if (bench_pki) {
			snprintf(cert, sizeof(cert), "%s/server.pem", bench_pki);
			snprintf(key, sizeof(key), "%s/server.key", bench_pki);
			ac.tls.cert_file = cert;
			ac.tls.key_file = key;
		}
		if (server_api_start(&ac, &b->api, &e) != 0)
			bench_die("server api start", e.msg);
	}
	snprintf(b->base, sizeof(b->base), "%s://%s", bench_pki ? "https" : "http", addr);
}

static void bench_srv_stop(struct bench_srv *b)
{
	server_api_stop(b->api);
	server_free(b->server);
	store_close(b->store);
	memset(b, 0, sizeof(*b));
}

/* Waits until the reconciler has nothing queued, busy or parked; fails on a failing item. */
static void bench_srv_idle(struct bench_srv *b)
{
	double deadline = bench_now() + BENCH_WAIT_MS / 1000.0;
	int queued = 1, failing = 0;

	for (;;) {
		reconciler_counts(server_reconciler(b->server), &queued, &failing);
		if (failing)
			bench_die("reconciler items failing", NULL);
		if (queued == 0)
			return;
		if (bench_now() > deadline)
			bench_die("reconciler never idle", NULL);
		usleep(500);
	}
}

/* Counts the volumes of the store in state, and those with claims or publications. */
static void bench_count(struct store *st, enum model_volume_state state, int *in_state, int *busy)
{
	char after[64] = "";
	struct err e;

	*in_state = *busy = 0;
	err_clear(&e);
	for (;;) {
		struct store_list l;
		bool more;

		if (store_list(st, STORE_VOLUME, NULL, after, 1000, &l, &e) != 0)
			bench_die("list", e.msg);
		for (size_t i = 0; i < l.n; i++) {
			struct arena *a = arena_new();
			struct model_volume *v = NULL;

			if (!a || model_volume_decode(a, l.objs[i].value, l.objs[i].len, &v, &e))
				bench_die("decode", e.msg);
			*in_state += v->state == state;
			*busy += v->nclaims > 0 || v->npubs > 0;
			arena_free(a);
		}
		more = l.more && l.n;
		if (l.n)
			snprintf(after, sizeof(after), "%s", l.objs[l.n - 1].id);
		store_list_free(&l);
		if (!more)
			return;
	}
}

/* ---- 1. claim + release cycles ---- */

/* The node the claims are for, with the plugin's node service. */
static const char bench_node_doc[] =
    "{\"plugins\": [{\"plugin_id\": \"" BENCH_PLUGIN "\", \"type\": \"node\", "
    "\"healthy\": true, \"health\": \"healthy\", \"version\": \"1.0.0\", "
    "\"capabilities\": [], \"plugin_node_id\": \"" BENCH_NODE "\"}]}";

/* etcd's side of a run, summed over every member (zeros without etcd). */
static void bench_etcd_use(struct etcd_proc_usage *u)
{
	*u = (struct etcd_proc_usage){0};
	for (size_t i = 0; i < bench_nmembers; i++) {
		struct etcd_proc_usage m;

		etcd_proc_usage(&bench_members[i], &m);
		u->cpu_s += m.cpu_s;
		u->range += m.range;
		u->txn += m.txn;
	}
}

struct bench_client {
	pthread_t thread;
	struct http_client *http;
	int first, n; /* volumes vol-<first> .. vol-<first + n - 1> */
	int rep;
	bool wait_publish; /* the agent's flow: GET until published before the release */
	int reuse; /* 0: a volume of its own for each cycle; else the cycles go round this many */
	long requests;
	long retries; /* claims refused while the volume's last claim was not freed yet */
	double cpu; /* this client thread's CPU time, s */
	double sys; /* the system part of it */
	long csw; /* and its context switches */
	const char *failed;
};

/* Context switches (voluntary and not) of the calling thread, or of the process. */
static long bench_csw(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return ru.ru_nvcsw + ru.ru_nivcsw;
}

/* System CPU time of the calling thread, or of the process, in seconds. */
static double bench_sys(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* CPU time (user + system) of the calling thread, or of the process, in seconds. */
static double bench_cpu(int who)
{
	struct rusage ru;

	getrusage(who, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static const char *bench_pub_state(json_t *v)
{
	json_t *p = json_array_get(json_object_get(v, "publications"), 0);

	return p ? json_string_value(json_object_get(p, "state")) : NULL;
}

static void *bench_client_run(void *arg)
{
	struct bench_client *c = arg;
	char path[128], body[256];

	for (int k = 0; k < c->n && !c->failed; k++) {
		int i = c->first + (c->reuse ? k % c->reuse : k);
		json_t *v = NULL;
		json_int_t index;
		const char *ps;
		long st;

		snprintf(path, sizeof(path), "/v1/volume/vol-%07d/claim", i);
		snprintf(body, sizeof(body),
			 "{\"alloc_id\": \"alloc-%d-%d\", \"node_id\": \"" BENCH_NODE
			 "\", \"mode\": \"write\", \"access_mode\": \"single-node-writer\", "
			 "\"attachment_mode\": \"file-system\"}",
			 c->rep, c->first + k);
		st = http_client_json(c->http, "PUT", path, body, &v);
		c->requests++;
		/* A volume used again before the reconciler freed its last claim: a moment later.
		 */
		while ((st == 409 || st == 412) && c->reuse && c->retries < 100000) {
			json_decref(v);
			v = NULL;
			nanosleep(&(struct timespec){0, 200000}, NULL);
			c->retries++;
			st = http_client_json(c->http, "PUT", path, body, &v);
			c->requests++;
		}
		if (st != 200) {
			c->failed = "claim";
			json_decref(v);
			break;
		}
		/* Wait for ControllerPublishVolume, as the agent does before it mounts. */
		while (c->wait_publish &&
		       ((ps = bench_pub_state(v)) == NULL || strcmp(ps, "published") != 0)) {
			index = json_integer_value(json_object_get(v, "modify_index"));
			json_decref(v);
			v = NULL;
			snprintf(path, sizeof(path), "/v1/volume/vol-%07d?index=%lld&wait=10s", i,
				 (long long)index);
			st = http_client_json(c->http, "GET", path, NULL, &v);
			c->requests++;
			if (st != 200) {
				c->failed = "get";
				break;
			}
		}
		json_decref(v);
		if (c->failed)
			break;
		snprintf(path, sizeof(path), "/v1/volume/vol-%07d/release", i);
		snprintf(body, sizeof(body), "{\"alloc_id\": \"alloc-%d-%d\"}", c->rep,
			 c->first + k);
		if (http_client_do(c->http, "PUT", path, body, NULL, NULL, 0) != 200)
			c->failed = "release";
		c->requests++;
	}
	c->cpu = bench_cpu(RUSAGE_THREAD);
	c->sys = bench_sys(RUSAGE_THREAD);
	c->csw = bench_csw(RUSAGE_THREAD);
	return NULL;
}

/*
 * Under valgrind --tool=callgrind with $CSID_BENCH_CALLGRIND set: zeroes
 * (-z) or dumps (-d) the counts of every thread, so that one dump holds
 * the cycles of one repeat alone (no fill, no server start).
 */
static void bench_callgrind(const char *what)
{
	char pid[16];
	char *argv[] = {"callgrind_control", (char *)what, pid, NULL};
	posix_spawn_file_actions_t fa;
	pid_t child;
	int status = 0, rc;

	if (!getenv("CSID_BENCH_CALLGRIND"))
		return;
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	/* Its chatter stays out of the figures. */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&child, argv[0], &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		bench_die("callgrind_control failed", what);
}

/*
 * Under `perf stat -D -1 --control fifo:CTL,ACK` with $CSID_BENCH_PERF_CTL
 * and $CSID_BENCH_PERF_ACK naming those fifos: enables (what "enable") or
 * disables ("disable") the counters around each repeat, so that the counts
 * (syscalls, context switches) are those of the cycles alone.
 */
static void bench_perf(const char *what)
{
	const char *ctl = getenv("CSID_BENCH_PERF_CTL"), *ack = getenv("CSID_BENCH_PERF_ACK");
	char buf[16];
	int fd;

	if (!ctl || !ack)
		return;
	fd = open(ctl, O_WRONLY);
	if (fd < 0 || write(fd, what, strlen(what)) < 0 || write(fd, "\n", 1) != 1)
		bench_die("perf control fifo", ctl);
	close(fd);
	fd = open(ack, O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf)) <= 0)
		bench_die("perf ack fifo", ack);
	close(fd);
}

/*
 * One variant of the cycles: repeats runs of bench_ncycles() cycles on volumes
 * not used before (from *next_vol on), on the server b.
 */
/* A keep-alive client of b's API (trusting bench_pki's CA over HTTPS). */
static struct http_client *bench_http(const struct bench_srv *b)
{
	struct http_client *h = http_client_new(b->base);
	char ca[300];

	if (h && bench_pki) {
		snprintf(ca, sizeof(ca), "%s/ca.pem", bench_pki);
		http_client_tls(h, ca, NULL, NULL);
	}
	return h;
}

static void bench_cycles_variant(struct bench_srv *b, struct bench_fake *fake, int repeats,
				 bool wait_publish, int *next_vol)
{
	const char *name = wait_publish ? (bench_nmembers == 3  ? "etcd3_claim_wait_release"
					   : bench_nmembers > 0 ? "etcd_claim_wait_release"
					   : bench_pki          ? "claim_wait_release_tls"
								: "claim_wait_release")
					: (bench_nmembers == 3  ? "etcd3_claim_release"
					   : bench_nmembers > 0 ? "etcd_claim_release"
					   : bench_pki          ? "claim_release_tls"
								: "claim_release");
	int per = bench_ncycles() / BENCH_CLIENTS, pub0, unpub0;
	struct bench_client cl[BENCH_CLIENTS];
	char named[64];
	double rt[16], freed[16], cpu[16], writes[16], csw[16];

	/* Volumes used again are told apart in the figures' names. */
	snprintf(named, sizeof(named), "%s%s", name, bench_reuse() ? "_reuse" : "");
	name = named;
	pub0 = atomic_load(&fake->calls[CSI_RPC_CONTROLLER_PUBLISH_VOLUME]);
	unpub0 = atomic_load(&fake->calls[CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME]);
	for (int r = 0; r < repeats; r++) {
		long requests = 0, retries = 0;
		double t0, t1, cpu0, sys0, client_cpu = 0, client_sys = 0, sys;
		long csw0, client_csw = 0;
		uint64_t index0 = store_index(b->store), txns0 = 0, txns1 = 0, calls0 = 0,
			 calls1 = 0;
		bool sqlite = bench_nmembers == 0;
		uint64_t commits0 = sqlite ? store_sqlite_commits(b->store) : 0;
		uint64_t pages0 = sqlite ? store_sqlite_pages(b->store) : 0;
		struct etcd_proc_usage eu0, eu1;

		for (int i = 0; i < BENCH_CLIENTS; i++) {
			cl[i] = (struct bench_client){.first = *next_vol + i * per,
						      .n = per,
						      .rep = r,
						      .wait_publish = wait_publish,
						      .reuse = bench_reuse()};
			if (!(cl[i].http = bench_http(b)))
				bench_die("http client", NULL);
		}
		bench_etcd_use(&eu0);
		if (bench_nmembers > 0)
			store_etcd_txn_stats(b->store, &txns0, &calls0);
		t0 = bench_now();
		bench_callgrind("-z");
		bench_perf("enable");
		cpu0 = bench_cpu(RUSAGE_SELF);
		sys0 = bench_sys(RUSAGE_SELF);
		csw0 = bench_csw(RUSAGE_SELF);
		for (int i = 0; i < BENCH_CLIENTS; i++)
			if (pthread_create(&cl[i].thread, NULL, bench_client_run, &cl[i]) != 0)
				bench_die("pthread_create", NULL);
			else
				pthread_setname_np(cl[i].thread, "bench-client");
		for (int i = 0; i < BENCH_CLIENTS; i++) {
			pthread_join(cl[i].thread, NULL);
			http_client_free(cl[i].http);
			requests += cl[i].requests;
			client_cpu += cl[i].cpu;
			client_sys += cl[i].sys;
			client_csw += cl[i].csw;
			retries += cl[i].retries;
			if (cl[i].failed)
				bench_die("cycle failed at", cl[i].failed);
		}
		t1 = bench_now();
		*next_vol += per * BENCH_CLIENTS;
		bench_srv_idle(b);
		bench_perf("disable");
		bench_callgrind("-d");
		freed[r] = (double)(per * BENCH_CLIENTS) / (bench_now() - t0);
		writes[r] = (double)(store_index(b->store) - index0) / (per * BENCH_CLIENTS);
		if (sqlite)
			printf("  repeat %d: %.2f SQLite commits per cycle (group commit), %.2f "
			       "pages per commit\n",
			       r + 1,
			       (double)(store_sqlite_commits(b->store) - commits0) /
				   (per * BENCH_CLIENTS),
			       (double)(store_sqlite_pages(b->store) - pages0) /
				   (double)(store_sqlite_commits(b->store) - commits0));
		/* The server's CPU: the process's but the clients' threads. */
		cpu[r] = (bench_cpu(RUSAGE_SELF) - cpu0 - client_cpu) / (per * BENCH_CLIENTS);
		sys = (bench_sys(RUSAGE_SELF) - sys0 - client_sys) / (per * BENCH_CLIENTS);
		csw[r] =
		    (double)(bench_csw(RUSAGE_SELF) - csw0 - client_csw) / (per * BENCH_CLIENTS);
		rt[r] = (double)requests / (t1 - t0);
		bench_etcd_use(&eu1);
		if (bench_nmembers > 0) {
			/* Coalesced transactions share a revision: count them too. */
			store_etcd_txn_stats(b->store, &txns1, &calls1);
			printf(
			    "  repeat %d: etcd CPU %.0f us per cycle (all members), %.2f Range and "
			    "%.2f Txn calls per cycle; the server's %.2f store transactions per "
			    "cycle went in %.2f Txns\n",
			    r + 1, (eu1.cpu_s - eu0.cpu_s) / (per * BENCH_CLIENTS) * 1e6,
			    (eu1.range - eu0.range) / (per * BENCH_CLIENTS),
			    (eu1.txn - eu0.txn) / (per * BENCH_CLIENTS),
			    (double)(txns1 - txns0) / (per * BENCH_CLIENTS),
			    (double)(calls1 - calls0) / (per * BENCH_CLIENTS));
		}
		printf("  repeat %d: %ld requests (%.2f per cycle) in %.2f s, freed after %.2f s, "
		       "server CPU %.0f us per cycle (%.0f system), clients %.0f us, %.2f store "
		       "writes "
		       "per cycle, %.1f server context switches per cycle\n",
		       r + 1, requests, (double)requests / (per * BENCH_CLIENTS), t1 - t0,
		       (double)(per * BENCH_CLIENTS) / freed[r], cpu[r] * 1e6, sys * 1e6,
		       client_cpu / (per * BENCH_CLIENTS) * 1e6, writes[r], csw[r]);
		if (cl[0].reuse)
			printf(
			    "  repeat %d: each client's cycles went round %d volumes; %ld claims "
			    "came before the last one's release was done and were made again\n",
			    r + 1, cl[0].reuse, retries);
	}
	printf("%s server_cpu_us_per_cycle median=%.0f (2 idle cores: at most %.0f cycles/s)\n",
	       name, bench_stat_median(cpu, repeats) * 1e6, 2.0 / bench_stat_median(cpu, repeats));
	printf("%s api_round_trips_per_s median=%.0f (%s; %d clients)\n", name,
	       bench_stat_median(rt, repeats),
	       wait_publish ? "claim, blocking GETs until published, release"
			    : "claim, release at once",
	       BENCH_CLIENTS);
	printf("%s cycles_to_freed_per_s median=%.0f n=%d x %d, ControllerPublish=%d "
	       "ControllerUnpublish=%d, store writes per cycle %.2f (target >= %d)\n",
	       name, bench_stat_median(freed, repeats), repeats, per * BENCH_CLIENTS,
	       atomic_load(&fake->calls[CSI_RPC_CONTROLLER_PUBLISH_VOLUME]) - pub0,
	       atomic_load(&fake->calls[CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME]) - unpub0,
	       bench_stat_median(writes, repeats), bench_nmembers > 0 ? 1000 : 2000);
	fflush(stdout);
}

/* tls_too: the plaintext cycles, then the same over HTTPS; else plaintext only. */
static void bench_cycles(const char *dir, int repeats, bool tls_too)
{
	struct bench_fake fake = {.client = {bench_fake_call, bench_fake_free, "bench-fake"}};
	struct reconciler_controllers ctl = {bench_acquire, bench_release, &fake.client};
	struct http_client *h;
	struct bench_srv b;
	int next_vol = 0, ready, busy;
	char db[256], pki[300];

	snprintf(db, sizeof(db), "%s/cycles.db", dir);
	snprintf(pki, sizeof(pki), "%s/pki", dir);
	/* Named apart from the server's threads, for perf report --comm. */
	pthread_setname_np(pthread_self(), "bench-fill");
	bench_fill(db, 4 * bench_ncycles() * repeats, MODEL_VOL_READY);
	pthread_setname_np(pthread_self(), "bench_server");
	/* Plaintext, then the same over HTTPS (keep-alive connections both times). */
	for (int tls = 0; tls < (tls_too ? 2 : 1); tls++) {
		if (tls && test_pki_make(pki) != 0)
			bench_die("openssl", "cannot make the certificates");
		bench_pki = tls ? pki : NULL;
		bench_srv_start(&b, db, ctl, 0, 0, true);
		bench_srv_idle(&b);
		h = bench_http(&b);
		if (!h || http_client_do(h, "PUT", "/v1/node/" BENCH_NODE, bench_node_doc, NULL,
					 NULL, 0) != 200)
			bench_die("node registration failed", NULL);
		http_client_free(h);
		bench_cycles_variant(&b, &fake, repeats, false, &next_vol);
		if (!getenv("CSID_BENCH_NOWAIT"))
			bench_cycles_variant(&b, &fake, repeats, true, &next_vol);
		bench_count(b.store, MODEL_VOL_READY, &ready, &busy);
		if (busy != 0)
			bench_die("claims or publications left after the cycles", NULL);
		bench_srv_stop(&b);
	}
	bench_pki = NULL;
}

/* ---- 6b. watch latency between two servers on one etcd ---- */

#define BENCH_WATCH_SAMPLES 50

/* A blocking query on server B, and when it returned. */
struct bench_waiter {
	pthread_t thread;
	struct http_client *http;
	char path[128];
	double done;
	long status;
};

static void *bench_waiter_run(void *arg)
{
	struct bench_waiter *w = arg;

	w->status = http_client_do(w->http, "GET", w->path, NULL, NULL, NULL, 0);
	w->done = bench_now();
	return NULL;
}

/* Prints the median and p99 of lat[0..n) beside those of the writes wr[0..n) (sorts both). */
static void bench_watch_print(const char *name, const char *what, const char *write, double *lat,
			      double *wr, int n)
{
	int p99 = (n * 99) / 100 < n ? (n * 99) / 100 : n - 1;

	bench_stat_sort(lat, n);
	bench_stat_sort(wr, n);
	printf("%s %s median=%.2f p99=%.2f n=%d (%s; %s alone median=%.2f p99=%.2f)\n",
	       bench_nmembers == 3 ? "etcd3" : "etcd", name, bench_stat_median(lat, n), lat[p99], n,
	       what, write, bench_stat_median(wr, n), wr[p99]);
	fflush(stdout);
}

/*
 * The same below the API: a write through store A (which returns once
 * A's own watch delivered it) until store B's store_wait returns it.
 */
static void bench_watch_store(const char *dir, double *lat, double *wr, int n)
{
	struct store *sa, *sb;
	char path[300], id[32];
	struct err e;

	snprintf(path, sizeof(path), "%s/watchstore", dir);
	bench_store_open(path, &sa);
	bench_store_open(path, &sb);
	for (int i = 0; i < n; i++) {
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, "x", 1, STORE_ANY};
		uint64_t before = store_index(sb), index;
		double t0, t1;

		snprintf(id, sizeof(id), "w-%d", i);
		t0 = bench_now();
		if (store_txn(sa, &op, 1, &index, &e) != 0)
			bench_die("watch latency: store write", e.msg);
		t1 = bench_now();
		while (store_wait(sb, before, 10000) < index)
			if (bench_now() - t0 > 10)
				bench_die("watch latency: store B never saw the write", NULL);
		lat[i] = (bench_now() - t0) * 1e3;
		wr[i] = (t1 - t0) * 1e3;
	}
	bench_watch_print("watch_latency_store_ms", "store A's write to store B's store_wait",
			  "the write", lat, wr, n);
	store_close(sb);
	store_close(sa);
}

/*
 * Two servers on the same etcd prefix: a blocking GET of a volume waits
 * on server B, a claim of it goes through server A; the latency is from
 * sending the claim to B's answer (the write's commit, etcd's watch
 * event to B, B's wake-up), beside the claim's own round trip.
 */
static void bench_watch_latency(const char *dir, int repeats)
{
	struct bench_fake fake = {.client = {bench_fake_call, bench_fake_free, "bench-fake"}};
	struct reconciler_controllers ctl = {bench_acquire, bench_release, &fake.client};
	int n = BENCH_WATCH_SAMPLES * repeats;
	double *lat = calloc((size_t)n, sizeof(double)), *wr = calloc((size_t)n, sizeof(double));
	struct bench_srv a, b;
	struct http_client *ha, *hb;
	char db[256];

	snprintf(db, sizeof(db), "%s/watch.db", dir);
	bench_fill(db, n, MODEL_VOL_READY);
	bench_srv_start(&a, db, ctl, 0, 0, true);
	bench_srv_start(&b, db, ctl, 0, 0, true);
	ha = bench_http(&a);
	hb = bench_http(&b);
	if (!lat || !wr || !ha || !hb ||
	    http_client_do(ha, "PUT", "/v1/node/" BENCH_NODE, bench_node_doc, NULL, NULL, 0) != 200)
		bench_die("watch latency set-up failed", NULL);
	for (int i = 0; i < n; i++) {
		struct bench_waiter w = {.http = bench_http(&b)};
		char path[128], body[256];
		json_t *v = NULL;
		double t0;

		/*
		 * A volume not used before: nothing but this claim changes it (no
		 * wait for the reconciler, which runs on whichever server leads).
		 */
		snprintf(path, sizeof(path), "/v1/volume/vol-%07d", i);
		if (!w.http || http_client_json(hb, "GET", path, NULL, &v) != 200)
			bench_die("watch latency: get", NULL);
		snprintf(w.path, sizeof(w.path), "%s?index=%lld&wait=30s", path,
			 (long long)json_integer_value(json_object_get(v, "modify_index")));
		json_decref(v);
		if (pthread_create(&w.thread, NULL, bench_waiter_run, &w) != 0)
			bench_die("pthread_create", NULL);
		/* Let the query park on B (a benchmark may wait; the figure does not include it).
		 */
		usleep(20000);
		snprintf(path, sizeof(path), "/v1/volume/vol-%07d/claim", i);
		snprintf(body, sizeof(body),
			 "{\"alloc_id\": \"w-%d\", \"node_id\": \"" BENCH_NODE
			 "\", \"mode\": \"write\", \"access_mode\": \"single-node-writer\", "
			 "\"attachment_mode\": \"file-system\"}",
			 i);
		t0 = bench_now();
		if (http_client_do(ha, "PUT", path, body, NULL, NULL, 0) != 200)
			bench_die("watch latency: claim", NULL);
		wr[i] = (bench_now() - t0) * 1e3;
		pthread_join(w.thread, NULL);
		http_client_free(w.http);
		if (w.status != 200)
			bench_die("watch latency: blocking query", NULL);
		lat[i] = (w.done - t0) * 1e3;
	}
	bench_watch_print("watch_latency_ms",
			  "claim through server A to the blocking query on server B answering",
			  "the claim", lat, wr, n);
	http_client_free(ha);
	http_client_free(hb);
	bench_srv_stop(&b);
	bench_srv_stop(&a);
	bench_watch_store(dir, lat, wr, n);
	free(lat);
	free(wr);
}

/* ---- 2. restart with 10,000 volumes that need no work ---- */

static void bench_settle(const char *dir, int repeats)
{
	struct bench_fake fake = {.client = {bench_fake_call, bench_fake_free, "bench-fake"}};
	struct reconciler_controllers ctl = {bench_acquire, bench_release, &fake.client};
	double v[16], open_s[16];
	struct bench_srv b;
	char db[256];

	snprintf(db, sizeof(db), "%s/settle.db", dir);
	bench_fill(db, BENCH_SETTLE_VOLUMES, MODEL_VOL_READY);
	for (int r = 0; r < repeats; r++) {
		double t0 = bench_now(), t1;
		struct store *st = NULL;
		struct err e;

		/* The open alone, for the record (the server below opens it again). */
		if (store_sqlite_open(db, &st, &e) != 0)
			bench_die("open store", e.msg);
		open_s[r] = bench_now() - t0;
		store_close(st);
		t0 = bench_now();
		bench_srv_start(&b, db, ctl, 0, 0, false);
		t1 = bench_now();
		bench_srv_idle(&b);
		v[r] = bench_now() - t0;
		printf("  repeat %d: start %.0f ms, idle after %.0f ms\n", r + 1, (t1 - t0) * 1e3,
		       v[r] * 1e3);
		bench_srv_stop(&b);
	}
	printf("restart_settle_10000_ms median=%.0f n=%d store_open_ms=%.1f (target <= 1000)\n",
	       bench_stat_median(v, repeats) * 1e3, repeats,
	       bench_stat_median(open_s, repeats) * 1e3);
	fflush(stdout);
}

/* ---- 3. 10,000 CreateVolume over a unix socket ---- */

static double bench_create_run(const char *dir, struct csi_client *client, int workers,
			       int concurrency)
{
	struct reconciler_controllers ctl = {bench_grpc_acquire, bench_release, client};
	struct bench_srv b;
	int ready, busy;
	char db[256];
	double t0, t;

	snprintf(db, sizeof(db), "%s/create-%d-%d.db", dir, workers, concurrency);
	bench_fill(db, BENCH_CREATE_VOLUMES, MODEL_VOL_CREATING);
	t0 = bench_now();
	bench_srv_start(&b, db, ctl, workers, concurrency, false);
	bench_srv_idle(&b);
	t = bench_now() - t0;
	printf("  workers=%d: %.2f SQLite commits per volume created (group commit)\n", workers,
	       (double)store_sqlite_commits(b.store) / BENCH_CREATE_VOLUMES);
	bench_count(b.store, MODEL_VOL_READY, &ready, &busy);
	if (ready != BENCH_CREATE_VOLUMES) {
		printf("  %d of %d ready\n", ready, BENCH_CREATE_VOLUMES);
		bench_die("not every volume became ready", db);
	}
	bench_srv_stop(&b);
	unlink(db);
	return t;
}

/* setting: "W:P" runs only workers W with plugin_concurrency P; NULL: the usual three. */
static void bench_create(const char *dir, int repeats, const char *setting)
{
	int settings[][2] = {{4, 1}, {4, 4}, {8, 8}};
	size_t nsettings = sizeof(settings) / sizeof(settings[0]);
	char endpoint[300];
	struct csi_server *srv = NULL;
	struct csi_client *client = NULL;
	struct err e;

	err_clear(&e);
	snprintf(endpoint, sizeof(endpoint), "unix://%s/plugin.sock", dir);
	if (csi_server_new(endpoint, 4, bench_plugin_handler, NULL, &srv, &e) != 0 ||
	    csi_server_start(srv, &e) != 0 || csi_client_grpc_new(endpoint, &client, &e) != 0)
		bench_die("plugin", e.msg);
	if (setting && sscanf(setting, "%d:%d", &settings[0][0], &settings[0][1]) == 2)
		nsettings = 1;
	for (size_t s = 0; s < nsettings; s++) {
		double v[16];

		for (int r = 0; r < repeats; r++)
			v[r] = bench_create_run(dir, client, settings[s][0], settings[s][1]);
		printf("create_10000_s workers=%d plugin_concurrency=%d median=%.2f n=%d "
		       "(target <= 3)\n",
		       settings[s][0], settings[s][1], bench_stat_median(v, repeats), repeats);
		fflush(stdout);
	}
	csi_client_free(client);
	csi_server_free(srv);
}

/* The process_resident_memory_bytes sample of a metrics text, or -1. */
static double bench_rss(const char *text)
{
	const char *p = strstr(text, "\nprocess_resident_memory_bytes ");

	return p ? strtod(p + strlen("\nprocess_resident_memory_bytes "), NULL) : -1;
}

/*
 * 6. GET /v1/metrics of that child: the time from its start until the
 * catalogue counts show every volume, then median and p99 of
 * BENCH_LIST_REQUESTS scrapes, and its resident memory before and after them.
 */
static void bench_scrape(struct server_proc *s, double t0)
{
	static const char want[] =
	    "csid_volumes{plugin=\"" BENCH_PLUGIN "\",state=\"ready\"} 100000\n";
	double lat[BENCH_LIST_REQUESTS], rss0 = -1, rss1 = -1;
	size_t bytes = 0;

	for (;;) {
		char *text = NULL;
		bool done;

		if (http_client_do(s->http, "GET", "/v1/metrics", NULL, &text, NULL, 0) != 200 ||
		    !text)
			bench_die("metrics failed", s->log);
		done = strstr(text, want) != NULL;
		free(text);
		if (done)
			break;
		if (bench_now() - t0 > BENCH_WAIT_MS / 1000.0)
			bench_die("metrics never counted every volume", s->log);
		usleep(10000);
	}
	printf("  metrics counted %d volumes %.2f s after start\n", BENCH_LIST_VOLUMES,
	       bench_now() - t0);
	for (int i = 0; i < BENCH_LIST_REQUESTS + 10; i++) {
		double t = bench_now();
		char *text = NULL;

		if (http_client_do(s->http, "GET", "/v1/metrics", NULL, &text, NULL, 0) != 200 ||
		    !text || !strstr(text, want))
			bench_die("metrics failed", s->log);
		if (i >= 10)
			lat[i - 10] = bench_now() - t;
		if (i == 10)
			rss0 = bench_rss(text);
		rss1 = bench_rss(text);
		bytes = strlen(text);
		free(text);
	}
	bench_stat_median(lat, BENCH_LIST_REQUESTS);
	printf("metrics_scrape_100000_volumes_ms p50=%.2f p99=%.2f n=%d bytes=%zu (target < 100)\n",
	       lat[BENCH_LIST_REQUESTS / 2] * 1e3, lat[BENCH_LIST_REQUESTS * 99 / 100] * 1e3,
	       BENCH_LIST_REQUESTS, bytes);
	printf("metrics_scrape_rss_mib before=%.1f after=%.1f (%d scrapes; target: no growth)\n",
	       rss0 / 1048576.0, rss1 / 1048576.0, BENCH_LIST_REQUESTS);
	fflush(stdout);
}

/* ---- 4 and 5. the list and the RSS of a `csid server` with 100,000 volumes ---- */

static void bench_big(void)
{
	struct server_proc s;
	double lat[BENCH_LIST_REQUESTS];
	char db[SERVER_PROC_PATH + 16], path[256];
	int pages = 0;
	double t0;

	if (server_proc_init(&s) != 0)
		bench_die("server dir", NULL);
	snprintf(db, sizeof(db), "%s/server.db", s.data_dir);
	if (mkdir(s.data_dir, 0700) != 0)
		bench_die("mkdir", s.data_dir);
	bench_fill(db, BENCH_LIST_VOLUMES, MODEL_VOL_READY);
	if (server_proc_write_config(&s, "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\"}",
				     NULL) != 0 ||
	    server_proc_start(&s) != 0)
		bench_die("csid server start", s.log);
	t0 = bench_now();
	if (!server_proc_wait_ready(&s, BENCH_WAIT_MS))
		bench_die("csid server never ready", s.log);
	/* Settled: the health answer shows nothing queued. */
	for (;;) {
		json_t *h = NULL;
		long st = server_proc_http(&s, "GET", "/v1/status/health", NULL, &h);
		json_int_t q =
		    json_integer_value(json_object_get(json_object_get(h, "reconciler"), "queued"));

		json_decref(h);
		if (st == 200 && q == 0)
			break;
		if (bench_now() - t0 > BENCH_WAIT_MS / 1000.0)
			bench_die("csid server never settled", s.log);
		usleep(10000);
	}
	printf("  csid server with %d volumes settled %.2f s after start\n", BENCH_LIST_VOLUMES,
	       bench_now() - t0);
	bench_scrape(&s, t0);
	for (int i = 0; i < BENCH_LIST_REQUESTS + 10; i++) {
		double t = bench_now();
		char *text = NULL;

		if (http_client_do(s.http, "GET", "/v1/volumes", NULL, &text, NULL, 0) != 200 ||
		    !text || !strstr(text, "vol-0000099"))
			bench_die("list failed", s.log);
		free(text);
		/* The first requests warm up (connection, caches). */
		if (i >= 10)
			lat[i - 10] = bench_now() - t;
	}
	bench_stat_median(lat, BENCH_LIST_REQUESTS);
	printf("list_first_page_100_of_100000_ms p50=%.2f p99=%.2f n=%d (target <= 10)\n",
	       lat[BENCH_LIST_REQUESTS / 2] * 1e3, lat[BENCH_LIST_REQUESTS * 99 / 100] * 1e3,
	       BENCH_LIST_REQUESTS);
	fflush(stdout);
	for (char next[128] = "";;) {
		json_t *j = NULL;
		const char *tok;

		snprintf(path, sizeof(path), "/v1/volumes?per_page=1000%s%s",
			 next[0] ? "&next_token=" : "", next);
		if (server_proc_http(&s, "GET", path, NULL, &j) != 200)
			bench_die("list page failed", s.log);
		pages++;
		tok = json_string_value(json_object_get(j, "next_token"));
		snprintf(next, sizeof(next), "%s", tok ? tok : "");
		json_decref(j);
		if (!next[0])
			break;
	}
	printf("peak_rss_100000_volumes_mib=%.1f (after settling and %d pages of 1000; target "
	       "<= 128)\n",
	       (double)hpp_vmhwm_kb(s.pid) / 1024.0, pages);
	fflush(stdout);
	server_proc_stop(&s, SIGTERM, 60000);
	server_proc_cleanup(&s);
}

/*
 * Measure 6 on an etcd of n members (1 or 3). Their data goes to
 * $CSID_BENCH_ETCD_DIR, by default /dev/shm: tmpfs stands for the fast
 * disk (NVMe, fsync well under a millisecond) a real etcd is given; this
 * machine's disk takes about 3 ms per fsync, which would measure the disk.
 */
static void bench_on_etcd(const char *dir, int repeats, size_t n)
{
	const char *base =
	    getenv("CSID_BENCH_ETCD_DIR") ? getenv("CSID_BENCH_ETCD_DIR") : "/dev/shm";

	memset(bench_members, 0, sizeof(bench_members));
	for (size_t i = 0; i < n; i++)
		bench_members[i].base = base;
	if ((n == 1 ? etcd_proc_start(&bench_members[0]) : etcd_cluster_start(bench_members, n)) !=
	    0)
		bench_die("etcd did not start", NULL);
	for (size_t i = 0; i < n; i++)
		printf("etcd member %zu: %s, data and log in %s\n", i, bench_members[i].url,
		       bench_members[i].dir);
	bench_nmembers = n;
	/* Plaintext only: TLS is the API's cost, measured on SQLite. */
	bench_cycles(dir, repeats, false);
	bench_watch_latency(dir, repeats);
	for (size_t i = 0; i < n; i++)
		etcd_proc_cleanup(&bench_members[i]);
	bench_nmembers = 0;
}

int main(int argc, char **argv)
{
	int repeats = argc > 1 ? atoi(argv[1]) : 3;
	const char *only = argc > 2 ? argv[2] : "";
	char dir[256], log[300];

	if (repeats < 1 || repeats > 16)
		bench_die("usage", "bench_server [repeats 1..16] [cycles|plain|settle|create "
				   "[W:P]|big|etcd|etcd3]");
	signal(SIGPIPE, SIG_IGN);
	bench_dir(dir, sizeof(dir));
	/* The server's log lines go to a file, as a real server's would. */
	snprintf(log, sizeof(log), "%s/server.log", dir);
	if (!freopen(log, "a", stderr))
		bench_die("log file", log);
	printf("directory %s, %d repeats, server log %s\n", dir, repeats, log);
	fflush(stdout);
	if (!*only || !strcmp(only, "cycles") || !strcmp(only, "plain"))
		bench_cycles(dir, repeats, strcmp(only, "plain") != 0);
	if (!*only || !strcmp(only, "settle"))
		bench_settle(dir, repeats);
	if (!*only || !strcmp(only, "create"))
		bench_create(dir, repeats, argc > 3 ? argv[3] : NULL);
	if (!*only || !strcmp(only, "big"))
		bench_big();
	if (!*only || !strcmp(only, "etcd"))
		bench_on_etcd(dir, repeats, 1);
	if (!*only || !strcmp(only, "etcd3"))
		bench_on_etcd(dir, repeats, 3);
	/* CSID_BENCH_KEEP=1 keeps the directory (stores and log) for a look. */
	if (!getenv("CSID_BENCH_KEEP"))
		hpp_rmrf(dir);
	csi_grpc_shutdown();
	return 0;
}
