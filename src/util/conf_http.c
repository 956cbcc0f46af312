/*
 * The "http" config section (see conf_http.h): strict JSON, each value
 * checked against a range, file names checked for shape only (they are
 * read when the listener or the client starts, where a missing file is
 * reported with its path).
 */
#include "util/conf_http.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/conf.h"
#include "util/log.h"

#define CONF_HTTP_PATH_MAX 4096

const char *const conf_http_keys[] = {"max_conns_per_client",
				      "max_conns",
				      "workers",
				      "header_timeout",
				      "idle_timeout",
				      "tls_cert_file",
				      "tls_key_file",
				      "tls_client_ca_file",
				      "ca_file",
				      "client_cert_file",
				      "client_key_file",
				      "allow_plaintext_secrets",
				      NULL};

static int conf_http_uint(json_t *obj, const char *key, unsigned max, unsigned *out, struct err *e)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > max)
		return err_set(e, CSID_EINVAL, "http.%s: expected an integer from 1 to %u", key,
			       max);
	*out = (unsigned)json_integer_value(v);
	return 0;
}

static int conf_http_seconds(json_t *obj, const char *key, unsigned *out, struct err *e)
{
	json_t *v = json_object_get(obj, key);
	int64_t ms;

	if (!v)
		return 0;
	ms = json_is_string(v) ? conf_parse_duration(json_string_value(v)) : -1;
	if (ms < 1000 || ms > 24LL * 3600 * 1000)
		return err_set(e, CSID_EINVAL,
			       "http.%s: expected a duration from \"1s\" to \"24h\" such as \"5s\"",
			       key);
	*out = (unsigned)(ms / 1000);
	return 0;
}

static int conf_http_path(json_t *obj, const char *key, char **out, struct err *e)
{
	json_t *v = json_object_get(obj, key);
	const char *s;

	if (!v)
		return 0;
	s = json_string_value(v);
	if (!s || !s[0] || json_string_length(v) > CONF_HTTP_PATH_MAX ||
	    strlen(s) != json_string_length(v))
		return err_set(e, CSID_EINVAL, "http.%s: expected a file path", key);
	*out = strdup(s);
	return *out ? 0 : err_set(e, CSID_ENOMEM, "http.%s: out of memory", key);
}

int conf_http_parse(json_t *v, struct conf_http *out, struct err *e)
{
	const char *key;
	json_t *val;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "http: expected an object");
	json_object_foreach(v, key, val)
	{
		size_t i;

		for (i = 0; conf_http_keys[i] && strcmp(key, conf_http_keys[i]) != 0; i++)
			;
		if (!conf_http_keys[i]) {
			char q[160];

			return err_set(e, CSID_EINVAL, "http: unknown key %.100s",
				       log_q(q, sizeof(q), key));
		}
	}
	if ((rc = conf_http_uint(v, "max_conns_per_client", 100000, &out->max_conns_per_client,
				 e)) ||
	    (rc = conf_http_uint(v, "max_conns", 1000000, &out->max_conns, e)) ||
	    (rc = conf_http_uint(v, "workers", 1024, &out->workers, e)) ||
	    (rc = conf_http_seconds(v, "header_timeout", &out->header_timeout_s, e)) ||
	    (rc = conf_http_seconds(v, "idle_timeout", &out->idle_timeout_s, e)) ||
	    (rc = conf_http_path(v, "tls_cert_file", &out->tls_cert_file, e)) ||
	    (rc = conf_http_path(v, "tls_key_file", &out->tls_key_file, e)) ||
	    (rc = conf_http_path(v, "tls_client_ca_file", &out->tls_client_ca_file, e)) ||
	    (rc = conf_http_path(v, "ca_file", &out->ca_file, e)) ||
	    (rc = conf_http_path(v, "client_cert_file", &out->client_cert_file, e)) ||
	    (rc = conf_http_path(v, "client_key_file", &out->client_key_file, e)))
		return rc;
	val = json_object_get(v, "allow_plaintext_secrets");
	if (val && !json_is_boolean(val))
		return err_set(e, CSID_EINVAL,
			       "http.allow_plaintext_secrets: expected true or false");
	out->allow_plaintext_secrets = val && json_is_true(val);
	if (!out->tls_cert_file != !out->tls_key_file)
		return err_set(e, CSID_EINVAL,
			       "http.tls_cert_file and http.tls_key_file go together");
	if (out->tls_client_ca_file && !out->tls_cert_file)
		return err_set(e, CSID_EINVAL,
			       "http.tls_client_ca_file: needs http.tls_cert_file (HTTPS)");
	if (!out->client_cert_file != !out->client_key_file)
		return err_set(e, CSID_EINVAL,
			       "http.client_cert_file and http.client_key_file go together");
	return 0;
}

void conf_http_clear(struct conf_http *h)
{
	free(h->tls_cert_file);
	free(h->tls_key_file);
	free(h->tls_client_ca_file);
	free(h->ca_file);
	free(h->client_cert_file);
	free(h->client_key_file);
	memset(h, 0, sizeof(*h));
}
