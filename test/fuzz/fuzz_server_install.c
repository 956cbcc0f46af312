/*
 * Fuzz target: an installation record as read from the store
 * (server_install_decode), whatever another program left under the
 * prefix. Any input decodes or is refused with a message; a record that
 * decodes encodes again to one that decodes the same.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "server/server_install.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct server_install in, again;
	struct err e;
	size_t len;
	char *text;

	err_clear(&e);
	if (server_install_decode((const char *)data, size, &in, &e) != 0) {
		if (!e.msg[0])
			abort();
		return 0;
	}
	if (server_install_encode(&in, &text, &len, &e) != 0)
		abort();
	if (server_install_decode(text, len, &again, &e) != 0 || strcmp(in.id, again.id) != 0 ||
	    in.created_ms != again.created_ms || memcmp(&in.set, &again.set, sizeof(in.set)) != 0)
		abort();
	free(text);
	return 0;
}
