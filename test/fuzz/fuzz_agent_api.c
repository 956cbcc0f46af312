/*
 * Fuzz target: decoding of agent API requests. The input is split at its
 * first newline: the part before is used as a DELETE path
 * (/v1/agent/mounts/<vol>/<alloc>) and as the value of its force query
 * parameter, the rest as a PUT /v1/agent/mounts
 * body and as a PUT /v1/agent/volumes/<vol>/mount body (a claim). Either must decode or give a
 * clear error; a decoded request must hold only safe names and known modes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/agent_api.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_agent_api_path(const uint8_t *data, size_t n)
{
	char url[512], vol[MOUNT_NAME_MAX + 1], alloc[MOUNT_NAME_MAX + 1];
	bool force = false;
	struct err e;
	int rc;

	if (n >= sizeof(url))
		n = sizeof(url) - 1;
	memcpy(url, data, n);
	url[n] = '\0';
	err_clear(&e);
	/* The path line doubles as the value of ?force=. */
	rc = agent_api_parse_force(url, &force, &e);
	if (rc != 0 && (!e.msg[0] || force))
		abort();
	if (rc == 0 && force != (strcmp(url, "true") == 0 || strcmp(url, "1") == 0))
		abort();
	err_clear(&e);
	if (agent_api_parse_mount_path(url, vol, alloc, &e) != 0) {
		if (!e.msg[0])
			abort();
		return;
	}
	if (mount_name_check("volume", vol, &e) || mount_name_check("alloc", alloc, &e))
		abort();
}

/* A claim body: decodes, or a clear error; a decoded claim names a safe allocation. */
static void fuzz_agent_api_claim(const char *body, size_t len)
{
	struct agent_api_claim c;
	struct err e;

	err_clear(&e);
	if (agent_api_decode_claim(body, len, &c, &e) != 0) {
		if (!e.msg[0] || c.doc_ || c.req.alloc_id)
			abort();
		return;
	}
	if (mount_name_check("alloc", c.req.alloc_id, &e) ||
	    (c.req.owner && c.req.owner != &c.owner))
		abort();
	agent_api_claim_clear(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nl = memchr(data, '\n', size);
	const char *body = (const char *)data;
	struct agent_api_mount_req *r = NULL;
	size_t blen = size;
	struct err e;

	if (nl) {
		fuzz_agent_api_path(data, (size_t)(nl - data));
		body = (const char *)nl + 1;
		blen = size - (size_t)(nl - data) - 1;
	}
	fuzz_agent_api_claim(body, blen);
	err_clear(&e);
	if (agent_api_decode_mount(body, blen, &r, &e) != 0) {
		if (e.code == 0 || !e.msg[0] || r)
			abort();
		return 0;
	}
	if (mount_name_check("volume", r->req.volume_id, &e) ||
	    mount_name_check("alloc", r->req.alloc_id, &e) ||
	    mount_name_check("plugin", r->req.plugin_id, &e) || !r->req.external_id ||
	    !mount_access_name(r->req.usage.access) ||
	    !mount_attachment_name(r->req.usage.attachment))
		abort();
	for (size_t i = 0; i < r->req.n_secrets; i++)
		if (!r->req.secrets[i].key || !r->req.secrets[i].value)
			abort();
	agent_api_mount_req_free(r);
	return 0;
}
