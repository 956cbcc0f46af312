/*
 * Fuzz target: a request of the Docker volume plugin protocol
 * (docker_plugin_decode) and, for a Create, its options turned into a
 * volume spec (docker_opts_spec). The first input byte picks the call's
 * path (one of the protocol's, or an unknown one), the rest is the body.
 * A decoded request must carry what its call needs; a spec must name the
 * volume and a plugin and never take an option that looks like a secret;
 * every refusal must say why.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/docker_opts.h"
#include "api/docker_plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const fuzz_paths[] = {
    "/Plugin.Activate",    "/VolumeDriver.Create",  "/VolumeDriver.Remove",
    "/VolumeDriver.Mount", "/VolumeDriver.Unmount", "/VolumeDriver.Path",
    "/VolumeDriver.Get",   "/VolumeDriver.List",    "/VolumeDriver.Capabilities",
    "/VolumeDriver.Nope",
};

static void fuzz_check_spec(const struct docker_plugin_req *r)
{
	const char *plugins[] = {"hostpath.csi.csid.dev"};
	const char *key;
	json_t *spec = NULL, *v;
	bool reg = false;
	struct err e;

	err_clear(&e);
	if (docker_opts_spec(r->name, r->opts, plugins, 1, &spec, &reg, &e) != 0) {
		if (e.code == 0 || !e.msg[0] || spec)
			abort();
		return;
	}
	if (!spec || strcmp(json_string_value(json_object_get(spec, "id")), r->name) != 0 ||
	    !json_string_value(json_object_get(spec, "plugin_id")) ||
	    reg != (json_object_get(r->opts, "external-id") != NULL))
		abort();
	json_object_foreach(r->opts, key, v)
	{
		if (strstr(key, "secret") || strstr(key, "password") || strstr(key, "token"))
			abort();
	}
	json_decref(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct docker_plugin_req r;
	const char *path;
	struct err e;
	int rc;

	if (size < 1)
		return 0;
	path = fuzz_paths[data[0] % (sizeof(fuzz_paths) / sizeof(fuzz_paths[0]))];
	err_clear(&e);
	rc = docker_plugin_decode(path, (const char *)data + 1, size - 1, &r, &e);
	if (rc != 0) {
		if (e.code == 0 || !e.msg[0] || r.doc)
			abort();
		return 0;
	}
	if (!r.doc || (r.op == DOCKER_PLUGIN_MOUNT && (!r.name || !r.id)) ||
	    (r.op == DOCKER_PLUGIN_UNMOUNT && (!r.name || !r.id)) ||
	    (r.op == DOCKER_PLUGIN_CREATE && !r.name) || (r.opts && !json_is_object(r.opts)))
		abort();
	if (r.op == DOCKER_PLUGIN_CREATE)
		fuzz_check_spec(&r);
	docker_plugin_req_clear(&r);
	return 0;
}
