/*
 * Fuzz target for what etcd (or whatever answers on its port) sends the
 * etcd store: the input is read as a unary answer of the JSON gateway (a
 * range page, a transaction's outcome, an error document) and as the
 * watch stream, fed in chunks whose size the first byte picks, into the
 * change log and the read cache (store_etcd_decode). Nothing may crash,
 * leak or read out of bounds, and every change the log took must have
 * reached the cache.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t chunk = size > 0 ? data[0] % 16 : 0;
	char *text = malloc(size + 1);
	struct err e;

	/* Malformed answers are logged by the watch; the fuzz run need not read them. */
	log_set_level(LOG_ERROR);
	if (text == NULL)
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';
	if (store_etcd_decode("/csid/", text, size, chunk, &e) == CSID_EINTERNAL)
		abort();
	free(text);
	return 0;
}
