/*
 * `csid server` on a real one-member etcd (test/lib/etcd_proc.c) with the
 * real csi-hostpath: a volume created and claimed survives a restart of
 * the server (the catalogue is in etcd, not in its data dir); a snapshot
 * saved from a SQLite server with `csictl operator snapshot save` and
 * restored into an etcd one carries the catalogue over, the installation's
 * ID with it (and a second
 * restore into the now full store is refused); a server
 * whose etcd does not answer exits with an error naming the endpoint; a
 * stored value the server cannot decode is refused for that volume alone,
 * naming it, while the others are served; on a three-member etcd that
 * loses two members, the API answers 503 saying the store has no quorum,
 * and works again by itself when they return, nothing acknowledged lost;
 * a second server with the first's server-id (a copied data_dir) refuses
 * to start, naming the first, and one started at the same moment is
 * named by the first's status once it writes the first's member record.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include <cmocka.h>

#include <sys/stat.h>

#include "csictl_run.h"
#include "etcd_proc.h"
#include "hostpath_proc.h"
#include "server_proc.h"
#include "store/etcd_client.h"

#define WAIT_MS 30000
#define PREFIX "/csid-e2e/"

struct fixture {
	struct etcd_proc etcd;
	struct hpp_proc hp;
	struct server_proc s;
	struct server_proc old; /* a SQLite server (the migration test) */
	struct csictl_runner rn;
	struct csictl_run r;
};

/*
 * Writes the config of s: its store on etcd at url, or SQLite (url NULL);
 * extra (or NULL): more keys, each followed by a comma.
 */
static int write_config_extra(struct fixture *f, struct server_proc *s, const char *url,
			      const char *extra)
{
	char cfg[1024], store[384] = "";

	if (url)
		snprintf(store, sizeof(store),
			 " \"store\": \"etcd\", \"etcd\": {\"endpoints\": [\"%s\"], \"prefix\":"
			 " \"" PREFIX "\", \"dial_timeout\": \"500ms\"},%s",
			 url, extra ? extra : "");
	snprintf(
	    cfg, sizeof(cfg),
	    "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"10ms\","
	    " \"backoff_max\": \"200ms\",%s \"controller_plugins\": [{\"id\": \"" SERVER_PROC_HP_ID
	    "\", \"socket\": \"%s\"}]}",
	    store, f->hp.endpoint + strlen("unix://"));
	return server_proc_write_config(s, cfg, NULL);
}

static int write_config_of(struct fixture *f, struct server_proc *s, const char *url)
{
	return write_config_extra(f, s, url, NULL);
}

static int write_config(struct fixture *f, const char *url)
{
	return write_config_of(f, &f->s, url);
}

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	*state = f;
	if (etcd_proc_start(&f->etcd) || hpp_proc_start(&f->hp, NULL) || server_proc_init(&f->s) ||
	    write_config(f, f->etcd.url) || server_proc_init(&f->old) ||
	    write_config_of(f, &f->old, NULL))
		return -1;
	f->rn.dir = f->s.dir;
	f->rn.deadline_ms = WAIT_MS;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	csictl_runner_cleanup(&f->rn);
	server_proc_cleanup(&f->s);
	server_proc_cleanup(&f->old);
	hpp_proc_cleanup(&f->hp);
	etcd_proc_cleanup(&f->etcd);
	free(f);
	return 0;
}

static void start(struct server_proc *s)
{
	if (server_proc_start(s) || !server_proc_wait_ready(s, WAIT_MS) ||
	    !server_proc_wait_plugin(s, SERVER_PROC_HP_ID, WAIT_MS)) {
		server_proc_dump_log(s, "start");
		fail_msg("server did not start");
	}
}

static void start_server(struct fixture *f)
{
	start(&f->s);
}

static const char *jstr(json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

/* A claim of web-1 that is claimed and published. */
static bool claimed_and_published(json_t *doc)
{
	json_t *c = json_array_get(json_object_get(doc, "claims"), 0);

	return c && jstr(c, "alloc_id") && strcmp(jstr(c, "alloc_id"), "web-1") == 0 &&
	       server_proc_volume_published(doc);
}

/* Created and claimed on etcd; after a restart (kill -9) the state is there and goes on. */
static void test_restart_keeps_state(void **state)
{
	struct fixture *f = *state;
	char *external = NULL;
	json_t *v = NULL;

	start_server(f);
	assert_int_equal(server_proc_http(&f->s, "GET", "/v1/status/health", NULL, &v), 200);
	assert_string_equal(jstr(v, "store"), "etcd");
	json_decref(v);
	assert_int_equal(
	    server_proc_http(&f->s, "PUT", "/v1/node/node-1", SERVER_PROC_NODE_BODY, NULL), 200);
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/data/create", SERVER_PROC_CREATE_BODY),
			 200);
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/data", server_proc_volume_ready, WAIT_MS));
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/data/claim",
					 "{\"alloc_id\": \"web-1\", \"node_id\": \"node-1\","
					 " \"access_mode\": \"single-node-single-writer\"}"),
			 200);
	assert_true(server_proc_wait_doc(&f->s, "/v1/volume/data", claimed_and_published, WAIT_MS));
	assert_int_equal(server_proc_http(&f->s, "GET", "/v1/volume/data", NULL, &v), 200);
	external = strdup(jstr(v, "external_id"));
	json_decref(v);

	server_proc_stop(&f->s, SIGKILL, WAIT_MS);
	start_server(f);
	assert_int_equal(server_proc_http(&f->s, "GET", "/v1/volume/data", NULL, &v), 200);
	assert_string_equal(jstr(v, "external_id"), external);
	assert_true(claimed_and_published(v));
	json_decref(v);
	/* It goes on from there: the release runs to the end. */
	assert_int_equal(
	    server_proc_put(&f->s, "/v1/volume/data/release", "{\"alloc_id\": \"web-1\"}"), 200);
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/data", server_proc_volume_freed, WAIT_MS));
	free(external);
}

/* A member list that names the server of the first server's address (its record is there). */
static const char *dup_addr;

static bool lists_dup(json_t *doc)
{
	json_t *m;
	size_t i;

	json_array_foreach(json_object_get(doc, "members"), i, m)
	{
		if (jstr(m, "address") && strcmp(jstr(m, "address"), dup_addr) == 0)
			return true;
	}
	return false;
}

/*
 * Two servers with one server-id on one store (the second's data_dir a
 * copy of the first's, as on a cloned machine image): the second refuses
 * to start, naming the first's address, and the first goes on. The first,
 * killed and started again at once, starts at once, although the record
 * of its killed process lives on for the lease TTL (30 s here): that
 * process is known dead.
 */
static void test_duplicate_server_id(void **state)
{
	struct fixture *f = *state;
	/* Records every half second; a lease that outlives the test's waits. */
	const char *ttl = " \"leader_ttl\": \"30s\", \"node_ttl\": \"2s\",";
	char path[SERVER_PROC_PATH + 16], id[160];
	json_t *v = NULL;
	FILE *fp;
	size_t n;
	int st;

	assert_int_equal(write_config_extra(f, &f->s, f->etcd.url, ttl), 0);
	assert_int_equal(write_config_extra(f, &f->old, f->etcd.url, ttl), 0);
	start_server(f);
	dup_addr = f->s.addr;
	assert_true(server_proc_wait_doc(&f->s, "/v1/status/members", lists_dup, WAIT_MS));
	/* The copy: the first's server-id in the second's data_dir. */
	snprintf(path, sizeof(path), "%s/server-id", f->s.data_dir);
	assert_non_null(fp = fopen(path, "r"));
	n = fread(id, 1, sizeof(id), fp);
	fclose(fp);
	assert_true(n > 0 && n < sizeof(id));
	assert_int_equal(mkdir(f->old.data_dir, 0755), 0);
	snprintf(path, sizeof(path), "%s/server-id", f->old.data_dir);
	assert_non_null(fp = fopen(path, "w"));
	assert_int_equal(fwrite(id, 1, n, fp), n);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(server_proc_start(&f->old), 0);
	st = server_proc_stop(&f->old, 0, WAIT_MS);
	assert_true(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
	if (!server_proc_log_has(&f->old, "in use by the live server at") ||
	    !server_proc_log_has(&f->old, f->s.addr)) {
		server_proc_dump_log(&f->old, "duplicate");
		fail_msg("the second server did not name the first");
	}
	assert_int_equal(server_proc_http(&f->s, "GET", "/v1/status/health", NULL, &v), 200);
	json_decref(v);
	server_proc_stop(&f->s, SIGKILL, WAIT_MS);
	start_server(f);
	assert_true(server_proc_log_has(&f->s, "previous process, which is gone"));
	assert_true(server_proc_wait_doc(&f->s, "/v1/status/members", lists_dup, WAIT_MS));
}

/* The address GET /v1/status/leader should name as id_conflict; NULL: none. */
static const char *conflict_want;

static bool shows_conflict(json_t *doc)
{
	json_t *c = json_object_get(doc, "id_conflict");

	if (!conflict_want)
		return json_is_null(c);
	return json_is_string(c) && strcmp(json_string_value(c), conflict_want) == 0;
}

/*
 * Two servers with one server-id started at the same moment both pass
 * the check at start; the one that runs finds the other when it writes
 * its member record again: another process's record of its ID (written
 * here straight into etcd, as that server would) is named in GET
 * /v1/status/leader and in an error in the log, and the status clears
 * once no one else writes the record.
 */
static void test_id_conflict_running(void **state)
{
	struct fixture *f = *state;
	const char *ttl = " \"leader_ttl\": \"30s\", \"node_ttl\": \"2s\",";
	char path[SERVER_PROC_PATH + 16], id[160], key[256], value[512];
	FILE *fp;
	size_t n;

	assert_int_equal(write_config_extra(f, &f->s, f->etcd.url, ttl), 0);
	start_server(f);
	dup_addr = f->s.addr;
	assert_true(server_proc_wait_doc(&f->s, "/v1/status/members", lists_dup, WAIT_MS));
	conflict_want = NULL;
	assert_true(server_proc_wait_doc(&f->s, "/v1/status/leader", shows_conflict, WAIT_MS));
	snprintf(path, sizeof(path), "%s/server-id", f->s.data_dir);
	assert_non_null(fp = fopen(path, "r"));
	n = fread(id, 1, sizeof(id) - 1, fp);
	fclose(fp);
	while (n > 0 && id[n - 1] == '\n')
		n--;
	assert_true(n > 0);
	id[n] = '\0';
	snprintf(key, sizeof(key), PREFIX "members/%s", id);
	snprintf(value, sizeof(value),
		 "{\"id\": \"%s\", \"run\": \"0123456789abcdef\", \"boot\": \"another-machine\","
		 " \"pid\": 1, \"address\": \"192.0.2.7:4646\", \"started_ms\": 1}",
		 id);
	assert_int_equal(etcd_proc_put(&f->etcd, key, value), 200);
	conflict_want = "192.0.2.7:4646";
	if (!server_proc_wait_doc(&f->s, "/v1/status/leader", shows_conflict, WAIT_MS)) {
		server_proc_dump_log(&f->s, "conflict");
		fail_msg("the status did not name the other server");
	}
	assert_true(server_proc_log_has(&f->s, "another live server writes this server's member"));
	assert_true(server_proc_log_has(&f->s, "192.0.2.7:4646"));
	/* Nobody else writes it from now on: the next records are this server's own. */
	conflict_want = NULL;
	assert_true(server_proc_wait_doc(&f->s, "/v1/status/leader", shows_conflict, WAIT_MS));
	assert_true(
	    server_proc_log_has(&f->s, "no other server writes this server's member record"));
}

/* Runs csictl against server s with args (NULL-terminated). */
static void run_csictl(struct fixture *f, struct server_proc *s, char *const *args)
{
	char env[128];
	char *envv[] = {env, NULL};

	snprintf(env, sizeof(env), "CSID_ADDR=%s", s->base);
	csictl_runner_run(&f->rn, &f->r, envv, args);
}

/* SQLite to etcd: save a snapshot from one server, restore it into the other. */
static void test_snapshot_sqlite_to_etcd(void **state)
{
	struct fixture *f = *state;
	char file[SERVER_PROC_PATH + 16];
	char *save[] = {"operator", "snapshot", "save", file, NULL};
	char *restore[] = {"operator", "snapshot", "restore", file, NULL};
	char *external = NULL;
	struct stat st;
	json_t *v = NULL;

	snprintf(file, sizeof(file), "%s/snap.json", f->s.dir);
	start(&f->old);
	assert_int_equal(
	    server_proc_http(&f->old, "PUT", "/v1/node/node-1", SERVER_PROC_NODE_BODY, NULL), 200);
	assert_int_equal(
	    server_proc_put(&f->old, "/v1/volume/data/create", SERVER_PROC_CREATE_BODY), 200);
	assert_int_equal(
	    server_proc_put(&f->old, "/v1/volume/idle/create", SERVER_PROC_CREATE_BODY), 200);
	/* Created by several workers at once: each is waited for. */
	assert_true(
	    server_proc_wait_doc(&f->old, "/v1/volume/idle", server_proc_volume_ready, WAIT_MS));
	assert_true(
	    server_proc_wait_doc(&f->old, "/v1/volume/data", server_proc_volume_ready, WAIT_MS));
	assert_int_equal(server_proc_put(&f->old, "/v1/volume/data/claim",
					 "{\"alloc_id\": \"web-1\", \"node_id\": \"node-1\","
					 " \"access_mode\": \"single-node-single-writer\"}"),
			 200);
	assert_true(
	    server_proc_wait_doc(&f->old, "/v1/volume/data", claimed_and_published, WAIT_MS));
	assert_int_equal(server_proc_http(&f->old, "GET", "/v1/volume/data", NULL, &v), 200);
	external = strdup(jstr(v, "external_id"));
	json_decref(v);
	run_csictl(f, &f->old, save);
	csictl_expect_ok(&f->r);
	/* Two volumes, the node, the claim index's entry for web-1, the installation record. */
	assert_non_null(strstr(f->r.out, "saved 5 objects"));
	csictl_runner_free(&f->rn, &f->r);
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	assert_int_equal(server_proc_stop(&f->old, SIGTERM, WAIT_MS) != -1, 1);

	start_server(f);
	run_csictl(f, &f->s, restore);
	csictl_expect_ok(&f->r);
	assert_non_null(strstr(f->r.out, "restored 5 objects"));
	csictl_runner_free(&f->rn, &f->r);
	/* The installation moved: etcd's takes the SQLite one's ID. */
	assert_true(server_proc_log_has(&f->s, "the installation takes the snapshot's ID"));
	assert_int_equal(server_proc_http(&f->s, "GET", "/v1/volume/data", NULL, &v), 200);
	assert_string_equal(jstr(v, "external_id"), external);
	assert_true(claimed_and_published(v));
	json_decref(v);
	/* The store is no longer empty: a second restore is refused, clearly. */
	run_csictl(f, &f->s, restore);
	csictl_expect_fail(&f->r, 1, "not empty");
	csictl_runner_free(&f->rn, &f->r);
	/* The restored catalogue goes on: the release runs to the end on etcd. */
	assert_int_equal(
	    server_proc_put(&f->s, "/v1/volume/data/release", "{\"alloc_id\": \"web-1\"}"), 200);
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/data", server_proc_volume_freed, WAIT_MS));
	free(external);
}

/*
 * csictl with several server addresses: one nobody listens on is passed
 * over for the next; when none answers, the error names them all.
 */
static void test_csictl_failover(void **state)
{
	struct fixture *f = *state;
	char dead1[64], dead2[64], env[256];
	char *envv[] = {env, NULL};
	char *args[] = {"volume", "status", NULL};

	snprintf(dead1, sizeof(dead1), "http://127.0.0.1:%d", server_proc_free_port());
	snprintf(dead2, sizeof(dead2), "127.0.0.1:%d", server_proc_free_port());
	start_server(f);
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/data/create", SERVER_PROC_CREATE_BODY),
			 200);
	snprintf(env, sizeof(env), "CSID_ADDR=%s,%s", dead1, f->s.base);
	csictl_runner_run(&f->rn, &f->r, envv, args);
	csictl_expect_ok(&f->r);
	assert_non_null(strstr(f->r.out, "data"));
	csictl_runner_free(&f->rn, &f->r);
	snprintf(env, sizeof(env), "CSID_ADDR=%s,%s", dead1, dead2);
	csictl_runner_run(&f->rn, &f->r, envv, args);
	csictl_expect_fail(&f->r, 1, "no server listening at");
	assert_non_null(strstr(f->r.err, dead1));
	assert_non_null(strstr(f->r.err, dead2 + 10));
	csictl_runner_free(&f->rn, &f->r);
}

/* Polls the server's log for needle (at most WAIT_MS). */
static bool wait_log(struct server_proc *s, const char *needle)
{
	struct timespec pause = {0, 50 * 1000 * 1000};

	for (int i = 0; i < WAIT_MS / 50; i++) {
		if (server_proc_log_has(s, needle))
			return true;
		nanosleep(&pause, NULL);
	}
	return false;
}

/*
 * A value the server cannot decode: that volume is refused, naming it;
 * the reconciler logs it and sets it aside; others are served.
 */
static void test_undecodable_value(void **state)
{
	struct fixture *f = *state;
	json_t *v = NULL;
	long st;

	start_server(f);
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/good/create", SERVER_PROC_CREATE_BODY),
			 200);
	assert_int_equal(etcd_proc_put(&f->etcd, PREFIX "volume/bad", "{not json"), 200);
	st = server_proc_http(&f->s, "GET", "/v1/volume/bad", NULL, &v);
	assert_true(st >= 400);
	assert_non_null(strstr(jstr(v, "error"), "volume bad: stored record"));
	json_decref(v);
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/good", server_proc_volume_ready, WAIT_MS));
	/* The reconciler met it through the watch: logged and set aside, the server runs on. */
	assert_true(wait_log(&f->s, "damaged record"));
	assert_true(server_proc_log_has(&f->s, "volume bad"));
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/good2/create", SERVER_PROC_CREATE_BODY),
			 200);
}

/*
 * The leader compacts etcd's history every compaction_interval, up to
 * the revision it noted one interval before: old revisions become
 * unreadable (etcd's space quota never fills with them), and the server
 * goes on serving and writing.
 */
static void test_leader_compacts(void **state)
{
	struct fixture *f = *state;
	char cfg[1024];
	/* A read of revision 2 (key "a"): 200 until etcd has compacted past it. */
	const char *old = "{\"key\": \"YQ==\", \"revision\": \"2\"}";
	bool compacted = false;
	struct timespec pause = {0, 50 * 1000 * 1000};

	snprintf(cfg, sizeof(cfg),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"store\": \"etcd\","
		 " \"etcd\": {\"endpoints\": [\"%s\"], \"prefix\": \"" PREFIX "\","
		 " \"compaction_interval\": \"1s\"}, \"controller_plugins\": [{\"id\": "
		 "\"" SERVER_PROC_HP_ID "\", \"socket\": \"%s\"}]}",
		 f->etcd.url, f->hp.endpoint + strlen("unix://"));
	assert_int_equal(server_proc_write_config(&f->s, cfg, NULL), 0);
	start_server(f);
	assert_int_equal(etcd_proc_post(&f->etcd, "/v3/kv/range", old), 200);
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/c1/create", SERVER_PROC_CREATE_BODY),
			 200);
	for (int i = 0; i < WAIT_MS / 50 && !compacted; i++) {
		compacted = etcd_proc_post(&f->etcd, "/v3/kv/range", old) != 200;
		if (!compacted)
			nanosleep(&pause, NULL);
	}
	if (!compacted)
		server_proc_dump_log(&f->s, "compaction");
	assert_true(compacted);
	assert_true(wait_log(&f->s, "store history compacted"));
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/c2/create", SERVER_PROC_CREATE_BODY),
			 200);
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/c1", server_proc_volume_ready, WAIT_MS));
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/c2", server_proc_volume_ready, WAIT_MS));
}

/* No etcd at the configured endpoint: the server exits, naming it. */
static void test_etcd_not_running(void **state)
{
	struct fixture *f = *state;
	char url[64];
	int st;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", server_proc_free_port());
	assert_int_equal(write_config(f, url), 0);
	assert_int_equal(server_proc_start(&f->s), 0);
	st = server_proc_stop(&f->s, 0, WAIT_MS);
	assert_true(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) != 0);
	assert_true(server_proc_log_has(&f->s, url));
	assert_true(server_proc_log_has(&f->s, "store"));
}

/* Polls PUT path until it answers want with text in its error (or 200); false at the deadline. */
static bool put_until(struct server_proc *s, const char *path, long want, const char *text)
{
	struct timespec pause = {0, 100 * 1000 * 1000};
	struct timespec now;
	time_t deadline;

	clock_gettime(CLOCK_MONOTONIC, &now);
	deadline = now.tv_sec + 60;
	for (;;) {
		json_t *doc = NULL;
		long st = server_proc_http(s, "PUT", path, SERVER_PROC_CREATE_BODY, &doc);
		const char *msg = jstr(doc, "error");
		bool ok = st == want && (!text || (msg && strstr(msg, text)));

		if (!ok && st != 200 && st != 503 && st != 504)
			fprintf(stderr, "PUT %s: %ld %s\n", path, st, msg ? msg : "");
		json_decref(doc);
		if (ok)
			return true;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec >= deadline)
			return false;
		nanosleep(&pause, NULL);
	}
}

/*
 * A three-member etcd loses two members: the API answers 503 saying the
 * store has no quorum (not a hang, not a 500); when they come back the
 * server writes again by itself, and what it acknowledged is there.
 */
static void test_no_quorum(void **state)
{
	struct fixture *f = *state;
	struct etcd_proc m[3];
	char store[512];

	memset(m, 0, sizeof(m));
	assert_int_equal(etcd_cluster_start(m, 3), 0);
	snprintf(store, sizeof(store),
		 "{\"data_dir\": \"@DIR@/d\", \"listen\": \"@ADDR@\", \"backoff_min\": \"10ms\","
		 " \"backoff_max\": \"200ms\", \"store\": \"etcd\", \"etcd\": {\"endpoints\": "
		 "[\"%s\", \"%s\", \"%s\"], \"prefix\": \"" PREFIX "\", \"dial_timeout\": "
		 "\"500ms\", \"request_timeout\": \"5s\"}, \"controller_plugins\": [{\"id\": "
		 "\"" SERVER_PROC_HP_ID "\", \"socket\": \"%s\"}]}",
		 m[0].url, m[1].url, m[2].url, f->hp.endpoint + strlen("unix://"));
	assert_int_equal(server_proc_write_config(&f->s, store, NULL), 0);
	start_server(f);
	assert_int_equal(server_proc_put(&f->s, "/v1/volume/q1/create", SERVER_PROC_CREATE_BODY),
			 200);
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/q1", server_proc_volume_ready, WAIT_MS));
	etcd_proc_stop(&m[1], SIGKILL);
	etcd_proc_stop(&m[2], SIGKILL);
	/* Once the last member sees it has no leader (an election timeout). */
	assert_true(put_until(&f->s, "/v1/volume/q2/create", 503, "no quorum"));
	assert_int_equal(etcd_proc_start(&m[1]), 0);
	assert_int_equal(etcd_proc_start(&m[2]), 0);
	assert_true(put_until(&f->s, "/v1/volume/q2/create", 200, NULL));
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/q2", server_proc_volume_ready, WAIT_MS));
	assert_true(
	    server_proc_wait_doc(&f->s, "/v1/volume/q1", server_proc_volume_ready, WAIT_MS));
	server_proc_stop(&f->s, SIGTERM, WAIT_MS);
	for (int i = 0; i < 3; i++)
		etcd_proc_cleanup(&m[i]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_restart_keeps_state, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_snapshot_sqlite_to_etcd, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_csictl_failover, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_undecodable_value, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_etcd_not_running, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_leader_compacts, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_no_quorum, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_duplicate_server_id, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_id_conflict_running, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
