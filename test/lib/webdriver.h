/*
 * Test helper: a real headless Chromium driven through chromedriver's
 * WebDriver HTTP API (W3C WebDriver: JSON over HTTP) with the test HTTP
 * client, for end-to-end tests of the web console.
 *
 * webdriver_start runs Debian's chromedriver on a free loopback port, in
 * a private directory under /tmp that is also the browser's profile, the
 * working directory of every process it starts and their TMPDIR, HOME
 * and XDG directories, and opens a session of a headless Chromium
 * (1400x1000 window). Both are recorded with the proc guard
 * (proc_guard.h): even a test that fails half-way, or a sanitizer
 * abort, leaves no browser running and no directory. webdriver_stop ends the
 * session, stops chromedriver, kills what is left under the directory
 * and removes it; it is safe after any failure and more than once.
 *
 * Every call is bounded (30 s per request); the wait helper polls with a
 * deadline. Not thread-safe: one test thread per struct webdriver.
 */
#ifndef CSID_TEST_WEBDRIVER_H
#define CSID_TEST_WEBDRIVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "http_client.h"

#define WEBDRIVER_PATH 160

struct webdriver {
	char dir[WEBDRIVER_PATH]; /* /tmp/cwd-XXXXXX: profile, chromedriver.log */
	char base[64]; /* "http://127.0.0.1:PORT" of chromedriver */
	char session[128]; /* "/session/<id>", "" before the session */
	pid_t pid; /* chromedriver, 0 when not running */
	struct http_client *http;
};

/*
 * Starts chromedriver and a headless Chromium session, within timeout_ms.
 * Returns 0, or -1 with the reason printed (webdriver_stop still cleans up).
 */
int webdriver_start(struct webdriver *w, int64_t timeout_ms);
/* Ends the session, stops chromedriver and the browser, removes the directory. */
void webdriver_stop(struct webdriver *w);

/* Navigates to url and waits for the page to load. Returns 0 or -1. */
int webdriver_get(struct webdriver *w, const char *url);
/*
 * Runs script (a function body: "return document.title;") in the page with
 * the JSON array args (NULL: none). Returns the value it returned (owned;
 * JSON null for undefined), or NULL when the call failed (printed).
 */
json_t *webdriver_exec(struct webdriver *w, const char *script, json_t *args);
/* webdriver_exec's value as a malloc'd string ("" for a non-string), or NULL. */
char *webdriver_exec_str(struct webdriver *w, const char *script);
/*
 * Polls script (a function body returning a boolean) until it returns true
 * or timeout_ms passed. Returns whether it did.
 */
bool webdriver_wait(struct webdriver *w, const char *script, int64_t timeout_ms);
/* Clicks the first element matching the CSS selector. Returns 0 or -1. */
int webdriver_click(struct webdriver *w, const char *css);
/* Types text into the first element matching the CSS selector. Returns 0 or -1. */
int webdriver_type(struct webdriver *w, const char *css, const char *text);
/* Writes a PNG screenshot of the window to path. Returns 0 or -1. */
int webdriver_screenshot(struct webdriver *w, const char *path);

#endif
