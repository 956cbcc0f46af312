/*
 * Capped growable buffer (see strbuf.h).
 */
#include "util/strbuf.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "util/wipe.h"

size_t strbuf_write(char *data, size_t size, size_t n, void *sb)
{
	struct strbuf *b = sb;
	size_t add = size * n;
	char *p;

	if (size && add / size != n)
		return 0;
	if (add > b->max || b->len > b->max - add) {
		b->too_big = true;
		return 0;
	}
	if (b->len + add + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;

		while (cap < b->len + add + 1)
			cap = cap > SIZE_MAX / 2 ? b->len + add + 1 : cap * 2;
		/* Not realloc: the old block is zeroed before it is freed. */
		p = malloc(cap);
		if (!p)
			return 0;
		if (b->p)
			memcpy(p, b->p, b->len);
		wipe_free(b->p);
		b->p = p;
		b->cap = cap;
	}
	p = b->p;
	memcpy(p + b->len, data, add);
	b->p = p;
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

void strbuf_free(struct strbuf *b)
{
	wipe_free(b->p);
	b->p = NULL;
	b->len = 0;
	b->cap = 0;
	b->too_big = false;
}
