/*
 * Shared pieces of csictl's server commands (see csictl_server.h):
 * connection flags, one run's set-up, and one request with its output.
 */
#include "csictl_server.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "csictl_cmds.h"
#include "csictl_csi.h"
#include "csictl_out.h"

/* Default deadline of one request (a blocking wait asks for more). */
#define CSICTL_SERVER_TIMEOUT_MS 60000

size_t csictl_server_flags(struct csictl_server_opts *o, struct csictl_flag *f, size_t n)
{
	const struct csictl_flag table[] = {
	    {"address", CSICTL_FLAG_STRING, &o->address, "ADDR",
	     "server: http://HOST:PORT or unix:PATH, or several separated by commas, tried "
	     "in turn while one cannot be reached (default $CSID_ADDR, "
	     "else " CSICTL_SERVER_DEFAULT_ADDR ")"},
	    {"token", CSICTL_FLAG_STRING, &o->token, "TOKEN", "ACL token (default $CSID_TOKEN)"},
	    {"ca-cert", CSICTL_FLAG_STRING, &o->ca_cert, "FILE",
	     "CA that verifies an https:// server (default $CSID_CACERT)"},
	    {"client-cert", CSICTL_FLAG_STRING, &o->client_cert, "FILE",
	     "client certificate for https:// (default $CSID_CLIENT_CERT)"},
	    {"client-key", CSICTL_FLAG_STRING, &o->client_key, "FILE",
	     "its key (default $CSID_CLIENT_KEY)"},
	    {"o", CSICTL_FLAG_STRING, &o->output, "table|json", "output format (default table)"},
	    {"timeout", CSICTL_FLAG_STRING, &o->timeout, "DURATION",
	     "deadline of each request (default 1m)"},
	    {"h", CSICTL_FLAG_BOOL, &o->help, NULL, "help"},
	    {"help", CSICTL_FLAG_BOOL, &o->help, NULL, "help"},
	};

	memcpy(f + n, table, sizeof(table));
	return n + sizeof(table) / sizeof(table[0]);
}

int csictl_server_usage(struct csictl_server *s, const char *fmt, ...)
{
	char msg[1024], clean[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(s->err, "error: %s\n", csictl_out_clean(msg, clean, sizeof(clean)));
	return CSICTL_EXIT_USAGE;
}

int csictl_server_init(struct csictl_server *s, struct csictl_server_opts *o,
		       const struct csictl_flag *flags, size_t nflags, int argc, char **argv,
		       const char *group, FILE *out, FILE *err)
{
	const char *addr;
	struct err e;

	memset(s, 0, sizeof(*s));
	s->out = out;
	s->err = err;
	s->http.err = err;
	s->http.what = "server";
	s->http.hint = "start csid server (or csid dev), or set CSID_ADDR";
	s->http.timeout_ms = CSICTL_SERVER_TIMEOUT_MS;
	err_clear(&e);
	for (int i = 0; i < argc; i++)
		if (!csictl_out_utf8_ok(argv[i]))
			return csictl_server_usage(s, "argument %d is not valid UTF-8", i + 1);
	if (csictl_flags_parse(flags, nflags, argc, argv, &s->args, &e))
		return csictl_server_usage(s, "%s (see -h)", e.msg);
	if (o->help || s->args.n == 0) {
		csictl_cmd_help(group, &s->args, flags, nflags, o->help ? out : err);
		return o->help ? -1 : CSICTL_EXIT_USAGE;
	}
	if (o->output && strcmp(o->output, "json") != 0 && strcmp(o->output, "table") != 0)
		return csictl_server_usage(s, "-o must be table or json");
	s->json = o->output && strcmp(o->output, "json") == 0;
	addr = o->address ? o->address : getenv("CSID_ADDR");
	if (!addr || !*addr)
		addr = CSICTL_SERVER_DEFAULT_ADDR;
	s->http.token = o->token ? o->token : getenv("CSID_TOKEN");
	s->http.ca_file = o->ca_cert;
	s->http.cert_file = o->client_cert;
	s->http.key_file = o->client_key;
	csictl_http_tls_env(&s->http);
	if ((o->timeout && csictl_duration_parse(o->timeout, &s->http.timeout_ms, &e)) ||
	    csictl_http_addr_list_parse("server", addr, &s->http, &e))
		return csictl_server_usage(s, "%s", e.msg);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	return 0;
}

int csictl_server_init_plain(struct csictl_server *s, struct csictl_server_opts *o, int argc,
			     char **argv, const char *group, FILE *out, FILE *err)
{
	struct csictl_flag flags[CSICTL_SERVER_FLAGS_MAX];
	size_t n;

	memset(o, 0, sizeof(*o));
	n = csictl_server_flags(o, flags, 0);
	return csictl_server_init(s, o, flags, n, argc, argv, group, out, err);
}

int csictl_server_request(struct csictl_server *s, const char *method, const char *path,
			  const char *body, csictl_server_render_fn render, const char *done_msg)
{
	json_t *j = NULL;
	int ret = csictl_http_json(&s->http, method, path, body, &j);

	if (ret)
		return ret;
	if (s->json)
		csictl_out_json_print(j, s->out);
	else if (render)
		ret = render(j, s->out);
	else if (done_msg)
		fprintf(s->out, "%s\n", done_msg);
	json_decref(j);
	return ret;
}

int csictl_server_path(struct csictl_server *s, const char *what, const char *id,
		       const char *suffix, char *buf, size_t len)
{
	char esc[1024];

	if (!id || !*id)
		return csictl_server_usage(s, "%s ID must not be empty", what);
	if (csictl_http_escape(id, esc, sizeof(esc)) ||
	    (size_t)snprintf(buf, len, "/v1/%s/%s%s", what, esc, suffix ? suffix : "") >= len)
		return csictl_server_usage(s, "%s ID is too long", what);
	return 0;
}
