/*
 * Fuzz target: the agent configuration parser. Any input must give either
 * a valid config or a clear error; never a crash, a leak or a hang. A
 * config that parses is also finalized and its plugins expanded, so the
 * code that consumes a parsed config sees fuzzed values too.
 */
#include <stdint.h>
#include <stdlib.h>

#include "agent/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct config *cfg = NULL;
	struct err e;

	err_clear(&e);
	if (config_parse((const char *)data, size, &cfg, &e) != 0) {
		if (e.code == 0 || !e.msg[0])
			abort();
		return 0;
	}
	for (size_t i = 0; i < cfg->nplugins; i++) {
		struct config_plugin *p = &cfg->plugins[i];

		for (size_t j = 0; j < p->nargs; j++)
			free(config_plugin_expand(p->args[j], "unix:///tmp/x/csi.sock", "node"));
		for (size_t j = 0; j < p->nenv; j++)
			free(config_plugin_expand(p->env[j].value, "unix:///tmp/x/csi.sock",
						  "node"));
		if (config_plugin_check_id("id", p->id, &e) != 0)
			abort();
	}
	config_free(cfg);
	return 0;
}
