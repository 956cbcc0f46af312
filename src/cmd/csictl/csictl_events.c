/*
 * `csictl events [-index N] [-topic T]`: follows the server's event
 * stream (GET /v1/event/stream) and prints one line per event (index,
 * topic, type, key, state), or each event's JSON with -o json, until
 * interrupted. Heartbeat lines are skipped. With -index a client resumes
 * where it stopped.
 */
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "csictl_csi.h"
#include "csictl_out.h"
#include "csictl_server.h"

#define EVENTS_LINE_MAX (4u << 20)

struct events_opts {
	struct csictl_server_opts c;
	const char *index;
	const char *topic;
};

struct events_run {
	struct csictl_server *s;
	const char *topic;
	char *line;
	size_t len;
	bool too_long;
};

static void events_line(struct events_run *r)
{
	json_t *ev = json_loadb(r->line, r->len, 0, NULL);
	const char *topic = json_string_value(json_object_get(ev, "topic"));

	if (ev && json_object_get(ev, "error")) {
		char msg[1200];

		fprintf(r->s->err, "error: %s\n",
			csictl_http_error_text(200, r->line, r->len, msg, sizeof(msg)));
	} else if (ev && topic && (!r->topic || strcmp(topic, r->topic) == 0)) {
		if (r->s->json) {
			char *t = json_dumps(ev, JSON_COMPACT);

			if (t)
				fprintf(r->s->out, "%s\n", t);
			free(t);
			fflush(r->s->out);
		} else {
			csictl_render_event(ev, r->s->out);
		}
	}
	json_decref(ev);
}

static size_t events_write(char *ptr, size_t size, size_t nmemb, void *arg)
{
	struct events_run *r = arg;
	size_t n = size * nmemb, i;

	for (i = 0; i < n; i++) {
		if (ptr[i] == '\n') {
			if (!r->too_long && r->len)
				events_line(r);
			r->len = 0;
			r->too_long = false;
			continue;
		}
		if (r->len + 1 >= EVENTS_LINE_MAX) {
			r->too_long = true;
			continue;
		}
		r->line[r->len++] = ptr[i];
		r->line[r->len] = '\0';
	}
	return n;
}

int csictl_events_main(int argc, char **argv, FILE *out, FILE *err)
{
	static char *none[] = {"events"};
	struct events_opts o;
	struct csictl_flag flags[CSICTL_SERVER_FLAGS_MAX] = {
	    {"index", CSICTL_FLAG_STRING, &o.index, "N", "start after this index (default: now)"},
	    {"topic", CSICTL_FLAG_STRING, &o.topic, "T", "only events of this topic"},
	};
	struct csictl_server s;
	struct events_run r = {0};
	char url[CSICTL_HTTP_URL_MAX + 64], tok[600];
	struct curl_slist *hdrs = NULL;
	long status = 0;
	CURLcode rc;
	CURL *curl;
	size_t n;
	int ret;

	memset(&o, 0, sizeof(o));
	n = csictl_server_flags(&o.c, flags, 2);
	/* The group has no sub-command: parse its flags as if "events" were one. */
	if (argc == 0) {
		argc = 1;
		argv = none;
	} else if (argv[0][0] == '-') {
		char **v = calloc((size_t)argc + 1, sizeof(*v));

		if (!v)
			return CSICTL_EXIT_FAIL;
		v[0] = none[0];
		memcpy(v + 1, argv, (size_t)argc * sizeof(*v));
		ret = csictl_events_main(argc + 1, v, out, err);
		free(v);
		return ret;
	}
	ret = csictl_server_init(&s, &o.c, flags, n, argc, argv, "", out, err);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (s.args.n != 1 || strcmp(s.args.v[0], "events") != 0)
		return csictl_server_usage(&s, "usage: csictl events [-index N] [-topic T]");
	if (o.index && strspn(o.index, "0123456789") != strlen(o.index))
		return csictl_server_usage(&s, "-index: expected a number");
	r.s = &s;
	r.topic = o.topic;
	r.line = malloc(EVENTS_LINE_MAX);
	curl = curl_easy_init();
	if (!r.line || !curl) {
		free(r.line);
		if (curl)
			curl_easy_cleanup(curl);
		return csictl_server_usage(&s, "out of memory");
	}
	snprintf(url, sizeof(url), "%s/v1/event/stream%s%s", s.http.addr.base,
		 o.index ? "?index=" : "", o.index ? o.index : "");
	if (s.http.token && s.http.token[0]) {
		snprintf(tok, sizeof(tok), "X-Csid-Token: %.512s", s.http.token);
		hdrs = curl_slist_append(hdrs, tok);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	csictl_http_tls(&s.http, curl);
	if (s.http.addr.socket[0])
		curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, s.http.addr.socket);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, events_write);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &r);
	rc = curl_easy_perform(curl);
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	ret = 0;
	if (rc == CURLE_COULDNT_CONNECT) {
		fprintf(err, "error: no server listening at %s: %s\n", s.http.addr.base,
			s.http.hint);
		ret = CSICTL_EXIT_FAIL;
	} else if (rc != CURLE_OK || status != 200) {
		if (status != 200 && r.len)
			events_line(&r);
		fprintf(err, "error: event stream ended: %s (HTTP %ld)\n", curl_easy_strerror(rc),
			status);
		ret = CSICTL_EXIT_FAIL;
	}
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(curl);
	free(r.line);
	return ret;
}
