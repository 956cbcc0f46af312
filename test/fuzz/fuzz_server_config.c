/*
 * Fuzz target: the server configuration parser. Any input gives either a
 * valid config or a clear error (a code and a message); never a crash, a
 * leak or a hang. A config that parses is also overridden and finalized,
 * and its plugin IDs and listen address are checked again, so the code
 * that consumes a parsed config sees fuzzed values too.
 */
#include <stdint.h>
#include <stdlib.h>

#include "model/model.h"
#include "server/server_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct server_config_file *cfg = NULL;
	struct err e;

	err_clear(&e);
	if (server_config_parse((const char *)data, size, &cfg, &e) != 0) {
		if (e.code == 0 || !e.msg[0] || cfg)
			abort();
		return 0;
	}
	for (size_t i = 0; i < cfg->nplugins; i++) {
		const struct config_plugin *p = &cfg->plugins[i];

		if (model_plugin_id_check(p->id, &e) != 0 ||
		    config_plugin_check_id("id", p->id, &e) != 0 || (!p->socket == !p->command))
			abort();
	}
	if (cfg->listen && cfg->listen[0] && server_config_check_listen("listen", cfg->listen, &e))
		abort();
	if (server_config_override(cfg, "/tmp/fuzz", NULL, NULL, NULL, &e) != 0 ||
	    server_config_finalize(cfg, &e) != 0)
		abort();
	server_config_free(cfg);
	return 0;
}
