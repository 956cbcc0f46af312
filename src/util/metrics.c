/*
 * Metrics registry and text rendering (see metrics.h). A family holds a
 * list of children, one per label set, each with its value (counter,
 * gauge) or its per-bucket counts, sum and count (histogram); the list is
 * bounded by METRICS_CHILDREN_MAX and only grows. A registry holds a list
 * of families (prepend only: a render walks it without the lock) and a
 * list of collectors (a render holds their lock while it calls them, so
 * a removal waits for the scrape in progress).
 *
 * Rendering follows the text exposition format 0.0.4: per family a HELP
 * line (backslash and newline escaped), a TYPE line, then samples with
 * label values escaped (backslash, double quote, newline); histograms as
 * cumulative _bucket{le=...} samples ending with le="+Inf", then _sum and
 * _count.
 */
#include "util/metrics.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util/procstat.h"

struct metrics_child {
	struct metrics_child *next;
	char *values[METRICS_LABELS_MAX];
	double value; /* counter, gauge; histogram: the sum */
	uint64_t count; /* histogram */
	uint64_t *buckets; /* histogram: per bucket (not cumulative), nbuckets + 1 (+Inf) */
};

struct metrics_registry {
	pthread_mutex_t mu; /* guards families (prepend) */
	struct metrics_family *families;
	pthread_mutex_t collect_mu; /* guards collectors; held while they run */
	struct metrics_collector *collectors;
	bool process; /* render the process_* metrics */
};

const double metrics_latency_buckets[METRICS_LATENCY_NBUCKETS] = {
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 30, 60};

static struct metrics_registry metrics_global = {
    .mu = PTHREAD_MUTEX_INITIALIZER,
    .collect_mu = PTHREAD_MUTEX_INITIALIZER,
    .process = true,
};

/* Updates of label sets past a family's cap. */
static struct metrics_family metrics_dropped =
    METRICS_FAMILY("csid_metrics_dropped_total",
		   "Metric updates dropped because their family reached its number of label sets.",
		   METRICS_COUNTER, NULL, 0, "metric");

struct metrics_registry *metrics_default(void)
{
	return &metrics_global;
}

struct metrics_registry *metrics_registry_new(void)
{
	struct metrics_registry *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	pthread_mutex_init(&r->mu, NULL);
	pthread_mutex_init(&r->collect_mu, NULL);
	return r;
}

static void metrics_child_free(struct metrics_child *c)
{
	for (size_t i = 0; i < METRICS_LABELS_MAX; i++)
		free(c->values[i]);
	free(c->buckets);
	free(c);
}

void metrics_registry_free(struct metrics_registry *r)
{
	struct metrics_family *f, *next;

	if (!r || r == &metrics_global)
		return;
	for (f = r->families; f; f = next) {
		struct metrics_child *c, *cn;

		next = f->next_;
		pthread_mutex_lock(&f->mu_);
		for (c = f->children_; c; c = cn) {
			cn = c->next;
			metrics_child_free(c);
		}
		f->children_ = NULL;
		f->nchildren_ = 0;
		f->next_ = NULL;
		__atomic_store_n(&f->reg_, NULL, __ATOMIC_RELEASE);
		pthread_mutex_unlock(&f->mu_);
	}
	pthread_mutex_destroy(&r->mu);
	pthread_mutex_destroy(&r->collect_mu);
	free(r);
}

void metrics_register(struct metrics_registry *r, struct metrics_family *f)
{
	pthread_mutex_lock(&r->mu);
	pthread_mutex_lock(&f->mu_);
	if (!f->reg_) {
		__atomic_store_n(&f->reg_, r, __ATOMIC_RELEASE);
		f->next_ = r->families;
		r->families = f;
	}
	pthread_mutex_unlock(&f->mu_);
	pthread_mutex_unlock(&r->mu);
}

static size_t metrics_nlabels(const struct metrics_family *f)
{
	size_t n = 0;

	while (n < METRICS_LABELS_MAX && f->labels[n])
		n++;
	return n;
}

static bool metrics_same(const struct metrics_child *c, const char *const *values, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *v = values && values[i] ? values[i] : "";

		if (strcmp(c->values[i], v) != 0)
			return false;
	}
	return true;
}

/* The child of values, created when missing; f->mu_ held. NULL: at the cap or out of memory. */
static struct metrics_child *metrics_child(struct metrics_family *f, const char *const *values)
{
	size_t n = metrics_nlabels(f), i;
	struct metrics_child *c;

	for (c = f->children_; c; c = c->next)
		if (metrics_same(c, values, n))
			return c;
	if (f->nchildren_ >= METRICS_CHILDREN_MAX)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	for (i = 0; i < n; i++) {
		c->values[i] = strdup(values && values[i] ? values[i] : "");
		if (!c->values[i])
			goto fail;
	}
	if (f->type == METRICS_HISTOGRAM) {
		c->buckets = calloc(f->nbuckets + 1, sizeof(*c->buckets));
		if (!c->buckets)
			goto fail;
	}
	/* Appended, so the text keeps the order label sets first appeared in. */
	if (!f->children_) {
		f->children_ = c;
	} else {
		struct metrics_child *last = f->children_;

		while (last->next)
			last = last->next;
		last->next = c;
	}
	f->nchildren_++;
	return c;
fail:
	metrics_child_free(c);
	return NULL;
}

enum metrics_op { METRICS_OP_ADD, METRICS_OP_SET, METRICS_OP_OBSERVE };

static void metrics_update(struct metrics_family *f, const char *const *values, double v,
			   enum metrics_op op)
{
	struct metrics_child *c;
	bool dropped = false;

	if (!__atomic_load_n(&f->reg_, __ATOMIC_ACQUIRE))
		metrics_register(&metrics_global, f);
	pthread_mutex_lock(&f->mu_);
	c = metrics_child(f, values);
	if (!c) {
		dropped = true;
	} else if (op == METRICS_OP_OBSERVE) {
		size_t b = 0;

		while (b < f->nbuckets && v > f->buckets[b])
			b++;
		c->buckets[b]++;
		c->count++;
		c->value += v;
	} else if (op == METRICS_OP_SET) {
		c->value = v;
	} else {
		c->value += v;
	}
	pthread_mutex_unlock(&f->mu_);
	if (dropped && f != &metrics_dropped) {
		const char *name[] = {f->name};

		metrics_update(&metrics_dropped, name, 1, METRICS_OP_ADD);
	}
}

void metrics_add(struct metrics_family *f, const char *const *values, double v)
{
	metrics_update(f, values, v, METRICS_OP_ADD);
}

void metrics_set(struct metrics_family *f, const char *const *values, double v)
{
	metrics_update(f, values, v, METRICS_OP_SET);
}

void metrics_observe(struct metrics_family *f, const char *const *values, double v)
{
	metrics_update(f, values, v, METRICS_OP_OBSERVE);
}

static void metrics_put(struct metrics_writer *w, const char *s, size_t n)
{
	if (n && strbuf_write((char *)s, 1, n, w->out) != n)
		w->failed = true;
}

static void metrics_puts(struct metrics_writer *w, const char *s)
{
	metrics_put(w, s, strlen(s));
}

/* s with backslash and newline escaped, and with a double quote when quote. */
static void metrics_escaped(struct metrics_writer *w, const char *s, bool quote)
{
	char buf[256];
	size_t n = 0;

	for (; *s; s++) {
		const char *esc = *s == '\\'           ? "\\\\"
				  : *s == '\n'         ? "\\n"
				  : quote && *s == '"' ? "\\\""
						       : NULL;

		if (n + 2 > sizeof(buf)) {
			metrics_put(w, buf, n);
			n = 0;
		}
		if (esc) {
			buf[n++] = esc[0];
			buf[n++] = esc[1];
		} else {
			buf[n++] = *s;
		}
	}
	metrics_put(w, buf, n);
}

/* A sample value: integers as such, others round-trip exact, and +Inf, -Inf, NaN. */
static void metrics_number(char *buf, size_t cap, double v)
{
	if (isnan(v))
		snprintf(buf, cap, "NaN");
	else if (isinf(v))
		snprintf(buf, cap, v > 0 ? "+Inf" : "-Inf");
	else if (v == floor(v) && fabs(v) < 1e15)
		snprintf(buf, cap, "%.0f", v);
	else {
		snprintf(buf, cap, "%.15g", v);
		if (strtod(buf, NULL) != v)
			snprintf(buf, cap, "%.17g", v);
	}
}

static const char *metrics_type_name(enum metrics_type t)
{
	return t == METRICS_COUNTER ? "counter" : t == METRICS_GAUGE ? "gauge" : "histogram";
}

void metrics_write_header(struct metrics_writer *w, const char *name, const char *help,
			  enum metrics_type type)
{
	metrics_puts(w, "# HELP ");
	metrics_puts(w, name);
	metrics_puts(w, " ");
	metrics_escaped(w, help, false);
	metrics_puts(w, "\n# TYPE ");
	metrics_puts(w, name);
	metrics_puts(w, " ");
	metrics_puts(w, metrics_type_name(type));
	metrics_puts(w, "\n");
}

/* name{labels...,extra="xv"} v; extra may be NULL. */
static void metrics_sample(struct metrics_writer *w, const char *name, const char *suffix,
			   const char *const *labels, const char *const *values, size_t n,
			   const char *extra, const char *xv, double v)
{
	char num[40];
	size_t i;

	metrics_puts(w, name);
	metrics_puts(w, suffix);
	if (n || extra) {
		metrics_puts(w, "{");
		for (i = 0; i < n; i++) {
			if (i)
				metrics_puts(w, ",");
			metrics_puts(w, labels[i]);
			metrics_puts(w, "=\"");
			metrics_escaped(w, values && values[i] ? values[i] : "", true);
			metrics_puts(w, "\"");
		}
		if (extra) {
			metrics_puts(w, n ? "," : "");
			metrics_puts(w, extra);
			metrics_puts(w, "=\"");
			metrics_puts(w, xv);
			metrics_puts(w, "\"");
		}
		metrics_puts(w, "}");
	}
	metrics_number(num, sizeof(num), v);
	metrics_puts(w, " ");
	metrics_puts(w, num);
	metrics_puts(w, "\n");
}

void metrics_write_sample(struct metrics_writer *w, const char *name, const char *const *labels,
			  const char *const *values, size_t n, double v)
{
	metrics_sample(w, name, "", labels, values, n, NULL, NULL, v);
}

void metrics_write_one(struct metrics_writer *w, const char *name, const char *help,
		       enum metrics_type type, double v)
{
	metrics_write_header(w, name, help, type);
	metrics_write_sample(w, name, NULL, NULL, 0, v);
}

static void metrics_render_family(struct metrics_writer *w, struct metrics_family *f)
{
	size_t n = metrics_nlabels(f), b;
	struct metrics_child *c;
	char le[40];

	pthread_mutex_lock(&f->mu_);
	metrics_write_header(w, f->name, f->help, f->type);
	for (c = f->children_; c; c = c->next) {
		const char *const *vals = (const char *const *)c->values;
		uint64_t cum = 0;

		if (f->type != METRICS_HISTOGRAM) {
			metrics_sample(w, f->name, "", f->labels, vals, n, NULL, NULL, c->value);
			continue;
		}
		for (b = 0; b < f->nbuckets; b++) {
			cum += c->buckets[b];
			metrics_number(le, sizeof(le), f->buckets[b]);
			metrics_sample(w, f->name, "_bucket", f->labels, vals, n, "le", le,
				       (double)cum);
		}
		metrics_sample(w, f->name, "_bucket", f->labels, vals, n, "le", "+Inf",
			       (double)c->count);
		metrics_sample(w, f->name, "_sum", f->labels, vals, n, NULL, NULL, c->value);
		metrics_sample(w, f->name, "_count", f->labels, vals, n, NULL, NULL,
			       (double)c->count);
	}
	pthread_mutex_unlock(&f->mu_);
}

/* Seconds since the epoch when this process started, or 0 when unknown. */
static double metrics_process_start(void)
{
	char buf[256], state;
	unsigned long long btime = 0;
	uint64_t start_ticks;
	long hz = sysconf(_SC_CLK_TCK);
	FILE *fp;

	if (procstat_read(0, &state, &start_ticks))
		return 0;
	fp = fopen("/proc/stat", "re");
	if (!fp)
		return 0;
	while (fgets(buf, sizeof(buf), fp))
		if (sscanf(buf, "btime %llu", &btime) == 1)
			break;
	fclose(fp);
	if (!btime || hz <= 0)
		return 0;
	return (double)btime + (double)start_ticks / (double)hz;
}

static void metrics_render_process(struct metrics_writer *w)
{
	unsigned long long vsize = 0, rss = 0;
	struct rlimit rl;
	struct rusage ru;
	FILE *fp = fopen("/proc/self/statm", "re");
	DIR *d;
	long page = sysconf(_SC_PAGESIZE);
	double fds = 0;

	if (fp) {
		if (fscanf(fp, "%llu %llu", &vsize, &rss) != 2)
			vsize = rss = 0;
		fclose(fp);
	}
	d = opendir("/proc/self/fd");
	if (d) {
		struct dirent *de;

		while ((de = readdir(d)) != NULL)
			if (de->d_name[0] != '.')
				fds++;
		closedir(d);
		fds--; /* the directory stream's own descriptor */
	}
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		memset(&ru, 0, sizeof(ru));
	metrics_write_one(w, "process_cpu_seconds_total",
			  "Total user and system CPU time spent in seconds.", METRICS_COUNTER,
			  (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
			      (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6);
	metrics_write_one(w, "process_resident_memory_bytes", "Resident memory size in bytes.",
			  METRICS_GAUGE, (double)rss * (double)page);
	metrics_write_one(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
			  METRICS_GAUGE, (double)vsize * (double)page);
	metrics_write_one(w, "process_open_fds", "Number of open file descriptors.", METRICS_GAUGE,
			  fds);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		metrics_write_one(w, "process_max_fds", "Maximum number of open file descriptors.",
				  METRICS_GAUGE,
				  rl.rlim_cur == RLIM_INFINITY ? INFINITY : (double)rl.rlim_cur);
	metrics_write_one(w, "process_start_time_seconds",
			  "Start time of the process since unix epoch in seconds.", METRICS_GAUGE,
			  metrics_process_start());
}

int metrics_render(struct metrics_registry *r, struct strbuf *out)
{
	struct metrics_writer w = {.out = out};
	struct metrics_family *f;
	struct metrics_collector *c;

	if (r == &metrics_global) {
		/* Shown even before the first drop, so a dashboard can rely on it. */
		metrics_register(r, &metrics_dropped);
	}
	pthread_mutex_lock(&r->mu);
	f = r->families;
	pthread_mutex_unlock(&r->mu);
	/* Families are only ever prepended: the list from f on stays as it is. */
	for (; f; f = f->next_)
		metrics_render_family(&w, f);
	pthread_mutex_lock(&r->collect_mu);
	for (c = r->collectors; c; c = c->next_)
		c->collect(c->ctx, &w);
	pthread_mutex_unlock(&r->collect_mu);
	if (r->process)
		metrics_render_process(&w);
	return w.failed ? -1 : 0;
}

void metrics_collector_add(struct metrics_registry *r, struct metrics_collector *c)
{
	pthread_mutex_lock(&r->collect_mu);
	c->next_ = NULL;
	if (!r->collectors) {
		r->collectors = c;
	} else {
		struct metrics_collector *last = r->collectors;

		while (last->next_)
			last = last->next_;
		last->next_ = c;
	}
	pthread_mutex_unlock(&r->collect_mu);
}

void metrics_collector_remove(struct metrics_registry *r, struct metrics_collector *c)
{
	struct metrics_collector **pp;

	pthread_mutex_lock(&r->collect_mu);
	for (pp = &r->collectors; *pp; pp = &(*pp)->next_)
		if (*pp == c) {
			*pp = c->next_;
			break;
		}
	c->next_ = NULL;
	pthread_mutex_unlock(&r->collect_mu);
}
