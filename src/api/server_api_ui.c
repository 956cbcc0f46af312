/*
 * GET /ui/<file>: the web console, files compiled into the binary
 * (server_api_ui.h). "/ui/" is index.html, "/ui" redirects there. The
 * files hold no data: the page reads everything through the JSON API with
 * the token the operator typed (kept in the browser's sessionStorage and
 * sent in X-Csid-Token, never in a URL), so they are served without a
 * token, as a login page must be.
 *
 * Every file goes out with its content type, a strong ETag (a request
 * with If-None-Match naming it gets 304) and "Cache-Control: no-cache",
 * so a browser revalidates and never runs a stale script after an
 * upgrade, and a strict Content-Security-Policy: scripts, styles and
 * fetches from this origin only, no inline script or style, no plugin,
 * no frame, no form submission. With nosniff and that policy a hostile
 * volume name cannot become markup even if a future page forgot to treat
 * it as text (the page itself only ever sets textContent).
 */
#include "api/server_api_int.h"

#include <string.h>

#include "api/server_api_ui.h"

#define UI_CSP                                                                      \
	"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " \
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const struct {
	const char *ext;
	const char *type;
} ui_types[] = {
    {".html", "text/html; charset=utf-8"},
    {".css", "text/css; charset=utf-8"},
    {".js", "text/javascript; charset=utf-8"},
    {".svg", "image/svg+xml"},
};

static const char *ui_type(const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < sizeof(ui_types) / sizeof(ui_types[0]); i++) {
		size_t m = strlen(ui_types[i].ext);

		if (n > m && strcmp(name + n - m, ui_types[i].ext) == 0)
			return ui_types[i].type;
	}
	return "application/octet-stream";
}

const struct server_api_ui_asset *server_api_ui_lookup(const char *path)
{
	const char *name;

	if (strncmp(path, "/ui/", 4) != 0)
		return NULL;
	name = path[4] ? path + 4 : "index.html";
	for (size_t i = 0; i < server_api_ui_nassets; i++)
		if (strcmp(server_api_ui_assets[i].name, name) == 0)
			return &server_api_ui_assets[i];
	return NULL;
}

bool server_api_ui_etag_matches(const char *inm, const char *etag)
{
	size_t n = strlen(etag);
	const char *p;

	if (!inm)
		return false;
	if (strcmp(inm, "*") == 0)
		return true;
	for (p = strstr(inm, etag); p; p = strstr(p + 1, etag))
		if ((p == inm || p[-1] == ' ' || p[-1] == ',') &&
		    (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return true;
	return false;
}

/* The header lines every console answer carries, then name: value (ETag, Location). */
static void ui_headers(struct http_reply *rep, const char *name, const char *value)
{
	static const char *const base[] = {"Content-Security-Policy",
					   UI_CSP,
					   "X-Content-Type-Options",
					   "nosniff",
					   "X-Frame-Options",
					   "DENY",
					   "Referrer-Policy",
					   "no-referrer",
					   "Cache-Control",
					   "no-cache",
					   NULL};
	size_t i;

	for (i = 0; base[i]; i++)
		rep->headers[i] = base[i];
	rep->headers[i++] = name;
	rep->headers[i] = value;
}

int server_api_ui(struct server_api *api, const struct http_request *req, struct http_reply *rep,
		  struct err *e)
{
	const struct server_api_ui_asset *a;

	if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
		rep->allow = "GET, HEAD";
		return HTTP_METHOD_NOT_ALLOWED;
	}
	rep->data = "";
	rep->content_type = "text/plain; charset=utf-8";
	if (strcmp(req->url, "/ui") == 0) {
		ui_headers(rep, "Location", "/ui/");
		rep->status = 301;
		return 0;
	}
	a = server_api_ui_lookup(req->url);
	if (!a)
		return err_set(e, CSID_ENOTFOUND, "no such console file: %.200s", req->url);
	ui_headers(rep, "ETag", a->etag);
	rep->content_type = ui_type(a->name);
	if (server_api_ui_etag_matches(http_header(req, "If-None-Match"), a->etag)) {
		rep->status = 304;
		return 0;
	}
	rep->data = a->data;
	rep->data_len = a->len;
	return 0;
}
