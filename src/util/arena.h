/*
 * A bump allocator for short-lived object trees (one RPC's response, one
 * API request). Everything allocated from an arena is released at once by
 * arena_free(). Not thread-safe: one arena per call.
 */
#ifndef CSID_UTIL_ARENA_H
#define CSID_UTIL_ARENA_H

#include <stddef.h>

struct arena;

/* Returns NULL on allocation failure. */
struct arena *arena_new(void);
/* Releases every allocation; arena_free(NULL) is a no-op. */
void arena_free(struct arena *a);
/* The same, what every chunk held zeroed first (util/wipe.h): for arenas that held secrets. */
void arena_wipe_free(struct arena *a);
/* Zeroed memory aligned for any type, or NULL when out of memory. */
void *arena_alloc(struct arena *a, size_t size);
/* Copy of s (NULL gives NULL), or NULL when out of memory. */
char *arena_strdup(struct arena *a, const char *s);
/* printf into the arena. */
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
