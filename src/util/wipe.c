/*
 * Zeroing frees (see wipe.h). The size of a block is the allocator's
 * usable size, which covers every byte a caller could have written.
 */
#include "util/wipe.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static void (*wipe_fn)(const void *p, size_t n, int zeroed, void *ctx);
static void *wipe_ctx;

void wipe(void *p, size_t n)
{
	if (wipe_fn)
		wipe_fn(p, n, 0, wipe_ctx);
	explicit_bzero(p, n);
	if (wipe_fn)
		wipe_fn(p, n, 1, wipe_ctx);
}

void wipe_free(void *p)
{
	if (!p)
		return;
	wipe(p, malloc_usable_size(p));
	free(p);
}

void wipe_json_install(void)
{
	json_set_alloc_funcs(malloc, wipe_free);
}

void wipe_observe(void (*fn)(const void *p, size_t n, int zeroed, void *ctx), void *ctx)
{
	wipe_fn = fn;
	wipe_ctx = ctx;
}
