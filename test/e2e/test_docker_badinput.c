/*
 * End to end: Podman through the agent's volume plugin, and bad input
 * from engines. A real `csid server` and agent with csi-hostpath, and a
 * sandboxed engine (test/lib/bridge_env.h):
 *
 * - Podman: create with `--driver`, a container writes, another reads;
 *   a running container killed -9 with its conmon (no Unmount comes):
 *   Podman's one mount of the volume is released once no container uses
 *   it, the claim's note saying so; rm deletes the volume;
 * - `docker volume create` refused with a clear message, nothing
 *   created: an unknown option, a secret as an option, size=0, a size
 *   past the plugin's capacity, names with '/', '..' or 300 bytes, a
 *   plugin that refuses CreateVolume, a server that is down;
 * - the protocol spoken raw on the socket: an unknown call, malformed
 *   JSON, missing fields and wrong types, a body over the cap, each a
 *   JSON Err; a Mount racing a Remove of one volume leaves no claim,
 *   mount or volume behind.
 */
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <curl/curl.h>

#include "bridge_env.h"
#include "util/strbuf.h"

/* Nothing created: no volume in the catalogue, none in csi-hostpath. */
static void t_nothing_made(struct bridge_env *t)
{
	char vols[AGENT_PROC_PATH + 16];
	json_t *doc = NULL;

	assert_int_equal(server_proc_http(&t->c.s, "GET", "/v1/volumes", NULL, &doc), 200);
	assert_int_equal(json_array_size(json_object_get(doc, "volumes")), 0);
	json_decref(doc);
	snprintf(vols, sizeof(vols), "%s/volumes", t->c.a[0]->hp_dir);
	assert_int_equal(bridge_env_entries(vols), 0);
}

struct t_count {
	struct bridge_env *t;
	const char *vol;
	int want;
};

/* Whether the agent's mount records of volume w->vol number w->want. */
static bool t_pv_mounts(void *ctx)
{
	struct t_count *w = ctx;
	struct bridge_env *t = w->t;
	json_t *doc = NULL, *m;
	size_t i;
	int n = 0;

	if (agent_proc_http(t->c.a[0], "GET", "/v1/agent/mounts", NULL, &doc) != 200) {
		json_decref(doc);
		return false;
	}
	json_array_foreach(json_object_get(doc, "mounts"), i, m)
	{
		const char *v = json_string_value(json_object_get(m, "volume_id"));

		n += v && strcmp(v, w->vol) == 0;
	}
	json_decref(doc);
	return n == w->want;
}

static void t_podman(void **state)
{
	struct bridge_env *t = *state;
	const char *none[] = {NULL};
	const char *conmon[] = {"inspect", "--format", "{{.State.ConmonPid}}", "pu", NULL};
	struct t_count w = {t, "pk", 1};
	json_t *doc = NULL;
	int pid, cpid;

	BRIDGE_ENV_SKIP(t);
	{
		const char *a[] = {"volume", "create",  "--driver", t->plugin[0],
				   "--opt",  "size=5M", "pv",       NULL};
		bridge_env_ok(t, 0, a);
	}
	{
		const char *a[] = {
		    "run",      "--rm",       "--network", "none", "-v",
		    "pv:/data", ENGINE_IMAGE, "sh",        "-c",   "echo from-podman > /data/f",
		    NULL};
		bridge_env_ok(t, 0, a);
	}
	{
		/*
		 * Checked by the exit status, not by the output: Podman now and
		 * then loses the output of a container this short-lived.
		 */
		const char *a[] = {"run",        "--rm",
				   "--network",  "none",
				   "-v",         "pv:/data",
				   ENGINE_IMAGE, "sh",
				   "-c",         "test \"$(cat /data/f)\" = from-podman",
				   NULL};
		bridge_env_ok(t, 0, a);
	}
	{
		const char *a[] = {"volume", "rm", "pv", NULL};
		bridge_env_ok(t, 0, a);
	}
	assert_int_equal(server_proc_http(&t->c.s, "GET", "/v1/volume/pv", NULL, &doc), 404);
	json_decref(doc);
	t_nothing_made(t);
	{
		const char *a[] = {"volume", "create", "--driver", t->plugin[0], "pk", NULL};
		bridge_env_ok(t, 0, a);
	}
	/*
	 * A container and its conmon killed -9: no Unmount comes. Podman's one
	 * mount of the volume is released once no container uses it.
	 */
	{
		const char *a[] = {"run", "-d",       "--name",     "pu",    "--network", "none",
				   "-v",  "pk:/data", ENGINE_IMAGE, "sleep", "600",       NULL};
		bridge_env_ok(t, 0, a);
	}
	assert_true(agent_proc_poll(t_pv_mounts, &w, CLUSTER_WAIT_MS));
	/* The agent has seen the container use the mount. */
	assert_true(agent_proc_wait_log(t->c.a[0], "shared mount in use", 1, CLUSTER_WAIT_MS));
	pid = engine_container_pid(&t->en[0], "pu");
	assert_int_equal(bridge_env_run(t, 0, conmon), 0);
	cpid = atoi(t->out);
	assert_true(pid > 0 && cpid > 0);
	assert_int_equal(kill(cpid, SIGKILL), 0);
	assert_int_equal(kill(pid, SIGKILL), 0);
	w.want = 0;
	assert_true(agent_proc_poll(t_pv_mounts, &w, CLUSTER_WAIT_MS));
	assert_true(cluster_wait_freed(&t->c, "pk", none));
	assert_true(bridge_env_past_note(t, "pk", "no container uses the mount any more"));
	/*
	 * Podman still counts pu as running (its conmon is gone) and would
	 * wait on it: the volume is deleted through the server; the engine
	 * goes at teardown.
	 */
	assert_true(server_proc_http(&t->c.s, "DELETE", "/v1/volume/pk/delete", NULL, &doc) < 300);
	json_decref(doc);
	assert_true(
	    server_proc_wait_doc(&t->c.s, "/v1/volume/pk", server_proc_not_found, CLUSTER_WAIT_MS));
	t_nothing_made(t);
}

/* `docker volume create -d <plugin> [--opt opt] name` must fail with msg in its output. */
static void t_refused(struct bridge_env *t, const char *opt, const char *name, const char *msg)
{
	const char *with[] = {"volume", "create", "-d", t->plugin[0], "--opt", opt, name, NULL};
	const char *without[] = {"volume", "create", "-d", t->plugin[0], name, NULL};

	assert_int_not_equal(bridge_env_run(t, 0, opt ? with : without), 0);
	if (!strstr(t->out, msg))
		fail_msg("create %s %s: expected \"%s\" in: %s", opt ? opt : "", name, msg, t->out);
}

static void t_bad_create(void **state)
{
	struct bridge_env *t = *state;
	char long_name[301];

	BRIDGE_ENV_SKIP(t);
	memset(long_name, 'n', 300);
	long_name[300] = '\0';
	t_refused(t, "colour=red", "v1", "unknown option \"colour\" (known: plugin, size");
	t_refused(t, "secret.key=hunter2", "v1", "secrets are never taken as volume options");
	t_refused(t, "size=0", "v1", "option size: must be more than 0 bytes");
	t_refused(t, "size=100T", "v1", "exceed the plugin's capacity");
	t_refused(t, NULL, "a..b", "volume name \"a..b\"");
	t_refused(t, NULL, long_name, "volume name (300 bytes)");
	t_refused(t, NULL, "a/b", "a/b");
	assert_int_equal(agent_proc_write_faults(t->c.a[0], "CreateVolume code=PERMISSION_DENIED "
							    "msg=\"quota of tenant t1 used up\"\n"),
			 0);
	t_refused(t, "size=1M", "v1", "quota of tenant t1 used up");
	assert_int_equal(agent_proc_write_faults(t->c.a[0], ""), 0);
	assert_null(strstr(t->out, "hunter2"));
	t_nothing_made(t);
	/* The last: the server goes away. */
	assert_true(server_proc_stop(&t->c.s, SIGKILL, 10000) >= 0);
	t_refused(t, "size=1M", "v1", "no server answered");
}

/* ---- the protocol, raw ---- */

/* POST path with body on the plugin socket: the status, and the answer in *doc. */
static long t_post(struct bridge_env *t, const char *path, const char *body, size_t len,
		   json_t **doc)
{
	struct strbuf ans = {.max = 1 << 20};
	char url[256];
	CURL *c = curl_easy_init();
	long status = -1;

	*doc = NULL;
	snprintf(url, sizeof(url), "http://plugin%s", path);
	curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t->socket[0]);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)len);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, strbuf_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &ans);
	if (curl_easy_perform(c) == CURLE_OK) {
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		*doc = json_loadb(ans.p ? ans.p : "", ans.len, 0, NULL);
	}
	curl_easy_cleanup(c);
	strbuf_free(&ans);
	return status;
}

/* POSTs and expects status and an Err holding msg ("" for no error). */
static void t_expect(struct bridge_env *t, const char *path, const char *body, long status,
		     const char *msg)
{
	json_t *doc = NULL;
	long st = t_post(t, path, body, strlen(body), &doc);
	const char *err = json_string_value(json_object_get(doc, "Err"));

	if (st != status || !err || (msg[0] && !strstr(err, msg)) || (!msg[0] && err[0]))
		fail_msg("%s %s: status %ld, Err %s (expected %ld, \"%s\")", path, body, st,
			 err ? err : "(none)", status, msg);
	json_decref(doc);
}

struct t_race {
	struct bridge_env *t;
	json_t *doc;
};

static void *t_race_mount(void *arg)
{
	struct t_race *r = arg;
	static const char body[] = "{\"Name\": \"race\", \"ID\": \"m1\"}";

	t_post(r->t, "/VolumeDriver.Mount", body, strlen(body), &r->doc);
	return NULL;
}

static bool t_agent_idle(void *ctx)
{
	struct agent_proc *a = ctx;
	json_t *doc = NULL;
	bool ok = agent_proc_http(a, "GET", "/v1/agent/mounts", NULL, &doc) == 200 &&
		  json_array_size(json_object_get(doc, "mounts")) == 0;

	json_decref(doc);
	return ok;
}

static void t_raw_protocol(void **state)
{
	struct bridge_env *t = *state;
	static const char remove[] = "{\"Name\": \"race\"}";
	struct t_race r = {NULL, NULL};
	json_t *doc = NULL;
	pthread_t th;
	char *big;

	BRIDGE_ENV_SKIP(t);
	r.t = t;
	assert_int_equal(t_post(t, "/Plugin.Activate", "", 0, &doc), 200);
	assert_string_equal(
	    json_string_value(json_array_get(json_object_get(doc, "Implements"), 0)),
	    "VolumeDriver");
	json_decref(doc);
	assert_int_equal(t_post(t, "/VolumeDriver.Capabilities", "{}", 2, &doc), 200);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(doc, "Capabilities"), "Scope")),
	    "global");
	json_decref(doc);
	t_expect(t, "/VolumeDriver.Nope", "{}", 404, "no such call");
	t_expect(t, "/../etc/passwd", "{}", 404, "no such call");
	t_expect(t, "/VolumeDriver.Create", "{\"Name\": ", 200, "not JSON");
	t_expect(t, "/VolumeDriver.Create", "[1]", 200, "expected a JSON object");
	t_expect(t, "/VolumeDriver.Create", "{\"Name\": 7}", 200, "Name: expected a string");
	t_expect(t, "/VolumeDriver.Create", "{\"Name\": \"x\", \"Opts\": {\"size\": 1}}", 200,
		 "Opts.size: expected a string");
	t_expect(t, "/VolumeDriver.Mount", "{\"Name\": \"x\"}", 200, "ID: required");
	t_expect(t, "/VolumeDriver.Mount", "{\"Name\": \"x\", \"ID\": \"../../etc\"}", 200,
		 "mount ID");
	t_expect(t, "/VolumeDriver.Mount", "{\"Name\": \"nosuch\", \"ID\": \"m9\"}", 200, "nosuch");
	t_expect(t, "/VolumeDriver.Unmount", "{\"Name\": \"nosuch\", \"ID\": \"m9\"}", 200, "");
	t_expect(t, "/VolumeDriver.Get", "{\"Name\": \"nosuch\"}", 200, "not found");
	big = calloc(1, 200 * 1024 + 1);
	assert_non_null(big);
	memset(big, ' ', 200 * 1024);
	t_expect(t, "/VolumeDriver.Create", big, 413, "larger than");
	free(big);
	t_nothing_made(t);

	/* A Mount racing a Remove: one wins, nothing is left behind. */
	t_expect(t, "/VolumeDriver.Create", remove, 200, "");
	assert_int_equal(pthread_create(&th, NULL, t_race_mount, &r), 0);
	assert_int_equal(t_post(t, "/VolumeDriver.Remove", remove, strlen(remove), &doc), 200);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (json_string_value(json_object_get(doc, "Err"))[0]) {
		/* Mount first: the Remove names the holder; unmount, then remove. */
		assert_non_null(strstr(json_string_value(json_object_get(doc, "Err")), "m1"));
		assert_string_equal(json_string_value(json_object_get(r.doc, "Err")), "");
		t_expect(t, "/VolumeDriver.Unmount", "{\"Name\": \"race\", \"ID\": \"m1\"}", 200,
			 "");
		t_expect(t, "/VolumeDriver.Remove", remove, 200, "");
	} else {
		assert_non_null(strstr(json_string_value(json_object_get(r.doc, "Err")), "race"));
	}
	json_decref(doc);
	json_decref(r.doc);
	assert_true(agent_proc_poll(t_agent_idle, t->c.a[0], CLUSTER_WAIT_MS));
	t_nothing_made(t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_podman, bridge_env_setup_podman, bridge_env_teardown),
	    cmocka_unit_test_setup_teardown(t_bad_create, bridge_env_setup_docker1,
					    bridge_env_teardown),
	    cmocka_unit_test_setup_teardown(t_raw_protocol, bridge_env_setup_docker1,
					    bridge_env_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
