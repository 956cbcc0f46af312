/*
 * Memory that held secrets is zeroed before it goes back to the allocator
 * (STYLE: secrets are zeroed after use everywhere they pass). wipe_free
 * zeroes a whole malloc'd block, its usable size included, so that a copy
 * anywhere in it (a parser's token buffer, an arena chunk) is gone too.
 * wipe_json_install makes every allocation of jansson (the JSON library)
 * freed that way: its lexer keeps the raw text of each token (a secret's
 * among them) in buffers that no caller can reach.
 */
#ifndef CSID_UTIL_WIPE_H
#define CSID_UTIL_WIPE_H

#include <stddef.h>

/* Zeroes n bytes at p (seen by wipe_observe as a block freed). */
void wipe(void *p, size_t n);
/* Zeroes the whole block p (from malloc) and frees it; NULL is a no-op. */
void wipe_free(void *p);
/*
 * Every jansson allocation freed with wipe_free from now on (process-wide,
 * idempotent; call before any JSON value exists, from main).
 */
void wipe_json_install(void);
/*
 * Test seam: fn sees each block wipe_free releases (or wipe zeroes) twice, before zeroing
 * (zeroed false: which copies of a secret pass here) and after (zeroed
 * true: nothing left), always before the free. NULL: none. Set it while
 * no other thread frees; fn may run on any thread.
 */
void wipe_observe(void (*fn)(const void *p, size_t n, int zeroed, void *ctx), void *ctx);

#endif
