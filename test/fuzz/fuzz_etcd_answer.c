/*
 * Fuzz target for what etcd (or whatever answers on its port) sends the
 * etcd store: the input is decoded as protobuf the way the store decodes
 * etcd's gRPC answers, as a range page, as a transaction's outcome and as
 * a watch message into the change log and the read cache
 * (store_etcd_decode). Nothing may crash, leak or read out of bounds, and
 * every change the log took must have reached the cache.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "store/store.h"
#include "util/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct err e;

	/* Malformed answers are logged by the watch; the fuzz run need not read them. */
	log_set_level(LOG_ERROR);
	if (store_etcd_decode("/csid/", data, size, &e) == CSID_EINTERNAL)
		abort();
	return 0;
}
