/*
 * Benchmark of the network edge (not a test: it prints figures and
 * targets, and fails only when a run breaks): a `csid server` child
 * (SQLite store, private directory and port) facing many simulated agents
 * from this process, each a keep-alive TCP connection from its own
 * loopback address group (50 agents per 127.1.x.y address, under the
 * per-client limit), all driven by one epoll loop:
 *   - BENCH_AGENTS agents (default 10,000) each PUT their node's
 *     fingerprint every 10 s, spread evenly over the period;
 *   - BENCH_WATCHERS watchers (default 1,000) each hold a blocking query
 *     GET /v1/node/<node>?index=N&wait=10m on one of those nodes, issued
 *     again whenever it answers (the node's heartbeat changes it);
 *   - a probe thread GETs /v1/status/health on its own connection every
 *     20 ms: p50, p99 and max latency over the measured window (target p99
 *     <= 10 ms), with the server's RSS (VmRSS, VmHWM) at the end.
 *
 *   bench_edge [seconds]      (default 30 measured, after every agent has
 *                              sent once and every watcher is parked)
 *
 * BENCH_AGENTS and BENCH_WATCHERS scale the run down when the machine's
 * file limit cannot hold it (each agent and watcher is one descriptor
 * here and one in the server). CSID_BENCH_KEEP=1 keeps the directory.
 * BENCH_PIN=1 puts the server on CPU 0 and this client on CPU 1;
 * BENCH_NO_BATCH=1 leaves the agents' loop SCHED_NORMAL (see below). Besides
 * the latencies it prints the CPU of the server and of this client, the
 * load average, and per server thread role its CPU and the time it was
 * runnable but waited for a CPU (schedstat): where a probe waits.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proc_stat.h"
#include "server_proc.h"

#define EDGE_PERIOD_MS 10000
#define EDGE_PER_ADDR 50
#define EDGE_PROBE_MS 20
#define EDGE_BUF 8192

static const char edge_node_body[] =
    "{\"plugins\": [{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"type\": \"node\", "
    "\"healthy\": true, \"health\": \"healthy\", \"version\": \"0.1.0\", "
    "\"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"plugin_node_id\": \"n\", "
    "\"max_volumes\": 0, \"topology\": {}}]}";

struct edge_conn {
	int fd;
	int id; /* the node: agent i owns node-i; watcher i watches node-i */
	bool watcher;
	bool busy; /* a request is out */
	char in[EDGE_BUF];
	size_t inlen;
	uint64_t index; /* watcher: the node's last index seen */
	int64_t next_ms; /* agent: when to send the next heartbeat */
	bool due; /* agent: a heartbeat came due while busy */
	int64_t sent_ms;
};

struct edge {
	struct server_proc srv;
	int port;
	int nagents, nwatchers;
	int cursor; /* the next agent due */
	struct edge_conn *conns;
	int ep;
	long heartbeats, answers, errors, watch_answers;
	double hb_ms_sum, hb_ms_max;
	atomic_bool stop;
	/* probe results */
	double *lat;
	size_t nlat, caplat;
	atomic_bool measuring;
};

static int64_t edge_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double edge_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int edge_env(const char *name, int dflt)
{
	const char *v = getenv(name);

	return v && atoi(v) > 0 ? atoi(v) : dflt;
}

/* A connection from 127.1.<group> to the server (blocking connect, then non-blocking). */
static int edge_dial(int port, int group, bool nonblock)
{
	struct sockaddr_in src = {.sin_family = AF_INET}, dst = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	src.sin_addr.s_addr = htonl(0x7f010000u + 1u + (uint32_t)group);
	dst.sin_addr.s_addr = htonl(0x7f000001u);
	dst.sin_port = htons((uint16_t)port);
	if (bind(fd, (struct sockaddr *)&src, sizeof(src)) != 0 ||
	    connect(fd, (struct sockaddr *)&dst, sizeof(dst)) != 0) {
		close(fd);
		return -1;
	}
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

static int edge_send(struct edge_conn *c, const char *req)
{
	size_t n = strlen(req), off = 0;

	/* Requests are small: the socket buffer takes them whole. */
	while (off < n) {
		ssize_t w = send(c->fd, req + off, n - off, MSG_NOSIGNAL);

		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return -1;
		off += (size_t)w;
	}
	c->busy = true;
	c->sent_ms = edge_now_ms();
	return 0;
}

static int edge_heartbeat(struct edge_conn *c)
{
	char req[1024];

	snprintf(req, sizeof(req),
		 "PUT /v1/node/node-%d HTTP/1.1\r\nHost: b\r\nContent-Type: application/json\r\n"
		 "Content-Length: %zu\r\n\r\n%s",
		 c->id, strlen(edge_node_body), edge_node_body);
	return edge_send(c, req);
}

static int edge_watch(struct edge_conn *c)
{
	char req[256];

	snprintf(req, sizeof(req),
		 "GET /v1/node/node-%d?index=%llu&wait=10m HTTP/1.1\r\nHost: b\r\n\r\n", c->id,
		 (unsigned long long)c->index);
	return edge_send(c, req);
}

/* A complete answer in c->in: its status, index and length; 0 when not complete yet. */
static size_t edge_parse(struct edge_conn *c, int *status, uint64_t *index)
{
	char *end, *h;
	size_t head, body = 0;

	c->in[c->inlen] = '\0';
	end = strstr(c->in, "\r\n\r\n");
	if (!end)
		return 0;
	head = (size_t)(end - c->in) + 4;
	h = strcasestr(c->in, "\r\nContent-Length:");
	if (h && h < end)
		body = strtoul(h + 17, NULL, 10);
	if (c->inlen < head + body)
		return 0;
	*status = atoi(c->in + 9);
	*index = 0;
	h = strcasestr(c->in, "\r\nX-Csid-Index:");
	if (h && h < end)
		*index = strtoull(h + 15, NULL, 10);
	return head + body;
}

static void edge_readable(struct edge *b, struct edge_conn *c)
{
	for (;;) {
		ssize_t r = recv(c->fd, c->in + c->inlen, EDGE_BUF - 1 - c->inlen, 0);
		size_t used;
		int status;
		uint64_t index;

		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (r <= 0) {
			if (b->errors++ < 3)
				fprintf(stderr, "bench_edge: conn %d (%s) closed: %s\n", c->id,
					c->watcher ? "watcher" : "agent",
					r ? strerror(errno) : "EOF");
			epoll_ctl(b->ep, EPOLL_CTL_DEL, c->fd, NULL);
			close(c->fd);
			c->fd = -1;
			return;
		}
		c->inlen += (size_t)r;
		while ((used = edge_parse(c, &status, &index)) > 0) {
			if (status != 200 && b->errors++ < 3)
				fprintf(stderr, "bench_edge: answer %d: %.*s\n", status, (int)used,
					c->in);
			memmove(c->in, c->in + used, c->inlen - used);
			c->inlen -= used;
			c->busy = false;
			if (c->watcher) {
				b->watch_answers++;
				if (index)
					c->index = index;
				/* A failed watch is not tried again (the count of errors tells). */
				if (status == 200 && !atomic_load(&b->stop) && edge_watch(c) != 0)
					b->errors++;
			} else {
				double ms = (double)(edge_now_ms() - c->sent_ms);

				b->answers++;
				b->hb_ms_sum += ms;
				if (ms > b->hb_ms_max)
					b->hb_ms_max = ms;
				if (c->due && !atomic_load(&b->stop)) {
					c->due = false;
					b->heartbeats++;
					if (edge_heartbeat(c) != 0)
						b->errors++;
				}
			}
		}
	}
}

static void *edge_probe(void *arg)
{
	struct edge *b = arg;
	const char req[] = "GET /v1/status/health HTTP/1.1\r\nHost: b\r\n\r\n";
	struct edge_conn c = {.fd = -1};

	while (!atomic_load(&b->stop)) {
		double t0;
		int status = 0;
		uint64_t index;
		size_t used = 0;

		if (c.fd < 0 && (c.fd = edge_dial(b->port, 9999, false)) < 0)
			break;
		t0 = edge_now_s();
		if (edge_send(&c, req) != 0) {
			close(c.fd);
			c.fd = -1;
			continue;
		}
		while (!used) {
			ssize_t r = recv(c.fd, c.in + c.inlen, EDGE_BUF - 1 - c.inlen, 0);

			if (r <= 0)
				break;
			c.inlen += (size_t)r;
			used = edge_parse(&c, &status, &index);
		}
		if (!used) {
			close(c.fd);
			c.fd = -1;
			c.inlen = 0;
			continue;
		}
		memmove(c.in, c.in + used, c.inlen - used);
		c.inlen -= used;
		if (atomic_load(&b->measuring) && status == 200 && b->nlat < b->caplat)
			b->lat[b->nlat++] = (edge_now_s() - t0) * 1e3;
		usleep(EDGE_PROBE_MS * 1000);
	}
	if (c.fd >= 0)
		close(c.fd);
	return NULL;
}

static int edge_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/*
 * Where the server's threads spend the window, by thread name: CPU time and
 * time runnable but waiting for a CPU (/proc/<pid>/task/<tid>/schedstat:
 * run ns, wait ns, timeslices). A thread's name tells its role (the I/O
 * threads are libmicrohttpd's "MHD-*").
 */
#define EDGE_GROUPS 16

struct edge_sched {
	char name[EDGE_GROUPS][24];
	double run_ms[EDGE_GROUPS], wait_ms[EDGE_GROUPS];
	long slices[EDGE_GROUPS];
	int threads[EDGE_GROUPS];
	int n;
};

static void edge_sched_read(pid_t pid, struct edge_sched *out)
{
	char path[96], name[24];
	struct dirent *de;
	DIR *d;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		unsigned long long run = 0, wait = 0, slices = 0;
		FILE *f;
		int g;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (!f || !fgets(name, sizeof(name), f)) {
			if (f)
				fclose(f);
			continue;
		}
		fclose(f);
		name[strcspn(name, "\n")] = '\0';
		snprintf(path, sizeof(path), "/proc/%d/task/%s/schedstat", (int)pid, de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fscanf(f, "%llu %llu %llu", &run, &wait, &slices) != 3)
			run = wait = slices = 0;
		fclose(f);
		for (g = 0; g < out->n && strcmp(out->name[g], name) != 0; g++)
			;
		if (g == out->n) {
			if (out->n == EDGE_GROUPS)
				continue;
			snprintf(out->name[out->n++], sizeof(out->name[0]), "%s", name);
		}
		out->run_ms[g] += (double)run / 1e6;
		out->wait_ms[g] += (double)wait / 1e6;
		out->slices[g] += (long)slices;
		out->threads[g]++;
	}
	closedir(d);
}

static void edge_sched_print(const struct edge_sched *a, const struct edge_sched *b, int seconds)
{
	int i, j;

	printf("server threads over the window (CPU, and time runnable waiting for a CPU):\n");
	for (i = 0; i < b->n; i++) {
		double run = b->run_ms[i], wait = b->wait_ms[i];
		long slices = b->slices[i];

		for (j = 0; j < a->n; j++)
			if (strcmp(a->name[j], b->name[i]) == 0) {
				run -= a->run_ms[j];
				wait -= a->wait_ms[j];
				slices -= a->slices[j];
			}
		printf("  %-16s x%-3d CPU %6.1f%%  runqueue wait %8.0f ms  %7ld slices  "
		       "(%.3f ms wait per slice)\n",
		       b->name[i], b->threads[i], run / (10.0 * seconds), wait, slices,
		       slices > 0 ? wait / (double)slices : 0.0);
	}
}

static double edge_self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/*
 * BENCH_PIN: the server's threads on CPU 0, this process (its probe thread
 * included, made later) on CPU 1, so that the client's CPU does not take
 * the server's turns.
 */
static void edge_pin(pid_t pid)
{
	char path[64];
	struct dirent *de;
	cpu_set_t set;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	d = opendir(path);
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.')
			sched_setaffinity((pid_t)atoi(de->d_name), sizeof(set), &set);
	if (d)
		closedir(d);
	CPU_ZERO(&set);
	CPU_SET(1, &set);
	sched_setaffinity(0, sizeof(set), &set);
	printf("pinned: server on CPU 0, this client on CPU 1\n");
}

/* Drives the loop until until_ms: heartbeats when due, answers as they come. */
static void edge_loop(struct edge *b, int64_t until_ms)
{
	struct epoll_event evs[256];

	while (edge_now_ms() < until_ms) {
		int64_t now = edge_now_ms();
		int i, n;

		/*
		 * Agents are due in index order (their times are spread evenly
		 * over the period): a cursor walks them instead of a scan of
		 * all, which would cost this client a core at 10,000 agents.
		 */
		for (i = 0; i < b->nagents && b->conns[b->cursor].next_ms <= now; i++) {
			struct edge_conn *c = &b->conns[b->cursor];

			b->cursor = (b->cursor + 1) % b->nagents;
			c->next_ms += EDGE_PERIOD_MS;
			if (c->fd < 0)
				continue;
			/* Still waiting for the last answer: sent when it comes. */
			if (c->busy) {
				c->due = true;
				continue;
			}
			b->heartbeats++;
			if (edge_heartbeat(c) != 0)
				b->errors++;
		}
		n = epoll_wait(b->ep, evs, 256, 5);
		for (i = 0; i < n; i++)
			edge_readable(b, &b->conns[evs[i].data.u32]);
	}
}

static int edge_run(struct edge *b, int seconds)
{
	int total = b->nagents + b->nwatchers, i, connected = 0, parked;

	int64_t t0;
	pthread_t probe;
	long hb0, ans0;
	double sum0, cpu_srv, cpu_self, load[3];
	struct edge_sched s0, s1;

	if (server_proc_init(&b->srv) != 0 || server_proc_write_config(&b->srv, NULL, NULL) != 0 ||
	    server_proc_start(&b->srv) != 0 || !server_proc_wait_ready(&b->srv, 30000)) {
		fprintf(stderr, "bench_edge: the server did not start\n");
		server_proc_dump_log(&b->srv, "bench_edge");
		return -1;
	}
	b->port = atoi(strrchr(b->srv.addr, ':') + 1);
	if (getenv("BENCH_PIN"))
		edge_pin(b->srv.pid);
	b->conns = calloc((size_t)total, sizeof(*b->conns));
	b->ep = epoll_create1(EPOLL_CLOEXEC);
	if (!b->conns || b->ep < 0)
		return -1;
	for (i = 0; i < total; i++)
		b->conns[i].fd = -1;
	t0 = edge_now_ms();
	for (i = 0; i < b->nagents; i++) {
		struct edge_conn *c = &b->conns[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};

		c->id = i;
		c->fd = edge_dial(b->port, i / EDGE_PER_ADDR, true);
		if (c->fd < 0)
			continue;
		connected++;
		epoll_ctl(b->ep, EPOLL_CTL_ADD, c->fd, &ev);
		/*
		 * Registration: an agent's first heartbeat goes at once (a
		 * connection silent for the header timeout is closed).
		 */
		b->heartbeats++;
		if (edge_heartbeat(c) != 0)
			b->errors++;
	}
	printf("connected %d agents in %.1f s\n", connected, (double)(edge_now_ms() - t0) / 1e3);
	t0 = edge_now_ms();
	for (i = 0; i < b->nagents; i++)
		b->conns[i].next_ms =
		    t0 + EDGE_PERIOD_MS + (int64_t)i * EDGE_PERIOD_MS / b->nagents;
	while (b->answers + b->errors < b->heartbeats && edge_now_ms() < t0 + 120000)
		edge_loop(b, edge_now_ms() + 100);
	printf("registered %ld nodes in %.1f s (errors %ld)\n", b->answers,
	       (double)(edge_now_ms() - t0) / 1e3, b->errors);
	/* Watchers: a connection and a blocking query each, from the node's current index. */
	for (i = b->nagents; i < total; i++) {
		struct edge_conn *c = &b->conns[i];
		struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
		char path[64];

		c->watcher = true;
		c->id = i - b->nagents;
		snprintf(path, sizeof(path), "/v1/node/node-%d", c->id);
		if (http_client_do(b->srv.http, "GET", path, NULL, NULL, &c->index, 0) != 200)
			b->errors++;
		c->fd = edge_dial(b->port, i / EDGE_PER_ADDR, true);
		if (c->fd < 0) {
			b->errors++;
			continue;
		}
		epoll_ctl(b->ep, EPOLL_CTL_ADD, c->fd, &ev);
		if (edge_watch(c) != 0)
			b->errors++;
	}
	edge_loop(b, edge_now_ms() + 2000);
	parked = 0;
	for (i = b->nagents; i < total; i++)
		parked += b->conns[i].busy;
	printf("watchers parked: %d; server threads: %d\n", parked,
	       (int)proc_stat_status(b->srv.pid, "Threads:"));
	/* Measure. */
	b->caplat = (size_t)seconds * 1000 / EDGE_PROBE_MS + 16;
	b->lat = calloc(b->caplat, sizeof(double));
	if (!b->lat || pthread_create(&probe, NULL, edge_probe, b) != 0)
		return -1;
	/*
	 * The simulated agents' loop (this thread, not the probe) is
	 * SCHED_BATCH: real agents are other machines, but here, woken by
	 * every answer, it would preempt the server's I/O thread on the cores
	 * they share, right after each send.
	 */
	if (!getenv("BENCH_NO_BATCH"))
		pthread_setschedparam(pthread_self(), SCHED_BATCH, &(struct sched_param){0});
	hb0 = b->answers;
	sum0 = b->hb_ms_sum;
	b->hb_ms_max = 0;
	edge_sched_read(b->srv.pid, &s0);
	cpu_srv = proc_stat_cpu_s(b->srv.pid);
	cpu_self = edge_self_cpu();
	if (getloadavg(load, 3) != 3)
		load[0] = load[1] = load[2] = -1;
	atomic_store(&b->measuring, true);
	edge_loop(b, edge_now_ms() + (int64_t)seconds * 1000);
	atomic_store(&b->measuring, false);
	edge_sched_read(b->srv.pid, &s1);
	cpu_srv = proc_stat_cpu_s(b->srv.pid) - cpu_srv;
	cpu_self = edge_self_cpu() - cpu_self;
	atomic_store(&b->stop, true);
	pthread_join(probe, NULL);
	ans0 = b->answers - hb0;
	qsort(b->lat, b->nlat, sizeof(double), edge_cmp);
	printf("\nover %d s with %d agents (heartbeat every %d s) and %d blocking queries:\n",
	       seconds, b->nagents, EDGE_PERIOD_MS / 1000, b->nwatchers);
	printf("heartbeats answered:   %ld (%.0f/s), mean %.1f ms, max %.0f ms\n", ans0,
	       (double)ans0 / seconds, ans0 ? (b->hb_ms_sum - sum0) / (double)ans0 : 0.0,
	       b->hb_ms_max);
	printf("blocking answers:      %ld (re-issued each)\n", b->watch_answers);
	printf("errors:                %ld\n", b->errors);
	if (b->nlat) {
		printf("health latency:        p50 %.2f ms  p99 %.2f ms  max %.2f ms  (%zu probes; "
		       "target p99 <= 10 ms)\n",
		       b->lat[b->nlat / 2], b->lat[b->nlat * 99 / 100], b->lat[b->nlat - 1],
		       b->nlat);
	}
	printf("CPU:                   server %.0f%%, this client %.0f%% of one core; load "
	       "average %.2f at the start, %.2f at the end\n",
	       100.0 * cpu_srv / seconds, 100.0 * cpu_self / seconds, load[0],
	       getloadavg(load, 1) == 1 ? load[0] : -1.0);
	edge_sched_print(&s0, &s1, seconds);
	printf("server RSS:            %.1f MiB now, %.1f MiB peak (VmRSS, VmHWM); threads %d\n",
	       (double)proc_stat_status(b->srv.pid, "VmRSS:") / 1024.0,
	       (double)proc_stat_status(b->srv.pid, "VmHWM:") / 1024.0,
	       (int)proc_stat_status(b->srv.pid, "Threads:"));
	return b->nlat ? 0 : -1;
}

int main(int argc, char **argv)
{
	struct edge b;
	struct rlimit rl;
	int seconds = argc > 1 && atoi(argv[1]) > 0 ? atoi(argv[1]) : 30, rc, i;

	memset(&b, 0, sizeof(b));
	setvbuf(stdout, NULL, _IOLBF, 0);
	b.nagents = edge_env("BENCH_AGENTS", 10000);
	b.nwatchers = edge_env("BENCH_WATCHERS", 1000);
	if (b.nwatchers > b.nagents)
		b.nwatchers = b.nagents;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
		if ((rlim_t)(b.nagents + b.nwatchers + 512) > rl.rlim_cur) {
			fprintf(
			    stderr,
			    "bench_edge: file limit %lu too low for %d agents and %d watchers: set "
			    "BENCH_AGENTS/BENCH_WATCHERS lower\n",
			    (unsigned long)rl.rlim_cur, b.nagents, b.nwatchers);
			return 1;
		}
	}
	rc = edge_run(&b, seconds);
	for (i = 0; b.conns && i < b.nagents + b.nwatchers; i++)
		if (b.conns[i].fd >= 0)
			close(b.conns[i].fd);
	free(b.conns);
	free(b.lat);
	if (b.ep > 0)
		close(b.ep);
	server_proc_stop(&b.srv, SIGTERM, 30000);
	if (!getenv("CSID_BENCH_KEEP"))
		server_proc_cleanup(&b.srv);
	else
		printf("kept %s\n", b.srv.dir);
	return rc ? 1 : 0;
}
