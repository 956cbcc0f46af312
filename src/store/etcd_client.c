/*
 * The etcd gRPC client (etcd_client.h). Each endpoint has one channel
 * with the method paths registered on it; a unary call is one batch
 * (csi/csi_unary.h: send metadata + message + close, receive metadata +
 * message + status) on the calling thread's completion queue, plucked until it completes (its
 * deadline bounds the wait). The watch runs one call with a queue of its
 * own: another thread cancels it with grpc_call_cancel, which completes
 * the pending receive at once.
 *
 * Endpoint choice: `cur` is the endpoint that answered last. A call
 * starts there; a call that could not connect (UNAVAILABLE from gRPC on
 * a channel that was not connected when the call began, not an etcd
 * answer) moves it to the next endpoint and retries, once per endpoint.
 *
 * Reconnecting. gRPC 1.51's pick_first stays in TRANSIENT_FAILURE after a
 * failed connection attempt until a later attempt succeeds, failing every
 * call at once, and makes those attempts on its own timer with nothing
 * polling them (csi_client.c met the same). A call that finds its channel
 * there replaces the channel, so the new one connects for that call: an
 * etcd member that came back is reached by the next call.
 */
#include "store/etcd_client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "csi/csi_client.h"
#include "csi/csi_unary.h"
#include "util/wipe.h"

/* The largest answer of a unary call (a list page of big values) or one watch message. */
#define ETCD_ANSWER_MAX (256 * 1024 * 1024)
/* The largest TLS file read (a CA bundle). */
#define ETCD_PEM_MAX (1024 * 1024)
#define ETCD_NARGS 10
/* Pings on an idle connection, so a member gone silent is noticed (etcd allows one per 5 s). */
#define ETCD_KEEPALIVE_MS 10000
#define ETCD_KEEPALIVE_TIMEOUT_MS 5000

static const char *const etcd_methods[ETCD_RPC_COUNT_] = {
    "/etcdserverpb.KV/Range",
    "/etcdserverpb.KV/Put",
    "/etcdserverpb.KV/Txn",
    "/etcdserverpb.KV/Compact",
    "/etcdserverpb.Lease/LeaseGrant",
    "/etcdserverpb.Lease/LeaseRevoke",
    "/etcdserverpb.Lease/LeaseKeepAlive",
};

static const ProtobufCMessageDescriptor *const etcd_answers[ETCD_RPC_COUNT_] = {
    &etcdserverpb__range_response__descriptor,
    &etcdserverpb__put_response__descriptor,
    &etcdserverpb__txn_response__descriptor,
    &etcdserverpb__compaction_response__descriptor,
    &etcdserverpb__lease_grant_response__descriptor,
    &etcdserverpb__lease_revoke_response__descriptor,
    &etcdserverpb__lease_keep_alive_response__descriptor,
};

/* One channel; counted, so a replacement never destroys it under a call. */
struct etcd_chan {
	grpc_channel *channel;
	void *methods[ETCD_RPC_COUNT_];
	void *watch;
	atomic_int refs;
};

struct etcd_endpoint {
	char *url; /* as configured, for messages */
	char *target; /* host:port */
	bool tls;
	struct etcd_chan *chan; /* under the client's mu */
};

struct etcd_client {
	struct etcd_endpoint eps[ETCD_ENDPOINTS_MAX];
	size_t n;
	atomic_size_t cur;
	pthread_mutex_t mu;
	grpc_channel_credentials *tls; /* NULL without an https endpoint */
	int64_t dial_ms, request_ms;
};

/* The metadata of every call but a read, "hasleader: true" (etcd_client.h says why). */
static grpc_metadata etcd_hasleader;
static pthread_once_t etcd_hasleader_once = PTHREAD_ONCE_INIT;

static void etcd_hasleader_init(void)
{
	etcd_hasleader.key = grpc_slice_from_static_string("hasleader");
	etcd_hasleader.value = grpc_slice_from_static_string("true");
}

static void etcd_chan_unref(struct etcd_chan *ch)
{
	if (ch == NULL || atomic_fetch_sub(&ch->refs, 1) != 1)
		return;
	grpc_channel_destroy(ch->channel);
	free(ch);
}

/* A new channel to ep; NULL when gRPC or memory fails. */
static struct etcd_chan *etcd_chan_new(struct etcd_client *c, const struct etcd_endpoint *ep)
{
	struct etcd_chan *ch = calloc(1, sizeof(*ch));
	grpc_channel_credentials *creds;
	grpc_arg args[ETCD_NARGS] = {
	    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = ETCD_ANSWER_MAX}},
	    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, {.integer = ETCD_ANSWER_MAX}},
	    /* A call's outcome decides a retry here (a transaction may have committed). */
	    {GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_RETRIES, {.integer = 0}},
	    /* gRPC gives a connection attempt the larger of its backoff and this. */
	    {GRPC_ARG_INTEGER, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, {.integer = (int)c->dial_ms}},
	    {GRPC_ARG_INTEGER, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, {.integer = (int)c->dial_ms}},
	    {GRPC_ARG_INTEGER, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}},
	    {GRPC_ARG_INTEGER, GRPC_ARG_ENABLE_CHANNELZ, {.integer = 0}},
	    {GRPC_ARG_INTEGER, GRPC_ARG_KEEPALIVE_TIME_MS, {.integer = ETCD_KEEPALIVE_MS}},
	    {GRPC_ARG_INTEGER,
	     GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
	     {.integer = ETCD_KEEPALIVE_TIMEOUT_MS}},
	};
	grpc_channel_args cargs = {.num_args = ETCD_NARGS, .args = args};

	if (ch == NULL)
		return NULL;
	atomic_init(&ch->refs, 1);
	creds = ep->tls ? c->tls : grpc_insecure_credentials_create();
	ch->channel = grpc_channel_create(ep->target, creds, &cargs);
	if (!ep->tls)
		grpc_channel_credentials_release(creds);
	if (ch->channel == NULL) {
		free(ch);
		return NULL;
	}
	for (int i = 0; i < ETCD_RPC_COUNT_; i++)
		ch->methods[i] =
		    grpc_channel_register_call(ch->channel, etcd_methods[i], NULL, NULL);
	ch->watch =
	    grpc_channel_register_call(ch->channel, "/etcdserverpb.Watch/Watch", NULL, NULL);
	return ch;
}

void etcd_client_free(struct etcd_client *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < c->n; i++) {
		etcd_chan_unref(c->eps[i].chan);
		free(c->eps[i].url);
		free(c->eps[i].target);
	}
	if (c->tls)
		grpc_channel_credentials_release(c->tls);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/*
 * Reads a whole PEM file (at most ETCD_PEM_MAX bytes) into a new
 * NUL-terminated buffer; NULL path: *out NULL. Returns 0 or CSID_EINVAL
 * naming the file's role (never its contents).
 */
static int etcd_pem_read(const char *path, const char *role, char **out, struct err *e)
{
	FILE *f;
	size_t n;

	*out = NULL;
	if (path == NULL)
		return 0;
	f = fopen(path, "re");
	*out = f ? calloc(1, ETCD_PEM_MAX + 1) : NULL;
	if (*out == NULL) {
		if (f)
			fclose(f);
		return err_set(e, CSID_EINVAL, "etcd %s %s: cannot be read", role, path);
	}
	n = fread(*out, 1, ETCD_PEM_MAX + 1, f);
	fclose(f);
	if (n == 0 || n > ETCD_PEM_MAX) {
		wipe_free(*out);
		*out = NULL;
		return err_set(e, CSID_EINVAL, "etcd %s %s: empty or over %d bytes", role, path,
			       ETCD_PEM_MAX);
	}
	(*out)[n] = '\0';
	return 0;
}

/* The TLS credentials of the https endpoints from the configured files. */
static int etcd_tls_new(struct etcd_client *c, const struct etcd_client_config *cfg, struct err *e)
{
	char *ca = NULL, *cert = NULL, *key = NULL;
	grpc_ssl_pem_key_cert_pair pair;
	int rc;

	if ((cfg->cert_file == NULL) != (cfg->key_file == NULL))
		return err_set(e, CSID_EINVAL, "etcd: cert_file and key_file go together");
	if ((rc = etcd_pem_read(cfg->ca_file, "ca_file", &ca, e)) ||
	    (rc = etcd_pem_read(cfg->cert_file, "cert_file", &cert, e)) ||
	    (rc = etcd_pem_read(cfg->key_file, "key_file", &key, e)))
		goto out;
	pair.private_key = key;
	pair.cert_chain = cert;
	c->tls = grpc_ssl_credentials_create(ca, key ? &pair : NULL, NULL, NULL);
	if (c->tls == NULL)
		rc = err_set(e, CSID_EINVAL, "etcd: the TLS files were refused by gRPC");
out:
	free(ca);
	free(cert);
	wipe_free(key);
	return rc;
}

int etcd_client_new(const struct etcd_client_config *cfg, struct etcd_client **out, struct err *e)
{
	struct etcd_client *c;
	bool tls = false;
	int rc;

	*out = NULL;
	if (cfg->nendpoints == 0 || cfg->nendpoints > ETCD_ENDPOINTS_MAX)
		return err_set(e, CSID_EINVAL, "etcd: between 1 and %d endpoints needed",
			       ETCD_ENDPOINTS_MAX);
	for (size_t i = 0; i < cfg->nendpoints; i++) {
		const char *ep = cfg->endpoints[i];

		if (ep == NULL ||
		    (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) ||
		    ep[strcspn(ep, "/") + 2] == '\0')
			return err_set(e, CSID_EINVAL,
				       "etcd: endpoint %zu: expected http://HOST:PORT or "
				       "https://HOST:PORT",
				       i);
		tls = tls || ep[4] == 's';
	}
	csi_grpc_init();
	pthread_once(&etcd_hasleader_once, etcd_hasleader_init);
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return err_set(e, CSID_ENOMEM, "etcd: out of memory");
	pthread_mutex_init(&c->mu, NULL);
	c->dial_ms = cfg->dial_timeout_ms > 0 ? cfg->dial_timeout_ms : 2000;
	c->request_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 10000;
	if (tls && (rc = etcd_tls_new(c, cfg, e))) {
		etcd_client_free(c);
		return rc;
	}
	for (; c->n < cfg->nendpoints; c->n++) {
		struct etcd_endpoint *ep = &c->eps[c->n];
		const char *url = cfg->endpoints[c->n];
		size_t len;

		ep->tls = url[4] == 's';
		ep->url = strdup(url);
		ep->target = strdup(url + (ep->tls ? 8 : 7));
		if (ep->url == NULL || ep->target == NULL)
			goto nomem;
		len = strlen(ep->target);
		while (len > 0 && ep->target[len - 1] == '/')
			ep->target[--len] = '\0';
		if ((ep->chan = etcd_chan_new(c, ep)) == NULL)
			goto nomem;
	}
	*out = c;
	return 0;
nomem:
	c->n++;
	etcd_client_free(c);
	return err_set(e, CSID_ENOMEM, "etcd: out of memory");
}

const char *etcd_client_endpoint(struct etcd_client *c)
{
	return c->eps[atomic_load(&c->cur) % c->n].url;
}

/* Maps a gRPC status code of an etcd answer to a csid code. */
static int etcd_grpc_code(int code, const char *msg)
{
	switch (code) {
	case GRPC_STATUS_CANCELLED:
		return CSID_ECANCELED;
	case GRPC_STATUS_INVALID_ARGUMENT:
		return strstr(msg, "too large") ? CSID_ETOOBIG : CSID_EINVAL;
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return CSID_ETIMEDOUT;
	case GRPC_STATUS_NOT_FOUND:
		return CSID_ENOTFOUND;
	case GRPC_STATUS_PERMISSION_DENIED:
		return CSID_EPERM;
	case GRPC_STATUS_RESOURCE_EXHAUSTED:
		return CSID_EEXHAUSTED;
	case GRPC_STATUS_FAILED_PRECONDITION:
		return CSID_EPRECOND;
	case GRPC_STATUS_OUT_OF_RANGE:
		return CSID_ERANGE;
	case GRPC_STATUS_UNAVAILABLE:
		return CSID_EUNAVAIL;
	case GRPC_STATUS_UNAUTHENTICATED:
		return CSID_EUNAUTH;
	default:
		return CSID_EIO;
	}
}

/*
 * Maps a gRPC status (code, message text) of an etcd answer from ep to a
 * csid code and sets e. "no leader" becomes CSID_EUNAVAIL saying the
 * store has no quorum.
 */
static int etcd_client_status(const char *ep, int code, const char *msg, struct err *e)
{
	if (msg == NULL || msg[0] == '\0')
		msg = "no message";
	if (code == GRPC_STATUS_UNAVAILABLE && strstr(msg, "no leader"))
		return err_set(e, CSID_EUNAVAIL, "etcd %s: no quorum (%.200s)", ep, msg);
	return err_set(e, etcd_grpc_code(code, msg), "etcd %s: %.300s", ep, msg);
}

/* Sets e from a finished call's status and details. */
static int etcd_call_status(const char *ep, grpc_status_code code, grpc_slice details,
			    struct err *e)
{
	char msg[320];
	size_t n = GRPC_SLICE_LENGTH(details);
	const char *p = (const char *)GRPC_SLICE_START_PTR(details);

	if (n >= sizeof(msg))
		n = sizeof(msg) - 1;
	for (size_t i = 0; i < n; i++)
		msg[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : ' ';
	msg[n] = '\0';
	return etcd_client_status(ep, (int)code, msg, e);
}

/*
 * Takes a reference on endpoint i's channel, replacing it first when it is
 * stuck in TRANSIENT_FAILURE (the file's opening comment says why); *ready
 * says whether it was connected. NULL when a replacement could not be made.
 */
static struct etcd_chan *etcd_chan_get(struct etcd_client *c, size_t i, bool *ready)
{
	struct etcd_endpoint *ep = &c->eps[i];
	struct etcd_chan *ch;
	grpc_connectivity_state state;

	pthread_mutex_lock(&c->mu);
	state = grpc_channel_check_connectivity_state(ep->chan->channel, 0);
	if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
		ch = etcd_chan_new(c, ep);
		if (ch != NULL) {
			etcd_chan_unref(ep->chan);
			ep->chan = ch;
		}
	}
	*ready = state == GRPC_CHANNEL_READY;
	ch = ep->chan;
	atomic_fetch_add(&ch->refs, 1);
	pthread_mutex_unlock(&c->mu);
	return ch;
}

/* Whether a failed call never reached etcd: it found no connection to make. */
static bool etcd_not_sent(bool ready, grpc_status_code code, grpc_slice details)
{
	static const char etcd_says[] = "etcdserver:";
	size_t n = GRPC_SLICE_LENGTH(details);

	return !ready && code == GRPC_STATUS_UNAVAILABLE &&
	       !(n >= sizeof(etcd_says) - 1 &&
		 memcmp(GRPC_SLICE_START_PTR(details), etcd_says, sizeof(etcd_says) - 1) == 0);
}

/* The watch's initial metadata op: "hasleader" (etcd_client.h says why). */
static void etcd_metadata(grpc_op *op)
{
	op->op = GRPC_OP_SEND_INITIAL_METADATA;
	op->data.send_initial_metadata.count = 1;
	op->data.send_initial_metadata.metadata = &etcd_hasleader;
}

/*
 * Packs m into a new slice. Each attempt sends it in a byte buffer of its
 * own: gRPC empties the buffer it sends (a second send of one buffer is an
 * empty message, which etcd reads as an empty Txn that succeeds).
 */
static grpc_slice etcd_pack(const ProtobufCMessage *m)
{
	size_t n = protobuf_c_message_get_packed_size(m);
	grpc_slice s = grpc_slice_malloc(n);

	protobuf_c_message_pack(m, GRPC_SLICE_START_PTR(s));
	return s;
}

/* Runs rpc with msg on endpoint i; the outcome in u (released by the caller). */
static int etcd_unary_run(struct etcd_client *c, size_t i, enum etcd_rpc rpc, grpc_slice msg,
			  struct csi_unary *u, bool *ready)
{
	grpc_completion_queue *cq = csi_grpc_thread_cq();
	struct etcd_chan *ch = etcd_chan_get(c, i, ready);
	gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
					     gpr_time_from_millis(c->request_ms, GPR_TIMESPAN));
	grpc_event ev;

	u->send = grpc_raw_byte_buffer_create(&msg, 1);
	u->call =
	    cq ? grpc_channel_create_registered_call(ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
						     ch->methods[rpc], deadline, NULL)
	       : NULL;
	etcd_chan_unref(ch); /* a call keeps its channel alive */
	if (u->call == NULL)
		return CSID_ENOMEM;
	if (csi_unary_start(u, &etcd_hasleader, rpc == ETCD_RANGE ? 0 : 1, 0, u) != GRPC_CALL_OK)
		return CSID_EINTERNAL;
	/* The call's deadline guarantees that this batch completes. */
	ev = grpc_completion_queue_pluck(cq, u, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
	return ev.type == GRPC_OP_COMPLETE && ev.success ? 0 : CSID_EINTERNAL;
}

int etcd_client_call(struct etcd_client *c, enum etcd_rpc rpc, const ProtobufCMessage *req,
		     ProtobufCMessage **resp, struct err *e)
{
	grpc_slice msg = etcd_pack(req);
	size_t first = atomic_load(&c->cur), i = first % c->n;
	int rc = 0;

	*resp = NULL;
	for (size_t k = 0; k < c->n; k++) {
		struct csi_unary u;
		bool ready;

		i = (first + k) % c->n;
		csi_unary_init(&u);
		rc = etcd_unary_run(c, i, rpc, msg, &u, &ready);
		if (rc) {
			rc = err_set(e, rc, "etcd %s: the call could not be made", c->eps[i].url);
		} else if (u.status != GRPC_STATUS_OK) {
			bool retry = etcd_not_sent(ready, u.status, u.details);

			rc = etcd_call_status(c->eps[i].url, u.status, u.details, e);
			csi_unary_release(&u);
			if (retry)
				continue;
			/* Maybe sent: no retry, but the next call starts at the next endpoint. */
			if (rc == CSID_EUNAVAIL || rc == CSID_ETIMEDOUT)
				atomic_store(&c->cur, (i + 1) % c->n);
			break;
		} else if (u.recv == NULL ||
			   (*resp = csi_grpc_unpack(etcd_answers[rpc], u.recv)) == NULL) {
			rc = err_set(e, CSID_EPROTO, "etcd %s: an answer that does not decode",
				     c->eps[i].url);
		}
		csi_unary_release(&u);
		if (rc == 0)
			atomic_store(&c->cur, i);
		break;
	}
	grpc_slice_unref(msg);
	return rc;
}

void etcd_stream_init(struct etcd_stream *st)
{
	atomic_init(&st->stop, false);
	st->call = NULL;
	pthread_mutex_init(&st->mu, NULL);
}

void etcd_stream_fini(struct etcd_stream *st)
{
	pthread_mutex_destroy(&st->mu);
}

void etcd_stream_cancel(struct etcd_stream *st)
{
	atomic_store(&st->stop, true);
	pthread_mutex_lock(&st->mu);
	if (st->call)
		grpc_call_cancel(st->call, NULL);
	pthread_mutex_unlock(&st->mu);
}

void etcd_stream_reset(struct etcd_stream *st)
{
	atomic_store(&st->stop, false);
}

/* A watch call and its batches: tags 'o' (open), 'm' (a message), 's' (status). */
struct etcd_watch_call {
	grpc_call *call;
	grpc_completion_queue *cq;
	grpc_byte_buffer *send, *recv;
	grpc_metadata_array initial, trailing;
	grpc_status_code status;
	grpc_slice details;
	int pending; /* batches not yet completed */
	bool got; /* a message arrived */
	bool ended; /* the status arrived */
};

static char etcd_tag_open, etcd_tag_msg, etcd_tag_status;

/* Starts the next receive; false when gRPC refused it. */
static bool etcd_watch_recv(struct etcd_watch_call *w)
{
	grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};

	op.data.recv_message.recv_message = &w->recv;
	if (grpc_call_start_batch(w->call, &op, 1, &etcd_tag_msg, NULL) != GRPC_CALL_OK)
		return false;
	w->pending++;
	return true;
}

/* Opens the stream: metadata and the create request, the initial metadata back, the status. */
static bool etcd_watch_open(struct etcd_watch_call *w)
{
	grpc_op ops[3], st = {.op = GRPC_OP_RECV_STATUS_ON_CLIENT};

	memset(ops, 0, sizeof(ops));
	etcd_metadata(&ops[0]);
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = w->send;
	ops[2].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[2].data.recv_initial_metadata.recv_initial_metadata = &w->initial;
	if (grpc_call_start_batch(w->call, ops, 3, &etcd_tag_open, NULL) != GRPC_CALL_OK)
		return false;
	w->pending++;
	st.data.recv_status_on_client.trailing_metadata = &w->trailing;
	st.data.recv_status_on_client.status = &w->status;
	st.data.recv_status_on_client.status_details = &w->details;
	if (grpc_call_start_batch(w->call, &st, 1, &etcd_tag_status, NULL) != GRPC_CALL_OK)
		return false;
	w->pending++;
	return etcd_watch_recv(w);
}

/*
 * Reads the stream until it ends, cb stops it or it is cancelled.
 * Returns cb's nonzero result, CSID_EPROTO for a message that does not
 * decode, or 0 when the stream ended or failed (w->status says how).
 */
static int etcd_watch_read(struct etcd_watch_call *w, etcd_stream_cb cb, void *arg, const char *ep,
			   struct err *e)
{
	while (w->pending > 0) {
		grpc_event ev =
		    grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		Etcdserverpb__WatchResponse *m;
		int rc;

		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		w->pending--;
		if (ev.tag == &etcd_tag_status) {
			w->ended = true;
			continue;
		}
		if (ev.tag != &etcd_tag_msg || !ev.success || w->recv == NULL)
			continue; /* the status says why the stream ended */
		m = (Etcdserverpb__WatchResponse *)csi_grpc_unpack(
		    &etcdserverpb__watch_response__descriptor, w->recv);
		grpc_byte_buffer_destroy(w->recv);
		w->recv = NULL;
		w->got = true;
		rc =
		    m ? cb(arg, m)
		      : err_set(e, CSID_EPROTO, "etcd %s: a watch answer that does not decode", ep);
		if (m)
			protobuf_c_message_free_unpacked(&m->base, NULL);
		if (rc)
			return rc;
		if (!etcd_watch_recv(w))
			return 0;
	}
	return 0;
}

/* Cancels the call, waits for every batch, releases it all. */
static void etcd_watch_close(struct etcd_watch_call *w, struct etcd_stream *st)
{
	pthread_mutex_lock(&st->mu);
	st->call = NULL;
	pthread_mutex_unlock(&st->mu);
	if (w->call) {
		grpc_call_cancel(w->call, NULL);
		while (w->pending > 0) {
			grpc_event ev = grpc_completion_queue_next(
			    w->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);

			if (ev.type == GRPC_OP_COMPLETE)
				w->pending--;
		}
		grpc_call_unref(w->call);
	}
	if (w->recv)
		grpc_byte_buffer_destroy(w->recv);
	grpc_byte_buffer_destroy(w->send);
	grpc_metadata_array_destroy(&w->initial);
	grpc_metadata_array_destroy(&w->trailing);
	grpc_slice_unref(w->details);
}

int etcd_client_watch(struct etcd_client *c, const Etcdserverpb__WatchRequest *req,
		      struct etcd_stream *st, etcd_stream_cb cb, void *arg, struct err *e)
{
	grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
	grpc_slice msg = etcd_pack(&req->base);
	size_t first = atomic_load(&c->cur);
	int rc = 0;

	err_clear(e);
	if (cq == NULL) {
		grpc_slice_unref(msg);
		return err_set(e, CSID_ENOMEM, "etcd watch: no completion queue");
	}
	for (size_t k = 0; k < c->n; k++) {
		size_t i = (first + k) % c->n;
		struct etcd_watch_call w = {.cq = cq,
					    .send = grpc_raw_byte_buffer_create(&msg, 1),
					    .status = GRPC_STATUS_UNKNOWN,
					    .details = grpc_empty_slice()};
		const char *ep = c->eps[i].url;
		bool ready, retry;
		struct etcd_chan *ch = etcd_chan_get(c, i, &ready);

		grpc_metadata_array_init(&w.initial);
		grpc_metadata_array_init(&w.trailing);
		w.call = grpc_channel_create_registered_call(
		    ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq, ch->watch,
		    gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
		etcd_chan_unref(ch);
		pthread_mutex_lock(&st->mu);
		st->call = w.call;
		pthread_mutex_unlock(&st->mu);
		if (w.call == NULL) {
			rc = err_set(e, CSID_ENOMEM, "etcd %s: the watch could not be made", ep);
		} else if (atomic_load(&st->stop)) {
			rc = err_set(e, CSID_ECANCELED, "etcd %s: stream cancelled", ep);
		} else if (!etcd_watch_open(&w)) {
			rc = err_set(e, CSID_EINTERNAL, "etcd %s: the watch could not start", ep);
		} else if ((rc = etcd_watch_read(&w, cb, arg, ep, e)) == 0) {
			if (atomic_load(&st->stop))
				rc = err_set(e, CSID_ECANCELED, "etcd %s: stream cancelled", ep);
			else if (w.ended && w.status != GRPC_STATUS_OK)
				rc = etcd_call_status(ep, w.status, w.details, e);
			else
				rc = err_set(e, CSID_EUNAVAIL, "etcd %s: stream ended", ep);
		}
		retry = rc == CSID_EUNAVAIL && !w.got && w.ended &&
			etcd_not_sent(ready, w.status, w.details);
		etcd_watch_close(&w, st);
		if (!retry)
			break;
	}
	grpc_slice_unref(msg);
	grpc_completion_queue_shutdown(cq);
	while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(cq);
	return rc;
}
