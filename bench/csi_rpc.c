/*
 * Benchmark of the CSI wire layer against the real csi-hostpath plugin
 * (not a test): starts the plugin on a socket in a temporary directory and
 * prints sequential Probe latency (mean, p50, p99), Probe calls/s with 8
 * calls in flight (8 threads making blocking calls on one client, then one
 * thread keeping 8 asynchronous calls in flight), the mean of a create+delete
 * volume cycle and of a stage+publish+unpublish+unstage cycle (real bind
 * mounts, needs root; also per call), the plugin's peak RSS, and the
 * first connect of a client made before its plugin (socket appears ->
 * first successful call, median of a few runs, a fresh plugin each).
 * Everything it mounted and created is removed at the end, also after a
 * failure.
 *
 *   bench_csi_rpc [probe_calls [plugin_threads [async][,pin][,first]]]
 *
 * plugin_threads is passed to csi-hostpath as --threads (its default when
 * absent; "-" for the default too). With "async" it measures only the
 * asynchronous calls, for profiling. With "pin" the benchmark runs on CPU
 * 0 and every plugin thread on CPU 1: the scheduler otherwise tends to
 * wake each side of a unix socket on the other's CPU, so that the two
 * processes take turns on one core; pinned figures show what two
 * separate cores would give, and are labelled so. With "first" it
 * measures only the first connect.
 */
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "csi/csi_client.h"
#include "proc_stat.h"

#ifndef CSI_HOSTPATH_BIN
#error "CSI_HOSTPATH_BIN is defined by CMake"
#endif

#define BENCH_THREADS 8
#define BENCH_CYCLES 2000
#define BENCH_MOUNT_CYCLES 1000
#define BENCH_TIMEOUT_MS 10000
#define BENCH_FIRST_CONNECTS 7

extern char **environ;

struct bench {
	char dir[64];
	char endpoint[128];
	pid_t pid;
	struct csi_client *c;
	int probe_calls;
	const char *plugin_threads; /* NULL: the plugin's default */
};

struct bench_thread {
	struct bench *b;
	pthread_barrier_t *start;
	int calls;
	int failures;
};

static double bench_now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int bench_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* Starts csi-hostpath on endpoint with data_dir (made here); 0 and *pid, or -1. */
static int bench_spawn_plugin(struct bench *b, const char *endpoint, const char *data_dir,
			      pid_t *pid)
{
	char data[96], ep[160];
	char *argv[] = {(char *)CSI_HOSTPATH_BIN,
			"--endpoint",
			ep,
			"--data-dir",
			data,
			"--node-id",
			"bench-node",
			"--log-level",
			"warn",
			b->plugin_threads ? "--threads" : NULL,
			(char *)b->plugin_threads,
			NULL};
	int rc;

	snprintf(data, sizeof(data), "%s", data_dir);
	snprintf(ep, sizeof(ep), "%s", endpoint);
	if (mkdir(data, 0700) != 0)
		return -1;
	rc = posix_spawn(pid, CSI_HOSTPATH_BIN, NULL, NULL, argv, environ);
	if (rc != 0) {
		fprintf(stderr, "spawn %s: %s\n", CSI_HOSTPATH_BIN, strerror(rc));
		*pid = 0;
		return -1;
	}
	return 0;
}

/* Stops the plugin pid (SIGTERM, then SIGKILL after 5 s) and reaps it. */
static void bench_kill_plugin(pid_t pid)
{
	double until = bench_now_us() + 5e6;
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (bench_now_us() > until) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			break;
		}
		nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
	}
}

static int bench_start_plugin(struct bench *b)
{
	char data[96];
	double until;

	snprintf(data, sizeof(data), "%s/data", b->dir);
	if (bench_spawn_plugin(b, b->endpoint, data, &b->pid) != 0)
		return -1;
	/* Wait for the plugin to answer, bounded. */
	until = bench_now_us() + 10e6;
	while (bench_now_us() < until) {
		struct csi_status st;

		if (csi_probe(b->c, NULL, NULL, 1000, &st) == 0)
			return 0;
		nanosleep(&(struct timespec){0, 5 * 1000 * 1000}, NULL);
	}
	fprintf(stderr, "csi-hostpath did not come up on %s\n", b->endpoint);
	return -1;
}

/* Watches for a socket file; notes when it appears. */
struct bench_watch {
	const char *path;
	double deadline_us;
	double seen_us; /* 0: not seen */
};

static void *bench_watch_main(void *arg)
{
	struct bench_watch *w = arg;
	struct stat sb;

	while (bench_now_us() < w->deadline_us) {
		if (lstat(w->path, &sb) == 0) {
			w->seen_us = bench_now_us();
			break;
		}
		nanosleep(&(struct timespec){0, 50 * 1000}, NULL);
	}
	return NULL;
}

/*
 * First connect of a library user: a client made, and failing, before its
 * plugin exists; the time from the plugin's socket appearing (seen by a
 * thread polling lstat every 50 us) to the first successful Probe, with
 * Probe retried every millisecond.
 */
static void bench_first_connect(struct bench *b)
{
	double lat[BENCH_FIRST_CONNECTS], ok_us;
	int n = 0, failures = 0;

	for (int i = 0; i < BENCH_FIRST_CONNECTS; i++) {
		char endpoint[160], path[128], data[96];
		struct bench_watch w = {.path = path, .seen_us = 0};
		struct csi_client *c = NULL;
		pthread_t watcher;
		pid_t pid = 0;
		struct err e;

		snprintf(path, sizeof(path), "%s/first-%d.sock", b->dir, i);
		snprintf(endpoint, sizeof(endpoint), "unix://%s", path);
		snprintf(data, sizeof(data), "%s/first-%d", b->dir, i);
		if (csi_client_grpc_new(endpoint, &c, &e) != 0) {
			failures++;
			continue;
		}
		/* The user's first calls fail: nothing listens yet. */
		for (int j = 0; j < 3; j++) {
			csi_probe(c, NULL, NULL, 1000, NULL);
			nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);
		}
		w.deadline_us = bench_now_us() + 10e6;
		ok_us = 0;
		if (pthread_create(&watcher, NULL, bench_watch_main, &w) != 0) {
			csi_client_free(c);
			failures++;
			continue;
		}
		if (bench_spawn_plugin(b, endpoint, data, &pid) == 0)
			while (bench_now_us() < w.deadline_us) {
				if (csi_probe(c, NULL, NULL, 1000, NULL) == 0) {
					ok_us = bench_now_us();
					break;
				}
				nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
			}
		pthread_join(watcher, NULL);
		if (ok_us > 0 && w.seen_us > 0)
			lat[n++] = (ok_us > w.seen_us ? ok_us - w.seen_us : 0) / 1e3;
		else
			failures++;
		csi_client_free(c);
		bench_kill_plugin(pid);
	}
	if (!n) {
		printf("first connect:         failed (%d tries)\n", failures);
		return;
	}
	qsort(lat, (size_t)n, sizeof(double), bench_cmp);
	printf("first connect:         median %.1f ms  max %.1f ms  (socket appears -> first "
	       "successful call; %d runs, %d failed; target <= 100 ms)\n",
	       lat[n / 2], lat[n - 1], n, failures);
}

static void bench_probe_seq(struct bench *b)
{
	int n = b->probe_calls;
	double *lat = malloc(sizeof(double) * (size_t)n), sum = 0;
	int failures = 0;

	if (!lat)
		return;
	for (int i = 0; i < 1000; i++)
		csi_probe(b->c, NULL, NULL, BENCH_TIMEOUT_MS, NULL);
	for (int i = 0; i < n; i++) {
		double t0 = bench_now_us();

		if (csi_probe(b->c, NULL, NULL, BENCH_TIMEOUT_MS, NULL) != 0)
			failures++;
		lat[i] = bench_now_us() - t0;
		sum += lat[i];
	}
	qsort(lat, (size_t)n, sizeof(double), bench_cmp);
	printf("probe sequential:      mean %.1f us  p50 %.1f us  p99 %.1f us  (%d calls, %d "
	       "failed; target mean <= 80 us)\n",
	       sum / n, lat[n / 2], lat[(int)(n * 0.99)], n, failures);
	free(lat);
}

static void *bench_probe_worker(void *arg)
{
	struct bench_thread *t = arg;

	pthread_barrier_wait(t->start);
	for (int i = 0; i < t->calls; i++)
		if (csi_probe(t->b->c, NULL, NULL, BENCH_TIMEOUT_MS, NULL) != 0)
			t->failures++;
	return NULL;
}

/* CPU seconds (user + system) used so far by process pid (0: this one). */
static double bench_cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid ? (int)pid : (int)getpid());
	f = fopen(path, "r");
	if (!f)
		return 0;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
		return 0;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static void bench_probe_parallel(struct bench *b)
{
	double cpu_c0 = bench_cpu_s(0), cpu_p0 = bench_cpu_s(b->pid), cpu_c1, cpu_p1;
	struct bench_thread t[BENCH_THREADS];
	pthread_t th[BENCH_THREADS];
	pthread_barrier_t start;
	int failures = 0, total = 0;
	double t0, t1;

	pthread_barrier_init(&start, NULL, BENCH_THREADS + 1);
	for (int i = 0; i < BENCH_THREADS; i++) {
		t[i] = (struct bench_thread){b, &start, b->probe_calls / 2, 0};
		pthread_create(&th[i], NULL, bench_probe_worker, &t[i]);
	}
	pthread_barrier_wait(&start);
	t0 = bench_now_us();
	for (int i = 0; i < BENCH_THREADS; i++) {
		pthread_join(th[i], NULL);
		failures += t[i].failures;
		total += t[i].calls;
	}
	t1 = bench_now_us();
	cpu_c1 = bench_cpu_s(0);
	cpu_p1 = bench_cpu_s(b->pid);
	pthread_barrier_destroy(&start);
	printf("probe %d in flight:     %.0f calls/s  (%d calls, %d failed; target >= 50000)\n",
	       BENCH_THREADS, total / ((t1 - t0) / 1e6), total, failures);
	printf("  cpu per call:        client %.1f us  plugin %.1f us  (%d cores online)\n",
	       (cpu_c1 - cpu_c0) * 1e6 / total, (cpu_p1 - cpu_p0) * 1e6 / total,
	       (int)sysconf(_SC_NPROCESSORS_ONLN));
}

/*
 * Asynchronous calls: each of nthreads threads keeps its share of the
 * BENCH_THREADS calls in flight on its own csi_async queue.
 */
struct bench_async {
	struct bench *b;
	pthread_barrier_t *start;
	struct csi_async *q;
	int window;
	int total;
	int started;
	int done;
	int failures;
};

static void bench_async_start(struct bench_async *a);

static void bench_async_done(void *arg, int rc, ProtobufCMessage *resp, const struct csi_status *st)
{
	struct bench_async *a = arg;

	(void)st;
	csi_msg_free(resp);
	a->done++;
	if (rc != 0)
		a->failures++;
	if (a->started < a->total)
		bench_async_start(a);
}

static void bench_async_start(struct bench_async *a)
{
	a->started++;
	if (csi_client_call_async(a->b->c, a->q, CSI_RPC_PROBE, NULL, BENCH_TIMEOUT_MS,
				  bench_async_done, a, NULL) != 0) {
		a->done++;
		a->failures++;
	}
}

static void *bench_async_main(void *arg)
{
	struct bench_async *a = arg;

	pthread_barrier_wait(a->start);
	for (int i = 0; i < a->window && a->started < a->total; i++)
		bench_async_start(a);
	while (a->done < a->total)
		csi_async_poll(a->q, BENCH_TIMEOUT_MS);
	return NULL;
}

static void bench_probe_async(struct bench *b, int nthreads)
{
	double cpu_c0 = bench_cpu_s(0), cpu_p0 = bench_cpu_s(b->pid);
	struct bench_async a[BENCH_THREADS];
	pthread_t th[BENCH_THREADS];
	pthread_barrier_t start;
	int total = 0, failures = 0, n = 0;
	double t0, t1;
	struct err e;

	pthread_barrier_init(&start, NULL, (unsigned)nthreads + 1);
	for (; n < nthreads; n++) {
		a[n] = (struct bench_async){b,
					    &start,
					    NULL,
					    BENCH_THREADS / nthreads,
					    b->probe_calls / 2 * BENCH_THREADS / nthreads,
					    0,
					    0,
					    0};
		if (csi_async_new(&a[n].q, &e) != 0 ||
		    pthread_create(&th[n], NULL, bench_async_main, &a[n]) != 0) {
			fprintf(stderr, "probe async: cannot start thread %d\n", n);
			abort();
		}
	}
	pthread_barrier_wait(&start);
	t0 = bench_now_us();
	for (int i = 0; i < n; i++) {
		pthread_join(th[i], NULL);
		total += a[i].total;
		failures += a[i].failures;
		csi_async_free(a[i].q);
	}
	t1 = bench_now_us();
	pthread_barrier_destroy(&start);
	printf("probe %d in flight, async, %d thread%s: %.0f calls/s  (%d calls, %d failed)\n",
	       BENCH_THREADS, nthreads, nthreads > 1 ? "s" : "", total / ((t1 - t0) / 1e6), total,
	       failures);
	printf("  cpu per call:        client %.1f us  plugin %.1f us\n",
	       (bench_cpu_s(0) - cpu_c0) * 1e6 / total,
	       (bench_cpu_s(b->pid) - cpu_p0) * 1e6 / total);
}

static void bench_cap(Csi__V1__VolumeCapability *cap, Csi__V1__VolumeCapability__MountVolume *mv,
		      Csi__V1__VolumeCapability__AccessMode *am)
{
	csi__v1__volume_capability__init(cap);
	csi__v1__volume_capability__mount_volume__init(mv);
	csi__v1__volume_capability__access_mode__init(am);
	am->mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
	cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap->mount = mv;
	cap->access_mode = am;
}

/* Creates volume name; returns its ID (free it) or NULL. */
static char *bench_create(struct bench *b, const char *name, struct csi_status *st)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__VolumeCapability cap, *caps[1] = {&cap};
	Csi__V1__VolumeCapability__MountVolume mv;
	Csi__V1__VolumeCapability__AccessMode am;
	Csi__V1__CreateVolumeResponse *resp = NULL;
	char *id = NULL;

	bench_cap(&cap, &mv, &am);
	cr.required_bytes = 1 << 20;
	req.name = (char *)name;
	req.capacity_range = &cr;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;
	if (csi_create_volume(b->c, &req, &resp, BENCH_TIMEOUT_MS, st) == 0 && resp->volume)
		id = strdup(resp->volume->volume_id);
	csi_msg_free(resp ? &resp->base : NULL);
	return id;
}

static int bench_delete(struct bench *b, const char *id, struct csi_status *st)
{
	Csi__V1__DeleteVolumeRequest req = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	req.volume_id = (char *)id;
	return csi_delete_volume(b->c, &req, NULL, BENCH_TIMEOUT_MS, st);
}

static void bench_create_delete(struct bench *b)
{
	struct csi_status st;
	double t0, t1;
	int failures = 0;

	t0 = bench_now_us();
	for (int i = 0; i < BENCH_CYCLES; i++) {
		char name[32];
		char *id;

		snprintf(name, sizeof(name), "bench-%d", i);
		id = bench_create(b, name, &st);
		if (!id || bench_delete(b, id, &st) != 0) {
			if (failures++ == 0)
				fprintf(stderr, "create/delete: %s: %s\n", csi_code_name(st.code),
					st.message);
		}
		free(id);
	}
	t1 = bench_now_us();
	printf("create+delete cycle:   mean %.3f ms  (%d cycles, %d failed; target <= 0.5 ms)\n",
	       (t1 - t0) / BENCH_CYCLES / 1e3, BENCH_CYCLES, failures);
}

struct bench_paths {
	const char *id;
	char staging[128];
	char target[128];
};

/*
 * Stage + publish (up) or unpublish + unstage; adds each call's time (us)
 * to us[0] and us[1] when us is not NULL.
 */
static int bench_node_cycle(struct bench *b, struct bench_paths *p, bool up, struct csi_status *st,
			    double *us)
{
	double t0 = bench_now_us(), t1;
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__MountVolume mv;
	Csi__V1__VolumeCapability__AccessMode am;
	int rc;

	bench_cap(&cap, &mv, &am);
	if (up) {
		Csi__V1__NodeStageVolumeRequest sr = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
		Csi__V1__NodePublishVolumeRequest pr = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;

		sr.volume_id = (char *)p->id;
		sr.staging_target_path = p->staging;
		sr.volume_capability = &cap;
		rc = csi_node_stage_volume(b->c, &sr, NULL, BENCH_TIMEOUT_MS, st);
		if (rc)
			return rc;
		pr.volume_id = (char *)p->id;
		pr.staging_target_path = p->staging;
		pr.target_path = p->target;
		pr.volume_capability = &cap;
		t1 = bench_now_us();
		rc = csi_node_publish_volume(b->c, &pr, NULL, BENCH_TIMEOUT_MS, st);
	} else {
		Csi__V1__NodeUnpublishVolumeRequest ur =
		    CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;
		Csi__V1__NodeUnstageVolumeRequest usr = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;

		ur.volume_id = (char *)p->id;
		ur.target_path = p->target;
		rc = csi_node_unpublish_volume(b->c, &ur, NULL, BENCH_TIMEOUT_MS, st);
		if (rc)
			return rc;
		usr.volume_id = (char *)p->id;
		usr.staging_target_path = p->staging;
		t1 = bench_now_us();
		rc = csi_node_unstage_volume(b->c, &usr, NULL, BENCH_TIMEOUT_MS, st);
	}
	if (us) {
		us[0] += t1 - t0;
		us[1] += bench_now_us() - t1;
	}
	return rc;
}

static int bench_controller_publish(struct bench *b, const char *id, bool publish,
				    struct csi_status *st)
{
	if (publish) {
		Csi__V1__ControllerPublishVolumeRequest req =
		    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
		Csi__V1__VolumeCapability cap;
		Csi__V1__VolumeCapability__MountVolume mv;
		Csi__V1__VolumeCapability__AccessMode am;

		bench_cap(&cap, &mv, &am);
		req.volume_id = (char *)id;
		req.node_id = "bench-node";
		req.volume_capability = &cap;
		return csi_controller_publish_volume(b->c, &req, NULL, BENCH_TIMEOUT_MS, st);
	} else {
		Csi__V1__ControllerUnpublishVolumeRequest req =
		    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;

		req.volume_id = (char *)id;
		req.node_id = "bench-node";
		return csi_controller_unpublish_volume(b->c, &req, NULL, BENCH_TIMEOUT_MS, st);
	}
}

static void bench_mounts(struct bench *b)
{
	struct bench_paths p;
	struct csi_status st;
	char parent[128];
	double t0, t1, us[4] = {0, 0, 0, 0};
	int failures = 0, done = 0;
	char *id;

	id = bench_create(b, "bench-mount", &st);
	if (!id) {
		printf("stage..unstage cycle:  skipped (create: %s)\n", st.message);
		return;
	}
	p.id = id;
	snprintf(p.staging, sizeof(p.staging), "%s/staging", b->dir);
	snprintf(parent, sizeof(parent), "%s/pub", b->dir);
	snprintf(p.target, sizeof(p.target), "%s/pub/target", b->dir);
	mkdir(p.staging, 0750);
	mkdir(parent, 0750);
	if (bench_controller_publish(b, id, true, &st) != 0) {
		printf("stage..unstage cycle:  skipped (controller publish: %s)\n", st.message);
		goto out;
	}
	t0 = bench_now_us();
	for (int i = 0; i < BENCH_MOUNT_CYCLES; i++) {
		if (bench_node_cycle(b, &p, true, &st, &us[0]) != 0 ||
		    bench_node_cycle(b, &p, false, &st, &us[2]) != 0) {
			if (failures++ == 0)
				fprintf(stderr, "stage..unstage: %s: %s\n", csi_code_name(st.code),
					st.message);
			if (failures > 10)
				break;
			continue;
		}
		done++;
	}
	t1 = bench_now_us();
	if (done)
		printf("stage..unstage cycle:  mean %.3f ms  (%d cycles, %d failed; target <= 1 "
		       "ms)\n",
		       (t1 - t0) / done / 1e3, done, failures);
	if (done)
		printf("  per call:            stage %.3f  publish %.3f  unpublish %.3f  unstage "
		       "%.3f ms\n",
		       us[0] / done / 1e3, us[1] / done / 1e3, us[2] / done / 1e3,
		       us[3] / done / 1e3);
	else
		printf("stage..unstage cycle:  failed (%s: %s)\n", csi_code_name(st.code),
		       st.message);
	bench_node_cycle(b, &p, false, &st, NULL);
	bench_controller_publish(b, id, false, &st);
out:
	bench_delete(b, id, &st);
	free(id);
}

/* Puts this process on CPU 0 and every thread of the plugin on CPU 1. */
static int bench_pin(struct bench *b)
{
	char path[64];
	struct dirent *d;
	cpu_set_t set;
	DIR *dir;
	int rc = 0;

	CPU_ZERO(&set);
	CPU_SET(1, &set);
	snprintf(path, sizeof(path), "/proc/%d/task", (int)b->pid);
	dir = opendir(path);
	if (!dir)
		return -1;
	while ((d = readdir(dir)) != NULL)
		if (d->d_name[0] != '.' &&
		    sched_setaffinity((pid_t)atoi(d->d_name), sizeof(set), &set) != 0)
			rc = -1;
	closedir(dir);
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	if (rc == 0 && sched_setaffinity(0, sizeof(set), &set) != 0)
		rc = -1;
	if (rc)
		fprintf(stderr, "pin: %s\n", strerror(errno));
	else
		printf("pinned: benchmark on CPU 0, plugin on CPU 1\n");
	return rc;
}

static void bench_stop_plugin(struct bench *b)
{
	bench_kill_plugin(b->pid);
	b->pid = 0;
}

/* Lazily unmounts anything still mounted below dir (after a failure). */
static void bench_unmount_below(const char *dir)
{
	char line[1024], mp[512];
	size_t n = strlen(dir);
	bool again = true;

	for (int round = 0; again && round < 8; round++) {
		FILE *f = fopen("/proc/self/mountinfo", "r");

		again = false;
		if (!f)
			return;
		while (fgets(line, sizeof(line), f))
			if (sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1 &&
			    strncmp(mp, dir, n) == 0 && (mp[n] == '/' || mp[n] == '\0')) {
				umount2(mp, MNT_DETACH);
				again = true;
			}
		fclose(f);
	}
}

static int bench_rm(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

int main(int argc, char **argv)
{
	struct bench b = {.probe_calls = argc > 1 ? atoi(argv[1]) : 20000,
			  .plugin_threads = argc > 2 && strcmp(argv[2], "-") ? argv[2] : NULL};
	bool async_only = argc > 3 && strstr(argv[3], "async");
	bool pin = argc > 3 && strstr(argv[3], "pin");
	bool first_only = argc > 3 && strstr(argv[3], "first");
	struct err e;
	long rss;
	int rc = 1;

	if (b.probe_calls < 100)
		b.probe_calls = 100;
	snprintf(b.dir, sizeof(b.dir), "/tmp/csi-bench-XXXXXX");
	if (!mkdtemp(b.dir)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(b.endpoint, sizeof(b.endpoint), "unix://%s/csi.sock", b.dir);
	if (csi_client_grpc_new(b.endpoint, &b.c, &e) != 0) {
		fprintf(stderr, "client: %s\n", e.msg);
		goto out;
	}
	if (first_only) {
		bench_first_connect(&b);
		rc = 0;
		goto out;
	}
	if (bench_start_plugin(&b) != 0)
		goto out;
	printf("csi-hostpath %s (threads: %s), endpoint %s\n", CSI_HOSTPATH_BIN,
	       b.plugin_threads ? b.plugin_threads : "default", b.endpoint);
	if (pin && bench_pin(&b) != 0)
		goto out;
	if (async_only) {
		bench_probe_async(&b, 1);
		bench_probe_async(&b, 2);
		rc = 0;
		goto out;
	}
	bench_probe_seq(&b);
	bench_probe_parallel(&b);
	bench_probe_async(&b, 1);
	bench_probe_async(&b, 2);
	bench_create_delete(&b);
	if (geteuid() == 0)
		bench_mounts(&b);
	else
		printf("stage..unstage cycle:  skipped (needs root for mount(2))\n");
	rss = proc_stat_status(b.pid, "VmHWM:");
	printf("plugin peak RSS:       %.1f MiB  (VmHWM; target <= 16 MiB)\n", rss / 1024.0);
	bench_first_connect(&b);
	rc = 0;
out:
	bench_stop_plugin(&b);
	bench_unmount_below(b.dir);
	nftw(b.dir, bench_rm, 16, FTW_DEPTH | FTW_PHYS);
	csi_client_free(b.c);
	csi_grpc_shutdown();
	return rc;
}
