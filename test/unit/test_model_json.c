/*
 * Unit tests of the model's JSON (src/model/model_json.c, model_spec.c):
 * store round trips of volumes, snapshots and nodes (the store view keeps
 * secrets and mount flags; the API view never holds a canary secret or
 * mount flag), damaged store records, the strict spec decoder's errors
 * with their JSON paths, comments, sizes, hostile IDs, and the example
 * spec that `csictl volume init` writes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "model/model.h"

#define CANARY "canary-Zq9xT"
#define FLAG_CANARY "canary-flag-Kp3"

/* A volume with every field set, in a. */
static struct model_volume *vol_full(struct arena *a)
{
	struct model_volume *v = arena_alloc(a, sizeof(*v));
	struct err e;

	v->id = "data";
	v->name = "data-name";
	v->plugin_id = "hostpath.csi.csid.dev";
	v->external_id = "vol-0001";
	v->capacity_min = 1 << 20;
	v->capacity_max = 1 << 30;
	v->caps = arena_alloc(a, 2 * sizeof(*v->caps));
	v->caps[0] = (struct model_capability){MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER,
					       MODEL_ATTACH_FILE_SYSTEM};
	v->caps[1] =
	    (struct model_capability){MODEL_ACCESS_SINGLE_NODE_WRITER, MODEL_ATTACH_BLOCK_DEVICE};
	v->ncaps = 2;
	v->fs_type = "ext4";
	v->mount_flags = arena_alloc(a, 2 * sizeof(char *));
	v->mount_flags[0] = "noatime";
	v->mount_flags[1] = FLAG_CANARY;
	v->nmount_flags = 2;
	assert_int_equal(model_map_put(a, &v->parameters, "type", "ssd", &e), 0);
	assert_int_equal(model_map_put(a, &v->mutable_parameters, "iops", "3000", &e), 0);
	assert_int_equal(model_map_put(a, &v->secrets, "password", CANARY, &e), 0);
	assert_int_equal(model_map_put(a, &v->secrets, "canary-key", "x", &e), 0);
	assert_int_equal(model_map_put(a, &v->context, "share", "/srv", &e), 0);
	v->requisite = arena_alloc(a, 2 * sizeof(*v->requisite));
	assert_int_equal(model_map_put(a, &v->requisite[0].segments, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &v->requisite[1].segments, "zone", "b", &e), 0);
	v->nrequisite = 2;
	v->preferred = arena_alloc(a, sizeof(*v->preferred));
	assert_int_equal(model_map_put(a, &v->preferred[0].segments, "zone", "b", &e), 0);
	v->npreferred = 1;
	v->snapshot_source = "snap-1";
	v->state = MODEL_VOL_READY;
	v->capacity = 1 << 30;
	v->accessible = arena_alloc(a, sizeof(*v->accessible));
	assert_int_equal(model_map_put(a, &v->accessible[0].segments, "zone", "b", &e), 0);
	v->naccessible = 1;
	v->node_expansion_required = true;
	v->pending_capacity_min = 2LL << 30;
	assert_int_equal(model_map_put(a, &v->pending_mutable, "iops", "6000", &e), 0);
	v->claims = arena_alloc(a, sizeof(*v->claims));
	v->claims[0] =
	    (struct model_claim){"web-1",
				 "n1",
				 "csi-n1",
				 MODEL_CLAIM_WRITE,
				 {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, MODEL_ATTACH_FILE_SYSTEM},
				 false,
				 MODEL_CLAIM_NODE_UNPUBLISHED,
				 100,
				 200,
				 "released",
				 true,
				 true};
	v->nclaims = 1;
	v->past_claims = arena_alloc(a, sizeof(*v->past_claims));
	v->past_claims[0] = v->claims[0];
	v->past_claims[0].alloc_id = "web-0";
	v->past_claims[0].state = MODEL_CLAIM_FREED;
	v->past_claims[0].mode = MODEL_CLAIM_READ;
	v->past_claims[0].read_only = true;
	v->npast_claims = 1;
	v->pubs = arena_alloc(a, sizeof(*v->pubs));
	v->pubs[0] = (struct model_publication){
	    "n1",
	    "csi-n1",
	    {MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER, MODEL_ATTACH_FILE_SYSTEM},
	    false,
	    MODEL_PUB_PUBLISHED,
	    {0}};
	assert_int_equal(model_map_put(a, &v->pubs[0].context, "device", "/dev/xvdf", &e), 0);
	v->npubs = 1;
	v->created_ms = 1700000000000;
	v->updated_ms = 1700000000500;
	v->create_index = 4;
	v->modify_index = 8;
	v->status = (struct model_status){"plugin ebs: deadline exceeded", 3, 1700000009000};
	v->schedulable = true;
	v->plugin_health = "healthy";
	return v;
}

static char *encode(const struct model_volume *v, enum model_view view)
{
	char *text = NULL;
	size_t len = 0;
	struct err e;

	err_clear(&e);
	assert_int_equal(model_volume_encode(v, view, &text, &len, &e), 0);
	assert_int_equal(strlen(text), len);
	return text;
}

/* text is what jansson's compact dump of its own parse gives, byte for byte. */
static void same_as_jansson(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);
	char *again = j ? json_dumps(j, JSON_COMPACT) : NULL;

	assert_non_null(again);
	assert_string_equal(again, text);
	model_json_wipe(j);
	json_decref(j);
	model_wipe_free(again, strlen(again));
}

/* The direct writer writes what the jansson tree did: every view, odd strings. */
static void test_encoders_as_jansson(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_full(a);
	struct model_snapshot snap = {.id = "s1", .volume_id = "data", .name = "n\"q\"\n"};
	struct model_node n = {.id = "n1", .address = "http://x/\t", .allocs_reported = true};
	struct model_node_alloc al = {"data", "web-1"};
	char *text = NULL;
	size_t len;
	struct err e;

	(void)state;
	v->failure = "tab\there \x01 \xc3\xa9 \xff";
	v->status.last_error = "quote \" backslash \\ slash /";
	assert_int_equal(model_map_put(a, &v->context, "k\xfe", "\x7f\x1f", &e), 0);
	for (int view = MODEL_VIEW_STORE; view <= MODEL_VIEW_API; view++) {
		text = encode(v, (enum model_view)view);
		same_as_jansson(text);
		model_wipe_free(text, strlen(text));
		assert_int_equal(
		    model_snapshot_encode(&snap, (enum model_view)view, &text, &len, &e), 0);
		same_as_jansson(text);
		free(text);
	}
	n.allocs = &al;
	n.nallocs = 1;
	assert_int_equal(model_node_encode(&n, &text, &len, &e), 0);
	same_as_jansson(text);
	free(text);
	assert_int_equal(model_node_encode_api(&n, &text, &len, &e), 0);
	same_as_jansson(text);
	free(text);
	arena_free(a);
}

static void test_volume_store_round_trip(void **state)
{
	struct arena *a = arena_new(), *b = arena_new();
	struct model_volume *v = vol_full(a), *d = NULL;
	char *text = encode(v, MODEL_VIEW_STORE), *again;
	struct err e;

	(void)state;
	/* The store view keeps what the plugin needs, and no server status. */
	assert_non_null(strstr(text, CANARY));
	assert_non_null(strstr(text, FLAG_CANARY));
	assert_null(strstr(text, "deadline exceeded"));
	assert_null(strstr(text, "schedulable"));
	assert_null(strstr(text, "modify_index"));
	assert_int_equal(model_volume_decode(b, text, strlen(text), &d, &e), 0);
	again = encode(d, MODEL_VIEW_STORE);
	assert_string_equal(text, again);

	assert_string_equal(d->id, "data");
	assert_string_equal(d->name, "data-name");
	assert_int_equal(d->capacity_max, 1 << 30);
	assert_int_equal(d->ncaps, 2);
	assert_int_equal(d->caps[1].attachment, MODEL_ATTACH_BLOCK_DEVICE);
	assert_int_equal(d->nmount_flags, 2);
	assert_string_equal(d->mount_flags[1], FLAG_CANARY);
	assert_string_equal(model_map_get(&d->secrets, "password"), CANARY);
	assert_int_equal(d->nrequisite, 2);
	assert_string_equal(model_map_get(&d->preferred[0].segments, "zone"), "b");
	assert_string_equal(d->snapshot_source, "snap-1");
	assert_int_equal(d->state, MODEL_VOL_READY);
	assert_true(d->node_expansion_required);
	assert_int_equal(d->pending_capacity_min, 2LL << 30);
	assert_string_equal(model_map_get(&d->pending_mutable, "iops"), "6000");
	assert_int_equal(d->nclaims, 1);
	assert_string_equal(d->claims[0].plugin_node_id, "csi-n1");
	assert_int_equal(d->claims[0].state, MODEL_CLAIM_NODE_UNPUBLISHED);
	assert_int_equal(d->claims[0].cap.access, MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER);
	assert_string_equal(d->claims[0].note, "released");
	assert_int_equal(d->npast_claims, 1);
	assert_true(d->past_claims[0].read_only);
	assert_int_equal(d->npubs, 1);
	assert_int_equal(d->pubs[0].state, MODEL_PUB_PUBLISHED);
	assert_string_equal(model_map_get(&d->pubs[0].context, "device"), "/dev/xvdf");
	assert_int_equal(d->created_ms, 1700000000000);
	/* Indices come from the store, not the record. */
	assert_int_equal(d->modify_index, 0);
	model_wipe_free(text, strlen(text));
	model_wipe_free(again, strlen(again));
	arena_free(a);
	arena_free(b);
}

static void test_volume_api_view(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_full(a);
	char *text = encode(v, MODEL_VIEW_API);

	(void)state;
	assert_null(strstr(text, "canary"));
	assert_null(strstr(text, "secrets"));
	assert_null(strstr(text, "mount_flags"));
	assert_null(strstr(text, "noatime"));
	assert_non_null(strstr(text, "\"fs_type\":\"ext4\""));
	assert_non_null(strstr(text, "\"last_error\":\"plugin ebs: deadline exceeded\""));
	assert_non_null(strstr(text, "\"modify_index\":8"));
	assert_non_null(strstr(text, "\"schedulable\":true"));
	assert_non_null(strstr(text, "\"plugin_health\":\"healthy\""));
	assert_non_null(strstr(text, "\"access_mode\":\"multi-node-single-writer\""));
	free(text);
	arena_free(a);
}

/*
 * The claim answer, written in one go, is what the API built before from
 * a jansson tree: the volume's API view, the claim and the publication
 * taken from it (null when none), the state, and with stage the
 * node-stage data (secrets, mount flags, fs type); without stage no
 * secret at all.
 */
static void test_claim_answer(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = vol_full(a);
	json_t *vol, *want, *stage_doc, *sec, *flags;
	char *text = NULL, *api = encode(v, MODEL_VIEW_API), *dumped;
	size_t len = 0;
	struct err e;

	(void)state;
	vol = json_loads(api, 0, NULL);
	assert_non_null(vol);
	sec = json_object();
	for (size_t i = 0; i < v->secrets.n; i++)
		json_object_set_new(sec, v->secrets.kv[i].key, json_string(v->secrets.kv[i].value));
	flags = json_array();
	for (size_t i = 0; i < v->nmount_flags; i++)
		json_array_append_new(flags, json_string(v->mount_flags[i]));
	stage_doc = json_pack("{s:o, s:o, s:s?}", "secrets", sec, "mount_flags", flags, "fs_type",
			      v->fs_type);
	want = json_pack("{s:O, s:O, s:O, s:s, s:o}", "volume", vol, "claim",
			 json_array_get(json_object_get(vol, "claims"), 0), "publication",
			 json_array_get(json_object_get(vol, "publications"), 0),
			 "publication_state", "published", "node_stage", stage_doc);
	dumped = json_dumps(want, JSON_COMPACT);
	assert_int_equal(model_claim_answer_encode(v, &v->claims[0], &v->pubs[0], "published", v,
						   &text, &len, &e),
			 0);
	assert_int_equal(strlen(text), len);
	assert_string_equal(text, dumped);
	model_wipe_free(text, len);
	model_wipe_free(dumped, strlen(dumped));
	model_json_wipe(want);
	json_decref(want);
	/* No claim, no publication, no stage: nulls, and nothing secret. */
	assert_int_equal(
	    model_claim_answer_encode(v, NULL, NULL, "publishing", NULL, &text, &len, &e), 0);
	assert_non_null(strstr(text, "\"claim\":null,\"publication\":null,"
				     "\"publication_state\":\"publishing\"}"));
	assert_null(strstr(text, CANARY));
	assert_null(strstr(text, FLAG_CANARY));
	assert_null(strstr(text, "node_stage"));
	same_as_jansson(text);
	free(text);
	/* The node-stage data comes from the stored volume, not from the (node's) view shown. */
	{
		struct model_volume shown = *v;

		memset(&shown.secrets, 0, sizeof(shown.secrets));
		shown.mount_flags = NULL;
		shown.nmount_flags = 0;
		assert_int_equal(
		    model_claim_answer_encode(&shown, NULL, NULL, "published", v, &text, &len, &e),
		    0);
		assert_non_null(strstr(text, "\"node_stage\":{\"secrets\":{\"canary-key\":\"x\","
					     "\"password\":\"" CANARY
					     "\"},\"mount_flags\":[\"noatime\",\"" FLAG_CANARY
					     "\"],\"fs_type\":\"ext4\"}}"));
		model_wipe_free(text, len);
	}
	json_decref(vol);
	free(api);
	arena_free(a);
}

static void test_snapshot_round_trip(void **state)
{
	struct arena *a = arena_new();
	struct model_snapshot s = {.id = "snap-1",
				   .volume_id = "data",
				   .plugin_id = "hostpath.csi.csid.dev",
				   .external_id = "ext-snap",
				   .name = "snap-1",
				   .state = MODEL_SNAP_READY,
				   .ready_to_use = true,
				   .size_bytes = 4096,
				   .creation_time_ms = 1700000000000,
				   .created_ms = 1700000000001,
				   .modify_index = 12},
			      *d = NULL;
	char *store = NULL, *api = NULL, *again = NULL;
	size_t len;
	struct err e;

	(void)state;
	assert_int_equal(model_map_put(a, &s.secrets, "key", CANARY, &e), 0);
	assert_int_equal(model_map_put(a, &s.parameters, "tier", "cold", &e), 0);
	assert_int_equal(model_snapshot_encode(&s, MODEL_VIEW_STORE, &store, &len, &e), 0);
	assert_non_null(strstr(store, CANARY));
	assert_int_equal(model_snapshot_encode(&s, MODEL_VIEW_API, &api, &len, &e), 0);
	assert_null(strstr(api, CANARY));
	assert_null(strstr(api, "secrets"));
	assert_non_null(strstr(api, "\"modify_index\":12"));
	assert_int_equal(model_snapshot_decode(a, store, strlen(store), &d, &e), 0);
	assert_int_equal(model_snapshot_encode(d, MODEL_VIEW_STORE, &again, &len, &e), 0);
	assert_string_equal(store, again);
	assert_true(d->ready_to_use);
	assert_int_equal(d->state, MODEL_SNAP_READY);
	assert_string_equal(model_map_get(&d->secrets, "key"), CANARY);
	model_wipe_free(store, strlen(store));
	model_wipe_free(again, strlen(again));
	free(api);
	arena_free(a);
}

static void test_node_round_trip(void **state)
{
	struct arena *a = arena_new();
	struct model_node_plugin p[2] = {{.plugin_id = "hostpath.csi.csid.dev",
					  .type = MODEL_PLUGIN_NODE,
					  .healthy = true,
					  .health = "healthy",
					  .version = "1.0.0",
					  .plugin_node_id = "csi-n1",
					  .max_volumes = 16},
					 {.plugin_id = "hostpath.csi.csid.dev",
					  .type = MODEL_PLUGIN_CONTROLLER,
					  .healthy = false,
					  .health = "probe: unavailable \xff"}};
	char *caps[] = {"STAGE_UNSTAGE_VOLUME", "EXPAND_VOLUME"};
	struct model_node n = {.id = "n1",
			       .status = MODEL_NODE_DOWN,
			       .address = "http://10.0.0.5:4650",
			       .registered_ms = 5,
			       .updated_ms = 6,
			       .plugins = p,
			       .nplugins = 2},
			  *d = NULL;
	char *text = NULL, *again = NULL, tag[MODEL_INSTANCE_TAG_LEN + 1];
	size_t len;
	struct err e;

	(void)state;
	p[0].caps = caps;
	p[0].ncaps = 2;
	assert_int_equal(model_map_put(a, &p[0].topology.segments, "zone", "a", &e), 0);
	assert_int_equal(model_map_put(a, &p[1].topology.segments,
				       "r\xff"
				       "ck",
				       "7\xfe", &e),
			 0);
	assert_int_equal(model_node_encode(&n, &text, &len, &e), 0);
	/* Texts and keys that are not UTF-8 (from a plugin) are kept as ASCII. */
	assert_non_null(strstr(text, "unavailable ?"));
	assert_non_null(strstr(text, "\"r?ck\":\"7?\""));
	assert_int_equal(model_node_decode(a, text, len, &d, &e), 0);
	assert_int_equal(model_node_encode(d, &again, &len, &e), 0);
	assert_string_equal(text, again);
	assert_int_equal(d->status, MODEL_NODE_DOWN);
	assert_string_equal(d->address, "http://10.0.0.5:4650");
	assert_int_equal(d->nplugins, 2);
	assert_int_equal(d->plugins[1].type, MODEL_PLUGIN_CONTROLLER);
	assert_string_equal(d->plugins[0].caps[1], "EXPAND_VOLUME");
	assert_int_equal(d->plugins[0].max_volumes, 16);
	assert_string_equal(model_map_get(&d->plugins[0].topology.segments, "zone"), "a");
	free(text);
	free(again);
	/* The store keeps the instance ID; the API shows its tag only. */
	n.instance_id = "5f0c9e2a7b1d4c3e8f6a0b9c1d2e3f40";
	assert_int_equal(model_node_encode(&n, &text, &len, &e), 0);
	assert_non_null(strstr(text, n.instance_id));
	free(text);
	assert_int_equal(model_node_encode_api(&n, &text, &len, &e), 0);
	assert_null(strstr(text, n.instance_id));
	assert_null(strstr(text, "instance_id"));
	model_node_instance_tag(n.instance_id, tag);
	assert_int_equal(strlen(tag), MODEL_INSTANCE_TAG_LEN);
	assert_non_null(strstr(text, tag));
	free(text);
	arena_free(a);
}

/* Damaged records: CSID_EPROTO, never a crash. */
static void test_store_damaged(void **state)
{
	static const char *const bad[] = {
	    "",
	    "[]",
	    "{",
	    "{\"state\":\"ready\"}",
	    "{\"id\":\"v\",\"state\":\"melting\"}",
	    "{\"id\":\"v\",\"state\":\"ready\",\"capacity\":-1}",
	    "{\"id\":\"v\",\"state\":\"ready\",\"claims\":{}}",
	    "{\"id\":\"v\",\"state\":\"ready\",\"claims\":[{\"alloc_id\":\"a\"}]}",
	    "{\"id\":\"v\",\"state\":\"ready\",\"claims\":[{\"alloc_id\":\"a\",\"node_id\":\"n\","
	    "\"mode\":\"read\",\"access_mode\":\"nope\",\"state\":\"claimed\"}]}",
	    "{\"id\":\"v\",\"state\":\"ready\",\"secrets\":{\"k\":1}}",
	    "{\"id\":\"v\",\"state\":\"ready\",\"parameters\":[]}",
	    "{\"id\":7,\"state\":\"ready\"}",
	};
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	struct model_node *n = NULL;
	struct model_snapshot *s = NULL;
	const char *future = "{\"id\":\"v\",\"state\":\"ready\",\"future\":{\"x\":1}}";
	const char *no_type = "{\"id\":\"n\",\"plugins\":[{\"plugin_id\":\"p\"}]}";
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(model_volume_decode(a, bad[i], strlen(bad[i]), &v, &e),
				 CSID_EPROTO);
		assert_true(strncmp(e.msg, "volume record", 13) == 0);
	}
	assert_int_equal(model_node_decode(a, "{}", 2, &n, &e), CSID_EPROTO);
	assert_int_equal(model_node_decode(a, no_type, strlen(no_type), &n, &e), CSID_EPROTO);
	assert_int_equal(model_snapshot_decode(a, "{\"id\":\"s\"}", 10, &s, &e), CSID_EPROTO);
	/* Unknown keys of a newer record are skipped. */
	assert_int_equal(model_volume_decode(a, future, strlen(future), &v, &e), 0);
	assert_string_equal(v->id, "v");
	arena_free(a);
}

/* The store decoders' rules: duplicates, nulls, unknown values, places in messages. */
static void test_store_rules(void **state)
{
	static const struct {
		const char *text, *msg;
	} bad[] = {
	    {"{\"id\":\"v\",\"id\":\"w\",\"state\":\"ready\"}", "volume record: id: duplicate key"},
	    {"{\"id\":\"v\",\"state\":\"ready\",\"parameters\":{\"k\":\"1\",\"k\":\"2\"}}",
	     "volume record: parameters.k: duplicate key"},
	    {"{\"id\":\"v\",\"state\":\"ready\",\"secrets\":{\"pw\":\"1\",\"pw\":\"2\"}}",
	     "volume record: secrets: duplicate key"},
	    {"{\"id\":\"v\",\"state\":null}", "volume record: state: required"},
	    {"{\"id\":\"v\",\"state\":\"ready\"} x",
	     "volume record: not valid JSON (line 1 column 28: end of text expected)"},
	    {"{\"id\":\"v\",\n\"state\":\"ready\",,}",
	     "volume record: not valid JSON (line 2 column 17: expected a string as key)"},
	    {"{\"id\":\"v\",\"state\":\"ready\",\"claims\":[{\"alloc_id\":\"a\",\"node_id\":\"n\","
	     "\"mode\":\"read\",\"access_mode\":\"single-node-writer\",\"state\":\"claimed\","
	     "\"claimed_ms\":1.5}]}",
	     "volume record: claims[0].claimed_ms: expected an integer"},
	    {"{\"id\":\"v\",\"state\":\"ready\",\"claims\":[{},{}]}",
	     "volume record: claims[0].alloc_id: required"},
	    {"{\"id\":\"v\",\"state\":\"ready\",\"secrets\":{\"pw\":\"hunter2\\u0000\"}}",
	     "volume record: secrets: contains a NUL byte"},
	    {"{\"id\":\"v\",\"state\":\"ready\",\"capacity_min\":\"ten\"}",
	     "volume record: capacity_min: "},
	};
	const char *nulls =
	    "{\"id\":\"v\",\"state\":\"ready\",\"name\":null,\"claims\":null,"
	    "\"pending\":null,\"mount_options\":{\"fs_type\":null},\"secrets\":null}";
	const char *newer =
	    "{\"future\":[{\"id\":\"x\",\"deep\":[[{\"a\":null}],1e99]}],\"id\":\"v\","
	    "\"state\":\"ready\",\"capacity_min\":\"1GiB\",\"parameters\":{\"b\":\"2\",\"a\":\"1\"}"
	    ","
	    "\"past_claims\":[{\"alloc_id\":\"a\",\"node_id\":\"n\",\"mode\":\"write\","
	    "\"access_mode\":\"single-node-writer\",\"state\":\"freed\",\"new\":{}}]}";
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_clear(&e);
		assert_int_equal(model_volume_decode(a, bad[i].text, strlen(bad[i].text), &v, &e),
				 CSID_EPROTO);
		if (strncmp(e.msg, bad[i].msg, strlen(bad[i].msg)) != 0)
			fail_msg("%s: got \"%s\", expected \"%s\"", bad[i].text, e.msg, bad[i].msg);
		assert_null(strstr(e.msg, "hunter2"));
	}
	err_clear(&e);
	assert_int_equal(model_volume_decode(a, nulls, strlen(nulls), &v, &e), 0);
	assert_null(v->name);
	assert_int_equal(v->nclaims, 0);
	assert_null(v->fs_type);
	/* A newer record's keys are skipped; an older record's past claims are read. */
	assert_int_equal(model_volume_decode(a, newer, strlen(newer), &v, &e), 0);
	assert_string_equal(v->id, "v");
	assert_int_equal(v->capacity_min, 1073741824);
	assert_int_equal(v->parameters.n, 2);
	assert_string_equal(v->parameters.kv[0].key, "a");
	assert_int_equal(v->npast_claims, 1);
	assert_int_equal(v->past_claims[0].state, MODEL_CLAIM_FREED);
	/* No error slot: the code still comes back. */
	assert_int_equal(model_volume_decode(a, "[]", 2, &v, NULL), CSID_EPROTO);
	arena_free(a);
}

static int spec(struct arena *a, const char *text, bool comments, struct model_volume **out,
		struct err *e)
{
	err_clear(e);
	return model_volume_spec_decode(a, text, strlen(text), comments, out, e);
}

static void test_spec_decode_ok(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	struct err e;
	const char *text = "{\"id\": \"data\", \"plugin_id\": \"hostpath.csi.csid.dev\","
			   " \"capacity_min\": \"10GiB\", \"capacity_max\": 21474836480,"
			   " \"capabilities\": [{\"access_mode\": \"single-node-writer\"},"
			   "  {\"access_mode\": \"multi-node-reader-only\","
			   "   \"attachment_mode\": \"block-device\"}],"
			   " \"mount_options\": {\"fs_type\": \"xfs\", \"mount_flags\": [\"ro\"]},"
			   " \"parameters\": {\"b\": \"2\", \"a\": \"1\"},"
			   " \"secrets\": {\"k\": \"" CANARY "\"},"
			   " \"topology_request\": {\"requisite\": [{\"zone\": \"a\"}],"
			   "  \"preferred\": [{\"zone\": \"a\"}]},"
			   " \"clone_source\": \"old\", \"external_id\": null}";

	(void)state;
	assert_int_equal(spec(a, text, false, &v, &e), 0);
	assert_string_equal(v->id, "data");
	assert_int_equal(v->capacity_min, 10737418240);
	assert_int_equal(v->capacity_max, 21474836480);
	assert_int_equal(v->ncaps, 2);
	assert_int_equal(v->caps[0].attachment, MODEL_ATTACH_FILE_SYSTEM);
	assert_int_equal(v->caps[1].access, MODEL_ACCESS_MULTI_NODE_READER_ONLY);
	assert_int_equal(v->caps[1].attachment, MODEL_ATTACH_BLOCK_DEVICE);
	assert_string_equal(v->mount_flags[0], "ro");
	/* Maps come out sorted. */
	assert_string_equal(v->parameters.kv[0].key, "a");
	assert_string_equal(v->parameters.kv[1].key, "b");
	assert_null(v->external_id);
	assert_int_equal(model_volume_validate(v, true, &e), 0);
	arena_free(a);
}

/* Each bad spec and the start of its error (the JSON path first). */
static void test_spec_decode_errors(void **state)
{
	static const struct {
		const char *text;
		const char *msg;
	} cases[] = {
	    {"[]", "volume spec: expected an object"},
	    {"{\"idd\": \"x\"}", "volume spec: idd: unknown key"},
	    {"{\"capabilities\": [{\"access_mode\": \"single-node-writer\"}, {\"acces_mode\": "
	     "\"x\"}]}",
	     "volume spec: capabilities[1].acces_mode: unknown key"},
	    {"{\"capabilities\": [{\"access_mode\": \"single-node-writr\"}]}",
	     "volume spec: capabilities[0].access_mode: unknown access mode (expected one of: "},
	    {"{\"capabilities\": [{}]}", "volume spec: capabilities[0].access_mode: required"},
	    {"{\"capabilities\": {}}", "volume spec: capabilities: expected an array"},
	    {"{\"id\": 7}", "volume spec: id: expected a string"},
	    {"{\"capacity_min\": -5}", "volume spec: capacity_min: negative"},
	    {"{\"capacity_min\": 1.5}", "volume spec: capacity_min: expected bytes"},
	    {"{\"capacity_max\": \"10 GB\"}", "volume spec: capacity_max: size: unknown unit"},
	    {"{\"mount_options\": {\"fs_type\": \"ext4\", \"flags\": []}}",
	     "volume spec: mount_options.flags: unknown key"},
	    {"{\"mount_options\": {\"mount_flags\": [\"a\", 3]}}",
	     "volume spec: mount_options.mount_flags[1]: expected a string"},
	    {"{\"parameters\": {\"a\": 1}}", "volume spec: parameters.a: expected a string"},
	    {"{\"parameters\": {\"\": \"x\"}}", "volume spec: parameters: empty key"},
	    {"{\"secrets\": {\"" CANARY "\": 1}}",
	     "volume spec: secrets: every value must be a string"},
	    {"{\"topology_request\": {\"required\": []}}",
	     "volume spec: topology_request.required: unknown key"},
	    {"{\"topology_request\": {\"requisite\": [{\"zone\": 1}]}}",
	     "volume spec: topology_request.requisite[0].zone: expected a string"},
	    {"{\"topology_request\": {\"preferred\": [\"a\"]}}",
	     "volume spec: topology_request.preferred[0]: expected an object"},
	    {"{\"name\": \"a\\u0000b\"}", "volume spec: line 1 column"},
	    {"{\"id\": \"a\", \"id\": \"b\"}", "volume spec: line 1 column"},
	    {"{\"secrets\": {\"k\": \"" CANARY, "volume spec: line 1 column"},
	    {"", "volume spec: line 1 column"},
	    {"{\"state\": \"ready\"}", "volume spec: state: unknown key"},
	};
	struct arena *a = arena_new();
	struct model_volume *v;
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(spec(a, cases[i].text, false, &v, &e), CSID_EINVAL);
		if (strncmp(e.msg, cases[i].msg, strlen(cases[i].msg)) != 0)
			fail_msg("spec %s: expected \"%s...\", got \"%s\"", cases[i].text,
				 cases[i].msg, e.msg);
		assert_null(strstr(e.msg, CANARY));
	}
	arena_free(a);
}

/* prefix, n times c, suffix into buf (cap bytes). */
static const char *fill(char *buf, size_t cap, const char *prefix, char c, size_t n,
			const char *suffix)
{
	size_t lp = strlen(prefix), ls = strlen(suffix);

	assert_true(lp + n + ls < cap);
	memcpy(buf, prefix, lp);
	memset(buf + lp, c, n);
	memcpy(buf + lp + n, suffix, ls + 1);
	return buf;
}

static void test_spec_sizes(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v;
	size_t big = MODEL_SPEC_MAX + 1, used;
	char *text = malloc(big + 64);
	struct err e;

	(void)state;
	memset(text, ' ', big);
	memcpy(text, "{}", 2);
	assert_int_equal(model_volume_spec_decode(a, text, big, false, &v, &e), CSID_ETOOBIG);

	/* A 10 KiB ID, a 200-byte name, a 5 KiB map, too many capabilities. */
	fill(text, big, "{\"id\": \"", 'a', 10240, "\"}");
	assert_int_equal(spec(a, text, false, &v, &e), CSID_EINVAL);
	assert_string_equal(e.msg, "volume spec: id: longer than 128 bytes");
	fill(text, big, "{\"name\": \"", 'n', 200, "\"}");
	assert_int_equal(spec(a, text, false, &v, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "name: longer than 128 bytes"));
	fill(text, big, "{\"secrets\": {\"k\": \"", 's', 5000, "\"}}");
	assert_int_equal(spec(a, text, false, &v, &e), CSID_EINVAL);
	assert_string_equal(e.msg, "volume spec: secrets: more than 4096 bytes of keys and values");
	used = (size_t)snprintf(text, big, "{\"capabilities\": [");
	for (int i = 0; i <= MODEL_CAPS_MAX; i++)
		used +=
		    (size_t)snprintf(text + used, big - used,
				     "%s{\"access_mode\": \"single-node-writer\"}", i ? "," : "");
	snprintf(text + used, big - used, "]}");
	assert_int_equal(spec(a, text, false, &v, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "capabilities: more than 16 entries"));
	free(text);
	arena_free(a);
}

/* Hostile IDs decode (they are strings) and are refused by validation. */
static void test_spec_hostile_ids(void **state)
{
	static const char *const ids[] = {"..", "a/b",  "../../etc/passwd", "a\\u0001b", "a b",
					  ".",  "a\\nb"};
	struct arena *a = arena_new();
	struct model_volume *v;
	char text[256];
	struct err e;

	(void)state;
	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		snprintf(text, sizeof(text),
			 "{\"id\": \"%s\", \"plugin_id\": \"p.example\", \"capabilities\": "
			 "[{\"access_mode\": \"single-node-writer\"}]}",
			 ids[i]);
		assert_int_equal(spec(a, text, false, &v, &e), 0);
		assert_int_equal(model_volume_validate(v, true, &e), CSID_EINVAL);
		assert_true(strncmp(e.msg, "volume spec: id ", 16) == 0);
		for (const char *m = e.msg; *m; m++)
			assert_true((unsigned char)*m >= 0x20 && *m != '/');
	}
	arena_free(a);
}

static void test_spec_comments(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	struct err e;
	const char *text = "# a comment\n"
			   "  // another, indented\n"
			   "{\"id\": \"x\", # not a comment here\n"
			   "}\n";

	(void)state;
	assert_int_equal(spec(a, "# c\n{\"id\": \"x\"}\n", true, &v, &e), 0);
	assert_string_equal(v->id, "x");
	assert_int_equal(spec(a, "# c\n{\"id\": \"x\"}\n", false, &v, &e), CSID_EINVAL);
	/* Only whole lines are comments; line numbers are kept. */
	assert_int_equal(spec(a, text, true, &v, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "line 3"));
	assert_int_equal(spec(a, "{\"id\": \"a#b\",\n\"name\": \"//x\"}", true, &v, &e), 0);
	assert_string_equal(v->id, "a#b");
	assert_string_equal(v->name, "//x");
	arena_free(a);
}

static void test_spec_example(void **state)
{
	struct arena *a = arena_new();
	struct model_volume *v = NULL;
	const char *text = model_volume_spec_example();
	char *api;
	struct err e;

	(void)state;
	assert_int_equal(spec(a, text, true, &v, &e), 0);
	assert_int_equal(model_volume_validate(v, true, &e), 0);
	assert_string_equal(v->id, "data");
	assert_int_equal(v->capacity_min, 1LL << 30);
	assert_int_equal(v->ncaps, 1);
	assert_int_equal(spec(a, text, false, &v, &e), CSID_EINVAL);
	/* What a spec decodes to encodes for the API without its mount flags. */
	api = encode(v, MODEL_VIEW_API);
	assert_null(strstr(api, "noatime"));
	free(api);
	arena_free(a);
}

static void test_snapshot_spec_decode(void **state)
{
	struct arena *a = arena_new();
	struct model_snapshot *s = NULL;
	const char *ok =
	    "{\"id\": \"snap-1\", \"volume_id\": \"data\", \"name\": \"nightly\","
	    " \"parameters\": {\"tier\": \"cold\"}, \"secrets\": {\"k\": \"" CANARY "\"}}";
	const char *unknown = "{\"id\": \"snap-1\", \"state\": \"ready\"}";
	const char *bad_secret = "{\"secrets\": {\"" CANARY "\": [\"" CANARY "\"]}}";
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(model_snapshot_spec_decode(a, ok, strlen(ok), &s, &e), 0);
	assert_string_equal(s->volume_id, "data");
	assert_string_equal(s->name, "nightly");
	assert_string_equal(model_map_get(&s->secrets, "k"), CANARY);
	assert_int_equal(model_snapshot_validate(s, &e), 0);
	assert_int_equal(model_snapshot_spec_decode(a, unknown, strlen(unknown), &s, &e),
			 CSID_EINVAL);
	assert_string_equal(e.msg, "snapshot spec: state: unknown key");
	assert_int_equal(model_snapshot_spec_decode(a, bad_secret, strlen(bad_secret), &s, &e),
			 CSID_EINVAL);
	assert_string_equal(e.msg, "snapshot spec: secrets: every value must be a string");
	arena_free(a);
}

static void test_node_spec_decode(void **state)
{
	struct arena *a = arena_new();
	struct model_node *n = NULL;
	const char *ok = "{\"address\": \"127.0.0.1:4650\", \"plugins\": [{\"plugin_id\": "
			 "\"hostpath.csi.csid.dev\", \"type\": "
			 "\"node\", \"healthy\": true, \"plugin_node_id\": \"csi-n1\","
			 " \"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"topology\": {\"zone\": "
			 "\"a\"}}]}";
	const char *typo = "{\"id\": \"n1\", \"plugins\": [{\"plugin_id\": \"p\", \"type\": "
			   "\"node\", \"healty\": true}]}";
	const char *bad_type = "{\"id\": \"n1\", \"plugins\": [{\"plugin_id\": \"p\", \"type\": "
			       "\"monolith\"}]}";
	struct err e;

	(void)state;
	err_clear(&e);
	/* The ID may come from the URL. */
	assert_int_equal(model_node_spec_decode(a, ok, strlen(ok), &n, &e), 0);
	assert_null(n->id);
	assert_string_equal(n->address, "127.0.0.1:4650");
	assert_int_equal(n->nplugins, 1);
	assert_true(n->plugins[0].healthy);
	assert_string_equal(n->plugins[0].plugin_node_id, "csi-n1");
	assert_int_equal(model_node_validate(n, &e), CSID_EINVAL);
	n->id = "n1";
	assert_int_equal(model_node_validate(n, &e), 0);
	assert_int_equal(model_node_spec_decode(a, typo, strlen(typo), &n, &e), CSID_EINVAL);
	assert_string_equal(e.msg, "node: plugins[0].healty: unknown key");
	assert_int_equal(model_node_spec_decode(a, bad_type, strlen(bad_type), &n, &e),
			 CSID_EINVAL);
	assert_string_equal(e.msg, "node: plugins[0].type: unknown plugin type (expected one of: "
				   "controller, node)");
	assert_int_equal(model_node_spec_decode(a, "{", 1, &n, &e), CSID_EINVAL);
	assert_true(strncmp(e.msg, "node: line 1", 12) == 0);
	arena_free(a);
}

/* A freed claim for the history tests, alloc_id "a<i>". */
static struct model_claim hist_claim(struct arena *a, int i)
{
	struct model_claim c = {.node_id = "n1",
				.mode = MODEL_CLAIM_WRITE,
				.state = MODEL_CLAIM_FREED,
				.claimed_ms = 1000 + i,
				.updated_ms = 2000 + i,
				.note = "released"};

	c.alloc_id = arena_printf(a, "a%d", i);
	c.cap.access = MODEL_ACCESS_SINGLE_NODE_WRITER;
	c.cap.attachment = MODEL_ATTACH_FILE_SYSTEM;
	return c;
}

/*
 * model_history_append: to no history, to one (the kept claims copied as
 * they were, the new last), past MODEL_PAST_CLAIMS_MAX (the oldest
 * dropped, in one append or over many), unknown keys dropped, and a
 * damaged record refused (EPROTO, nothing written).
 */
static void test_history_append(void **state)
{
	static const char *const damaged[] = {" ",
					      "[]",
					      "{\"past_claims\": {}}",
					      "{\"past_claims\": [1]}",
					      "{\"past_claims\": [{}], \"past_claims\": []}",
					      "{\"past_claims\": [{}]",
					      "{\"past_claims\": [{}]} x"};
	static const char later[] = "{\"past_claims\": [], \"later\": {\"x\": [1]}}";
	struct model_claim c[MODEL_PAST_CLAIMS_MAX + 3], *got = NULL;
	struct model_history_map map;
	struct arena *a = arena_new();
	char *text = NULL, *next = NULL;
	size_t len = 0, nlen = 0, n = 0;
	struct err e;

	(void)state;
	for (int i = 0; i < MODEL_PAST_CLAIMS_MAX + 3; i++)
		c[i] = hist_claim(a, i);
	assert_int_equal(model_history_append(NULL, 0, NULL, c, 2, &text, &len, &map, &e), 0);
	assert_int_equal(model_history_decode(a, text, len, &got, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_int_equal(map.n, 2);
	assert_int_equal(map.len, len);
	assert_string_equal(got[0].alloc_id, "a0");
	assert_string_equal(got[1].alloc_id, "a1");
	assert_string_equal(got[1].note, "released");
	assert_int_equal(got[1].updated_ms, 2001);
	/* One more, then past the bound one at a time: always the newest 16, newest last. */
	for (int i = 2; i < MODEL_PAST_CLAIMS_MAX + 3; i++) {
		struct model_history_map made, bad = map;
		char *read = NULL;
		size_t rlen = 0;

		/* With the map the last append made, as without it: the same text. */
		assert_int_equal(
		    model_history_append(text, len, &map, &c[i], 1, &next, &nlen, &made, &e), 0);
		assert_int_equal(
		    model_history_append(text, len, NULL, &c[i], 1, &read, &rlen, NULL, &e), 0);
		assert_int_equal(rlen, nlen);
		assert_memory_equal(read, next, nlen);
		free(read);
		/* A map that does not fit the text is not used (the text is read through). */
		bad.start[bad.n - 1]++;
		assert_int_equal(
		    model_history_append(text, len, &bad, &c[i], 1, &read, &rlen, NULL, &e), 0);
		assert_memory_equal(read, next, nlen);
		free(read);
		bad = map;
		bad.len++;
		assert_int_equal(
		    model_history_append(text, len, &bad, &c[i], 1, &read, &rlen, NULL, &e), 0);
		assert_memory_equal(read, next, nlen);
		free(read);
		/* The map made is the new text's: each claim an object where it says. */
		assert_int_equal(made.len, nlen);
		assert_int_equal(made.n,
				 i + 1 < MODEL_PAST_CLAIMS_MAX ? i + 1 : MODEL_PAST_CLAIMS_MAX);
		for (size_t k = 0; k < made.n; k++) {
			assert_int_equal(next[made.start[k]], '{');
			assert_int_equal(next[made.end[k] - 1], '}');
			assert_true(k == 0 || next[made.start[k] - 1] == ',');
		}
		assert_int_equal(next[made.end[made.n - 1]], ']');
		map = made;
		free(text);
		text = next;
		len = nlen;
		assert_int_equal(model_history_decode(a, text, len, &got, &n, &e), 0);
		assert_int_equal(n, i + 1 < MODEL_PAST_CLAIMS_MAX ? i + 1 : MODEL_PAST_CLAIMS_MAX);
		assert_string_equal(got[n - 1].alloc_id, c[i].alloc_id);
		assert_string_equal(got[0].alloc_id, c[i + 1 - n].alloc_id);
	}
	free(text);
	/* More than the bound in one append: the newest of them. */
	assert_int_equal(model_history_append(later, strlen(later), NULL, c,
					      MODEL_PAST_CLAIMS_MAX + 3, &text, &len, NULL, &e),
			 0);
	assert_null(strstr(text, "later"));
	assert_int_equal(model_history_decode(a, text, len, &got, &n, &e), 0);
	assert_int_equal(n, MODEL_PAST_CLAIMS_MAX);
	assert_string_equal(got[0].alloc_id, "a3");
	free(text);
	for (size_t i = 0; i < sizeof(damaged) / sizeof(damaged[0]); i++) {
		text = NULL;
		assert_int_equal(model_history_append(damaged[i], strlen(damaged[i]), NULL, c, 1,
						      &text, &len, NULL, &e),
				 CSID_EPROTO);
		assert_null(text);
		assert_string_equal(e.msg, "claim history record: damaged");
	}
	arena_free(a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_encoders_as_jansson),
	    cmocka_unit_test(test_history_append),
	    cmocka_unit_test(test_volume_store_round_trip),
	    cmocka_unit_test(test_volume_api_view),
	    cmocka_unit_test(test_claim_answer),
	    cmocka_unit_test(test_snapshot_round_trip),
	    cmocka_unit_test(test_node_round_trip),
	    cmocka_unit_test(test_store_damaged),
	    cmocka_unit_test(test_store_rules),
	    cmocka_unit_test(test_spec_decode_ok),
	    cmocka_unit_test(test_spec_decode_errors),
	    cmocka_unit_test(test_spec_sizes),
	    cmocka_unit_test(test_spec_hostile_ids),
	    cmocka_unit_test(test_spec_comments),
	    cmocka_unit_test(test_spec_example),
	    cmocka_unit_test(test_snapshot_spec_decode),
	    cmocka_unit_test(test_node_spec_decode),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
