/*
 * The claims end-to-end fixture (claim_env.h): the server's config, the
 * agent's config edited from agent_proc_hostpath_config's (controller
 * publish on, the servers and token, a fast heartbeat, a TCP listener),
 * the spec file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "claim_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int claim_env_setup(struct claim_env *t, const char *access_mode)
{
	char servers[512], listener[160];
	const char *edits[] = {"\"--no-controller-publish\", ",
			       "",
			       "\"plugin_log_max_bytes\": 65536,",
			       servers,
			       "\"stop_grace\": \"3s\"}",
			       "\"stop_grace\": \"3s\", \"heartbeat\": \"300ms\"}",
			       "\"node_name\": \"node-e2e\",",
			       listener,
			       NULL};
	int port = server_proc_free_port();
	FILE *f;

	if (port < 0 || server_proc_init(&t->s) != 0 ||
	    server_proc_write_config(
		&t->s,
		"{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"node_ttl\": \"30s\","
		" \"acl_tokens\": [{\"secret\": \"" CLAIM_ENV_TOKEN "\", \"write\": true}],"
		" \"agent_token\": \"" CLAIM_ENV_TOKEN "\", \"backoff_min\": \"20ms\","
		" \"backoff_max\": \"300ms\"}",
		NULL) != 0 ||
	    server_proc_start(&t->s) != 0 || !server_proc_wait_ready(&t->s, CLAIM_ENV_WAIT_MS)) {
		server_proc_dump_log(&t->s, "server setup failed");
		return -1;
	}
	http_client_token(t->s.http, CLAIM_ENV_TOKEN);
	snprintf(listener, sizeof(listener),
		 "\"node_name\": \"" CLAIM_ENV_NODE
		 "\", \"listener\": {\"addr\": \"127.0.0.1:%d\"},",
		 port);
	snprintf(servers, sizeof(servers),
		 "\"plugin_log_max_bytes\": 65536, \"servers\": [\"%s\"],"
		 " \"server_token\": \"" CLAIM_ENV_TOKEN "\",",
		 t->s.base);
	if (agent_proc_setup_hostpath(&t->a, edits) != 0)
		return -1;
	if (!server_proc_wait_plugin(&t->s, AGENT_PROC_HP_ID, CLAIM_ENV_WAIT_MS)) {
		server_proc_dump_log(&t->s, "plugin never healthy on the server");
		return -1;
	}
	t->rn.dir = t->s.dir;
	t->rn.deadline_ms = 120000;
	snprintf(t->server_env, sizeof(t->server_env), "CSID_ADDR=%s", t->s.base);
	snprintf(t->agent_env, sizeof(t->agent_env), "CSID_AGENT_ADDR=unix:%s",
		 ((struct agent_proc *)t->a)->sock);
	snprintf(t->spec, sizeof(t->spec), "%s/vol.json", t->s.dir);
	f = fopen(t->spec, "w");
	if (!f)
		return -1;
	fprintf(f,
		"{\"id\": \"data\", \"plugin_id\": \"" AGENT_PROC_HP_ID "\", \"capacity_min\": "
		"\"1MiB\", \"capabilities\": [{\"access_mode\": \"%s\","
		" \"attachment_mode\": \"file-system\"}]}\n",
		access_mode);
	return fclose(f) == 0 ? 0 : -1;
}

void claim_env_teardown(struct claim_env *t)
{
	csictl_runner_cleanup(&t->rn);
	agent_proc_teardown(&t->a);
	if (t->s.dir[0])
		assert_false(server_proc_log_has(&t->s, CLAIM_ENV_TOKEN));
	server_proc_cleanup(&t->s);
}

int claim_env_cmocka_setup(void **state)
{
	struct claim_env *t = calloc(1, sizeof(*t));

	*state = t;
	return t ? claim_env_setup(t, "single-node-single-writer") : -1;
}

int claim_env_cmocka_teardown(void **state)
{
	struct claim_env *t = *state;

	if (!t)
		return 0;
	claim_env_teardown(t);
	free(t);
	return 0;
}
