/*
 * Fuzz target for the text the mounter reads: /proc/self/mountinfo
 * (mountinfo_parse, then lookups in the set it built) and the names of
 * volumes, allocations and plugins (mount_name_check_len on each line,
 * then path building for the names that pass, which must stay under the
 * data dir).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/mount_paths.h"
#include "agent/mountinfo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	struct mount_usage u = {.attachment = MOUNT_ATTACH_FILE_SYSTEM,
				.access = MOUNT_ACCESS_SINGLE_NODE_WRITER};
	struct mount_set s;
	struct err e;
	size_t pos = 0;

	if (mountinfo_parse(text, size, &s, &e) == 0) {
		for (size_t i = 0; i < s.n; i++) {
			if (s.paths[i][0] != '/' || !mount_set_has(&s, s.paths[i]))
				abort();
			if (i > 0 && strcmp(s.paths[i - 1], s.paths[i]) >= 0)
				abort();
		}
		mount_set_clear(&s);
	}
	while (pos < size) {
		const char *line = text + pos;
		const char *nl = memchr(line, '\n', size - pos);
		size_t len = nl ? (size_t)(nl - line) : size - pos;
		char name[MOUNT_NAME_MAX + 1];
		char path[4096];

		pos += len + 1;
		if (mount_name_check_len("name", line, len, &e) != 0)
			continue;
		memcpy(name, line, len);
		name[len] = '\0';
		if (strchr(name, '/') != NULL || strstr(name, "..") != NULL)
			abort();
		if (mount_target_path("/data", name, name, &u, path, sizeof(path), &e) != 0 ||
		    strncmp(path, "/data/mounts/per-alloc/", 23) != 0)
			abort();
	}
	return 0;
}
