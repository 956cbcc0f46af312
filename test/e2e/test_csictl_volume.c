/*
 * End to end: the real csictl against a real `csid server` supervising
 * csi-hostpath: the spec example of `volume init` created with -wait,
 * status tables and JSON, claims refused with the holder named, release,
 * snapshots, expand, delete -wait, deregister -force with what it
 * skipped, plugin and node status; and the errors a user meets first (no
 * server, a bad spec file, usage).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csictl_run.h"
#include "hostpath_proc.h"
#include "server_proc.h"

#define WAIT_MS 20000

static const char node_body[] =
    "{\"plugins\": [{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"type\": \"node\", "
    "\"healthy\": true, \"health\": \"healthy\", \"version\": \"0.1.0\", "
    "\"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"plugin_node_id\": \"node-1\", "
    "\"topology\": {\"topology.hostpath.csi/node\": \"node-1\"}}]}";

struct fixture {
	struct server_proc s;
	struct csictl_runner rn;
	struct csictl_run r; /* here, not on a test's stack: a failed test's teardown frees it */
	char env[128];
	char spec[SERVER_PROC_PATH + 16];
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	if (server_proc_init(&f->s) || server_proc_write_config(&f->s, NULL, NULL) ||
	    server_proc_start(&f->s) || !server_proc_wait_ready(&f->s, WAIT_MS) ||
	    !server_proc_wait_plugin(&f->s, SERVER_PROC_HP_ID, WAIT_MS)) {
		server_proc_dump_log(&f->s, "setup");
		server_proc_cleanup(&f->s);
		free(f);
		return -1;
	}
	f->rn.dir = f->s.dir;
	f->rn.deadline_ms = 60000;
	snprintf(f->env, sizeof(f->env), "CSID_ADDR=%s", f->s.base);
	snprintf(f->spec, sizeof(f->spec), "%s/vol.json", f->s.dir);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	csictl_runner_cleanup(&f->rn);
	server_proc_cleanup(&f->s);
	free(f);
	return 0;
}

/* Runs csictl with CSID_ADDR set; args NULL-terminated. */
#define RUN(f, r, ...)                                         \
	do {                                                   \
		char *env_[] = {(f)->env, NULL};               \
		char *args_[] = {__VA_ARGS__, NULL};           \
		csictl_runner_run(&(f)->rn, (r), env_, args_); \
	} while (0)

static void test_tour(void **state)
{
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;
	json_t *j;
	FILE *out;

	assert_int_equal(server_proc_http(&f->s, "PUT", "/v1/node/node-1", node_body, NULL), 200);
	RUN(f, r, "volume", "init");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "\"id\": \"data\""));
	out = fopen(f->spec, "w");
	assert_non_null(out);
	fputs(r->out, out);
	fclose(out);
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "create", f->spec, "-wait");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "ready"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "status");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "data"));
	assert_non_null(strstr(r->out, "ready"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "status", "data", "-o", "json");
	csictl_expect_ok(r);
	j = csictl_expect_json(r);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "ready");
	assert_null(json_object_get(j, "secrets"));
	json_decref(j);
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "claim", "data", "-alloc", "web-1", "-node", "node-1");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "web-1"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "claim", "data", "-alloc", "web-2", "-node", "node-1");
	csictl_expect_fail(r, 1, "web-1");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "release", "data", "-alloc", "web-1");
	csictl_expect_ok(r);
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "snapshot", "create", "data", "snap-1", "-wait");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "snap-1"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "snapshot", "list");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "snap-1"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "snapshot", "delete", "snap-1", "-wait");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "snapshot snap-1 deleted"));
	csictl_runner_free(&f->rn, r);

	/* expand -wait follows the volume until the plugin grew it, and says to what. */
	RUN(f, r, "volume", "expand", "data", "-size", "2GiB", "-wait");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "volume data: capacity 2147483648 bytes"));
	csictl_runner_free(&f->rn, r);

	/* Volumes do not shrink; nothing pending is nothing to cancel. */
	RUN(f, r, "volume", "expand", "data", "-size", "1GiB");
	csictl_expect_fail(r, 1, "volumes do not shrink");
	csictl_runner_free(&f->rn, r);
	RUN(f, r, "volume", "cancel", "data");
	csictl_expect_fail(r, 1, "no pending change");
	csictl_runner_free(&f->rn, r);

	/* An expand the plugin keeps failing is cancelled by the operator. */
	assert_int_equal(
	    server_proc_write_faults(&f->s, "ControllerExpandVolume code=UNAVAILABLE\n"), 0);
	RUN(f, r, "volume", "expand", "data", "-size", "3GiB");
	csictl_expect_ok(r);
	csictl_runner_free(&f->rn, r);
	RUN(f, r, "volume", "cancel", "data");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "cancelled the pending expand to 3221225472 bytes"));
	csictl_runner_free(&f->rn, r);
	assert_int_equal(server_proc_write_faults(&f->s, ""), 0);
	RUN(f, r, "volume", "status", "data", "-o", "json");
	csictl_expect_ok(r);
	j = csictl_expect_json(r);
	assert_int_equal(json_integer_value(json_object_get(j, "capacity")), 2147483648LL);
	assert_int_equal(
	    json_integer_value(json_object_get(json_object_get(j, "pending"), "capacity_min")), 0);
	json_decref(j);
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "plugin", "status");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, SERVER_PROC_HP_ID));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "node", "status", "node-1");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "node-1"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "delete", "data", "-wait");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "deleted"));
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "status", "data");
	csictl_expect_fail(r, 1, "not_found");
	csictl_runner_free(&f->rn, r);
}

static void test_force_deregister(void **state)
{
	static const char spec[] =
	    "{\"id\": \"old\", \"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"external_id\": "
	    "\"gone-1\", \"capabilities\": [{\"access_mode\": \"single-node-writer\"}]}";
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;

	assert_int_equal(server_proc_http(&f->s, "PUT", "/v1/volume/old", spec, NULL), 200);
	assert_int_equal(server_proc_http(&f->s, "PUT", "/v1/node/node-1", node_body, NULL), 200);
	RUN(f, r, "volume", "deregister", "old", "-force");
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "deregistered"));
	csictl_runner_free(&f->rn, r);
	RUN(f, r, "volume", "status", "old");
	csictl_expect_fail(r, 1, "not_found");
	csictl_runner_free(&f->rn, r);
}

/*
 * A spec naming a plugin no node nor the server offers: create answers
 * with a warning, and delete -wait gives up at once saying why, instead of
 * following a delete that cannot go on for ten minutes.
 */
static void test_plugin_missing(void **state)
{
	static const char spec[] =
	    "{\"id\": \"lost\", \"plugin_id\": \"nobody.csi.example\", \"capabilities\": "
	    "[{\"access_mode\": \"single-node-writer\", \"attachment_mode\": \"file-system\"}]}";
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;
	FILE *out = fopen(f->spec, "w");

	assert_non_null(out);
	fputs(spec, out);
	fclose(out);
	RUN(f, r, "volume", "create", f->spec);
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "warning: plugin nobody.csi.example is offered by no node"));
	csictl_runner_free(&f->rn, r);
	RUN(f, r, "volume", "delete", "lost", "-wait");
	csictl_expect_fail(r, 1, "plugin nobody.csi.example: no controller nor node plugin");
	assert_non_null(strstr(r->err, "deregister ID -force"));
	csictl_runner_free(&f->rn, r);
	RUN(f, r, "volume", "deregister", "lost", "-force");
	csictl_expect_ok(r);
	csictl_runner_free(&f->rn, r);
}

static void test_user_errors(void **state)
{
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;
	char *noserver[] = {(char *)"CSID_ADDR=127.0.0.1:1", NULL};
	char *args[] = {(char *)"volume", (char *)"status", NULL};
	FILE *out;

	csictl_runner_run(&f->rn, r, noserver, args);
	csictl_expect_fail(r, 1, "no server listening at");
	csictl_runner_free(&f->rn, r);

	out = fopen(f->spec, "w");
	assert_non_null(out);
	fputs("# a typo\n{\"id\": \"x\", \"plugin_id\": \"" SERVER_PROC_HP_ID
	      "\", \"capabilities\": [{\"acces_mode\": \"single-node-writer\"}]}\n",
	      out);
	fclose(out);
	RUN(f, r, "volume", "create", f->spec);
	csictl_expect_fail(r, 1, "acces_mode");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "create");
	csictl_expect_fail(r, 2, "usage");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "frobnicate");
	csictl_expect_fail(r, 2, "unknown command");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "expand", "x", "-size", "lots");
	csictl_expect_fail(r, 2, "-size");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "volume", "status", "a/b");
	csictl_expect_fail(r, 1, "no such endpoint");
	csictl_runner_free(&f->rn, r);
}

/* csictl version: csictl's own, then the one the server reports in its health answer. */
static void test_version(void **state)
{
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;
	json_t *j;

	RUN(f, r, "version");
	csictl_expect_ok(r);
	assert_string_equal(r->out, "csictl " CSID_VERSION "\nserver " CSID_VERSION "\n");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "version", "-o", "json");
	csictl_expect_ok(r);
	j = csictl_expect_json(r);
	assert_string_equal(json_string_value(json_object_get(j, "csictl")), CSID_VERSION);
	assert_string_equal(json_string_value(json_object_get(j, "server")), CSID_VERSION);
	json_decref(j);
	csictl_runner_free(&f->rn, r);

	/* Nobody listens there: csictl's line, then an error. */
	RUN(f, r, "version", "-address", "http://127.0.0.1:1");
	csictl_expect_fail(r, 1, "server");
	assert_string_equal(r->out, "csictl " CSID_VERSION "\n");
	csictl_runner_free(&f->rn, r);

	RUN(f, r, "version", "-client", "-address", "http://127.0.0.1:1");
	csictl_expect_ok(r);
	assert_string_equal(r->out, "csictl " CSID_VERSION "\n");
	csictl_runner_free(&f->rn, r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_tour, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_force_deregister, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_plugin_missing, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_user_errors, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_version, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
