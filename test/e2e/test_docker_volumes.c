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
 *   the container runs, and the restarted engine mounts the volume again;
 * - a mount namespace made while a volume was mounted (here a process
 *   unshared from the host, as a runtime sets up any container) holds
 *   copies of the agent's mounts of it: it never owns the next
 *   container's claim, and its exit unmounts nothing.
 *
 * Skipped (with the reason) only where no dockerd can start. Engines are
 * stopped and every mount, process and directory removed at teardown,
 * even when a test fails.
 */
#include <dirent.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bridge_env.h"
#include "proc_guard.h"

extern char **environ;

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
		/* By the exit status: Podman may lose a short-lived container's output. */
		const char *a[] = {
		    "run",        "--rm", "-v", "data:/data",
		    ENGINE_IMAGE, "sh",   "-c", "test \"$(cat /data/f)\" = hello-csid",
		    NULL};
		bridge_env_ok(t, 0, a);
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

/* Starts container name using vol on engine 0 (sleeping); its pid, the owner of its claim. */
static int t_run_user(struct bridge_env *t, const char *vol, const char *name)
{
	char spec[160];
	const char *run[] = {"run", "-d",         "--name", name,  "-v",
			     spec,  ENGINE_IMAGE, "sleep",  "600", NULL};
	struct t_owner_ctx w = {t->c.a[0], vol, 0};
	int pid;

	snprintf(spec, sizeof(spec), "%s:/data", vol);
	bridge_env_ok(t, 0, run);
	pid = engine_container_pid(&t->en[0], name);
	assert_true(pid > 0);
	/* The container's process becomes the owner of its claim. */
	assert_true(agent_proc_poll(t_owned, &w, CLUSTER_WAIT_MS));
	assert_int_equal(w.pid, pid);
	return pid;
}

/* Creates vol on engine 0 and starts container name using it (sleeping); its pid. */
static int t_start_user(struct bridge_env *t, const char *vol, const char *name)
{
	const char *create[] = {"volume", "create", "-d", t->plugin[0], vol, NULL};

	bridge_env_ok(t, 0, create);
	return t_run_user(t, vol, name);
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

/* The unshare command of t_foreign_namespace and its child (killed at teardown); 0: none. */
static pid_t t_unshare_pid, t_unshare_child;

/* Kills and reaps the unshare command, and its child (--kill-child, and here). */
static void t_unshare_stop(void)
{
	if (t_unshare_child > 0)
		kill(t_unshare_child, SIGKILL);
	if (t_unshare_pid > 0) {
		kill(t_unshare_pid, SIGKILL);
		waitpid(t_unshare_pid, NULL, 0);
		proc_guard_untrack(t_unshare_pid);
	}
	t_unshare_pid = t_unshare_child = 0;
}

struct t_foreign_ctx {
	pid_t child; /* the first process of the unshared namespaces, once found */
};

/* Whether unshare's child runs in a mount namespace of its own holding a copy of a staging mount.
 */
static bool t_foreign_ready(void *ctx)
{
	struct t_foreign_ctx *f = ctx;
	char path[96], mine[64] = "", its[64] = "", text[16384];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)t_unshare_pid,
		 (int)t_unshare_pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	f->child = n > 0 ? (pid_t)atoi(text) : 0;
	if (f->child <= 0)
		return false;
	t_unshare_child = f->child;
	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int)f->child);
	if (readlink("/proc/self/ns/mnt", mine, sizeof(mine) - 1) <= 0 ||
	    readlink(path, its, sizeof(its) - 1) <= 0 || strcmp(mine, its) == 0)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)f->child);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, text, sizeof(text) - 1) : -1;
	if (fd >= 0)
		close(fd);
	text[n > 0 ? n : 0] = '\0';
	return strstr(text, "/mounts/staging/") != NULL;
}

static void t_foreign_namespace(void **state)
{
	struct bridge_env *t = *state;
	struct t_owner_ctx w = {NULL, "copied", 0};
	struct t_foreign_ctx f = {0};
	char *argv[] = {(char *)"unshare",      (char *)"--mount",       (char *)"--pid",
			(char *)"--kill-child", (char *)"--propagation", (char *)"private",
			(char *)"sleep",        (char *)"600",           NULL};
	const char *rm[] = {"rm", "-f", "first", NULL};
	posix_spawn_file_actions_t fa;
	int pid, rc;

	BRIDGE_ENV_SKIP(t);
	w.a = t->c.a[0];
	t_start_user(t, "copied", "first");
	/* A namespace made now copies the volume's mounts (private: they stay). */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawnp(&t_unshare_pid, "unshare", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	assert_int_equal(rc, 0);
	proc_guard_track(t_unshare_pid);
	assert_true(agent_proc_poll(t_foreign_ready, &f, CLUSTER_WAIT_MS));
	/* The first container goes: unmounted here, the copies stay there. */
	bridge_env_ok(t, 0, rm);
	assert_true(agent_proc_poll(t_unmounted, &w, CLUSTER_WAIT_MS));
	/* The next container of the volume owns its claim (t_run_user checks), not the copy. */
	pid = t_run_user(t, "copied", "second");
	assert_int_not_equal(pid, f.child);
	/* The copy's holder exits: the container's mount stays. */
	t_unshare_stop();
	assert_false(agent_proc_poll(t_unmounted, &w, 3000));
}

static int t_foreign_teardown(void **state)
{
	t_unshare_stop();
	return bridge_env_teardown(state);
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
	    cmocka_unit_test_setup_teardown(t_foreign_namespace, bridge_env_setup_docker1,
					    t_foreign_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
