/*
 * Unit tests of the mounter's naming (src/agent/mount_paths.c) and of the
 * mountinfo parser (src/agent/mountinfo.c): usage segments for every
 * mode, hostile names, path limits, directory creation, octal escapes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/mount_paths.h"
#include "agent/mountinfo.h"
#include "csi.pb-c.h"
#include "mounter_test.h"
#include "util/mkdir_p.h"

static void test_usage_segments(void **state)
{
	static const char *const access[MOUNT_ACCESS_COUNT_] = {
	    "single-node-reader-only",  "single-node-writer",     "single-node-single-writer",
	    "single-node-multi-writer", "multi-node-reader-only", "multi-node-single-writer",
	    "multi-node-multi-writer",
	};
	struct mount_usage u = {0};
	char seg[96], want[96];
	struct err e;

	for (int ro = 0; ro < 2; ro++)
		for (int a = 0; a < MOUNT_ATTACH_COUNT_; a++)
			for (int m = 0; m < MOUNT_ACCESS_COUNT_; m++) {
				u.read_only = ro;
				u.attachment = (enum mount_attachment)a;
				u.access = (enum mount_access)m;
				assert_int_equal(mount_usage_segment(&u, seg, sizeof(seg), &e), 0);
				snprintf(want, sizeof(want), "%s-%s-%s", ro ? "ro" : "rw",
					 a ? "block-device" : "file-system", access[m]);
				assert_string_equal(seg, want);
			}
	u.read_only = false;
	u.attachment = MOUNT_ATTACH_FILE_SYSTEM;
	u.access = MOUNT_ACCESS_SINGLE_NODE_WRITER;
	assert_int_equal(mount_usage_segment(&u, seg, sizeof(seg), &e), 0);
	assert_string_equal(seg, "rw-file-system-single-node-writer");
	assert_int_equal(mount_usage_segment(&u, seg, 10, &e), CSID_ETOOBIG);
	u.access = MOUNT_ACCESS_COUNT_;
	assert_int_equal(mount_usage_segment(&u, seg, sizeof(seg), &e), CSID_EINVAL);
	u.access = MOUNT_ACCESS_SINGLE_NODE_WRITER;
	u.attachment = (enum mount_attachment)7;
	assert_int_equal(mount_usage_segment(&u, seg, sizeof(seg), &e), CSID_EINVAL);
}

static void test_mode_names(void **state)
{
	enum mount_access acc;
	enum mount_attachment att;
	struct err e;

	for (int m = 0; m < MOUNT_ACCESS_COUNT_; m++) {
		assert_int_equal(
		    mount_access_parse(mount_access_name((enum mount_access)m), &acc, &e), 0);
		assert_int_equal(acc, m);
	}
	assert_int_equal(mount_access_csi_mode(MOUNT_ACCESS_SINGLE_NODE_WRITER),
			 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	assert_int_equal(mount_access_csi_mode(MOUNT_ACCESS_MULTI_NODE_MULTI_WRITER),
			 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER);
	assert_int_equal(mount_access_csi_mode(MOUNT_ACCESS_SINGLE_NODE_SINGLE_WRITER),
			 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER);
	assert_int_equal(mount_access_parse("SINGLE_NODE_WRITER", &acc, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "want one of"));
	assert_int_equal(mount_access_parse(NULL, &acc, &e), CSID_EINVAL);
	assert_int_equal(mount_attachment_parse("block-device", &att, &e), 0);
	assert_int_equal(att, MOUNT_ATTACH_BLOCK_DEVICE);
	assert_int_equal(mount_attachment_parse("file-system", &att, &e), 0);
	assert_int_equal(att, MOUNT_ATTACH_FILE_SYSTEM);
	assert_int_equal(mount_attachment_parse("block", &att, &e), CSID_EINVAL);
	assert_null(mount_access_name(MOUNT_ACCESS_COUNT_));
	assert_null(mount_attachment_name(MOUNT_ATTACH_COUNT_));
}

static void test_hostile_names(void **state)
{
	static const char *const bad[] = {"",     ".",       "..",      "../x", "x/..",
					  "a/b",  "/",       "/abs",    "a..b", "tab\there",
					  "nl\n", "del\x7f", "esc\x1b", "..."};
	static const char *const good[] = {
	    "vol-1", "a.b", ".hidden", "x_y", "UPPER", "unicode-\xc3\xa9", "with space", "a=b"};
	char big[1025];
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		assert_int_equal(mount_name_check("volume id", bad[i], &e), CSID_EINVAL);
		assert_non_null(strstr(e.msg, "volume id"));
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(*good); i++)
		assert_int_equal(mount_name_check("volume id", good[i], &e), 0);
	assert_int_equal(mount_name_check("volume id", NULL, &e), CSID_EINVAL);
	/* A NUL inside a length-counted name (as JSON "\u0000" decodes). */
	assert_int_equal(mount_name_check_len("alloc id", "ab\0cd", 5, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "NUL"));
	assert_int_equal(mount_name_check_len("alloc id", "ab\0cd", 2, &e), 0);
	/* 1 KiB, and the limit itself. */
	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(mount_name_check("volume id", big, &e), CSID_EINVAL);
	assert_true(strlen(e.msg) < 200); /* the message does not echo 1 KiB */
	big[MOUNT_NAME_MAX] = '\0';
	assert_int_equal(mount_name_check("volume id", big, &e), 0);
	big[MOUNT_NAME_MAX] = 'v';
	big[MOUNT_NAME_MAX + 1] = '\0';
	assert_int_equal(mount_name_check("volume id", big, &e), CSID_EINVAL);
	/* The message never carries control characters from the input. */
	assert_int_equal(mount_name_check("volume id", "a\x1b[31mred", &e), CSID_EINVAL);
	assert_null(strchr(e.msg, '\x1b'));
}

static void test_paths(void **state)
{
	struct mount_usage u = {.read_only = true,
				.attachment = MOUNT_ATTACH_BLOCK_DEVICE,
				.access = MOUNT_ACCESS_MULTI_NODE_READER_ONLY};
	char path[PATH_MAX];
	char dir[3000];
	char name[MOUNT_NAME_MAX + 1];
	struct err e;

	assert_int_equal(
	    mount_staging_path("/var/lib/csid", "p.csi", "vol1", &u, path, sizeof(path), &e), 0);
	assert_string_equal(path, "/var/lib/csid/mounts/staging/p.csi/vol1/"
				  "ro-block-device-multi-node-reader-only");
	assert_int_equal(
	    mount_target_path("/var/lib/csid", "alloc-1", "vol1", &u, path, sizeof(path), &e), 0);
	assert_string_equal(path, "/var/lib/csid/mounts/per-alloc/alloc-1/vol1/"
				  "ro-block-device-multi-node-reader-only");
	assert_int_equal(
	    mount_target_path("/var/lib/csid", "..", "vol1", &u, path, sizeof(path), &e),
	    CSID_EINVAL);
	assert_non_null(strstr(e.msg, "alloc id"));
	assert_int_equal(
	    mount_staging_path("/var/lib/csid", "p", "../../etc", &u, path, sizeof(path), &e),
	    CSID_EINVAL);
	assert_int_equal(mount_staging_path("relative", "p", "v", &u, path, sizeof(path), &e),
			 CSID_EINVAL);
	/* Longest names under a long data dir: still bounded by PATH_MAX. */
	memset(name, 'n', MOUNT_NAME_MAX);
	name[MOUNT_NAME_MAX] = '\0';
	dir[0] = '/';
	memset(dir + 1, 'd', sizeof(dir) - 2);
	dir[sizeof(dir) - 1] = '\0';
	assert_int_equal(mount_staging_path(dir, name, name, &u, path, sizeof(path), &e), 0);
	assert_true(strlen(path) < PATH_MAX);
	assert_int_equal(mount_staging_path(dir, name, name, &u, path, 3100, &e), CSID_ETOOBIG);
}

static void test_options_hash(void **state)
{
	const char *const f1[] = {"ab", "c"};
	const char *const f2[] = {"a", "bc"};
	struct mount_usage u = {.fs_type = "ext4", .mount_flags = f1, .n_mount_flags = 2};
	char h1[17], h2[17], h3[17];

	mount_usage_options_hash(&u, h1);
	u.mount_flags = f2;
	mount_usage_options_hash(&u, h2);
	u.n_mount_flags = 0;
	mount_usage_options_hash(&u, h3);
	assert_int_equal(strlen(h1), 16);
	assert_string_not_equal(h1, h2);
	assert_string_not_equal(h2, h3);
	u.mount_flags = f1;
	u.n_mount_flags = 2;
	mount_usage_options_hash(&u, h2);
	assert_string_equal(h1, h2);
}

static void test_mkdir_p(void **state)
{
	const char *dir = mt_scratch_dir();
	char path[256];
	FILE *fp;
	struct err e;

	snprintf(path, sizeof(path), "%s/a/b/c", dir);
	assert_int_equal(mkdir_p(path, &e), 0);
	assert_int_equal(mkdir_p(path, &e), 0);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/file", dir);
	fp = fopen(path, "w");
	assert_non_null(fp);
	fclose(fp);
	assert_int_equal(mkdir_p(path, &e), CSID_EEXIST);
	snprintf(path, sizeof(path), "%s/file/sub", dir);
	assert_int_not_equal(mkdir_p(path, &e), 0);
	snprintf(path, sizeof(path), "%s/file/sub/deeper", dir);
	assert_int_not_equal(mkdir_p(path, &e), 0);
	assert_int_equal(mkdir_p("", &e), CSID_EINVAL);
	/* Some parents there, some not; a trailing slash. */
	snprintf(path, sizeof(path), "%s/a/b/x/y/z", dir);
	assert_int_equal(mkdir_p(path, &e), 0);
	assert_int_equal(access(path, F_OK), 0);
	snprintf(path, sizeof(path), "%s/a/q/", dir);
	assert_int_equal(mkdir_p(path, &e), 0);
	assert_int_equal(access(path, F_OK), 0);
	/* A relative path works too. */
	assert_int_equal(chdir(dir), 0);
	assert_int_equal(mkdir_p("rel/one/two", &e), 0);
	assert_int_equal(access("rel/one/two", F_OK), 0);
	assert_int_equal(chdir("/"), 0);
}

static void test_mountinfo_parse(void **state)
{
	static const char text[] =
	    "22 27 0:21 / /proc rw,relatime - proc proc rw\n"
	    "36 35 98:0 /mnt1 /mnt/with\\040space rw,noatime master:1 - ext3 /dev/root rw\n"
	    "37 35 98:0 / /mnt/back\\134slash rw - ext3 /dev/root rw\n"
	    "garbage line\n"
	    "38 35 98:0 / relative rw - ext3 x rw\n"
	    "39 35 98:0 / /proc rw - proc proc rw\n"
	    "40 35 98:0 / /a/tail";
	struct mount_set s;
	struct err e;

	assert_int_equal(mountinfo_parse(text, sizeof(text) - 1, &s, &e), 0);
	assert_int_equal(s.n, 4);
	assert_true(mount_set_has(&s, "/proc"));
	assert_true(mount_set_has(&s, "/mnt/with space"));
	assert_true(mount_set_has(&s, "/mnt/back\\slash"));
	assert_true(mount_set_has(&s, "/a/tail"));
	assert_false(mount_set_has(&s, "/mnt"));
	assert_false(mount_set_has(&s, "relative"));
	assert_int_equal(mount_set_add(&s, "/b", &e), 0);
	assert_int_equal(mount_set_add(&s, "/b", &e), 0);
	assert_int_equal(s.n, 5);
	assert_true(mount_set_has(&s, "/b"));
	mount_set_clear(&s);
	assert_int_equal(s.n, 0);
	assert_int_equal(mountinfo_parse("", 0, &s, &e), 0);
	assert_int_equal(s.n, 0);
}

static void test_mountinfo_real(void **state)
{
	bool mounted = false;
	struct err e;

	/*
	 * /proc is a mount point wherever /proc/self/mountinfo can be read ("/"
	 * is not, inside a chroot); a directory inside it is not.
	 */
	assert_int_equal(mount_table_is_mounted(mountinfo_table(), "/proc", &mounted, &e), 0);
	assert_true(mounted);
	assert_int_equal(mount_table_is_mounted(mountinfo_table(), "/proc/self", &mounted, &e), 0);
	assert_false(mounted);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_usage_segments),
	    cmocka_unit_test(test_mode_names),
	    cmocka_unit_test(test_hostile_names),
	    cmocka_unit_test(test_paths),
	    cmocka_unit_test(test_options_hash),
	    cmocka_unit_test_setup_teardown(test_mkdir_p, mt_scratch_setup, mt_scratch_teardown),
	    cmocka_unit_test(test_mountinfo_parse),
	    cmocka_unit_test(test_mountinfo_real),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
