/*
 * End to end in a real browser: headless Chromium (Debian's chromium and
 * chromium-driver, through the WebDriver HTTP API, test/lib/webdriver.h)
 * loads the web console at /ui/ and the test reads the rendered DOM.
 *
 * - csid dev (no ACL): a volume created and mounted with csictl (claim
 *   web-1 on node dev) shows with its state, capacity and claim; node dev
 *   shows ready with its plugins healthy; the plugin and the snapshot
 *   lists fill; a volume created after the page loaded arrives as a live
 *   event and as a row; a volume whose name is markup
 *   (<img onerror=...><script>) shows that name as text, runs nothing and
 *   adds no element; the reconciler chart is drawn from the server's
 *   samples and shows that volume as the failing item; deleting a volume
 *   through the confirmation dialog (the ID typed) deletes it.
 * - csid server with ACL tokens + csid agent with csi-hostpath (claims
 *   fixture): the page shows the sign-in form and no data; a wrong token
 *   is refused with a message; the right one shows the volume, its claim
 *   and the node, and lives in sessionStorage only (not in the URL, no
 *   cookie), also after a reload; a live event arrives; "Detach claims"
 *   on the node (confirmed) frees the volume's claim; signing out forgets
 *   the token.
 *
 * Each case leaves a screenshot in the test's build directory
 * (console-dev.png, console-acl.png, next to Testing/Temporary/LastTest.log).
 * It takes about 25 s (ASan build, 2 cores, quiet machine): most of it
 * is starting the sanitized server, agent and plugin; the browser starts
 * in about 1 s.
 */
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "claim_env.h"
#include "webdriver.h"

#define T_WAIT_MS 60000
#define T_BROWSER_MS 60000
#define T_HOSTILE "<img src=x onerror=window.csidPwned=1><script>window.csidPwned=2</script>"

struct t_dev {
	struct server_proc s;
	struct webdriver w;
	struct csictl_runner rn;
	struct csictl_run r;
	char dev_dir[SERVER_PROC_PATH + 8];
	char env_server[128];
	char env_agent[SERVER_PROC_PATH + 64];
	char spec[SERVER_PROC_PATH + 16];
};

struct t_acl {
	struct claim_env c;
	struct webdriver w;
};

/* Where a case keeps its screenshot: the test's build directory (its cwd). */
static void t_screenshot(struct webdriver *w, const char *name)
{
	char cwd[PATH_MAX], path[PATH_MAX + 64];

	assert_non_null(getcwd(cwd, sizeof(cwd)));
	snprintf(path, sizeof(path), "%s/%s", cwd, name);
	assert_int_equal(webdriver_screenshot(w, path), 0);
	fprintf(stderr, "screenshot: %s\n", path);
}

/* Waits for script to hold; on failure prints the page's text. */
static void t_expect(struct webdriver *w, const char *script)
{
	if (!webdriver_wait(w, script, T_BROWSER_MS)) {
		char *text = webdriver_exec_str(w, "return document.body.innerText;");

		fprintf(stderr, "never true: %s\npage:\n%s\n", script, text ? text : "(none)");
		free(text);
		fail();
	}
}

/* Whether the first element matching css holds text (textContent). */
static void t_expect_text(struct webdriver *w, const char *css, const char *text)
{
	char js[1024];

	snprintf(js, sizeof(js),
		 "const e = document.querySelector(%s); return !!e && e.textContent.includes(%s);",
		 css, text);
	t_expect(w, js);
}

static const char t_spec_live[] =
    "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\","
    " \"capacity_min\": 1048576, \"capabilities\": [{\"access_mode\":"
    " \"single-node-writer\", \"attachment_mode\": \"file-system\"}]}";

static int t_dev_setup(void **state)
{
	struct t_dev *t = calloc(1, sizeof(*t));
	const char *args[] = {"dev", "-data-dir", NULL, "-listen", NULL, NULL};
	FILE *f;

	*state = t;
	if (!t || server_proc_init(&t->s) != 0)
		return -1;
	snprintf(t->dev_dir, sizeof(t->dev_dir), "%s/dev", t->s.dir);
	args[2] = t->dev_dir;
	args[4] = t->s.addr;
	if (server_proc_start_args(&t->s, args) != 0 || !server_proc_wait_ready(&t->s, T_WAIT_MS) ||
	    !server_proc_wait_doc(&t->s, "/v1/plugins", server_proc_hp_up, T_WAIT_MS)) {
		server_proc_dump_log(&t->s, "csid dev setup failed");
		return -1;
	}
	t->rn.dir = t->s.dir;
	t->rn.deadline_ms = 120000;
	snprintf(t->env_server, sizeof(t->env_server), "CSID_ADDR=%s", t->s.base);
	snprintf(t->env_agent, sizeof(t->env_agent), "CSID_AGENT_ADDR=unix:%s/agent/agent.sock",
		 t->dev_dir);
	snprintf(t->spec, sizeof(t->spec), "%s/vol.json", t->s.dir);
	f = fopen(t->spec, "w");
	if (!f)
		return -1;
	fprintf(f, "{\"id\": \"data\", \"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"capacity_min\":"
		   " \"64MiB\", \"capabilities\": [{\"access_mode\": \"single-node-writer\","
		   " \"attachment_mode\": \"file-system\"}]}\n");
	if (fclose(f) != 0)
		return -1;
	return webdriver_start(&t->w, T_BROWSER_MS);
}

static int t_dev_teardown(void **state)
{
	struct t_dev *t = *state;

	if (!t)
		return 0;
	webdriver_stop(&t->w);
	csictl_runner_cleanup(&t->rn);
	/* csid dev unmounts what it mounted when it stops; the cleanup kills what is left. */
	if (t->s.pid > 0)
		server_proc_stop(&t->s, SIGTERM, T_WAIT_MS);
	server_proc_cleanup(&t->s);
	free(t);
	return 0;
}

#define T_DEV_RUN(t, ...)                                               \
	do {                                                            \
		char *env_[] = {(t)->env_server, (t)->env_agent, NULL}; \
		char *args_[] = {__VA_ARGS__, NULL};                    \
		csictl_runner_run(&(t)->rn, &(t)->r, env_, args_);      \
		csictl_expect_ok(&(t)->r);                              \
		csictl_runner_free(&(t)->rn, &(t)->r);                  \
	} while (0)

static void test_console_dev(void **state)
{
	struct t_dev *t = *state;
	char url[128], body[512];

	T_DEV_RUN(t, "volume", "create", t->spec, "-wait");
	T_DEV_RUN(t, "volume", "mount", "data", "-alloc", "web-1");
	T_DEV_RUN(t, "volume", "snapshot", "create", "data", "nightly", "-wait");
	/* hostpath refuses the name, so the volume fails: its row shows name and error. */
	snprintf(body, sizeof(body),
		 "{\"name\": \"%s\", \"plugin_id\": \"" SERVER_PROC_HP_ID "\","
		 " \"capacity_min\": 1048576, \"capabilities\": [{\"access_mode\":"
		 " \"single-node-writer\", \"attachment_mode\": \"file-system\"}]}",
		 T_HOSTILE);
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/evil/create", body), 200);

	snprintf(url, sizeof(url), "%s/ui/", t->s.base);
	assert_int_equal(webdriver_get(&t->w, url), 0);
	/* No ACL: the data shows at once, no sign-in form. */
	t_expect_text(&t->w, "'tr[data-volume=\"data\"]'", "'ready'");
	t_expect_text(&t->w, "'tr[data-volume=\"data\"]'", "'64 MiB'");
	t_expect_text(&t->w, "'tr[data-volume=\"data\"] [data-alloc=\"web-1\"]'", "'claimed'");
	t_expect_text(&t->w, "'tr[data-volume=\"data\"] [data-alloc=\"web-1\"]'", "'dev'");
	t_expect(&t->w, "return document.getElementById('login').hidden;");
	t_expect_text(&t->w, "'tr[data-node=\"dev\"]'", "'ready'");
	t_expect(&t->w, "const r = document.querySelector('tr[data-node=\"dev\"]');"
			"return !!r && r.querySelectorAll('.plugin-line').length === 2 &&"
			" [...r.querySelectorAll('.plugin-line')].every("
			"  (l) => l.textContent.startsWith('healthy'));");
	t_expect_text(&t->w, "'tr[data-plugin=\"" SERVER_PROC_HP_ID "\"]'", "'1 / 1 healthy'");
	t_expect_text(&t->w, "'tr[data-snapshot=\"nightly\"]'", "'ready'");
	t_expect(&t->w, "return !!document.querySelector('#chart svg polyline.queued');");

	/* A change made now arrives through the event stream. */
	t_expect(&t->w, "return document.getElementById('stream-state').textContent === 'live';");
	assert_int_equal(server_proc_put(&t->s, "/v1/volume/live-1/create", t_spec_live), 200);
	t_expect(&t->w, "return !!document.querySelector("
			"'#events li[data-topic=\"volume\"][data-key=\"live-1\"]');");
	t_expect_text(&t->w, "'tr[data-volume=\"live-1\"]'", "'ready'");

	/* Markup in a name is text: shown as written, nothing ran, no element added. */
	t_expect_text(&t->w, "'tr[data-volume=\"evil\"]'", "'failed'");
	t_expect(&t->w, "return document.querySelector('tr[data-volume=\"evil\"] .vol-name')"
			".textContent === "
			"'" T_HOSTILE "';");
	/* The failed volume is the reconciler's failing item, on the chart too. */
	t_expect(&t->w, "return document.getElementById('now-failing').textContent === '1' &&"
			" document.querySelectorAll('#chart circle').length === 2;");
	t_expect(&t->w, "return window.csidPwned === undefined &&"
			" document.querySelectorAll('main img, main script').length === 0;");

	t_screenshot(&t->w, "console-dev.png");

	/* Delete through the dialog: the button stays off until the ID is typed. */
	assert_int_equal(webdriver_click(&t->w, "tr[data-volume=\"live-1\"] button"), 0);
	t_expect(&t->w, "return document.getElementById('confirm').open &&"
			" document.getElementById('confirm-ok').disabled;");
	assert_int_equal(webdriver_type(&t->w, "#confirm-input", "live-1"), 0);
	t_expect(&t->w, "return !document.getElementById('confirm-ok').disabled;");
	assert_int_equal(webdriver_click(&t->w, "#confirm-ok"), 0);
	assert_true(
	    server_proc_wait_doc(&t->s, "/v1/volume/live-1", server_proc_not_found, T_WAIT_MS));
	t_expect(&t->w, "return !document.querySelector('tr[data-volume=\"live-1\"]');");

	T_DEV_RUN(t, "volume", "unmount", "data", "-alloc", "web-1");
}

static int t_acl_setup(void **state)
{
	struct t_acl *t = calloc(1, sizeof(*t));

	*state = t;
	if (!t || claim_env_setup(&t->c, "single-node-writer") != 0)
		return -1;
	return webdriver_start(&t->w, T_BROWSER_MS);
}

static int t_acl_teardown(void **state)
{
	struct t_acl *t = *state;

	if (!t)
		return 0;
	webdriver_stop(&t->w);
	claim_env_teardown(&t->c);
	free(t);
	return 0;
}

static void test_console_acl(void **state)
{
	struct t_acl *t = *state;
	struct claim_env *c = &t->c;
	char url[128];

	CLAIM_ENV_RUN(c, "volume", "create", c->spec, "-wait");
	csictl_expect_ok(&c->r);
	csictl_runner_free(&c->rn, &c->r);
	CLAIM_ENV_RUN(c, "volume", "mount", "data", "-alloc", "web-1");
	csictl_expect_ok(&c->r);
	csictl_runner_free(&c->rn, &c->r);

	/* Without a token: the sign-in form, and no data in the page. */
	snprintf(url, sizeof(url), "%s/ui/", c->s.base);
	assert_int_equal(webdriver_get(&t->w, url), 0);
	t_expect(&t->w, "return !document.getElementById('login').hidden &&"
			" document.getElementById('app').hidden;");
	t_expect(&t->w, "return document.querySelectorAll('[data-volume], [data-node]').length"
			" === 0 && !document.body.textContent.includes('web-1');");

	/* A wrong token is refused with a message. */
	assert_int_equal(webdriver_type(&t->w, "#token", "not-the-token"), 0);
	assert_int_equal(webdriver_click(&t->w, "#login-submit"), 0);
	t_expect(&t->w, "return document.getElementById('login-error').textContent"
			".includes('refused') && document.getElementById('app').hidden;");

	assert_int_equal(webdriver_type(&t->w, "#token", CLAIM_ENV_TOKEN), 0);
	assert_int_equal(webdriver_click(&t->w, "#login-submit"), 0);
	t_expect_text(&t->w, "'tr[data-volume=\"data\"] [data-alloc=\"web-1\"]'", "'claimed'");
	t_expect_text(&t->w, "'tr[data-volume=\"data\"] [data-alloc=\"web-1\"]'",
		      "'" CLAIM_ENV_NODE "'");
	t_expect_text(&t->w, "'tr[data-node=\"" CLAIM_ENV_NODE "\"]'", "'ready'");
	t_expect_text(&t->w, "'tr[data-node=\"" CLAIM_ENV_NODE "\"]'", "'healthy'");
	/* The token is in this tab's session storage only. */
	t_expect(&t->w,
		 "return sessionStorage.getItem('csid.token') === '" CLAIM_ENV_TOKEN "' &&"
		 " !location.href.includes('" CLAIM_ENV_TOKEN "') && document.cookie === '' &&"
		 " !document.documentElement.outerHTML.includes('" CLAIM_ENV_TOKEN "');");

	t_expect(&t->w, "return document.getElementById('stream-state').textContent === 'live';");
	assert_int_equal(server_proc_put(&c->s, "/v1/volume/live-2/create", t_spec_live), 200);
	t_expect(&t->w, "return !!document.querySelector("
			"'#events li[data-topic=\"volume\"][data-key=\"live-2\"]');");
	t_expect_text(&t->w, "'tr[data-volume=\"live-2\"]'", "'ready'");
	t_screenshot(&t->w, "console-acl.png");

	/* Detach every claim of the node, confirmed: the claim is released and freed. */
	assert_int_equal(webdriver_click(&t->w, "tr[data-node=\"" CLAIM_ENV_NODE "\"] button"), 0);
	t_expect(&t->w, "return document.getElementById('confirm').open;");
	assert_int_equal(webdriver_type(&t->w, "#confirm-input", CLAIM_ENV_NODE), 0);
	assert_int_equal(webdriver_click(&t->w, "#confirm-ok"), 0);
	assert_true(
	    server_proc_wait_doc(&c->s, "/v1/volume/data", server_proc_volume_freed, T_WAIT_MS));
	t_expect(
	    &t->w,
	    "return !!document.querySelector("
	    "'#events li[data-topic=\"claim\"][data-type=\"freed\"][data-key=\"data/web-1\"]');");

	/* A reload keeps the session; signing out forgets the token. */
	assert_int_equal(webdriver_get(&t->w, url), 0);
	t_expect(&t->w, "return !!document.querySelector('tr[data-volume=\"live-2\"]');");
	assert_int_equal(webdriver_click(&t->w, "#logout"), 0);
	t_expect(&t->w, "return !document.getElementById('login').hidden &&"
			" sessionStorage.getItem('csid.token') === null &&"
			" document.querySelectorAll('[data-volume]').length === 0;");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_console_dev, t_dev_setup, t_dev_teardown),
	    cmocka_unit_test_setup_teardown(test_console_acl, t_acl_setup, t_acl_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
