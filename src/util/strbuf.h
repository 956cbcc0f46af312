/*
 * A growable, capped, NUL-terminated byte buffer: the one way an HTTP
 * answer is gathered (the server's agent client, the agent's server
 * client, csictl). strbuf_write has the shape of a libcurl write
 * callback, so it is passed to CURLOPT_WRITEFUNCTION as is.
 */
#ifndef CSID_UTIL_STRBUF_H
#define CSID_UTIL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
	char *p; /* NULL until the first byte; NUL-terminated after */
	size_t len;
	size_t max; /* the cap, set by the caller before the first write */
	size_t cap; /* bytes allocated at p */
	bool too_big; /* a write was refused because of max */
};

/*
 * Appends size * n bytes of data to the strbuf sb. Returns the count
 * appended, or 0 when it would pass max (too_big is set) or memory ran out.
 */
size_t strbuf_write(char *data, size_t size, size_t n, void *sb);
/*
 * Zeroes and frees the bytes and empties b (max is kept). An answer may
 * hold secrets (node-stage data): every copy the buffer made while it
 * grew was zeroed too.
 */
void strbuf_free(struct strbuf *b);

#endif
