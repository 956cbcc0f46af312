/*
 * Unit tests of csictl's building blocks: flag parsing, sizes, durations,
 * tables, cleaning of hostile strings, and the protobuf-c to JSON walker
 * (which must never print secrets).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <unistd.h>

#include "csictl_csi.h"
#include "csictl_flags.h"
#include "csictl_out.h"

static void test_size_parse(void **state)
{
	static const struct {
		const char *in;
		int64_t want;
	} ok[] = {
	    {"0", 0},
	    {"1", 1},
	    {"1K", 1000},
	    {"1Ki", 1024},
	    {"3Mi", 3 << 20},
	    {"2M", 2000000},
	    {"1Gi", 1 << 30},
	    {"5G", 5000000000LL},
	    {"2Ti", 2LL << 40},
	    {"7T", 7000000000000LL},
	    {"9223372036854775807", INT64_MAX},
	    {"8388607Ti", 8388607LL << 40},
	    {"1GiB", 1 << 30},
	    {"2KB", 2000},
	};
	static const char *const bad[] = {"",     "Gi",  "-1",   "1.5Gi", "1gi", "1GiBs",
					  "1 Gi", "12Q", "0x10", "+5",    "1Ki1"};
	struct err e;
	int64_t v;

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		assert_int_equal(csictl_size_parse(ok[i].in, &v, &e), 0);
		assert_true(v == ok[i].want);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(csictl_size_parse(bad[i], &v, &e), CSID_EINVAL);
		assert_non_null(strstr(e.msg, "invalid size"));
	}
	assert_int_equal(csictl_size_parse("9223372036854775808", &v, &e), CSID_ERANGE);
	assert_int_equal(csictl_size_parse("8388608Ti", &v, &e), CSID_ERANGE);
	assert_int_equal(csictl_size_parse("99999999999999999999999999Gi", &v, &e), CSID_ERANGE);
	assert_non_null(strstr(e.msg, "too large"));
	assert_int_equal(csictl_size_parse(NULL, &v, &e), CSID_EINVAL);
}

static void test_size_format(void **state)
{
	char buf[32];

	assert_string_equal(csictl_size_format(1 << 30, buf, sizeof(buf)), "1Gi");
	assert_string_equal(csictl_size_format(3LL << 40, buf, sizeof(buf)), "3Ti");
	assert_string_equal(csictl_size_format(3072, buf, sizeof(buf)), "3Ki");
	assert_string_equal(csictl_size_format(1536, buf, sizeof(buf)), "1536");
	assert_string_equal(csictl_size_format(1000, buf, sizeof(buf)), "1000");
	assert_string_equal(csictl_size_format(0, buf, sizeof(buf)), "0");
	assert_string_equal(csictl_size_format(-1024, buf, sizeof(buf)), "-1024");
}

static void test_duration_parse(void **state)
{
	struct err e;
	int64_t ms;

	assert_int_equal(csictl_duration_parse("15s", &ms, &e), 0);
	assert_true(ms == 15000);
	assert_int_equal(csictl_duration_parse("500ms", &ms, &e), 0);
	assert_true(ms == 500);
	assert_int_equal(csictl_duration_parse("2m", &ms, &e), 0);
	assert_true(ms == 120000);
	assert_int_equal(csictl_duration_parse("1h", &ms, &e), 0);
	assert_true(ms == 3600000);
	assert_int_equal(csictl_duration_parse("7", &ms, &e), 0);
	assert_true(ms == 7000);
	assert_int_equal(csictl_duration_parse("0s", &ms, &e), CSID_EINVAL);
	assert_int_equal(csictl_duration_parse("25h", &ms, &e), CSID_EINVAL);
	assert_int_equal(csictl_duration_parse("5x", &ms, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "invalid duration"));
	assert_int_equal(csictl_duration_parse("-5s", &ms, &e), CSID_EINVAL);
	assert_int_equal(csictl_duration_parse("99999999999999999999s", &ms, &e), CSID_EINVAL);
}

static void test_int_parse(void **state)
{
	struct err e;
	int32_t v;

	assert_int_equal(csictl_int_parse("42", &v, &e), 0);
	assert_int_equal(v, 42);
	assert_int_equal(csictl_int_parse("2147483647", &v, &e), 0);
	assert_int_equal(csictl_int_parse("2147483648", &v, &e), CSID_EINVAL);
	assert_int_equal(csictl_int_parse("-1", &v, &e), CSID_EINVAL);
	assert_int_equal(csictl_int_parse("4x", &v, &e), CSID_EINVAL);
	assert_int_equal(csictl_int_parse("", &v, &e), CSID_EINVAL);
}

struct opts {
	const char *name;
	bool flag;
	struct csictl_kv kv;
	struct csictl_list list;
};

static size_t opts_flags(struct opts *o, struct csictl_flag *f)
{
	const struct csictl_flag t[] = {
	    {"name", CSICTL_FLAG_STRING, &o->name, "N", "a string"},
	    {"flag", CSICTL_FLAG_BOOL, &o->flag, NULL, "a bool"},
	    {"param", CSICTL_FLAG_KV, &o->kv, "K=V", "pairs"},
	    {"item", CSICTL_FLAG_LIST, &o->list, "X", "items"},
	};

	memcpy(f, t, sizeof(t));
	return 4;
}

static int parse(struct opts *o, struct csictl_args *pos, struct err *e, int argc, char **argv)
{
	struct csictl_flag f[4];

	memset(o, 0, sizeof(*o));
	return csictl_flags_parse(f, opts_flags(o, f), argc, argv, pos, e);
}

static void test_flags(void **state)
{
	char *a1[] = {"cmd", "-name", "x",  "pos1",     "--flag", "-param=a=1", "-param",
		      "b=",  "-item", "i1", "-item=i2", "--",     "-notaflag"};
	char *a2[] = {"-name"};
	char *a3[] = {"-bogus"};
	char *a4[] = {"-param", "novalue"};
	char *a5[] = {"-param", "k=1", "-param", "k=2"};
	char *a6[] = {"-param", "=v"};
	char *a7[] = {"-flag=maybe"};
	char *a8[] = {"-flag=false", "-", "-name=last", "-name", "final"};
	struct csictl_args pos;
	struct opts o;
	struct err e;

	assert_int_equal(parse(&o, &pos, &e, 13, a1), 0);
	assert_string_equal(o.name, "x");
	assert_true(o.flag);
	assert_int_equal(o.kv.n, 2);
	assert_string_equal(o.kv.pairs[0].key, "a");
	assert_string_equal(o.kv.pairs[0].value, "1");
	assert_string_equal(o.kv.pairs[1].key, "b");
	assert_string_equal(o.kv.pairs[1].value, "");
	assert_int_equal(o.list.n, 2);
	assert_string_equal(o.list.items[1], "i2");
	assert_int_equal(pos.n, 3);
	assert_string_equal(pos.v[0], "cmd");
	assert_string_equal(pos.v[1], "pos1");
	assert_string_equal(pos.v[2], "-notaflag");
	csictl_kv_free(&o.kv);

	assert_int_equal(parse(&o, &pos, &e, 1, a2), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "needs a value"));
	assert_int_equal(parse(&o, &pos, &e, 1, a3), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "unknown flag -bogus"));
	assert_int_equal(parse(&o, &pos, &e, 2, a4), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "KEY=VALUE"));
	assert_int_equal(parse(&o, &pos, &e, 4, a5), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "given twice"));
	csictl_kv_free(&o.kv);
	assert_int_equal(parse(&o, &pos, &e, 2, a6), CSID_EINVAL);
	assert_int_equal(parse(&o, &pos, &e, 1, a7), CSID_EINVAL);
	assert_int_equal(parse(&o, &pos, &e, 5, a8), 0);
	assert_false(o.flag);
	assert_string_equal(o.name, "final");
	assert_int_equal(pos.n, 1);
	assert_string_equal(pos.v[0], "-");
	csictl_kv_free(NULL);
}

static void test_flags_limits(void **state)
{
	char *argv[2 * CSICTL_LIST_MAX + 2];
	struct csictl_args pos;
	struct opts o;
	struct err e;

	for (int i = 0; i < CSICTL_LIST_MAX + 1; i++) {
		argv[2 * i] = "-item";
		argv[2 * i + 1] = "x";
	}
	assert_int_equal(parse(&o, &pos, &e, 2 * CSICTL_LIST_MAX, argv), 0);
	assert_int_equal(parse(&o, &pos, &e, 2 * CSICTL_LIST_MAX + 2, argv), CSID_EINVAL);
	for (int i = 0; i < CSICTL_ARGS_MAX + 1; i++)
		argv[i] = "p";
	assert_int_equal(parse(&o, &pos, &e, CSICTL_ARGS_MAX + 1, argv), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "too many"));
}

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void test_kv_load_file(void **state)
{
	char dir[] = "/tmp/csictl-kv-XXXXXX", path[64], big[70 * 1024];
	struct csictl_kv kv = {0};
	struct err e;

	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/s.json", dir);
	write_text(path, "{\"user\": \"admin\", \"password\": \"p=w\"}");
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), 0);
	assert_int_equal(kv.n, 2);
	assert_string_equal(kv.pairs[0].key, "user");
	assert_string_equal(kv.pairs[1].key, "password");
	assert_string_equal(kv.pairs[1].value, "p=w");
	/* A key also given on the command line is an error, as twice on the command line. */
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "given twice"));
	csictl_kv_free(&kv);

	write_text(path, "{\"n\": 5}");
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_EINVAL);
	write_text(path, "[\"x\"]");
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_EINVAL);
	write_text(path, "{\"a=b\": \"v\"}");
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_EINVAL);
	write_text(path, "{\"k\": \"hunter2\"");
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_EINVAL);
	/* Errors never quote a value. */
	assert_null(strstr(e.msg, "hunter2"));
	memset(big, ' ', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	write_text(path, big);
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_ETOOBIG);
	assert_int_equal(kv.n, 0);
	unlink(path);
	assert_int_equal(csictl_kv_load_file(&kv, path, &e), CSID_ENOTFOUND);
	rmdir(dir);
	csictl_kv_free(&kv);
}

static char *print_table(struct csictl_table *t)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	csictl_table_print(t, f);
	fclose(f);
	csictl_table_free(t);
	return buf;
}

static void test_table(void **state)
{
	static const char *const headers[] = {"ID", "SIZE", "NOTE"};
	struct csictl_table *t = csictl_table_new(3, headers);
	char *out;

	assert_non_null(t);
	assert_int_equal(csictl_table_addv(t, "vol-1", "1Gi", "first"), 0);
	assert_int_equal(csictl_table_addv(t, "a-much-longer-id", NULL, "x\ty\x1b]0;pwn\a"), 0);
	assert_int_equal(csictl_table_addv(t, "\xc3\xa9t\xc3\xa9", "2", ""), 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(csictl_table_addv(t, "r", "s", "n"), 0);
	assert_int_equal(csictl_table_rows(t), 23);
	out = print_table(t);
	assert_non_null(strstr(out, "ID                SIZE  NOTE\n"));
	assert_non_null(strstr(out, "vol-1             1Gi   first\n"));
	/* Control characters are neutralised; multibyte text aligns by code point. */
	assert_non_null(strstr(out, "a-much-longer-id        x?y?]0;pwn?\n"));
	assert_non_null(strstr(out, "\xc3\xa9t\xc3\xa9               2     \n"));
	free(out);

	t = csictl_table_new(2, NULL);
	assert_non_null(t);
	csictl_table_addv(t, "name:", "hostpath");
	csictl_table_addv(t, "vendor version:", "1.0");
	out = print_table(t);
	assert_string_equal(out, "name:            hostpath\nvendor version:  1.0\n");
	free(out);
	assert_null(csictl_table_new(0, NULL));
	assert_null(csictl_table_new(CSICTL_TABLE_COLS_MAX + 1, NULL));
	csictl_table_free(NULL);
}

static void test_clean(void **state)
{
	char buf[8], big[16];
	char *long_s = malloc(5000);

	assert_string_equal(csictl_out_clean("ok", buf, sizeof(buf)), "ok");
	assert_string_equal(csictl_out_clean("a\nb\rc", buf, sizeof(buf)), "a?b?c");
	assert_string_equal(csictl_out_clean(NULL, buf, sizeof(buf)), "");
	assert_string_equal(csictl_out_clean("0123456789abcdef", buf, sizeof(buf)), "0123...");
	assert_non_null(long_s);
	memset(long_s, 'z', 4999);
	long_s[4999] = '\0';
	csictl_out_clean(long_s, big, sizeof(big));
	assert_int_equal(strlen(big), 15);
	free(long_s);
}

static void test_json_str(void **state)
{
	json_t *j = csictl_out_json_str("ok \xe2\x82\xac");

	assert_string_equal(json_string_value(j), "ok \xe2\x82\xac");
	json_decref(j);
	/* Invalid UTF-8 (a lone byte, an overlong form, a surrogate) is repaired. */
	j = csictl_out_json_str("a\xff"
				"b\xc0\xaf"
				"c\xed\xa0\x80");
	assert_non_null(j);
	assert_non_null(strstr(json_string_value(j), "a\xef\xbf\xbd"
						     "b"));
	assert_null(strstr(json_string_value(j), "\xff"));
	json_decref(j);
	assert_true(csictl_out_utf8_ok("plain \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80"));
	assert_false(csictl_out_utf8_ok("a\xff"));
	assert_false(csictl_out_utf8_ok("\xc0\xaf")); /* overlong '/' */
	assert_false(csictl_out_utf8_ok("\xed\xa0\x80")); /* a surrogate */
	assert_false(csictl_out_utf8_ok("\xf4\x90\x80\x80")); /* past U+10FFFF */
	assert_false(csictl_out_utf8_ok("\xe2\x82")); /* cut short */
	j = csictl_out_json_str(NULL);
	assert_string_equal(json_string_value(j), "");
	json_decref(j);
}

static void test_msg_json(void **state)
{
	Csi__V1__CreateVolumeRequest req = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CreateVolumeRequest__SecretsEntry sec =
	    CSI__V1__CREATE_VOLUME_REQUEST__SECRETS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__SecretsEntry *secs[] = {&sec};
	Csi__V1__CreateVolumeRequest__ParametersEntry par =
	    CSI__V1__CREATE_VOLUME_REQUEST__PARAMETERS_ENTRY__INIT;
	Csi__V1__CreateVolumeRequest__ParametersEntry *pars[] = {&par};
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability *caps[] = {&cap};
	Csi__V1__VolumeCapability__AccessMode am = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__INIT;
	Csi__V1__VolumeCapability__BlockVolume bv = CSI__V1__VOLUME_CAPABILITY__BLOCK_VOLUME__INIT;
	json_t *j;
	char *text;

	req.name = "vol-\x01";
	cr.required_bytes = 1LL << 33;
	req.capacity_range = &cr;
	sec.key = "password";
	sec.value = "hunter2";
	req.n_secrets = 1;
	req.secrets = secs;
	par.key = "pool";
	par.value = "fast";
	req.n_parameters = 1;
	req.parameters = pars;
	am.mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
	cap.access_mode = &am;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
	cap.block = &bv;
	req.n_volume_capabilities = 1;
	req.volume_capabilities = caps;

	j = csictl_out_msg_json(&req.base);
	assert_non_null(j);
	text = json_dumps(j, JSON_COMPACT);
	assert_non_null(text);
	/* Secrets never appear, whatever the message; that they are set does. */
	assert_null(strstr(text, "hunter2"));
	assert_null(strstr(text, "password"));
	assert_string_equal(json_string_value(json_object_get(j, "secrets")), "<redacted>");
	assert_string_equal(json_string_value(json_object_get(j, "name")), "vol-\x01");
	assert_true(json_integer_value(json_object_get(json_object_get(j, "capacity_range"),
						       "required_bytes")) == (1LL << 33));
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "parameters"), "pool")), "fast");
	{
		json_t *c0 = json_array_get(json_object_get(j, "volume_capabilities"), 0);

		assert_non_null(json_object_get(c0, "block"));
		assert_null(json_object_get(c0, "mount"));
		assert_string_equal(
		    json_string_value(json_object_get(json_object_get(c0, "access_mode"), "mode")),
		    "MULTI_NODE_READER_ONLY");
	}
	/* Unset message fields are left out. */
	assert_null(json_object_get(j, "volume_content_source"));
	free(text);
	json_decref(j);
}

static void test_msg_json_wrappers(void **state)
{
	Csi__V1__ProbeResponse pr = CSI__V1__PROBE_RESPONSE__INIT;
	Google__Protobuf__BoolValue bv = GOOGLE__PROTOBUF__BOOL_VALUE__INIT;
	Csi__V1__Snapshot snap = CSI__V1__SNAPSHOT__INIT;
	Google__Protobuf__Timestamp ts = GOOGLE__PROTOBUF__TIMESTAMP__INIT;
	json_t *j;

	bv.value = 0;
	pr.ready = &bv;
	j = csictl_out_msg_json(&pr.base);
	assert_true(json_is_false(json_object_get(j, "ready")));
	json_decref(j);

	ts.seconds = 1800000000;
	ts.nanos = 5;
	snap.creation_time = &ts;
	snap.snapshot_id = "s1";
	snap.ready_to_use = 1;
	j = csictl_out_msg_json(&snap.base);
	assert_string_equal(json_string_value(json_object_get(j, "creation_time")),
			    "2027-01-15T08:00:00.000000005Z");
	assert_true(json_is_true(json_object_get(j, "ready_to_use")));
	json_decref(j);
}

static void test_msg_json_mount_flags(void **state)
{
	Csi__V1__VolumeCapability cap = CSI__V1__VOLUME_CAPABILITY__INIT;
	Csi__V1__VolumeCapability__MountVolume mv = CSI__V1__VOLUME_CAPABILITY__MOUNT_VOLUME__INIT;
	char *flags[] = {"username=bob", "password=hunter2"};
	json_t *j, *mount;

	mv.fs_type = "ext4";
	mv.n_mount_flags = 2;
	mv.mount_flags = flags;
	cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
	cap.mount = &mv;
	j = csictl_out_msg_json(&cap.base);
	mount = json_object_get(j, "mount");
	/* Mount flags may hold credentials (CSI): shown as set, never shown. */
	assert_string_equal(json_string_value(json_object_get(mount, "mount_flags")), "<redacted>");
	assert_string_equal(json_string_value(json_object_get(mount, "fs_type")), "ext4");
	json_decref(j);
	mv.n_mount_flags = 0;
	j = csictl_out_msg_json(&cap.base);
	assert_null(json_object_get(json_object_get(j, "mount"), "mount_flags"));
	json_decref(j);
}

static void test_access_modes(void **state)
{
	assert_int_equal(csictl_csi_access_mode_parse("single-node-writer"), 1);
	assert_int_equal(csictl_csi_access_mode_parse("SINGLE_NODE_WRITER"), 1);
	assert_int_equal(csictl_csi_access_mode_parse("multi-node-multi-writer"), 5);
	assert_int_equal(csictl_csi_access_mode_parse("single-node-multi-writer"), 7);
	assert_int_equal(csictl_csi_access_mode_parse("single-node"), -1);
	assert_int_equal(csictl_csi_access_mode_parse("single-node-writerx"), -1);
	assert_int_equal(csictl_csi_access_mode_parse(""), -1);
	assert_string_equal(csictl_csi_access_mode_name(6), "single-node-single-writer");
	assert_string_equal(csictl_csi_access_mode_name(0), "unknown");
	assert_string_equal(csictl_csi_access_mode_name(99), "unknown");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_size_parse),
	    cmocka_unit_test(test_size_format),
	    cmocka_unit_test(test_duration_parse),
	    cmocka_unit_test(test_int_parse),
	    cmocka_unit_test(test_flags),
	    cmocka_unit_test(test_kv_load_file),
	    cmocka_unit_test(test_flags_limits),
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_clean),
	    cmocka_unit_test(test_json_str),
	    cmocka_unit_test(test_msg_json),
	    cmocka_unit_test(test_msg_json_wrappers),
	    cmocka_unit_test(test_msg_json_mount_flags),
	    cmocka_unit_test(test_access_modes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
