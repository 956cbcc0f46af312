/*
 * The CSI server glue of csi_server.h on the gRPC core C API.
 *
 * Data model: the server owns nthreads worker threads, one completion
 * queue registered with the grpc_server, and a pool of call contexts.
 * Every CSI method is registered with gRPC so that a new call arrives
 * together with its request bytes; a couple of requests stay outstanding
 * per method, plus generic ones that catch unknown methods. A context is a
 * small state machine driven by the queue's events:
 *
 *   REQUESTED --call + request bytes--> (handler runs) FINISHING --sent--> pool
 *
 * When a call arrives its context is replaced at once by a fresh one, so
 * requests stay outstanding while handlers run.
 *
 * The workers are leader/followers: one thread (the leader) waits in
 * grpc_completion_queue_next, the others wait on a condition variable.
 * The leader runs the handler of the call it receives and then leads
 * again; when it stays away from the queue longer than 1 ms (a handler
 * that blocks), a follower takes over, so a slow handler never holds up
 * other calls for longer than that. Followers look every millisecond
 * while calls come in and sleep when the server is quiet. Handing the
 * queue over on every call would cost a thread wake-up per call, and
 * letting all threads wait in gRPC costs more: its poller (epoll1) moves
 * the polling role between waiting threads on every event. One queue per
 * worker does not work either: gRPC delivers every call of a connection
 * to the queue that connection prefers, so one slow handler would hold up
 * every other call of the same client.
 *
 * Requests are decoded into a per-call arena (no per-field malloc), and
 * responses are packed straight into the slice gRPC sends. A separate
 * pluck queue only receives the server's shutdown notification.
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
#include <time.h>
#include <unistd.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#define CSI_SERVER_MAX_THREADS 16
#define CSI_SERVER_MAX_MSG (16 * 1024 * 1024)
/* rpc value of the generic request that receives unknown methods. */
#define CSI_SERVER_GENERIC (-1)
/*
 * A leader that has been away from the queue this long (a handler that
 * blocks) is replaced by a follower; followers look every HANDOFF while an
 * event came in the last ACTIVE, and sleep until woken otherwise.
 */
#define CSI_SERVER_HANDOFF_NS 1000000
#define CSI_SERVER_ACTIVE_NS 50000000
/* Requests kept outstanding per method (replaced as soon as one is used). */
#define CSI_SERVER_REQUESTS 2

enum csi_server_state {
	CSI_SERVER_REQUESTED,
	CSI_SERVER_FINISHING,
};

struct csi_server_call {
	struct csi_server *s;
	struct csi_server_call *next_free; /* in s->free */
	struct csi_server_call *next_all; /* in s->all, for the final free */
	enum csi_server_state state;
	int rpc; /* enum csi_rpc, or CSI_SERVER_GENERIC */
	grpc_call *call;
	gpr_timespec deadline;
	grpc_call_details details; /* generic requests only */
	grpc_metadata_array request_md;
	grpc_byte_buffer *recv;
	grpc_byte_buffer *send;
	grpc_slice status_msg;
	int cancelled;
};

struct csi_server {
	char path[108];
	char listen_path[109]; /* path + "~" while starting, see csi_server_start */
	csi_handler_fn fn;
	void *ctx;
	grpc_server *server;
	grpc_completion_queue *cq; /* every call's events */
	grpc_completion_queue *shutdown_cq;
	void *methods[CSI_RPC_COUNT]; /* from grpc_server_register_method */
	int nthreads;
	int nrunning;
	pthread_t threads[CSI_SERVER_MAX_THREADS];
	atomic_bool stopping;
	/* lock guards everything below. */
	pthread_mutex_t lock;
	pthread_cond_t follow; /* followers wait here to lead */
	pthread_cond_t idle; /* csi_server_stop waits here for busy == 0 */
	bool leader; /* a worker waits in grpc_completion_queue_next */
	int64_t leaderless_since; /* when the last leader left the queue */
	int64_t last_event; /* when the last event came */
	int sleepers; /* followers waiting without a timeout */
	bool cq_done; /* the queue delivered GRPC_QUEUE_SHUTDOWN */
	struct csi_server_call *free;
	struct csi_server_call *all;
	/*
	 * Contexts out of the pool: requests held by gRPC and calls in
	 * flight. The queue is shut down only once this is 0, as a call may
	 * still start its last batch after the server's shutdown notification
	 * (a handler that returns after its client left).
	 */
	int busy;
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

/* A context from the pool, or NULL when out of memory. */
static struct csi_server_call *csi_server_call_get(struct csi_server *s)
{
	struct csi_server_call *c;

	pthread_mutex_lock(&s->lock);
	c = s->free;
	if (c) {
		s->free = c->next_free;
	} else {
		c = calloc(1, sizeof(*c));
		if (c) {
			c->s = s;
			c->next_all = s->all;
			s->all = c;
		}
	}
	if (c)
		s->busy++;
	pthread_mutex_unlock(&s->lock);
	return c;
}

static void csi_server_call_put(struct csi_server_call *c)
{
	struct csi_server *s = c->s;

	pthread_mutex_lock(&s->lock);
	c->next_free = s->free;
	s->free = c;
	if (--s->busy == 0)
		pthread_cond_broadcast(&s->idle);
	pthread_mutex_unlock(&s->lock);
}

/* Posts a request for the next call of method rpc; c goes back on failure. */
static void csi_server_request(struct csi_server_call *c, int rpc)
{
	struct csi_server *s = c->s;
	grpc_call_error err;

	c->rpc = rpc;
	c->state = CSI_SERVER_REQUESTED;
	c->call = NULL;
	c->recv = NULL;
	c->send = NULL;
	c->status_msg = grpc_empty_slice();
	c->cancelled = 0;
	grpc_metadata_array_init(&c->request_md);
	if (rpc == CSI_SERVER_GENERIC) {
		grpc_call_details_init(&c->details);
		err = grpc_server_request_call(s->server, &c->call, &c->details, &c->request_md,
					       s->cq, s->cq, c);
	} else {
		err = grpc_server_request_registered_call(s->server, s->methods[rpc], &c->call,
							  &c->deadline, &c->request_md, &c->recv,
							  s->cq, s->cq, c);
	}
	if (err != GRPC_CALL_OK) {
		if (rpc == CSI_SERVER_GENERIC)
			grpc_call_details_destroy(&c->details);
		grpc_metadata_array_destroy(&c->request_md);
		csi_server_call_put(c);
	}
}

/* Puts a fresh context in the place of one that received a call. */
static void csi_server_rerequest(struct csi_server *s, int rpc)
{
	struct csi_server_call *n;

	if (atomic_load(&s->stopping))
		return;
	n = csi_server_call_get(s);
	if (n)
		csi_server_request(n, rpc);
}

/* Releases everything of a finished call and returns c to the pool. */
static void csi_server_release(struct csi_server_call *c)
{
	if (c->recv)
		grpc_byte_buffer_destroy(c->recv);
	if (c->send)
		grpc_byte_buffer_destroy(c->send);
	grpc_slice_unref(c->status_msg);
	if (c->call)
		grpc_call_unref(c->call);
	if (c->rpc == CSI_SERVER_GENERIC)
		grpc_call_details_destroy(&c->details);
	grpc_metadata_array_destroy(&c->request_md);
	c->recv = NULL;
	c->send = NULL;
	c->call = NULL;
	csi_server_call_put(c);
}

/* Sends the response (when send is set) and the status, ending the call. */
static void csi_server_finish(struct csi_server_call *c, int code, const char *msg)
{
	grpc_op ops[4];
	size_t n = 0;

	memset(ops, 0, sizeof(ops));
	ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (c->send) {
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = c->send;
	}
	c->status_msg = msg && *msg ? grpc_slice_from_copied_string(msg) : grpc_empty_slice();
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = (grpc_status_code)code;
	ops[n++].data.send_status_from_server.status_details = msg && *msg ? &c->status_msg : NULL;
	ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
	c->state = CSI_SERVER_FINISHING;
	if (grpc_call_start_batch(c->call, ops, n, c, NULL) != GRPC_CALL_OK)
		csi_server_release(c);
}

/* Packs the handler's response into c->send; returns a gRPC code. */
static int csi_server_pack(struct csi_server_call *c, const ProtobufCMessage *resp, char *msg)
{
	const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)c->rpc);
	size_t n = 0;
	grpc_slice s;

	if (resp && resp->descriptor != info->response) {
		snprintf(msg, CSI_STATUS_MSG_MAX, "%s: handler answered a %s, want %s", info->name,
			 resp->descriptor->name, info->response->name);
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
	c->send = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return CSI_OK;
}

/* Decodes the request, runs the handler and finishes the call. */
static void csi_server_dispatch(struct csi_server_call *c)
{
	struct csi_server *s = c->s;
	const struct csi_rpc_info *info = csi_rpc_info((enum csi_rpc)c->rpc);
	ProtobufCAllocator alloc;
	ProtobufCMessage *req, *resp = NULL;
	grpc_byte_buffer_reader r;
	char msg[CSI_STATUS_MSG_MAX];
	struct arena *a;
	grpc_slice in;
	int code;

	msg[0] = '\0';
	if (!c->recv || !grpc_byte_buffer_reader_init(&r, c->recv)) {
		csi_server_finish(c, CSI_INVALID_ARGUMENT, "no request message");
		return;
	}
	in = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	a = arena_new();
	if (!a) {
		grpc_slice_unref(in);
		csi_server_finish(c, CSI_RESOURCE_EXHAUSTED, "out of memory");
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
		code = s->fn(s->ctx, (enum csi_rpc)c->rpc, req, &resp, a, msg);
		msg[sizeof(msg) - 1] = '\0';
		if (code < 0 || code > CSI_UNAUTHENTICATED) {
			snprintf(msg, sizeof(msg), "%s: handler returned code %d", info->name,
				 code);
			code = CSI_UNKNOWN;
		}
		if (code == CSI_OK)
			code = csi_server_pack(c, resp, msg);
	}
	arena_free(a);
	csi_server_finish(c, code, code == CSI_OK ? NULL : msg);
}

/* Answers a call to a method outside the table. */
static void csi_server_unknown(struct csi_server_call *c)
{
	size_t n = GRPC_SLICE_LENGTH(c->details.method);
	char msg[CSI_STATUS_MSG_MAX];

	snprintf(msg, sizeof(msg), "unknown method %.*s", (int)(n > 128 ? 128 : n),
		 (const char *)GRPC_SLICE_START_PTR(c->details.method));
	csi_server_finish(c, CSI_UNIMPLEMENTED, msg);
}

static void csi_server_step(struct csi_server_call *c, bool ok)
{
	switch (c->state) {
	case CSI_SERVER_REQUESTED:
		if (!ok) {
			/* The server is shutting down: no call came. */
			if (c->rpc == CSI_SERVER_GENERIC)
				grpc_call_details_destroy(&c->details);
			grpc_metadata_array_destroy(&c->request_md);
			if (c->recv)
				grpc_byte_buffer_destroy(c->recv);
			c->recv = NULL;
			csi_server_call_put(c);
			return;
		}
		csi_server_rerequest(c->s, c->rpc);
		if (c->rpc == CSI_SERVER_GENERIC)
			csi_server_unknown(c);
		else
			csi_server_dispatch(c);
		return;
	case CSI_SERVER_FINISHING:
		csi_server_release(c);
		return;
	}
}

static int64_t csi_server_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Waits on s->follow until abs_ns (CLOCK_MONOTONIC), or without end for 0. */
static void csi_server_follow_wait(struct csi_server *s, int64_t abs_ns)
{
	struct timespec until;

	if (!abs_ns) {
		s->sleepers++;
		pthread_cond_wait(&s->follow, &s->lock);
		s->sleepers--;
		return;
	}
	until.tv_sec = abs_ns / 1000000000;
	until.tv_nsec = abs_ns % 1000000000;
	pthread_cond_timedwait(&s->follow, &s->lock, &until);
}

static void *csi_server_worker_main(void *arg)
{
	struct csi_server *s = arg;
	bool returning = false;

	pthread_mutex_lock(&s->lock);
	while (!s->cq_done) {
		int64_t now = csi_server_now_ns();
		struct csi_server_call *c;
		grpc_event ev;

		if (s->leader ||
		    (!returning && now - s->leaderless_since < CSI_SERVER_HANDOFF_NS)) {
			/* Follow: look again every HANDOFF while calls come in. */
			bool active = now - s->last_event < CSI_SERVER_ACTIVE_NS;

			returning = false;
			csi_server_follow_wait(s, active ? now + CSI_SERVER_HANDOFF_NS : 0);
			continue;
		}
		s->leader = true;
		pthread_mutex_unlock(&s->lock);
		ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		pthread_mutex_lock(&s->lock);
		s->leader = false;
		now = csi_server_now_ns();
		s->leaderless_since = now;
		if (ev.type == GRPC_QUEUE_SHUTDOWN) {
			s->cq_done = true;
			pthread_cond_broadcast(&s->follow);
			break;
		}
		/* After a quiet spell, wake a follower so that it watches again. */
		if (now - s->last_event >= CSI_SERVER_ACTIVE_NS && s->sleepers)
			pthread_cond_signal(&s->follow);
		s->last_event = now;
		returning = true;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		c = ev.tag;
		pthread_mutex_unlock(&s->lock);
		csi_server_step(c, ev.success != 0);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
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
	pthread_condattr_t ca;
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
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->follow, &ca);
	pthread_condattr_destroy(&ca);
	pthread_cond_init(&s->idle, NULL);
	*out = s;
	return 0;
}

int csi_server_start(struct csi_server *s, struct err *e)
{
	grpc_server_credentials *creds;
	char addr[3 * sizeof(s->path) + 8];
	grpc_arg args[7];
	grpc_channel_args cargs = {.num_args = 7, .args = args};
	int rc, port;

	if (s->started)
		return err_set(e, CSID_EINVAL, "csi server: already started");
	rc = csi_server_clear_path(s->path, e);
	if (rc)
		return rc;
	/*
	 * Listen on a neighbour name and rename it into place once the workers
	 * serve, so that the socket appearing means the plugin answers: the
	 * supervisor and tests wait for the file. A path too long for the
	 * extra byte is used directly.
	 */
	snprintf(s->listen_path, sizeof(s->listen_path), "%s%s", s->path,
		 strlen(s->path) < sizeof(s->path) - 1 ? "~" : "");
	if (strcmp(s->listen_path, s->path) != 0 &&
	    (rc = csi_server_clear_path(s->listen_path, e)) != 0)
		return rc;
	csi_grpc_init();
	args[0] = (grpc_arg){
	    GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = CSI_SERVER_MAX_MSG}};
	args[1] = (grpc_arg){
	    GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = CSI_SERVER_MAX_MSG}};
	/* Per-call bookkeeping that a local plugin socket does not need. */
	args[2] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_CHANNELZ, {.integer = 0}};
	args[3] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_BDP_PROBE, {.integer = 0}};
	/*
	 * No compression filters (clients that never see our server offer
	 * compression do not compress); the message-size filter stays, unlike
	 * with GRPC_ARG_MINIMAL_STACK. No server-side deadline timer: the
	 * client enforces its deadline and resets the stream, which cancels
	 * the call here all the same; a handler is never interrupted anyway.
	 * Together about 2 us of CPU per call.
	 */
	args[4] =
	    (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_PER_MESSAGE_COMPRESSION, {.integer = 0}};
	args[5] =
	    (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, {.integer = 0}};
	args[6] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_DEADLINE_CHECKS, {.integer = 0}};
	s->server = grpc_server_create(&cargs, NULL);
	for (int i = 0; i < CSI_RPC_COUNT; i++)
		s->methods[i] =
		    grpc_server_register_method(s->server, csi_rpc_info((enum csi_rpc)i)->path,
						NULL, GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
	s->shutdown_cq = grpc_completion_queue_create_for_pluck(NULL);
	grpc_server_register_completion_queue(s->server, s->shutdown_cq, NULL);
	s->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(s->server, s->cq, NULL);
	csi_endpoint_target(s->listen_path, addr, sizeof(addr));
	creds = grpc_insecure_server_credentials_create();
	port = grpc_server_add_http2_port(s->server, addr, creds);
	grpc_server_credentials_release(creds);
	if (port <= 0) {
		rc = err_set(e, CSID_EIO, "csi server: cannot listen on %s", s->path);
		goto fail;
	}
	grpc_server_start(s->server);
	s->started = true;
	for (int k = 0; k < CSI_SERVER_REQUESTS; k++)
		for (int rpc = CSI_SERVER_GENERIC; rpc < CSI_RPC_COUNT; rpc++) {
			struct csi_server_call *c = csi_server_call_get(s);

			if (c)
				csi_server_request(c, rpc);
		}
	for (int i = 0; i < s->nthreads; i++) {
		if (pthread_create(&s->threads[i], NULL, csi_server_worker_main, s) != 0) {
			rc = err_set(e, CSID_ENOMEM, "csi server: cannot start a worker thread");
			csi_server_stop(s, 0);
			return rc;
		}
		s->nrunning++;
	}
	if (strcmp(s->listen_path, s->path) != 0 && rename(s->listen_path, s->path) != 0) {
		rc = err_errno(e, errno, "csi server: rename %s into place", s->listen_path);
		csi_server_stop(s, 0);
		return rc;
	}
	return 0;
fail:
	grpc_server_destroy(s->server);
	s->server = NULL;
	grpc_completion_queue_shutdown(s->cq);
	grpc_completion_queue_destroy(s->cq);
	s->cq = NULL;
	grpc_completion_queue_shutdown(s->shutdown_cq);
	grpc_completion_queue_destroy(s->shutdown_cq);
	s->shutdown_cq = NULL;
	return rc;
}

/*
 * Without workers (none could start), the stopping thread drives the
 * queue: one event, waiting at most ms.
 */
static bool csi_server_poll_once(struct csi_server *s, int ms)
{
	grpc_event ev = grpc_completion_queue_next(
	    s->cq,
	    gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN)),
	    NULL);

	if (ev.type == GRPC_OP_COMPLETE)
		csi_server_step(ev.tag, ev.success != 0);
	return ev.type != GRPC_QUEUE_SHUTDOWN;
}

/* Waits until every context is back in the pool. */
static void csi_server_wait_idle(struct csi_server *s)
{
	pthread_mutex_lock(&s->lock);
	while (s->busy > 0) {
		if (s->nrunning) {
			pthread_cond_wait(&s->idle, &s->lock);
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		csi_server_poll_once(s, 10);
		pthread_mutex_lock(&s->lock);
	}
	pthread_mutex_unlock(&s->lock);
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
	csi_server_wait_idle(s);
	grpc_completion_queue_shutdown(s->cq);
	for (int i = 0; i < s->nrunning; i++)
		pthread_join(s->threads[i], NULL);
	if (!s->nrunning)
		while (csi_server_poll_once(s, 1000))
			;
	s->nrunning = 0;
	grpc_server_destroy(s->server);
	s->server = NULL;
	grpc_completion_queue_destroy(s->cq);
	s->cq = NULL;
	while (s->all) {
		struct csi_server_call *c = s->all;

		s->all = c->next_all;
		free(c);
	}
	s->free = NULL;
	grpc_completion_queue_shutdown(s->shutdown_cq);
	grpc_completion_queue_pluck(s->shutdown_cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC),
				    NULL);
	grpc_completion_queue_destroy(s->shutdown_cq);
	s->shutdown_cq = NULL;
	unlink(s->listen_path);
	unlink(s->path);
}

void csi_server_free(struct csi_server *s)
{
	if (!s)
		return;
	csi_server_stop(s, 0);
	pthread_cond_destroy(&s->idle);
	pthread_cond_destroy(&s->follow);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
