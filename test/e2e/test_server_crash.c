/*
 * Crash test: `csid server` killed with SIGKILL at random points while a
 * create, claim, release or delete is in flight (in the API or in the
 * reconciler's plugin calls), then restarted, again and again on one data
 * dir. After each restart every volume must converge, and:
 *   - a change the API acknowledged (200) is never lost;
 *   - no allocation holds two active claims, no claim is freed twice;
 *   - the plugin agrees with the catalogue: every volume the server knows
 *     exists in csi-hostpath and nothing else does (no orphan from a
 *     create or a delete cut in half), and a volume is published to the
 *     node exactly while it has an active claim (nothing freed before
 *     its unpublish).
 * The runs are seeded: the seed is printed, and CSID_CRASH_SEED=<seed>
 * replays a failing sequence; CSID_CRASH_RUNS sets how many kills.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "csi/csi_client.h"
#include "hostpath_proc.h"
#include "server_proc.h"

#define WAIT_MS 30000
#define VOLS_MAX 64

static const char node_body[] =
    "{\"plugins\": [{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"type\": \"node\", "
    "\"healthy\": true, \"health\": \"healthy\", \"version\": \"0.1.0\", "
    "\"capabilities\": [\"STAGE_UNSTAGE_VOLUME\"], \"plugin_node_id\": \"node-1\", "
    "\"topology\": {\"topology.hostpath.csi/node\": \"node-1\"}}]}";

/* What the test knows of one volume. */
enum known { K_NONE, K_MAYBE, K_YES };

struct vol {
	char id[16];
	enum known exists; /* create acknowledged / maybe; delete turns it around */
	bool deleting; /* a delete was acknowledged */
	char alloc[16]; /* the active claim expected ("" none) */
	enum known claimed;
};

struct fixture {
	struct server_proc s;
	struct hpp_proc hp;
	struct vol vols[VOLS_MAX];
	int nvols;
	uint64_t rng;
};

static uint32_t rnd(struct fixture *f)
{
	f->rng ^= f->rng << 13;
	f->rng ^= f->rng >> 7;
	f->rng ^= f->rng << 17;
	return (uint32_t)f->rng;
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	char cfg[1024];

	if (!f)
		return -1;
	*state = f;
	if (hpp_proc_start(&f->hp, NULL) || server_proc_init(&f->s))
		goto fail;
	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"10ms\","
		 " \"backoff_max\": \"200ms\", \"rpc_timeout\": \"5s\", \"controller_plugins\": "
		 "[{\"id\": \"" SERVER_PROC_HP_ID "\", \"socket\": \"%s\"}]}",
		 f->hp.endpoint + strlen("unix://"));
	if (server_proc_write_config(&f->s, cfg, NULL))
		goto fail;
	return 0;
fail:
	hpp_proc_cleanup(&f->hp);
	server_proc_cleanup(&f->s);
	free(f);
	return -1;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	server_proc_cleanup(&f->s);
	hpp_proc_cleanup(&f->hp);
	free(f);
	return 0;
}

static void start_server(struct fixture *f)
{
	if (server_proc_start(&f->s) || !server_proc_wait_ready(&f->s, WAIT_MS) ||
	    !server_proc_wait_plugin(&f->s, SERVER_PROC_HP_ID, WAIT_MS)) {
		server_proc_dump_log(&f->s, "start");
		fail_msg("server did not start");
	}
	assert_int_equal(server_proc_http(&f->s, "PUT", "/v1/node/node-1", node_body, NULL), 200);
}

struct op {
	struct server_proc *s;
	char method[8];
	char path[128];
	char body[512];
	long status;
};

static void *op_thread(void *arg)
{
	struct op *o = arg;
	struct http_client *h = http_client_new(o->s->base);

	o->status = -1;
	if (h)
		o->status = http_client_do(h, o->method, o->path, o->body[0] ? o->body : NULL, NULL,
					   NULL, 10000);
	http_client_free(h);
	return NULL;
}

/* Picks a volume matching want(v); -1 when none. */
static int pick(struct fixture *f, bool (*want)(const struct vol *))
{
	int idx[VOLS_MAX], n = 0;

	for (int i = 0; i < f->nvols; i++)
		if (want(&f->vols[i]))
			idx[n++] = i;
	return n ? idx[rnd(f) % (uint32_t)n] : -1;
}

static bool v_free(const struct vol *v)
{
	return v->exists == K_YES && !v->deleting && v->claimed == K_NONE;
}

static bool v_claimed(const struct vol *v)
{
	return v->exists == K_YES && v->claimed == K_YES;
}

/* Runs one random operation and kills the server while it may be in flight. */
static void crash_once(struct fixture *f, int run)
{
	struct op o = {.s = &f->s};
	struct vol *v = NULL;
	int kind = (int)(rnd(f) % 4), i = -1;
	pthread_t t;

	if (kind == 1)
		i = pick(f, v_free);
	else if (kind == 2)
		i = pick(f, v_claimed);
	else if (kind == 3)
		i = pick(f, v_free);
	if (i < 0 || f->nvols >= VOLS_MAX - 1)
		kind = f->nvols >= VOLS_MAX - 1 ? 3 : 0;
	if (kind == 3 && i < 0)
		i = pick(f, v_free);
	if (kind == 3 && i < 0)
		kind = 0;
	if (kind == 0) {
		v = &f->vols[f->nvols++];
		snprintf(v->id, sizeof(v->id), "v%03d", run);
		snprintf(o.method, sizeof(o.method), "PUT");
		snprintf(o.path, sizeof(o.path), "/v1/volume/%s/create", v->id);
		snprintf(o.body, sizeof(o.body),
			 "{\"plugin_id\": \"" SERVER_PROC_HP_ID "\", \"capacity_min\": \"1MiB\", "
			 "\"capabilities\": [{\"access_mode\": \"single-node-single-writer\"}]}");
	} else {
		v = &f->vols[i];
		snprintf(o.method, sizeof(o.method), kind == 3 ? "DELETE" : "PUT");
		snprintf(o.path, sizeof(o.path), "/v1/volume/%s/%s", v->id,
			 kind == 1   ? "claim"
			 : kind == 2 ? "release"
				     : "delete");
		if (kind == 1) {
			snprintf(v->alloc, sizeof(v->alloc), "a%03d", run);
			snprintf(o.body, sizeof(o.body),
				 "{\"alloc_id\": \"%s\", \"node_id\": \"node-1\", \"access_mode\": "
				 "\"single-node-single-writer\"}",
				 v->alloc);
		} else if (kind == 2) {
			snprintf(o.body, sizeof(o.body), "{\"alloc_id\": \"%s\"}", v->alloc);
		}
	}
	assert_int_equal(pthread_create(&t, NULL, op_thread, &o), 0);
	hpp_pause_ms((int)(rnd(f) % 25));
	server_proc_stop(&f->s, SIGKILL, 10000);
	pthread_join(t, NULL);
	fprintf(stderr, "run %d: %s %s -> %ld, then kill -9\n", run, o.method, o.path, o.status);
	switch (kind) {
	case 0:
		v->exists = o.status == 200 ? K_YES : K_MAYBE;
		break;
	case 1:
		v->claimed = o.status == 200 ? K_YES : K_MAYBE;
		break;
	case 2:
		if (o.status == 200)
			v->claimed = K_NONE;
		else
			v->claimed = K_MAYBE;
		break;
	default:
		v->deleting = o.status == 200;
		if (o.status != 200)
			v->exists = K_MAYBE;
		break;
	}
}

/* Whether every volume has settled: nothing in flight in the reconciler. */
static bool settled(json_t *list)
{
	json_t *v, *x;
	size_t i, k;

	json_array_foreach(json_object_get(list, "volumes"), i, v)
	{
		const char *st = json_string_value(json_object_get(v, "state"));

		if (!st || strcmp(st, "ready") != 0)
			return false;
		json_array_foreach(json_object_get(v, "claims"), k,
				   x) if (strcmp(json_string_value(json_object_get(x, "state")),
						 "claimed") != 0) return false;
		json_array_foreach(json_object_get(v, "publications"), k,
				   x) if (strcmp(json_string_value(json_object_get(x, "state")),
						 "published") != 0) return false;
	}
	return true;
}

static json_t *find(json_t *list, const char *id)
{
	json_t *v;
	size_t i;

	json_array_foreach(json_object_get(list, "volumes"), i,
			   v) if (strcmp(json_string_value(json_object_get(v, "id")), id) ==
				  0) return v;
	return NULL;
}

static void check(struct fixture *f, int run)
{
	int64_t deadline = hpp_now_ms() + WAIT_MS;
	char pids[VOLS_MAX * 2][80];
	bool pub[VOLS_MAX * 2];
	json_t *list = NULL, *v, *c;
	int np, nknown = 0;
	size_t i, k;

	while (hpp_now_ms() < deadline) {
		json_decref(list);
		list = NULL;
		if (server_proc_http(&f->s, "GET", "/v1/volumes?per_page=1000", NULL, &list) ==
			200 &&
		    settled(list))
			break;
		hpp_pause_ms(20);
	}
	if (!settled(list)) {
		server_proc_dump_log(&f->s, "no convergence");
		fail_msg("run %d: volumes did not converge", run);
	}
	for (int j = 0; j < f->nvols; j++) {
		struct vol *x = &f->vols[j];
		json_t *got = find(list, x->id), *cl = NULL;

		if (x->deleting && got)
			fail_msg("run %d: %s: acknowledged delete lost", run, x->id);
		if (x->exists == K_YES && !x->deleting && !got)
			fail_msg("run %d: %s: acknowledged volume lost", run, x->id);
		x->exists = got ? K_YES : K_NONE;
		x->deleting = false;
		if (!got) {
			x->claimed = K_NONE;
			continue;
		}
		json_array_foreach(json_object_get(got, "claims"), k, c)
		{
			if (k > 0)
				fail_msg("run %d: %s: two active claims", run, x->id);
			cl = c;
		}
		if (x->claimed == K_YES &&
		    (!cl || strcmp(json_string_value(json_object_get(cl, "alloc_id")), x->alloc)))
			fail_msg("run %d: %s: acknowledged claim %s lost", run, x->id, x->alloc);
		if (x->claimed == K_NONE && cl)
			fail_msg("run %d: %s: released claim still active", run, x->id);
		x->claimed = cl ? K_YES : K_NONE;
		if (cl)
			snprintf(x->alloc, sizeof(x->alloc), "%s",
				 json_string_value(json_object_get(cl, "alloc_id")));
		/* A claim freed twice would show twice among the past claims. */
		json_array_foreach(json_object_get(got, "past_claims"), k, c)
		{
			json_t *d;
			size_t m;

			json_array_foreach(
			    json_object_get(got, "past_claims"), m,
			    d) if (m > k &&
				   strcmp(json_string_value(json_object_get(c, "alloc_id")),
					  json_string_value(json_object_get(d, "alloc_id"))) == 0)
			    fail_msg("run %d: %s: claim freed twice", run, x->id);
		}
	}
	/* The plugin holds exactly the catalogue's volumes, published while claimed. */
	np = hpp_list_volumes(f->hp.endpoint, pids, pub, VOLS_MAX * 2);
	assert_true(np >= 0);
	json_array_foreach(json_object_get(list, "volumes"), i, v)
	{
		const char *ext = json_string_value(json_object_get(v, "external_id"));
		bool found = false, claimed = json_array_size(json_object_get(v, "claims")) > 0;

		nknown++;
		for (int j = 0; ext && j < np; j++) {
			if (strcmp(pids[j], ext) != 0)
				continue;
			found = true;
			if (pub[j] != claimed)
				fail_msg("run %d: %s: published=%d but claimed=%d", run,
					 json_string_value(json_object_get(v, "id")), pub[j],
					 claimed);
		}
		if (!found)
			fail_msg("run %d: %s: not in the plugin", run,
				 json_string_value(json_object_get(v, "id")));
	}
	if (np != nknown)
		fail_msg("run %d: the plugin has %d volumes, the server %d (orphans)", run, np,
			 nknown);
	json_decref(list);
}

static void test_kill9_converges(void **state)
{
	struct fixture *f = *state;
	const char *env_seed = getenv("CSID_CRASH_SEED"), *env_runs = getenv("CSID_CRASH_RUNS");
	uint64_t seed = env_seed ? strtoull(env_seed, NULL, 10) : (uint64_t)time(NULL);
	int runs = env_runs ? atoi(env_runs) : 24;

	fprintf(stderr, "crash test: seed %llu, %d runs (replay: CSID_CRASH_SEED=%llu)\n",
		(unsigned long long)seed, runs, (unsigned long long)seed);
	f->rng = seed * 2654435761u + 1;
	for (int run = 0; run < runs; run++) {
		start_server(f);
		crash_once(f, run);
		start_server(f);
		check(f, run);
		server_proc_stop(&f->s, SIGTERM, 10000);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_kill9_converges, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
