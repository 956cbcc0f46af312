/*
 * The fault script of csi-hostpath (format in hp_faults.h): a parser that
 * treats the file as hostile input (bounded lines and rule count, every
 * number range-checked), per-method call counters, and a watcher that
 * re-reads the file when its identity or modification time changes.
 */
#include "hp_faults.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"

struct hp_fault_rule {
	int rpc; /* -1 = every method */
	int64_t nth, times, delay_ms;
	bool hang;
	enum hp_crash crash;
	int code;
	int ready;
	char msg[CSI_STATUS_MSG_MAX];
};

struct hp_faults {
	int n;
	int64_t calls[CSI_RPC_COUNT];
	struct hp_fault_rule r[];
};

static int hp_faults_num(const char *v, int64_t max, int64_t *out)
{
	int64_t n = 0;

	if (!*v)
		return -1;
	for (; *v; v++) {
		if (*v < '0' || *v > '9')
			return -1;
		n = n * 10 + (*v - '0');
		if (n > max)
			return -1;
	}
	*out = n;
	return 0;
}

/* Reads one token (key or key=value, value maybe quoted) from *pp into key/val. */
static int hp_faults_token(const char **pp, const char *end, char *key, size_t klen, char *val,
			   size_t vlen, bool *has_val)
{
	const char *p = *pp;
	size_t k = 0, v = 0;

	*has_val = false;
	while (p < end && *p != '=' && *p != ' ' && *p != '\t') {
		if (k + 1 >= klen)
			return -1;
		key[k++] = *p++;
	}
	key[k] = '\0';
	val[0] = '\0';
	if (p < end && *p == '=') {
		p++;
		*has_val = true;
		if (p < end && *p == '"') {
			p++;
			while (p < end && *p != '"') {
				if (*p == '\\' && p + 1 < end)
					p++;
				if (v + 1 >= vlen)
					return -1;
				val[v++] = *p++;
			}
			if (p >= end)
				return -1; /* unterminated quote */
			p++;
		} else {
			while (p < end && *p != ' ' && *p != '\t') {
				if (v + 1 >= vlen)
					return -1;
				val[v++] = *p++;
			}
		}
		val[v] = '\0';
	}
	*pp = p;
	return 0;
}

static int hp_faults_option(struct hp_fault_rule *r, const char *key, const char *val, bool has_val)
{
	int64_t n;

	if (strcmp(key, "nth") == 0)
		return hp_faults_num(val, 1000000000, &r->nth) || r->nth == 0 ? -1 : 0;
	if (strcmp(key, "times") == 0)
		return hp_faults_num(val, 1000000000, &r->times);
	if (strcmp(key, "delay_ms") == 0)
		return hp_faults_num(val, 3600000, &r->delay_ms);
	if (strcmp(key, "hang") == 0 && !has_val) {
		r->hang = true;
		return 0;
	}
	if (strcmp(key, "crash") == 0) {
		if (!has_val)
			r->crash = HP_CRASH_BEFORE;
		else if (strcmp(val, "after") == 0)
			r->crash = HP_CRASH_AFTER;
		else if (strcmp(val, "before") == 0)
			r->crash = HP_CRASH_BEFORE;
		else
			return -1;
		return 0;
	}
	if (strcmp(key, "code") == 0) {
		if (hp_faults_num(val, 16, &n) == 0)
			r->code = (int)n;
		else
			r->code = csi_code_parse(val);
		return r->code <= 0 ? -1 : 0;
	}
	if (strcmp(key, "msg") == 0 && has_val) {
		snprintf(r->msg, sizeof(r->msg), "%s", val);
		return 0;
	}
	if (strcmp(key, "ready") == 0) {
		if (strcmp(val, "true") == 0)
			r->ready = 1;
		else if (strcmp(val, "false") == 0)
			r->ready = 0;
		else
			return -1;
		return 0;
	}
	return -1;
}

static int hp_faults_line(const char *p, const char *end, struct hp_fault_rule *r, const char **why)
{
	char key[64], val[CSI_STATUS_MSG_MAX];
	bool first = true, has_val;

	memset(r, 0, sizeof(*r));
	r->ready = -1;
	r->times = 1;
	while (p < end) {
		if (*p == ' ' || *p == '\t' || *p == '\r') {
			p++;
			continue;
		}
		if (hp_faults_token(&p, end, key, sizeof(key), val, sizeof(val), &has_val) != 0) {
			*why = "bad token (too long or unterminated quote)";
			return -1;
		}
		if (first) {
			first = false;
			r->rpc = strcmp(key, "*") == 0 ? -1 : csi_rpc_by_name(key);
			if ((r->rpc < 0 && strcmp(key, "*") != 0) || has_val) {
				*why = "unknown method";
				return -1;
			}
			continue;
		}
		if (hp_faults_option(r, key, val, has_val) != 0) {
			*why = "unknown option or bad value";
			return -1;
		}
	}
	if (r->ready >= 0 && r->rpc != CSI_RPC_PROBE && r->rpc != -1) {
		*why = "ready= only applies to Probe";
		return -1;
	}
	return 0;
}

int hp_faults_parse(const char *text, size_t len, struct hp_faults **out, struct err *e)
{
	struct hp_faults *f = calloc(1, sizeof(*f) + sizeof(struct hp_fault_rule) * 16);
	const char *p = text, *end = text + len, *nl, *le, *why = NULL;
	int cap = 16, lineno = 0;

	if (!f)
		return err_set(e, CSID_ENOMEM, "faults: out of memory");
	while (p < end) {
		const char *s;

		nl = memchr(p, '\n', (size_t)(end - p));
		le = nl ? nl : end;
		lineno++;
		if (le - p > HP_FAULTS_MAX_LINE) {
			why = "line too long";
			goto bad;
		}
		for (s = p; s < le && (*s == ' ' || *s == '\t' || *s == '\r'); s++)
			;
		if (s < le && *s != '#') {
			if (memchr(s, '\0', (size_t)(le - s))) {
				why = "NUL byte";
				goto bad;
			}
			if (f->n == HP_FAULTS_MAX_RULES) {
				why = "too many rules";
				goto bad;
			}
			if (f->n == cap) {
				struct hp_faults *g;

				cap *= 2;
				g = realloc(f, sizeof(*f) + sizeof(struct hp_fault_rule) * cap);
				if (!g) {
					hp_faults_free(f);
					return err_set(e, CSID_ENOMEM, "faults: out of memory");
				}
				f = g;
			}
			if (hp_faults_line(s, le, &f->r[f->n], &why) != 0)
				goto bad;
			f->n++;
		}
		p = nl ? nl + 1 : end;
	}
	*out = f;
	return 0;
bad:
	hp_faults_free(f);
	return err_set(e, CSID_EINVAL, "faults: line %d: %s", lineno, why);
}

void hp_faults_free(struct hp_faults *f)
{
	free(f);
}

int hp_faults_rules(const struct hp_faults *f)
{
	return f ? f->n : 0;
}

void hp_faults_match(struct hp_faults *f, enum csi_rpc rpc, struct hp_fault_action *act)
{
	int64_t c;

	memset(act, 0, sizeof(*act));
	act->ready = -1;
	if (!f || (unsigned)rpc >= CSI_RPC_COUNT)
		return;
	c = ++f->calls[rpc];
	for (int i = 0; i < f->n; i++) {
		const struct hp_fault_rule *r = &f->r[i];

		if (r->rpc != -1 && r->rpc != (int)rpc)
			continue;
		if (r->nth && (c < r->nth || (r->times && c >= r->nth + r->times)))
			continue;
		if (r->delay_ms > act->delay_ms)
			act->delay_ms = r->delay_ms;
		act->hang |= r->hang;
		if (r->crash > act->crash)
			act->crash = r->crash;
		if (r->code && !act->code) {
			act->code = r->code;
			snprintf(act->msg, sizeof(act->msg), "%s",
				 r->msg[0] ? r->msg : "injected fault");
		}
		if (r->ready >= 0 && act->ready < 0)
			act->ready = r->ready;
	}
}

/* --- the watched file --- */

struct hp_faults_file {
	char *path;
	pthread_mutex_t lock;
	struct stat seen; /* identity of the loaded version (st_ino 0: none) */
	struct hp_faults *cur;
};

static bool hp_faults_same(const struct stat *a, const struct stat *b)
{
	return a->st_ino == b->st_ino && a->st_dev == b->st_dev && a->st_size == b->st_size &&
	       a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	       a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Reads the file into a new rule set; 0 with *out NULL when missing. */
static int hp_faults_load(const char *path, struct stat *st, struct hp_faults **out, struct err *e)
{
	char *buf = NULL;
	ssize_t n;
	int fd, rc;

	*out = NULL;
	memset(st, 0, sizeof(*st));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : err_errno(e, errno, "faults: open %s", path);
	if (fstat(fd, st) != 0 || st->st_size > HP_FAULTS_MAX_RULES * HP_FAULTS_MAX_LINE) {
		rc = err_set(e, CSID_EINVAL, "faults: %s is too large or unreadable", path);
		goto done;
	}
	buf = malloc((size_t)st->st_size + 1);
	if (!buf) {
		rc = err_set(e, CSID_ENOMEM, "faults: out of memory");
		goto done;
	}
	n = read(fd, buf, (size_t)st->st_size);
	if (n < 0) {
		rc = err_errno(e, errno, "faults: read %s", path);
		goto done;
	}
	rc = hp_faults_parse(buf, (size_t)n, out, e);
done:
	free(buf);
	close(fd);
	return rc;
}

int hp_faults_file_new(const char *path, struct hp_faults_file **out, struct err *e)
{
	struct hp_faults_file *ff = calloc(1, sizeof(*ff));
	int rc;

	if (!ff || !(ff->path = strdup(path))) {
		free(ff);
		return err_set(e, CSID_ENOMEM, "faults: out of memory");
	}
	pthread_mutex_init(&ff->lock, NULL);
	rc = hp_faults_load(path, &ff->seen, &ff->cur, e);
	if (rc) {
		hp_faults_file_free(ff);
		return rc;
	}
	*out = ff;
	return 0;
}

void hp_faults_file_free(struct hp_faults_file *ff)
{
	if (!ff)
		return;
	hp_faults_free(ff->cur);
	pthread_mutex_destroy(&ff->lock);
	free(ff->path);
	free(ff);
}

static bool hp_faults_file_changed_locked(struct hp_faults_file *ff, struct stat *now)
{
	if (stat(ff->path, now) != 0)
		memset(now, 0, sizeof(*now));
	return !hp_faults_same(now, &ff->seen);
}

bool hp_faults_file_changed(struct hp_faults_file *ff)
{
	struct stat now;
	bool changed;

	pthread_mutex_lock(&ff->lock);
	changed = hp_faults_file_changed_locked(ff, &now);
	pthread_mutex_unlock(&ff->lock);
	return changed;
}

void hp_faults_file_match(struct hp_faults_file *ff, enum csi_rpc rpc, struct hp_fault_action *act)
{
	struct stat now;
	struct hp_faults *next;
	struct err e;
	char q[600];

	pthread_mutex_lock(&ff->lock);
	if (hp_faults_file_changed_locked(ff, &now)) {
		hp_faults_free(ff->cur);
		ff->cur = NULL;
		if (hp_faults_load(ff->path, &ff->seen, &next, &e) != 0)
			log_warn("msg=\"fault script ignored\" error=%s",
				 log_q(q, sizeof(q), e.msg));
		else
			ff->cur = next;
		log_info("msg=\"fault script loaded\" rules=%d", hp_faults_rules(ff->cur));
	}
	hp_faults_match(ff->cur, rpc, act);
	pthread_mutex_unlock(&ff->lock);
}
