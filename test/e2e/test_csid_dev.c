/*
 * End to end: `csid dev -data-dir <tmp>/dev -listen 127.0.0.1:<free>` runs
 * a server, an agent and csi-hostpath in one process. GET /v1/plugins
 * shows hostpath with a healthy controller and node plugin (the agent
 * joined the server with the generated token); a volume created through
 * the server API becomes ready (CreateVolume through the agent), a claim
 * for node "dev" is published (ControllerPublishVolume), released and the
 * volume deleted. A second volume is claimed and mounted through the
 * agent's socket and left so; SIGTERM then ends csid dev with 0, the data
 * dir is gone, nothing is mounted under it and no process runs from it. A
 * second `csid dev` on the same port fails with a clear error and removes
 * its own temporary directory. With -keep the stopped csid dev leaves its
 * server and agent state in place. The agent joins the server at its unix
 * socket and gives it its own; with a data dir too long for the server's
 * socket, both go over TCP instead.
 */
#include <dirent.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_proc.h"
#include "server_proc.h"

#define T_HP SERVER_PROC_HP_ID
#define T_WAIT_MS 60000

struct t_env {
	struct server_proc s;
	char dev_dir[SERVER_PROC_PATH + 8];
};

/*
 * Starts csid dev on <dir>/dev and the port of t->s, with -keep when keep;
 * with len, on a dev directory of exactly len bytes instead (<dir>/dev-xxx...).
 */
static int t_start(void **state, bool keep, size_t len)
{
	struct t_env *t = calloc(1, sizeof(*t));
	size_t n;

	*state = t;
	if (!t || server_proc_init(&t->s) != 0)
		return -1;
	n = (size_t)snprintf(t->dev_dir, sizeof(t->dev_dir), "%s/dev-", t->s.dir);
	if (!len)
		snprintf(t->dev_dir, sizeof(t->dev_dir), "%s/dev", t->s.dir);
	else if (n < len && len < sizeof(t->dev_dir))
		memset(t->dev_dir + n, 'x', len - n);
	else
		return -1;
	return server_proc_start_dev(&t->s, t->dev_dir, keep, T_WAIT_MS);
}

static int t_setup(void **state)
{
	return t_start(state, false, 0);
}

static int t_setup_keep(void **state)
{
	return t_start(state, true, 0);
}

/*
 * A data dir of 89 bytes: <dir>/server/server.sock (108) is too long for a
 * socket, <dir>/agent/agent.sock (106) is not.
 */
static int t_setup_long(void **state)
{
	return t_start(state, false, 89);
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	server_proc_cleanup(&t->s);
	free(t);
	return 0;
}

static bool t_wait(struct t_env *t, const char *path, bool (*check)(json_t *doc))
{
	return server_proc_wait_doc(&t->s, path, check, T_WAIT_MS);
}

/* Published to node "dev". */
static bool t_published(json_t *doc)
{
	json_t *pub = json_array_get(json_object_get(doc, "publications"), 0);
	const char *node = json_string_value(json_object_get(pub, "node_id"));

	return server_proc_volume_published(doc) && node && strcmp(node, "dev") == 0;
}

/* Processes whose command line or working directory names dir. */
static int t_procs_under(const char *dir)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	size_t dlen = strlen(dir);
	int n = 0;

	while (d && (de = readdir(d))) {
		char path[300], buf[4096], cwd[PATH_MAX];
		ssize_t len;
		FILE *f;
		size_t got;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cwd", de->d_name);
		len = readlink(path, cwd, sizeof(cwd) - 1);
		if (len > 0 && (size_t)len >= dlen && strncmp(cwd, dir, dlen) == 0) {
			n++;
			continue;
		}
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		got = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		for (size_t i = 0; i < got; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		buf[got] = '\0';
		if (strstr(buf, dir))
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static const char t_spec[] = "{\"plugin_id\": \"" T_HP "\", \"capacity_min\": 1048576,"
			     " \"capabilities\": [{\"access_mode\": \"single-node-writer\","
			     " \"attachment_mode\": \"file-system\"}]}";

static const char t_claim[] =
    "{\"alloc_id\": \"web-1\", \"node_id\": \"dev\", \"mode\": \"write\","
    " \"access_mode\": \"single-node-writer\", \"attachment_mode\": \"file-system\"}";

/* Claims and mounts "kept" through the agent's socket, and leaves it so. */
static void t_leave_mounted(struct t_env *t)
{
	struct agent_proc a;
	json_t *doc = NULL;
	char ext[256];

	assert_int_equal(server_proc_put(&t->s, "/v1/volume/kept/create", t_spec), 200);
	assert_true(t_wait(t, "/v1/volume/kept", server_proc_volume_ready));
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/kept/claim", t_claim), 200);
	assert_true(t_wait(t, "/v1/volume/kept", t_published));
	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/volume/kept", NULL, &doc), 200);
	snprintf(ext, sizeof(ext), "%s", json_string_value(json_object_get(doc, "external_id")));
	json_decref(doc);

	memset(&a, 0, sizeof(a));
	snprintf(a.sock, sizeof(a.sock), "%s/agent/agent.sock", t->dev_dir);
	assert_int_equal(agent_proc_mount_with(&a, T_HP, ext, "web-1", NULL), 200);
	assert_true(agent_proc_mounts_under(t->dev_dir) > 0);
}

/* The address the server has for node "dev" (the agent's API) is want. */
static void t_node_address(struct t_env *t, const char *want)
{
	json_t *doc = NULL;

	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/node/dev", NULL, &doc), 200);
	assert_string_equal(json_string_value(json_object_get(doc, "address")), want);
	json_decref(doc);
}

static void test_dev_lifecycle(void **state)
{
	struct t_env *t = *state;
	char want[SERVER_PROC_PATH + 64];
	struct stat st;
	int status;

	assert_true(t_wait(t, "/v1/plugins", server_proc_hp_up));
	/* Agent and server talk over their unix sockets, not TCP. */
	snprintf(want, sizeof(want), "agent_joins=unix:%s/server/server.sock ", t->dev_dir);
	assert_true(server_proc_wait_log(&t->s, want, T_WAIT_MS));
	snprintf(want, sizeof(want), "unix:%s/agent/agent.sock", t->dev_dir);
	t_node_address(t, want);
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/data/create", t_spec), 200);
	assert_true(t_wait(t, "/v1/volume/data", server_proc_volume_ready));
	assert_true(server_proc_wait_log(
	    &t->s, "path=/v1/agent/controller/" T_HP "/CreateVolume status=200", T_WAIT_MS));
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/data/claim", t_claim), 200);
	assert_true(t_wait(t, "/v1/volume/data", t_published));
	assert_int_equal(
	    server_proc_put(&t->s, "/v1/volume/data/release", "{\"alloc_id\": \"web-1\"}"), 200);
	assert_true(t_wait(t, "/v1/volume/data", server_proc_volume_freed));
	assert_int_equal(server_proc_http(&t->s, "DELETE", "/v1/volume/data/delete", NULL, NULL),
			 200);
	assert_true(t_wait(t, "/v1/volume/data", server_proc_not_found));

	t_leave_mounted(t);
	assert_true(t_procs_under(t->dev_dir) > 0);
	status = server_proc_stop(&t->s, SIGTERM, T_WAIT_MS);
	if (status != 0)
		server_proc_dump_log(&t->s, "csid dev stop");
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	assert_int_equal(stat(t->dev_dir, &st), -1);
	assert_int_equal(agent_proc_mounts_under(t->dev_dir), 0);
	assert_int_equal(t_procs_under(t->dev_dir), 0);
	assert_true(server_proc_log_has(&t->s, "msg=\"mounts detached\""));
}

/* The node has registered with an address on TCP. */
static bool t_node_on_tcp(json_t *doc)
{
	const char *addr = json_string_value(json_object_get(doc, "address"));

	return addr && strncmp(addr, "http://127.0.0.1:", 17) == 0;
}

/*
 * A data dir too long for the server's socket: the agent joins over TCP
 * and gives the server its TCP address. (Its plugin does not start: the
 * agent's data dir is too long for a plugin socket too, which it says.)
 */
static void test_dev_long_dir(void **state)
{
	struct t_env *t = *state;
	char want[SERVER_PROC_PATH + 64];

	assert_int_equal(strlen(t->dev_dir), 89);
	assert_true(t_wait(t, "/v1/node/dev", t_node_on_tcp));
	/* The lines are written by other threads than the one that registered the node. */
	assert_true(server_proc_wait_log(&t->s,
					 "msg=\"data dir too long for a unix socket: the "
					 "agent joins the server over TCP\"",
					 T_WAIT_MS));
	snprintf(want, sizeof(want), "agent_joins=%s ", t->s.base);
	assert_true(server_proc_wait_log(&t->s, want, T_WAIT_MS));
	assert_true(server_proc_wait_log(&t->s, "is too long for a plugin socket", T_WAIT_MS));
}

/* A second csid dev on the same port: a clear error, exit 1, its directory removed. */
static void test_dev_port_taken(void **state)
{
	struct t_env *t = *state;
	const char *args[] = {"dev", "-listen", t->s.addr, NULL};
	char out[16384], *dir, *end;
	struct stat st;

	assert_int_equal(agent_proc_run_csid(args, out, sizeof(out)), 1);
	if (!strstr(out, "Address already in use"))
		fprintf(stderr, "%s\n", out);
	assert_non_null(strstr(out, "msg=\"dev failed to start\""));
	assert_non_null(strstr(out, "server api: listener addr"));
	assert_non_null(strstr(out, "Address already in use"));
	/* The directory it made for itself is gone. */
	dir = strstr(out, "msg=\"data dir removed\" dir=");
	assert_non_null(dir);
	dir += strlen("msg=\"data dir removed\" dir=");
	end = strchr(dir, '\n');
	assert_non_null(end);
	*end = '\0';
	assert_int_equal(stat(dir, &st), -1);
	assert_int_equal(t_procs_under(dir), 0);
}

/* -keep: the stopped csid dev leaves its state for the next run. */
static void test_dev_keep(void **state)
{
	struct t_env *t = *state;
	char path[SERVER_PROC_PATH + 32];
	struct stat st;
	int status;

	assert_true(t_wait(t, "/v1/plugins", server_proc_hp_up));
	status = server_proc_stop(&t->s, SIGTERM, T_WAIT_MS);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	snprintf(path, sizeof(path), "%s/server/server.db", t->dev_dir);
	assert_int_equal(stat(path, &st), 0);
	snprintf(path, sizeof(path), "%s/agent/agent.db", t->dev_dir);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(t_procs_under(t->dev_dir), 0);
	assert_true(server_proc_log_has(&t->s, "msg=\"data dir kept\""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_dev_port_taken, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_lifecycle, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_long_dir, t_setup_long, t_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_keep, t_setup_keep, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
