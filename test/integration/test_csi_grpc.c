/*
 * The gRPC client and server of src/csi against each other, in process: a
 * csi_server with a scripted test handler on a socket in a temporary
 * directory, and the real client. Covers concurrent calls from many
 * threads, deadlines, every status code, a server stop and restart under
 * the same client, undecodable bytes in both directions, unknown methods
 * and endpoint validation, and asynchronous calls (many in flight from one
 * thread, deadlines, a server that goes away, a queue freed with calls in
 * flight, a fake client). A few calls are made with the raw gRPC core API
 * to send what the client never would.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "csi/csi_client.h"
#include "csi/csi_rules.h"
#include "csi/csi_server.h"
#include "hostpath_proc.h"

#define TG_THREADS 8
#define TG_CALLS 400
/* A directory name with bytes that mean something in a URI. */
#define TG_ODD_DIR "a b%41?#;"

struct tg {
	char dir[64];
	char endpoint[128];
	struct csi_server *server;
	struct csi_client *client;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool release; /* lets a blocked handler return */
	int blocked; /* handlers currently blocked */
	int calls; /* handler invocations */
	pid_t caller; /* thread ID whose policy GetPluginInfo records */
	int caller_policy; /* that thread's policy while its call was served */
};

static struct tg tg_state;

static int64_t tg_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Blocks the handler until the test releases it, at most 10 s. */
static void tg_block(struct tg *t)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 10;
	pthread_mutex_lock(&t->lock);
	t->blocked++;
	pthread_cond_broadcast(&t->cond);
	while (!t->release)
		if (pthread_cond_timedwait(&t->cond, &t->lock, &until) == ETIMEDOUT)
			break;
	t->blocked--;
	pthread_mutex_unlock(&t->lock);
}

static int tg_create_volume(const Csi__V1__CreateVolumeRequest *req, ProtobufCMessage **resp,
			    struct arena *a, char *msg)
{
	Csi__V1__CreateVolumeResponse *r = arena_alloc(a, sizeof(*r));
	Csi__V1__Volume *v = arena_alloc(a, sizeof(*v));

	if (!r || !v)
		return CSI_RESOURCE_EXHAUSTED;
	if (!req->name || !*req->name) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "name is required");
		return CSI_INVALID_ARGUMENT;
	}
	csi__v1__create_volume_response__init(r);
	csi__v1__volume__init(v);
	v->volume_id = arena_printf(a, "id-%s", req->name);
	v->capacity_bytes = req->capacity_range ? req->capacity_range->required_bytes : 0;
	r->volume = v;
	*resp = &r->base;
	return CSI_OK;
}

/* Scripted behaviour by volume ID: "block", "code:N", anything else is OK. */
static int tg_delete_volume(struct tg *t, const Csi__V1__DeleteVolumeRequest *req, char *msg)
{
	if (strcmp(req->volume_id, "block") == 0) {
		tg_block(t);
		return CSI_OK;
	}
	if (strncmp(req->volume_id, "code:", 5) == 0) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "scripted %s", req->volume_id);
		return atoi(req->volume_id + 5);
	}
	return CSI_OK;
}

/*
 * A GetCapacity response whose bytes do not decode: an unknown field is
 * packed verbatim, and this one holds a length that runs past the end.
 */
static int tg_garbage(ProtobufCMessage **resp, struct arena *a)
{
	static const uint8_t bad[] = {0xff, 0xff, 0xff, 0x0f};
	Csi__V1__GetCapacityResponse *r = arena_alloc(a, sizeof(*r));
	ProtobufCMessageUnknownField *u = arena_alloc(a, sizeof(*u));

	csi__v1__get_capacity_response__init(r);
	u->tag = 99;
	u->wire_type = PROTOBUF_C_WIRE_TYPE_LENGTH_PREFIXED;
	u->len = sizeof(bad);
	u->data = (uint8_t *)bad;
	r->base.n_unknown_fields = 1;
	r->base.unknown_fields = u;
	*resp = &r->base;
	return CSI_OK;
}

static int tg_handler(void *ctx, enum csi_rpc rpc, const ProtobufCMessage *req,
		      ProtobufCMessage **resp, struct arena *a, char *msg)
{
	struct tg *t = ctx;

	pthread_mutex_lock(&t->lock);
	t->calls++;
	pthread_mutex_unlock(&t->lock);
	switch (rpc) {
	case CSI_RPC_PROBE: {
		Csi__V1__ProbeResponse *r = arena_alloc(a, sizeof(*r));
		Google__Protobuf__BoolValue *b = arena_alloc(a, sizeof(*b));

		csi__v1__probe_response__init(r);
		google__protobuf__bool_value__init(b);
		b->value = 1;
		r->ready = b;
		*resp = &r->base;
		return CSI_OK;
	}
	case CSI_RPC_CREATE_VOLUME:
		return tg_create_volume((const Csi__V1__CreateVolumeRequest *)req, resp, a, msg);
	case CSI_RPC_DELETE_VOLUME:
		return tg_delete_volume(t, (const Csi__V1__DeleteVolumeRequest *)req, msg);
	case CSI_RPC_NODE_GET_CAPABILITIES: {
		/* A handler bug: the wrong response type. */
		Csi__V1__ProbeResponse *r = arena_alloc(a, sizeof(*r));

		csi__v1__probe_response__init(r);
		*resp = &r->base;
		return CSI_OK;
	}
	case CSI_RPC_GET_CAPACITY:
		return tg_garbage(resp, a);
	case CSI_RPC_CONTROLLER_GET_CAPABILITIES:
		return CSI_OK; /* no response: an empty one is sent */
	case CSI_RPC_GET_PLUGIN_INFO: {
		Csi__V1__GetPluginInfoResponse *r = arena_alloc(a, sizeof(*r));

		csi__v1__get_plugin_info_response__init(r);
		r->name = "tg";
		r->vendor_version = "1";
		/* The caller is blocked in its call right now. */
		t->caller_policy = sched_getscheduler(t->caller);
		*resp = &r->base;
		return CSI_OK;
	}
	default:
		snprintf(msg, CSI_STATUS_MSG_MAX, "not in this test");
		return CSI_UNIMPLEMENTED;
	}
}

static void tg_start_server(struct tg *t)
{
	struct err e;
	char tmp[160];

	err_clear(&e);
	assert_int_equal(csi_server_new(t->endpoint, 4, tg_handler, t, &t->server, &e), 0);
	if (csi_server_start(t->server, &e) != 0)
		fail_msg("start: %s", e.msg);
	/* The socket is in place, under its own name only, once start returns. */
	snprintf(tmp, sizeof(tmp), "%s~", t->endpoint + strlen("unix://"));
	assert_int_equal(access(t->endpoint + strlen("unix://"), F_OK), 0);
	assert_int_equal(access(tmp, F_OK), -1);
}

static int tg_setup(void **state)
{
	struct tg *t = &tg_state;
	struct err e;

	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	snprintf(t->dir, sizeof(t->dir), "/tmp/csi-grpc-XXXXXX");
	if (!mkdtemp(t->dir))
		return -1;
	snprintf(t->endpoint, sizeof(t->endpoint), "unix://%s/csi.sock", t->dir);
	tg_start_server(t);
	err_clear(&e);
	if (csi_client_grpc_new(t->endpoint, &t->client, &e) != 0)
		return -1;
	*state = t;
	return 0;
}

static const char *const tg_leftovers[] = {
    "csi.sock",           "csi.sock~",           "file",     "nobody.sock",
    TG_ODD_DIR "/x.sock", TG_ODD_DIR "/x.sock~", TG_ODD_DIR,
};

static int tg_teardown(void **state)
{
	struct tg *t = &tg_state;
	char path[160];

	pthread_mutex_lock(&t->lock);
	t->release = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	csi_client_free(t->client);
	csi_server_free(t->server);
	/* Everything a test may leave, also when it failed half-way. */
	for (size_t i = 0; i < sizeof(tg_leftovers) / sizeof(tg_leftovers[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", t->dir, tg_leftovers[i]);
		if (unlink(path) != 0)
			rmdir(path);
	}
	rmdir(t->dir);
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	(void)state;
	return 0;
}

static void test_probe(void **state)
{
	struct tg *t = *state;
	Csi__V1__ProbeRequest req = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *resp = NULL;
	struct csi_status st;

	assert_int_equal(csi_probe(t->client, &req, &resp, 5000, &st), 0);
	assert_int_equal(st.code, CSI_OK);
	assert_non_null(resp);
	assert_non_null(resp->ready);
	assert_true(resp->ready->value);
	csi_msg_free(&resp->base);
	/* A NULL request is sent as an empty one. */
	assert_int_equal(csi_probe(t->client, NULL, &resp, 5000, &st), 0);
	csi_msg_free(&resp->base);
}

/* The calling thread's scheduling policy; fails the test when it cannot be set. */
static void tg_set_policy(int policy)
{
	struct sched_param sp = {.sched_priority = 0};

	assert_int_equal(pthread_setschedparam(pthread_self(), policy, &sp), 0);
}

/*
 * A blocking call from a SCHED_BATCH thread (an HTTP or reconciler
 * worker) waits for the plugin as SCHED_OTHER, so that the answer wakes it
 * at once, and the thread is a batch thread again after the call
 * (util/sched_wait.h); another thread's policy is left alone.
 */
static void test_batch_caller_waits_as_other(void **state)
{
	struct tg *t = *state;
	Csi__V1__GetPluginInfoRequest req = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	struct csi_status st;

	t->caller = gettid();
	tg_set_policy(SCHED_BATCH);
	t->caller_policy = -1;
	assert_int_equal(csi_get_plugin_info(t->client, &req, NULL, 5000, &st), 0);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	tg_set_policy(SCHED_OTHER);
	assert_int_equal(t->caller_policy, SCHED_OTHER);
	/* A failed call restores the class too. */
	tg_set_policy(SCHED_BATCH);
	assert_int_equal(csi_node_get_info(t->client, NULL, NULL, 5000, &st), CSID_EUNIMPL);
	assert_int_equal(sched_getscheduler(0), SCHED_BATCH);
	tg_set_policy(SCHED_OTHER);
	t->caller_policy = -1;
	assert_int_equal(csi_get_plugin_info(t->client, &req, NULL, 5000, &st), 0);
	assert_int_equal(t->caller_policy, SCHED_OTHER);
	assert_int_equal(sched_getscheduler(0), SCHED_OTHER);
}

struct tg_worker {
	struct tg *t;
	int id;
	int failures;
};

static void *tg_worker_main(void *arg)
{
	struct tg_worker *w = arg;

	for (int i = 0; i < TG_CALLS; i++) {
		Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
		Csi__V1__CapacityRange cap = CSI__V1__CAPACITY_RANGE__INIT;
		Csi__V1__CreateVolumeResponse *resp = NULL;
		struct csi_status st;
		char name[32], want[40];

		snprintf(name, sizeof(name), "t%d-c%d", w->id, i);
		snprintf(want, sizeof(want), "id-%s", name);
		req.name = name;
		cap.required_bytes = (int64_t)w->id * 100000 + i;
		req.capacity_range = &cap;
		if (csi_create_volume(w->t->client, &req, &resp, 10000, &st) != 0 ||
		    !resp->volume || strcmp(resp->volume->volume_id, want) != 0 ||
		    resp->volume->capacity_bytes != cap.required_bytes)
			w->failures++;
		csi_msg_free(resp ? &resp->base : NULL);
	}
	return NULL;
}

static void test_concurrent(void **state)
{
	struct tg *t = *state;
	struct tg_worker w[TG_THREADS];
	pthread_t th[TG_THREADS];

	for (int i = 0; i < TG_THREADS; i++) {
		w[i] = (struct tg_worker){t, i, 0};
		assert_int_equal(pthread_create(&th[i], NULL, tg_worker_main, &w[i]), 0);
	}
	for (int i = 0; i < TG_THREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(w[i].failures, 0);
	}
}

static void test_deadline(void **state)
{
	struct tg *t = *state;
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	struct csi_status st;
	int64_t t0 = tg_now_ms();

	req.volume_id = "block";
	assert_int_equal(csi_delete_volume(t->client, &req, NULL, 200, &st), CSID_ETIMEDOUT);
	assert_int_equal(st.code, CSI_DEADLINE_EXCEEDED);
	assert_true(tg_now_ms() - t0 < 3000);
	pthread_mutex_lock(&t->lock);
	t->release = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void *tg_block_main(void *arg)
{
	struct tg *t = arg;
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	struct csi_status st;

	req.volume_id = "block";
	return (void *)(intptr_t)csi_delete_volume(t->client, &req, NULL, 10000, &st);
}

/* A handler that takes long holds up no other call, even on the same channel. */
static void test_slow_handler(void **state)
{
	struct tg *t = *state;
	int64_t end = tg_now_ms() + 5000;
	struct csi_status st;
	pthread_t th;
	void *rc;
	int blocked = 0;

	assert_int_equal(pthread_create(&th, NULL, tg_block_main, t), 0);
	while (!blocked && tg_now_ms() < end) {
		pthread_mutex_lock(&t->lock);
		blocked = t->blocked;
		pthread_mutex_unlock(&t->lock);
		if (!blocked)
			nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
	}
	assert_int_equal(blocked, 1);
	for (int i = 0; i < 20; i++)
		assert_int_equal(csi_probe(t->client, NULL, NULL, 2000, &st), 0);
	pthread_mutex_lock(&t->lock);
	t->release = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(th, &rc);
	assert_int_equal((int)(intptr_t)rc, 0);
}

static void test_status_codes(void **state)
{
	struct tg *t = *state;

	for (int code = 1; code <= CSI_UNAUTHENTICATED; code++) {
		Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
		Csi__V1__DeleteVolumeResponse *resp = (void *)&req;
		struct csi_status st;
		char id[16], want[32];

		snprintf(id, sizeof(id), "code:%d", code);
		snprintf(want, sizeof(want), "scripted %s", id);
		req.volume_id = id;
		assert_int_equal(csi_delete_volume(t->client, &req, &resp, 5000, &st),
				 csi_status_to_err(code));
		assert_null(resp);
		assert_int_equal(st.code, code);
		assert_string_equal(st.message, want);
	}
}

static void test_bad_responses(void **state)
{
	struct tg *t = *state;
	Csi__V1__NodeGetCapabilitiesResponse *caps = NULL;
	Csi__V1__GetCapacityResponse *capacity = NULL;
	Csi__V1__ControllerGetCapabilitiesResponse *ccaps = NULL;
	struct csi_status st;

	/* The server refuses to send a response of the wrong type. */
	assert_int_equal(csi_node_get_capabilities(t->client, NULL, &caps, 5000, &st),
			 CSID_EINTERNAL);
	assert_int_equal(st.code, CSI_INTERNAL);
	assert_non_null(strstr(st.message, "csi.v1.ProbeResponse"));
	assert_null(caps);
	/* Bytes that do not decode: a protocol error, never a crash. */
	assert_int_equal(csi_get_capacity(t->client, NULL, &capacity, 5000, &st), CSID_EPROTO);
	assert_int_equal(st.code, CSI_INTERNAL);
	assert_non_null(strstr(st.message, "does not decode"));
	assert_null(capacity);
	/* No response from the handler: an empty message. */
	assert_int_equal(csi_controller_get_capabilities(t->client, NULL, &ccaps, 5000, &st), 0);
	assert_non_null(ccaps);
	assert_int_equal(ccaps->n_capabilities, 0);
	csi_msg_free(&ccaps->base);
}

static void test_bad_request_type(void **state)
{
	struct tg *t = *state;
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	ProtobufCMessage *resp = NULL;
	struct csi_status st;

	assert_int_equal(t->client->call(t->client, CSI_RPC_PROBE, &req.base, &resp, 1000, &st),
			 CSID_EINVAL);
	assert_int_equal(st.code, CSI_INVALID_ARGUMENT);
	assert_null(resp);
	assert_int_equal(
	    t->client->call(t->client, (enum csi_rpc)CSI_RPC_COUNT, NULL, &resp, 1000, &st),
	    CSID_EINVAL);
	/* The status and the response are optional. */
	assert_int_equal(t->client->call(t->client, CSI_RPC_PROBE, NULL, NULL, 1000, NULL), 0);
}

/*
 * One unary call with the raw core API: method and request bytes as
 * given. Returns the status code.
 */
static int tg_raw_call(const char *endpoint, const char *method, const void *data, size_t len)
{
	char target[160];
	grpc_channel_credentials *creds = grpc_insecure_credentials_create();
	grpc_channel *ch;
	grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_slice body = grpc_slice_from_copied_buffer(data, len);
	grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&body, 1);
	grpc_byte_buffer *recv = NULL;
	grpc_metadata_array md0, md1;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details;
	grpc_slice m = grpc_slice_from_static_string(method);
	grpc_op ops[6];
	grpc_call *call;

	snprintf(target, sizeof(target), "unix:%s", endpoint + strlen("unix://"));
	ch = grpc_channel_create(target, creds, NULL);
	call = grpc_channel_create_call(
	    ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
	    gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(5000, GPR_TIMESPAN)),
	    NULL);
	grpc_metadata_array_init(&md0);
	grpc_metadata_array_init(&md1);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md0;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md1;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	assert_int_equal(grpc_call_start_batch(call, ops, 6, call, NULL), GRPC_CALL_OK);
	grpc_completion_queue_pluck(cq, call, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md0);
	grpc_metadata_array_destroy(&md1);
	if (recv)
		grpc_byte_buffer_destroy(recv);
	grpc_byte_buffer_destroy(send);
	grpc_slice_unref(body);
	grpc_call_unref(call);
	grpc_channel_destroy(ch);
	grpc_channel_credentials_release(creds);
	grpc_completion_queue_shutdown(cq);
	grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	grpc_completion_queue_destroy(cq);
	return (int)status;
}

static void test_raw_requests(void **state)
{
	struct tg *t = *state;
	static const uint8_t garbage[] = {0x0a, 0xff, 0xff};
	int calls;

	assert_int_equal(tg_raw_call(t->endpoint, "/csi.v1.Identity/Probe", NULL, 0), CSI_OK);
	assert_int_equal(tg_raw_call(t->endpoint, "/csi.v1.Identity/Nope", NULL, 0),
			 CSI_UNIMPLEMENTED);
	assert_int_equal(
	    tg_raw_call(t->endpoint, "/csi.v1.SnapshotMetadata/GetMetadataDelta", NULL, 0),
	    CSI_UNIMPLEMENTED);
	pthread_mutex_lock(&t->lock);
	calls = t->calls;
	pthread_mutex_unlock(&t->lock);
	assert_int_equal(
	    tg_raw_call(t->endpoint, "/csi.v1.Controller/CreateVolume", garbage, sizeof(garbage)),
	    CSI_INVALID_ARGUMENT);
	pthread_mutex_lock(&t->lock);
	assert_int_equal(t->calls, calls);
	pthread_mutex_unlock(&t->lock);
}

/*
 * The 16 MiB message cap holds both ways without the compression filters:
 * a bigger request is refused by the client before sending and by the
 * server on receipt.
 */
static void test_message_caps(void **state)
{
	struct tg *t = *state;
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	size_t big = 17u * 1024 * 1024;
	char *name = malloc(big + 1);
	struct csi_status st;
	int calls;

	assert_non_null(name);
	memset(name, 'x', big);
	name[big] = '\0';
	req.name = name;
	pthread_mutex_lock(&t->lock);
	calls = t->calls;
	pthread_mutex_unlock(&t->lock);
	assert_int_equal(csi_create_volume(t->client, &req, NULL, 10000, &st),
			 csi_status_to_err(CSI_RESOURCE_EXHAUSTED));
	assert_int_equal(st.code, CSI_RESOURCE_EXHAUSTED);
	assert_int_equal(tg_raw_call(t->endpoint, "/csi.v1.Controller/CreateVolume", name, big),
			 CSI_RESOURCE_EXHAUSTED);
	pthread_mutex_lock(&t->lock);
	assert_int_equal(t->calls, calls);
	pthread_mutex_unlock(&t->lock);
	free(name);
}

/* Probes until OK or the deadline passes; returns the last csid code. */
static int tg_probe_until_ok(struct csi_client *c, int64_t within_ms)
{
	int64_t end = tg_now_ms() + within_ms;
	struct csi_status st;
	int rc;

	do {
		rc = csi_probe(c, NULL, NULL, 500, &st);
		if (rc == 0)
			return 0;
		/* A short pause between attempts; the loop is bounded by end. */
		nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
	} while (tg_now_ms() < end);
	return rc;
}

static void test_restart(void **state)
{
	struct tg *t = *state;
	struct csi_status st;
	int64_t t0;

	assert_int_equal(tg_probe_until_ok(t->client, 2000), 0);
	csi_server_stop(t->server, 1000);
	csi_server_free(t->server);
	t->server = NULL;
	t0 = tg_now_ms();
	assert_int_equal(csi_probe(t->client, NULL, NULL, 5000, &st), CSID_EUNAVAIL);
	assert_int_equal(st.code, CSI_UNAVAILABLE);
	assert_true(tg_now_ms() - t0 < 1000);
	/* The socket is gone after a stop. */
	assert_int_equal(access(t->endpoint + strlen("unix://"), F_OK), -1);
	tg_start_server(t);
	assert_int_equal(tg_probe_until_ok(t->client, 5000), 0);
}

/* The real csi-hostpath, for test_first_connect, and its restarter. */
static struct hpp_proc tg_hpp;
static struct csi_client *tg_late;

static void *tg_restart_main(void *arg)
{
	return (void *)(intptr_t)hpp_proc_restart(arg, NULL);
}

static int tg_hpp_teardown(void **state)
{
	csi_client_free(tg_late);
	tg_late = NULL;
	hpp_proc_cleanup(&tg_hpp);
	(void)state;
	return 0;
}

/*
 * A client made before its plugin's socket exists (an embedding program, a
 * benchmark that starts the plugin later) succeeds soon after the socket
 * appears, although its calls failed before. The plugin is a separate
 * process, as in real use: an in-process server's threads would poll the
 * client's sockets too. The bound is generous for a loaded machine, but
 * well under the 5 s this used to take (gRPC's backup poller finishing
 * the handshake of a connection nobody polled).
 */
static void test_first_connect(void **state)
{
	char path[160];
	struct csi_status st;
	struct stat sb;
	pthread_t restarter;
	int64_t seen = 0, ok = 0, end;
	void *started;
	struct err e;

	(void)state;
	if (hpp_proc_start(&tg_hpp, NULL) != 0)
		fail_msg("csi-hostpath did not start");
	/* A graceful stop removes the socket. */
	hpp_proc_kill(&tg_hpp, SIGTERM);
	snprintf(path, sizeof(path), "%s/csi.sock", tg_hpp.dir);
	assert_int_equal(lstat(path, &sb), -1);
	err_clear(&e);
	assert_int_equal(csi_client_grpc_new(tg_hpp.endpoint, &tg_late, &e), 0);
	for (int i = 0; i < 3; i++)
		assert_int_equal(csi_probe(tg_late, NULL, NULL, 1000, &st), CSID_EUNAVAIL);
	assert_int_equal(pthread_create(&restarter, NULL, tg_restart_main, &tg_hpp), 0);
	/* Probe every 2 ms, noting when the socket appears. */
	end = tg_now_ms() + 20000;
	while (!ok && tg_now_ms() < end) {
		if (!seen && lstat(path, &sb) == 0)
			seen = tg_now_ms();
		if (csi_probe(tg_late, NULL, NULL, 1000, &st) == 0)
			ok = tg_now_ms();
		else
			hpp_pause_ms(2);
	}
	pthread_join(restarter, &started);
	assert_int_equal((intptr_t)started, 0);
	assert_true(ok > 0);
	if (!seen)
		seen = ok; /* it appeared between the last look and the call */
	if (ok - seen > 1000)
		fail_msg("first call succeeded %lld ms after the socket appeared",
			 (long long)(ok - seen));
}

/* Bytes that mean something in a URI still name the socket verbatim. */
static void test_odd_path(void **state)
{
	struct tg *t = *state;
	char dir[128], ep[160];
	struct csi_server *s = NULL;
	struct csi_client *c = NULL;
	struct err e;

	snprintf(dir, sizeof(dir), "%s/%s", t->dir, TG_ODD_DIR);
	assert_int_equal(mkdir(dir, 0700), 0);
	snprintf(ep, sizeof(ep), "unix://%s/x.sock", dir);
	assert_int_equal(csi_server_new(ep, 1, tg_handler, t, &s, &e), 0);
	assert_int_equal(csi_server_start(s, &e), 0);
	assert_int_equal(csi_client_grpc_new(ep, &c, &e), 0);
	assert_int_equal(tg_probe_until_ok(c, 5000), 0);
	csi_client_free(c);
	csi_server_free(s);
	assert_int_equal(rmdir(dir), 0);
}

struct tg_hammer {
	struct tg *t;
	atomic_bool *stop;
	int ok;
	int failed;
	int unexpected; /* a code other than UNAVAILABLE, CANCELLED or DEADLINE_EXCEEDED */
	char unexpected_msg[CSI_STATUS_MSG_MAX]; /* its message */
	int64_t longest_ms; /* the longest call */
};

/* The hammer's deadline per call. */
#define TG_HAMMER_DEADLINE_MS 2000

static void *tg_hammer_main(void *arg)
{
	struct tg_hammer *h = arg;
	struct csi_status st;

	while (!atomic_load(h->stop)) {
		int64_t t0 = hpp_now_ms(), took;

		if (csi_probe(h->t->client, NULL, NULL, TG_HAMMER_DEADLINE_MS, &st) == 0)
			h->ok++;
		else if (st.code == CSI_UNAVAILABLE || st.code == CSI_CANCELLED ||
			 st.code == CSI_DEADLINE_EXCEEDED)
			h->failed++;
		else {
			h->unexpected = st.code;
			snprintf(h->unexpected_msg, sizeof(h->unexpected_msg), "%s", st.message);
		}
		took = hpp_now_ms() - t0;
		if (took > h->longest_ms)
			h->longest_ms = took;
	}
	return NULL;
}

/*
 * Stopping and restarting a server while calls pour in: no crash, no
 * hang. A call that meets a restart fails UNAVAILABLE or CANCELLED, or,
 * when it made its own connection attempt and that attempt reached the
 * stopping server, DEADLINE_EXCEEDED at its own deadline: a connection
 * attempt keeps the full handshake allowance (never shortened for a busy
 * plugin), so the call's deadline is what bounds it. No call outlives its
 * deadline by more than the scheduling slack.
 */
static void test_stop_under_load(void **state)
{
	struct tg *t = *state;
	struct tg_hammer h[4];
	pthread_t th[4];
	atomic_bool stop;

	atomic_init(&stop, false);
	for (int i = 0; i < 4; i++) {
		h[i] = (struct tg_hammer){.t = t, .stop = &stop};
		assert_int_equal(pthread_create(&th[i], NULL, tg_hammer_main, &h[i]), 0);
	}
	for (int round = 0; round < 5; round++) {
		assert_int_equal(tg_probe_until_ok(t->client, 5000), 0);
		csi_server_stop(t->server, 50);
		csi_server_free(t->server);
		t->server = NULL;
		tg_start_server(t);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	assert_int_equal(tg_probe_until_ok(t->client, 5000), 0);
	for (int i = 0; i < 4; i++) {
		assert_true(h[i].ok > 0);
		if (h[i].unexpected)
			fail_msg("probe during restarts: %s: %s", csi_code_name(h[i].unexpected),
				 h[i].unexpected_msg);
		if (h[i].longest_ms > TG_HAMMER_DEADLINE_MS + 1500)
			fail_msg("a probe took %lld ms, past its %d ms deadline",
				 (long long)h[i].longest_ms, TG_HAMMER_DEADLINE_MS);
	}
}

static void test_endpoints(void **state)
{
	struct tg *t = *state;
	static const char *bad[] = {
	    "",
	    "relative/csi.sock",
	    "unix:relative.sock",
	    "unix://relative.sock",
	    "tcp://127.0.0.1:9000",
	    "dns:///example.com",
	    "unix:///tmp/with\nnewline",
	};
	char longpath[160], path[108];
	struct csi_client *c = NULL;
	struct csi_server *s = NULL;
	struct csi_status st;
	struct err e;
	int fd;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(csi_client_grpc_new(bad[i], &c, &e), CSID_EINVAL);
		assert_null(c);
		assert_true(e.msg[0] != '\0');
		assert_int_equal(csi_server_new(bad[i], 1, tg_handler, t, &s, &e), CSID_EINVAL);
		assert_null(s);
	}
	memset(longpath, 'a', sizeof(longpath));
	longpath[0] = '/';
	longpath[108] = '\0'; /* 108 bytes: one too many */
	assert_int_equal(csi_endpoint_parse(longpath, path, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "107"));
	longpath[107] = '\0';
	assert_int_equal(csi_endpoint_parse(longpath, path, &e), 0);
	assert_string_equal(path, longpath);
	/* No one listens: UNAVAILABLE, quickly. */
	snprintf(path, sizeof(path), "unix://%s/nobody.sock", t->dir);
	assert_int_equal(csi_client_grpc_new(path, &c, &e), 0);
	assert_string_equal(c->endpoint, path);
	assert_int_equal(csi_probe(c, NULL, NULL, 5000, &st), CSID_EUNAVAIL);
	csi_client_free(c);
	/* A server does not replace a file that is not a socket, nor a live socket. */
	snprintf(path, sizeof(path), "%s/file", t->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(csi_server_new(path, 1, tg_handler, t, &s, &e), 0);
	assert_int_equal(csi_server_start(s, &e), CSID_EEXIST);
	csi_server_free(s);
	assert_int_equal(csi_server_new(t->endpoint, 1, tg_handler, t, &s, &e), 0);
	assert_int_equal(csi_server_start(s, &e), CSID_EEXIST);
	csi_server_free(s);
	assert_int_equal(csi_server_new(t->endpoint, 0, tg_handler, t, &s, &e), CSID_EINVAL);
	assert_int_equal(csi_server_new(t->endpoint, 1, NULL, t, &s, &e), CSID_EINVAL);
}

/* One asynchronous call of the tests below and what its callback saw. */
struct tg_async_rec {
	int started; /* csi_client_call_async returned 0 */
	int runs; /* callback runs */
	int early; /* runs before the call returned */
	int rc;
	int code;
	int64_t when_ms;
	char volume_id[40];
	int64_t capacity;
};

static void tg_async_done(void *arg, int rc, ProtobufCMessage *resp, const struct csi_status *st)
{
	struct tg_async_rec *r = arg;

	if (!r->started)
		r->early++;
	r->runs++;
	r->rc = rc;
	r->code = st->code;
	r->when_ms = tg_now_ms();
	if (resp && resp->descriptor == &csi__v1__create_volume_response__descriptor) {
		Csi__V1__CreateVolumeResponse *cv = (Csi__V1__CreateVolumeResponse *)resp;

		if (cv->volume) {
			snprintf(r->volume_id, sizeof(r->volume_id), "%s", cv->volume->volume_id);
			r->capacity = cv->volume->capacity_bytes;
		}
	}
	csi_msg_free(resp);
}

/* Starts CreateVolume "a<i>" with capacity i + 1 on q; returns the code. */
static int tg_async_create(struct tg *t, struct csi_async *q, struct tg_async_rec *r, int i)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cap = CSI__V1__CAPACITY_RANGE__INIT;
	char name[32];
	int rc;

	snprintf(name, sizeof(name), "a%d", i);
	req.name = name;
	cap.required_bytes = i + 1;
	req.capacity_range = &cap;
	rc = csi_client_call_async(t->client, q, CSI_RPC_CREATE_VOLUME, &req.base, 10000,
				   tg_async_done, r, NULL);
	r->started = rc == 0;
	return rc;
}

/* Starts DeleteVolume "block" (held until released) on q. */
static int tg_async_block(struct tg *t, struct csi_async *q, struct tg_async_rec *r,
			  int64_t timeout_ms)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;
	int rc;

	req.volume_id = "block";
	rc = csi_client_call_async(t->client, q, CSI_RPC_DELETE_VOLUME, &req.base, timeout_ms,
				   tg_async_done, r, NULL);
	r->started = rc == 0;
	return rc;
}

/* Polls q until nothing is pending or within_ms passes; returns what is left. */
static int tg_async_drain(struct csi_async *q, int64_t within_ms)
{
	int64_t end = tg_now_ms() + within_ms;

	while (csi_async_pending(q) && tg_now_ms() < end)
		csi_async_poll(q, 100);
	return csi_async_pending(q);
}

/* Waits until n handlers are blocked, at most 5 s; returns how many are. */
/*
 * Waits until n handlers hold calls of q. It polls q meanwhile: gRPC moves
 * a call's bytes only while its queue is polled (a call started on a channel
 * that is still connecting would otherwise wait for the 5 s backup poller).
 */
static int tg_wait_blocked(struct tg *t, struct csi_async *q, int n)
{
	int64_t end = tg_now_ms() + 5000;
	int blocked;

	for (;;) {
		pthread_mutex_lock(&t->lock);
		blocked = t->blocked;
		pthread_mutex_unlock(&t->lock);
		if (blocked >= n || tg_now_ms() >= end)
			return blocked;
		csi_async_poll(q, 1);
	}
}

static void tg_release(struct tg *t)
{
	pthread_mutex_lock(&t->lock);
	t->release = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

#define TG_ASYNC_CALLS 200
#define TG_ASYNC_WINDOW 8

/* Many calls, 8 in flight from one thread: each answered once and right. */
static void test_async_many(void **state)
{
	struct tg *t = *state;
	struct tg_async_rec *r = calloc(TG_ASYNC_CALLS, sizeof(*r));
	struct csi_async *q = NULL;
	int next = 0, finished = 0;
	struct err e;

	assert_non_null(r);
	assert_int_equal(csi_async_new(&q, &e), 0);
	assert_int_equal(csi_async_poll(q, 0), 0);
	while (finished < TG_ASYNC_CALLS) {
		while (next < TG_ASYNC_CALLS && csi_async_pending(q) < TG_ASYNC_WINDOW) {
			assert_int_equal(tg_async_create(t, q, &r[next], next), 0);
			next++;
		}
		assert_true(csi_async_pending(q) <= TG_ASYNC_WINDOW);
		finished += csi_async_poll(q, 5000);
	}
	assert_int_equal(csi_async_pending(q), 0);
	for (int i = 0; i < TG_ASYNC_CALLS; i++) {
		char want[40];

		snprintf(want, sizeof(want), "id-a%d", i);
		assert_int_equal(r[i].runs, 1);
		assert_int_equal(r[i].early, 0);
		assert_int_equal(r[i].rc, 0);
		assert_string_equal(r[i].volume_id, want);
		assert_int_equal(r[i].capacity, i + 1);
	}
	csi_async_free(q);
	free(r);
}

/* Bad arguments fail at once and never call back. */
static void test_async_bad_args(void **state)
{
	struct tg *t = *state;
	Csi__V1__ProbeRequest probe = CSI__V1__PROBE_REQUEST__INIT;
	struct tg_async_rec r = {0};
	struct csi_async *q = NULL;
	struct csi_status st;
	struct err e;

	assert_int_equal(csi_async_new(&q, &e), 0);
	assert_int_equal(
	    csi_client_call_async(t->client, q, CSI_RPC_PROBE, NULL, 1000, NULL, &r, &st),
	    CSID_EINVAL);
	assert_int_equal(st.code, CSI_INVALID_ARGUMENT);
	assert_int_equal(
	    csi_client_call_async(NULL, q, CSI_RPC_PROBE, NULL, 1000, tg_async_done, &r, &st),
	    CSID_EINVAL);
	assert_int_equal(csi_client_call_async(t->client, q, (enum csi_rpc)CSI_RPC_COUNT, NULL,
					       1000, tg_async_done, &r, &st),
			 CSID_EINVAL);
	assert_int_equal(csi_client_call_async(t->client, q, CSI_RPC_DELETE_VOLUME, &probe.base,
					       1000, tg_async_done, &r, NULL),
			 CSID_EINVAL);
	assert_int_equal(csi_async_pending(q), 0);
	assert_int_equal(csi_async_poll(q, 10), 0);
	assert_int_equal(r.runs, 0);
	csi_async_free(q);
	csi_async_free(NULL);
}

/* A deadline ends one call while the others on the queue carry on. */
static void test_async_deadline(void **state)
{
	struct tg *t = *state;
	struct tg_async_rec slow = {0}, fast[4];
	struct csi_async *q = NULL;
	int64_t t0 = tg_now_ms();
	struct err e;

	memset(fast, 0, sizeof(fast));
	assert_int_equal(csi_async_new(&q, &e), 0);
	assert_int_equal(tg_async_block(t, q, &slow, 300), 0);
	for (int i = 0; i < 4; i++)
		assert_int_equal(tg_async_create(t, q, &fast[i], i), 0);
	assert_int_equal(tg_async_drain(q, 5000), 0);
	assert_int_equal(slow.runs, 1);
	assert_int_equal(slow.rc, CSID_ETIMEDOUT);
	assert_int_equal(slow.code, CSI_DEADLINE_EXCEEDED);
	assert_true(slow.when_ms - t0 >= 250);
	assert_true(slow.when_ms - t0 < 3000);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(fast[i].runs, 1);
		assert_int_equal(fast[i].rc, 0);
		/* Answered while the slow one was still held. */
		assert_true(fast[i].when_ms <= slow.when_ms);
	}
	tg_release(t);
	csi_async_free(q);
}

static void *tg_stop_main(void *arg)
{
	struct tg *t = arg;

	csi_server_stop(t->server, 50);
	return NULL;
}

/* The server goes away with calls in flight: each ends once, with an error. */
static void test_async_server_gone(void **state)
{
	struct tg *t = *state;
	struct tg_async_rec held[2], after = {0};
	struct csi_async *q = NULL;
	pthread_t th;
	struct err e;

	memset(held, 0, sizeof(held));
	assert_int_equal(csi_async_new(&q, &e), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(tg_async_block(t, q, &held[i], 10000), 0);
	assert_int_equal(tg_wait_blocked(t, q, 2), 2);
	/* The stop waits for the held handlers; the client must not. */
	assert_int_equal(pthread_create(&th, NULL, tg_stop_main, t), 0);
	assert_int_equal(tg_async_drain(q, 5000), 0);
	for (int i = 0; i < 2; i++) {
		assert_int_equal(held[i].runs, 1);
		assert_int_not_equal(held[i].rc, 0);
		if (held[i].code != CSI_UNAVAILABLE && held[i].code != CSI_CANCELLED)
			fail_msg("held call ended with %s", csi_code_name(held[i].code));
	}
	tg_release(t);
	pthread_join(th, NULL);
	csi_server_free(t->server);
	t->server = NULL;
	/* With the server gone a new call fails fast through its callback. */
	assert_int_equal(csi_client_call_async(t->client, q, CSI_RPC_PROBE, NULL, 5000,
					       tg_async_done, &after, NULL),
			 0);
	after.started = 1;
	assert_int_equal(tg_async_drain(q, 2000), 0);
	assert_int_equal(after.runs, 1);
	assert_int_equal(after.code, CSI_UNAVAILABLE);
	csi_async_free(q);
	tg_start_server(t);
	assert_int_equal(tg_probe_until_ok(t->client, 5000), 0);
}

/* Freeing a queue cancels its calls and runs each callback once. */
static void test_async_free_in_flight(void **state)
{
	struct tg *t = *state;
	struct tg_async_rec held = {0};
	struct csi_async *q = NULL;
	struct err e;

	assert_int_equal(csi_async_new(&q, &e), 0);
	assert_int_equal(tg_async_block(t, q, &held, 10000), 0);
	assert_int_equal(tg_wait_blocked(t, q, 1), 1);
	csi_async_free(q);
	assert_int_equal(held.runs, 1);
	assert_int_equal(held.code, CSI_CANCELLED);
	tg_release(t);
}

static int tg_fake_call(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	(void)c;
	(void)req;
	(void)timeout_ms;
	*resp = NULL;
	st->code = rpc == CSI_RPC_PROBE ? CSI_ABORTED : CSI_NOT_FOUND;
	snprintf(st->message, sizeof(st->message), "fake");
	return csi_status_to_err(st->code);
}

/* A fake client works through the same API; its callback waits for a poll. */
static void test_async_fake_client(void **state)
{
	struct csi_client fake = {.call = tg_fake_call, .endpoint = "fake"};
	struct tg_async_rec r[2];
	struct csi_async *q = NULL;
	struct err e;

	(void)state;
	memset(r, 0, sizeof(r));
	assert_int_equal(csi_async_new(&q, &e), 0);
	assert_int_equal(
	    csi_client_call_async(&fake, q, CSI_RPC_PROBE, NULL, 1000, tg_async_done, &r[0], NULL),
	    0);
	r[0].started = 1;
	assert_int_equal(csi_client_call_async(&fake, q, CSI_RPC_NODE_GET_INFO, NULL, 1000,
					       tg_async_done, &r[1], NULL),
			 0);
	r[1].started = 1;
	assert_int_equal(r[0].runs + r[1].runs, 0);
	assert_int_equal(csi_async_pending(q), 2);
	assert_int_equal(csi_async_poll(q, 0), 2);
	assert_int_equal(r[0].runs, 1);
	assert_int_equal(r[0].code, CSI_ABORTED);
	assert_int_equal(r[1].runs, 1);
	assert_int_equal(r[1].rc, csi_status_to_err(CSI_NOT_FOUND));
	assert_int_equal(csi_async_pending(q), 0);
	csi_async_free(q);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_probe, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_batch_caller_waits_as_other, tg_setup,
					    tg_teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_deadline, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_slow_handler, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_status_codes, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_responses, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_request_type, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_raw_requests, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_message_caps, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_restart, tg_setup, tg_teardown),
	    cmocka_unit_test_teardown(test_first_connect, tg_hpp_teardown),
	    cmocka_unit_test_setup_teardown(test_stop_under_load, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_endpoints, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_odd_path, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_async_many, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_async_bad_args, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_async_deadline, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_async_server_gone, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_async_free_in_flight, tg_setup, tg_teardown),
	    cmocka_unit_test_setup_teardown(test_async_fake_client, tg_setup, tg_teardown),
	};
	int failed = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return failed;
}
