/* Base64 encoding and decoding (base64.h); decoding goes through a table built once. */
#include "util/base64.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "csid.h"

static const char base64_chars[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
/* Each byte's value (-1: not a base64 letter). */
static signed char base64_vals[256];
static pthread_once_t base64_once = PTHREAD_ONCE_INIT;

static void base64_fill(void)
{
	memset(base64_vals, -1, sizeof(base64_vals));
	for (int i = 0; i < 64; i++)
		base64_vals[(unsigned char)base64_chars[i]] = (signed char)i;
}

char *base64_encode(const void *in, size_t n, size_t *len)
{
	const unsigned char *p = in;
	char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;

	if (!out)
		return NULL;
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)p[i] << 16;

		if (i + 1 < n)
			v |= (uint32_t)p[i + 1] << 8;
		if (i + 2 < n)
			v |= p[i + 2];
		*o++ = base64_chars[(v >> 18) & 63];
		*o++ = base64_chars[(v >> 12) & 63];
		*o++ = i + 1 < n ? base64_chars[(v >> 6) & 63] : '=';
		*o++ = i + 2 < n ? base64_chars[v & 63] : '=';
	}
	*o = '\0';
	if (len)
		*len = (size_t)(o - out);
	return out;
}

int base64_decode(const char *in, size_t n, char **out, size_t *outn)
{
	size_t pad = 0, w = 0;
	char *buf;

	*out = NULL;
	*outn = 0;
	pthread_once(&base64_once, base64_fill);
	if (n % 4)
		return CSID_EPROTO;
	if (n && in[n - 1] == '=')
		pad = n >= 2 && in[n - 2] == '=' ? 2 : 1;
	buf = malloc(n / 4 * 3 + 1);
	if (!buf)
		return CSID_ENOMEM;
	for (size_t i = 0; i < n; i += 4) {
		uint32_t v = 0;
		bool last = i + 4 == n;

		for (size_t k = 0; k < 4; k++) {
			int d = base64_vals[(unsigned char)in[i + k]];

			if (last && k >= 4 - pad)
				d = 0;
			else if (d < 0) {
				free(buf);
				return CSID_EPROTO;
			}
			v = v << 6 | (uint32_t)d;
		}
		buf[w++] = (char)(v >> 16);
		if (!last || pad < 2)
			buf[w++] = (char)(v >> 8);
		if (!last || pad < 1)
			buf[w++] = (char)v;
	}
	buf[w] = '\0';
	*out = buf;
	*outn = w;
	return 0;
}
