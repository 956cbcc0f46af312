/*
 * End to end: Docker mounts csid volumes through the agent's volume
 * plugin. A real `csid server`, real `csid agent`s (one per engine, each
 * a node) supervising csi-hostpath, and sandboxed dockerds (test/lib/
 * engine.h) that find the agents' plugin sockets in /run/docker/plugins
 * under names unique to this run:
 *
 * - create with a size, a container writes, a second reads; ls and
 *   inspect show the volume; rm deletes it and csi-hostpath holds none;
 * - two engines as two nodes: a single-node-writer volume in use on
 *   engine 1 makes `docker run` on engine 2 fail naming the holder, and
 *   succeed once the first container is gone;
 * - the container's process owns its claim: kill -9 of dockerd and of
 *   the container unmounts and releases, the claim's note saying "owner
 *   pid N exited"; kill -9 of dockerd alone keeps claim and mount while
 *   the container runs, and the restarted engine mounts the volume again.
 *
 * Skipped (with the reason) only where no dockerd can start. Engines are
 * stopped and every mount, process and directory removed at teardown,
 * even when a test fails.
 */
#include <dirent.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge_env.h"

struct t_mounts_ctx {
	struct agent_proc *a;
};

static bool t_no_records(void *ctx)
{
	struct t_mounts_ctx *w = ctx;
	json_t *doc = NULL;
	bool ok = agent_proc_http(w->a, "GET", "/v1/agent/mounts", NULL, &doc) == 200 &&
		  json_array_size(json_object_get(doc, "mounts")) == 0;

	json_decref(doc);
	return ok;
}

static void t_create_write_read_rm(void **state)
{
	struct bridge_env *t = *state;
	const char *none[] = {NULL};
	struct t_mounts_ctx w = {t->c.a[0]};
	char vols[AGENT_PROC_PATH + 16], expect[128];
	json_t *doc = NULL;

	BRIDGE_ENV_SKIP(t);
	{
		const char *a[] = {"volume", "create",   "-d",   t->plugin[0],
				   "--opt",  "size=10M", "data", NULL};
		bridge_env_ok(t, 0, a);
	}
	{
		const char *a[] = {"run",        "--rm", "-v", "data:/data",
				   ENGINE_IMAGE, "sh",   "-c", "echo hello-csid > /data/f",
				   NULL};
		bridge_env_ok(t, 0, a);
	}
	{
		const char *a[] = {"run",        "--rm", "-v",      "data:/data",
				   ENGINE_IMAGE, "cat",  "/data/f", NULL};
		bridge_env_ok(t, 0, a);
		assert_non_null(strstr(t->out, "hello-csid"));
	}
	{
		const char *a[] = {"volume", "ls", "--format", "{{.Driver}} {{.Name}}", NULL};
		bridge_env_ok(t, 0, a);
		snprintf(expect, sizeof(expect), "%s data", t->plugin[0]);
		assert_non_null(strstr(t->out, expect));
	}
	{
		const char *a[] = {"volume", "inspect", "data", NULL};
		bridge_env_ok(t, 0, a);
		assert_non_null(strstr(t->out, "\"state\": \"ready\""));
		assert_non_null(strstr(t->out, "\"capacity\": 10000000"));
		assert_non_null(strstr(t->out, "\"Scope\": \"global\""));
	}
	/* Both containers are gone: nothing mounted, every claim freed. */
	assert_true(agent_proc_poll(t_no_records, &w, CLUSTER_WAIT_MS));
	assert_true(cluster_wait_freed(&t->c, "data", none));
	{
		const char *a[] = {"volume", "rm", "data", NULL};
		bridge_env_ok(t, 0, a);
	}
	assert_int_equal(server_proc_http(&t->c.s, "GET", "/v1/volume/data", NULL, &doc), 404);
	json_decref(doc);
	snprintf(vols, sizeof(vols), "%s/volumes", t->c.a[0]->hp_dir);
	assert_int_equal(bridge_env_entries(vols), 0);
	assert_int_equal(agent_proc_mounts_under(t->c.a[0]->data_dir), 0);
}

static void t_two_nodes_single_writer(void **state)
{
	struct bridge_env *t = *state;
	const char *run2[] = {"run", "--rm", "-v", "shared:/data", ENGINE_IMAGE, "true", NULL};
	const char *none[] = {NULL};

	BRIDGE_ENV_SKIP(t);
	{
		const char *a[] = {"volume",     "create", "-d",
				   t->plugin[0], "--opt",  "access-mode=single-node-writer",
				   "shared",     NULL};
		bridge_env_ok(t, 0, a);
	}
	{
		/* Engine 2 learns the volume: the catalogue's, used as it is. */
		const char *a[] = {"volume", "create", "-d", t->plugin[1], "shared", NULL};
		bridge_env_ok(t, 1, a);
	}
	{
		const char *a[] = {"run",          "-d",         "--name", "holder", "-v",
				   "shared:/data", ENGINE_IMAGE, "sleep",  "600",    NULL};
		bridge_env_ok(t, 0, a);
	}
	/* Refused on node 2, naming the holder on node 1. */
	assert_int_not_equal(bridge_env_run(t, 1, run2), 0);
	assert_non_null(strstr(t->out, "node-1"));
	{
		const char *a[] = {"rm", "-f", "holder", NULL};
		bridge_env_ok(t, 0, a);
	}
	bridge_env_ok(t, 1, run2);
	assert_true(cluster_wait_freed(&t->c, "shared", none));
	{
		const char *a[] = {"volume", "rm", "shared", NULL};
		bridge_env_ok(t, 0, a);
	}
}

struct t_owner_ctx {
	struct agent_proc *a;
	const char *vol;
	int pid; /* the owner's pid once found */
};

/* Whether the agent shows a pid owner of a mount of w->vol (its pid in w->pid). */
static bool t_owned(void *ctx)
{
	struct t_owner_ctx *w = ctx;
	json_t *doc = NULL, *o;
	size_t i;

	w->pid = 0;
	if (agent_proc_http(w->a, "GET", "/v1/agent/owners", NULL, &doc) == 200)
		json_array_foreach(json_object_get(doc, "owners"), i, o)
		{
			const char *v = json_string_value(json_object_get(o, "volume_id"));

			if (v && strcmp(v, w->vol) == 0 &&
			    strcmp(json_string_value(json_object_get(o, "kind")), "pid") == 0)
				w->pid = (int)json_integer_value(json_object_get(o, "pid"));
		}
	json_decref(doc);
	return w->pid > 0;
}

/* Whether the agent holds no mount record of volume w->vol. */
static bool t_unmounted(void *ctx)
{
	struct t_owner_ctx *w = ctx;
	json_t *doc = NULL, *m;
	bool any = false;
	size_t i;

	if (agent_proc_http(w->a, "GET", "/v1/agent/mounts", NULL, &doc) != 200) {
		json_decref(doc);
		return false;
	}
	json_array_foreach(json_object_get(doc, "mounts"), i, m)
	{
		const char *v = json_string_value(json_object_get(m, "volume_id"));

		any = any || (v && strcmp(v, w->vol) == 0);
	}
	json_decref(doc);
	return !any;
}

/* Creates vol on engine 0 and starts container name using it (sleeping); its pid. */
static int t_start_user(struct bridge_env *t, const char *vol, const char *name)
{
	const char *create[] = {"volume", "create", "-d", t->plugin[0], vol, NULL};
	char spec[160];
	const char *run[] = {"run", "-d",         "--name", name,  "-v",
			     spec,  ENGINE_IMAGE, "sleep",  "600", NULL};
	struct t_owner_ctx w = {t->c.a[0], vol, 0};
	int pid;

	snprintf(spec, sizeof(spec), "%s:/data", vol);
	bridge_env_ok(t, 0, create);
	bridge_env_ok(t, 0, run);
	pid = engine_container_pid(&t->en[0], name);
	assert_true(pid > 0);
	/* The container's process becomes the owner of its claim. */
	assert_true(agent_proc_poll(t_owned, &w, CLUSTER_WAIT_MS));
	assert_int_equal(w.pid, pid);
	return pid;
}

static void t_engine_and_container_killed(void **state)
{
	struct bridge_env *t = *state;
	struct t_owner_ctx w = {NULL, "lost", 0};
	const char *none[] = {NULL};
	char why[64];
	int pid;

	BRIDGE_ENV_SKIP(t);
	w.a = t->c.a[0];
	pid = t_start_user(t, "lost", "user");
	/* Engine and container die together: no Unmount ever comes. */
	engine_docker_kill(&t->en[0]);
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_true(agent_proc_poll(t_unmounted, &w, CLUSTER_WAIT_MS));
	assert_true(cluster_wait_freed(&t->c, "lost", none));
	snprintf(why, sizeof(why), "owner pid %d exited", pid);
	assert_true(bridge_env_past_note(t, "lost", why));
}

static void t_engine_killed_alone(void **state)
{
	struct bridge_env *t = *state;
	struct t_owner_ctx w = {NULL, "kept", 0};
	const char *again[] = {"run", "--rm", "-v", "kept:/data", ENGINE_IMAGE, "true", NULL};
	json_t *v;
	int pid;

	BRIDGE_ENV_SKIP(t);
	w.a = t->c.a[0];
	pid = t_start_user(t, "kept", "user");
	engine_docker_kill(&t->en[0]);
	/* The container lives on: its claim and its mount stay (the owner is checked on an
	 * event of its pidfd; give a missed one the time of two checks). */
	assert_int_equal(kill(pid, 0), 0);
	assert_false(agent_proc_poll(t_unmounted, &w, 3000));
	v = cluster_volume(&t->c, "kept");
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 1);
	json_decref(v);
	/* The engine comes back and mounts the volume again. */
	assert_int_equal(engine_docker_restart(&t->en[0]), 0);
	bridge_env_ok(t, 0, again);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(t_create_write_read_rm, bridge_env_setup_docker1,
					    bridge_env_teardown),
	    cmocka_unit_test_setup_teardown(t_two_nodes_single_writer, bridge_env_setup_docker2,
					    bridge_env_teardown),
	    cmocka_unit_test_setup_teardown(t_engine_and_container_killed, bridge_env_setup_docker1,
					    bridge_env_teardown),
	    cmocka_unit_test_setup_teardown(t_engine_killed_alone, bridge_env_setup_docker1,
					    bridge_env_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
