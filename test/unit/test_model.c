/*
 * Unit tests of the model's plain functions (src/model/model.c): enum
 * names and parsers, ID checks against hostile input, maps, topology
 * matching, the claim lifecycle table (every from -> to), transitions
 * and moves into past claims, validation reporting every problem at
 * once without echoing a secret, sizes, and deep copies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "model/model.h"

static void test_access_names(void **state)
{
	static const char *const names[] = {NULL,
					    "single-node-writer",
					    "single-node-reader-only",
					    "multi-node-reader-only",
					    "multi-node-single-writer",
					    "multi-node-multi-writer",
					    "single-node-single-writer",
					    "single-node-multi-writer"};
	enum model_access a;
	struct err e;

	(void)state;
	for (int i = 1; i <= 7; i++) {
		assert_string_equal(model_access_name((enum model_access)i), names[i]);
		assert_int_equal(model_access_parse(names[i], &a, &e), 0);
		assert_int_equal(a, i);
	}
	assert_null(model_access_name(MODEL_ACCESS_UNKNOWN));
	assert_null(model_access_name((enum model_access)8));
	assert_null(model_access_name((enum model_access) - 1));
	assert_int_equal(model_access_parse("unknown", &a, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "single-node-multi-writer"));
	assert_int_equal(model_access_parse(NULL, &a, &e), CSID_EINVAL);
	assert_int_equal(model_access_parse("Single-Node-Writer", &a, &e), CSID_EINVAL);

	assert_false(model_access_writable(MODEL_ACCESS_SINGLE_NODE_READER_ONLY));
	assert_false(model_access_writable(MODEL_ACCESS_MULTI_NODE_READER_ONLY));
	assert_false(model_access_writable(MODEL_ACCESS_UNKNOWN));
	assert_true(model_access_writable(MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER));
	assert_true(model_access_writable(MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER));
	for (int i = 1; i <= 7; i++)
		assert_int_equal(model_access_multi_node((enum model_access)i), i >= 3 && i <= 5);
}

static void test_other_names(void **state)
{
	enum model_attachment at;
	enum model_claim_state cs;
	enum model_claim_mode mode;
	struct err e;

	(void)state;
	assert_string_equal(model_attachment_name(MODEL_ATTACH_FILE_SYSTEM), "file-system");
	assert_string_equal(model_attachment_name(MODEL_ATTACH_BLOCK_DEVICE), "block-device");
	assert_int_equal(model_attachment_parse("block-device", &at, &e), 0);
	assert_int_equal(at, MODEL_ATTACH_BLOCK_DEVICE);
	assert_int_equal(model_attachment_parse("block", &at, &e), CSID_EINVAL);
	for (int s = 0; s < MODEL_CLAIM_STATE_COUNT; s++) {
		const char *n = model_claim_state_name((enum model_claim_state)s);

		assert_non_null(n);
		assert_int_equal(model_claim_state_parse(n, &cs, &e), 0);
		assert_int_equal(cs, s);
	}
	assert_null(model_claim_state_name((enum model_claim_state)MODEL_CLAIM_STATE_COUNT));
	assert_string_equal(model_claim_mode_name(MODEL_CLAIM_READ), "read");
	assert_string_equal(model_claim_mode_name(MODEL_CLAIM_WRITE), "write");
	assert_int_equal(model_claim_mode_parse("write", &mode, &e), 0);
	assert_int_equal(mode, MODEL_CLAIM_WRITE);
	assert_int_equal(model_claim_mode_parse("rw", &mode, &e), CSID_EINVAL);
	assert_string_equal(e.msg, "unknown claim mode (expected one of: read, write)");
	assert_string_equal(model_plugin_type_name(MODEL_PLUGIN_CONTROLLER), "controller");
	assert_string_equal(model_node_status_name(MODEL_NODE_DOWN), "down");
	assert_string_equal(model_pub_state_name(MODEL_PUB_UNPUBLISHING), "unpublishing");
	assert_string_equal(model_volume_state_name(MODEL_VOL_REGISTERING), "registering");
	assert_string_equal(model_snapshot_state_name(MODEL_SNAP_FAILED), "failed");
	assert_null(model_volume_state_name((enum model_volume_state)99));
}

static void test_id_check(void **state)
{
	static const char *const good[] = {"a", "vol-7", "A.b_c-9", "...", ".a", "a..b"};
	char big[10 * 1024 + 1], max[MODEL_ID_MAX + 1];
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
		assert_int_equal(model_id_check("volume id", good[i], strlen(good[i]), &e), 0);
	memset(max, 'x', MODEL_ID_MAX);
	max[MODEL_ID_MAX] = '\0';
	assert_int_equal(model_id_check("volume id", max, MODEL_ID_MAX, &e), 0);

	assert_int_equal(model_id_check("volume id", "", 0, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", NULL, 0, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", ".", 1, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", "..", 2, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", "a/b", 3, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", "../etc", 6, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", "a b", 3, &e), CSID_EINVAL);
	assert_int_equal(model_id_check("volume id", "a\nb", 3, &e), CSID_EINVAL);
	assert_null(strchr(e.msg, '\n'));
	assert_int_equal(model_id_check("volume id", "a\0b", 3, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "NUL"));
	assert_int_equal(model_id_check("volume id", "\xc3\xa9", 2, &e), CSID_EINVAL);

	/* 10 KiB: refused, and the message quotes only a short prefix. */
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[5] = '\x1b';
	assert_int_equal(model_id_check("volume id", big, strlen(big), &e), CSID_EINVAL);
	assert_true(strlen(e.msg) < 120);
	assert_null(strchr(e.msg, '\x1b'));
	assert_non_null(strstr(e.msg, "volume id"));
	max[0] = '/';
	assert_int_equal(model_id_check("volume id", max, MODEL_ID_MAX, &e), CSID_EINVAL);
}

static void test_plugin_id_check(void **state)
{
	char long_id[MODEL_PLUGIN_ID_MAX + 2];
	struct err e;

	(void)state;
	assert_int_equal(model_plugin_id_check("hostpath.csi.csid.dev", &e), 0);
	assert_int_equal(model_plugin_id_check("ebs", &e), 0);
	assert_int_equal(model_plugin_id_check("ebs.csi.aws.com", &e), 0);
	assert_int_equal(model_plugin_id_check("", &e), CSID_EINVAL);
	assert_int_equal(model_plugin_id_check(NULL, &e), CSID_EINVAL);
	assert_int_equal(model_plugin_id_check("a..b", &e), CSID_EINVAL);
	assert_int_equal(model_plugin_id_check(".a", &e), CSID_EINVAL);
	assert_int_equal(model_plugin_id_check("a-", &e), CSID_EINVAL);
	assert_int_equal(model_plugin_id_check("a/b", &e), CSID_EINVAL);
	memset(long_id, 'p', sizeof(long_id) - 1);
	long_id[sizeof(long_id) - 1] = '\0';
	assert_int_equal(model_plugin_id_check(long_id, &e), CSID_EINVAL);
	long_id[MODEL_PLUGIN_ID_MAX] = '\0';
	assert_int_equal(model_plugin_id_check(long_id, &e), 0);
}

static void test_map(void **state)
{
	struct arena *a = arena_new();
	struct model_map m = {0}, m2 = {0};
	struct err e;

	(void)state;
	assert_null(model_map_get(&m, "x"));
	assert_int_equal(model_map_put(a, &m, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &m, "bay", "1", &e), 0);
	assert_int_equal(model_map_put(a, &m, "rack", "7", &e), 0);
	assert_int_equal(model_map_put(a, &m, "rack", "8", &e), 0);
	assert_int_equal(m.n, 3);
	assert_string_equal(m.kv[0].key, "bay");
	assert_string_equal(m.kv[1].key, "rack");
	assert_string_equal(m.kv[2].key, "zone");
	assert_string_equal(model_map_get(&m, "rack"), "8");
	assert_string_equal(model_map_get(&m, "zone"), "a");
	assert_null(model_map_get(&m, "row"));
	assert_false(model_map_equal(&m, &m2));
	assert_int_equal(model_map_put(a, &m2, "rack", "8", &e), 0);
	assert_int_equal(model_map_put(a, &m2, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &m2, "bay", "1", &e), 0);
	assert_true(model_map_equal(&m, &m2));
	assert_int_equal(model_map_put(a, &m2, "bay", "2", &e), 0);
	assert_false(model_map_equal(&m, &m2));
	arena_free(a);
}

static void test_topology_match(void **state)
{
	struct arena *a = arena_new();
	struct model_topology want = {{0}}, node = {{0}}, other = {{0}};
	struct model_volume v = {0};
	struct err e;

	(void)state;
	assert_int_equal(model_map_put(a, &want.segments, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &node.segments, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &node.segments, "rack", "7", &e), 0);
	assert_int_equal(model_map_put(a, &other.segments, "zone", "b", &e), 0);
	assert_true(model_topology_match(&want, &node));
	assert_false(model_topology_match(&node, &want)); /* rack missing */
	assert_false(model_topology_match(&want, &other));
	assert_false(model_topology_match(&want, NULL));
	assert_true(model_topology_match(&(struct model_topology){{0}}, NULL));

	assert_true(model_volume_reachable(&v, NULL));
	v.requisite = &other;
	v.nrequisite = 1;
	assert_false(model_volume_reachable(&v, &node));
	v.accessible = &want;
	v.naccessible = 1;
	assert_true(model_volume_reachable(&v, &node));
	assert_false(model_volume_reachable(&v, &other));
	assert_false(model_volume_reachable(&v, NULL));
	arena_free(a);
}

/* The lifecycle table, every from -> to. */
static void test_claim_lifecycle_table(void **state)
{
	static const bool allowed[MODEL_CLAIM_STATE_COUNT][MODEL_CLAIM_STATE_COUNT] = {
	    /* to: claimed node-unp ctrl-unp freed removed */
	    [MODEL_CLAIM_CLAIMED] = {false, true, false, true, false},
	    [MODEL_CLAIM_NODE_UNPUBLISHED] = {false, false, true, true, false},
	    [MODEL_CLAIM_CONTROLLER_UNPUBLISHED] = {false, false, false, true, false},
	    [MODEL_CLAIM_FREED] = {false, false, false, false, true},
	    [MODEL_CLAIM_REMOVED] = {false, false, false, false, false},
	};

	(void)state;
	for (int from = 0; from < MODEL_CLAIM_STATE_COUNT; from++)
		for (int to = 0; to < MODEL_CLAIM_STATE_COUNT; to++) {
			struct arena *a = arena_new();
			struct model_claim c = {.alloc_id = "web-1",
						.node_id = "n1",
						.state = (enum model_claim_state)from,
						.updated_ms = 5};
			struct err e;
			int rc;

			err_clear(&e);
			assert_int_equal(model_claim_can_move((enum model_claim_state)from,
							      (enum model_claim_state)to),
					 allowed[from][to]);
			rc = model_claim_transition(a, "data", &c, (enum model_claim_state)to,
						    "why", 77, &e);
			if (allowed[from][to]) {
				assert_int_equal(rc, 0);
				assert_int_equal(c.state, to);
				assert_int_equal(c.updated_ms, 77);
				assert_string_equal(c.note, "why");
			} else {
				assert_int_equal(rc, CSID_EPRECOND);
				assert_int_equal(c.state, from);
				assert_int_equal(c.updated_ms, 5);
				assert_null(c.note);
				assert_non_null(strstr(e.msg, "claim data/web-1"));
			}
			arena_free(a);
		}
	assert_false(model_claim_can_move((enum model_claim_state) - 1, MODEL_CLAIM_FREED));
	assert_false(model_claim_can_move(MODEL_CLAIM_CLAIMED, (enum model_claim_state)9));
}

static void add_claim(struct arena *a, struct model_volume *v, const char *alloc)
{
	struct model_claim *c = arena_alloc(a, (v->nclaims + 1) * sizeof(*c));

	if (v->nclaims)
		memcpy(c, v->claims, v->nclaims * sizeof(*c));
	c[v->nclaims] = (struct model_claim){.alloc_id = arena_strdup(a, alloc), .node_id = "n1"};
	v->claims = c;
	v->nclaims++;
}

static void test_claim_move_to_past(void **state)
{
	struct arena *a = arena_new();
	struct model_volume v = {.id = "data"};
	char alloc[32];
	struct err e;

	(void)state;
	for (int i = 0; i < MODEL_PAST_CLAIMS_MAX + 3; i++) {
		snprintf(alloc, sizeof(alloc), "a%d", i);
		add_claim(a, &v, alloc);
	}
	assert_int_equal(model_volume_claim_move(a, &v, "zz", MODEL_CLAIM_FREED, NULL, 1, &e),
			 CSID_ENOTFOUND);
	assert_int_equal(
	    model_volume_claim_move(a, &v, "a1", MODEL_CLAIM_CONTROLLER_UNPUBLISHED, NULL, 1, &e),
	    CSID_EPRECOND);
	assert_int_equal(
	    model_volume_claim_move(a, &v, "a1", MODEL_CLAIM_NODE_UNPUBLISHED, "released", 2, &e),
	    0);
	assert_int_equal(model_volume_claim(&v, "a1")->state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_int_equal(v.nclaims, MODEL_PAST_CLAIMS_MAX + 3);

	/* Freeing moves claims to the past, newest last, at most MODEL_PAST_CLAIMS_MAX. */
	for (int i = 0; i < MODEL_PAST_CLAIMS_MAX + 2; i++) {
		snprintf(alloc, sizeof(alloc), "a%d", i);
		assert_int_equal(
		    model_volume_claim_move(a, &v, alloc, MODEL_CLAIM_FREED, "force", 10 + i, &e),
		    0);
		assert_null(model_volume_claim(&v, alloc));
		assert_string_equal(v.past_claims[v.npast_claims - 1].alloc_id, alloc);
		assert_int_equal(v.past_claims[v.npast_claims - 1].state, MODEL_CLAIM_FREED);
	}
	assert_int_equal(v.nclaims, 1);
	assert_string_equal(v.claims[0].alloc_id, "a18");
	assert_int_equal(v.npast_claims, MODEL_PAST_CLAIMS_MAX);
	assert_string_equal(v.past_claims[0].alloc_id, "a2");
	assert_int_equal(model_volume_claim_move(a, &v, "a18", MODEL_CLAIM_FREED, NULL, 99, &e), 0);
	assert_int_equal(v.nclaims, 0);
	assert_int_equal(v.npast_claims, MODEL_PAST_CLAIMS_MAX);
	arena_free(a);
}

static void test_parse_size(void **state)
{
	static const struct {
		const char *s;
		int64_t n;
	} good[] = {{"0", 0},
		    {"1073741824", 1073741824},
		    {"10GiB", 10737418240},
		    {"10Gi", 10737418240},
		    {"500M", 500000000},
		    {"500MB", 500000000},
		    {"4KiB", 4096},
		    {"1B", 1},
		    {"2T", 2000000000000},
		    {"1PiB", 1125899906842624},
		    {"9223372036854775807", INT64_MAX}};
	static const char *const bad[] = {"",       "GiB",   "-1",   "1.5G",
					  "10 GiB", "10gib", "10XB", "0x10"};
	int64_t n;
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(model_parse_size(good[i].s, &n, &e), 0);
		assert_int_equal(n, good[i].n);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(model_parse_size(bad[i], &n, &e), CSID_EINVAL);
	assert_int_equal(model_parse_size(NULL, &n, &e), CSID_EINVAL);
	assert_int_equal(model_parse_size("9223372036854775808", &n, &e), CSID_ERANGE);
	assert_int_equal(model_parse_size("9000000PiB", &n, &e), CSID_ERANGE);
}

/* A valid create spec in a. */
static struct model_volume *spec_new(struct arena *a)
{
	struct model_volume *v = arena_alloc(a, sizeof(*v));
	struct err e;

	v->id = "data";
	v->plugin_id = "hostpath.csi.csid.dev";
	v->caps = arena_alloc(a, sizeof(*v->caps));
	v->caps[0] =
	    (struct model_capability){MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_FILE_SYSTEM};
	v->ncaps = 1;
	v->capacity_min = 1024;
	assert_int_equal(model_map_put(a, &v->secrets, "password", "canary-s3cr3t", &e), 0);
	return v;
}

static void test_validate_ok(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = spec_new(a);
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(model_volume_validate(v, true, &e), 0);
	/* Register needs the plugin's ID of the volume, and no source. */
	assert_int_equal(model_volume_validate(v, false, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "external_id: required"));
	v->external_id = "vol-123";
	assert_int_equal(model_volume_validate(v, false, &e), 0);
	assert_int_equal(model_volume_validate(v, true, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "external_id"));
	arena_free(a);
}

/* Several problems are reported at once, and none echoes a secret. */
static void test_validate_all_problems(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = spec_new(a);
	struct model_topology req_t = {{0}}, pref_t = {{0}};
	static char *flags[] = {"", "canary-flag-ro"};
	char long_val[MODEL_MAP_BYTES_MAX];
	struct err e;

	(void)state;
	v->id = "../x";
	v->plugin_id = "";
	v->capacity_min = 10;
	v->capacity_max = 5;
	v->caps[0].access = MODEL_ACCESS_UNKNOWN;
	v->snapshot_source = "snap-1";
	v->clone_source = "vol-2";
	v->mount_flags = flags;
	v->nmount_flags = 2;
	memset(long_val, 'v', sizeof(long_val) - 1);
	long_val[sizeof(long_val) - 1] = '\0';
	assert_int_equal(model_map_put(a, &v->secrets, "token", long_val, &e), 0);
	assert_int_equal(model_map_put(a, &req_t.segments, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &pref_t.segments, "zone", "b", &e), 0);
	v->requisite = &req_t;
	v->nrequisite = 1;
	v->preferred = &pref_t;
	v->npreferred = 1;

	assert_int_equal(model_volume_validate(v, true, &e), CSID_EINVAL);
	assert_true(strncmp(e.msg, "volume spec: ", 13) == 0);
	assert_non_null(strstr(e.msg, "id \"..?x\""));
	assert_non_null(strstr(e.msg, "plugin id: missing"));
	assert_non_null(strstr(e.msg, "capacity_max: smaller than capacity_min"));
	assert_non_null(strstr(e.msg, "capabilities[0].access_mode: unknown"));
	assert_non_null(strstr(e.msg, "mount_options.mount_flags[0]: empty"));
	assert_non_null(strstr(e.msg, "secrets: more than 4096 bytes"));
	assert_non_null(strstr(e.msg, "at most one of them"));
	assert_null(strstr(e.msg, "canary"));
	assert_null(strstr(e.msg, "vvvv"));
	assert_null(strstr(e.msg, "password"));
	assert_null(strstr(e.msg, "token"));
	/* Bounded: more problems than fit are counted. */
	assert_true(strlen(e.msg) < ERR_MSG_MAX);
	arena_free(a);
}

static void test_validate_bounded(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = spec_new(a);
	struct err e;

	(void)state;
	v->caps = arena_alloc(a, MODEL_CAPS_MAX * sizeof(*v->caps));
	v->ncaps = MODEL_CAPS_MAX;
	for (size_t i = 0; i < v->ncaps; i++)
		v->caps[i] =
		    (struct model_capability){(enum model_access)42, (enum model_attachment)7};
	assert_int_equal(model_volume_validate(v, true, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "more)"));
	assert_true(strlen(e.msg) < ERR_MSG_MAX - 1);

	/* Mount options on a block-only volume; preferred not in requisite. */
	v = spec_new(a);
	v->caps[0].attachment = MODEL_ATTACH_BLOCK_DEVICE;
	v->fs_type = "ext4";
	assert_int_equal(model_volume_validate(v, true, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "only for file-system"));
	v->ncaps = 0;
	assert_int_equal(model_volume_validate(v, true, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "at least one"));
	arena_free(a);
}

static void test_volume_copy(void **state)
{
	struct arena *a = arena_new(), *b = arena_new();
	struct model_volume *v = spec_new(a), *c = NULL;
	struct err e;

	(void)state;
	v->external_id = "vol-1";
	v->create_index = 3;
	v->modify_index = 9;
	add_claim(a, v, "web-1");
	v->claims[0].plugin_node_id = "csi-n1";
	assert_int_equal(model_map_put(a, &v->parameters, "type", "ssd", &e), 0);
	assert_int_equal(model_volume_copy(b, v, &c, &e), 0);
	arena_free(a);
	/* The copy lives on alone in b. */
	assert_string_equal(c->id, "data");
	assert_string_equal(c->external_id, "vol-1");
	assert_int_equal(c->ncaps, 1);
	assert_int_equal(c->caps[0].access, MODEL_ACCESS_SINGLE_NODE_WRITER);
	assert_string_equal(model_map_get(&c->secrets, "password"), "canary-s3cr3t");
	assert_string_equal(model_map_get(&c->parameters, "type"), "ssd");
	assert_string_equal(c->claims[0].alloc_id, "web-1");
	assert_string_equal(c->claims[0].plugin_node_id, "csi-n1");
	assert_int_equal(c->create_index, 3);
	assert_int_equal(c->modify_index, 9);
	arena_free(b);
}

static void test_snapshot_validate(void **state)
{
	struct arena *a = arena_new();
	struct model_snapshot s = {.id = "snap-1", .volume_id = "data"}, *c = NULL;
	char long_name[MODEL_STRING_MAX + 2];
	struct err e;

	(void)state;
	assert_int_equal(model_map_put(a, &s.secrets, "k", "canary-snap", &e), 0);
	assert_int_equal(model_snapshot_validate(&s, &e), 0);
	memset(long_name, 'n', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	s.id = "a/b";
	s.volume_id = NULL;
	s.name = long_name;
	assert_int_equal(model_map_put(a, &s.secrets, "", "canary-snap", &e), 0);
	assert_int_equal(model_snapshot_validate(&s, &e), CSID_EINVAL);
	assert_true(strncmp(e.msg, "snapshot spec: ", 15) == 0);
	assert_non_null(strstr(e.msg, "id \"a?b\""));
	assert_non_null(strstr(e.msg, "volume_id: missing"));
	assert_non_null(strstr(e.msg, "name: longer than 128 bytes"));
	assert_non_null(strstr(e.msg, "secrets: empty key"));
	assert_null(strstr(e.msg, "canary"));
	assert_int_equal(model_snapshot_copy(a, &s, &c, &e), 0);
	assert_string_equal(c->name, long_name);
	assert_true(c->name != long_name);
	assert_string_equal(model_map_get(&c->secrets, "k"), "canary-snap");
	arena_free(a);
}

static void test_node_validate(void **state)
{
	struct arena *a = arena_new(), *b = arena_new();
	struct model_node_plugin p[3] = {
	    {.plugin_id = "hostpath.csi.csid.dev",
	     .type = MODEL_PLUGIN_NODE,
	     .plugin_node_id = "n1"},
	    {.plugin_id = "hostpath.csi.csid.dev", .type = MODEL_PLUGIN_CONTROLLER},
	    {.plugin_id = "ebs", .type = MODEL_PLUGIN_NODE, .max_volumes = 4}};
	char *caps[] = {"STAGE_UNSTAGE_VOLUME"};
	struct model_node n = {.id = "n1", .plugins = p, .nplugins = 3}, *c = NULL;
	char node_id[MODEL_NODE_ID_MAX + 2];
	struct err e;

	(void)state;
	p[0].caps = caps;
	p[0].ncaps = 1;
	assert_int_equal(model_map_put(a, &p[0].topology.segments, "zone", "a", &e), 0);
	assert_int_equal(model_node_validate(&n, &e), 0);
	assert_int_equal(model_node_copy(b, &n, &c, &e), 0);
	arena_free(a);
	p[0].topology.segments = (struct model_map){0};
	assert_string_equal(c->plugins[0].caps[0], "STAGE_UNSTAGE_VOLUME");
	assert_string_equal(model_map_get(&c->plugins[0].topology.segments, "zone"), "a");
	assert_int_equal(c->plugins[2].max_volumes, 4);
	arena_free(b);

	memset(node_id, 'i', sizeof(node_id) - 1);
	node_id[sizeof(node_id) - 1] = '\0';
	n.id = "..";
	p[0].plugin_node_id = node_id;
	p[1].type = (enum model_plugin_type)5;
	p[2].plugin_id = "hostpath.csi.csid.dev";
	p[2].max_volumes = -1;
	n.status = (enum model_node_status)9;
	assert_int_equal(model_node_validate(&n, &e), CSID_EINVAL);
	assert_true(strncmp(e.msg, "node: ", 6) == 0);
	assert_non_null(strstr(e.msg, "id \"..\": not a valid ID"));
	assert_non_null(strstr(e.msg, "status: unknown"));
	assert_non_null(strstr(e.msg, "plugins[0].plugin_node_id: longer than 256 bytes"));
	assert_non_null(strstr(e.msg, "plugins[1].type: unknown"));
	assert_non_null(strstr(e.msg, "plugins[2].max_volumes: negative"));
	assert_non_null(strstr(e.msg, "plugins[2]: duplicate of plugins[0]"));
}

/*
 * The agent's address: host:port or http(s)://host:port, or unix:/path (its
 * socket, for servers on its host), nothing else.
 */
static void test_node_address(void **state)
{
	static const char *const good[] = {
	    "127.0.0.1:4650", "http://10.0.0.5:4650", "https://node-1.example.org:1",
	    "[::1]:4650",     "http://[fe80::1]:80",  "unix:/var/lib/csid/agent.sock"};
	static const char *const bad_unix[] = {"unix:agent.sock", "unix:", "unix:/a\nb",
					       "unix://var/lib/csid/agent.sock"};
	char long_unix[128];
	static const char *const bad[] = {"",
					  "4650",
					  "node-1",
					  "node-1:",
					  ":4650",
					  "http://node-1:4650/v1",
					  "http://user@node-1:4650",
					  "node 1:4650",
					  "node-1:123456",
					  "node-1:46x0",
					  "ftp://node-1:21"};
	struct model_node n = {.id = "n1"};
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		n.address = (char *)good[i];
		assert_int_equal(model_node_validate(&n, &e), 0);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n.address = (char *)bad[i];
		assert_int_equal(model_node_validate(&n, &e), CSID_EINVAL);
		assert_string_equal(e.msg, "node: address: expected host:port or http://host:port");
	}
	/* 108 bytes of path: one more than a socket holds. */
	snprintf(long_unix, sizeof(long_unix), "unix:/%0107d", 0);
	for (size_t i = 0; i <= sizeof(bad_unix) / sizeof(bad_unix[0]); i++) {
		n.address =
		    i < sizeof(bad_unix) / sizeof(bad_unix[0]) ? (char *)bad_unix[i] : long_unix;
		assert_int_equal(model_node_validate(&n, &e), CSID_EINVAL);
		assert_string_equal(e.msg, "node: address: expected unix:/PATH, an absolute "
					   "socket path of at most 107 bytes");
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_access_names),
	    cmocka_unit_test(test_other_names),
	    cmocka_unit_test(test_id_check),
	    cmocka_unit_test(test_plugin_id_check),
	    cmocka_unit_test(test_map),
	    cmocka_unit_test(test_topology_match),
	    cmocka_unit_test(test_claim_lifecycle_table),
	    cmocka_unit_test(test_claim_move_to_past),
	    cmocka_unit_test(test_parse_size),
	    cmocka_unit_test(test_validate_ok),
	    cmocka_unit_test(test_validate_all_problems),
	    cmocka_unit_test(test_validate_bounded),
	    cmocka_unit_test(test_volume_copy),
	    cmocka_unit_test(test_snapshot_validate),
	    cmocka_unit_test(test_node_validate),
	    cmocka_unit_test(test_node_address),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
