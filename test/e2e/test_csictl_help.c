/*
 * End-to-end: the help and the bash completion of the real programs.
 * Every command of csictl's table (csictl_cmds.h) answers -h and --help
 * with its own help, not its group's; csid's subcommands too. The table
 * names the same csi commands as csictl-csi's own tables. The completion
 * script that `csictl completion bash` prints is sourced in a real bash,
 * and COMPREPLY is checked for a few command lines.
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

#include "csictl_cmds.h"
#include "csictl_csi.h"
#include "csictl_run.h"

#define RUN_MS 60000
#define WORDS_MAX 8

struct fixture {
	char dir[64];
	struct csictl_runner rn;
	struct csictl_run r;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-help-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	f->rn.dir = f->dir;
	f->rn.deadline_ms = RUN_MS;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char path[128];
	const char *files[] = {"csictl.out", "csictl.err", "csictl.bash", "vol-spec.json"};

	csictl_runner_cleanup(&f->rn);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", f->dir, files[i]);
		unlink(path);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

/* Splits path into words (in buf) and appends flag: argv for csictl. */
static void split(const char *path, const char *flag, char *buf, size_t len, char **argv)
{
	int n = 0;

	snprintf(buf, len, "%s", path);
	for (char *sv, *w = strtok_r(buf, " ", &sv); w && n < WORDS_MAX;
	     w = strtok_r(NULL, " ", &sv))
		argv[n++] = w;
	argv[n++] = (char *)flag;
	argv[n] = NULL;
}

/* The help of cmd starts with its own usage line; a group lists its children. */
static void check_help(struct fixture *f, const struct csictl_cmd *c, const char *flag)
{
	char buf[128], want[160], *argv[WORDS_MAX + 2];
	struct csictl_run *r = &f->r;

	split(c->path, flag, buf, sizeof(buf), argv);
	csictl_runner_run(&f->rn, r, NULL, argv);
	if (r->status != 0 || strncmp(r->out, "usage: csictl ", 14) != 0)
		fail_msg("csictl %s %s: status %d, stdout:\n%s\nstderr:\n%s", c->path, flag,
			 r->status, r->out, r->err);
	snprintf(want, sizeof(want), "usage: csictl %s ", c->path);
	if (strncmp(r->out, want, strlen(want)) != 0)
		fail_msg("csictl %s %s printed another command's help:\n%s", c->path, flag, r->out);
	if (csictl_cmd_is_group(c)) {
		for (const struct csictl_cmd *s = csictl_cmds; s->path; s++) {
			const char *last = strrchr(s->path, ' ');

			if (strncmp(s->path, c->path, strlen(c->path)) != 0 ||
			    s->path[strlen(c->path)] != ' ' || last != s->path + strlen(c->path))
				continue;
			/* csictl-csi lists "snapshot create ...", csictl "create". */
			snprintf(want, sizeof(want), "\n  %s",
				 strncmp(s->path, "csi ", 4) == 0 ? s->path + 4 : last + 1);
			if (!strstr(r->out, want))
				fail_msg("csictl %s %s does not list %s:\n%s", c->path, flag,
					 s->path, r->out);
		}
	} else if (strstr(r->out, "Commands:")) {
		fail_msg("csictl %s %s lists commands:\n%s", c->path, flag, r->out);
	}
	csictl_runner_free(&f->rn, r);
}

static void test_every_command(void **state)
{
	struct fixture *f = *state;
	int n = 0;

	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++) {
		if (!c->path[0])
			continue;
		check_help(f, c, "--help");
		check_help(f, c, "-h");
		n++;
	}
	assert_true(n > 50);
}

/* The help of the top level, and of a command asked for after its arguments. */
static void test_placement(void **state)
{
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;
	char *top[] = {"-h", NULL};
	char *late[] = {"volume", "snapshot", "create", "data", "nightly", "-wait", "--help", NULL};

	csictl_runner_run(&f->rn, r, NULL, top);
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "usage: csictl COMMAND"));
	assert_non_null(strstr(r->out, "\n  volume "));
	csictl_runner_free(&f->rn, r);

	csictl_runner_run(&f->rn, r, NULL, late);
	csictl_expect_ok(r);
	assert_non_null(strstr(r->out, "usage: csictl volume snapshot create VOL SNAP"));
	assert_non_null(strstr(r->out, "-wait"));
	assert_null(strstr(r->out, "-per-page"));
	csictl_runner_free(&f->rn, r);
}

static void test_csid(void **state)
{
	struct fixture *f = *state;
	const char *subs[] = {"agent", "server", "dev"};
	struct csictl_run *r = &f->r;
	char *version[] = {"version", NULL};

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		const char *flags[] = {"-h", "--help"};

		for (size_t k = 0; k < 2; k++) {
			char *argv[] = {(char *)subs[i], (char *)flags[k], NULL}, want[64];

			assert_int_equal(csictl_run_prog(f->dir, CSID_BIN, argv, NULL, RUN_MS, r),
					 0);
			snprintf(want, sizeof(want), "usage: csid %s ", subs[i]);
			if (r->status != 0 || strncmp(r->out, want, strlen(want)) != 0)
				fail_msg("csid %s %s: status %d:\n%s%s", subs[i], flags[k],
					 r->status, r->out, r->err);
			csictl_run_free(r);
		}
	}
	assert_int_equal(csictl_run_prog(f->dir, CSID_BIN, version, NULL, RUN_MS, r), 0);
	assert_int_equal(r->status, 0);
	assert_string_equal(r->out, "csid " CSID_VERSION "\n");
	csictl_run_free(r);
}

/* csictl's table and csictl-csi's tables name the same csi commands. */
static void test_csi_table(void **state)
{
	const struct csictl_csi_cmd *groups[] = {csictl_csi_identity_cmds, csictl_csi_volume_cmds,
						 csictl_csi_node_cmds, csictl_csi_snapshot_cmds,
						 csictl_csi_group_cmds};
	char path[128];
	int ours = 0, theirs = 0;

	(void)state;
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++)
		for (const struct csictl_csi_cmd *c = groups[g]; c->name; c++) {
			snprintf(path, sizeof(path), "csi %s", c->name);
			if (!csictl_cmd_get(path))
				fail_msg("csictl_cmds.c lacks \"%s\"", path);
			theirs++;
		}
	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++)
		if (strncmp(c->path, "csi ", 4) == 0 && !csictl_cmd_is_group(c))
			ours++;
	assert_int_equal(ours, theirs);
}

/*
 * Checks COMPREPLY of the completion function for line, a bash word list
 * with the cursor on its last word ('' for a new, empty one).
 */
static void complete(struct fixture *f, const char *line, const char *want)
{
	char script[1024];
	char *argv[] = {"--norc", "--noprofile", "-c", script, NULL};
	struct csictl_run *r = &f->r;

	snprintf(script, sizeof(script),
		 "cd %s && source ./csictl.bash && complete -p csictl && "
		 "COMP_WORDS=(%s) && COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 )) && _csictl && "
		 "echo \"<${COMPREPLY[*]}>\"",
		 f->dir, line);
	assert_int_equal(csictl_run_prog(f->dir, "/bin/bash", argv, NULL, RUN_MS, r), 0);
	if (r->status != 0 || !strstr(r->out, "complete -F _csictl csictl") ||
	    !strstr(r->out, want))
		fail_msg("completing \"%s\": status %d, want %s, stdout:\n%s\nstderr:\n%s", line,
			 r->status, want, r->out, r->err);
	csictl_run_free(r);
}

static void test_bash_completion(void **state)
{
	struct fixture *f = *state;
	struct csictl_run *r = &f->r;
	char *gen[] = {"completion", "bash", NULL}, path[128];
	FILE *out;

	csictl_runner_run(&f->rn, r, NULL, gen);
	csictl_expect_ok(r);
	snprintf(path, sizeof(path), "%s/csictl.bash", f->dir);
	out = fopen(path, "w");
	assert_non_null(out);
	fputs(r->out, out);
	fclose(out);
	csictl_runner_free(&f->rn, r);
	snprintf(path, sizeof(path), "%s/vol-spec.json", f->dir);
	out = fopen(path, "w");
	assert_non_null(out);
	fclose(out);

	complete(f, "csictl vol", "<volume>");
	complete(f, "csictl volume snap", "<snapshot>");
	complete(f, "csictl volume snapshot c", "<create>");
	complete(f, "csictl csi snapshot ''", "<create delete list>");
	complete(f, "csictl volume snapshot create data n -w", "<-wait>");
	complete(f, "csictl volume claim data -al", "<-alloc>");
	complete(f, "csictl volume mount data -alloc a1 -le", "<-lease>");
	complete(f, "csictl agent -address unix:/x mo", "<mounts mount>");
	complete(f, "csictl volume create vol-", "<vol-spec.json>");
	complete(f, "csictl node status ''", "<>");
	complete(f, "csictl ve", "<version>");
	complete(f, "csictl completion ''", "<bash>");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_every_command, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_placement, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_csid, setup, teardown),
	    cmocka_unit_test(test_csi_table),
	    cmocka_unit_test_setup_teardown(test_bash_completion, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
