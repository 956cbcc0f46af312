/*
 * Unit tests of csi-hostpath's fault injection: the script parser (valid
 * scripts, every kind of bad line), rule matching by call count, and the
 * effects through hp_handle with a watched script file: error codes at
 * the Nth call, Probe not ready, delays, a hang released by rewriting the
 * script or by shutdown. Crashes are checked against the real binary in
 * test/integration/test_hostpath_faults.c.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "cmd/csi-hostpath/hp_faults.h"
#include "hostpath_proc.h"

struct fixture {
	struct hpp_inproc t;
	char script[128];
};

static int setup(void **state)
{
	static struct fixture f;
	struct hp_config cfg = {.controller_publish = true};

	/* The script lives in the plugin's temp dir, known once it started. */
	if (hpp_inproc_start(&f.t, &cfg) != 0)
		return -1;
	snprintf(f.script, sizeof(f.script), "%s/faults", f.t.dir);
	cfg.faults_path = f.script;
	if (hpp_inproc_restart(&f.t, &cfg) != 0)
		return -1;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	hpp_inproc_stop(&f->t);
	return 0;
}

static int parse(const char *text, struct hp_faults **out, struct err *e)
{
	return hp_faults_parse(text, strlen(text), out, e);
}

static void test_parse_valid(void **state)
{
	struct hp_faults *f = NULL;
	struct err e;
	const char *script = "# a comment\n"
			     "\n"
			     "NodeStageVolume nth=2 code=ABORTED msg=\"busy \\\"now\\\"\"\r\n"
			     "   Probe ready=false\n"
			     "CreateVolume delay_ms=2000\n"
			     "NodePublishVolume hang\n"
			     "DeleteVolume nth=3 times=0 crash\n"
			     "* code=14\n"
			     "DeleteSnapshot crash=after";

	assert_int_equal(parse(script, &f, &e), 0);
	assert_int_equal(hp_faults_rules(f), 7);
	hp_faults_free(f);
	assert_int_equal(parse("", &f, &e), 0);
	assert_int_equal(hp_faults_rules(f), 0);
	hp_faults_free(f);
}

static void test_parse_errors(void **state)
{
	const char *bad[] = {
	    "NoSuchMethod code=ABORTED",
	    "CreateVolume code=NOPE",
	    "CreateVolume code=0",
	    "CreateVolume code=17",
	    "CreateVolume nth=0",
	    "CreateVolume nth=-1",
	    "CreateVolume delay_ms=99999999999",
	    "CreateVolume msg=\"unterminated",
	    "CreateVolume colour=red",
	    "CreateVolume hang=yes",
	    "CreateVolume ready=false",
	    "Probe ready=maybe",
	    "CreateVolume=1",
	    "CreateVolume crash=sometimes",
	};
	struct hp_faults *f = NULL;
	char big[2000];
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(parse(bad[i], &f, &e), CSID_EINVAL);
		assert_non_null(strstr(e.msg, "line 1"));
	}
	assert_int_equal(parse("Probe\nProbe\nCreateVolume bogus\n", &f, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "line 3"));
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(parse(big, &f, &e), CSID_EINVAL);
	assert_int_equal(hp_faults_parse("Probe\0 hang", 11, &f, &e), CSID_EINVAL);
}

static void test_match(void **state)
{
	struct hp_faults *f = NULL;
	struct hp_fault_action act;
	struct err e;

	assert_int_equal(parse("CreateVolume nth=2 times=2 code=ABORTED msg=busy\n"
			       "CreateVolume delay_ms=5\n"
			       "* nth=3 delay_ms=9\n"
			       "Probe ready=false\n",
			       &f, &e),
			 0);
	hp_faults_match(f, CSI_RPC_CREATE_VOLUME, &act);
	assert_int_equal(act.code, 0);
	assert_int_equal(act.delay_ms, 5);
	hp_faults_match(f, CSI_RPC_CREATE_VOLUME, &act);
	assert_int_equal(act.code, CSI_ABORTED);
	assert_string_equal(act.msg, "busy");
	hp_faults_match(f, CSI_RPC_CREATE_VOLUME, &act);
	assert_int_equal(act.code, CSI_ABORTED);
	assert_int_equal(act.delay_ms, 9);
	hp_faults_match(f, CSI_RPC_CREATE_VOLUME, &act);
	assert_int_equal(act.code, 0);
	/* Other methods count on their own. */
	hp_faults_match(f, CSI_RPC_DELETE_VOLUME, &act);
	assert_int_equal(act.delay_ms, 0);
	hp_faults_match(f, CSI_RPC_PROBE, &act);
	assert_int_equal(act.ready, 0);
	assert_false(act.hang);
	assert_int_equal(act.crash, HP_CRASH_NONE);
	hp_faults_free(f);
}

static void test_codes_and_probe(void **state)
{
	struct fixture *f = *state;
	Csi__V1__ProbeRequest pr = CSI__V1__PROBE_REQUEST__INIT;
	Csi__V1__ProbeResponse *probe;

	assert_int_equal(hpp_write_file(f->script, "CreateVolume nth=2 code=ABORTED msg=\"busy\"\n"
						   "Probe ready=false\n"),
			 0);
	assert_int_equal(hpp_create(&f->t.caller, "a", 1 << 20, 0, false, NULL), CSI_OK);
	assert_int_equal(hpp_create(&f->t.caller, "a", 1 << 20, 0, false, NULL), CSI_ABORTED);
	assert_string_equal(f->t.msg, "busy");
	assert_int_equal(hpp_create(&f->t.caller, "a", 1 << 20, 0, false, NULL), CSI_OK);
	assert_int_equal(hpp_call(&f->t, CSI_RPC_PROBE, &pr, &probe), CSI_OK);
	assert_false(probe->ready->value);
	/* A new script resets the counters; an unreadable one means no faults. */
	assert_int_equal(hpp_write_file(f->script, "CreateVolume code=UNAVAILABLE\n"), 0);
	assert_int_equal(hpp_create(&f->t.caller, "a", 1 << 20, 0, false, NULL), CSI_UNAVAILABLE);
	assert_int_equal(hpp_call(&f->t, CSI_RPC_PROBE, &pr, &probe), CSI_OK);
	assert_true(probe->ready->value);
	assert_int_equal(hpp_write_file(f->script, "CreateVolume bogus\n"), 0);
	assert_int_equal(hpp_create(&f->t.caller, "a", 1 << 20, 0, false, NULL), CSI_OK);
	unlink(f->script);
	assert_int_equal(hpp_create(&f->t.caller, "a", 1 << 20, 0, false, NULL), CSI_OK);
}

static void test_delay(void **state)
{
	struct fixture *f = *state;
	Csi__V1__GetPluginInfoRequest r = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;
	int64_t t0;

	assert_int_equal(hpp_write_file(f->script, "GetPluginInfo delay_ms=60\n"), 0);
	t0 = hpp_now_ms();
	assert_int_equal(hpp_call(&f->t, CSI_RPC_GET_PLUGIN_INFO, &r, NULL), CSI_OK);
	assert_true(hpp_now_ms() - t0 >= 60);
}

struct hang_call {
	struct fixture *f;
	struct hpp_inproc t; /* own arena for the call */
	int code;
	bool done;
};

static void *hang_thread(void *arg)
{
	struct hang_call *h = arg;
	Csi__V1__GetPluginInfoRequest r = CSI__V1__GET_PLUGIN_INFO_REQUEST__INIT;

	h->t.p = h->f->t.p;
	h->code = hpp_call(&h->t, CSI_RPC_GET_PLUGIN_INFO, &r, NULL);
	__atomic_store_n(&h->done, true, __ATOMIC_SEQ_CST);
	return NULL;
}

/* Waits up to ms for the hung call to return. */
static bool hang_wait(struct hang_call *h, int ms)
{
	int64_t deadline = hpp_now_ms() + ms;

	while (hpp_now_ms() < deadline) {
		if (__atomic_load_n(&h->done, __ATOMIC_SEQ_CST))
			return true;
		hpp_pause_ms(5);
	}
	return false;
}

static void test_hang(void **state)
{
	struct fixture *f = *state;
	struct hang_call h = {.f = f};
	pthread_t th;

	assert_int_equal(hpp_write_file(f->script, "GetPluginInfo hang\n"), 0);
	assert_int_equal(pthread_create(&th, NULL, hang_thread, &h), 0);
	assert_false(hang_wait(&h, 150));
	/* Rewriting the script releases the call, which then runs. */
	assert_int_equal(hpp_write_file(f->script, "# released\n"), 0);
	assert_true(hang_wait(&h, 5000));
	pthread_join(th, NULL);
	arena_free(h.t.a);
	assert_int_equal(h.code, CSI_OK);

	/* Shutdown releases a hung call with UNAVAILABLE. */
	memset(&h, 0, sizeof(h));
	h.f = f;
	assert_int_equal(hpp_write_file(f->script, "GetPluginInfo hang\n"), 0);
	assert_int_equal(pthread_create(&th, NULL, hang_thread, &h), 0);
	assert_false(hang_wait(&h, 100));
	hp_shutdown(f->t.p);
	assert_true(hang_wait(&h, 5000));
	pthread_join(th, NULL);
	arena_free(h.t.a);
	assert_int_equal(h.code, CSI_UNAVAILABLE);
}

static void test_crash_rules(void **state)
{
	struct hp_faults *f = NULL;
	struct hp_fault_action act;
	struct err e;

	/* The exit itself is checked against the real binary (integration test). */
	assert_int_equal(parse("DeleteVolume nth=2 crash\nCreateVolume crash=after\n", &f, &e), 0);
	hp_faults_match(f, CSI_RPC_DELETE_VOLUME, &act);
	assert_int_equal(act.crash, HP_CRASH_NONE);
	hp_faults_match(f, CSI_RPC_DELETE_VOLUME, &act);
	assert_int_equal(act.crash, HP_CRASH_BEFORE);
	hp_faults_match(f, CSI_RPC_CREATE_VOLUME, &act);
	assert_int_equal(act.crash, HP_CRASH_AFTER);
	hp_faults_free(f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_valid),
	    cmocka_unit_test(test_parse_errors),
	    cmocka_unit_test(test_match),
	    cmocka_unit_test_setup_teardown(test_codes_and_probe, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_delay, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_hang, setup, teardown),
	    cmocka_unit_test(test_crash_rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
