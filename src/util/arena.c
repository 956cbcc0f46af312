/*
 * Arena: a list of chunks, each at least 4 KiB; large requests get a chunk
 * of their own. Freed in one pass.
 *
 * A thread keeps up to ARENA_SPARE freed chunks of the usual size for its
 * next arenas: a request's arenas took and gave back several 4 KiB blocks,
 * each past glibc's per-thread cache (1 KiB) and so through its locked
 * bins (bench_server: malloc and free were ~10% of the server's CPU). A
 * chunk may be given back by another thread than took it; the spares go
 * with their thread (a pthread key's destructor).
 */
#include "util/arena.h"
#include "util/wipe.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK 4096
#define ARENA_ALIGN 16
#define ARENA_SPARE 8

struct arena_chunk {
	struct arena_chunk *next;
	size_t size;
	size_t used;
	_Alignas(ARENA_ALIGN) unsigned char data[];
};

struct arena {
	struct arena_chunk *head;
};

struct arena_spares {
	struct arena_chunk *head;
	unsigned n;
	bool keyed; /* the key's destructor will free them */
};

static _Thread_local struct arena_spares arena_spares;
static pthread_key_t arena_key;
static pthread_once_t arena_key_once = PTHREAD_ONCE_INIT;
static bool arena_key_ok;

static void arena_spares_drop(void *arg)
{
	struct arena_spares *sp = arg;
	struct arena_chunk *c, *next;

	for (c = sp->head; c; c = next) {
		next = c->next;
		free(c);
	}
	sp->head = NULL;
	sp->n = 0;
	sp->keyed = false;
}

static void arena_key_init(void)
{
	arena_key_ok = pthread_key_create(&arena_key, arena_spares_drop) == 0;
}

/* Keeps c, of the usual size, as a spare of this thread, or frees it. */
static void arena_spare_put(struct arena_chunk *c)
{
	struct arena_spares *sp = &arena_spares;

	if (sp->n >= ARENA_SPARE || c->size != ARENA_CHUNK) {
		free(c);
		return;
	}
	if (!sp->keyed) {
		pthread_once(&arena_key_once, arena_key_init);
		if (!arena_key_ok || pthread_setspecific(arena_key, sp) != 0) {
			free(c);
			return;
		}
		sp->keyed = true;
	}
	c->next = sp->head;
	sp->head = c;
	sp->n++;
}

/* A chunk of csize bytes: a spare of this thread when csize is the usual size. */
static struct arena_chunk *arena_chunk_take(size_t csize)
{
	struct arena_spares *sp = &arena_spares;
	struct arena_chunk *c = sp->head;

	if (csize == ARENA_CHUNK && c) {
		sp->head = c->next;
		sp->n--;
	} else if (!(c = malloc(sizeof(*c) + csize))) {
		return NULL;
	}
	c->size = csize;
	c->used = 0;
	return c;
}

struct arena *arena_new(void)
{
	/* malloc, not calloc: glibc's calloc passes its per-thread cache by. */
	struct arena *a = malloc(sizeof(*a));

	if (a)
		a->head = NULL;
	return a;
}

void arena_free(struct arena *a)
{
	struct arena_chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		arena_spare_put(c);
	}
	free(a);
}

void arena_wipe_free(struct arena *a)
{
	if (!a)
		return;
	for (struct arena_chunk *c = a->head; c; c = c->next)
		wipe(c->data, c->used);
	arena_free(a);
}

/* size bytes aligned for any type, not zeroed, or NULL when out of memory. */
static void *arena_raw(struct arena *a, size_t size)
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
		c = arena_chunk_take(csize);
		if (!c)
			return NULL;
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
	return p;
}

void *arena_alloc(struct arena *a, size_t size)
{
	void *p = arena_raw(a, size);

	if (p)
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
	d = arena_raw(a, n);
	if (d)
		memcpy(d, s, n);
	return d;
}

char *arena_printf(struct arena *a, const char *fmt, ...)
{
	struct arena_chunk *c = a->head;
	size_t room = c ? c->size - c->used : 0;
	va_list ap;
	char *d;
	int n;

	/* Straight into the head chunk's room when it fits (one pass, not two). */
	va_start(ap, fmt);
	n = vsnprintf(room ? (char *)c->data + c->used : NULL, room, fmt, ap);
	va_end(ap);
	if (n < 0)
		return NULL;
	if ((size_t)n < room)
		return arena_raw(a, (size_t)n + 1);
	d = arena_raw(a, (size_t)n + 1);
	if (!d)
		return NULL;
	va_start(ap, fmt);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return d;
}
