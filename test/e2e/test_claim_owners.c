/*
 * End to end: claim owners. A real `csid server` and a real `csid agent`
 * that joined it, supervising csi-hostpath as a monolith with controller
 * publish on; csictl mounts a single-node-multi-writer volume through
 * the agent with an owner:
 *
 * - -owner-pid of a child process: killing the child takes the mount
 *   down, the claim ends freed and the event stream's claim event
 *   carries "released: owner pid N exited";
 * - -lease: a renewal keeps the mount past the first expiry; a short
 *   lease then lapses and releases ("lease of 1000 ms expired");
 * - -owner-cgroup of a cgroup v2 directory holding a child: killing the
 *   child empties it and releases ("owner cgroup ... is empty");
 * - bad owners claim nothing: a pid that does not exist, a lease of 0 or
 *   10 years, hostile or wrong cgroup paths, an empty cgroup, a renewal
 *   of what is not a lease;
 * - owners survive an agent restart: an owner that exits while the agent
 *   is down is released when it starts, one that lives is still watched
 *   and released when it exits afterwards.
 *
 * Children are killed and reaped, cgroup directories removed and mounts
 * detached at teardown even when a test fails.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <cmocka.h>

#include "claim_env.h"
#include "child_proc.h"
#include "proc_guard.h"

#define T_WAIT_MS CLAIM_ENV_WAIT_MS
#define T_TOKEN CLAIM_ENV_TOKEN
#define T_CGROUP_ROOT "/sys/fs/cgroup/unified"
#define T_KIDS 4

struct t_env {
	struct claim_env c;
	pid_t kids[T_KIDS];
	char cgroup[128]; /* made by the test, removed at teardown */
	const char *alloc; /* of the last t_freed poll */
};

static int t_setup(void **state)
{
	struct t_env *t = calloc(1, sizeof(*t));

	*state = t;
	return t ? claim_env_setup(&t->c, "single-node-multi-writer") : -1;
}

/* Starts kid i, an idle child. */
static pid_t t_kid(struct t_env *t, int i)
{
	t->kids[i] = child_proc_idle();
	assert_true(t->kids[i] > 0);
	return t->kids[i];
}

static int t_teardown(void **state)
{
	struct t_env *t = *state;

	if (!t)
		return 0;
	for (int i = 0; i < T_KIDS; i++)
		child_proc_kill(&t->kids[i]);
	/* Empty now: its only processes were the kids. */
	if (t->cgroup[0] && rmdir(t->cgroup) != 0)
		fprintf(stderr, "rmdir %s: %s\n", t->cgroup, strerror(errno));
	claim_env_teardown(&t->c);
	free(t);
	return 0;
}

#define T_RUN(t, ...) CLAIM_ENV_RUN(&(t)->c, __VA_ARGS__)

static void t_create(struct t_env *t)
{
	T_RUN(t, "volume", "create", t->c.spec, "-wait");
	csictl_expect_ok(&t->c.r);
	csictl_runner_free(&t->c.rn, &t->c.r);
}

/* csictl volume mount data -alloc alloc <flag> <value>; the path (out, 1024 bytes). */
static void t_mount(struct t_env *t, const char *alloc, const char *flag, const char *value,
		    char *out)
{
	T_RUN(t, "volume", "mount", "data", "-alloc", (char *)alloc, (char *)flag, (char *)value);
	if (t->c.r.status != 0)
		agent_proc_dump_log(t->c.a, "volume mount failed");
	csictl_expect_ok(&t->c.r);
	snprintf(out, 1024, "%s", t->c.r.out);
	out[strcspn(out, "\n")] = '\0';
	csictl_runner_free(&t->c.rn, &t->c.r);
	assert_true(out[0] == '/');
	assert_true(agent_proc_is_mount(out));
}

/* Whether a is a string equal to b. */
static bool t_streq(json_t *a, const char *b)
{
	return json_is_string(a) && strcmp(json_string_value(a), b) == 0;
}

/* The claim of t->alloc ended freed (a past claim), and no claim is held by it. */
static bool t_freed(void *ctx)
{
	struct t_env *t = ctx;
	json_t *doc = NULL, *c;
	bool held = false, freed = false;
	size_t i;

	if (server_proc_http(&t->c.s, "GET", "/v1/volume/data", NULL, &doc) != 200) {
		json_decref(doc);
		return false;
	}
	json_array_foreach(json_object_get(doc, "claims"), i, c) held =
	    held || t_streq(json_object_get(c, "alloc_id"), t->alloc);
	json_array_foreach(json_object_get(doc, "past_claims"), i, c) freed =
	    freed || (t_streq(json_object_get(c, "alloc_id"), t->alloc) &&
		      t_streq(json_object_get(c, "state"), "freed"));
	json_decref(doc);
	return freed && !held;
}

static void t_wait_freed(struct t_env *t, const char *alloc, const char *path)
{
	t->alloc = alloc;
	if (!agent_proc_poll(t_freed, t, T_WAIT_MS)) {
		server_proc_dump_log(&t->c.s, "claim never freed");
		agent_proc_dump_log(t->c.a, "claim never freed");
		fail_msg("the claim of %s did not end freed", alloc);
	}
	assert_false(agent_proc_is_mount(path));
}

/*
 * The event stream from the start holds the claim event of alloc moving
 * to node-unpublished with the note "released: <reason>".
 */
static void t_expect_event(struct t_env *t, const char *alloc, const char *reason)
{
	struct http_client *h = http_client_new(t->c.s.base);
	char key[160], note[600], *text = NULL, *line, *save = NULL;
	bool found = false;

	assert_non_null(h);
	http_client_token(h, T_TOKEN);
	/* The stream never ends by itself: the timeout ends it after the replay. */
	http_client_do(h, "GET", "/v1/event/stream?index=0", NULL, &text, NULL, 1500);
	http_client_free(h);
	assert_non_null(text);
	snprintf(key, sizeof(key), "data/%s", alloc);
	snprintf(note, sizeof(note), "released: %s", reason);
	for (line = strtok_r(text, "\n", &save); line && !found;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);

		found = t_streq(json_object_get(ev, "topic"), "claim") &&
			t_streq(json_object_get(ev, "key"), key) &&
			t_streq(json_object_get(ev, "type"), "node-unpublished") &&
			t_streq(json_object_get(json_object_get(ev, "object"), "note"), note);
		json_decref(ev);
	}
	if (!found)
		fprintf(stderr, "no claim event of %s with note \"%s\"\n", key, note);
	free(text);
	assert_true(found);
}

/* The number of claims the server holds on the volume. */
static size_t t_claims(struct t_env *t)
{
	json_t *doc = NULL;
	size_t n;

	assert_int_equal(server_proc_http(&t->c.s, "GET", "/v1/volume/data", NULL, &doc), 200);
	n = json_array_size(json_object_get(doc, "claims"));
	json_decref(doc);
	return n;
}

static void test_owner_pid_exits(void **state)
{
	struct t_env *t = *state;
	char path[1024], pidtext[32], reason[64];
	pid_t pid;
	json_t *doc = NULL, *o;

	t_create(t);
	pid = t_kid(t, 0);
	snprintf(pidtext, sizeof(pidtext), "%d", (int)pid);
	t_mount(t, "web-1", "-owner-pid", pidtext, path);
	assert_int_equal(agent_proc_http(t->c.a, "GET", "/v1/agent/owners", NULL, &doc), 200);
	o = json_array_get(json_object_get(doc, "owners"), 0);
	assert_string_equal(json_string_value(json_object_get(o, "kind")), "pid");
	assert_int_equal(json_integer_value(json_object_get(o, "pid")), pid);
	assert_true(json_integer_value(json_object_get(o, "start_time")) > 0);
	json_decref(doc);
	assert_int_equal(t_claims(t), 1);

	child_proc_kill(&t->kids[0]);
	t_wait_freed(t, "web-1", path);
	assert_int_equal(agent_proc_mount_count(t->c.a), 0);
	snprintf(reason, sizeof(reason), "owner pid %d exited", (int)pid);
	t_expect_event(t, "web-1", reason);
	assert_true(agent_proc_wait_log(t->c.a, "claim owner gone: released", 1, T_WAIT_MS));
	doc = NULL;
	assert_int_equal(agent_proc_http(t->c.a, "GET", "/v1/agent/owners", NULL, &doc), 200);
	assert_int_equal(json_array_size(json_object_get(doc, "owners")), 0);
	json_decref(doc);
}

/* Whether the mount at path went, or 2.5 s passed since *start (a ctx of two). */
struct t_hold {
	const char *path;
	int64_t until;
};

static bool t_gone_or_late(void *ctx)
{
	struct t_hold *h = ctx;

	return !agent_proc_is_mount(h->path) || agent_proc_now_ms() >= h->until;
}

static void test_lease_renew_and_lapse(void **state)
{
	struct t_env *t = *state;
	char path[1024];
	struct t_hold hold = {path, 0};
	json_t *doc = NULL;

	t_create(t);
	t_mount(t, "web-1", "-lease", "1s", path);
	hold.until = agent_proc_now_ms() + 2500;
	/* Renewed for a minute at once: it holds past the first second. */
	T_RUN(t, "volume", "renew", "data", "-alloc", "web-1", "-lease", "60s");
	csictl_expect_ok(&t->c.r);
	assert_non_null(strstr(t->c.r.out, "renewed for 60s"));
	csictl_runner_free(&t->c.rn, &t->c.r);
	assert_true(agent_proc_poll(t_gone_or_late, &hold, T_WAIT_MS));
	assert_true(agent_proc_is_mount(path));
	assert_int_equal(t_claims(t), 1);
	assert_int_equal(agent_proc_http(t->c.a, "GET", "/v1/agent/owners", NULL, &doc), 200);
	assert_int_equal(json_integer_value(json_object_get(
			     json_array_get(json_object_get(doc, "owners"), 0), "lease_ms")),
			 60000);
	json_decref(doc);

	/* Renewed for a second, not renewed again: it lapses and is released. */
	T_RUN(t, "volume", "renew", "data", "-alloc", "web-1", "-lease", "1s");
	csictl_expect_ok(&t->c.r);
	csictl_runner_free(&t->c.rn, &t->c.r);
	t_wait_freed(t, "web-1", path);
	t_expect_event(t, "web-1", "lease of 1000 ms expired");
	/* Nothing to renew any more. */
	T_RUN(t, "volume", "renew", "data", "-alloc", "web-1");
	csictl_expect_fail(&t->c.r, 1, "no owner recorded");
	csictl_runner_free(&t->c.rn, &t->c.r);
}

/* The agent's answer to a request: status and a part of the error. */
static void t_agent_expect(struct t_env *t, const char *method, const char *path, const char *body,
			   long status, const char *in_error)
{
	json_t *doc = NULL;
	long got = agent_proc_http(t->c.a, method, path, body, &doc);
	const char *msg = json_string_value(json_object_get(doc, "error"));

	if (got != status || !msg || !strstr(msg, in_error))
		fprintf(stderr, "%s %s %s: %ld %s\n", method, path, body ? body : "", got,
			msg ? msg : "(no error)");
	assert_int_equal(got, status);
	assert_non_null(msg);
	assert_non_null(strstr(msg, in_error));
	json_decref(doc);
}

/* A csictl mount with an owner flag fails with status and a part of stderr. */
static void t_mount_refused(struct t_env *t, const char *flag, const char *value, int status,
			    const char *in_stderr)
{
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-1", (char *)flag, (char *)value);
	csictl_expect_fail(&t->c.r, status, in_stderr);
	csictl_runner_free(&t->c.rn, &t->c.r);
}

static void test_bad_owners_claim_nothing(void **state)
{
	struct t_env *t = *state;
	const char *put = "/v1/agent/volumes/data/mount";
	char pidtext[32], path[1024];
	pid_t gone = 0;

	t_create(t);
	/* A pid that exited and was reaped: no such process. */
	gone = child_proc_gone();
	assert_true(gone > 0);
	snprintf(pidtext, sizeof(pidtext), "%d", (int)gone);
	t_mount_refused(t, "-owner-pid", pidtext, 1, "no such process");
	t_mount_refused(t, "-owner-pid", "-3", 2, "-owner-pid");
	t_mount_refused(t, "-lease", "0", 2, "from 1s to 24h");
	t_mount_refused(t, "-lease", "87600h", 2, "from 1s to 24h");
	t_mount_refused(t, "-lease", "500ms", 2, "from 1s to 24h");
	t_mount_refused(t, "-owner-cgroup", T_CGROUP_ROOT "/../../../etc", 1, "must be normal");
	t_mount_refused(t, "-owner-cgroup", "/tmp", 1, "not a cgroup v2 directory");
	t_mount_refused(t, "-owner-cgroup", T_CGROUP_ROOT "/no-such-group-e2e", 1, "No such file");
	t_mount_refused(t, "-owner-cgroup", "relative/x", 2, "absolute");

	/* The same through the API: 400 with the allowed range, nothing claimed. */
	t_agent_expect(t, "PUT", put, "{\"alloc_id\": \"web-1\", \"owner\": {\"lease_ms\": 0}}",
		       400, "from 1s to 24h");
	t_agent_expect(t, "PUT", put,
		       "{\"alloc_id\": \"web-1\", \"owner\": {\"lease_ms\": 315360000000}}", 400,
		       "from 1s to 24h");
	t_agent_expect(t, "PUT", put, "{\"alloc_id\": \"web-1\", \"owner\": {\"pid\": 0}}", 400,
		       "owner.pid");
	t_agent_expect(t, "PUT", put,
		       "{\"alloc_id\": \"web-1\", \"owner\": {\"pid\": 1, \"lease_ms\": 5000}}",
		       400, "one of");
	t_agent_expect(t, "PUT", put, "{\"alloc_id\": \"web-1\", \"owner\": {\"uid\": 1}}", 400,
		       "unknown field");
	t_agent_expect(
	    t, "PUT", put,
	    "{\"alloc_id\": \"web-1\", \"owner\": {\"cgroup\": \"/sys/fs/cgroup/x\\ny\"}}", 400,
	    "owner.cgroup");
	t_agent_expect(t, "PUT", put,
		       "{\"alloc_id\": \"web-1\", \"owner\": {\"cgroup\": \"" T_CGROUP_ROOT "\"}}",
		       400, "root cgroup");
	assert_int_equal(t_claims(t), 0);
	assert_int_equal(agent_proc_mount_count(t->c.a), 0);

	/* A renewal of a mount owned by a pid, or of nothing, is refused. */
	snprintf(pidtext, sizeof(pidtext), "%d", (int)t_kid(t, 0));
	t_mount(t, "web-1", "-owner-pid", pidtext, path);
	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mount/web-1/renew", NULL, 412,
		       "is a pid, not a lease");
	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mount/web-9/renew", NULL, 404,
		       "no owner recorded");
	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mount/web-1/renew", "{\"lease_ms\": 10}",
		       400, "from 1s to 24h");
	t_agent_expect(t, "GET", "/v1/agent/volumes/data/mount/web-1/renew", NULL, 405, "");
	/* An explicit unmount forgets the owner: its exit later releases nothing. */
	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->c.r);
	csictl_runner_free(&t->c.rn, &t->c.r);
	t_wait_freed(t, "web-1", path);
	assert_int_equal(agent_proc_http(t->c.a, "GET", "/v1/agent/owners", NULL, NULL), 200);
	child_proc_kill(&t->kids[0]);
	assert_false(agent_proc_log_count(t->c.a, "claim owner gone", 1));
}

/* Writes pid into the cgroup's cgroup.procs. */
static void t_cgroup_add(struct t_env *t, pid_t pid)
{
	char procs[160];
	FILE *f;

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", t->cgroup);
	f = fopen(procs, "w");
	assert_non_null(f);
	fprintf(f, "%d\n", (int)pid);
	assert_int_equal(fclose(f), 0);
}

static void test_cgroup_emptied(void **state)
{
	struct t_env *t = *state;
	char path[1024], reason[256];
	struct statfs fs;

	if (statfs(T_CGROUP_ROOT, &fs) != 0 || fs.f_type != 0x63677270) {
		fprintf(stderr, "no cgroup v2 at " T_CGROUP_ROOT ": skipped\n");
		skip();
	}
	snprintf(t->cgroup, sizeof(t->cgroup), T_CGROUP_ROOT "/csid-e2e-owners-%d", (int)getpid());
	if (mkdir(t->cgroup, 0755) != 0) {
		fprintf(stderr, "mkdir %s: %s: skipped\n", t->cgroup, strerror(errno));
		t->cgroup[0] = '\0';
		skip();
	}
	t_create(t);
	/* Empty: refused, nothing claimed. */
	t_mount_refused(t, "-owner-cgroup", t->cgroup, 1, "is empty");
	assert_int_equal(t_claims(t), 0);

	t_cgroup_add(t, t_kid(t, 0));
	t_mount(t, "web-1", "-owner-cgroup", t->cgroup, path);
	child_proc_kill(&t->kids[0]);
	t_wait_freed(t, "web-1", path);
	snprintf(reason, sizeof(reason), "owner cgroup %s is empty", t->cgroup);
	t_expect_event(t, "web-1", reason);
}

/* Whether the agent lists an owner for alloc. */
static bool t_owned(struct t_env *t, const char *alloc)
{
	json_t *doc = NULL, *o;
	bool found = false;
	size_t i;

	assert_int_equal(agent_proc_http(t->c.a, "GET", "/v1/agent/owners", NULL, &doc), 200);
	json_array_foreach(json_object_get(doc, "owners"), i, o) found =
	    found || t_streq(json_object_get(o, "alloc_id"), alloc);
	json_decref(doc);
	return found;
}

static void test_owners_survive_restart(void **state)
{
	struct t_env *t = *state;
	struct agent_proc *a = t->c.a;
	char p1[1024], p2[1024], pid1[32], pid2[32], reason[64];

	t_create(t);
	snprintf(pid1, sizeof(pid1), "%d", (int)t_kid(t, 0));
	snprintf(pid2, sizeof(pid2), "%d", (int)t_kid(t, 1));
	t_mount(t, "web-1", "-owner-pid", pid1, p1);
	t_mount(t, "web-2", "-owner-pid", pid2, p2);

	/* web-1's owner exits while the agent is down: released when it starts. */
	assert_int_equal(agent_proc_stop(a, SIGTERM, T_WAIT_MS), 0);
	child_proc_kill(&t->kids[0]);
	assert_int_equal(agent_proc_start(a), 0);
	assert_int_equal(agent_proc_wait_ready(a, T_WAIT_MS), 0);
	t_wait_freed(t, "web-1", p1);
	snprintf(reason, sizeof(reason), "owner pid %s exited", pid1);
	t_expect_event(t, "web-1", reason);

	/* web-2's owner lives: still mounted and watched; its exit releases it. */
	assert_true(agent_proc_is_mount(p2));
	assert_true(t_owned(t, "web-2"));
	assert_false(t_owned(t, "web-1"));
	child_proc_kill(&t->kids[1]);
	t_wait_freed(t, "web-2", p2);
	snprintf(reason, sizeof(reason), "owner pid %s exited", pid2);
	t_expect_event(t, "web-2", reason);
	assert_int_equal(agent_proc_mount_count(a), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_owner_pid_exits, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_lease_renew_and_lapse, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_owners_claim_nothing, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_cgroup_emptied, t_setup, t_teardown),
	    cmocka_unit_test_setup_teardown(test_owners_survive_restart, t_setup, t_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
