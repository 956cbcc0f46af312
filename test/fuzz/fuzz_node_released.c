/*
 * Fuzz target: the released allocations of a server's answer to an
 * agent's PUT /v1/node/<node> (server_link_released_parse). Every entry
 * taken must name a volume and an allocation that pass the mount name
 * check, with a note of at most SERVER_LINK_NOTE_MAX bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/mount_paths.h"
#include "agent/server_link.h"
#include "util/arena.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct server_link_released *r = NULL;
	struct arena *a = arena_new();
	size_t n = 0;
	struct err e;

	if (!a)
		return 0;
	err_clear(&e);
	if (server_link_released_parse((const char *)data, size, a, &r, &n, &e) == 0) {
		if (n > SERVER_LINK_RELEASED_MAX || (n && !r))
			abort();
		for (size_t i = 0; i < n; i++)
			if (mount_name_check("volume id", r[i].volume_id, &e) ||
			    mount_name_check("alloc id", r[i].alloc_id, &e) ||
			    strlen(r[i].note) > SERVER_LINK_NOTE_MAX)
				abort();
	}
	arena_free(a);
	return 0;
}
