/*
 * csi-hostpath's fault injection, seen from a real gRPC client: a delay
 * past the client's deadline gives DEADLINE_EXCEEDED; an injected code
 * reaches the client with its message; Probe can report not ready; a
 * hang holds a call until the script changes; a crash gives UNAVAILABLE
 * and the same client works again once the plugin is restarted (a crash
 * after the call took effect keeps that effect, one before it leaves
 * nothing); a plugin
 * stopped while a call hangs still exits cleanly.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "hostpath_proc.h"

struct fx {
	struct hpp_proc h;
	struct hpp_client cl;
};

static int teardown(void **state);

static int setup(void **state)
{
	static struct fx f;

	memset(&f, 0, sizeof(f));
	*state = &f;
	/* cmocka skips a test's teardown when its setup fails: clean up here. */
	if (hpp_proc_start(&f.h, NULL) != 0 || hpp_client_open(&f.cl, f.h.endpoint) != 0)
		goto fail;
	return 0;
fail:
	teardown(state);
	return -1;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	hpp_client_close(&f->cl);
	hpp_proc_cleanup(&f->h);
	return 0;
}

static int info(struct fx *f, int timeout_ms)
{
	Csi__V1__GetPluginInfoRequest r = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;

	return hpp_client_call(&f->cl, CSI_RPC_GET_PLUGIN_INFO, &r, NULL, timeout_ms);
}

static void test_delay_past_deadline(void **state)
{
	struct fx *f = *state;
	int64_t t0;

	assert_int_equal(hpp_write_file(f->h.faults, "GetPluginInfo delay_ms=1500\n"), 0);
	t0 = hpp_now_ms();
	assert_int_equal(info(f, 200), CSI_DEADLINE_EXCEEDED);
	assert_true(hpp_now_ms() - t0 < 1400);
	/* With enough time the delayed call succeeds. */
	assert_int_equal(info(f, 5000), CSI_OK);
	assert_int_equal(hpp_write_file(f->h.faults, ""), 0);
	assert_int_equal(info(f, 1000), CSI_OK);
}

static void test_codes_and_probe(void **state)
{
	struct fx *f = *state;
	Csi__V1__NodeGetInfoRequest nr = CSI__V1__NODE_GET_INFO_REQUEST__INIT;
	Csi__V1__ProbeRequest pr = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *probe;

	assert_int_equal(hpp_write_file(f->h.faults, "NodeGetInfo nth=2 code=ABORTED msg=\"busy\"\n"
						     "Probe ready=false\n"),
			 0);
	assert_int_equal(hpp_client_call(&f->cl, CSI_RPC_NODE_GET_INFO, &nr, NULL, 0), CSI_OK);
	assert_int_equal(hpp_client_call(&f->cl, CSI_RPC_NODE_GET_INFO, &nr, NULL, 0), CSI_ABORTED);
	assert_string_equal(f->cl.st.message, "busy");
	assert_int_equal(hpp_client_call(&f->cl, CSI_RPC_NODE_GET_INFO, &nr, NULL, 0), CSI_OK);
	assert_int_equal(hpp_client_call(&f->cl, CSI_RPC_PROBE, &pr, &probe, 0), CSI_OK);
	assert_non_null(probe->ready);
	assert_false(probe->ready->value);
}

static void test_hang(void **state)
{
	struct fx *f = *state;

	assert_int_equal(hpp_write_file(f->h.faults, "GetPluginInfo hang\n"), 0);
	assert_int_equal(info(f, 300), CSI_DEADLINE_EXCEEDED);
	assert_int_equal(hpp_write_file(f->h.faults, "# released\n"), 0);
	assert_int_equal(info(f, 2000), CSI_OK);
	/* A stop while a call hangs still ends the process cleanly and quickly. */
	assert_int_equal(hpp_write_file(f->h.faults, "GetPluginInfo hang\n"), 0);
	assert_int_equal(info(f, 200), CSI_DEADLINE_EXCEEDED);
	assert_int_equal(hpp_proc_kill(&f->h, SIGTERM), 0);
}

static void test_crash_and_restart(void **state)
{
	struct fx *f = *state;
	int status;

	assert_int_equal(info(f, 2000), CSI_OK);
	assert_int_equal(hpp_write_file(f->h.faults, "GetPluginInfo nth=1 crash\n"), 0);
	assert_int_equal(info(f, 5000), CSI_UNAVAILABLE);
	status = hpp_proc_wait_exit(&f->h, 5000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 137);
	/* While the plugin is down the client reports UNAVAILABLE, not a hang. */
	assert_int_equal(info(f, 2000), CSI_UNAVAILABLE);
	assert_int_equal(hpp_write_file(f->h.faults, ""), 0);
	assert_int_equal(hpp_proc_restart(&f->h, NULL), 0);
	/* The same client (and channel) works again. */
	assert_int_equal(hpp_client_wait_ready(&f->cl, 10000), 0);
	assert_int_equal(info(f, 2000), CSI_OK);
}

static void test_crash_after_commit(void **state)
{
	struct fx *f = *state;
	char id[64], again[64];
	int status;

	/* The call takes effect, then the plugin dies before answering. */
	assert_int_equal(hpp_write_file(f->h.faults, "CreateVolume nth=1 crash=after\n"), 0);
	assert_int_equal(hpp_create(&f->cl.caller, "v", 1 << 20, 0, false, id), CSI_UNAVAILABLE);
	status = hpp_proc_wait_exit(&f->h, 5000);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 137);
	assert_int_equal(hpp_write_file(f->h.faults, ""), 0);
	assert_int_equal(hpp_proc_restart(&f->h, NULL), 0);
	assert_int_equal(hpp_client_wait_ready(&f->cl, 10000), 0);
	/* The CO retries: the volume exists and the retry answers it. */
	assert_int_equal(hpp_create(&f->cl.caller, "v", 1 << 20, 0, false, id), CSI_OK);
	assert_int_equal(hpp_create(&f->cl.caller, "v", 1 << 20, 0, false, again), CSI_OK);
	assert_string_equal(id, again);
	/* A crash before the call leaves nothing behind. */
	assert_int_equal(hpp_write_file(f->h.faults, "DeleteVolume crash\n"), 0);
	assert_int_equal(hpp_delete(&f->cl.caller, id), CSI_UNAVAILABLE);
	status = hpp_proc_wait_exit(&f->h, 5000);
	assert_int_equal(WEXITSTATUS(status), 137);
	assert_int_equal(hpp_write_file(f->h.faults, ""), 0);
	assert_int_equal(hpp_proc_restart(&f->h, NULL), 0);
	assert_int_equal(hpp_client_wait_ready(&f->cl, 10000), 0);
	assert_int_equal(hpp_create(&f->cl.caller, "v", 1 << 20, 0, false, again), CSI_OK);
	assert_string_equal(id, again);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_delay_past_deadline, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_codes_and_probe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hang, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_and_restart, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_crash_after_commit, setup, teardown),
	};
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	csi_grpc_shutdown();
	return rc;
}
