/*
 * End to end: claims from the node. A real `csid server` and a real
 * `csid agent` that joined it by itself ("servers"), supervising
 * csi-hostpath as a monolith with controller publish on. A volume is
 * created with `csictl volume create -wait`; `csictl volume mount data
 * -alloc web-1` (through the agent) prints a path that is a real mount
 * where a file can be written, and the server shows the claim and a
 * published publication to the node; a second allocation on the
 * single-node-single-writer volume is refused naming the holder;
 * `csictl volume unmount` removes the mount and the claim ends freed
 * (past_claims), the publication gone. Unmounting again (nothing
 * mounted, the claim freed already) succeeds and says so, as does
 * unmounting an allocation that never held a claim. With the
 * server down, the unmount records the release, and the agent sends it
 * after a restart of both. A mount whose NodePublishVolume fails releases
 * its claim at once, so the volume's delete succeeds right away. Every
 * mount is detached at teardown even
 * when a test fails (agent_proc_cleanup).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "claim_env.h"

#define T_NODE CLAIM_ENV_NODE
#define T_WAIT_MS CLAIM_ENV_WAIT_MS
#define T_RUN CLAIM_ENV_RUN

/* The volume as the server shows it (a new reference). */
static json_t *t_volume(struct claim_env *t)
{
	json_t *doc = NULL;

	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/volume/data", NULL, &doc), 200);
	return doc;
}

static bool t_freed(void *ctx)
{
	struct claim_env *t = ctx;
	json_t *doc = NULL, *past;
	bool ok;

	if (server_proc_http(&t->s, "GET", "/v1/volume/data", NULL, &doc) != 200) {
		json_decref(doc);
		return false;
	}
	past = json_array_get(json_object_get(doc, "past_claims"), 0);
	ok = json_array_size(json_object_get(doc, "claims")) == 0 &&
	     json_array_size(json_object_get(doc, "publications")) == 0 && past &&
	     strcmp(json_string_value(json_object_get(past, "alloc_id")), "web-1") == 0 &&
	     strcmp(json_string_value(json_object_get(past, "state")), "freed") == 0;
	json_decref(doc);
	return ok;
}

/* The agent's answer to a request, checked: status and a part of the error. */
static void t_agent_expect(struct claim_env *t, const char *method, const char *path,
			   const char *body, long status, const char *in_error)
{
	json_t *doc = NULL;
	long got = agent_proc_http(t->a, method, path, body, &doc);
	const char *msg = json_string_value(json_object_get(doc, "error"));

	assert_int_equal(got, status);
	assert_non_null(msg);
	assert_non_null(strstr(msg, in_error));
	json_decref(doc);
}

/* Bad requests get a clear error and claim nothing. */
static void t_bad_requests(struct claim_env *t)
{
	json_t *v;

	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mount", "{\"alloc\": \"web-1\"}", 400,
		       "unknown field \"alloc\"");
	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mount", "{\"read_only\": true}", 400,
		       "alloc_id: required");
	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mount", "{\"alloc_id\": \"..\"}", 400,
		       "alloc_id");
	t_agent_expect(t, "PUT", "/v1/agent/volumes/nope/mount", "{\"alloc_id\": \"web-1\"}", 404,
		       "nope");
	t_agent_expect(t, "GET", "/v1/agent/volumes/data/mount", NULL, 405, "");
	t_agent_expect(t, "PUT", "/v1/agent/volumes/data/mountx", "{}", 404, "no such endpoint");
	v = t_volume(t);
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 0);
	json_decref(v);
}

static void test_mount_claim_unmount_release(void **state)
{
	struct claim_env *t = *state;
	json_t *v, *claim, *pub;
	char path[1024], file[1100];
	FILE *f;

	T_RUN(t, "volume", "create", t->spec, "-wait");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);

	t_bad_requests(t);
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-1");
	if (t->r.status != 0)
		agent_proc_dump_log(t->a, "volume mount failed");
	csictl_expect_ok(&t->r);
	snprintf(path, sizeof(path), "%s", t->r.out);
	path[strcspn(path, "\n")] = '\0';
	csictl_runner_free(&t->rn, &t->r);
	assert_true(path[0] == '/');
	assert_true(agent_proc_is_mount(path));
	snprintf(file, sizeof(file), "%s/hello", path);
	f = fopen(file, "w");
	assert_non_null(f);
	assert_true(fputs("hello\n", f) >= 0);
	assert_int_equal(fclose(f), 0);

	/*
	 * The server holds the claim, and the volume is published to the node
	 * (recorded just after the claim's answer: docs/server-api.md).
	 */
	assert_true(server_proc_wait_doc(&t->s, "/v1/volume/data", server_proc_volume_all_published,
					 T_WAIT_MS));
	v = t_volume(t);
	claim = json_array_get(json_object_get(v, "claims"), 0);
	pub = json_array_get(json_object_get(v, "publications"), 0);
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 1);
	assert_string_equal(json_string_value(json_object_get(claim, "alloc_id")), "web-1");
	assert_string_equal(json_string_value(json_object_get(claim, "node_id")), T_NODE);
	assert_string_equal(json_string_value(json_object_get(pub, "node_id")), T_NODE);
	assert_string_equal(json_string_value(json_object_get(pub, "state")), "published");
	json_decref(v);

	/* Mounting again for the same allocation is the same mount. */
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	assert_non_null(strstr(t->r.out, path));
	csictl_runner_free(&t->rn, &t->r);

	/* single-node-single-writer: a second allocation is refused, naming the holder. */
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-2");
	csictl_expect_fail(&t->r, 1, "web-1");
	csictl_runner_free(&t->rn, &t->r);
	assert_int_equal(agent_proc_mount_count(t->a), 1);

	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	assert_non_null(strstr(t->r.out, "unmounted"));
	assert_non_null(strstr(t->r.out, "claim released"));
	csictl_runner_free(&t->rn, &t->r);
	assert_false(agent_proc_is_mount(path));
	assert_int_equal(agent_proc_mount_count(t->a), 0);
	if (!agent_proc_poll(t_freed, t, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "claim never freed");
		fail_msg("the claim of web-1 did not end freed");
	}

	/* Again: nothing mounted, and the release of a freed claim is done already. */
	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	assert_non_null(strstr(t->r.out, "was not mounted"));
	csictl_runner_free(&t->rn, &t->r);

	/* An allocation that never got a claim (its mount stopped before): nothing to undo. */
	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-9");
	csictl_expect_ok(&t->r);
	assert_non_null(strstr(t->r.out, "was not mounted for allocation web-9; it held no claim"));
	csictl_runner_free(&t->rn, &t->r);

	/* Usage: -alloc is required. */
	T_RUN(t, "volume", "mount", "data");
	csictl_expect_fail(&t->r, 2, "-alloc");
	csictl_runner_free(&t->rn, &t->r);
}

/*
 * The server is down when the allocation is unmounted: the mount goes,
 * the release is recorded, and the agent, stopped and started again
 * meanwhile, sends it once the server is back; the claim ends freed.
 */
static void test_release_pending_across_restarts(void **state)
{
	struct claim_env *t = *state;
	struct agent_proc *a = t->a;
	char path[1024];
	json_t *v;

	T_RUN(t, "volume", "create", t->spec, "-wait");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	snprintf(path, sizeof(path), "%s", t->r.out);
	path[strcspn(path, "\n")] = '\0';
	csictl_runner_free(&t->rn, &t->r);
	assert_true(agent_proc_is_mount(path));

	assert_int_equal(server_proc_stop(&t->s, SIGTERM, T_WAIT_MS), 0);
	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	assert_non_null(strstr(t->r.out, "keeps retrying the release"));
	csictl_runner_free(&t->rn, &t->r);
	assert_false(agent_proc_is_mount(path));
	assert_int_equal(agent_proc_mount_count(a), 0);

	assert_int_equal(agent_proc_stop(a, SIGTERM, T_WAIT_MS), 0);
	assert_int_equal(server_proc_start(&t->s), 0);
	assert_true(server_proc_wait_ready(&t->s, T_WAIT_MS));
	/* The server still holds the claim: nobody released it. */
	v = t_volume(t);
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 1);
	json_decref(v);
	assert_int_equal(agent_proc_start(a), 0);
	assert_int_equal(agent_proc_wait_ready(a, T_WAIT_MS), 0);
	if (!agent_proc_poll(t_freed, t, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "claim never freed");
		agent_proc_dump_log(a, "claim never freed");
		fail_msg("the pending release was not sent");
	}
	assert_true(agent_proc_wait_log(a, "pending release sent", 1, T_WAIT_MS));
}

/*
 * The plugin fails NodePublishVolume after the claim: the mount fails
 * saying the claim was released, the server shows the claim released
 * (not claimed) with the failure in its note at once, and `csictl volume delete
 * -wait` succeeds without waiting for the lost-claim pass.
 */
static void test_failed_mount_releases_claim(void **state)
{
	struct claim_env *t = *state;
	json_t *v, *claim;
	const char *note, *st;

	T_RUN(t, "volume", "create", t->spec, "-wait");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
	assert_int_equal(agent_proc_write_faults(
			     t->a, "NodePublishVolume code=INTERNAL msg=\"publish broke\"\n"),
			 0);
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-1");
	csictl_expect_fail(&t->r, 1, "the claim was released");
	assert_non_null(strstr(t->r.err, "publish broke"));
	csictl_runner_free(&t->rn, &t->r);
	assert_int_equal(agent_proc_mount_count(t->a), 0);

	/*
	 * Released before the mount answered: the claim is no longer claimed
	 * (node-unpublished until the controller unpublish, or freed by now),
	 * with the failure in its note.
	 */
	v = t_volume(t);
	claim = json_array_get(json_object_get(v, "claims"), 0);
	if (!claim)
		claim = json_array_get(json_object_get(v, "past_claims"), 0);
	st = json_string_value(json_object_get(claim, "state"));
	note = json_string_value(json_object_get(claim, "note"));
	assert_int_equal(json_array_size(json_object_get(v, "claims")) +
			     json_array_size(json_object_get(v, "past_claims")),
			 1);
	assert_string_equal(json_string_value(json_object_get(claim, "alloc_id")), "web-1");
	assert_non_null(st);
	assert_string_not_equal(st, "claimed");
	assert_non_null(note);
	assert_non_null(strstr(note, "mount failed: "));
	assert_non_null(strstr(note, "publish broke"));
	json_decref(v);

	assert_int_equal(agent_proc_write_faults(t->a, ""), 0);
	T_RUN(t, "volume", "delete", "data", "-wait");
	if (t->r.status != 0)
		server_proc_dump_log(&t->s, "delete after a failed mount");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
	assert_int_equal(server_proc_http(&t->s, "GET", "/v1/volume/data", NULL, NULL), 404);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_mount_claim_unmount_release,
					    claim_env_cmocka_setup, claim_env_cmocka_teardown),
	    cmocka_unit_test_setup_teardown(test_release_pending_across_restarts,
					    claim_env_cmocka_setup, claim_env_cmocka_teardown),
	    cmocka_unit_test_setup_teardown(test_failed_mount_releases_claim,
					    claim_env_cmocka_setup, claim_env_cmocka_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
