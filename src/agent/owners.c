/*
 * Claim owners, the I/O-free core (contract in owners.h). The table is a
 * small array of entries keyed by (volume, allocation); an agent holds a
 * handful of owned mounts, so every step is a linear pass.
 *
 * An entry's life:
 *
 *   live --probe says gone / lease lapsed--> gone --owners_take--> busy
 *   busy --owners_done(released)--> forgotten
 *   busy --owners_done(failed)--> gone, due again at retry_ms (backoff)
 *
 * owners_put on a live or gone entry replaces its owner (live again);
 * owners_forget drops it in any state (an explicit unmount).
 */
#include "agent/owners.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct owners {
	struct owners_probe probe;
	struct owners_entry *v;
	size_t n, cap;
};

int owners_new(const struct owners_probe *probe, struct owners **out)
{
	struct owners *o = calloc(1, sizeof(*o));

	*out = NULL;
	if (!o)
		return CSID_ENOMEM;
	o->probe = *probe;
	*out = o;
	return 0;
}

void owners_free(struct owners *o)
{
	if (!o)
		return;
	free(o->v);
	free(o);
}

static struct owners_entry *owners_find(const struct owners *o, const char *vol, const char *alloc)
{
	for (size_t i = 0; i < o->n; i++)
		if (strcmp(o->v[i].vol, vol) == 0 && strcmp(o->v[i].alloc, alloc) == 0)
			return &o->v[i];
	return NULL;
}

const char *owners_kind_name(enum owners_kind k)
{
	switch (k) {
	case OWNERS_PID:
		return "pid";
	case OWNERS_CGROUP:
		return "cgroup";
	case OWNERS_LEASE:
		return "lease";
	}
	return "unknown";
}

int owners_lease_check(int64_t lease_ms, struct err *e)
{
	if (lease_ms < OWNERS_LEASE_MIN_MS || lease_ms > OWNERS_LEASE_MAX_MS)
		return err_set(e, CSID_EINVAL,
			       "lease of %" PRId64 " ms is out of range: a lease is from 1s to "
			       "24h (%d to %lld ms); renew a long one instead",
			       lease_ms, OWNERS_LEASE_MIN_MS, (long long)OWNERS_LEASE_MAX_MS);
	return 0;
}

static bool owners_path_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       strchr("._-@:+=,~\\", c) != NULL;
}

int owners_cgroup_path_check(const char *path, struct err *e)
{
	size_t len = path ? strnlen(path, OWNERS_PATH_MAX + 1) : 0;
	const char *p;

	if (!path || path[0] != '/')
		return err_set(e, CSID_EINVAL, "cgroup path must be absolute");
	if (len > OWNERS_PATH_MAX)
		return err_set(e, CSID_EINVAL, "cgroup path is longer than %d bytes",
			       OWNERS_PATH_MAX);
	for (p = path; *p; p++)
		if (*p != '/' && !owners_path_char(*p))
			return err_set(e, CSID_EINVAL,
				       "cgroup path holds a character other than letters, digits, "
				       "'/' and ._-@:+=,~\\");
	for (p = path; *p;) {
		const char *next = strchr(p + 1, '/');
		size_t clen = next ? (size_t)(next - p - 1) : strlen(p + 1);

		if (clen == 0 || (clen == 1 && p[1] == '.') ||
		    (clen == 2 && p[1] == '.' && p[2] == '.'))
			return err_set(e, CSID_EINVAL,
				       "cgroup path must be normal: no empty, \".\" or \"..\" "
				       "component and no trailing '/'");
		p = next ? next : p + 1 + clen;
	}
	return 0;
}

static int owners_spec_check(const struct owners_spec *s, struct err *e)
{
	switch (s->kind) {
	case OWNERS_PID:
		if (s->pid <= 0)
			return err_set(e, CSID_EINVAL, "owner pid must be positive");
		return 0;
	case OWNERS_CGROUP:
		return owners_cgroup_path_check(s->cgroup, e);
	case OWNERS_LEASE:
		return owners_lease_check(s->lease_ms, e);
	}
	return err_set(e, CSID_EINVAL, "unknown owner kind");
}

int owners_put(struct owners *o, const char *vol, const char *alloc, const struct owners_spec *s,
	       struct err *e)
{
	struct owners_entry *x = owners_find(o, vol, alloc);
	int rc;

	if (strlen(vol) > MOUNT_NAME_MAX || strlen(alloc) > MOUNT_NAME_MAX)
		return err_set(e, CSID_EINVAL, "volume or allocation ID too long");
	if ((rc = owners_spec_check(s, e)))
		return rc;
	if (x && x->busy)
		return err_set(e, CSID_ECONFLICT,
			       "volume %s for %s: its owner is gone (%s) and it is being released",
			       vol, alloc, x->reason);
	if (!x) {
		if (o->n == o->cap) {
			size_t cap = o->cap ? o->cap * 2 : 8;
			struct owners_entry *v = realloc(o->v, cap * sizeof(*v));

			if (!v)
				return err_set(e, CSID_ENOMEM, "out of memory");
			o->v = v;
			o->cap = cap;
		}
		x = &o->v[o->n++];
	}
	memset(x, 0, sizeof(*x));
	snprintf(x->vol, sizeof(x->vol), "%s", vol);
	snprintf(x->alloc, sizeof(x->alloc), "%s", alloc);
	x->spec = *s;
	return 0;
}

bool owners_forget(struct owners *o, const char *vol, const char *alloc)
{
	struct owners_entry *x = owners_find(o, vol, alloc);

	if (!x)
		return false;
	*x = o->v[--o->n];
	return true;
}

int owners_renew(struct owners *o, const char *vol, const char *alloc, int64_t lease_ms,
		 int64_t now, struct owners_spec *out, struct err *e)
{
	struct owners_entry *x = owners_find(o, vol, alloc);
	int rc;

	if (!x)
		return err_set(e, CSID_ENOTFOUND, "volume %s for %s: no owner recorded", vol,
			       alloc);
	if (x->spec.kind != OWNERS_LEASE)
		return err_set(e, CSID_EPRECOND, "volume %s for %s: its owner is a %s, not a lease",
			       vol, alloc, owners_kind_name(x->spec.kind));
	if (x->gone || now >= x->spec.expires_ms)
		return err_set(e, CSID_EPRECOND,
			       "volume %s for %s: the lease expired already; it is being released",
			       vol, alloc);
	if (lease_ms == 0)
		lease_ms = x->spec.lease_ms;
	if ((rc = owners_lease_check(lease_ms, e)))
		return rc;
	x->spec.lease_ms = lease_ms;
	x->spec.expires_ms = now + lease_ms;
	if (out)
		*out = x->spec;
	return 0;
}

static void owners_mark(struct owners_entry *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void owners_mark(struct owners_entry *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->reason, sizeof(x->reason), fmt, ap);
	va_end(ap);
	x->gone = true;
}

/* Asks the probe about x; marks it gone when it is. */
static bool owners_check_one(struct owners *o, struct owners_entry *x, int64_t now)
{
	const struct owners_spec *s = &x->spec;
	uint64_t start = 0;
	bool populated = true;
	int rc;

	switch (s->kind) {
	case OWNERS_PID:
		rc = o->probe.pid_start(o->probe.ctx, s->pid, &start);
		if (rc == CSID_ENOTFOUND)
			owners_mark(x, "owner pid %d exited", s->pid);
		else if (rc == 0 && start != s->start_time)
			owners_mark(x, "owner pid %d exited (the pid is another process's now)",
				    s->pid);
		break;
	case OWNERS_CGROUP:
		rc = o->probe.cgroup_populated(o->probe.ctx, s->cgroup, &populated);
		if (rc == CSID_ENOTFOUND)
			owners_mark(x, "owner cgroup %s was removed", s->cgroup);
		else if (rc == 0 && !populated)
			owners_mark(x, "owner cgroup %s is empty", s->cgroup);
		break;
	case OWNERS_LEASE:
		if (now >= s->expires_ms)
			owners_mark(x, "lease of %" PRId64 " ms expired", s->lease_ms);
		break;
	}
	return x->gone;
}

size_t owners_check(struct owners *o, int64_t now)
{
	size_t n = 0;

	for (size_t i = 0; i < o->n; i++)
		if (!o->v[i].gone && owners_check_one(o, &o->v[i], now))
			n++;
	return n;
}

size_t owners_take(struct owners *o, int64_t now, struct owners_due *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < o->n && n < max; i++) {
		struct owners_entry *x = &o->v[i];

		if (!x->gone && x->spec.kind == OWNERS_LEASE)
			owners_check_one(o, x, now);
		if (!x->gone || x->busy || x->retry_ms > now)
			continue;
		x->busy = true;
		snprintf(out[n].vol, sizeof(out[n].vol), "%s", x->vol);
		snprintf(out[n].alloc, sizeof(out[n].alloc), "%s", x->alloc);
		snprintf(out[n].reason, sizeof(out[n].reason), "%s", x->reason);
		n++;
	}
	return n;
}

void owners_done(struct owners *o, const char *vol, const char *alloc, bool released, int64_t now)
{
	struct owners_entry *x = owners_find(o, vol, alloc);

	if (!x || !x->busy)
		return;
	if (released) {
		owners_forget(o, vol, alloc);
		return;
	}
	x->busy = false;
	x->backoff_ms = x->backoff_ms ? x->backoff_ms * 2 : OWNERS_RETRY_MIN_MS;
	if (x->backoff_ms > OWNERS_RETRY_MAX_MS)
		x->backoff_ms = OWNERS_RETRY_MAX_MS;
	x->retry_ms = now + x->backoff_ms;
}

int64_t owners_next_ms(const struct owners *o)
{
	int64_t next = CLOCK_NEVER;

	for (size_t i = 0; i < o->n; i++) {
		const struct owners_entry *x = &o->v[i];
		int64_t t = CLOCK_NEVER;

		if (x->busy)
			continue;
		if (x->gone)
			t = x->retry_ms;
		else if (x->spec.kind == OWNERS_LEASE)
			t = x->spec.expires_ms;
		if (t < next)
			next = t;
	}
	return next;
}

size_t owners_count(const struct owners *o)
{
	return o->n;
}

const struct owners_entry *owners_at(const struct owners *o, size_t i)
{
	return i < o->n ? &o->v[i] : NULL;
}

int owners_events_parse(const char *text, size_t len, bool *populated)
{
	static const char key[] = "populated ";
	const char *p = text, *end = text + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);

		if (l == sizeof(key) && memcmp(p, key, sizeof(key) - 1) == 0 &&
		    (p[l - 1] == '0' || p[l - 1] == '1')) {
			*populated = p[l - 1] == '1';
			return 0;
		}
		p += l + 1;
	}
	return CSID_EINVAL;
}
