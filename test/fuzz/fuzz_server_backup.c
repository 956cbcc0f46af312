/*
 * Fuzz target: a snapshot restore batch (POST /v1/operator/snapshot, the
 * file `csictl operator snapshot restore` reads), restored into an empty
 * memory store. Any input is either restored or refused with a clear
 * error that wrote nothing; never a crash, a leak or a hang.
 */
#include <stdint.h>
#include <stdlib.h>

#include "server/server_backup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct store *s = NULL;
	size_t n = 0;
	struct err e;
	int rc;

	if (store_mem_new(&s, &e) != 0)
		abort();
	err_clear(&e);
	rc = server_backup_restore(s, (const char *)data, size, &n, &e);
	if (rc != 0 && (e.code == 0 || !e.msg[0] || n != 0 || store_index(s) != 0))
		abort();
	if (rc == 0 && n > 0 && store_index(s) != 1)
		abort();
	store_close(s);
	return 0;
}
