/*
 * End to end: the README's quickstart tour, exactly as written. The test
 * reads the fenced block between <!-- tour:begin --> and <!-- tour:end -->
 * from README.md, starts `csid dev -data-dir <tmp>/dev` on a free port,
 * waits for what `make dev` waits for (hostpath with a healthy controller
 * and node plugin), then feeds the block to one `/bin/sh -e` line by line,
 * in a temporary directory, with the build's csictl first on PATH and
 * CSID_ADDR and CSID_AGENT_ADDR set as `make dev` prints them. After each
 * line the test adds `echo N >&3` so it learns when the line finished; it
 * then checks the line's effect on the real processes before it sends the
 * next one: the plugin shows up, vol.json is written, the volume is ready,
 * the printed path is a mount where the file written shows up and the
 * server holds the claim, the status shows it, after the unmount the path
 * is no mount and the claim released, after the delete (sent at once,
 * as a reader would) the volume is gone and nothing is mounted under the
 * directory. Between lines the test only reads, never waits for the
 * system. A line the test does not know fails it: a changed tour needs
 * its check here too.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
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
#include "proc_guard.h"
#include "server_proc.h"

#define T_HP SERVER_PROC_HP_ID
#define T_WAIT_MS 60000
/* How long one line of the tour may take (a create or delete with -wait included). */
#define T_STEP_MS 120000
#define T_LINES_MAX 32
#define T_LINE_MAX 512
#define T_PATH_MAX 1024

extern char **environ;

struct t_env {
	struct server_proc s;
	char dev_dir[SERVER_PROC_PATH + 8];
	char tour_dir[SERVER_PROC_PATH + 8];
	char out_path[SERVER_PROC_PATH + 16];
	char lines[T_LINES_MAX][T_LINE_MAX];
	int nlines;
	pid_t sh; /* the shell running the tour; 0 once reaped */
	int sh_in; /* its stdin */
	int marks; /* where it writes `echo N >&3` */
	size_t out_off; /* output of the lines before the current one */
	char mount_path[T_PATH_MAX]; /* what the mount line printed */
};

/* The tour's lines: the fenced block between the tour markers of README.md. */
static int t_read_tour(struct t_env *t)
{
	FILE *f = fopen(CSID_SOURCE_DIR "/README.md", "r");
	char line[T_LINE_MAX];
	int where = 0; /* 0 before the begin marker, 1 before the fence, 2 inside, 3 after */

	if (!f)
		return -1;
	while (where < 3 && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (where == 0 && strncmp(line, "<!-- tour:begin", 15) == 0)
			where = 1;
		else if (where == 1 && strncmp(line, "```", 3) == 0)
			where = 2;
		else if (where == 2 && strcmp(line, "```") == 0)
			where = 3;
		else if (where == 2 && t->nlines < T_LINES_MAX)
			snprintf(t->lines[t->nlines++], T_LINE_MAX, "%s", line);
	}
	/* The end marker follows the fence, so nothing else slips into the tour. */
	if (where == 3 &&
	    (!fgets(line, sizeof(line), f) || strncmp(line, "<!-- tour:end", 13) != 0))
		where = -1;
	fclose(f);
	return where == 3 && t->nlines > 0 ? 0 : -1;
}

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));
	const char *args[] = {"dev", "-data-dir", NULL, "-listen", NULL, NULL};

	*state = t;
	if (!t)
		return -1;
	t->sh_in = t->marks = -1;
	if (t_read_tour(t) != 0) {
		fprintf(stderr, "README.md: no tour between <!-- tour:begin --> and "
				"<!-- tour:end --> around a fenced block\n");
		return -1;
	}
	if (server_proc_init(&t->s) != 0)
		return -1;
	snprintf(t->dev_dir, sizeof(t->dev_dir), "%s/dev", t->s.dir);
	snprintf(t->tour_dir, sizeof(t->tour_dir), "%s/tour", t->s.dir);
	snprintf(t->out_path, sizeof(t->out_path), "%s/tour.out", t->s.dir);
	args[2] = t->dev_dir;
	args[4] = t->s.addr;
	if (mkdir(t->tour_dir, 0700) != 0 || server_proc_start_args(&t->s, args) != 0 ||
	    !server_proc_wait_ready(&t->s, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "csid dev setup failed");
		return -1;
	}
	return 0;
}

/* Ends the shell (if still running) and csid dev; removes everything. */
static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	if (t->sh_in >= 0)
		close(t->sh_in);
	if (t->marks >= 0)
		close(t->marks);
	if (t->sh > 0) {
		kill(t->sh, SIGKILL);
		waitpid(t->sh, NULL, 0);
		proc_guard_untrack(t->sh);
	}
	/* csid dev unmounts what is left itself on SIGTERM; the cleanup after it catches the rest.
	 */
	if (t->s.pid > 0)
		server_proc_stop(&t->s, SIGTERM, T_WAIT_MS);
	server_proc_cleanup(&t->s);
	free(t);
	return 0;
}

/*
 * Starts /bin/sh -e in the tour's directory: stdin from a pipe the test
 * writes, stdout and stderr to tour.out, fd 3 the marks' pipe; csictl of
 * this build first on PATH, the addresses as `make dev` prints them.
 */
static void t_start_shell(struct t_env *t)
{
	char bin[T_PATH_MAX], path_env[2 * T_PATH_MAX], addr_env[128], agent_env[T_PATH_MAX];
	char *argv[] = {"/bin/sh", "-e", NULL}, *envp[256];
	const char *old_path = getenv("PATH");
	posix_spawn_file_actions_t fa;
	int in[2], marks[2], ne = 0;

	snprintf(bin, sizeof(bin), "%s", CSICTL_BIN);
	snprintf(path_env, sizeof(path_env), "PATH=%s:%s", dirname(bin),
		 old_path ? old_path : "/usr/bin:/bin");
	snprintf(addr_env, sizeof(addr_env), "CSID_ADDR=%s", t->s.base);
	snprintf(agent_env, sizeof(agent_env), "CSID_AGENT_ADDR=unix:%s/agent/agent.sock",
		 t->dev_dir);
	for (char **e = environ; *e && ne < 250; e++)
		if (strncmp(*e, "PATH=", 5) != 0 && strncmp(*e, "CSID_", 5) != 0 &&
		    strncmp(*e, "CSI_ENDPOINT=", 13) != 0)
			envp[ne++] = *e;
	envp[ne++] = path_env;
	envp[ne++] = addr_env;
	envp[ne++] = agent_env;
	envp[ne] = NULL;

	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(marks, O_CLOEXEC), 0);
	assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_addopen(&fa, 1, t->out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	posix_spawn_file_actions_adddup2(&fa, marks[1], 3);
	posix_spawn_file_actions_addchdir_np(&fa, t->tour_dir);
	assert_int_equal(posix_spawn(&t->sh, "/bin/sh", &fa, NULL, argv, envp), 0);
	posix_spawn_file_actions_destroy(&fa);
	proc_guard_track(t->sh);
	close(in[0]);
	close(marks[1]);
	t->sh_in = in[1];
	t->marks = marks[0];
}

/* All the shell printed so far (a new string). */
static char *t_output(struct t_env *t)
{
	FILE *f = fopen(t->out_path, "r");
	char *buf = calloc(1, 1 << 20);
	size_t n;

	assert_non_null(f);
	assert_non_null(buf);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	return buf;
}

/* Prints the shell's output and the end of csid dev's log, for a failed line. */
static void t_explain(struct t_env *t, int i, const char *why)
{
	char *out = t_output(t);

	fprintf(stderr, "tour line %d `%s`: %s\n--- shell output:\n%s---\n", i + 1, t->lines[i],
		why, out);
	free(out);
	server_proc_dump_log(&t->s, "csid dev");
}

/*
 * Sends line i and `echo i >&3`, waits (polling with the step's deadline)
 * until the mark comes back, and returns what the line printed (a new
 * string). Fails the test when the shell exits first (set -e: a command
 * failed) or the line takes too long.
 */
static char *t_run_line(struct t_env *t, int i)
{
	char cmd[T_LINE_MAX + 32], mark[16];
	int64_t deadline = agent_proc_now_ms() + T_STEP_MS;
	size_t got = 0;
	char *out, *mine;
	int n;

	n = snprintf(cmd, sizeof(cmd), "%s\necho %d >&3\n", t->lines[i], i);
	assert_int_equal(write(t->sh_in, cmd, (size_t)n), n);
	n = snprintf(cmd, sizeof(cmd), "%d\n", i);
	while (got < (size_t)n) {
		struct pollfd p = {t->marks, POLLIN, 0};
		int64_t left = deadline - agent_proc_now_ms();
		ssize_t r;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
			t_explain(t, i, "did not finish in time");
			fail();
		}
		r = read(t->marks, mark + got, sizeof(mark) - 1 - got);
		if (r <= 0) {
			t_explain(t, i, "the shell exited (a command failed under sh -e)");
			fail();
		}
		got += (size_t)r;
	}
	mark[got] = '\0';
	assert_string_equal(mark, cmd);
	out = t_output(t);
	mine = strdup(out + t->out_off);
	t->out_off = strlen(out);
	free(out);
	assert_non_null(mine);
	return mine;
}

static json_t *t_volume(struct t_env *t, long want)
{
	json_t *doc = NULL;

	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/volume/data", NULL, &doc), want);
	return doc;
}

/* `csictl plugin status`: hostpath, controller and node healthy. */
static void t_check_plugins(struct t_env *t, const char *out)
{
	(void)t;
	assert_non_null(strstr(out, T_HP));
	assert_non_null(strstr(out, "1/1"));
}

/* `csictl volume init > vol.json`: a spec for a volume "data". */
static void t_check_init(struct t_env *t, const char *out)
{
	char path[SERVER_PROC_PATH + 32];
	FILE *f;
	char buf[4096];
	size_t n;

	(void)out;
	snprintf(path, sizeof(path), "%s/vol.json", t->tour_dir);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	fclose(f);
	assert_non_null(strstr(buf, "\"data\""));
	assert_non_null(strstr(buf, T_HP));
}

/* `csictl volume create vol.json -wait`: the server has it ready. */
static void t_check_create(struct t_env *t, const char *out)
{
	json_t *v = t_volume(t, 200);

	assert_non_null(strstr(out, "ready"));
	assert_true(server_proc_volume_ready(v));
	json_decref(v);
}

/*
 * `P=$(csictl volume mount data -alloc web-1); echo $P`: a path under the
 * agent's directory that is a mount; the server holds the claim for node
 * "dev" and the volume is published there.
 */
static void t_check_mount(struct t_env *t, const char *out)
{
	json_t *v, *claim, *pub;

	/* The publication is recorded just after the claim's answer (docs/server-api.md). */
	assert_true(server_proc_wait_doc(&t->s, "/v1/volume/data", server_proc_volume_all_published,
					 T_WAIT_MS));
	v = t_volume(t, 200);

	assert_true(strchr(out, '\n') == out + strlen(out) - 1);
	snprintf(t->mount_path, sizeof(t->mount_path), "%.*s", (int)strlen(out) - 1, out);
	assert_true(strncmp(t->mount_path, t->dev_dir, strlen(t->dev_dir)) == 0);
	assert_true(agent_proc_is_mount(t->mount_path));
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 1);
	claim = json_array_get(json_object_get(v, "claims"), 0);
	pub = json_array_get(json_object_get(v, "publications"), 0);
	assert_string_equal(json_string_value(json_object_get(claim, "alloc_id")), "web-1");
	assert_string_equal(json_string_value(json_object_get(claim, "node_id")), "dev");
	assert_string_equal(json_string_value(json_object_get(claim, "state")), "claimed");
	assert_string_equal(json_string_value(json_object_get(pub, "state")), "published");
	json_decref(v);
}

/* `echo hello > $P/hello`: the file is in the mount. */
static void t_check_write(struct t_env *t, const char *out)
{
	char path[T_PATH_MAX + 8], buf[64] = "";
	FILE *f;

	assert_string_equal(out, "");
	assert_true(t->mount_path[0] != '\0');
	assert_true(agent_proc_is_mount(t->mount_path));
	snprintf(path, sizeof(path), "%s/hello", t->mount_path);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, "hello\n");
}

/* `csictl volume status data`: the claim of web-1 on node dev. */
static void t_check_status(struct t_env *t, const char *out)
{
	const char *claims = strstr(out, "Claims");

	(void)t;
	assert_non_null(claims);
	assert_non_null(strstr(claims, "web-1"));
	assert_non_null(strstr(claims, "dev"));
	assert_non_null(strstr(claims, "claimed"));
}

/*
 * `csictl volume unmount data -alloc web-1`: no mount; the claim is
 * released (freed, or on its way: the next line does not wait for it
 * either, and the delete frees it first).
 */
static void t_check_unmount(struct t_env *t, const char *out)
{
	json_t *v = t_volume(t, 200), *claim;
	const char *st;

	assert_non_null(strstr(out, "unmounted"));
	assert_non_null(strstr(out, "claim released"));
	assert_true(t->mount_path[0] != '\0');
	assert_false(agent_proc_is_mount(t->mount_path));
	claim = json_array_get(json_object_get(v, "claims"), 0);
	if (claim) {
		st = json_string_value(json_object_get(claim, "state"));
		assert_non_null(st);
		assert_string_not_equal(st, "claimed");
	} else {
		assert_true(server_proc_volume_freed(v));
	}
	json_decref(v);
}

/* `csictl volume delete data -wait`: the volume is gone; nothing mounted is left. */
static void t_check_delete(struct t_env *t, const char *out)
{
	json_t *v = t_volume(t, 404);

	assert_non_null(strstr(out, "deleted"));
	assert_true(server_proc_not_found(v));
	json_decref(v);
	assert_int_equal(agent_proc_mounts_under(t->dev_dir), 0);
}

/* Each line of the tour by its first words, and what it must have done. */
static const struct {
	const char *starts;
	void (*check)(struct t_env *t, const char *out);
} t_steps[] = {
    {"csictl plugin status", t_check_plugins},
    {"csictl volume init > vol.json", t_check_init},
    {"csictl volume create vol.json -wait", t_check_create},
    {"P=$(csictl volume mount data -alloc web-1)", t_check_mount},
    {"echo hello > $P/hello", t_check_write},
    {"csictl volume status data", t_check_status},
    {"csictl volume unmount data -alloc web-1", t_check_unmount},
    {"csictl volume delete data -wait", t_check_delete},
};
#define T_NSTEPS (sizeof(t_steps) / sizeof(t_steps[0]))

static void test_readme_tour(void **state)
{
	struct t_env *t = *state;
	size_t next = 0;
	int status;

	assert_true(server_proc_wait_doc(&t->s, "/v1/plugins", server_proc_hp_up, T_WAIT_MS));
	t_start_shell(t);
	for (int i = 0; i < t->nlines; i++) {
		size_t k = 0;
		char *out;

		while (k < T_NSTEPS &&
		       strncmp(t->lines[i], t_steps[k].starts, strlen(t_steps[k].starts)) != 0)
			k++;
		if (k == T_NSTEPS || k < next) {
			fprintf(stderr, "tour line %d `%s`: %s\n", i + 1, t->lines[i],
				k == T_NSTEPS ? "unknown to this test (add its check)"
					      : "out of the order this test checks");
			fail();
		}
		next = k + 1;
		out = t_run_line(t, i);
		t_steps[k].check(t, out);
		free(out);
	}
	assert_int_equal(next, T_NSTEPS);

	/* The shell ends with its input, successfully. */
	close(t->sh_in);
	t->sh_in = -1;
	assert_int_equal(waitpid(t->sh, &status, 0), t->sh);
	proc_guard_untrack(t->sh);
	t->sh = 0;
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_readme_tour, t_setup, t_teardown),
	};

	/* A shell that died under sh -e must fail the test, not kill it with SIGPIPE. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
