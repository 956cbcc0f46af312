/*
 * The gRPC CSI client on the gRPC core C API, plus the helpers of
 * csi_client.h shared by every client (endpoint parsing, code names,
 * message copies, typed wrappers).
 *
 * Data model: a struct csi_client_grpc owns one channel to one unix socket,
 * reused by every call, with the method paths registered up front; a call
 * that finds the channel failed replaces it (see "Reconnecting" below). A call is one batch (send
 * metadata + message + close, receive metadata + message + status) on a completion queue private to
 * the calling thread, plucked until the batch completes; the call's deadline bounds the wait.
 * gRPC 1.51 lets at most six threads pluck one queue (a seventh fails silently), so each thread
 * gets its own queue, made on first use and destroyed when the thread exits.
 *
 * Asynchronous calls (struct csi_async) send the same batch tagged with
 * its op on a queue read with grpc_completion_queue_next by the one thread
 * that polls it: with several calls in flight, that thread does gRPC's
 * network work itself and meets each completion without a wake-up.
 */
#include "csi/csi_client.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "csi/csi_metrics.h"
#include "csi/csi_rules.h"
#include "csi/csi_unary.h"
#include "util/sched_wait.h"

/* Largest message either way; ListVolumes pages can be big. */
#define CSI_CLIENT_MAX_MSG (16 * 1024 * 1024)
/*
 * Reconnecting. gRPC 1.51's pick_first stays in TRANSIENT_FAILURE after a
 * failed connection attempt until an attempt succeeds ("sticky"), failing
 * every fail-fast call at once, and makes its further attempts on its own
 * timer. While no call waits, nothing in the process polls such a
 * background attempt's socket, so an attempt that reaches a plugin which
 * just appeared finishes its handshake only when gRPC's backup poller
 * runs (every 5 s): a client made before its plugin's socket connected
 * about 5 s after the socket appeared. So a call that finds the channel in
 * TRANSIENT_FAILURE renews the channel first (csi_client_renew): the new
 * channel connects for that call, which waits and polls, and succeeds as
 * soon as the plugin listens. Each call on a dead plugin is so one
 * connection attempt, and the caller's schedule (the agent's backoff)
 * decides how often a dead plugin is tried; gRPC's own background
 * attempts are pushed out to CSI_CLIENT_BACKGROUND_RETRY_MS.
 *
 * gRPC gives each connection attempt max(backoff, MIN_RECONNECT_BACKOFF) to
 * finish its HTTP/2 handshake, so the minimum is the connect timeout, not a
 * delay: 100 ms made attempts to a busy plugin (or any plugin under ASan on
 * a loaded machine) fail with "timed out before receiving SETTINGS frame".
 * With the long background backoff an attempt now has that long.
 */
#define CSI_CLIENT_BACKGROUND_RETRY_MS 120000
#define CSI_CLIENT_CONNECT_TIMEOUT_MS 5000
#define CSI_CLIENT_UNIX_PATH_MAX 107
#define CSI_CLIENT_NARGS 11

/*
 * One channel with the method paths registered on it. Counted: the client
 * holds one reference while the channel is its current one, and every
 * call started on it holds one until the call is released, so a renewal
 * never destroys a channel under a call. grpc_channel_destroy fails every
 * call of the channel that has not yet got a connection ("UNKNOWN: Channel
 * Destroyed"): a call created on the old channel just before another
 * thread renewed it, and still waiting for its connection, met exactly
 * that on a busy machine.
 */
struct csi_client_chan {
	grpc_channel *channel;
	void *methods[CSI_RPC_COUNT]; /* handles from grpc_channel_register_call */
	atomic_int refs;
};

struct csi_client_grpc {
	struct csi_client base;
	/*
	 * Guards chan: calls hold it for reading while they take a reference
	 * on the channel and create their grpc_call, a renewal for writing
	 * while it swaps the channel.
	 */
	pthread_rwlock_t lock;
	struct csi_client_chan *chan;
	char target[3 * CSI_CLIENT_UNIX_PATH_MAX + 8];
	char endpoint[CSI_CLIENT_UNIX_PATH_MAX + 8];
};

static pthread_mutex_t csi_client_init_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t csi_client_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t csi_client_cq_key;
static bool csi_client_grpc_up;

static const char *const csi_client_code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

#define CSI_CLIENT_NCODES ((int)(sizeof(csi_client_code_names) / sizeof(char *)))

const char *csi_code_name(int code)
{
	if (code < 0 || code >= CSI_CLIENT_NCODES)
		return "UNKNOWN_CODE";
	return csi_client_code_names[code];
}

int csi_code_parse(const char *name)
{
	if (!name)
		return -1;
	for (int i = 0; i < CSI_CLIENT_NCODES; i++)
		if (strcasecmp(name, csi_client_code_names[i]) == 0)
			return i;
	return -1;
}

/* Destroys a thread's completion queue; every call on it has completed. */
static void csi_client_cq_destroy(void *p)
{
	grpc_completion_queue *cq = p;

	if (!cq)
		return;
	grpc_completion_queue_shutdown(cq);
	while (
	    grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	    GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
}

static void csi_client_key_init(void)
{
	if (pthread_key_create(&csi_client_cq_key, csi_client_cq_destroy) != 0)
		abort();
}

void csi_grpc_init(void)
{
	pthread_once(&csi_client_key_once, csi_client_key_init);
	pthread_mutex_lock(&csi_client_init_lock);
	if (!csi_client_grpc_up) {
		grpc_init();
		csi_client_grpc_up = true;
	}
	pthread_mutex_unlock(&csi_client_init_lock);
}

void csi_grpc_shutdown(void)
{
	pthread_mutex_lock(&csi_client_init_lock);
	if (csi_client_grpc_up) {
		csi_client_cq_destroy(pthread_getspecific(csi_client_cq_key));
		pthread_setspecific(csi_client_cq_key, NULL);
		grpc_shutdown_blocking();
		csi_client_grpc_up = false;
	}
	pthread_mutex_unlock(&csi_client_init_lock);
}

grpc_completion_queue *csi_grpc_thread_cq(void)
{
	grpc_completion_queue *cq = pthread_getspecific(csi_client_cq_key);

	if (cq)
		return cq;
	cq = grpc_completion_queue_create_for_pluck(NULL);
	if (cq && pthread_setspecific(csi_client_cq_key, cq) != 0) {
		csi_client_cq_destroy(cq);
		cq = NULL;
	}
	return cq;
}

int csi_endpoint_parse(const char *endpoint, char *path_out, struct err *e)
{
	const char *path = endpoint;
	size_t len;

	if (!endpoint || !*endpoint)
		return err_set(e, CSID_EINVAL, "endpoint: empty");
	if (strncmp(endpoint, "unix://", 7) == 0) {
		path = endpoint + 7;
		if (*path != '/')
			return err_set(e, CSID_EINVAL,
				       "endpoint: unix://%.32s: want unix:///absolute/path", path);
	} else if (strncmp(endpoint, "unix:", 5) == 0) {
		path = endpoint + 5;
	} else if (strchr(endpoint, ':') && *endpoint != '/') {
		return err_set(e, CSID_EINVAL,
			       "endpoint: only unix sockets are supported (unix:///path)");
	}
	if (*path != '/')
		return err_set(e, CSID_EINVAL, "endpoint: socket path must be absolute");
	len = strlen(path);
	if (len > CSI_CLIENT_UNIX_PATH_MAX)
		return err_set(e, CSID_EINVAL,
			       "endpoint: socket path is %zu bytes, a unix socket allows %d", len,
			       CSI_CLIENT_UNIX_PATH_MAX);
	for (size_t i = 0; i < len; i++)
		if (iscntrl((unsigned char)path[i]))
			return err_set(e, CSID_EINVAL,
				       "endpoint: control character in socket path");
	memcpy(path_out, path, len + 1);
	return 0;
}

/*
 * gRPC parses a channel target as a URI and percent-decodes its path, so
 * every byte outside a safe set is percent-encoded.
 */
void csi_endpoint_target(const char *path, char *out, size_t cap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	n += (size_t)snprintf(out, cap, "unix:");
	for (const char *p = path; *p && n + 4 < cap; p++) {
		unsigned char ch = (unsigned char)*p;

		if (isalnum(ch) || strchr("/-._~+,=@", ch)) {
			out[n++] = (char)ch;
		} else {
			out[n++] = '%';
			out[n++] = hex[ch >> 4];
			out[n++] = hex[ch & 15];
		}
	}
	out[n] = '\0';
}

static void csi_client_status(struct csi_status *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void csi_client_status(struct csi_status *st, int code, const char *fmt, ...)
{
	va_list ap;

	st->code = code;
	va_start(ap, fmt);
	vsnprintf(st->message, sizeof(st->message), fmt, ap);
	va_end(ap);
}

/* Copies a status message from the plugin, replacing control characters. */
static void csi_client_status_copy(struct csi_status *st, grpc_slice s)
{
	size_t n = GRPC_SLICE_LENGTH(s);
	const unsigned char *p = GRPC_SLICE_START_PTR(s);

	if (n >= sizeof(st->message))
		n = sizeof(st->message) - 1;
	for (size_t i = 0; i < n; i++)
		st->message[i] = iscntrl(p[i]) ? ' ' : (char)p[i];
	st->message[n] = '\0';
}

/* Packs m into a new byte buffer (an empty one for NULL). */
static grpc_byte_buffer *csi_client_pack(const ProtobufCMessage *m)
{
	size_t n = m ? protobuf_c_message_get_packed_size(m) : 0;
	grpc_slice s = grpc_slice_malloc(n);
	grpc_byte_buffer *bb;

	if (n)
		protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
	bb = grpc_raw_byte_buffer_create(&s, 1);
	grpc_slice_unref(s);
	return bb;
}

ProtobufCMessage *csi_grpc_unpack(const ProtobufCMessageDescriptor *d, grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader r;
	ProtobufCMessage *m;
	grpc_slice s;

	if (!grpc_byte_buffer_reader_init(&r, bb))
		return NULL;
	s = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	m = protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	return m;
}

/*
 * One call's batch: what it sends and where gRPC puts the answer. A
 * blocking call keeps it on its stack; an asynchronous one takes it from
 * its queue's spares and lists it while in flight.
 */
struct csi_client_op {
	struct csi_client_op *prev, *next; /* in q->flying, q->ready or q->spare */
	const struct csi_rpc_info *info;
	struct csi_client_chan *chan; /* the call's reference, with call */
	struct csi_unary u; /* the call and its batch */
	/* For the RPC metrics: what was called where, and when it started. */
	enum csi_rpc rpc;
	char endpoint[CSI_CLIENT_UNIX_PATH_MAX + 8];
	struct timespec start;
	csi_done_fn fn;
	void *arg;
	/* A fake client's outcome, kept until the next poll. */
	int rc;
	ProtobufCMessage *resp;
	struct csi_status st;
};

struct csi_async {
	grpc_completion_queue *cq; /* for next: only this queue's calls */
	struct csi_client_op *flying; /* calls in gRPC, doubly linked */
	struct csi_client_op *ready; /* fake clients' outcomes, oldest first */
	struct csi_client_op *ready_tail;
	struct csi_client_op *spare; /* finished ops for reuse */
	int pending;
	bool closing;
};

/* Checks rpc and req's type; sets *info, or returns CSID_EINVAL with st set. */
static int csi_client_check(enum csi_rpc rpc, const ProtobufCMessage *req,
			    const struct csi_rpc_info **info, struct csi_status *st)
{
	*info = csi_rpc_info(rpc);
	if (!*info) {
		csi_client_status(st, CSI_INVALID_ARGUMENT, "no such CSI RPC (%d)", (int)rpc);
		return CSID_EINVAL;
	}
	if (req && req->descriptor != (*info)->request) {
		csi_client_status(st, CSI_INVALID_ARGUMENT, "%s: request is a %s, want %s",
				  (*info)->name, req->descriptor->name, (*info)->request->name);
		return CSID_EINVAL;
	}
	return 0;
}

static void csi_client_chan_unref(struct csi_client_chan *chan);

/* Releases what the batch of op holds. */
static void csi_client_op_release(struct csi_client_op *op)
{
	csi_unary_release(&op->u);
	csi_client_chan_unref(op->chan);
	op->chan = NULL;
}

static void csi_client_renew(struct csi_client_grpc *c, struct csi_client_chan *old);

/*
 * Starts op's call (op->info set) as one batch whose completion is tagged
 * op on cq. Returns 0, or a negative code with st set and nothing held.
 */
static int csi_client_op_start(struct csi_client_grpc *c, struct csi_client_op *op,
			       enum csi_rpc rpc, const ProtobufCMessage *req, int64_t timeout_ms,
			       grpc_completion_queue *cq, struct csi_status *st)
{
	struct csi_client_chan *chan;
	gpr_timespec deadline;

	op->rpc = rpc;
	snprintf(op->endpoint, sizeof(op->endpoint), "%s", c->endpoint);
	clock_gettime(CLOCK_MONOTONIC, &op->start);
	if (timeout_ms <= 0)
		timeout_ms = CSI_DEFAULT_TIMEOUT_MS;
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	pthread_rwlock_rdlock(&c->lock);
	chan = c->chan;
	if (grpc_channel_check_connectivity_state(chan->channel, 0) ==
	    GRPC_CHANNEL_TRANSIENT_FAILURE) {
		pthread_rwlock_unlock(&c->lock);
		csi_client_renew(c, chan);
		pthread_rwlock_rdlock(&c->lock);
		chan = c->chan;
	}
	atomic_fetch_add(&chan->refs, 1);
	op->chan = chan;
	csi_unary_init(&op->u);
	op->u.call = grpc_channel_create_registered_call(
	    chan->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, chan->methods[rpc], deadline, NULL);
	pthread_rwlock_unlock(&c->lock);
	if (!op->u.call) {
		csi_client_chan_unref(op->chan);
		op->chan = NULL;
		csi_client_status(st, CSI_INTERNAL, "%s: cannot create call", op->info->name);
		return CSID_ENOMEM;
	}
	op->u.send = csi_client_pack(req);
	/* Fail fast: a plugin that is down answers UNAVAILABLE at once. */
	if (csi_unary_start(&op->u, NULL, 0, GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET,
			    op) != GRPC_CALL_OK) {
		csi_client_op_release(op);
		csi_client_status(st, CSI_INTERNAL, "%s: cannot start call", op->info->name);
		return CSID_EINTERNAL;
	}
	return 0;
}

/* Counts op's finished call; a GetPluginInfo answer names its endpoint's driver. */
static void csi_client_op_metrics(const struct csi_client_op *op, const ProtobufCMessage *resp,
				  int code)
{
	struct timespec now;

	if (resp && op->rpc == CSI_RPC_GET_PLUGIN_INFO)
		csi_metrics_learn(op->endpoint,
				  ((const Csi__V1__GetPluginInfoResponse *)resp)->name);
	clock_gettime(CLOCK_MONOTONIC, &now);
	csi_metrics_observe(op->endpoint, op->rpc, code,
			    (double)(now.tv_sec - op->start.tv_sec) +
				(double)(now.tv_nsec - op->start.tv_nsec) / 1e9);
}

/*
 * Turns op's completed batch (ok: gRPC's success flag) into call()'s
 * outcome: 0 and *resp, or a negative code with st set; releases op.
 */
static int csi_client_op_end(struct csi_client_op *op, bool ok, ProtobufCMessage **resp,
			     struct csi_status *st)
{
	const struct csi_rpc_info *info = op->info;
	int rc = 0;

	*resp = NULL;
	st->code = CSI_OK;
	st->message[0] = '\0';
	if (!ok) {
		csi_client_status(st, CSI_INTERNAL, "%s: call failed in gRPC", info->name);
		rc = CSID_EINTERNAL;
	} else if (op->u.status != GRPC_STATUS_OK) {
		st->code = op->u.status >= 0 && op->u.status < CSI_CLIENT_NCODES ? (int)op->u.status
										 : CSI_UNKNOWN;
		csi_client_status_copy(st, op->u.details);
		if (!st->message[0])
			snprintf(st->message, sizeof(st->message), "%s", csi_code_name(st->code));
		rc = csi_status_to_err(st->code);
	} else if (!op->u.recv) {
		csi_client_status(st, CSI_INTERNAL, "%s: plugin answered OK without a response",
				  info->name);
		rc = CSID_EPROTO;
	} else {
		*resp = csi_grpc_unpack(info->response, op->u.recv);
		if (!*resp) {
			csi_client_status(st, CSI_INTERNAL,
					  "%s: plugin response does not decode as %s (%zu bytes)",
					  info->name, info->response->name,
					  grpc_byte_buffer_length(op->u.recv));
			rc = CSID_EPROTO;
		}
	}
	csi_client_op_metrics(op, *resp, st->code);
	csi_client_op_release(op);
	return rc;
}

static int csi_client_grpc_call_do(struct csi_client *base, enum csi_rpc rpc,
				   const ProtobufCMessage *req, ProtobufCMessage **resp,
				   int64_t timeout_ms, struct csi_status *st)
{
	struct csi_client_op op;
	struct sched_wait sw;
	grpc_completion_queue *cq;
	grpc_event ev;
	int rc;

	*resp = NULL;
	st->code = CSI_OK;
	st->message[0] = '\0';
	memset(&op, 0, sizeof(op));
	rc = csi_client_check(rpc, req, &op.info, st);
	if (rc)
		return rc;
	cq = csi_grpc_thread_cq();
	if (!cq) {
		csi_client_status(st, CSI_INTERNAL, "%s: no completion queue", op.info->name);
		return CSID_ENOMEM;
	}
	/* Woken by the plugin's answer, the thread should get a CPU at once (sched_wait.h). */
	sched_wait_begin(&sw);
	rc = csi_client_op_start((struct csi_client_grpc *)base, &op, rpc, req, timeout_ms, cq, st);
	if (rc == 0) {
		/* The call's deadline guarantees that this batch completes. */
		ev =
		    grpc_completion_queue_pluck(cq, &op, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		rc = csi_client_op_end(&op, ev.type == GRPC_OP_COMPLETE && ev.success, resp, st);
	}
	sched_wait_end(&sw);
	return rc;
}

/* call(): st and resp may be NULL when the caller does not want them. */
static int csi_client_grpc_call(struct csi_client *base, enum csi_rpc rpc,
				const ProtobufCMessage *req, ProtobufCMessage **resp,
				int64_t timeout_ms, struct csi_status *st)
{
	struct csi_status local;
	ProtobufCMessage *m = NULL;
	int rc = csi_client_grpc_call_do(base, rpc, req, &m, timeout_ms, st ? st : &local);

	if (resp)
		*resp = m;
	else
		csi_msg_free(m);
	return rc;
}

/* Drops a reference; the last one destroys the channel (no call is left on it). */
static void csi_client_chan_unref(struct csi_client_chan *chan)
{
	if (!chan || atomic_fetch_sub(&chan->refs, 1) != 1)
		return;
	if (chan->channel)
		grpc_channel_destroy(chan->channel);
	free(chan);
}

/* A new channel to target with the methods registered; NULL on failure. */
static struct csi_client_chan *csi_client_chan_new(const char *target)
{
	struct csi_client_chan *chan = calloc(1, sizeof(*chan));
	grpc_channel_credentials *creds;
	grpc_arg args[CSI_CLIENT_NARGS];
	grpc_channel_args cargs = {.num_args = CSI_CLIENT_NARGS, .args = args};

	if (!chan)
		return NULL;
	atomic_init(&chan->refs, 1);
	args[0] = (grpc_arg){GRPC_ARG_INTEGER,
			     GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
			     {.integer = CSI_CLIENT_BACKGROUND_RETRY_MS}};
	args[1] = (grpc_arg){GRPC_ARG_INTEGER,
			     GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
			     {.integer = CSI_CLIENT_CONNECT_TIMEOUT_MS}};
	args[2] = (grpc_arg){GRPC_ARG_INTEGER,
			     GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
			     {.integer = CSI_CLIENT_BACKGROUND_RETRY_MS}};
	args[3] = (grpc_arg){
	    GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = CSI_CLIENT_MAX_MSG}};
	args[4] = (grpc_arg){
	    GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = CSI_CLIENT_MAX_MSG}};
	/* csid retries by the CSI rules itself; gRPC's own retries only add cost. */
	args[5] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_RETRIES, {.integer = 0}};
	/* A private subchannel, so a client never shares a dead connection. */
	args[6] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}};
	/* Per-call bookkeeping that a local plugin socket does not need. */
	args[7] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_CHANNELZ, {.integer = 0}};
	args[8] = (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_HTTP2_BDP_PROBE, {.integer = 0}};
	/*
	 * No compression filters: csid never compresses and, without them,
	 * never offers to, so plugins answer uncompressed. This leaves the
	 * message-size filter (the caps above) in place, unlike
	 * GRPC_ARG_MINIMAL_STACK, and saves about 1 us of CPU per call.
	 */
	args[9] =
	    (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_PER_MESSAGE_COMPRESSION, {.integer = 0}};
	args[10] =
	    (grpc_arg){GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION, {.integer = 0}};
	creds = grpc_insecure_credentials_create();
	chan->channel = grpc_channel_create(target, creds, &cargs);
	grpc_channel_credentials_release(creds);
	if (!chan->channel) {
		free(chan);
		return NULL;
	}
	for (int i = 0; i < CSI_RPC_COUNT; i++)
		chan->methods[i] = grpc_channel_register_call(
		    chan->channel, csi_rpc_info((enum csi_rpc)i)->path, NULL, NULL);
	return chan;
}

/*
 * Replaces old, a channel found in TRANSIENT_FAILURE, with a new one (see
 * the top of the file), unless another thread did already; on failure the
 * old channel stays. The old channel goes when its last call is released.
 */
static void csi_client_renew(struct csi_client_grpc *c, struct csi_client_chan *old)
{
	struct csi_client_chan *chan = csi_client_chan_new(c->target);

	if (!chan)
		return;
	pthread_rwlock_wrlock(&c->lock);
	if (c->chan == old) {
		c->chan = chan;
		chan = old;
	}
	pthread_rwlock_unlock(&c->lock);
	csi_client_chan_unref(chan);
}

static void csi_client_grpc_free(struct csi_client *base)
{
	struct csi_client_grpc *c = (struct csi_client_grpc *)base;

	if (!c)
		return;
	csi_client_chan_unref(c->chan);
	pthread_rwlock_destroy(&c->lock);
	free(c);
}

int csi_client_grpc_new(const char *endpoint, struct csi_client **out, struct err *e)
{
	struct csi_client_grpc *c;
	char path[CSI_CLIENT_UNIX_PATH_MAX + 1];
	int rc;

	*out = NULL;
	rc = csi_endpoint_parse(endpoint, path, e);
	if (rc)
		return rc;
	csi_grpc_init();
	c = calloc(1, sizeof(*c));
	if (!c)
		return err_set(e, CSID_ENOMEM, "csi client: out of memory");
	snprintf(c->endpoint, sizeof(c->endpoint), "unix://%s", path);
	csi_endpoint_target(path, c->target, sizeof(c->target));
	c->chan = csi_client_chan_new(c->target);
	if (!c->chan || pthread_rwlock_init(&c->lock, NULL) != 0) {
		csi_client_chan_unref(c->chan);
		free(c);
		return err_set(e, CSID_EINTERNAL, "csi client %s: cannot create channel", endpoint);
	}
	c->base.call = csi_client_grpc_call;
	c->base.free = csi_client_grpc_free;
	c->base.endpoint = c->endpoint;
	*out = &c->base;
	return 0;
}

int csi_async_new(struct csi_async **out, struct err *e)
{
	struct csi_async *q;

	*out = NULL;
	csi_grpc_init();
	q = calloc(1, sizeof(*q));
	if (!q)
		return err_set(e, CSID_ENOMEM, "csi async: out of memory");
	q->cq = grpc_completion_queue_create_for_next(NULL);
	if (!q->cq) {
		free(q);
		return err_set(e, CSID_ENOMEM, "csi async: cannot create a completion queue");
	}
	*out = q;
	return 0;
}

/* A cleared op, a spare one if there is; NULL when out of memory. */
static struct csi_client_op *csi_async_op_get(struct csi_async *q)
{
	struct csi_client_op *op = q->spare;

	if (op)
		q->spare = op->next;
	else
		op = malloc(sizeof(*op));
	if (op)
		memset(op, 0, sizeof(*op));
	return op;
}

static void csi_async_op_put(struct csi_async *q, struct csi_client_op *op)
{
	op->next = q->spare;
	q->spare = op;
}

int csi_client_call_async(struct csi_client *c, struct csi_async *q, enum csi_rpc rpc,
			  const ProtobufCMessage *req, int64_t timeout_ms, csi_done_fn fn,
			  void *arg, struct csi_status *st)
{
	struct csi_status local;
	struct csi_client_op *op;
	int rc;

	if (!st)
		st = &local;
	st->code = CSI_OK;
	st->message[0] = '\0';
	if (!c || !q || !fn) {
		csi_client_status(st, CSI_INVALID_ARGUMENT, "async call without %s",
				  !c   ? "a client"
				  : !q ? "a queue"
				       : "a callback");
		return CSID_EINVAL;
	}
	if (q->closing) {
		csi_client_status(st, CSI_INVALID_ARGUMENT, "async call on a queue being freed");
		return CSID_EINVAL;
	}
	op = csi_async_op_get(q);
	if (!op) {
		csi_client_status(st, CSI_RESOURCE_EXHAUSTED, "async call: out of memory");
		return CSID_ENOMEM;
	}
	op->fn = fn;
	op->arg = arg;
	if (c->call != csi_client_grpc_call) {
		/* A fake: its outcome waits for the next poll. */
		op->rc = c->call(c, rpc, req, &op->resp, timeout_ms, &op->st);
		if (q->ready_tail)
			q->ready_tail->next = op;
		else
			q->ready = op;
		q->ready_tail = op;
		q->pending++;
		return 0;
	}
	rc = csi_client_check(rpc, req, &op->info, st);
	if (!rc)
		rc = csi_client_op_start((struct csi_client_grpc *)c, op, rpc, req, timeout_ms,
					 q->cq, st);
	if (rc) {
		csi_async_op_put(q, op);
		return rc;
	}
	op->prev = NULL;
	op->next = q->flying;
	if (q->flying)
		q->flying->prev = op;
	q->flying = op;
	q->pending++;
	return 0;
}

/* Runs the callback of a call that gRPC completed; op goes to the spares. */
static void csi_async_complete(struct csi_async *q, struct csi_client_op *op, bool ok)
{
	csi_done_fn fn = op->fn;
	void *arg = op->arg;
	ProtobufCMessage *resp;
	struct csi_status st;
	int rc;

	if (op->prev)
		op->prev->next = op->next;
	else
		q->flying = op->next;
	if (op->next)
		op->next->prev = op->prev;
	rc = csi_client_op_end(op, ok, &resp, &st);
	csi_async_op_put(q, op);
	q->pending--;
	fn(arg, rc, resp, &st);
}

/* Runs the callbacks of the fake clients' outcomes queued so far. */
static int csi_async_run_ready(struct csi_async *q)
{
	struct csi_client_op *op, *last = q->ready_tail;
	int n = 0;

	while ((op = q->ready) != NULL) {
		q->ready = op->next;
		if (!q->ready)
			q->ready_tail = NULL;
		q->pending--;
		n++;
		op->fn(op->arg, op->rc, op->resp, &op->st);
		csi_async_op_put(q, op);
		if (op == last)
			break;
	}
	return n;
}

int csi_async_poll(struct csi_async *q, int64_t timeout_ms)
{
	gpr_timespec deadline = gpr_inf_past(GPR_CLOCK_MONOTONIC);
	int n;

	if (!q)
		return 0;
	n = csi_async_run_ready(q);
	if (!n && timeout_ms > 0)
		deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	while (q->flying) {
		grpc_event ev = grpc_completion_queue_next(q->cq, deadline, NULL);

		if (ev.type != GRPC_OP_COMPLETE)
			break;
		csi_async_complete(q, ev.tag, ev.success != 0);
		n++;
		/* Then whatever else has completed, without waiting. */
		deadline = gpr_inf_past(GPR_CLOCK_MONOTONIC);
	}
	return n;
}

int csi_async_pending(const struct csi_async *q)
{
	return q ? q->pending : 0;
}

void csi_async_free(struct csi_async *q)
{
	if (!q)
		return;
	q->closing = true;
	for (struct csi_client_op *op = q->flying; op; op = op->next)
		grpc_call_cancel(op->u.call, NULL);
	/* Cancelled calls complete at once; the loop only waits for gRPC. */
	while (q->flying || q->ready)
		csi_async_poll(q, 1000);
	grpc_completion_queue_shutdown(q->cq);
	while (grpc_completion_queue_next(q->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(q->cq);
	while (q->spare) {
		struct csi_client_op *op = q->spare;

		q->spare = op->next;
		free(op);
	}
	free(q);
}

void csi_client_free(struct csi_client *c)
{
	if (c)
		c->free(c);
}

void csi_msg_free(ProtobufCMessage *m)
{
	if (m)
		protobuf_c_message_free_unpacked(m, NULL);
}

ProtobufCMessage *csi_msg_dup(const ProtobufCMessage *m)
{
	uint8_t stackbuf[512];
	uint8_t *buf = stackbuf;
	ProtobufCMessage *copy;
	size_t n;

	if (!m)
		return NULL;
	n = protobuf_c_message_get_packed_size(m);
	if (n > sizeof(stackbuf)) {
		buf = malloc(n);
		if (!buf)
			return NULL;
	}
	protobuf_c_message_pack(m, buf);
	copy = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
	if (buf != stackbuf)
		free(buf);
	return copy;
}

/* call() through the client, with a status kept locally when st is NULL. */
static int csi_client_call_any(struct csi_client *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			       ProtobufCMessage **resp, int64_t timeout_ms, struct csi_status *st)
{
	struct csi_status local;
	ProtobufCMessage *m = NULL;
	int rc;

	if (!st)
		st = &local;
	if (!c) {
		st->code = CSI_INVALID_ARGUMENT;
		snprintf(st->message, sizeof(st->message), "no CSI client");
		if (resp)
			*resp = NULL;
		return CSID_EINVAL;
	}
	rc = c->call(c, rpc, req, &m, timeout_ms, st);
	if (resp)
		*resp = m;
	else
		csi_msg_free(m);
	return rc;
}

#define CSI_CLIENT_WRAPPER_(id, svc, method, snake)                                        \
	int csi_##snake(struct csi_client *c, const Csi__V1__##method##Request *req,       \
			Csi__V1__##method##Response **resp, int64_t timeout_ms,            \
			struct csi_status *st)                                             \
	{                                                                                  \
		ProtobufCMessage *m = NULL;                                                \
		int rc = csi_client_call_any(c, CSI_RPC_##id, req ? &req->base : NULL, &m, \
					     timeout_ms, st);                              \
		if (resp)                                                                  \
			*resp = (Csi__V1__##method##Response *)m;                          \
		else                                                                       \
			csi_msg_free(m);                                                   \
		return rc;                                                                 \
	}
CSI_RPCS(CSI_CLIENT_WRAPPER_)
#undef CSI_CLIENT_WRAPPER_
