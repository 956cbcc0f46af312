/*
 * Capped growable buffer (see strbuf.h).
 */
#include "util/strbuf.h"

#include <stdlib.h>
#include <string.h>

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
	p = realloc(b->p, b->len + add + 1);
	if (!p)
		return 0;
	memcpy(p + b->len, data, add);
	b->p = p;
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

void strbuf_free(struct strbuf *b)
{
	free(b->p);
	b->p = NULL;
	b->len = 0;
	b->too_big = false;
}
