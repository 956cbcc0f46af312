/*
 * End-to-end: the install rules (what `make install` runs), into a
 * DESTDIR of the test's own: programs, man pages, bash completion,
 * example configs and systemd units land where the units and the docs
 * say; the units run the installed csid with the installed configs; the
 * installed csid and csictl print the version; a second install keeps a
 * config the operator changed. (`make deb-check` checks the .deb in a
 * Debian 12 chroot; see the README.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csictl_run.h"
#include "proc_guard.h"

#define RUN_MS 120000

struct fixture {
	char dir[64];
	char dest[96];
	struct csictl_run r;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	snprintf(f->dir, sizeof(f->dir), "/tmp/csid-install-XXXXXX");
	if (!mkdtemp(f->dir)) {
		free(f);
		return -1;
	}
	proc_guard_track_dir(f->dir);
	snprintf(f->dest, sizeof(f->dest), "%s/root", f->dir);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	csictl_run_free(&f->r);
	proc_guard_clear_dir(f->dir);
	proc_guard_untrack_dir(f->dir);
	free(f);
	return 0;
}

/* Runs a shell script in the fixture's directory; fails the test unless it exits 0. */
static void sh(struct fixture *f, const char *script)
{
	char *argv[] = {"-ec", (char *)script, NULL};

	csictl_run_free(&f->r);
	assert_int_equal(csictl_run_prog(f->dir, "/bin/sh", argv, NULL, RUN_MS, &f->r), 0);
	if (f->r.status != 0)
		fail_msg("script failed (status %d):\n%s\nstdout:\n%s\nstderr:\n%s", f->r.status,
			 script, f->r.out, f->r.err);
}

static void test_install(void **state)
{
	struct fixture *f = *state;
	char script[2048];
	const char *files[] = {
	    "bin/csid",
	    "bin/csictl",
	    "bin/csictl-csi",
	    "bin/csi-hostpath",
	    "share/man/man8/csid.8.gz",
	    "share/man/man1/csictl.1.gz",
	    "share/bash-completion/completions/csictl",
	    "lib/systemd/system/csid-server.service",
	    "lib/systemd/system/csid-agent.service",
	};
	char prefix[256];

	snprintf(script, sizeof(script), "DESTDIR=%s cmake --install %s >/dev/null", f->dest,
		 CSID_BUILD_DIR);
	sh(f, script);
	/* The prefix the build tree was configured with. */
	snprintf(script, sizeof(script),
		 "sed -n 's/^CMAKE_INSTALL_PREFIX:PATH=//p' %s/CMakeCache.txt", CSID_BUILD_DIR);
	sh(f, script);
	f->r.out[strcspn(f->r.out, "\n")] = '\0';
	snprintf(prefix, sizeof(prefix), "%s", f->r.out);
	assert_true(prefix[0] == '/');
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(script, sizeof(script), "test -s %s%s/%s", f->dest, prefix, files[i]);
		sh(f, script);
	}
	/* The units run the installed csid with the installed configs, which exist. */
	snprintf(script, sizeof(script),
		 "u=%1$s%2$s/lib/systemd/system; "
		 "s=$(sed -n 's/^ExecStart=//p' $u/csid-server.service); "
		 "a=$(sed -n 's/^ExecStart=//p' $u/csid-agent.service); "
		 "echo \"$s\"; echo \"$a\"; "
		 "test \"${s%%%% *}\" = %2$s/bin/csid; test \"${a%%%% *}\" = %2$s/bin/csid; "
		 "test -s %1$s${s##* }; test -s %1$s${a##* }; "
		 "grep -qx Type=notify $u/csid-server.service; "
		 "grep -qx Type=notify $u/csid-agent.service; "
		 "grep -qx Restart=on-failure $u/csid-agent.service",
		 f->dest, prefix);
	sh(f, script);
	assert_non_null(strstr(f->r.out, " server -config /"));
	assert_non_null(strstr(f->r.out, " agent -config /"));
	/* The installed programs run. */
	snprintf(script, sizeof(script),
		 "%1$s%2$s/bin/csid version; %1$s%2$s/bin/csictl version -client", f->dest, prefix);
	sh(f, script);
	assert_string_equal(f->r.out, "csid " CSID_VERSION "\ncsictl " CSID_VERSION "\n");
	/* The completion installed is the one csictl prints. */
	snprintf(script, sizeof(script),
		 "%1$s%2$s/bin/csictl completion bash > printed.bash; "
		 "cmp printed.bash %1$s%2$s/share/bash-completion/completions/csictl",
		 f->dest, prefix);
	sh(f, script);
	/* A second install keeps the config the operator changed. */
	snprintf(script, sizeof(script),
		 "c=$(find %1$s -name server.json); test -n \"$c\"; "
		 "echo '{\"data_dir\": \"/srv/mine\"}' > $c; "
		 "DESTDIR=%1$s cmake --install %2$s >/dev/null; cat $c",
		 f->dest, CSID_BUILD_DIR);
	sh(f, script);
	assert_string_equal(f->r.out, "{\"data_dir\": \"/srv/mine\"}\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_install, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
