/*
 * Prometheus metrics: counters, gauges and histograms with a fixed set of
 * label names, kept in a registry and rendered in the text exposition
 * format 0.0.4 (what GET /v1/metrics of the server and the agent answer).
 *
 * Two kinds of metrics:
 *  - a struct metrics_family, declared statically next to the code it
 *    measures (METRICS_FAMILY), updated on hot paths: the first update of
 *    a label set creates its child, later ones find it and change its
 *    value under the family's mutex (a short critical section: a few
 *    string compares over a bounded list). A family keeps at most
 *    METRICS_CHILDREN_MAX label sets; updates of new ones past that are
 *    dropped (and counted in csid_metrics_dropped_total), so a label that
 *    turned out unbounded costs memory once, never forever.
 *  - a struct metrics_collector, called at every scrape, that writes
 *    values computed then (catalogue counts, queue depth) through the
 *    metrics_write_* functions.
 *
 * Label values are escaped here; callers never pass secrets or unbounded
 * values (IDs of volumes or allocations) as labels.
 *
 * Families and collectors live in a registry; metrics_default() is the
 * process's, which the HTTP APIs render (with the process_* metrics of
 * this process). A family updated before anyone registered it joins the
 * default registry by itself. Every function is thread-safe.
 */
#ifndef CSID_UTIL_METRICS_H
#define CSID_UTIL_METRICS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/strbuf.h"

#define METRICS_LABELS_MAX 4
#define METRICS_CHILDREN_MAX 1024
/* The Content-Type of the rendered text. */
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

enum metrics_type { METRICS_COUNTER, METRICS_GAUGE, METRICS_HISTOGRAM };

struct metrics_child;
struct metrics_registry;

struct metrics_family {
	const char *name;
	const char *help;
	enum metrics_type type;
	const char *labels[METRICS_LABELS_MAX]; /* names; unused ones NULL */
	const double *buckets; /* histogram upper bounds, increasing (+Inf implied) */
	size_t nbuckets;
	/* private: */
	pthread_mutex_t mu_;
	struct metrics_child *children_;
	size_t nchildren_;
	struct metrics_family *next_;
	struct metrics_registry *reg_;
};

/* A static initializer: METRICS_FAMILY("x_total", "help", METRICS_COUNTER, NULL, 0, "a", "b"). */
#define METRICS_FAMILY(name_, help_, type_, buckets_, nbuckets_, ...)                            \
	{                                                                                        \
		.name = (name_), .help = (help_), .type = (type_), .labels = {__VA_ARGS__},      \
		.buckets = (buckets_), .nbuckets = (nbuckets_), .mu_ = PTHREAD_MUTEX_INITIALIZER \
	}

/* Bucket bounds (seconds) fit for RPCs and requests: 5 ms to 60 s. */
#define METRICS_LATENCY_NBUCKETS 14
extern const double metrics_latency_buckets[METRICS_LATENCY_NBUCKETS];

/* The process's registry (created on first use, never freed). */
struct metrics_registry *metrics_default(void);
/* A private registry (tests); NULL when out of memory. */
struct metrics_registry *metrics_registry_new(void);
/* Frees r and forgets its families' values (they may be registered again). NULL: no-op. */
void metrics_registry_free(struct metrics_registry *r);

/* Adds f to r, once (later calls, with any registry, do nothing). */
void metrics_register(struct metrics_registry *r, struct metrics_family *f);

/*
 * Updates the child of f with the label values (as many as f has label
 * names; NULL values render as ""). add: a counter (v >= 0) or a gauge;
 * set: a gauge; observe: a histogram.
 */
void metrics_add(struct metrics_family *f, const char *const *values, double v);
void metrics_set(struct metrics_family *f, const char *const *values, double v);
void metrics_observe(struct metrics_family *f, const char *const *values, double v);

/* Writing at scrape time (collectors): the text goes to a strbuf. */
struct metrics_writer {
	struct strbuf *out;
	bool failed; /* a write was refused (too big, out of memory) */
};

/* "# HELP" and "# TYPE" lines; call once per name, before its samples. */
void metrics_write_header(struct metrics_writer *w, const char *name, const char *help,
			  enum metrics_type type);
/* One sample: name{l0="v0",...} value; labels and values have n entries. */
void metrics_write_sample(struct metrics_writer *w, const char *name, const char *const *labels,
			  const char *const *values, size_t n, double v);
/* A header and one unlabelled sample. */
void metrics_write_one(struct metrics_writer *w, const char *name, const char *help,
		       enum metrics_type type, double v);

struct metrics_collector {
	void (*collect)(void *ctx, struct metrics_writer *w);
	void *ctx;
	/* private: */
	struct metrics_collector *next_;
};

/* Adds c (borrowed until removed) to r's collectors. */
void metrics_collector_add(struct metrics_registry *r, struct metrics_collector *c);
/* Removes c; when this returns no scrape is calling it any more. */
void metrics_collector_remove(struct metrics_registry *r, struct metrics_collector *c);

/*
 * Renders every family, then every collector, of r into out (appended;
 * out->max caps it); the default registry adds the process_* metrics.
 * Returns 0, or -1 when out refused a write (too big, out of memory).
 */
int metrics_render(struct metrics_registry *r, struct strbuf *out);

#endif
