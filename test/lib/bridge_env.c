/*
 * The volume plugin tests' fixture (bridge_env.h).
 */
#include "bridge_env.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static int bridge_env_setup(void **state, int n, bool podman)
{
	struct bridge_env *t = calloc(1, sizeof(*t));
	static int seq;

	*state = t;
	if (!t)
		return -1;
	t->n = n;
	for (int i = 0; i < n; i++) {
		int rc;

		snprintf(t->plugin[i], sizeof(t->plugin[i]), "csidt%dv%d", (int)getpid(), seq++);
		snprintf(t->socket[i], sizeof(t->socket[i]), "/run/docker/plugins/%s.sock",
			 t->plugin[i]);
		rc = podman ? engine_podman_start(&t->en[i], t->plugin[i], t->socket[i], t->why,
						  sizeof(t->why))
			    : engine_docker_start(&t->en[i], t->why, sizeof(t->why));
		if (rc == 1) {
			t->skip = true;
			return 0;
		}
		if (rc != 0)
			return -1;
		snprintf(t->extra[i], sizeof(t->extra[i]),
			 "\"docker_plugin\": {\"name\": \"%s\", \"socket\": \"%s\","
			 " \"engine_socket\": \"%s\"},",
			 t->plugin[i], t->socket[i], podman ? "" : t->en[i].sock);
		t->c.agent_extra[i] = t->extra[i];
	}
	return cluster_start(&t->c, n);
}

int bridge_env_setup_docker1(void **state)
{
	return bridge_env_setup(state, 1, false);
}

int bridge_env_setup_docker2(void **state)
{
	return bridge_env_setup(state, 2, false);
}

int bridge_env_setup_podman(void **state)
{
	return bridge_env_setup(state, 1, true);
}

int bridge_env_teardown(void **state)
{
	struct bridge_env *t = *state;

	if (!t)
		return 0;
	/* Engines first: their containers still hold the agents' mounts. */
	for (int i = 0; i < 2; i++)
		engine_stop(&t->en[i]);
	cluster_cleanup(&t->c);
	/* A killed agent leaves its plugin socket behind. */
	for (int i = 0; i < 2; i++)
		if (t->socket[i][0])
			unlink(t->socket[i]);
	free(t);
	return 0;
}

int bridge_env_run(struct bridge_env *t, int i, const char *const *args)
{
	int rc = engine_run(&t->en[i], t->out, sizeof(t->out), args);

	if (rc != 0)
		fprintf(stderr, "engine %d: exit %d: %s\n", i, rc, t->out);
	return rc;
}

void bridge_env_ok(struct bridge_env *t, int i, const char *const *args)
{
	int rc = bridge_env_run(t, i, args);

	if (rc != 0)
		cluster_dump_logs(&t->c, "engine command failed");
	assert_int_equal(rc, 0);
}

int bridge_env_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while (d && (de = readdir(d)))
		n += de->d_name[0] != '.';
	if (d)
		closedir(d);
	return n;
}

bool bridge_env_past_note(struct bridge_env *t, const char *vol, const char *needle)
{
	json_t *v = cluster_volume(&t->c, vol), *p;
	bool found = false;
	size_t i;

	json_array_foreach(json_object_get(v, "past_claims"), i, p)
	{
		const char *note = json_string_value(json_object_get(p, "note"));

		found = found || (note && strstr(note, needle));
	}
	json_decref(v);
	return found;
}
