/*
 * End to end: NodeExpandVolume after a controller expand that asks for it
 * (issue 16 item 1), with a real `csid server`, a real `csid agent` and
 * csi-hostpath (claim_env.h), whose mount volumes answer
 * ControllerExpandVolume with node_expansion_required.
 *
 * Online: the volume is mounted for web-1; NodeExpandVolume fails twice
 * by the plugin's fault script, is retried by the agent, then succeeds;
 * the server clears node_expansion_required. Offline: unmounted, the
 * volume is expanded again (the flag stays set, no node holds it); the
 * next mount grows it on the node and the flag is cleared. A final
 * refusal (FAILED_PRECONDITION) is not retried for that capacity; the
 * next expand is tried afresh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "claim_env.h"

#define T_WAIT_MS CLAIM_ENV_WAIT_MS
#define T_RUN CLAIM_ENV_RUN

/* What a poll waits for: the volume's capacity at least min, the flag as wanted. */
struct t_want {
	struct claim_env *t;
	int64_t min;
	bool required;
};

static bool t_volume_is(void *ctx)
{
	struct t_want *w = ctx;
	json_t *doc = NULL;
	bool ok;

	if (server_proc_http(&w->t->s, "GET", "/v1/volume/data", NULL, &doc) != 200) {
		json_decref(doc);
		return false;
	}
	ok = json_integer_value(json_object_get(doc, "capacity")) >= w->min &&
	     json_is_true(json_object_get(doc, "node_expansion_required")) == w->required;
	json_decref(doc);
	return ok;
}

static void t_wait_volume(struct claim_env *t, int64_t min, bool required, const char *why)
{
	struct t_want w = {t, min, required};

	if (!agent_proc_poll(t_volume_is, &w, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, why);
		agent_proc_dump_log(t->a, why);
		fail_msg("%s", why);
	}
}

static void t_expand(struct claim_env *t, int64_t bytes)
{
	char body[64];
	json_t *doc = NULL;

	snprintf(body, sizeof(body), "{\"capacity_min\": %lld}", (long long)bytes);
	assert_int_equal(server_proc_http(&t->s, "PUT", "/v1/volume/data/expand", body, &doc), 200);
	json_decref(doc);
}

static void t_mount(struct claim_env *t)
{
	T_RUN(t, "volume", "mount", "data", "-alloc", "web-1");
	if (t->r.status != 0)
		agent_proc_dump_log(t->a, "volume mount failed");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
}

static void test_node_expand_online_and_offline(void **state)
{
	struct claim_env *t = *state;

	T_RUN(t, "volume", "create", t->spec, "-wait");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
	t_mount(t);

	/* Online, with two faults in NodeExpandVolume: retried, then done. */
	assert_int_equal(agent_proc_write_faults(t->a, "NodeExpandVolume nth=1 times=2 "
						       "code=UNAVAILABLE msg=\"expand fault\"\n"),
			 0);
	t_expand(t, 2 << 20);
	t_wait_volume(t, 2 << 20, false, "online node expansion never cleared the flag");
	assert_true(agent_proc_wait_log(t->a, "expand fault", 2, T_WAIT_MS));
	assert_true(agent_proc_wait_log(t->a, "node expanded", 1, T_WAIT_MS));
	assert_true(agent_proc_wait_log(t->a, "node expansion done", 1, T_WAIT_MS));
	assert_false(agent_proc_log_count(t->a, "expand fault", 3));

	/* Offline: expanded while on no node; the next mount grows it. */
	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
	t_expand(t, 3 << 20);
	t_wait_volume(t, 3 << 20, true, "offline expand never done on the controller");
	t_mount(t);
	t_wait_volume(t, 3 << 20, false, "offline node expansion never cleared the flag");
	assert_true(agent_proc_wait_log(t->a, "node expansion done", 2, T_WAIT_MS));
	assert_false(agent_proc_log_count(t->a, "node expansion after mount failed", 1));

	/*
	 * FAILED_PRECONDITION ("Caller MUST NOT retry"): refused finally, the
	 * flag stays; a later expand to another capacity is tried afresh.
	 */
	assert_int_equal(agent_proc_write_faults(t->a, "NodeExpandVolume code=FAILED_PRECONDITION "
						       "msg=\"cannot grow while published\"\n"),
			 0);
	t_expand(t, 4 << 20);
	assert_true(agent_proc_wait_log(t->a, "refused finally", 1, T_WAIT_MS));
	t_wait_volume(t, 4 << 20, true, "a final refusal cleared the flag");
	assert_int_equal(agent_proc_write_faults(t->a, ""), 0);
	t_expand(t, 5 << 20);
	t_wait_volume(t, 5 << 20, false, "node expansion after a final refusal never done");
	assert_false(agent_proc_log_count(t->a, "refused finally", 2));

	T_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
	csictl_expect_ok(&t->r);
	csictl_runner_free(&t->rn, &t->r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_node_expand_online_and_offline,
					    claim_env_cmocka_setup, claim_env_cmocka_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
