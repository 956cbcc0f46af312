/*
 * Benchmark of the state store backends (not a test). For each backend,
 * in a process of its own (this program run again with the backend's
 * name) so that its RSS is its own: loads 100,000 objects of about 1 KiB
 * one transaction each (put txn/s), then measures compare-and-set updates
 * (get + conditional put, txn/s), get latency, the first page of 100,
 * listing all 100,000 in pages of 1,000, reading the change log in pages
 * of 1,000, the RSS with the 100,000 objects loaded, and (SQLite) the
 * time to open the store again.
 *
 *   bench_store [memory|sqlite [dir]]
 *
 * The SQLite file goes to a temporary directory under dir (default /tmp)
 * and is removed at the end.
 */
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"

#define BENCH_OBJECTS 100000
#define BENCH_VALUE 1024
#define BENCH_CAS 20000
#define BENCH_GETS 100000
#define BENCH_PAGES 2000

extern char **environ;

static double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * CPU time (user + system) of this process in seconds: on a shared machine
 * the wall-clock rates depend on the load, the CPU cost per op does not.
 */
static double bench_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int bench_dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Sorts v[0..n) and prints its mean, median and p99 in microseconds. */
static void bench_report(const char *backend, const char *what, double *v, size_t n,
			 const char *target)
{
	double sum = 0;

	qsort(v, n, sizeof(v[0]), bench_dcmp);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	printf("%-7s %-24s mean_us=%.1f p50_us=%.1f p99_us=%.1f n=%zu%s\n", backend, what,
	       sum / (double)n * 1e6, v[n / 2] * 1e6, v[n * 99 / 100] * 1e6, n, target);
}

/* VmRSS and VmHWM of this process in KiB. */
static void bench_rss(long *rss, long *hwm)
{
	char line[256];
	FILE *f = fopen("/proc/self/status", "r");

	*rss = *hwm = 0;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		sscanf(line, "VmRSS: %ld", rss);
		sscanf(line, "VmHWM: %ld", hwm);
	}
	fclose(f);
}

static void bench_die(const char *what, const struct err *e)
{
	fprintf(stderr, "bench store: %s: %s\n", what, e->msg);
	exit(1);
}

/* A JSON-looking value of about BENCH_VALUE bytes for object i. */
static size_t bench_value(char *buf, size_t size, size_t i)
{
	int n =
	    snprintf(buf, size, "{\"id\":\"vol-%06zu\",\"state\":\"ready\",\"parameters\":{", i);

	while ((size_t)n + 40 < BENCH_VALUE)
		n += snprintf(buf + n, size - (size_t)n, "\"k%d\":\"value-%zu\",", n, i);
	n += snprintf(buf + n, size - (size_t)n, "\"end\":1}}");
	return (size_t)n;
}

static void bench_load(struct store *s, const char *name)
{
	char id[32], val[BENCH_VALUE + 64];
	double t0 = bench_now(), c0 = bench_cpu(), dt;
	struct err e;

	for (size_t i = 0; i < BENCH_OBJECTS; i++) {
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, val, 0, 0};

		snprintf(id, sizeof(id), "vol-%06zu", i);
		op.len = bench_value(val, sizeof(val), i);
		if (store_txn(s, &op, 1, NULL, &e) != 0)
			bench_die("load", &e);
	}
	dt = bench_now() - t0;
	printf("%-7s %-24s txn_per_s=%.0f cpu_us_per_txn=%.1f n=%d\n", name, "put (new, 1 KiB)",
	       BENCH_OBJECTS / dt, (bench_cpu() - c0) * 1e6 / BENCH_OBJECTS, BENCH_OBJECTS);
}

static void bench_cas(struct store *s, const char *name)
{
	char id[32];
	unsigned seed = 1;
	double t0 = bench_now(), c0 = bench_cpu(), dt;
	struct store_obj o;
	struct err e;

	for (int i = 0; i < BENCH_CAS; i++) {
		struct store_op op = {STORE_OP_PUT, STORE_VOLUME, id, NULL, 0, 0};

		snprintf(id, sizeof(id), "vol-%06d", rand_r(&seed) % BENCH_OBJECTS);
		if (store_get(s, STORE_VOLUME, id, &o, &e) != 0)
			bench_die("cas get", &e);
		op.value = o.value;
		op.len = o.len;
		op.expect_index = o.modify_index;
		if (store_txn(s, &op, 1, NULL, &e) != 0)
			bench_die("cas put", &e);
		store_obj_free(&o);
	}
	dt = bench_now() - t0;
	printf("%-7s %-24s txn_per_s=%.0f cpu_us_per_txn=%.1f n=%d\n", name, "get + CAS put",
	       BENCH_CAS / dt, (bench_cpu() - c0) * 1e6 / BENCH_CAS, BENCH_CAS);
}

static void bench_get(struct store *s, const char *name)
{
	double *v = malloc(BENCH_GETS * sizeof(double));
	char id[32];
	unsigned seed = 2;
	struct store_obj o;
	struct err e;

	for (int i = 0; i < BENCH_GETS; i++) {
		double t0;

		snprintf(id, sizeof(id), "vol-%06d", rand_r(&seed) % BENCH_OBJECTS);
		t0 = bench_now();
		if (store_get(s, STORE_VOLUME, id, &o, &e) != 0)
			bench_die("get", &e);
		v[i] = bench_now() - t0;
		store_obj_free(&o);
	}
	bench_report(name, "get", v, BENCH_GETS, "");
	free(v);
}

static void bench_pages(struct store *s, const char *name)
{
	double *v = malloc(BENCH_PAGES * sizeof(double));
	const char *after = NULL;
	char last[64];
	size_t total = 0;
	struct store_list l;
	double t0, c0;
	bool more;
	struct err e;

	for (int i = 0; i < BENCH_PAGES; i++) {
		t0 = bench_now();
		if (store_list(s, STORE_VOLUME, NULL, NULL, 100, &l, &e) != 0)
			bench_die("list", &e);
		v[i] = bench_now() - t0;
		store_list_free(&l);
	}
	bench_report(name, "first page of 100", v, BENCH_PAGES, " (target <= 10 ms)");
	free(v);
	t0 = bench_now();
	c0 = bench_cpu();
	do {
		if (store_list(s, STORE_VOLUME, NULL, after, 1000, &l, &e) != 0)
			bench_die("list", &e);
		total += l.n;
		snprintf(last, sizeof(last), "%s", l.n ? l.objs[l.n - 1].id : "");
		after = last;
		more = l.more;
		store_list_free(&l);
	} while (more);
	printf("%-7s %-24s ms=%.1f cpu_ms=%.1f objects=%zu\n", name, "list all, pages of 1000",
	       (bench_now() - t0) * 1e3, (bench_cpu() - c0) * 1e3, total);
}

static void bench_changes(struct store *s, const char *name)
{
	uint64_t after = store_index(s) - STORE_CHANGES_KEEP;
	size_t total = 0;
	struct store_changes c;
	double t0 = bench_now(), dt;
	struct err e;

	for (;;) {
		if (store_changes(s, after, 1000, &c, &e) != 0)
			bench_die("changes", &e);
		if (c.n == 0)
			break;
		total += c.n;
		after = c.changes[c.n - 1].index;
		store_changes_free(&c);
	}
	store_changes_free(&c);
	dt = bench_now() - t0;
	printf("%-7s %-24s changes_per_s=%.0f n=%zu\n", name, "changes, pages of 1000",
	       (double)total / dt, total);
}

static int bench_backend(const char *name, const char *base)
{
	char dir[256], path[300];
	struct store *s = NULL;
	long rss, hwm;
	struct err e;
	int rc;

	snprintf(dir, sizeof(dir), "%s/csid-bench-store-XXXXXX", base);
	if (strcmp(name, "memory") == 0) {
		rc = store_mem_new(&s, &e);
		dir[0] = '\0';
	} else {
		if (mkdtemp(dir) == NULL) {
			perror("mkdtemp");
			return 1;
		}
		snprintf(path, sizeof(path), "%s/store.db", dir);
		rc = store_sqlite_open(path, &s, &e);
	}
	if (rc != 0)
		bench_die("open", &e);
	bench_load(s, name);
	bench_rss(&rss, &hwm);
	printf("%-7s %-24s rss_mib=%.1f peak_mib=%.1f\n", name, "100k objects loaded", rss / 1024.0,
	       hwm / 1024.0);
	bench_cas(s, name);
	bench_get(s, name);
	bench_pages(s, name);
	bench_changes(s, name);
	store_close(s);
	if (dir[0] != '\0') {
		/* Reopening: the probe (quick_check) and loading the index. */
		double t0 = bench_now();

		if (store_sqlite_open(path, &s, &e) != 0)
			bench_die("reopen", &e);
		printf("%-7s %-24s ms=%.1f\n", name, "reopen with 100k", (bench_now() - t0) * 1e3);
		store_close(s);
	}
	if (dir[0] != '\0') {
		const char *suffix[] = {"", "-wal", "-shm"};

		for (int i = 0; i < 3; i++) {
			snprintf(path, sizeof(path), "%s/store.db%s", dir, suffix[i]);
			unlink(path);
		}
		rmdir(dir);
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *backends[] = {"memory", "sqlite"};
	const char *base = argc > 2 ? argv[2] : "/tmp";
	int failed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1)
		return bench_backend(argv[1], base);
	for (int i = 0; i < 2; i++) {
		char *args[] = {argv[0], (char *)backends[i], (char *)base, NULL};
		int status = 0;
		pid_t pid;

		if (posix_spawn(&pid, "/proc/self/exe", NULL, NULL, args, environ) != 0 ||
		    waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
		    WEXITSTATUS(status) != 0)
			failed = 1;
	}
	return failed;
}
