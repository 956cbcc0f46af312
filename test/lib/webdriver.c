/*
 * WebDriver client for the console's browser tests (see webdriver.h):
 * chromedriver spawned with posix_spawn in its own directory, requests
 * through the test HTTP client, results read from the W3C "value" field.
 */
#include "webdriver.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child_proc.h"
#include "log_tail.h"
#include "proc_guard.h"
#include "server_proc.h"

#define WEBDRIVER_BIN "/usr/bin/chromedriver"
#define WEBDRIVER_CHROMIUM "/usr/lib/chromium/chromium"
#define WEBDRIVER_CALL_MS 30000
#define WEBDRIVER_POLL_MS 100
#define WEBDRIVER_ENV_VARS 5

static int64_t webdriver_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void webdriver_nap(void)
{
	struct timespec ts = {0, WEBDRIVER_POLL_MS * 1000000L};

	nanosleep(&ts, NULL);
}

/* One request; *value (owned, may be NULL) is the answer's "value". Returns the status. */
static long webdriver_call_ms(struct webdriver *w, const char *method, const char *path,
			      json_t *body, json_t **value, int64_t timeout_ms)
{
	char *text = body ? json_dumps(body, JSON_COMPACT) : NULL, *out = NULL;
	json_t *doc;
	long status;

	if (value)
		*value = NULL;
	if (body && !text)
		return -1;
	status = http_client_do(w->http, method, path, text, &out, NULL, timeout_ms);
	free(text);
	doc = out ? json_loads(out, 0, NULL) : NULL;
	if (status != 200)
		fprintf(stderr, "webdriver: %s %s: %ld %.600s\n", method, path, status,
			out ? out : "(no answer)");
	free(out);
	if (value && doc)
		*value = json_incref(json_object_get(doc, "value"));
	json_decref(doc);
	return status;
}

static long webdriver_call(struct webdriver *w, const char *method, const char *path, json_t *body,
			   json_t **value)
{
	return webdriver_call_ms(w, method, path, body, value, WEBDRIVER_CALL_MS);
}

/* The end of chromedriver's log (the browser's start, when a session failed) on stderr. */
static void webdriver_log_tail(const struct webdriver *w)
{
	char path[WEBDRIVER_PATH + 32];

	snprintf(path, sizeof(path), "%s/chromedriver.log", w->dir);
	fprintf(stderr, "webdriver: the end of %s:\n", path);
	log_tail_print(path);
}

/*
 * The environment of chromedriver and the browser: TMPDIR (their
 * org.chromium.Chromium.scoped_dir.* directories), HOME and the XDG
 * directories in w->dir, made here, so nothing lands outside it.
 */
static int webdriver_env(struct webdriver *w, char **envp, size_t cap,
			 char (*vars)[WEBDRIVER_PATH + 32])
{
	static const char *const names[] = {"TMPDIR", "HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME",
					    "XDG_DATA_HOME"};
	static const char *const subs[] = {"tmp", "home", "home/.config", "home/.cache",
					   "home/.local"};
	const char *set[WEBDRIVER_ENV_VARS + 1];

	for (int i = 0; i < WEBDRIVER_ENV_VARS; i++) {
		snprintf(vars[i], sizeof(vars[i]), "%s=%s/%s", names[i], w->dir, subs[i]);
		if (mkdir(strchr(vars[i], '=') + 1, 0700) != 0) {
			fprintf(stderr, "webdriver: mkdir %s: %s\n", vars[i], strerror(errno));
			return -1;
		}
		set[i] = vars[i];
	}
	set[WEBDRIVER_ENV_VARS] = NULL;
	return child_proc_env(envp, cap, set);
}

/* Spawns chromedriver on port with its cwd, log, output and environment in w->dir. */
static int webdriver_spawn(struct webdriver *w, int port)
{
	char portarg[32], logarg[WEBDRIVER_PATH + 16], out[WEBDRIVER_PATH + 16];
	char vars[WEBDRIVER_ENV_VARS][WEBDRIVER_PATH + 32], *envp[512];
	char *argv[] = {WEBDRIVER_BIN, portarg, logarg, NULL};
	posix_spawn_file_actions_t fa;
	int rc;

	if (webdriver_env(w, envp, 512, vars) < 0)
		return -1;
	snprintf(portarg, sizeof(portarg), "--port=%d", port);
	snprintf(logarg, sizeof(logarg), "--log-path=%s/chromedriver.log", w->dir);
	snprintf(out, sizeof(out), "%s/chromedriver.out", w->dir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, out, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	/* The browser it starts inherits this directory, so the guard finds it. */
	posix_spawn_file_actions_addchdir_np(&fa, w->dir);
	rc = proc_guard_spawn(&w->pid, WEBDRIVER_BIN, &fa, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		fprintf(stderr, "webdriver: spawn %s: %s\n", WEBDRIVER_BIN, strerror(rc));
		w->pid = 0;
		return -1;
	}
	proc_guard_track(w->pid);
	return 0;
}

/* Polls GET /status until chromedriver says it is ready. */
static bool webdriver_ready(struct webdriver *w, int64_t deadline)
{
	while (webdriver_now_ms() < deadline) {
		char *out = NULL;
		long st = http_client_do(w->http, "GET", "/status", NULL, &out, NULL, 2000);
		bool ready = st == 200 && out && strstr(out, "\"ready\":true");

		free(out);
		if (ready)
			return true;
		if (waitpid(w->pid, NULL, WNOHANG) == w->pid) {
			proc_guard_untrack(w->pid);
			w->pid = 0;
			fprintf(stderr, "webdriver: chromedriver exited at start\n");
			return false;
		}
		webdriver_nap();
	}
	fprintf(stderr, "webdriver: chromedriver not ready in time\n");
	return false;
}

/*
 * Opens the browser's session, within the start's deadline: the
 * browser's first start (its profile made) took over 30 s while the
 * whole suite ran three times at once.
 */
static int webdriver_session(struct webdriver *w, int64_t deadline)
{
	char profile[WEBDRIVER_PATH + 32];
	json_t *caps, *value = NULL;
	const char *id;
	long st;

	snprintf(profile, sizeof(profile), "--user-data-dir=%s/profile", w->dir);
	caps =
	    json_pack("{s:{s:{s:s, s:b, s:{s:s, s:[s, s, s, s, s, s, s, s]}}}}", "capabilities",
		      "alwaysMatch", "browserName", "chrome", "acceptInsecureCerts", 0,
		      "goog:chromeOptions", "binary", WEBDRIVER_CHROMIUM, "args", "--headless=new",
		      "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		      "--disable-extensions", "--window-size=1400,1000", profile);
	if (!caps)
		return -1;
	st = webdriver_call_ms(w, "POST", "/session", caps, &value,
			       deadline - webdriver_now_ms() > WEBDRIVER_CALL_MS
				   ? deadline - webdriver_now_ms()
				   : WEBDRIVER_CALL_MS);
	json_decref(caps);
	id = json_string_value(json_object_get(value, "sessionId"));
	if (st == 200 && id)
		snprintf(w->session, sizeof(w->session), "/session/%s", id);
	json_decref(value);
	if (!w->session[0])
		webdriver_log_tail(w);
	return w->session[0] ? 0 : -1;
}

int webdriver_start(struct webdriver *w, int64_t timeout_ms)
{
	int64_t deadline = webdriver_now_ms() + timeout_ms;
	int port;

	memset(w, 0, sizeof(*w));
	snprintf(w->dir, sizeof(w->dir), "/tmp/cwd-XXXXXX");
	if (!mkdtemp(w->dir)) {
		w->dir[0] = '\0';
		return -1;
	}
	proc_guard_track_dir(w->dir);
	port = server_proc_free_port();
	if (port < 0)
		return -1;
	snprintf(w->base, sizeof(w->base), "http://127.0.0.1:%d", port);
	w->http = http_client_new(w->base);
	if (!w->http || webdriver_spawn(w, port) != 0 || !webdriver_ready(w, deadline))
		return -1;
	return webdriver_session(w, deadline);
}

void webdriver_stop(struct webdriver *w)
{
	if (w->session[0] && w->http)
		webdriver_call(w, "DELETE", w->session, NULL, NULL);
	w->session[0] = '\0';
	if (w->pid > 0) {
		int64_t deadline = webdriver_now_ms() + 5000;

		kill(w->pid, SIGTERM);
		while (waitpid(w->pid, NULL, WNOHANG) == 0 && webdriver_now_ms() < deadline)
			webdriver_nap();
		if (kill(w->pid, 0) == 0) {
			kill(w->pid, SIGKILL);
			waitpid(w->pid, NULL, 0);
		}
		proc_guard_untrack(w->pid);
		w->pid = 0;
	}
	if (w->dir[0]) {
		proc_guard_clear_dir(w->dir);
		proc_guard_untrack_dir(w->dir);
		w->dir[0] = '\0';
	}
	http_client_free(w->http);
	w->http = NULL;
}

int webdriver_get(struct webdriver *w, const char *url)
{
	char path[sizeof(w->session) + 8];
	json_t *body = json_pack("{s:s}", "url", url);
	long st;

	snprintf(path, sizeof(path), "%s/url", w->session);
	st = body ? webdriver_call(w, "POST", path, body, NULL) : -1;
	json_decref(body);
	return st == 200 ? 0 : -1;
}

json_t *webdriver_exec(struct webdriver *w, const char *script, json_t *args)
{
	char path[sizeof(w->session) + 16];
	json_t *body, *value = NULL;
	long st;

	snprintf(path, sizeof(path), "%s/execute/sync", w->session);
	body = json_pack("{s:s, s:o}", "script", script, "args",
			 args ? json_incref(args) : json_array());
	st = body ? webdriver_call(w, "POST", path, body, &value) : -1;
	json_decref(body);
	if (st != 200) {
		json_decref(value);
		return NULL;
	}
	return value ? value : json_null();
}

char *webdriver_exec_str(struct webdriver *w, const char *script)
{
	json_t *v = webdriver_exec(w, script, NULL);
	char *s;

	if (!v)
		return NULL;
	s = strdup(json_is_string(v) ? json_string_value(v) : "");
	json_decref(v);
	return s;
}

bool webdriver_wait(struct webdriver *w, const char *script, int64_t timeout_ms)
{
	int64_t deadline = webdriver_now_ms() + timeout_ms;

	do {
		json_t *v = webdriver_exec(w, script, NULL);
		bool ok = v && json_is_true(v);

		json_decref(v);
		if (ok)
			return true;
		webdriver_nap();
	} while (webdriver_now_ms() < deadline);
	return false;
}

/* The WebDriver element reference of the first match of css, into ref. */
static int webdriver_find(struct webdriver *w, const char *css, char *ref, size_t cap)
{
	char path[sizeof(w->session) + 16];
	json_t *body = json_pack("{s:s, s:s}", "using", "css selector", "value", css),
	       *value = NULL;
	const char *id;
	long st;

	snprintf(path, sizeof(path), "%s/element", w->session);
	st = body ? webdriver_call(w, "POST", path, body, &value) : -1;
	json_decref(body);
	/* The W3C element key. */
	id = json_string_value(json_object_get(value, "element-6066-11e4-a52e-4f735466cecf"));
	if (st == 200 && id)
		snprintf(ref, cap, "%s", id);
	json_decref(value);
	return st == 200 && id ? 0 : -1;
}

/*
 * Sends body to the element action `what` ("click", "value") of the first
 * match of css. A page that re-renders may replace the element between
 * the find and the action (a "stale element reference"): then it finds
 * it again, for at most WEBDRIVER_CALL_MS.
 */
static int webdriver_act(struct webdriver *w, const char *css, const char *what, json_t *body)
{
	int64_t deadline = webdriver_now_ms() + WEBDRIVER_CALL_MS;
	char ref[128], path[sizeof(w->session) + 160];
	long st = -1;

	do {
		if (webdriver_find(w, css, ref, sizeof(ref)) == 0) {
			snprintf(path, sizeof(path), "%s/element/%s/%s", w->session, ref, what);
			st = webdriver_call(w, "POST", path, body, NULL);
			if (st == 200)
				break;
		}
		webdriver_nap();
	} while (webdriver_now_ms() < deadline);
	json_decref(body);
	return st == 200 ? 0 : -1;
}

int webdriver_click(struct webdriver *w, const char *css)
{
	json_t *body = json_object();

	return body ? webdriver_act(w, css, "click", body) : -1;
}

int webdriver_type(struct webdriver *w, const char *css, const char *text)
{
	json_t *body = json_pack("{s:s}", "text", text);

	return body ? webdriver_act(w, css, "value", body) : -1;
}

static int webdriver_b64(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int webdriver_screenshot(struct webdriver *w, const char *path)
{
	char p[sizeof(w->session) + 16];
	json_t *value = NULL;
	const char *b64;
	unsigned char *png = NULL;
	size_t n = 0, len;
	unsigned bits = 0;
	int nbits = 0, rc = -1;
	FILE *f;

	snprintf(p, sizeof(p), "%s/screenshot", w->session);
	if (webdriver_call(w, "GET", p, NULL, &value) != 200 || !(b64 = json_string_value(value)))
		goto out;
	len = strlen(b64);
	png = malloc(len / 4 * 3 + 3);
	if (!png)
		goto out;
	for (size_t i = 0; i < len && b64[i] != '='; i++) {
		int v = webdriver_b64(b64[i]);

		if (v < 0)
			goto out;
		bits = (bits << 6) | (unsigned)v;
		nbits += 6;
		if (nbits >= 8) {
			nbits -= 8;
			png[n++] = (unsigned char)(bits >> nbits);
		}
	}
	f = fopen(path, "wb");
	if (!f)
		goto out;
	if (fwrite(png, 1, n, f) == n)
		rc = 0;
	if (fclose(f) != 0)
		rc = -1;
out:
	free(png);
	json_decref(value);
	if (rc)
		fprintf(stderr, "webdriver: screenshot %s failed\n", path);
	return rc;
}
