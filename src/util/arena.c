/*
 * Arena: a list of chunks, each at least 4 KiB; large requests get a chunk
 * of their own. Freed in one pass.
 */
#include "util/arena.h"
#include "util/wipe.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK 4096
#define ARENA_ALIGN 16

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	size_t used;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

struct arena {
	struct arena_chunk *head;
};

struct arena *arena_new(void)
{
	return calloc(1, sizeof(struct arena));
}

static void arena_release(struct arena *a, void (*release)(void *))
{
	struct arena_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		release(c);
	}
	free(a);
}

void arena_free(struct arena *a)
{
	arena_release(a, free);
}

void arena_wipe_free(struct arena *a)
{
	arena_release(a, wipe_free);
}

void *arena_alloc(struct arena *a, size_t size)
{
	struct arena_chunk *c = a->head;
	size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *p;

	if (need < size)
		return NULL;
	if (!c || c->size - c->used < need) {
		size_t csize = need > ARENA_CHUNK ? need : ARENA_CHUNK;

		if (csize > SIZE_MAX - sizeof(*c))
			return NULL;
		c = malloc(sizeof(*c) + csize);
		if (!c)
			return NULL;
		c->size = csize;
		c->used = 0;
		/* A big private chunk goes behind the head so the head keeps its room. */
		if (a->head && need > ARENA_CHUNK) {
			c->next = a->head->next;
			a->head->next = c;
		} else {
			c->next = a->head;
			a->head = c;
		}
	}
	p = c->data + c->used;
	c->used += need;
	memset(p, 0, size);
	return p;
}

char *arena_strdup(struct arena *a, const char *s)
{
	size_t n;
	char *d;

	if (!s)
		return NULL;
	n = strlen(s) + 1;
	d = arena_alloc(a, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	char *d;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	d = arena_alloc(a, (size_t)n + 1);
	if (!d)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return d;
}
