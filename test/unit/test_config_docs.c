/*
 * docs/configuration.md against the programs, so the page cannot drift:
 *   - every key the agent's and the server's parsers accept (their
 *     keysets, the arrays they check documents against) has a row in its
 *     config's table, and every row names a key a parser accepts;
 *   - every example (```json server / ```json agent) and every installed
 *     example config (packaging/) parses with the real parser;
 *   - every flag in `csid <command> -h` has a row, and every row a flag;
 *   - every csictl command has its row with exactly its own flags, and
 *     every csi command its row;
 *   - the man pages made from the page (build/man) format with groff and
 *     man without a warning, and hold what the page holds.
 * A failure lists every missing or stale entry with the row to add.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent/config.h"
#include "csictl_cmds.h"
#include "csictl_csi.h"
#include "csictl_run.h"
#include "server/server_config.h"

#define DOC CSID_SOURCE_DIR "/docs/configuration.md"
#define LINES_MAX 4096
#define REPORT_MAX 16384

/* The page as lines, each with the ## and ### headings it is under. */
struct doc {
	char *text;
	char *line[LINES_MAX];
	const char *h2[LINES_MAX];
	const char *h3[LINES_MAX];
	int n;
};

/* What failed, one line each; the test fails once with all of it. */
struct report {
	char buf[REPORT_MAX];
	size_t len;
	int n;
};

static void report(struct report *r, const char *fmt, ...)
{
	va_list ap;

	if (r->len + 2 >= sizeof(r->buf))
		return;
	va_start(ap, fmt);
	r->len += (size_t)vsnprintf(r->buf + r->len, sizeof(r->buf) - r->len - 1, fmt, ap);
	va_end(ap);
	if (r->len > sizeof(r->buf) - 2)
		r->len = sizeof(r->buf) - 2;
	r->buf[r->len++] = '\n';
	r->buf[r->len] = '\0';
	r->n++;
}

static void report_check(const struct report *r)
{
	if (r->n)
		fail_msg("docs/configuration.md: %d problem(s):\n%s", r->n, r->buf);
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

static void doc_load(struct doc *d)
{
	const char *h2 = "", *h3 = "";
	char *p, *sv = NULL;

	memset(d, 0, sizeof(*d));
	d->text = slurp(DOC);
	assert_non_null(d->text);
	for (p = strtok_r(d->text, "\n", &sv); p && d->n < LINES_MAX;
	     p = strtok_r(NULL, "\n", &sv)) {
		if (strncmp(p, "## ", 3) == 0) {
			h2 = p + 3;
			h3 = "";
		} else if (strncmp(p, "### ", 4) == 0) {
			h3 = p + 4;
		}
		d->h2[d->n] = h2;
		d->h3[d->n] = h3;
		d->line[d->n++] = p;
	}
	assert_true(d->n < LINES_MAX);
}

/* The text of a table row's first cell when it is `code`, into buf; else NULL. */
static const char *row_key(const char *line, char *buf, size_t len)
{
	const char *end;

	if (strncmp(line, "| `", 3) != 0 || !(end = strchr(line + 3, '`')))
		return NULL;
	snprintf(buf, len, "%.*s", (int)(end - line - 3), line + 3);
	return buf;
}

/* Whether the section h2 has a row whose first cell is `key`. */
static bool doc_has_row(const struct doc *d, const char *h2, const char *key)
{
	char buf[256];

	for (int i = 0; i < d->n; i++)
		if (strcmp(d->h2[i], h2) == 0 && row_key(d->line[i], buf, sizeof(buf)) &&
		    strcmp(buf, key) == 0)
			return true;
	return false;
}

static bool keysets_have(const struct conf_keyset *sets, const char *full)
{
	char buf[256];

	for (const struct conf_keyset *s = sets; s->path; s++)
		for (const char *const *k = s->keys; *k; k++) {
			snprintf(buf, sizeof(buf), "%s%s%s", s->path, s->path[0] ? "." : "", *k);
			if (strcmp(buf, full) == 0)
				return true;
		}
	return false;
}

/* Rows of the config section h2 against the parser's keysets, both ways. */
static void check_keys(const struct doc *d, const char *h2, const char *parser,
		       const struct conf_keyset *sets, struct report *r)
{
	char full[256], buf[256];
	int rows = 0;

	for (const struct conf_keyset *s = sets; s->path; s++)
		for (const char *const *k = s->keys; *k; k++) {
			snprintf(full, sizeof(full), "%s%s%s", s->path, s->path[0] ? "." : "", *k);
			if (!doc_has_row(d, h2, full))
				report(r,
				       "\"## %s\" has no row for the key `%s`, which %s accepts; "
				       "add: | `%s` | type | default | meaning |",
				       h2, full, parser, full);
		}
	for (int i = 0; i < d->n; i++)
		if (strcmp(d->h2[i], h2) == 0 && row_key(d->line[i], buf, sizeof(buf))) {
			rows++;
			if (!keysets_have(sets, buf))
				report(r, "\"## %s\" documents `%s`, which %s does not accept", h2,
				       buf, parser);
		}
	if (!rows)
		report(r, "no section \"## %s\" with a table of keys", h2);
}

static void test_config_keys(void **state)
{
	struct doc *d = malloc(sizeof(*d));
	struct report *r = calloc(1, sizeof(*r));

	(void)state;
	assert_non_null(d);
	assert_non_null(r);
	doc_load(d);
	check_keys(d, "Server configuration", "src/server/server_config.c", server_config_keysets,
		   r);
	check_keys(d, "Agent configuration", "src/agent/config.c", config_keysets, r);
	free(d->text);
	free(d);
	report_check(r);
	free(r);
}

/* Parses text as a config of kind ("server" or "agent"); 0 or the error in e. */
static int parse_config(const char *kind, const char *text, struct err *e)
{
	int rc;

	if (strcmp(kind, "server") == 0) {
		struct server_config_file *cfg;

		rc = server_config_parse(text, strlen(text), &cfg, e);
		server_config_free(cfg);
	} else {
		struct config *cfg;

		rc = config_parse(text, strlen(text), &cfg, e);
		config_free(cfg);
	}
	return rc;
}

static void test_examples(void **state)
{
	char *text = slurp(DOC), *p;
	int n[2] = {0, 0}, line = 1;
	struct report r = {.n = 0};
	const char *files[] = {"packaging/server.json", "packaging/agent.json"};

	(void)state;
	assert_non_null(text);
	for (p = text; *p; p++) {
		const char *kind = NULL;
		char *end;
		struct err e;

		if (p != text && p[-1] == '\n' && strncmp(p, "```json server\n", 15) == 0)
			kind = "server";
		else if (p != text && p[-1] == '\n' && strncmp(p, "```json agent\n", 14) == 0)
			kind = "agent";
		if (*p == '\n')
			line++;
		if (!kind)
			continue;
		p = strchr(p, '\n') + 1;
		end = strstr(p, "\n```");
		assert_non_null(end);
		*end = '\0';
		err_clear(&e);
		if (parse_config(kind, p, &e))
			report(&r, "the %s example at line %d does not parse: %s", kind, line + 1,
			       e.msg);
		n[kind[0] == 'a']++;
		for (char *q = p; q < end; q++)
			line += *q == '\n';
		p = end + 1;
	}
	free(text);
	if (n[0] < 2 || n[1] < 2)
		report(&r, "expected at least 2 server and 2 agent examples, found %d and %d", n[0],
		       n[1]);
	for (size_t i = 0; i < 2; i++) {
		char path[512];
		struct err e;

		snprintf(path, sizeof(path), "%s/%s", CSID_SOURCE_DIR, files[i]);
		text = slurp(path);
		err_clear(&e);
		if (!text)
			report(&r, "cannot read %s", files[i]);
		else if (parse_config(i == 0 ? "server" : "agent", text, &e))
			report(&r, "%s does not parse: %s", files[i], e.msg);
		free(text);
	}
	report_check(&r);
}

/* The flags in a usage text: every "[-name" before the first blank line. */
static int usage_flags(const char *usage, char names[][32], int max)
{
	const char *end = strstr(usage, "\n\n"), *p = usage;
	int n = 0;

	while ((p = strstr(p, "[-")) && (!end || p < end) && n < max) {
		size_t len = strspn(p + 2, "abcdefghijklmnopqrstuvwxyz-");

		snprintf(names[n++], 32, "%.*s", (int)len, p + 2);
		p += 2 + len;
	}
	return n;
}

/* A directory for the capture files of the programs run; removed by the group teardown. */
static char tmp_dir[] = "/tmp/csid-docs-XXXXXX";

static int group_setup(void **state)
{
	(void)state;
	return mkdtemp(tmp_dir) ? 0 : -1;
}

static int group_teardown(void **state)
{
	char path[64];

	(void)state;
	snprintf(path, sizeof(path), "%s/csictl.out", tmp_dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/csictl.err", tmp_dir);
	unlink(path);
	rmdir(tmp_dir);
	return 0;
}

static void test_csid_flags(void **state)
{
	const char *subs[] = {"server", "agent", "dev"};
	struct doc *d = malloc(sizeof(*d));
	struct report *r = calloc(1, sizeof(*r));
	const char *dir = tmp_dir;

	(void)state;
	assert_non_null(d);
	assert_non_null(r);
	doc_load(d);
	for (size_t s = 0; s < sizeof(subs) / sizeof(subs[0]); s++) {
		char *argv[] = {(char *)subs[s], "-h", NULL}, h3[64], names[16][32], buf[256];
		struct csictl_run run;
		int n, rows = 0;

		assert_int_equal(csictl_run_prog(dir, CSID_BIN, argv, NULL, 60000, &run), 0);
		assert_int_equal(run.status, 0);
		n = usage_flags(run.out, names, 16);
		assert_true(n > 0);
		snprintf(h3, sizeof(h3), "csid %s", subs[s]);
		for (int i = 0; i < n; i++) {
			bool found = false;

			for (int l = 0; l < d->n; l++)
				if (strcmp(d->h3[l], h3) == 0 &&
				    row_key(d->line[l], buf, sizeof(buf)) && buf[0] == '-' &&
				    strncmp(buf + 1, names[i], strlen(names[i])) == 0 &&
				    (buf[1 + strlen(names[i])] == ' ' ||
				     !buf[1 + strlen(names[i])]))
					found = true;
			if (!found)
				report(r,
				       "\"### %s\" has no row for its flag -%s; add: | `-%s VALUE` "
				       "| meaning |",
				       h3, names[i], names[i]);
		}
		for (int l = 0; l < d->n; l++) {
			bool known = false;

			if (strcmp(d->h3[l], h3) != 0 || !row_key(d->line[l], buf, sizeof(buf)))
				continue;
			rows++;
			buf[strcspn(buf, " ")] = '\0';
			for (int i = 0; i < n; i++)
				known |= strcmp(buf + 1, names[i]) == 0;
			if (!known)
				report(r,
				       "\"### %s\" documents %s, which `csid %s -h` does not show",
				       h3, buf, subs[s]);
		}
		if (!rows)
			report(r, "no section \"### %s\" with a table of flags", h3);
		csictl_run_free(&run);
	}
	free(d->text);
	free(d);
	report_check(r);
	free(r);
}

/* The start of the row a csictl command must have: "| `csictl PATH ARGS` | FLAGS |". */
static void csictl_row(const struct csictl_cmd *c, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "| `csictl %s%s%s` | ", c->path, c->args ? " " : "",
				    c->args ? c->args : "");
	bool any = false;

	for (const char *p = c->flags; p && *p && n < len;) {
		size_t w = strcspn(p, " ");
		static const char *const common[] = {"address", "token", "o", "timeout"};
		bool skip = false;

		for (size_t i = 0; i < 4; i++)
			skip |= strlen(common[i]) == w && strncmp(p, common[i], w) == 0;
		if (!skip && w) {
			n += (size_t)snprintf(buf + n, len - n, "%s`-%.*s`", any ? " " : "", (int)w,
					      p);
			any = true;
		}
		p += w;
		p += strspn(p, " ");
	}
	if (n < len)
		snprintf(buf + n, len - n, "%s |", any ? "" : "—");
}

static bool doc_has_prefix(const struct doc *d, const char *prefix)
{
	for (int i = 0; i < d->n; i++)
		if (strncmp(d->line[i], prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

static void test_csictl_commands(void **state)
{
	const struct csictl_csi_cmd *groups[] = {csictl_csi_identity_cmds, csictl_csi_volume_cmds,
						 csictl_csi_node_cmds, csictl_csi_snapshot_cmds,
						 csictl_csi_group_cmds};
	struct doc *d = malloc(sizeof(*d));
	struct report *r = calloc(1, sizeof(*r));
	char row[512];

	(void)state;
	assert_non_null(d);
	assert_non_null(r);
	doc_load(d);
	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++) {
		if (!c->path[0] || strncmp(c->path, "csi", 3) == 0 || csictl_cmd_is_group(c))
			continue;
		csictl_row(c, row, sizeof(row));
		if (!doc_has_prefix(d, row))
			report(r,
			       "\"## csictl\" lacks the row of `csictl %s` (or its flags differ); "
			       "it starts: %s",
			       c->path, row);
	}
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
		for (const struct csictl_csi_cmd *c = groups[g]; c->name; c++) {
			snprintf(row, sizeof(row), "| `csictl csi %s` | ", c->usage);
			if (!doc_has_prefix(d, row))
				report(r, "\"### csictl csi\" lacks the row %s what it does |",
				       row);
		}
	free(d->text);
	free(d);
	report_check(r);
	free(r);
}

/* groff with every warning on must stay silent, and man must render the page. */
static void check_man(const char *dir, const char *page, const char *const *needles)
{
	char path[512], script[1024];
	char *argv[] = {"-c", script, NULL};
	struct csictl_run run;

	snprintf(path, sizeof(path), "%s/man/%s", CSID_BUILD_DIR, page);
	assert_int_equal(access(path, R_OK), 0);
	snprintf(script, sizeof(script), "groff -man -Tutf8 -ww -z %s", path);
	assert_int_equal(csictl_run_prog(dir, "/bin/sh", argv, NULL, 60000, &run), 0);
	if (run.status != 0 || run.err[0])
		fail_msg("groff warns about %s (status %d):\n%s", page, run.status, run.err);
	csictl_run_free(&run);
	snprintf(script, sizeof(script),
		 "MANWIDTH=100 MANPAGER=cat man --warnings -E UTF-8 -l %s | sed 's/\\x08.//g'",
		 path);
	assert_int_equal(csictl_run_prog(dir, "/bin/sh", argv, NULL, 60000, &run), 0);
	if (run.status != 0 || run.err[0])
		fail_msg("man -l %s (status %d):\n%s", page, run.status, run.err);
	for (const char *const *n = needles; *n; n++)
		if (!strstr(run.out, *n))
			fail_msg("man -l %s does not show \"%s\":\n%s", page, *n, run.out);
	csictl_run_free(&run);
}

static void test_man_pages(void **state)
{
	const char *csid[] = {
	    "csid - CSI volumes", "timings.heartbeat", "acl_tokens[].secret", "-node-name NAME",
	    "Default: 10s.",      "\"data_dir\":",     "DESCRIPTION",         NULL};
	const char *csictl[] = {"csictl volume snapshot create VOL SNAP", "-owner-cgroup",
				"csictl csi group-snapshot create NAME VOL...", "CSID_AGENT_ADDR",
				NULL};
	(void)state;
	check_man(tmp_dir, "csid.8", csid);
	check_man(tmp_dir, "csictl.1", csictl);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_config_keys), cmocka_unit_test(test_examples),
	    cmocka_unit_test(test_csid_flags),  cmocka_unit_test(test_csictl_commands),
	    cmocka_unit_test(test_man_pages),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
