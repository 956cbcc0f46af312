/*
 * End to end: `csid server` over real HTTP with csi-hostpath supervised
 * as its controller plugin. The volume lifecycle through the API (create,
 * node registration, claim with controller publish, a refused second
 * writer naming the holder, release through controller unpublish to
 * freed, delete); a canary secret and mount flag never seen in any
 * answer, event or log line; ACL tokens; blocking queries; pagination;
 * bad bodies and hostile IDs; racing claimers; the event stream.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hostpath_proc.h"
#include "server_proc.h"

#define CANARY "CANARY-zq81x"
#define WAIT_MS 20000

static const char node_body[] =
    "{\"plugins\": [{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"type\": \"node\", "
    "\"healthy\": true, \"health\": \"healthy\", \"version\": \"0.1.0\", "
    "\"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"plugin_node_id\": \"node-1\", "
    "\"max_volumes\": 0, \"topology\": {\"topology.hostpath.csi/node\": \"node-1\"}}]}";

/* Every answer body seen by a test, to grep for the canary at the end. */
struct seen {
	char *text;
	size_t len;
};

static void seen_add(struct seen *s, const char *t)
{
	size_t n = t ? strlen(t) : 0;
	char *p = realloc(s->text, s->len + n + 2);

	if (!p)
		return;
	s->text = p;
	memcpy(s->text + s->len, t ? t : "", n);
	s->len += n;
	s->text[s->len++] = '\n';
	s->text[s->len] = '\0';
}

struct fixture {
	struct server_proc s;
	struct seen seen;
};

static long req(struct fixture *f, const char *method, const char *path, const char *body,
		json_t **out)
{
	char *text = NULL;
	long st = http_client_do(f->s.http, method, path, body, &text, NULL, 30000);

	seen_add(&f->seen, text);
	if (out)
		*out = text ? json_loads(text, 0, NULL) : NULL;
	free(text);
	return st;
}

static int setup_with(void **state, const char *extra)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	if (server_proc_init(&f->s) || server_proc_write_config(&f->s, NULL, extra) ||
	    server_proc_start(&f->s) || !server_proc_wait_ready(&f->s, WAIT_MS)) {
		server_proc_dump_log(&f->s, "setup");
		server_proc_cleanup(&f->s);
		free(f);
		return -1;
	}
	return 0;
}

static int setup(void **state)
{
	return setup_with(state, NULL);
}

static int setup_acl(void **state)
{
	return setup_with(state,
			  "\"acl_tokens\": [{\"secret\": \"write-token-1\", \"write\": true},"
			  " {\"secret\": \"read-token-1\", \"write\": false}]");
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	server_proc_cleanup(&f->s);
	free(f->seen.text);
	free(f);
	return 0;
}

static const char *jstr(json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

/* Creates volume id (single-node-single-writer unless access given) and waits until ready. */
static void create_ready(struct fixture *f, const char *id, const char *access)
{
	char path[256], body[1024];

	snprintf(path, sizeof(path), "/v1/volume/%s/create", id);
	snprintf(body, sizeof(body),
		 "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"capacity_min\": \"1MiB\", "
		 "\"capabilities\": [{\"access_mode\": \"%s\", \"attachment_mode\": "
		 "\"file-system\"}], \"mount_options\": {\"fs_type\": \"ext4\", \"mount_flags\": "
		 "[\"" CANARY "-flag\"]}, \"secrets\": {\"token\": \"" CANARY "-secret\"}, "
		 "\"parameters\": {\"p\": \"1\"}}",
		 access ? access : "single-node-single-writer");
	assert_int_equal(req(f, "PUT", path, body, NULL), 200);
	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	if (!server_proc_wait_field(&f->s, path, "state", "ready", WAIT_MS)) {
		server_proc_dump_log(&f->s, "create");
		fail_msg("volume %s never became ready", id);
	}
}

static const char *claim_body(char *buf, size_t len, const char *alloc, const char *mode)
{
	snprintf(buf, len,
		 "{\"alloc_id\": \"%s\", \"node_id\": \"node-1\", \"mode\": \"%s\", "
		 "\"access_mode\": \"single-node-single-writer\", \"attachment_mode\": "
		 "\"file-system\"}",
		 alloc, mode);
	return buf;
}

static bool claims_empty(struct fixture *f, const char *path)
{
	int64_t deadline = hpp_now_ms() + WAIT_MS;

	while (hpp_now_ms() < deadline) {
		json_t *v = NULL;
		bool done;

		req(f, "GET", path, NULL, &v);
		done = v && json_array_size(json_object_get(v, "claims")) == 0 &&
		       json_array_size(json_object_get(v, "publications")) == 0 &&
		       json_array_size(json_object_get(v, "past_claims")) > 0;
		json_decref(v);
		if (done)
			return true;
		hpp_pause_ms(10);
	}
	return false;
}

static void test_lifecycle(void **state)
{
	struct fixture *f = *state;
	char body[512];
	json_t *v = NULL, *c;
	long st;

	assert_true(server_proc_wait_plugin(&f->s, SERVER_PROC_HP_ID, WAIT_MS));
	assert_int_equal(req(f, "PUT", "/v1/node/node-1", node_body, NULL), 200);
	create_ready(f, "data", NULL);
	assert_int_equal(req(f, "GET", "/v1/volume/data", NULL, &v), 200);
	assert_non_null(jstr(v, "external_id"));
	assert_true(json_integer_value(json_object_get(v, "capacity")) >= 1024 * 1024);
	json_decref(v);

	st = req(f, "PUT", "/v1/volume/data/claim",
		 claim_body(body, sizeof(body), "web-1", "write"), &v);
	assert_int_equal(st, 200);
	c = json_array_get(json_object_get(v, "claims"), 0);
	assert_string_equal(jstr(c, "alloc_id"), "web-1");
	assert_string_equal(jstr(c, "state"), "claimed");
	assert_string_equal(jstr(c, "plugin_node_id"), "node-1");
	json_decref(v);
	/* The reconciler publishes the volume to the node. */
	{
		int64_t deadline = hpp_now_ms() + WAIT_MS;
		bool published = false;

		while (!published && hpp_now_ms() < deadline) {
			req(f, "GET", "/v1/volume/data", NULL, &v);
			c = json_array_get(json_object_get(v, "publications"), 0);
			published =
			    c && jstr(c, "state") && strcmp(jstr(c, "state"), "published") == 0;
			json_decref(v);
			if (!published)
				hpp_pause_ms(10);
		}
		assert_true(published);
	}
	/* A second allocation is refused, with the holder named. */
	st = req(f, "PUT", "/v1/volume/data/claim",
		 claim_body(body, sizeof(body), "web-2", "write"), &v);
	assert_int_equal(st, 409);
	assert_string_equal(jstr(v, "code"), "conflict");
	assert_non_null(strstr(jstr(v, "error"), "web-1"));
	json_decref(v);
	/* Release: node-unpublished, then controller unpublish, then freed. */
	assert_int_equal(
	    req(f, "PUT", "/v1/volume/data/release", "{\"alloc_id\": \"web-1\"}", NULL), 200);
	assert_true(claims_empty(f, "/v1/volume/data"));
	assert_int_equal(req(f, "PUT", "/v1/volume/data/claim",
			     claim_body(body, sizeof(body), "web-2", "write"), NULL),
			 200);
	assert_int_equal(req(f, "PUT", "/v1/volume/data/release",
			     "{\"alloc_id\": \"web-2\", \"force\": true}", &v),
			 200);
	assert_non_null(jstr(v, "skipped"));
	json_decref(v);
	/* Delete, then the record is gone. */
	assert_int_equal(req(f, "DELETE", "/v1/volume/data/delete", NULL, NULL), 200);
	{
		int64_t deadline = hpp_now_ms() + WAIT_MS;

		while (req(f, "GET", "/v1/volume/data", NULL, NULL) != 404 &&
		       hpp_now_ms() < deadline)
			hpp_pause_ms(10);
	}
	assert_int_equal(req(f, "GET", "/v1/volume/data", NULL, NULL), 404);
}

struct stream_ctx {
	struct server_proc *s;
	char *text;
};

static void *stream_thread(void *arg)
{
	struct stream_ctx *c = arg;
	struct http_client *h = http_client_new(c->s->base);

	/* The stream never ends by itself: the timeout ends it. */
	if (h)
		http_client_do(h, "GET", "/v1/event/stream?index=0", NULL, &c->text, NULL, 3000);
	http_client_free(h);
	return NULL;
}

static void test_redaction_and_events(void **state)
{
	struct fixture *f = *state;
	struct stream_ctx sc = {&f->s, NULL};
	char body[512];
	pthread_t t;
	json_t *v;

	assert_true(server_proc_wait_plugin(&f->s, SERVER_PROC_HP_ID, WAIT_MS));
	assert_int_equal(req(f, "PUT", "/v1/node/node-1", node_body, NULL), 200);
	create_ready(f, "vol-a", NULL);
	assert_int_equal(req(f, "PUT", "/v1/volume/vol-a/claim",
			     claim_body(body, sizeof(body), "a-1", "write"), NULL),
			 200);
	assert_int_equal(
	    req(f, "PUT", "/v1/snapshot/snap-a",
		"{\"volume_id\": \"vol-a\", \"secrets\": {\"k\": \"" CANARY "-snap\"}}", NULL),
	    200);
	req(f, "GET", "/v1/volumes", NULL, NULL);
	req(f, "GET", "/v1/snapshots", NULL, NULL);
	req(f, "GET", "/v1/snapshot/snap-a", NULL, NULL);
	req(f, "GET", "/v1/volume/vol-a", NULL, NULL);
	req(f, "GET", "/v1/plugins", NULL, NULL);
	req(f, "GET", "/v1/nodes", NULL, NULL);
	assert_int_equal(req(f, "PUT", "/v1/volume/vol-a/release", "{\"alloc_id\": \"a-1\"}", NULL),
			 200);
	assert_true(claims_empty(f, "/v1/volume/vol-a"));
	assert_int_equal(pthread_create(&t, NULL, stream_thread, &sc), 0);
	pthread_join(t, NULL);
	assert_non_null(sc.text);
	/* The stream replays from index 0: creation, the claim and its freeing. */
	assert_non_null(strstr(sc.text, "\"topic\":\"volume\""));
	assert_non_null(strstr(sc.text, "\"topic\":\"claim\""));
	assert_non_null(strstr(sc.text, "\"type\":\"freed\""));
	assert_non_null(strstr(sc.text, "\"topic\":\"node\""));
	assert_non_null(strstr(sc.text, "\"topic\":\"snapshot\""));
	seen_add(&f->seen, sc.text);
	free(sc.text);
	assert_null(strstr(f->seen.text, CANARY));
	assert_false(server_proc_log_has(&f->s, CANARY));
	v = NULL;
	assert_int_equal(req(f, "GET", "/v1/volume/vol-a", NULL, &v), 200);
	assert_null(json_object_get(v, "secrets"));
	json_decref(v);
}

static void test_acl(void **state)
{
	struct fixture *f = *state;
	json_t *v = NULL;

	assert_int_equal(req(f, "GET", "/v1/volumes", NULL, &v), 403);
	assert_string_equal(jstr(v, "code"), "permission_denied");
	json_decref(v);
	http_client_token(f->s.http, "nope-nope-1");
	assert_int_equal(req(f, "GET", "/v1/volumes", NULL, NULL), 403);
	http_client_token(f->s.http, "read-token-1");
	assert_int_equal(req(f, "GET", "/v1/volumes", NULL, NULL), 200);
	assert_int_equal(req(f, "PUT", "/v1/node/node-1", node_body, NULL), 403);
	http_client_token(f->s.http, "write-token-1");
	assert_int_equal(req(f, "PUT", "/v1/node/node-1", node_body, NULL), 200);
	assert_int_equal(req(f, "GET", "/v1/node/node-1", NULL, NULL), 200);
	assert_false(server_proc_log_has(&f->s, "write-token-1"));
	assert_false(server_proc_log_has(&f->s, "read-token-1"));
}

struct change_ctx {
	struct server_proc *s;
};

static void *change_thread(void *arg)
{
	struct change_ctx *c = arg;
	struct http_client *h = http_client_new(c->s->base);

	hpp_pause_ms(200);
	if (h)
		http_client_do(h, "PUT", "/v1/volume/blk/expand", "{\"capacity_min\": \"2MiB\"}",
			       NULL, NULL, 10000);
	http_client_free(h);
	return NULL;
}

static void test_blocking_query(void **state)
{
	struct fixture *f = *state;
	struct change_ctx cc = {&f->s};
	uint64_t index = 0, after = 0;
	char path[128], *text = NULL;
	int64_t t0;
	pthread_t t;

	assert_true(server_proc_wait_plugin(&f->s, SERVER_PROC_HP_ID, WAIT_MS));
	create_ready(f, "blk", "single-node-writer");
	assert_int_equal(http_client_do(f->s.http, "GET", "/v1/volume/blk", NULL, &text, &index, 0),
			 200);
	free(text);
	assert_true(index > 0);
	/* Nothing changes: the query waits the whole wait, then answers the same index. */
	snprintf(path, sizeof(path), "/v1/volume/blk?index=%llu&wait=300ms",
		 (unsigned long long)index);
	t0 = hpp_now_ms();
	assert_int_equal(http_client_do(f->s.http, "GET", path, NULL, &text, &after, 0), 200);
	free(text);
	assert_true(hpp_now_ms() - t0 >= 250);
	assert_int_equal(after, index);
	/* A change wakes it before its wait ends. */
	snprintf(path, sizeof(path), "/v1/volume/blk?index=%llu&wait=20s",
		 (unsigned long long)index);
	assert_int_equal(pthread_create(&t, NULL, change_thread, &cc), 0);
	t0 = hpp_now_ms();
	assert_int_equal(http_client_do(f->s.http, "GET", path, NULL, &text, &after, 0), 200);
	pthread_join(t, NULL);
	free(text);
	assert_true(after > index);
	assert_true(hpp_now_ms() - t0 < 15000);
}

static void test_pagination(void **state)
{
	struct fixture *f = *state;
	char path[256], body[512], seen_ids[30][32];
	const char *token = NULL;
	int nseen = 0, pages = 0;
	json_t *v = NULL;

	/* Registered volumes need no plugin call to be listed. */
	for (int i = 0; i < 25; i++) {
		snprintf(path, sizeof(path), "/v1/volume/pg-%02d", i);
		snprintf(body, sizeof(body),
			 "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"external_id\": \"x-%d\", "
			 "\"capabilities\": [{\"access_mode\": \"single-node-writer\"}]}",
			 i);
		assert_int_equal(req(f, "PUT", path, body, NULL), 200);
	}
	assert_int_equal(req(f, "PUT", "/v1/volume/other",
			     "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"external_id\": \"o\", "
			     "\"capabilities\": [{\"access_mode\": \"single-node-writer\"}]}",
			     NULL),
			 200);
	do {
		char tok[128] = "";
		json_t *vols, *x;
		size_t i;

		if (token)
			snprintf(tok, sizeof(tok), "&next_token=%s", token);
		snprintf(path, sizeof(path), "/v1/volumes?prefix=pg-&per_page=10%s", tok);
		json_decref(v);
		v = NULL;
		assert_int_equal(req(f, "GET", path, NULL, &v), 200);
		vols = json_object_get(v, "volumes");
		assert_true(json_array_size(vols) <= 10);
		json_array_foreach(vols, i, x)
		{
			assert_true(nseen < 30);
			snprintf(seen_ids[nseen++], sizeof(seen_ids[0]), "%s", jstr(x, "id"));
		}
		token = jstr(v, "next_token");
		pages++;
	} while (token && pages < 10);
	json_decref(v);
	assert_int_equal(nseen, 25);
	assert_int_equal(pages, 3);
	for (int i = 0; i < 25; i++) {
		char want[32];

		snprintf(want, sizeof(want), "pg-%02d", i);
		assert_string_equal(seen_ids[i], want);
	}
	assert_int_equal(req(f, "GET", "/v1/volumes?per_page=0", NULL, NULL), 400);
	assert_int_equal(req(f, "GET", "/v1/volumes?per_page=abc", NULL, NULL), 400);
}

static void test_bad_input(void **state)
{
	static const struct {
		const char *method, *path, *body;
		long status;
		const char *code, *needle;
	} cases[] = {
	    {"PUT", "/v1/volume/v1/create", "{", 400, "invalid_argument", "column"},
	    {"PUT", "/v1/volume/v1/create", "[]", 400, "invalid_argument", NULL},
	    {"PUT", "/v1/volume/v1/create",
	     "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"capabilities\": [{\"acces_mode\": "
	     "\"single-node-writer\"}]}",
	     400, "invalid_argument", "acces_mode"},
	    {"PUT", "/v1/volume/v1/create", "{\"plugin_id\": 7}", 400, "invalid_argument",
	     "plugin_id"},
	    {"PUT", "/v1/volume/v1/claim", "{\"alloc_id\": \"a\", \"bogus\": 1}", 400,
	     "invalid_argument", "bogus"},
	    {"PUT", "/v1/volume/v1/claim", "{\"alloc_id\": \"../x\", \"node_id\": \"n\"}", 400,
	     "invalid_argument", NULL},
	    {"PUT", "/v1/volume/v1/expand", "{\"capacity_min\": -5}", 400, "invalid_argument",
	     NULL},
	    {"GET", "/v1/volume/..", NULL, 400, "invalid_argument", NULL},
	    /* The path arrives decoded: an escaped '/' splits the ID, and no route has the rest. */
	    {"GET", "/v1/volume/a%2Fb", NULL, 404, "not_found", "no such endpoint"},
	    {"GET", "/v1/volume/a%01b", NULL, 400, "invalid_argument", NULL},
	    {"GET", "/v1/volume/nope", NULL, 404, "not_found", "nope"},
	    {"GET", "/v1/nothing", NULL, 404, "not_found", NULL},
	    {"POST", "/v1/volumes", "{}", 405, "method_not_allowed", NULL},
	    {"PUT", "/v1/node/n1", "{\"plugins\": [{\"plugin_id\": \"x.y\", \"type\": \"bad\"}]}",
	     400, "invalid_argument", "type"},
	};
	struct fixture *f = *state;
	char *big, *longid;
	json_t *v;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		v = NULL;
		if (req(f, cases[i].method, cases[i].path, cases[i].body, &v) != cases[i].status)
			fail_msg("case %zu: %s %s: wrong status", i, cases[i].method,
				 cases[i].path);
		assert_non_null(v);
		assert_string_equal(jstr(v, "code"), cases[i].code);
		if (cases[i].needle && !strstr(jstr(v, "error"), cases[i].needle))
			fail_msg("case %zu: \"%s\" lacks %s", i, jstr(v, "error"), cases[i].needle);
		json_decref(v);
	}
	/* A NUL in the ID and a 10 KiB ID. */
	assert_int_equal(req(f, "GET", "/v1/volume/a%00b", NULL, NULL), 400);
	longid = malloc(10 * 1024 + 32);
	assert_non_null(longid);
	memcpy(longid, "/v1/volume/", 11);
	memset(longid + 11, 'a', 10 * 1024);
	longid[11 + 10 * 1024] = '\0';
	v = NULL;
	assert_true(req(f, "GET", longid, NULL, &v) >= 400);
	assert_non_null(jstr(v, "code"));
	json_decref(v);
	free(longid);
	/* A body over the cap. */
	big = malloc(2 * 1024 * 1024 + 16);
	assert_non_null(big);
	memset(big, ' ', 2 * 1024 * 1024);
	big[0] = '{';
	big[2 * 1024 * 1024 - 1] = '}';
	big[2 * 1024 * 1024] = '\0';
	v = NULL;
	assert_int_equal(req(f, "PUT", "/v1/volume/v1/create", big, &v), 413);
	assert_string_equal(jstr(v, "code"), "too_large");
	json_decref(v);
	free(big);
	/* The server still answers. */
	assert_int_equal(req(f, "GET", "/v1/status/health", NULL, NULL), 200);
}

struct race_ctx {
	struct server_proc *s;
	int idx;
	long status;
	char error[512];
};

static void *race_thread(void *arg)
{
	struct race_ctx *c = arg;
	struct http_client *h = http_client_new(c->s->base);
	char body[512];
	json_t *v = NULL;

	c->status = -1;
	if (!h)
		return NULL;
	snprintf(body, sizeof(body),
		 "{\"alloc_id\": \"r-%d\", \"node_id\": \"node-1\", \"mode\": \"write\", "
		 "\"access_mode\": \"single-node-single-writer\"}",
		 c->idx);
	c->status = http_client_json(h, "PUT", "/v1/volume/race/claim", body, &v);
	if (json_string_value(json_object_get(v, "error")))
		snprintf(c->error, sizeof(c->error), "%s",
			 json_string_value(json_object_get(v, "error")));
	json_decref(v);
	http_client_free(h);
	return NULL;
}

static void test_racing_claims(void **state)
{
	enum { N = 100 };
	struct fixture *f = *state;
	struct race_ctx ctx[N];
	pthread_t t[N];
	int won = 0, winner = -1;
	char holder[32];

	assert_true(server_proc_wait_plugin(&f->s, SERVER_PROC_HP_ID, WAIT_MS));
	assert_int_equal(req(f, "PUT", "/v1/node/node-1", node_body, NULL), 200);
	create_ready(f, "race", NULL);
	for (int i = 0; i < N; i++) {
		ctx[i] = (struct race_ctx){.s = &f->s, .idx = i};
		assert_int_equal(pthread_create(&t[i], NULL, race_thread, &ctx[i]), 0);
	}
	for (int i = 0; i < N; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < N; i++)
		if (ctx[i].status == 200) {
			won++;
			winner = i;
		}
	assert_int_equal(won, 1);
	snprintf(holder, sizeof(holder), "r-%d", winner);
	for (int i = 0; i < N; i++) {
		if (i == winner)
			continue;
		assert_int_equal(ctx[i].status, 409);
		if (!strstr(ctx[i].error, holder))
			fail_msg("loser %d: \"%s\" does not name %s", i, ctx[i].error, holder);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_lifecycle, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_redaction_and_events, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_acl, setup_acl, teardown),
	    cmocka_unit_test_setup_teardown(test_blocking_query, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pagination, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_racing_claims, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
