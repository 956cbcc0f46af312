/*
 * Leadership (the contract is in server_leader.h). One thread per server
 * runs the election as a loop over the lease:
 *
 *   no lease     -> grant one (on failure: try again after a poll period)
 *   lease        -> campaign: create the election key unless it exists;
 *                   it is ours: lead (fence = its create_index)
 *   every ttl/3  -> keep the lease alive; expired: step down, drop it
 *   not leading  -> campaign again when the store's watch sees the key
 *                   go or change (store_election_wait), or after a TTL
 *                   without a word; without a watch every
 *                   SERVER_LEADER_POLL_MS
 *   fenced write refused (any thread), or no renewal for a whole TTL
 *                -> step down, revoke the lease, start over
 *
 * The election key's value is {"id", "run", "address", "since_ms"} of its
 * holder (run: its process, so a restarted server with the same ID does
 * not take its old self's term for its own); a member record is {"id",
 * "run", "boot", "pid", "address", "started_ms", "seen": [[node, age_ms],
 * ...], "lost": [[node,
 * volume, alloc, prev_report_ms], ...], "status": [[kind, id, attempts,
 * next_attempt_ms, last_error], ...]}. Neither is one of the store's
 * objects, so neither is in a list, the change log or a snapshot.
 */
#include "server/server_leader.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include <jansson.h>

#include "util/file_replace.h"
#include "util/log.h"

struct server_leader {
	struct store *store;
	struct store *fenced; /* the workers' view; its fence is `fence` */
	struct store_fence fence;
	char id[SERVER_LEADER_ID_MAX + 1];
	/* This process: a restarted server keeps its ID but is not the term its old self won. */
	char run[17];
	char holder_run[17]; /* the election key's holder's (mu) */
	char boot[40]; /* the kernel's boot ID: a dead process of this machine is known dead */
	char address[SERVER_LEADER_ID_MAX + 1];
	int64_t ttl_ms;
	int64_t started_ms;
	void (*on_change)(void *arg, bool leading);
	void *arg;
	struct clock *clock;

	pthread_mutex_t mu; /* guards what follows */
	pthread_cond_t cond; /* stopping or lost */
	pthread_t thread;
	bool started, stopping;
	bool lost; /* a fenced write found the term over */
	bool leading;
	/*
	 * The election key as the store's watch follows it: its generation
	 * last seen, and whether it changed since this server last
	 * campaigned (watch: false when the store has none; then it polls).
	 */
	uint64_t key_seen;
	bool key_changed, watch;
	int64_t campaigned_ms; /* monotonic; 0: never */
	uint64_t lease;
	int64_t renewed_ms; /* monotonic: the lease's last grant or renewal */
	int64_t conflict_logged_ms; /* monotonic: the last error about st.id_conflict; 0: none */
	struct server_leader_status st;

	/* server_leader_compact's, on the server's tick thread alone */
	int64_t compact_ms; /* < 0: off */
	int64_t compact_due_ms; /* 0: not yet noted */
	uint64_t compact_mark; /* the index noted a period ago; 0: none */
	uint64_t compacted; /* the index this server last compacted the store to */
};

/* "<hostname>-<8 hex digits>", unique enough for the servers of one installation. */
static int server_leader_make_id(char *out, size_t cap, struct err *e)
{
	char host[64] = "csid";
	uint32_t r;

	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		return err_errno(e, errno, "server ID: getrandom");
	if (gethostname(host, sizeof(host)) != 0 || !host[0])
		snprintf(host, sizeof(host), "csid");
	host[sizeof(host) - 1] = '\0';
	for (char *p = host; *p; p++)
		if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-')
			*p = '_';
	snprintf(out, cap, "%s-%08x", host, r);
	return 0;
}

int server_leader_stored_id(const char *data_dir, char *out, size_t cap, struct err *e)
{
	char path[4096], buf[SERVER_LEADER_ID_MAX + 2];
	ssize_t n = -1;
	int fd, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/server-id", data_dir) >= sizeof(path))
		return err_set(e, CSID_EINVAL, "data_dir: too long for server-id");
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
	} else if (errno != ENOENT) {
		return err_errno(e, errno, "open %s", path);
	}
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && (size_t)n < cap) {
		bool ok = true;

		for (ssize_t i = 0; i < n; i++)
			ok = ok && buf[i] &&
			     (isalnum((unsigned char)buf[i]) || strchr("._-", buf[i]));
		if (ok) {
			memcpy(out, buf, (size_t)n);
			out[n] = '\0';
			return 0;
		}
	}
	/* None yet (or a torn file): this data_dir's server gets a new ID, kept from now on. */
	if ((rc = server_leader_make_id(out, cap, e)))
		return rc;
	snprintf(buf, sizeof(buf), "%s\n", out);
	return file_replace(path, buf, 0644, e);
}

static void server_leader_fence_lost(void *arg)
{
	struct server_leader *l = arg;

	/* No more fenced writes from now: the others' writes would fail the same way. */
	atomic_store(&l->fence.index, 0);
	pthread_mutex_lock(&l->mu);
	l->lost = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->mu);
}

/* The kernel's boot ID (one per boot of a machine, also of a cloned one); "" when unknown. */
static void server_leader_boot_id(char *out, size_t cap)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	out[0] = '\0';
	if (f && fgets(out, (int)cap, f))
		out[strcspn(out, "\n")] = '\0';
	if (f)
		fclose(f);
}

int server_leader_new(const struct server_leader_config *cfg, struct server_leader **out,
		      struct err *e)
{
	struct server_leader *l;
	int rc;

	*out = NULL;
	if (!cfg->store)
		return err_set(e, CSID_EINVAL, "leader: a store is required");
	if (cfg->ttl_ms &&
	    (cfg->ttl_ms < SERVER_LEADER_TTL_MIN_MS || cfg->ttl_ms > SERVER_LEADER_TTL_MAX_MS))
		return err_set(e, CSID_EINVAL, "leader: TTL of %lld ms outside %d to %d",
			       (long long)cfg->ttl_ms, SERVER_LEADER_TTL_MIN_MS,
			       SERVER_LEADER_TTL_MAX_MS);
	if ((cfg->id && strlen(cfg->id) > SERVER_LEADER_ID_MAX) ||
	    (cfg->address && strlen(cfg->address) > SERVER_LEADER_ID_MAX))
		return err_set(e, CSID_EINVAL, "leader: server ID or address over %d bytes",
			       SERVER_LEADER_ID_MAX);
	l = calloc(1, sizeof(*l));
	if (!l)
		return err_set(e, CSID_ENOMEM, "leader: out of memory");
	l->store = cfg->store;
	l->ttl_ms = cfg->ttl_ms ? cfg->ttl_ms : SERVER_LEADER_TTL_MS;
	l->compact_ms = cfg->compact_ms ? cfg->compact_ms : SERVER_LEADER_COMPACT_MS;
	l->on_change = cfg->on_change;
	l->arg = cfg->arg;
	l->clock = clock_real();
	l->started_ms = clock_wall_ms(l->clock);
	if (cfg->id && cfg->id[0])
		snprintf(l->id, sizeof(l->id), "%s", cfg->id);
	else if ((rc = server_leader_make_id(l->id, sizeof(l->id), e))) {
		free(l);
		return rc;
	}
	snprintf(l->address, sizeof(l->address), "%s", cfg->address ? cfg->address : "");
	{
		uint64_t r;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
			free(l);
			return err_errno(e, errno, "leader: getrandom");
		}
		snprintf(l->run, sizeof(l->run), "%016llx", (unsigned long long)r);
	}
	server_leader_boot_id(l->boot, sizeof(l->boot));
	atomic_init(&l->fence.index, 0);
	l->fence.lost = server_leader_fence_lost;
	l->fence.arg = l;
	if ((rc = store_fenced_new(l->store, &l->fence, &l->fenced, e))) {
		free(l);
		return rc;
	}
	pthread_mutex_init(&l->mu, NULL);
	if (clock_cond_init(&l->cond)) {
		pthread_mutex_destroy(&l->mu);
		store_close(l->fenced);
		free(l);
		return err_set(e, CSID_ENOMEM, "leader: out of memory");
	}
	snprintf(l->st.server_id, sizeof(l->st.server_id), "%s", l->id);
	l->st.ttl_ms = l->ttl_ms;
	if (!store_shared(l->store)) {
		/* One server on its own store: it leads, for good. */
		atomic_store(&l->fence.index, 1);
		l->leading = l->st.leading = true;
		snprintf(l->st.leader_id, sizeof(l->st.leader_id), "%s", l->id);
		snprintf(l->st.leader_address, sizeof(l->st.leader_address), "%s", l->address);
		l->st.since_ms = l->started_ms;
		l->st.term = 1;
		if (l->on_change)
			l->on_change(l->arg, true);
	}
	*out = l;
	return 0;
}

/* The election key's value for this server. */
static char *server_leader_value(struct server_leader *l, size_t *len)
{
	json_t *v = json_pack("{s:s,s:s,s:s,s:I}", "id", l->id, "run", l->run, "address",
			      l->address, "since_ms", (json_int_t)clock_wall_ms(l->clock));
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;

	json_decref(v);
	*len = text ? strlen(text) : 0;
	return text;
}

/* Reads a holder's value into the status (mu held). */
static void server_leader_note_holder(struct server_leader *l, const struct store_obj *h)
{
	json_t *v = json_loadb(h->value ? h->value : "", h->len, 0, NULL);
	const char *id = json_string_value(json_object_get(v, "id"));
	const char *addr = json_string_value(json_object_get(v, "address"));
	const char *run = json_string_value(json_object_get(v, "run"));

	snprintf(l->holder_run, sizeof(l->holder_run), "%s", run ? run : "");
	snprintf(l->st.leader_id, sizeof(l->st.leader_id), "%s", id ? id : "?");
	snprintf(l->st.leader_address, sizeof(l->st.leader_address), "%s", addr ? addr : "");
	l->st.since_ms = json_integer_value(json_object_get(v, "since_ms"));
	l->st.term = h->create_index;
	json_decref(v);
}

/* Starts or stops leading (mu held; on_change runs without it). */
static void server_leader_set(struct server_leader *l, bool leading, uint64_t term, const char *why)
{
	if (l->leading == leading)
		return;
	l->leading = l->st.leading = leading;
	atomic_store(&l->fence.index, leading ? term : 0);
	if (leading)
		log_info("msg=\"leading: this server runs the reconciler and node liveness\" "
			 "server=%s term=%llu",
			 l->id, (unsigned long long)term);
	else
		log_warn("msg=\"stepped down: the reconciler and node liveness stop here\" "
			 "server=%s reason=\"%s\"",
			 l->id, why);
	pthread_mutex_unlock(&l->mu);
	if (l->on_change)
		l->on_change(l->arg, leading);
	pthread_mutex_lock(&l->mu);
}

/* Gives up the lease (mu held, released meanwhile): its keys go, another may lead. */
static void server_leader_drop(struct server_leader *l, const char *why)
{
	uint64_t lease = l->lease;
	struct err e;

	server_leader_set(l, false, 0, why);
	l->lease = 0;
	l->st.leader_id[0] = '\0';
	l->st.leader_address[0] = '\0';
	l->st.term = 0;
	l->st.since_ms = 0;
	if (!lease)
		return;
	pthread_mutex_unlock(&l->mu);
	if (store_lease_revoke(l->store, lease, &e))
		log_warn("msg=\"cannot revoke the lease; it expires by itself\" error=\"%s\"",
			 e.msg);
	pthread_mutex_lock(&l->mu);
}

/* One round: a lease, a campaign or a renewal (mu held, released for store calls). */
static void server_leader_round(struct server_leader *l)
{
	int64_t now = clock_now_ms(l->clock);
	uint64_t lease = l->lease;
	struct store_obj h = {0};
	struct err e;
	size_t len = 0;
	char *value;
	int rc;

	err_clear(&e);
	if (l->lost) {
		l->lost = false;
		server_leader_drop(l, "a fenced write found the term over");
		return;
	}
	if (lease && now - l->renewed_ms >= l->ttl_ms / 3) {
		pthread_mutex_unlock(&l->mu);
		rc = store_lease_keepalive(l->store, lease, &e);
		pthread_mutex_lock(&l->mu);
		if (rc == 0) {
			l->renewed_ms = now;
		} else if (rc == CSID_ENOTFOUND ||
			   clock_now_ms(l->clock) - l->renewed_ms >= l->ttl_ms) {
			log_warn("msg=\"lease lost\" server=%s error=\"%s\"", l->id, e.msg);
			server_leader_drop(l, "the lease expired");
			return;
		} else {
			log_warn("msg=\"cannot renew the lease; retrying\" server=%s error=\"%s\"",
				 l->id, e.msg);
		}
	}
	if (!lease) {
		pthread_mutex_unlock(&l->mu);
		rc = store_lease_grant(l->store, l->ttl_ms, &lease, &e);
		pthread_mutex_lock(&l->mu);
		if (rc) {
			log_warn("msg=\"cannot get a lease\" server=%s error=\"%s\"", l->id, e.msg);
			return;
		}
		l->lease = lease;
		l->renewed_ms = now;
	}
	if (l->leading)
		return;
	/*
	 * With a watch on the key, campaign when it went or changed (or once
	 * a TTL passed without a word, in case the watch missed it); without
	 * one, every poll.
	 */
	if (l->watch && l->campaigned_ms && !l->key_changed && now - l->campaigned_ms < l->ttl_ms)
		return;
	l->key_changed = false;
	l->campaigned_ms = now;
	value = server_leader_value(l, &len);
	if (!value)
		return;
	pthread_mutex_unlock(&l->mu);
	rc = store_campaign(l->store, lease, value, len, &h, &e);
	pthread_mutex_lock(&l->mu);
	free(value);
	if (rc == CSID_ENOTFOUND) {
		/* Our lease expired between the grant and the campaign: start over. */
		l->lease = 0;
		l->st.leader_id[0] = '\0';
		l->st.term = 0;
	} else if (rc) {
		log_warn("msg=\"campaign failed\" server=%s error=\"%s\"", l->id, e.msg);
	} else {
		server_leader_note_holder(l, &h);
		if (strcmp(l->st.leader_id, l->id) == 0 && strcmp(l->holder_run, l->run) == 0)
			server_leader_set(l, true, h.create_index, NULL);
	}
	store_obj_free(&h);
}

static void *server_leader_main(void *arg)
{
	struct server_leader *l = arg;
	int64_t poll =
	    l->ttl_ms / 3 < SERVER_LEADER_POLL_MS ? l->ttl_ms / 3 : SERVER_LEADER_POLL_MS;

	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		int64_t next;

		server_leader_round(l);
		if (l->stopping)
			break;
		next = clock_now_ms(l->clock) + poll;
		/* A leader sleeps until its renewal; a failed one is retried a poll later. */
		if (l->lease && l->leading && l->renewed_ms + l->ttl_ms / 3 > next)
			next = l->renewed_ms + l->ttl_ms / 3;
		if (l->lost)
			continue;
		if (l->lease && !l->leading && l->watch) {
			/* Until the key changes, at most a poll (so a stop is heard). */
			int rc;

			pthread_mutex_unlock(&l->mu);
			rc = store_election_wait(l->store, &l->key_seen,
						 next - clock_now_ms(l->clock));
			pthread_mutex_lock(&l->mu);
			l->key_changed = l->key_changed || rc == 1;
			l->watch = rc != CSID_EUNIMPL;
			continue;
		}
		clock_wait(l->clock, &l->cond, &l->mu, next);
	}
	server_leader_drop(l, "the server stops");
	pthread_mutex_unlock(&l->mu);
	return NULL;
}

/* The member record's fields that name this server's process; NULL when out of memory. */
static json_t *server_leader_record(struct server_leader *l)
{
	return json_pack("{s:s,s:s,s:s,s:I,s:s,s:I}", "id", l->id, "run", l->run, "boot", l->boot,
			 "pid", (json_int_t)getpid(), "address", l->address, "started_ms",
			 (json_int_t)l->started_ms);
}

/*
 * Takes this server's ID at once: its lease (the election thread's from
 * then on) and a first member record, so that a server started with the
 * same ID a moment later finds it (server_leader_unique). On failure the
 * election thread gets the lease and server_leader_publish writes the
 * record later, as without this.
 */
static void server_leader_claim_id(struct server_leader *l)
{
	json_t *v = server_leader_record(l);
	char *text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	uint64_t lease = 0;
	struct err e;
	int rc = text ? store_lease_grant(l->store, l->ttl_ms, &lease, &e)
		      : err_set(&e, CSID_ENOMEM, "out of memory");

	json_decref(v);
	if (!rc)
		rc = store_member_put(l->store, lease, l->id, text, strlen(text), &e);
	free(text);
	if (rc)
		log_warn("msg=\"cannot write the first member record; written later\" server=%s "
			 "error=\"%s\"",
			 l->id, e.msg);
	if (!lease)
		return;
	pthread_mutex_lock(&l->mu);
	l->lease = lease;
	l->renewed_ms = clock_now_ms(l->clock);
	pthread_mutex_unlock(&l->mu);
}

/*
 * Whether another process writes the member record of this server's ID:
 * 1 and its address and modify_index when one does, and dead says
 * whether that process is known dead (it ran on this boot of this
 * machine and is gone: this server's previous process, killed); 0 when
 * there is no such record, or it is this process's.
 */
static int server_leader_other(struct server_leader *l, char *addr, size_t cap, uint64_t *index,
			       bool *dead, struct err *e)
{
	struct store_list list = {0};
	int rc = store_member_list(l->store, &list, e);

	if (rc)
		return err_wrap(e, "members");
	for (size_t i = 0; i < list.n; i++) {
		const struct store_obj *o = &list.objs[i];
		json_t *v;
		const char *run, *boot, *a;
		json_int_t pid;

		if (strcmp(o->id, l->id) != 0)
			continue;
		v = json_loadb(o->value ? o->value : "", o->len, 0, NULL);
		run = json_string_value(json_object_get(v, "run"));
		boot = json_string_value(json_object_get(v, "boot"));
		a = json_string_value(json_object_get(v, "address"));
		pid = json_integer_value(json_object_get(v, "pid"));
		if (!run || strcmp(run, l->run) != 0) {
			snprintf(addr, cap, "%s", a && a[0] ? a : "an unknown address");
			*index = o->modify_index;
			*dead = boot && l->boot[0] && strcmp(boot, l->boot) == 0 && pid > 0 &&
				pid != getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
			rc = 1;
		}
		json_decref(v);
		break;
	}
	store_list_free(&list);
	return rc;
}

/*
 * Refuses to run beside another live server with this server's ID: a
 * copied data_dir (a cloned machine image) gives both the same
 * server-id, and their member records and heartbeats would overwrite
 * each other. A record of this ID that another process wrote is either
 * such a server's, which rewrites it every period and keeps its lease
 * alive, or this server's previous process's, killed, whose record goes
 * with its lease within a TTL. So: none, or one of a process known dead
 * on this machine, starts at once; otherwise the record is watched for
 * at most the lease TTL and a half (etcd rounds it up to seconds) and a
 * second: gone, this server starts; rewritten, or still there (its lease
 * kept alive), it is another server's, and this one refuses to start.
 */
static int server_leader_unique(struct server_leader *l, struct err *e)
{
	int64_t deadline = clock_now_ms(l->clock) + l->ttl_ms + l->ttl_ms / 2 + 1000;
	uint64_t first = 0, index = 0;
	char addr[SERVER_LEADER_ID_MAX + 1];
	bool dead = false;
	int rc = 0;

	pthread_mutex_lock(&l->mu);
	while (!l->stopping) {
		pthread_mutex_unlock(&l->mu);
		rc = server_leader_other(l, addr, sizeof(addr), &index, &dead, e);
		pthread_mutex_lock(&l->mu);
		if (rc == 1 && dead)
			log_info(
			    "msg=\"the member record of this server's previous process, which is "
			    "gone, is replaced\" id=%s",
			    l->id);
		if (rc <= 0 || dead)
			break;
		if (first == 0) {
			first = index;
			log_warn(
			    "msg=\"another process's member record has this server's ID; waiting "
			    "for it to expire\" id=%s address=%s",
			    l->id, addr);
		} else if (index != first || clock_now_ms(l->clock) >= deadline) {
			rc = err_set(
			    e, CSID_EEXIST,
			    "server ID %s: in use by the live server at %s (a copy of its "
			    "data_dir, with its server-id file?); remove the server-id file "
			    "of this server's data_dir to give it an ID of its own",
			    l->id, addr);
			break;
		}
		clock_wait(l->clock, &l->cond, &l->mu,
			   clock_now_ms(l->clock) + SERVER_LEADER_POLL_MS);
	}
	pthread_mutex_unlock(&l->mu);
	return rc < 0 ? rc : 0;
}

int server_leader_start(struct server_leader *l, struct err *e)
{
	int rc;

	if (!store_shared(l->store))
		return 0;
	if ((rc = server_leader_unique(l, e)))
		return rc;
	server_leader_claim_id(l);
	l->watch = true; /* until the store says it has no watch on the key */
	if (pthread_create(&l->thread, NULL, server_leader_main, l) != 0)
		return err_set(e, CSID_ENOMEM, "leader: cannot start the election thread");
	l->started = true;
	return 0;
}

void server_leader_free(struct server_leader *l)
{
	if (!l)
		return;
	pthread_mutex_lock(&l->mu);
	l->stopping = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->mu);
	if (l->started)
		pthread_join(l->thread, NULL);
	store_close(l->fenced);
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->mu);
	free(l);
}

bool server_leader_leading(struct server_leader *l)
{
	bool leading;

	pthread_mutex_lock(&l->mu);
	leading = l->leading;
	pthread_mutex_unlock(&l->mu);
	return leading;
}

struct store *server_leader_store(struct server_leader *l)
{
	return l->fenced;
}

int64_t server_leader_compact(struct server_leader *l, int64_t now_ms)
{
	uint64_t mark;
	struct err e;
	int rc;

	if (l->compact_ms < 0)
		return CLOCK_NEVER;
	if (l->compact_due_ms && now_ms < l->compact_due_ms)
		return l->compact_due_ms;
	mark = store_index(l->store);
	if (l->compact_mark > l->compacted) {
		rc = store_compact(l->store, l->compact_mark, &e);
		if (rc == CSID_EUNIMPL) {
			l->compact_ms = -1;
			return CLOCK_NEVER;
		}
		if (rc) {
			char q[600];

			log_warn(
			    "msg=\"cannot compact the store's history; next period tries again\" "
			    "index=%llu error=%s",
			    (unsigned long long)l->compact_mark, log_q(q, sizeof(q), e.msg));
		} else {
			log_info("msg=\"store history compacted\" before=%llu",
				 (unsigned long long)l->compact_mark);
			l->compacted = l->compact_mark;
		}
	}
	l->compact_mark = mark;
	l->compact_due_ms = now_ms + l->compact_ms;
	return l->compact_due_ms;
}

void server_leader_status(struct server_leader *l, struct server_leader_status *out)
{
	pthread_mutex_lock(&l->mu);
	*out = l->st;
	pthread_mutex_unlock(&l->mu);
}

/* [[kind, id, attempts, next_attempt_ms, last_error or null], ...]; NULL when out of memory. */
static json_t *server_leader_status_json(const struct server_member_status *st, size_t n)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < n; i++) {
		const struct model_status *x = &st[i].st;
		json_t *err = x->last_error ? json_string(x->last_error) : json_null();

		if (!err || json_array_append_new(
				arr, json_pack("[s,s,i,I,o]", store_kind_name(st[i].kind), st[i].id,
					       x->attempts, (json_int_t)x->next_attempt_ms, err))) {
			json_decref(arr);
			arr = NULL;
		}
	}
	return arr;
}

/*
 * Two servers with one ID that started at the same moment both passed
 * server_leader_unique; they are found while they run, before each
 * member record: the record is this process's own last one unless
 * another process rewrote it since. That process is named in the status
 * (GET /v1/status/leader) and in an error at most once a
 * SERVER_LEADER_CONFLICT_LOG_MS; the two records go on replacing each other
 * (the leader reads the heartbeats and lost claims of one of them) until
 * an operator gives one server an ID of its own. The election is not
 * affected: its key names the holder's process, not only its ID.
 */
static void server_leader_conflict(struct server_leader *l)
{
	char addr[SERVER_LEADER_ID_MAX + 1] = "";
	int64_t now = clock_now_ms(l->clock);
	uint64_t index;
	bool dead = false, log_it, gone;
	struct err e;
	int rc = server_leader_other(l, addr, sizeof(addr), &index, &dead, &e);

	if (rc < 0)
		return; /* the record's write that follows meets the store's trouble too */
	if (rc == 0 || dead)
		addr[0] = '\0';
	pthread_mutex_lock(&l->mu);
	gone = !addr[0] && l->st.id_conflict[0];
	log_it = addr[0] && (!l->conflict_logged_ms ||
			     now - l->conflict_logged_ms >= SERVER_LEADER_CONFLICT_LOG_MS);
	if (log_it)
		l->conflict_logged_ms = now;
	if (gone)
		l->conflict_logged_ms = 0;
	snprintf(l->st.id_conflict, sizeof(l->st.id_conflict), "%s", addr);
	pthread_mutex_unlock(&l->mu);
	if (log_it)
		log_error("msg=\"another live server writes this server's member record: both have "
			  "this ID (copies of one data_dir?); remove the server-id file of one's "
			  "data_dir and restart it\" id=%s other=%s",
			  l->id, addr);
	if (gone)
		log_info(
		    "msg=\"no other server writes this server's member record any more\" id=%s",
		    l->id);
}

int server_leader_publish(struct server_leader *l, const struct server_member_news *news,
			  struct err *e)
{
	json_t *v = NULL, *arr, *larr, *sarr;
	uint64_t lease;
	char *text;
	int rc;

	if (!store_shared(l->store))
		return 0;
	pthread_mutex_lock(&l->mu);
	lease = l->lease;
	pthread_mutex_unlock(&l->mu);
	if (!lease)
		return err_set(e, CSID_EUNAVAIL, "member %s: no lease yet", l->id);
	server_leader_conflict(l);
	arr = json_array();
	larr = json_array();
	sarr = server_leader_status_json(news->status, news->nstatus);
	for (size_t i = 0; arr && i < news->nseen; i++)
		if (json_array_append_new(arr, json_pack("[s,I]", news->seen[i].node_id,
							 (json_int_t)news->seen[i].age_ms))) {
			json_decref(arr);
			arr = NULL;
		}
	for (size_t i = 0; larr && i < news->nlost; i++) {
		const struct server_member_lost *f = &news->lost[i];

		if (json_array_append_new(larr,
					  json_pack("[s,s,s,I]", f->node_id, f->volume_id,
						    f->alloc_id, (json_int_t)f->prev_report_ms))) {
			json_decref(larr);
			larr = NULL;
		}
	}
	if (arr && larr && sarr && (v = server_leader_record(l))) {
		/* set_new takes the reference, also when it fails. */
		int bad = json_object_set_new(v, "seen", arr);

		bad |= json_object_set_new(v, "lost", larr);
		bad |= json_object_set_new(v, "status", sarr);
		if (bad) {
			json_decref(v);
			v = NULL;
		}
	} else {
		json_decref(arr);
		json_decref(larr);
		json_decref(sarr);
	}
	text = v ? json_dumps(v, JSON_COMPACT) : NULL;
	json_decref(v);
	if (!text)
		return err_set(e, CSID_ENOMEM, "member %s: out of memory", l->id);
	rc = store_member_put(l->store, lease, l->id, text, strlen(text), e);
	free(text);
	return rc;
}

/* The "status" of a member record into m (in a); entries it cannot read are skipped. */
static void server_leader_decode_status(struct arena *a, json_t *arr, struct server_member *m)
{
	if (!json_array_size(arr) ||
	    !(m->status = arena_alloc(a, json_array_size(arr) * sizeof(*m->status))))
		return;
	for (size_t i = 0; i < json_array_size(arr); i++) {
		json_t *x = json_array_get(arr, i), *err = json_array_get(x, 4);
		struct server_member_status *st = &m->status[m->nstatus];
		const char *kind = json_string_value(json_array_get(x, 0));
		const char *id = json_string_value(json_array_get(x, 1));
		int k = 0;

		while (kind && k < STORE_KIND_COUNT_ &&
		       strcmp(store_kind_name((enum store_kind)k), kind) != 0)
			k++;
		if (!kind || k == STORE_KIND_COUNT_ || !id ||
		    !json_is_integer(json_array_get(x, 2)) ||
		    !json_is_integer(json_array_get(x, 3)) ||
		    (!json_is_string(err) && !json_is_null(err)))
			continue;
		memset(st, 0, sizeof(*st));
		st->kind = (enum store_kind)k;
		st->id = arena_strdup(a, id);
		st->st.attempts = (int)json_integer_value(json_array_get(x, 2));
		st->st.next_attempt_ms = json_integer_value(json_array_get(x, 3));
		st->st.last_error =
		    json_is_string(err) ? arena_strdup(a, json_string_value(err)) : NULL;
		if (st->id && (json_is_null(err) || st->st.last_error))
			m->nstatus++;
	}
}

/* Decodes one member record into *m (strings in a); false when it is not one. */
static bool server_leader_decode(struct arena *a, const struct store_obj *o,
				 struct server_member *m)
{
	json_t *v = json_loadb(o->value ? o->value : "", o->len, 0, NULL), *seen, *lost;
	const char *id = json_string_value(json_object_get(v, "id"));
	const char *addr = json_string_value(json_object_get(v, "address"));
	bool ok = id != NULL;

	memset(m, 0, sizeof(*m));
	seen = json_object_get(v, "seen");
	m->id = ok ? arena_strdup(a, id) : NULL;
	m->address = arena_strdup(a, addr ? addr : "");
	m->started_ms = json_integer_value(json_object_get(v, "started_ms"));
	m->modify_index = o->modify_index;
	if (ok && json_array_size(seen))
		m->seen = arena_alloc(a, json_array_size(seen) * sizeof(*m->seen));
	for (size_t i = 0; m->seen && i < json_array_size(seen); i++) {
		json_t *x = json_array_get(seen, i);
		const char *node = json_string_value(json_array_get(x, 0));

		if (!node || !json_is_integer(json_array_get(x, 1)))
			continue;
		m->seen[m->nseen].node_id = arena_strdup(a, node);
		m->seen[m->nseen].age_ms = json_integer_value(json_array_get(x, 1));
		if (m->seen[m->nseen].node_id)
			m->nseen++;
	}
	lost = json_object_get(v, "lost");
	if (ok && json_array_size(lost))
		m->lost = arena_alloc(a, json_array_size(lost) * sizeof(*m->lost));
	for (size_t i = 0; m->lost && i < json_array_size(lost); i++) {
		json_t *x = json_array_get(lost, i);
		struct server_member_lost *f = &m->lost[m->nlost];
		const char *node = json_string_value(json_array_get(x, 0));
		const char *vol = json_string_value(json_array_get(x, 1));
		const char *alloc = json_string_value(json_array_get(x, 2));

		if (!node || !vol || !alloc || !json_is_integer(json_array_get(x, 3)))
			continue;
		f->node_id = arena_strdup(a, node);
		f->volume_id = arena_strdup(a, vol);
		f->alloc_id = arena_strdup(a, alloc);
		f->prev_report_ms = json_integer_value(json_array_get(x, 3));
		if (f->node_id && f->volume_id && f->alloc_id)
			m->nlost++;
	}
	if (ok)
		server_leader_decode_status(a, json_object_get(v, "status"), m);
	json_decref(v);
	return ok && m->id && m->address;
}

int server_leader_members(struct server_leader *l, struct arena *a, struct server_member **out,
			  size_t *n, struct err *e)
{
	struct server_leader_status st;
	struct store_list list = {0};
	int rc;

	*out = NULL;
	*n = 0;
	server_leader_status(l, &st);
	if (!store_shared(l->store)) {
		struct server_member *m = arena_alloc(a, sizeof(*m));

		if (!m || !(m->id = arena_strdup(a, l->id)) ||
		    !(m->address = arena_strdup(a, l->address)))
			return err_set(e, CSID_ENOMEM, "members: out of memory");
		m->started_ms = l->started_ms;
		m->leader = true;
		m->seen = NULL;
		m->nseen = 0;
		m->lost = NULL;
		m->nlost = 0;
		m->status = NULL;
		m->nstatus = 0;
		m->modify_index = 0;
		*out = m;
		*n = 1;
		return 0;
	}
	if ((rc = store_member_list(l->store, &list, e)))
		return err_wrap(e, "members");
	*out = list.n ? arena_alloc(a, list.n * sizeof(**out)) : NULL;
	if (list.n && !*out)
		rc = err_set(e, CSID_ENOMEM, "members: out of memory");
	for (size_t i = 0; !rc && i < list.n; i++) {
		struct server_member *m = &(*out)[*n];

		if (!server_leader_decode(a, &list.objs[i], m)) {
			log_warn("msg=\"a member record csid cannot read; skipped\" member=%s",
				 list.objs[i].id);
			continue;
		}
		m->leader = st.leader_id[0] && strcmp(m->id, st.leader_id) == 0;
		(*n)++;
	}
	store_list_free(&list);
	return rc;
}
