/*
 * The CSI server glue of csi_server.h on the gRPC core C API.
 *
 * Data model: the server owns nthreads workers; each worker owns a
 * completion queue registered with the grpc_server and a few call slots.
 * A slot is a small state machine driven by the events of its worker's
 * queue:
 *
 *   REQUESTED --new call--> RECEIVING --request bytes--> (handler) FINISHING
 *       ^                                                            |
 *       +------------------- status sent, call released -------------+
 *
 * Each slot always has one generic grpc_server_request_call outstanding
 * while idle, so calls are accepted without any thread hand-off; the
 * handler runs on the worker thread that received the request. Requests
 * are decoded into a per-call arena (no per-field malloc), responses are
 * packed straight into the slice gRPC sends. A separate pluck queue only
 * receives the server's shutdown notification.
 */
#include "csi/csi_server.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

/* Calls a worker accepts at once: overlaps receiving and sending with handlers. */
#define CSI_SERVER_SLOTS 4
#define CSI_SERVER_MAX_THREADS 16
#define CSI_SERVER_MAX_MSG (16 * 1024 * 1024)

enum csi_server_state {
	CSI_SERVER_IDLE,
	CSI_SERVER_REQUESTED,
	CSI_SERVER_RECEIVING,
	CSI_SERVER_FINISHING,
};

struct csi_server_worker;

struct csi_server_slot {
	struct csi_server_worker *w;
	enum csi_server_state state;
	int rpc;
	grpc_call *call;
	grpc_call_details details;
	grpc_metadata_array request_md;
	grpc_byte_buffer *recv;
	grpc_byte_buffer *send;
	grpc_slice status_msg;
	int cancelled;
};

struct csi_server_worker {
	struct csi_server *s;
	grpc_completion_queue *cq;
	pthread_t thread;
	bool running;
	struct csi_server_slot slots[CSI_SERVER_SLOTS];
};

struct csi_server {
	char path[108];
	csi_handler_fn fn;
	void *ctx;
	grpc_server *server;
	grpc_completion_queue *shutdown_cq;
	int nthreads;
	struct csi_server_worker workers[CSI_SERVER_MAX_THREADS];
	atomic_bool stopping;
	bool started;
	bool stopped;
};

/* Allocator for protobuf-c that takes memory from the call's arena. */
static void *csi_server_arena_alloc(void *data, size_t size)
{
	return arena_alloc(data, size ? size : 1);
}

static void csi_server_arena_release(void *data, void *p)
{
	(void)data;
	(void)p;
}

static void csi_server_request(struct csi_server_slot *slot)
{
	struct csi_server_worker *w = slot->w;

	if (atomic_load(&w->s->stopping)) {
		slot->state = CSI_SERVER_IDLE;
		return;
	}
	grpc_call_details_init(&slot->details);
	grpc_metadata_array_init(&slot->request_md);
	slot->call = NULL;
	slot->recv = NULL;
	slot->send = NULL;
	slot->status_msg = grpc_empty_slice();
	slot->cancelled = 0;
	slot->state = CSI_SERVER_REQUESTED;
	if (grpc_server_request_call(w->s->server, &slot->call, &slot->details,
				     &slot->request_md, w->cq, w->cq, slot) != GRPC_CALL_OK) {
		grpc_call_details_destroy(&slot->details);
		grpc_metadata_array_destroy(&slot->request_md);
		slot->state = CSI_SERVER_IDLE;
	}
}

/* Releases everything of a finished (or never started) call. */
static void csi_server_release(struct csi_server_slot *slot)
{
	if (slot->recv)
		grpc_byte_buffer_destroy(slot->recv);
	if (slot->send)
		grpc_byte_buffer_destroy(slot->send);
	grpc_slice_unref(slot->status_msg);
	if (slot->call)
		grpc_call_unref(slot->call);
	grpc_call_details_destroy(&slot->details);
	grpc_metadata_array_destroy(&slot->request_md);
	slot->recv = NULL;
	slot->send = NULL;
	slot->call = NULL;
	slot->status_msg = grpc_empty_slice();
}

/* Sends the response (when send is set) and the status, ending the call. */
static void csi_server_finish(struct csi_server_slot *slot, int code, const char *msg)
{
	grpc_op ops[4];
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (slot->send) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = slot->send;
	}
	slot->status_msg = msg && *msg ? grpc_slice_from_copied_string(msg) : grpc_empty_slice();
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)code;
	ops[n++].data.send_status_from_server.status_details =
		msg && *msg ? &slot->status_msg : NULL;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &slot->cancelled;
	slot->state = CSI_SERVER_FINISHING;
	if (grpc_call_start_batch(slot->call, ops, n, slot, NULL) != GRPC_CALL_OK) {
		csi_server_release(slot);
		csi_server_request(slot);
	}
}

/* Packs the handler's response into slot->send; returns a gRPC code. */
static int csi_server_pack(struct csi_server_slot *slot, const ProtobufCMessage *resp,
			   char *msg)
{
	const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)slot->rpc);
	size_t n = 0;
	grpc_slice s;

	if (resp && resp->descriptor != info->response) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "%s: handler answered a %s, want %s",
			 info->name, resp->descriptor->name, info->response->name);
		return CSI_INTERNAL;
	}
	if (resp)
		n = protobuf_c_message_get_packed_size(resp);
	if (n > CSI_SERVER_MAX_MSG) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "%s: response of %zu bytes is too large",
			 info->name, n);
		return CSI_RESOURCE_EXHAUSTED;
	}
	s = grpc_slice_malloc(n);
	if (n)
		protobuf_c_message_pack(resp, GRPC_SLICE_START_PTR(s));
	slot->send = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return CSI_OK;
}

/* Decodes the request, runs the handler and finishes the call. */
static void csi_server_dispatch(struct csi_server_slot *slot)
{
	struct csi_server *s = slot->w->s;
	const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)slot->rpc);
	ProtobufCAllocator alloc;
	ProtobufCMessage *req, *resp = NULL;
	grpc_byte_buffer_reader r;
	char msg[CSI_STATUS_MSG_MAX];
	struct arena *a;
	grpc_slice in;
	int code;

	msg[0] = '\0';
	if (!slot->recv || !grpc_byte_buffer_reader_init(&r, slot->recv)) {
		csi_server_finish(slot, CSI_INVALID_ARGUMENT, "no request message");
		return;
	}
	in = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	a = arena_new();
	if (!a) {
		grpc_slice_unref(in);
		csi_server_finish(slot, CSI_RESOURCE_EXHAUSTED, "out of memory");
		return;
	}
	alloc = (ProtobufCAllocator){csi_server_arena_alloc, csi_server_arena_release, a};
	req = protobuf_c_message_unpack(info->request, &alloc, GRPC_SLICE_LENGTH(in),
					GRPC_SLICE_START_PTR(in));
	grpc_slice_unref(in);
	if (!req) {
		snprintf(msg, sizeof(msg), "%s: request does not decode as %s", info->name,
			 info->request->name);
		code = CSI_INVALID_ARGUMENT;
	} else {
		code = s->fn(s->ctx, (enum csi_rpc)slot->rpc, req, &resp, a, msg);
		msg[sizeof(msg) - 1] = '\0';
		if (code < 0 || code > CSI_UNAUTHENTICATED) {
			snprintf(msg, sizeof(msg), "%s: handler returned code %d", info->name,
				 code);
			code = CSI_UNKNOWN;
		}
		if (code == CSI_OK)
			code = csi_server_pack(slot, resp, msg);
	}
	arena_free(a);
	csi_server_finish(slot, code, code == CSI_OK ? NULL : msg);
}

static void csi_server_step(struct csi_server_slot *slot, bool ok)
{
	grpc_op op;

	switch (slot->state) {
	case CSI_SERVER_REQUESTED:
		if (!ok) {
			/* The server is shutting down: no call came. */
			grpc_call_details_destroy(&slot->details);
			grpc_metadata_array_destroy(&slot->request_md);
			slot->state = CSI_SERVER_IDLE;
			return;
		}
		slot->rpc = csi_rpc_by_path((const char *)GRPC_SLICE_START_PTR(slot->details.method),
					    GRPC_SLICE_LENGTH(slot->details.method));
		if (slot->rpc < 0) {
			char msg[CSI_STATUS_MSG_MAX];

			snprintf(msg, sizeof(msg), "unknown method %.*s",
				 (int)(GRPC_SLICE_LENGTH(slot->details.method) > 128
					       ? 128
					       : GRPC_SLICE_LENGTH(slot->details.method)),
				 (const char *)GRPC_SLICE_START_PTR(slot->details.method));
			csi_server_finish(slot, CSI_UNIMPLEMENTED, msg);
			return;
		}
		memset(&op, 0, sizeof(op));
		op.op = GRPC_OP_RECV_MESSAGE;
		op.data.recv_message.recv_message = &slot->recv;
		slot->state = CSI_SERVER_RECEIVING;
		if (grpc_call_start_batch(slot->call, &op, 1, slot, NULL) != GRPC_CALL_OK)
			csi_server_finish(slot, CSI_INTERNAL, "cannot receive the request");
		return;
	case CSI_SERVER_RECEIVING:
		if (!ok) {
			csi_server_finish(slot, CSI_CANCELLED, "call ended early");
			return;
		}
		csi_server_dispatch(slot);
		return;
	case CSI_SERVER_FINISHING:
		csi_server_release(slot);
		csi_server_request(slot);
		return;
	case CSI_SERVER_IDLE:
		return;
	}
}

static void *csi_server_worker_main(void *arg)
{
	struct csi_server_worker *w = arg;

	for (;;) {
		grpc_event ev =
			grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE)
			csi_server_step(ev.tag, ev.success != 0);
	}
	return NULL;
}

/*
 * Removes a stale socket at path. A socket someone still listens on, or a
 * file that is not a socket, is left alone and reported.
 */
static int csi_server_clear_path(const char *path, struct err *e)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat sb;
	int fd, live;

	if (lstat(path, &sb) != 0)
		return errno == ENOENT ? 0 : err_errno(e, errno, "csi server: %s", path);
	if (!S_ISSOCK(sb.st_mode))
		return err_set(e, CSID_EEXIST, "csi server: %s exists and is not a socket", path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "csi server: socket");
	memcpy(sa.sun_path, path, strlen(path) + 1);
	live = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	if (live)
		return err_set(e, CSID_EEXIST, "csi server: %s: another server listens there",
			       path);
	if (unlink(path) != 0 && errno != ENOENT)
		return err_errno(e, errno, "csi server: remove stale %s", path);
	return 0;
}

int csi_server_new(const char *endpoint, int nthreads, csi_handler_fn fn, void *ctx,
		   struct csi_server **out, struct err *e)
{
	struct csi_server *s;
	char path[108];
	int rc;

	*out = NULL;
	if (!fn)
		return err_set(e, CSID_EINVAL, "csi server: no handler");
	if (nthreads < 1 || nthreads > CSI_SERVER_MAX_THREADS)
		return err_set(e, CSID_EINVAL, "csi server: %d threads, want 1..%d", nthreads,
			       CSI_SERVER_MAX_THREADS);
	rc = csi_endpoint_parse(endpoint, path, e);
	if (rc)
		return err_wrap(e, "csi server");
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, CSID_ENOMEM, "csi server: out of memory");
	memcpy(s->path, path, sizeof(path));
	s->fn = fn;
	s->ctx = ctx;
	s->nthreads = nthreads;
	atomic_init(&s->stopping, false);
	*out = s;
	return 0;
}

int csi_server_start(struct csi_server *s, struct err *e)
{
	grpc_server_credentials *creds;
	char addr[3 * sizeof(s->path) + 8];
	grpc_arg args[2];
	grpc_channel_args cargs = {.num_args = 2, .args = args};
	int rc, port;

	if (s->started)
		return err_set(e, CSID_EINVAL, "csi server: already started");
	rc = csi_server_clear_path(s->path, e);
	if (rc)
		return rc;
	csi_grpc_init();
	args[0] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
			     {.integer = CSI_SERVER_MAX_MSG}};
	args[1] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH,
			     {.integer = CSI_SERVER_MAX_MSG}};
	s->server = grpc_server_create(&cargs, NULL);
	s->shutdown_cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_server_register_completion_queue(s->server, s->shutdown_cq, NULL);
	for (int i = 0; i < s->nthreads; i++) {
		s->workers[i].s = s;
		s->workers[i].cq = grpc_completion_queue_create_for_next(NULL);
		grpc_server_register_completion_queue(s->server, s->workers[i].cq, NULL);
	}
	csi_endpoint_target(s->path, addr, sizeof(addr));
	creds = grpc_insecure_server_credentials_create();
	port = grpc_server_add_http2_port(s->server, addr, creds);
	grpc_server_credentials_release(creds);
	if (port <= 0) {
		rc = err_set(e, CSID_EIO, "csi server: cannot listen on %s", s->path);
		goto fail;
	}
	grpc_server_start(s->server);
	s->started = true;
	for (int i = 0; i < s->nthreads; i++) {
		struct csi_server_worker *w = &s->workers[i];

		for (int k = 0; k < CSI_SERVER_SLOTS; k++) {
			w->slots[k].w = w;
			csi_server_request(&w->slots[k]);
		}
		if (pthread_create(&w->thread, NULL, csi_server_worker_main, w) != 0) {
			/* csi_server_stop drains the queues of workers that never ran. */
			rc = err_set(e, CSID_ENOMEM, "csi server: cannot start a worker thread");
			csi_server_stop(s, 0);
			return rc;
		}
		w->running = true;
	}
	return 0;
fail:
	for (int i = 0; i < s->nthreads; i++) {
		grpc_completion_queue_shutdown(s->workers[i].cq);
		grpc_completion_queue_destroy(s->workers[i].cq);
		s->workers[i].cq = NULL;
	}
	grpc_server_destroy(s->server);
	s->server = NULL;
	grpc_completion_queue_shutdown(s->shutdown_cq);
	grpc_completion_queue_destroy(s->shutdown_cq);
	s->shutdown_cq = NULL;
	return rc;
}

/* Runs a queue whose worker never started until gRPC is done with it. */
static void csi_server_drain(struct csi_server_worker *w)
{
	for (;;) {
		grpc_event ev =
			grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			return;
		if (ev.type == GRPC_OP_COMPLETE)
			csi_server_step(ev.tag, ev.success != 0);
	}
}

void csi_server_stop(struct csi_server *s, int grace_ms)
{
	gpr_timespec deadline;
	grpc_event ev;
	int tag;

	if (!s || !s->started || s->stopped)
		return;
	s->stopped = true;
	atomic_store(&s->stopping, true);
	grpc_server_shutdown_and_notify(s->server, s->shutdown_cq, &tag);
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				gpr_time_from_millis(grace_ms > 0 ? grace_ms : 0, GPR_TIMESPAN));
	ev = grpc_completion_queue_pluck(s->shutdown_cq, &tag, deadline, NULL);
	if (ev.type == GRPC_QUEUE_TIMEOUT) {
		grpc_server_cancel_all_calls(s->server);
		grpc_completion_queue_pluck(s->shutdown_cq, &tag,
					    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	}
	for (int i = 0; i < s->nthreads; i++)
		grpc_completion_queue_shutdown(s->workers[i].cq);
	for (int i = 0; i < s->nthreads; i++) {
		if (s->workers[i].running)
			pthread_join(s->workers[i].thread, NULL);
		else
			csi_server_drain(&s->workers[i]);
		s->workers[i].running = false;
	}
	grpc_server_destroy(s->server);
	s->server = NULL;
	for (int i = 0; i < s->nthreads; i++) {
		grpc_completion_queue_destroy(s->workers[i].cq);
		s->workers[i].cq = NULL;
	}
	grpc_completion_queue_shutdown(s->shutdown_cq);
	grpc_completion_queue_pluck(s->shutdown_cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC),
				    NULL);
	grpc_completion_queue_destroy(s->shutdown_cq);
	s->shutdown_cq = NULL;
	unlink(s->path);
}

void csi_server_free(struct csi_server *s)
{
	if (!s)
		return;
	csi_server_stop(s, 0);
	free(s);
}
