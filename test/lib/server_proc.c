/*
 * `csid server` as a child process for end-to-end tests (see
 * server_proc.h).
 */
#include "server_proc.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostpath_proc.h"
#include "proc_guard.h"

#ifndef CSID_BIN
#define CSID_BIN "csid"
#endif
#ifndef CSI_HOSTPATH_BIN
#define CSI_HOSTPATH_BIN "csi-hostpath"
#endif

/* The low end of the kernel's range for the local ports of outgoing connections. */
static int server_proc_ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int low = 32768, high = 60999;

	if (f) {
		if (fscanf(f, "%d %d", &low, &high) != 2)
			low = 32768;
		fclose(f);
	}
	return low;
}

/*
 * Takes port on 127.0.0.1 for this process: a bind without SO_REUSEADDR
 * (it fails while any socket of any process is bound to the port, on any
 * address, or lingers there), then SO_REUSEADDR set on the bound socket,
 * which is kept open and never listens. While it is held, another
 * process's take of the port fails, and a connect never gets it as its
 * local port; a listener that sets SO_REUSEADDR (csid, etcd, chromedriver
 * all do) binds it on any address. Returns whether the port is ours.
 */
static bool server_proc_hold(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return false;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0) {
		close(fd);
		return false;
	}
	/* Held until the process exits (close-on-exec: never by a child). */
	return true;
}

int server_proc_free_port(void)
{
	static unsigned seq;
	int low = SERVER_PROC_PORT_MIN, high = server_proc_ephemeral_low();
	unsigned span, start;

	if (high - low < 1000)
		return -1;
	span = (unsigned)(high - low);
	/* A different start in every process and every call: concurrent tests rarely meet. */
	start = ((unsigned)getpid() * 2654435761u + seq++ * 40503u) % span;
	for (unsigned i = 0; i < span; i++) {
		int port = low + (int)((start + i) % span);

		if (server_proc_hold(port))
			return port;
	}
	return -1;
}

int server_proc_init(struct server_proc *s)
{
	int port;

	memset(s, 0, sizeof(*s));
	snprintf(s->dir, sizeof(s->dir), "/tmp/csp-XXXXXX");
	if (!mkdtemp(s->dir))
		return -1;
	proc_guard_track_dir(s->dir);
	snprintf(s->data_dir, sizeof(s->data_dir), "%s/d", s->dir);
	snprintf(s->config, sizeof(s->config), "%s/server.json", s->dir);
	snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
	snprintf(s->faults, sizeof(s->faults), "%s/faults", s->dir);
	snprintf(s->hp_dir, sizeof(s->hp_dir), "%s/hp", s->dir);
	port = server_proc_free_port();
	if (port < 0)
		return -1;
	snprintf(s->addr, sizeof(s->addr), "127.0.0.1:%d", port);
	snprintf(s->base, sizeof(s->base), "http://%s", s->addr);
	s->http = http_client_new(s->base);
	if (!s->http || hpp_write_file(s->faults, "") != 0)
		return -1;
	return 0;
}

static const char server_proc_default[] =
    "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"20ms\","
    " \"backoff_max\": \"500ms\", \"rpc_timeout\": \"5s\", \"node_ttl\": \"30s\","
    " \"controller_plugins\": [{\"id\": \"" SERVER_PROC_HP_ID "\","
    " \"command\": \"@HP@\", \"args\": [\"--endpoint\", \"${CSI_ENDPOINT}\", \"--mode\","
    " \"controller\", \"--data-dir\", \"@DIR@/hp\", \"--node-id\", \"node-1\", \"--faults\","
    " \"@DIR@/faults\"]}]"
    "@EXTRA@}";

int server_proc_write_config(struct server_proc *s, const char *json, const char *extra)
{
	const char *p = json ? json : server_proc_default;
	size_t n = 0, cap = strlen(p) + (extra ? strlen(extra) : 0) + 64 * SERVER_PROC_PATH;
	char *out = malloc(cap);
	int rc;

	if (!out)
		return -1;
	while (*p && n + 2 * SERVER_PROC_PATH < cap) {
		const char *sub = NULL;
		size_t skip = 0;

		if (strncmp(p, "@DIR@", 5) == 0)
			sub = s->dir, skip = 5;
		else if (strncmp(p, "@ADDR@", 6) == 0)
			sub = s->addr, skip = 6;
		else if (strncmp(p, "@HP@", 4) == 0)
			sub = CSI_HOSTPATH_BIN, skip = 4;
		else if (strncmp(p, "@EXTRA@", 7) == 0)
			sub = "", skip = 7;
		if (sub && skip == 7 && extra && extra[0]) {
			n += (size_t)snprintf(out + n, cap - n, ", %s", extra);
			p += skip;
		} else if (sub) {
			n += (size_t)snprintf(out + n, cap - n, "%s", sub);
			p += skip;
		} else {
			out[n++] = *p++;
		}
	}
	out[n] = '\0';
	rc = hpp_write_file(s->config, out);
	free(out);
	return rc;
}

int server_proc_write_faults(struct server_proc *s, const char *text)
{
	return hpp_write_file(s->faults, text);
}

int server_proc_start(struct server_proc *s)
{
	const char *args[] = {"server", "-config", s->config, NULL};

	return server_proc_start_args(s, args);
}

int server_proc_start_args(struct server_proc *s, const char *const *args)
{
	posix_spawn_file_actions_t fa;
	char *argv[16] = {(char *)CSID_BIN};
	int rc;

	for (size_t i = 0; args[i]; i++) {
		if (i + 2 >= sizeof(argv) / sizeof(argv[0]))
			return -1;
		argv[i + 1] = (char *)args[i];
	}

	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 2, s->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	rc = proc_guard_spawn(&s->pid, CSID_BIN, &fa, argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		s->pid = 0;
		return -1;
	}
	proc_guard_track(s->pid);
	return 0;
}

int server_proc_start_dev(struct server_proc *s, const char *dev_dir, bool keep, int64_t timeout_ms)
{
	const char *args[] = {"dev",   "-data-dir",           dev_dir, "-listen",
			      s->addr, keep ? "-keep" : NULL, NULL};

	if (server_proc_start_args(s, args) != 0 || !server_proc_wait_ready(s, timeout_ms)) {
		server_proc_dump_log(s, "csid dev setup failed");
		return -1;
	}
	return 0;
}

long server_proc_http(struct server_proc *s, const char *method, const char *path, const char *body,
		      json_t **out)
{
	json_t *j = NULL;
	long status = http_client_json(s->http, method, path, body, &j);

	if (out)
		*out = j;
	else
		json_decref(j);
	return status;
}

bool server_proc_wait_ready(struct server_proc *s, int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;

	while (hpp_now_ms() < deadline) {
		int status;

		if (server_proc_http(s, "GET", "/v1/status/health", NULL, NULL) == 200)
			return true;
		if (s->pid && waitpid(s->pid, &status, WNOHANG) == s->pid) {
			proc_guard_untrack(s->pid);
			s->pid = 0;
			return false;
		}
		hpp_pause_ms(10);
	}
	return false;
}

bool server_proc_wait_plugin(struct server_proc *s, const char *id, int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;
	char path[256];

	snprintf(path, sizeof(path), "/v1/plugin/%s", id);
	while (hpp_now_ms() < deadline) {
		json_t *j = NULL;
		bool ok = server_proc_http(s, "GET", path, NULL, &j) == 200 &&
			  json_integer_value(
			      json_object_get(json_object_get(j, "controllers"), "healthy")) > 0;

		json_decref(j);
		if (ok)
			return true;
		hpp_pause_ms(10);
	}
	return false;
}

bool server_proc_wait_field(struct server_proc *s, const char *path, const char *key,
			    const char *want, int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;

	while (hpp_now_ms() < deadline) {
		json_t *j = NULL;
		const char *v;
		bool ok;

		server_proc_http(s, "GET", path, NULL, &j);
		v = json_string_value(json_object_get(j, key));
		ok = v && strcmp(v, want) == 0;
		json_decref(j);
		if (ok)
			return true;
		hpp_pause_ms(10);
	}
	return false;
}

bool server_proc_wait_doc(struct server_proc *s, const char *path, bool (*check)(json_t *doc),
			  int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;

	while (hpp_now_ms() < deadline) {
		json_t *j = NULL;
		bool ok;

		server_proc_http(s, "GET", path, NULL, &j);
		ok = j && check(j);
		json_decref(j);
		if (ok)
			return true;
		hpp_pause_ms(10);
	}
	server_proc_dump_log(s, path);
	return false;
}

bool server_proc_volume_ready(json_t *doc)
{
	const char *state = json_string_value(json_object_get(doc, "state"));

	return state && strcmp(state, "ready") == 0 &&
	       json_string_value(json_object_get(doc, "external_id"));
}

bool server_proc_volume_published(json_t *doc)
{
	json_t *pub = json_array_get(json_object_get(doc, "publications"), 0);
	const char *state = json_string_value(json_object_get(pub, "state"));

	return state && strcmp(state, "published") == 0;
}

bool server_proc_volume_all_published(json_t *doc)
{
	json_t *pubs = json_object_get(doc, "publications"), *p;
	size_t i;

	json_array_foreach(pubs, i, p)
	{
		const char *state = json_string_value(json_object_get(p, "state"));

		if (!state || strcmp(state, "published") != 0)
			return false;
	}
	return json_array_size(pubs) > 0;
}

bool server_proc_volume_freed(json_t *doc)
{
	return json_array_size(json_object_get(doc, "claims")) == 0 &&
	       json_array_size(json_object_get(doc, "publications")) == 0 &&
	       json_array_size(json_object_get(doc, "past_claims")) == 1;
}

bool server_proc_not_found(json_t *doc)
{
	const char *code = json_string_value(json_object_get(doc, "code"));

	return code && strcmp(code, "not_found") == 0;
}

bool server_proc_plugin_counts(json_t *doc, const char *id, int *controllers, int *nodes)
{
	json_t *p;
	size_t i;

	json_array_foreach(json_object_get(doc, "plugins"), i, p)
	{
		const char *pid = json_string_value(json_object_get(p, "id"));

		if (!pid || strcmp(pid, id) != 0)
			continue;
		*controllers = (int)json_integer_value(
		    json_object_get(json_object_get(p, "controllers"), "healthy"));
		*nodes = (int)json_integer_value(
		    json_object_get(json_object_get(p, "nodes"), "healthy"));
		return true;
	}
	return false;
}

bool server_proc_hp_up(json_t *doc)
{
	int controllers, nodes;

	return server_proc_plugin_counts(doc, SERVER_PROC_HP_ID, &controllers, &nodes) &&
	       controllers == 1 && nodes == 1;
}

long server_proc_put(struct server_proc *s, const char *path, const char *body)
{
	json_t *doc = NULL;
	long status = server_proc_http(s, "PUT", path, body, &doc);

	if (status != 200) {
		char *text = doc ? json_dumps(doc, 0) : NULL;

		fprintf(stderr, "PUT %s: %ld %s\n", path, status, text ? text : "");
		free(text);
	}
	json_decref(doc);
	return status;
}

int server_proc_stop(struct server_proc *s, int sig, int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;
	int status = -1;

	if (!s->pid)
		return -1;
	kill(s->pid, sig);
	while (hpp_now_ms() < deadline) {
		if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
			proc_guard_untrack(s->pid);
			s->pid = 0;
			return status;
		}
		hpp_pause_ms(5);
	}
	kill(s->pid, SIGKILL);
	waitpid(s->pid, &status, 0);
	proc_guard_untrack(s->pid);
	s->pid = 0;
	return -1;
}

bool server_proc_log_has(struct server_proc *s, const char *needle)
{
	FILE *f = fopen(s->log, "r");
	char line[8192];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

bool server_proc_wait_log(struct server_proc *s, const char *needle, int64_t timeout_ms)
{
	int64_t deadline = hpp_now_ms() + timeout_ms;

	while (!server_proc_log_has(s, needle)) {
		if (hpp_now_ms() >= deadline)
			return false;
		hpp_pause_ms(5);
	}
	return true;
}

void server_proc_dump_log(struct server_proc *s, const char *why)
{
	FILE *f = fopen(s->log, "r");
	char line[8192];

	fprintf(stderr, "--- csid server log (%s) ---\n", why);
	while (f && fgets(line, sizeof(line), f))
		fputs(line, stderr);
	if (f)
		fclose(f);
	fprintf(stderr, "--- end ---\n");
}

void server_proc_cleanup(struct server_proc *s)
{
	if (s->pid)
		server_proc_stop(s, SIGKILL, 5000);
	http_client_free(s->http);
	s->http = NULL;
	if (s->dir[0]) {
		/* Plugins of a killed server still run under the directory. */
		proc_guard_clear_dir(s->dir);
		proc_guard_untrack_dir(s->dir);
		s->dir[0] = '\0';
	}
}
