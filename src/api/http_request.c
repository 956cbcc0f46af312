/*
 * What a handler reads of its request (http.h): its query arguments and
 * headers, its token, the connection's facts (TCP, TLS client
 * certificate, peer, start), the parking of a request (http_wait), and
 * the parsers of path segments and query values, each refusing what it
 * cannot read with CSID_EINVAL and a message naming the argument.
 */
#include "api/http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

const char *http_query(const struct http_request *r, const char *key)
{
	return MHD_lookup_connection_value(r->conn_, MHD_GET_ARGUMENT_KIND, key);
}

const char *http_header(const struct http_request *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn_, MHD_HEADER_KIND, name);
}

const char *http_request_token(const struct http_request *r)
{
	const char *tok = http_header(r, "X-Csid-Token");
	const char *auth = http_header(r, "Authorization");

	if (!tok && auth && strncmp(auth, "Bearer ", 7) == 0)
		tok = auth + 7;
	return tok;
}

bool http_token_eq(const char *presented, const char *secret)
{
	size_t la = strlen(presented), lb = strlen(secret), i;
	unsigned char d = la != lb;

	/* Time depends on the secret's length only, never on where they differ. */
	for (i = 0; i < lb; i++)
		d |= (unsigned char)(presented[i < la ? i : 0] ^ secret[i]);
	return d == 0;
}

int64_t http_request_start_ms(const struct http_request *r)
{
	return r->hc_->start_ms;
}

bool http_request_tcp(const struct http_request *r)
{
	return r->hc_->tcp;
}

bool http_request_client_cert(const struct http_request *r)
{
	return r->hc_->cert_ok;
}

bool http_request_private(const struct http_request *r)
{
	return !r->hc_->tcp || r->hc_->tls || r->hc_->loopback;
}

const char *http_request_peer(const struct http_request *r, char *buf, size_t cap)
{
	snprintf(buf, cap, "%s", r->hc_->peer);
	return buf;
}

int http_wait(const struct http_request *r, int64_t deadline_ms)
{
	r->hc_->deadline_ms = deadline_ms;
	r->hc_->polled = false;
	return HTTP_WAIT;
}

int http_wait_polled(const struct http_request *r, int64_t deadline_ms)
{
	http_wait(r, deadline_ms);
	r->hc_->polled = true;
	return HTTP_WAIT;
}

uint64_t *http_request_memo(const struct http_request *r)
{
	return &r->hc_->memo;
}

const char *http_path_segment(const char *url, const char *prefix, char *buf, size_t cap)
{
	size_t plen = strlen(prefix), n;
	const char *seg, *end;

	if (strncmp(url, prefix, plen) != 0)
		return NULL;
	seg = url + plen;
	end = strchr(seg, '/');
	n = end ? (size_t)(end - seg) : strlen(seg);
	if (n == 0 || n >= cap)
		return NULL;
	memcpy(buf, seg, n);
	buf[n] = '\0';
	return seg + n;
}

int http_query_u64(const struct http_request *r, const char *key, uint64_t dflt, uint64_t *out,
		   struct err *e)
{
	const char *v = http_query(r, key);
	char *end;
	unsigned long long x;

	*out = dflt;
	if (!v)
		return 0;
	errno = 0;
	x = strtoull(v, &end, 10);
	if (!v[0] || *end || errno || v[0] == '-')
		return err_set(e, CSID_EINVAL, "query %s: expected an unsigned integer", key);
	*out = x;
	return 0;
}

int http_query_duration(const struct http_request *r, const char *key, int64_t dflt_ms,
			int64_t *out_ms, struct err *e)
{
	const char *v = http_query(r, key);
	char *end;
	double x, unit;

	*out_ms = dflt_ms;
	if (!v)
		return 0;
	errno = 0;
	x = strtod(v, &end);
	/* !(x >= 0) also refuses "nan", which no comparison below would catch. */
	if (end == v || errno || !(x >= 0))
		return err_set(e, CSID_EINVAL, "query %s: expected a duration such as 30s", key);
	if (strcmp(end, "ms") == 0)
		unit = 1;
	else if (strcmp(end, "s") == 0 || !*end)
		unit = 1000;
	else if (strcmp(end, "m") == 0)
		unit = 60000;
	else
		return err_set(e, CSID_EINVAL, "query %s: expected a duration such as 30s", key);
	x *= unit;
	*out_ms = x > 3.6e6 ? 3600000 : (int64_t)x;
	return 0;
}

int http_query_bool(const struct http_request *r, const char *key, bool *out, struct err *e)
{
	const char *v = NULL;
	size_t vlen = 0;

	*out = false;
	/* "?force" without a value is found with a NULL value: it means true. */
	if (MHD_lookup_connection_value_n(r->conn_, MHD_GET_ARGUMENT_KIND, key, strlen(key), &v,
					  &vlen) != MHD_YES)
		return 0;
	if (!v || !v[0] || strcmp(v, "true") == 0 || strcmp(v, "1") == 0)
		*out = true;
	else if (strcmp(v, "false") != 0 && strcmp(v, "0") != 0)
		return err_set(e, CSID_EINVAL, "query %s: expected true or false", key);
	return 0;
}
