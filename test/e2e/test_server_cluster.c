/*
 * Three `csid server`s sharing one real etcd (test/lib/etcd_proc.c), with
 * one real csi-hostpath whose socket all three drive (CreateVolume and
 * ControllerPublishVolume slowed down by its fault script, so the
 * reconciler's work is in flight when the leader goes):
 *   - exactly one leads, every server says which; `csictl server members`
 *     lists all three;
 *   - kill -9 of the leader while 20 creates and 20 claims are in flight
 *     (half sent before, half after, by a client that fails over to the
 *     next server): another server takes over, every volume converges,
 *     each is created once in csi-hostpath (40 volumes there, one per
 *     name), no claim is lost or duplicated;
 *   - a node heartbeating a follower only stays ready past node_ttl
 *     without its record being rewritten (the leader counts the
 *     follower's member records, no store write per heartbeat);
 *   - SIGSTOP of the leader past its lease and node_ttl, then SIGCONT
 *     (fencing): it steps down, and from the moment it wakes until it has,
 *     no key but member records changes in etcd, so it wrote nothing (its
 *     nodes, expired on its clock, stay ready);
 *   - allocation reports a follower took reach the report rule: a claim
 *     missing from them is released by the leader, with the rule's note;
 *     once its heartbeats stop, every server's health counts it down;
 *   - the reconciler's status of a volume (its last error) shows on every
 *     server, not only on the leader that runs the reconciler;
 *   - the servers that do not lead wait on the election key's watch
 *     rather than campaign four times a second;
 *   - the election key deleted under a live leader: another is elected,
 *     the first one's next fenced write is refused and it steps down,
 *     logged; its volumes converge, each created once.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "csi/csi_client.h"
#include "csictl_run.h"
#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "server_proc.h"
#include "store/etcd_client.h"

#define WAIT_MS 30000
#define PREFIX "/csid-cluster/"
#define NSERVERS 3
#define NVOLS 20

struct fixture {
	struct etcd_proc etcd;
	struct hpp_proc hp;
	struct server_proc s[NSERVERS];
	struct csictl_runner rn;
	struct csictl_run r;
	/* The heartbeat thread: PUT /v1/node/node-1 to server hb_target every 300 ms. */
	pthread_t hb;
	bool hb_started;
	atomic_bool hb_stop;
	atomic_int hb_target;
	struct http_client *hb_http[NSERVERS];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char cfg[1024];

	if (!f)
		return -1;
	*state = f;
	if (etcd_proc_start(&f->etcd) || hpp_proc_start(&f->hp, NULL) ||
	    hpp_write_file(f->hp.faults, "CreateVolume delay_ms=100\n"
					 "ControllerPublishVolume delay_ms=100\n"))
		return -1;
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"10ms\","
		 " \"backoff_max\": \"200ms\", \"leader_ttl\": \"2s\", \"node_ttl\": \"3s\","
		 " \"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"%s\"], \"prefix\": \"" PREFIX
		 "\", \"dial_timeout\": \"500ms\", \"request_timeout\": \"1s\"},"
		 " \"controller_plugins\": [{\"id\": \"" SERVER_PROC_HP_ID
		 "\", \"socket\": \"%s\"}]}",
		 f->etcd.url, f->hp.endpoint + strlen("unix://"));
	for (int i = 0; i < NSERVERS; i++) {
		if (server_proc_init(&f->s[i]) || server_proc_write_config(&f->s[i], cfg, NULL))
			return -1;
		f->hb_http[i] = http_client_new(f->s[i].base);
		if (!f->hb_http[i])
			return -1;
	}
	f->rn.dir = f->s[0].dir;
	f->rn.deadline_ms = WAIT_MS;
	atomic_init(&f->hb_stop, false);
	atomic_init(&f->hb_target, -1);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	atomic_store(&f->hb_stop, true);
	if (f->hb_started)
		pthread_join(f->hb, NULL);
	csictl_runner_cleanup(&f->rn);
	for (int i = 0; i < NSERVERS; i++) {
		/* A stopped server must run again to die of SIGKILL cleanly. */
		if (f->s[i].pid)
			kill(f->s[i].pid, SIGCONT);
		server_proc_cleanup(&f->s[i]);
		http_client_free(f->hb_http[i]);
	}
	hpp_proc_cleanup(&f->hp);
	etcd_proc_cleanup(&f->etcd);
	free(f);
	return 0;
}

static void *heartbeat_main(void *arg)
{
	struct fixture *f = arg;

	while (!atomic_load(&f->hb_stop)) {
		int t = atomic_load(&f->hb_target);

		if (t >= 0)
			http_client_do(f->hb_http[t], "PUT", "/v1/node/node-1",
				       SERVER_PROC_NODE_BODY, NULL, NULL, 2000);
		hpp_pause_ms(300);
	}
	return NULL;
}

static void heartbeat_to(struct fixture *f, int target)
{
	atomic_store(&f->hb_target, target);
	if (!f->hb_started) {
		assert_int_equal(pthread_create(&f->hb, NULL, heartbeat_main, f), 0);
		f->hb_started = true;
	}
}

static void start_all(struct fixture *f)
{
	for (int i = 0; i < NSERVERS; i++)
		assert_int_equal(server_proc_start(&f->s[i]), 0);
	for (int i = 0; i < NSERVERS; i++)
		if (!server_proc_wait_ready(&f->s[i], WAIT_MS) ||
		    !server_proc_wait_plugin(&f->s[i], SERVER_PROC_HP_ID, WAIT_MS)) {
			server_proc_dump_log(&f->s[i], "start");
			fail_msg("server %d did not start", i);
		}
}

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/*
 * The index of the server that leads, as server `ask` sees it and as the
 * leader itself says (leading), or -1 when none within the deadline.
 * Servers in `skip` (a bit per index) are not asked nor counted.
 */
static int find_leader(struct fixture *f, int ask, unsigned skip, int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;

	while (hpp_now_ms() < deadline) {
		json_t *st = NULL, *mine = NULL;
		const char *addr;

		if (server_proc_http(&f->s[ask], "GET", "/v1/status/leader", NULL, &st) == 200 &&
		    json_is_object(json_object_get(st, "leader"))) {
			addr = jstr(json_object_get(st, "leader"), "address");
			for (int i = 0; i < NSERVERS; i++) {
				if ((skip >> i & 1) || strcmp(addr, f->s[i].addr) != 0)
					continue;
				if (server_proc_http(&f->s[i], "GET", "/v1/status/leader", NULL,
						     &mine) == 200 &&
				    json_is_true(json_object_get(mine, "leading"))) {
					json_decref(mine);
					json_decref(st);
					return i;
				}
				json_decref(mine);
				mine = NULL;
			}
		}
		json_decref(st);
		hpp_pause_ms(50);
	}
	return -1;
}

/*
 * Sends a request to server first, then to the next ones, while one
 * cannot be reached or answers 503 (a client failing over, as csictl and
 * agents do). Returns the HTTP status of the last try.
 */
static long send_any(struct fixture *f, int first, const char *method, const char *path,
		     const char *body)
{
	long st = -1;

	for (int k = 0; k < NSERVERS; k++) {
		struct server_proc *s = &f->s[(first + k) % NSERVERS];

		if (!s->pid)
			continue;
		st = server_proc_http(s, method, path, body, NULL);
		if (st > 0 && st != 503)
			return st;
	}
	return st;
}

/* Every volume ready, each claim claimed and each publication published. */
static bool settled(json_t *list)
{
	json_t *v, *x;
	size_t i, k;

	if (json_array_size(json_object_get(list, "volumes")) != 2 * NVOLS)
		return false;
	json_array_foreach(json_object_get(list, "volumes"), i, v)
	{
		if (strcmp(jstr(v, "state"), "ready") != 0)
			return false;
		json_array_foreach(json_object_get(v, "claims"), k,
				   x) if (strcmp(jstr(x, "state"), "claimed") != 0) return false;
		json_array_foreach(json_object_get(v, "publications"), k,
				   x) if (strcmp(jstr(x, "state"), "published") != 0) return false;
	}
	return true;
}

static json_t *find(json_t *list, const char *id)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(list, "volumes"), i,
			   v) if (strcmp(jstr(v, "id"), id) == 0) return v;
	return NULL;
}

/* Runs csictl with args against every server's address. */
static void run_csictl(struct fixture *f, char *const *args)
{
	char env[256];
	char *envv[] = {env, NULL};

	snprintf(env, sizeof(env), "CSID_ADDR=%s,%s,%s", f->s[0].base, f->s[1].base, f->s[2].base);
	csictl_runner_run(&f->rn, &f->r, envv, args);
}

static bool three_members(json_t *doc)
{
	return json_array_size(json_object_get(doc, "members")) == NSERVERS;
}

static void test_kill_leader_in_flight(void **state)
{
	struct fixture *f = *state;
	char *members[] = {"server", "members", NULL};
	char path[128], body[256], ids[4 * NVOLS][80];
	json_t *list = NULL;
	int64_t deadline, killed_ms = 0;
	int leader, next, n;

	start_all(f);
	leader = find_leader(f, 0, 0, WAIT_MS);
	assert_true(leader >= 0);
	for (int i = 0; i < NSERVERS; i++)
		assert_int_equal(find_leader(f, i, 0, WAIT_MS), leader);
	assert_true(server_proc_wait_doc(&f->s[0], "/v1/status/members", three_members, WAIT_MS));
	run_csictl(f, members);
	if (f->r.status != 0)
		print_message("%s%s", f->r.out, f->r.err);
	assert_int_equal(f->r.status, 0);
	for (int i = 0; i < NSERVERS; i++)
		assert_non_null(strstr(f->r.out, f->s[i].addr));
	assert_non_null(strstr(f->r.out, "yes"));
	heartbeat_to(f, (leader + 1) % NSERVERS);
	assert_int_equal(send_any(f, leader + 1, "PUT", "/v1/node/node-1", SERVER_PROC_NODE_BODY),
			 200);

	/* Volumes to claim, ready before the storm. */
	for (int i = 0; i < NVOLS; i++) {
		snprintf(path, sizeof(path), "/v1/volume/c-%02d/create", i);
		assert_int_equal(send_any(f, i, "PUT", path, SERVER_PROC_CREATE_BODY), 200);
	}
	for (int i = 0; i < NVOLS; i++) {
		snprintf(path, sizeof(path), "/v1/volume/c-%02d", i);
		assert_true(server_proc_wait_doc(&f->s[i % NSERVERS], path,
						 server_proc_volume_ready, WAIT_MS));
	}
	/* Half the creates and claims, the leader killed, the other half. */
	for (int i = 0; i < NVOLS; i++) {
		if (i == NVOLS / 2) {
			assert_int_equal(server_proc_stop(&f->s[leader], SIGKILL, WAIT_MS) & 0x7f,
					 SIGKILL);
			killed_ms = hpp_now_ms();
		}
		snprintf(path, sizeof(path), "/v1/volume/n-%02d/create", i);
		assert_int_equal(send_any(f, i, "PUT", path, SERVER_PROC_CREATE_BODY), 200);
		snprintf(path, sizeof(path), "/v1/volume/c-%02d/claim", i);
		snprintf(body, sizeof(body),
			 "{\"alloc_id\": \"a-%02d\", \"node_id\": \"node-1\","
			 " \"access_mode\": \"single-node-single-writer\"}",
			 i);
		assert_int_equal(send_any(f, i + 1, "PUT", path, body), 200);
	}
	next = find_leader(f, (leader + 1) % NSERVERS, 1u << leader, WAIT_MS);
	assert_true(next >= 0 && next != leader);
	print_message("new leader after %lld ms (leader_ttl 2s)\n",
		      (long long)(hpp_now_ms() - killed_ms));

	deadline = hpp_now_ms() + WAIT_MS;
	while (hpp_now_ms() < deadline) {
		json_decref(list);
		list = NULL;
		if (server_proc_http(&f->s[next], "GET", "/v1/volumes?per_page=1000", NULL,
				     &list) == 200 &&
		    settled(list))
			break;
		hpp_pause_ms(50);
	}
	if (!settled(list)) {
		server_proc_dump_log(&f->s[next], "no convergence");
		fail_msg("the volumes did not converge on the new leader");
	}
	/* Each claim once, by its allocation; each volume created once in csi-hostpath. */
	for (int i = 0; i < NVOLS; i++) {
		char id[16], alloc[16];
		json_t *v, *claims;

		snprintf(id, sizeof(id), "c-%02d", i);
		snprintf(alloc, sizeof(alloc), "a-%02d", i);
		v = find(list, id);
		assert_non_null(v);
		claims = json_object_get(v, "claims");
		assert_int_equal(json_array_size(claims), 1);
		assert_string_equal(jstr(json_array_get(claims, 0), "alloc_id"), alloc);
		assert_int_equal(json_array_size(json_object_get(v, "publications")), 1);
	}
	n = hpp_list_volumes(f->hp.endpoint, ids, NULL, 4 * NVOLS);
	assert_int_equal(n, 2 * NVOLS);
	for (size_t i = 0; i < json_array_size(json_object_get(list, "volumes")); i++) {
		const char *ext =
		    jstr(json_array_get(json_object_get(list, "volumes"), i), "external_id");
		int seen = 0;

		for (int k = 0; k < n; k++)
			seen += strcmp(ids[k], ext) == 0;
		assert_int_equal(seen, 1);
	}
	json_decref(list);
}

/* One call of etcd's gRPC API from the test; the answer, the caller's. */
static ProtobufCMessage *etcd_do(struct fixture *f, enum etcd_rpc rpc, const ProtobufCMessage *req)
{
	const char *eps[] = {f->etcd.url};
	struct etcd_client_config cc = {.endpoints = eps, .nendpoints = 1};
	struct etcd_client *c = NULL;
	ProtobufCMessage *resp = NULL;
	struct err e;

	assert_int_equal(etcd_client_new(&cc, &c, &e), 0);
	assert_int_equal(etcd_client_call(c, rpc, req, &resp, &e), 0);
	etcd_client_free(c);
	return resp;
}

/* The keys of PREFIX with their revisions; the answer, the caller's. */
static Etcdserverpb__RangeResponse *etcd_prefix_keys(struct fixture *f)
{
	Etcdserverpb__RangeRequest req = ETCDSERVERPB__RANGE_REQUEST__INIT;

	req.key = (ProtobufCBinaryData){strlen(PREFIX), (uint8_t *)PREFIX};
	req.range_end =
	    (ProtobufCBinaryData){strlen("/csid-cluster0"), (uint8_t *)"/csid-cluster0"};
	req.keys_only = true;
	return (Etcdserverpb__RangeResponse *)etcd_do(f, ETCD_RANGE, &req.base);
}

/* etcd's revision now. */
static uint64_t etcd_revision(struct fixture *f)
{
	Etcdserverpb__RangeResponse *resp = etcd_prefix_keys(f);
	uint64_t rev = (uint64_t)resp->header->revision;

	protobuf_c_message_free_unpacked(&resp->base, NULL);
	return rev;
}

/* The keys of PREFIX written after revision `after` (comma-separated). */
static void keys_since(struct fixture *f, uint64_t after, char *out, size_t cap)
{
	Etcdserverpb__RangeResponse *resp = etcd_prefix_keys(f);
	size_t o = 0;

	out[0] = '\0';
	for (size_t i = 0; i < resp->n_kvs; i++) {
		const Mvccpb__KeyValue *kv = resp->kvs[i];

		if ((uint64_t)kv->mod_revision > after)
			o +=
			    (size_t)snprintf(out + o, o < cap ? cap - o : 0, "%s%.*s", o ? "," : "",
					     (int)kv->key.len, (const char *)kv->key.data);
	}
	protobuf_c_message_free_unpacked(&resp->base, NULL);
}

/* Deletes key k behind the servers' backs (a Txn of one delete). */
static void etcd_delete(struct fixture *f, const char *k)
{
	Etcdserverpb__DeleteRangeRequest del = ETCDSERVERPB__DELETE_RANGE_REQUEST__INIT;
	Etcdserverpb__RequestOp op = ETCDSERVERPB__REQUEST_OP__INIT, *ops[1] = {&op};
	Etcdserverpb__TxnRequest req = ETCDSERVERPB__TXN_REQUEST__INIT;

	del.key = (ProtobufCBinaryData){strlen(k), (uint8_t *)k};
	op.request_case = ETCDSERVERPB__REQUEST_OP__REQUEST_REQUEST_DELETE_RANGE;
	op.request_delete_range = &del;
	req.n_success = 1;
	req.success = ops;
	protobuf_c_message_free_unpacked(etcd_do(f, ETCD_TXN, &req.base), NULL);
}

/* The node's modify_index (the answer's X-Csid-Index) and its status. */
static uint64_t node_modify_index(struct fixture *f, int server, char *status, size_t cap)
{
	char *body = NULL;
	uint64_t idx = 0;
	json_t *n;

	assert_int_equal(
	    http_client_do(f->s[server].http, "GET", "/v1/node/node-1", NULL, &body, &idx, 0), 200);
	n = json_loads(body, 0, NULL);
	snprintf(status, cap, "%s", jstr(n, "status"));
	json_decref(n);
	free(body);
	return idx;
}

static void test_paused_leader_fenced(void **state)
{
	struct fixture *f = *state;
	char status[32], keys[8192];
	uint64_t idx, idx2, rev;
	int leader, follower, next, stepped = 0;
	json_t *st = NULL;
	int64_t until;

	start_all(f);
	leader = find_leader(f, 0, 0, WAIT_MS);
	assert_true(leader >= 0);
	follower = (leader + 1) % NSERVERS;
	/* The node heartbeats a follower only: the leader learns of it from member records. */
	heartbeat_to(f, follower);
	assert_true(
	    server_proc_wait_field(&f->s[follower], "/v1/node/node-1", "status", "ready", WAIT_MS));
	idx = node_modify_index(f, follower, status, sizeof(status));
	until = hpp_now_ms() + 4500; /* past node_ttl (3s) */
	while (hpp_now_ms() < until)
		hpp_pause_ms(100);
	idx2 = node_modify_index(f, follower, status, sizeof(status));
	assert_string_equal(status, "ready");
	assert_int_equal(idx2, idx); /* no write per heartbeat */

	/* Paused past its lease (2s) and node_ttl (3s): another leads meanwhile. */
	assert_int_equal(kill(f->s[leader].pid, SIGSTOP), 0);
	next = find_leader(f, follower, 1u << leader, WAIT_MS);
	assert_true(next >= 0 && next != leader);
	until = hpp_now_ms() + 4000;
	while (hpp_now_ms() < until)
		hpp_pause_ms(100);
	assert_true(
	    server_proc_wait_field(&f->s[next], "/v1/node/node-1", "status", "ready", WAIT_MS));
	idx = node_modify_index(f, next, status, sizeof(status));
	rev = etcd_revision(f);
	assert_int_equal(kill(f->s[leader].pid, SIGCONT), 0);

	/* It wakes thinking it leads, with node-1 expired on its clock: it must step down. */
	until = hpp_now_ms() + WAIT_MS;
	while (hpp_now_ms() < until && !stepped) {
		if (server_proc_http(&f->s[leader], "GET", "/v1/status/leader", NULL, &st) == 200)
			stepped = json_is_false(json_object_get(st, "leading"));
		json_decref(st);
		st = NULL;
		if (!stepped)
			hpp_pause_ms(20);
	}
	assert_true(stepped);
	assert_true(server_proc_log_has(&f->s[leader], "stepped down"));
	print_message("the woken leader %s\n", server_proc_log_has(&f->s[leader], "fenced")
						   ? "had a fenced write refused"
						   : "stepped down before any write");
	/*
	 * Since it woke, only member records changed (its own too, once it
	 * stepped down and took a new lease): no object, no election key.
	 */
	keys_since(f, rev, keys, sizeof(keys));
	for (char *save = NULL, *k = strtok_r(keys, ",", &save); k; k = strtok_r(NULL, ",", &save))
		if (strncmp(k, PREFIX "members/", strlen(PREFIX "members/")) != 0)
			fail_msg("written after the paused leader woke: %s", k);
	idx2 = node_modify_index(f, next, status, sizeof(status));
	assert_string_equal(status, "ready");
	assert_int_equal(idx2, idx);
}

static bool leading_false(json_t *doc)
{
	return json_is_false(json_object_get(doc, "leading"));
}

/*
 * The election key vanishes under a leader whose lease still runs (an
 * operator deleted it): another server is elected while the first still
 * believes it leads. Its next fenced write is refused, and it steps down
 * (logged); the volumes it was working converge under the new leader,
 * each created once.
 */
static void test_fenced_write_steps_down(void **state)
{
	struct fixture *f = *state;
	char path[64], ids[16][80];
	int leader, next;

	start_all(f);
	leader = find_leader(f, 0, 0, WAIT_MS);
	assert_true(leader >= 0);
	etcd_delete(f, PREFIX "leader");
	next = find_leader(f, (leader + 1) % NSERVERS, 1u << leader, WAIT_MS);
	assert_true(next >= 0 && next != leader);
	for (int i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "/v1/volume/fv-%d/create", i);
		assert_int_equal(send_any(f, next, "PUT", path, SERVER_PROC_CREATE_BODY), 200);
	}
	assert_true(
	    server_proc_wait_doc(&f->s[leader], "/v1/status/leader", leading_false, WAIT_MS));
	assert_true(server_proc_log_has(&f->s[leader], "a fenced write found the term over"));
	for (int i = 0; i < 5; i++) {
		snprintf(path, sizeof(path), "/v1/volume/fv-%d", i);
		assert_true(
		    server_proc_wait_doc(&f->s[next], path, server_proc_volume_ready, WAIT_MS));
	}
	assert_int_equal(hpp_list_volumes(f->hp.endpoint, ids, NULL, 16), 5);
	assert_int_equal(find_leader(f, leader, 0, WAIT_MS), next);
}

/* node-1's fingerprint from agent instance inst-1, reporting allocation web-1 of v1 or none. */
static char *report_body(bool holds)
{
	json_t *doc = json_loads(SERVER_PROC_NODE_BODY, 0, NULL);
	char *text;

	assert_non_null(doc);
	json_object_set_new(doc, "instance_id", json_string("inst-1"));
	json_object_set_new(doc, "allocations",
			    holds ? json_pack("[{s:s,s:s}]", "volume_id", "v1", "alloc_id", "web-1")
				  : json_array());
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	assert_non_null(text);
	return text;
}

/* A health answer counting one node, down. */
static bool node_down_only(json_t *doc)
{
	json_t *n = json_object_get(doc, "nodes");

	return json_integer_value(json_object_get(n, "down")) == 1 &&
	       json_integer_value(json_object_get(n, "ready")) == 0;
}

/* A volume whose reconciler status carries the fault's error. */
static bool fire_error(json_t *doc)
{
	const char *err = jstr(json_object_get(doc, "status"), "last_error");

	return strstr(err, "disk on fire") != NULL;
}

/*
 * The reconciler runs on the leader only: its status of a volume (here
 * v-bad, whose CreateVolume fails) shows on every server, from the
 * leader's member record.
 */
static void test_status_everywhere(void **state)
{
	struct fixture *f = *state;

	start_all(f);
	assert_true(find_leader(f, 0, 0, WAIT_MS) >= 0);
	assert_int_equal(
	    hpp_write_file(f->hp.faults, "CreateVolume code=UNAVAILABLE msg=\"disk on fire\"\n"),
	    0);
	assert_int_equal(
	    server_proc_put(&f->s[0], "/v1/volume/v-bad/create", SERVER_PROC_CREATE_BODY), 200);
	for (int i = 0; i < NSERVERS; i++)
		if (!server_proc_wait_doc(&f->s[i], "/v1/volume/v-bad", fire_error, WAIT_MS))
			fail_msg("server %d does not show the reconciler's error", i);
}

/*
 * The servers that do not lead follow the election key through the
 * store's watch instead of campaigning every quarter second: with
 * nothing else going on, etcd handles a few transactions in 3 s (each
 * follower's campaign after a TTL of silence), not the 24 of two
 * followers polling, and a leader killed is still replaced.
 */
static void test_followers_watch(void **state)
{
	struct fixture *f = *state;
	struct etcd_proc_usage before, after;
	int leader;

	start_all(f);
	leader = find_leader(f, 0, 0, WAIT_MS);
	assert_true(leader >= 0);
	hpp_pause_ms(1000);
	etcd_proc_usage(&f->etcd, &before);
	hpp_pause_ms(3000);
	etcd_proc_usage(&f->etcd, &after);
	assert_true(before.txn > 0);
	if (after.txn - before.txn >= 8)
		fail_msg("%.0f transactions in 3 s", after.txn - before.txn);
	assert_int_not_equal(server_proc_stop(&f->s[leader], SIGKILL, WAIT_MS), 0);
	assert_true(find_leader(f, (leader + 1) % NSERVERS, 1u << leader, WAIT_MS) >= 0);
}

/* Whether v1's first publication is published, as server s shows it. */
static bool published(struct server_proc *s)
{
	json_t *v = NULL;
	bool ok = server_proc_http(s, "GET", "/v1/volume/v1", NULL, &v) == 200 &&
		  server_proc_volume_published(v);

	json_decref(v);
	return ok;
}

/* The past claim of web-1 on v1 released by the report rule, as server s shows it. */
static bool released_by_report(struct server_proc *s)
{
	json_t *v = NULL, *c;
	bool ok = false;
	size_t i;

	if (server_proc_http(s, "GET", "/v1/volume/v1", NULL, &v) == 200)
		json_array_foreach(json_object_get(v, "past_claims"), i, c) ok =
		    ok || (strcmp(jstr(c, "alloc_id"), "web-1") == 0 &&
			   strstr(jstr(c, "note"), "no longer held by the agent of node node-1"));
	json_decref(v);
	return ok;
}

/*
 * The allocation reports of a node that heartbeats a follower only reach
 * the report rule: web-1, claimed by the agent and then missing from two
 * reports the follower took, is released by the leader with the rule's
 * note (the follower found it, its member record told the leader).
 */
static void test_follower_reports(void **state)
{
	struct fixture *f = *state;
	char *holds = report_body(true), *dropped = report_body(false);
	int leader, fol;
	int64_t deadline;
	bool released = false;

	start_all(f);
	leader = find_leader(f, 0, 0, WAIT_MS);
	assert_true(leader >= 0);
	fol = (leader + 1) % NSERVERS;
	assert_int_equal(server_proc_put(&f->s[fol], "/v1/node/node-1", holds), 200);
	assert_int_equal(
	    server_proc_put(&f->s[fol], "/v1/volume/v1/create", SERVER_PROC_CREATE_BODY), 200);
	assert_true(
	    server_proc_wait_doc(&f->s[fol], "/v1/volume/v1", server_proc_volume_ready, WAIT_MS));
	assert_int_equal(server_proc_put(&f->s[fol], "/v1/node/node-1", holds), 200);
	assert_int_equal(server_proc_put(&f->s[fol], "/v1/volume/v1/claim",
					 "{\"alloc_id\": \"web-1\", \"node_id\": \"node-1\","
					 " \"access_mode\": \"single-node-single-writer\","
					 " \"held_by_agent\": true}"),
			 200);
	deadline = hpp_now_ms() + WAIT_MS;
	while (!published(&f->s[fol]) && hpp_now_ms() < deadline) {
		assert_int_equal(server_proc_put(&f->s[fol], "/v1/node/node-1", holds), 200);
		hpp_pause_ms(300);
	}
	assert_true(published(&f->s[fol]));
	/* The agent drops web-1: its next reports, to the follower only, lack it. */
	while (!released && hpp_now_ms() < deadline) {
		assert_int_equal(server_proc_put(&f->s[fol], "/v1/node/node-1", dropped), 200);
		released = released_by_report(&f->s[fol]);
		hpp_pause_ms(300);
	}
	if (!released) {
		server_proc_dump_log(&f->s[fol], "follower");
		server_proc_dump_log(&f->s[leader], "leader");
	}
	assert_true(released);
	assert_true(server_proc_log_has(&f->s[fol], "lost claim found; the leader releases it"));
	assert_true(server_proc_log_has(&f->s[leader], "lost claim released"));
	assert_false(server_proc_log_has(&f->s[fol], "lost claim released"));
	/* The heartbeats stop: every server's health counts node-1 down once the leader says so. */
	for (int i = 0; i < NSERVERS; i++)
		if (!server_proc_wait_doc(&f->s[i], "/v1/status/health", node_down_only, WAIT_MS))
			fail_msg("server %d does not count node-1 down", i);
	free(holds);
	free(dropped);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_kill_leader_in_flight, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_paused_leader_fenced, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_fenced_write_steps_down, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_follower_reports, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_status_everywhere, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_followers_watch, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
