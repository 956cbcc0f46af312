/*
 * Unit tests of the agent's dynamic plugin registry (src/plugins/registry.c)
 * and of its local state helper (src/store/agent_db.c): precedence of
 * instances, monoliths, events per type, persistence and restore, pruning
 * of dead restored instances, bad input, schema migrations, and the
 * database file being one process's (its connections share it, another
 * process is refused).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "plugins/registry.h"
#include "store/agent_db.h"
#include "util/clock.h"

#define TEST_EVENTS_MAX 64

extern char **environ;

struct test_events {
	struct registry *r; /* to read the registry from the callback */
	int n;
	struct {
		enum registry_event_kind kind;
		enum registry_type type;
		char name[REGISTRY_NAME_MAX];
		char instance[REGISTRY_INSTANCE_MAX];
		bool has_active;
		char active[REGISTRY_INSTANCE_MAX];
		bool read_ok; /* registry_active from the callback agreed with the event */
	} ev[TEST_EVENTS_MAX];
};

struct test_ctx {
	char dir[64];
	char path[128];
	struct clock_fake clock;
	sqlite3 *db;
	struct registry *r;
	struct test_events events;
};

static int test_setup(void **state)
{
	struct test_ctx *t = calloc(1, sizeof(*t));
	struct err e;

	assert_non_null(t);
	snprintf(t->dir, sizeof(t->dir), "/tmp/csid-test-registry-XXXXXX");
	assert_non_null(mkdtemp(t->dir));
	snprintf(t->path, sizeof(t->path), "%s/agent.db", t->dir);
	clock_fake_init(&t->clock, 1000, 1700000000000);
	assert_int_equal(agent_db_open(t->path, &t->db, &e), 0);
	assert_int_equal(registry_new(&t->clock.base, t->db, &t->r, &e), 0);
	t->events.r = t->r;
	*state = t;
	return 0;
}

static int test_teardown(void **state)
{
	struct test_ctx *t = *state;
	const char *suffix[] = {"", "-wal", "-shm"};
	char p[160];

	registry_free(t->r);
	agent_db_close(t->db);
	for (size_t i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "%s%s", t->path, suffix[i]);
		unlink(p);
	}
	rmdir(t->dir);
	clock_fake_destroy(&t->clock);
	free(t);
	return 0;
}

static void test_on_event(void *ctx, const struct registry_event *ev)
{
	struct test_events *te = ctx;
	struct registry_instance cur;
	int i = te->n;
	int rc;

	if (i >= TEST_EVENTS_MAX)
		return;
	te->ev[i].kind = ev->kind;
	te->ev[i].type = ev->type;
	snprintf(te->ev[i].name, sizeof(te->ev[i].name), "%s", ev->name);
	snprintf(te->ev[i].instance, sizeof(te->ev[i].instance), "%s", ev->instance.instance_id);
	te->ev[i].has_active = ev->has_active;
	if (ev->has_active)
		snprintf(te->ev[i].active, sizeof(te->ev[i].active), "%s", ev->active.instance_id);
	/* The callback may read the registry; the change is complete. */
	rc = registry_active(te->r, ev->type, ev->name, &cur);
	te->ev[i].read_ok =
	    ev->has_active ? rc == 0 && cur.seq == ev->active.seq : rc == CSID_ENOTFOUND;
	te->n++;
}

/* Active instance ID of (type, name), or "" when none. */
static const char *test_active(struct registry *r, enum registry_type type, const char *name)
{
	static struct registry_instance inst;

	if (registry_active(r, type, name, &inst) != 0)
		return "";
	return inst.instance_id;
}

static void test_reg(struct registry *r, enum registry_type type, const char *name,
		     const char *inst)
{
	char ep[64];
	struct err e;

	snprintf(ep, sizeof(ep), "unix:///run/%s/%s.sock", name, inst);
	assert_int_equal(registry_register(r, type, name, inst, ep, &e), 0);
}

static void test_newest_wins(void **state)
{
	struct test_ctx *t = *state;
	struct registry_snapshot s;
	struct err e;

	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	clock_fake_advance(&t->clock, 10);
	test_reg(t->r, REGISTRY_NODE, "ebs", "i2");
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i2");
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "ebs"), "");
	assert_int_equal(registry_snapshot(t->r, &s, &e), 0);
	assert_int_equal(s.nplugins, 1);
	assert_int_equal(s.plugins[0].ninstances, 2);
	assert_string_equal(s.plugins[0].instances[0].instance_id, "i1");
	assert_string_equal(s.plugins[0].instances[1].instance_id, "i2");
	assert_true(s.plugins[0].instances[0].seq < s.plugins[0].instances[1].seq);
	assert_int_equal(s.plugins[0].instances[0].registered_ms, 1700000000000);
	assert_int_equal(s.plugins[0].instances[1].registered_ms, 1700000000010);
	assert_string_equal(s.plugins[0].instances[1].endpoint, "unix:///run/ebs/i2.sock");
	registry_snapshot_free(&s);
	/* Re-registering the older instance makes it the newest again. */
	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i1");
	assert_int_equal(registry_snapshot(t->r, &s, &e), 0);
	assert_int_equal(s.plugins[0].ninstances, 2);
	registry_snapshot_free(&s);
}

static void test_deregister_old_keeps_new(void **state)
{
	struct test_ctx *t = *state;
	struct err e;

	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	test_reg(t->r, REGISTRY_NODE, "ebs", "i2");
	assert_int_equal(registry_deregister(t->r, REGISTRY_NODE, "ebs", "i1", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i2");
	assert_int_equal(registry_deregister(t->r, REGISTRY_NODE, "ebs", "i1", &e), CSID_ENOTFOUND);
	assert_non_null(strstr(e.msg, "deregister node ebs instance i1"));
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i2");
	/* The same instance ID under another type is another registration. */
	assert_int_equal(registry_deregister(t->r, REGISTRY_CONTROLLER, "ebs", "i2", &e),
			 CSID_ENOTFOUND);
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i2");
}

static void test_interleaved(void **state)
{
	struct test_ctx *t = *state;
	struct registry_snapshot s;
	struct err e;

	/* start 1, start 2, stop 2: the older comes back as active. */
	test_reg(t->r, REGISTRY_CONTROLLER, "nfs", "i1");
	test_reg(t->r, REGISTRY_CONTROLLER, "nfs", "i2");
	assert_int_equal(registry_deregister(t->r, REGISTRY_CONTROLLER, "nfs", "i2", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "nfs"), "i1");
	/* start 3, stop 1, start 4, stop 3, stop 4: nothing left. */
	test_reg(t->r, REGISTRY_CONTROLLER, "nfs", "i3");
	assert_int_equal(registry_deregister(t->r, REGISTRY_CONTROLLER, "nfs", "i1", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "nfs"), "i3");
	test_reg(t->r, REGISTRY_CONTROLLER, "nfs", "i4");
	assert_int_equal(registry_deregister(t->r, REGISTRY_CONTROLLER, "nfs", "i3", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "nfs"), "i4");
	assert_int_equal(registry_deregister(t->r, REGISTRY_CONTROLLER, "nfs", "i4", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "nfs"), "");
	assert_int_equal(registry_snapshot(t->r, &s, &e), 0);
	assert_int_equal(s.nplugins, 0);
	assert_null(s.plugins);
	registry_snapshot_free(&s);
}

static void test_monolith(void **state)
{
	struct test_ctx *t = *state;
	uint64_t c, n;
	struct err e;

	assert_int_equal(
	    registry_subscribe(t->r, REGISTRY_CONTROLLER, test_on_event, &t->events, &c, &e), 0);
	assert_int_equal(registry_subscribe(t->r, REGISTRY_NODE, test_on_event, &t->events, &n, &e),
			 0);
	assert_int_equal(registry_register_monolith(t->r, "hostpath", "a1", "/run/h.sock", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "hostpath"), "a1");
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "hostpath"), "a1");
	assert_int_equal(registry_deregister_monolith(t->r, "hostpath", "a1", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "hostpath"), "");
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "hostpath"), "");
	assert_int_equal(registry_deregister_monolith(t->r, "hostpath", "a1", &e), CSID_ENOTFOUND);
	assert_int_equal(t->events.n, 4);
	assert_int_equal(t->events.ev[0].type, REGISTRY_CONTROLLER);
	assert_int_equal(t->events.ev[1].type, REGISTRY_NODE);
	assert_int_equal(t->events.ev[2].kind, REGISTRY_EVENT_DEREGISTERED);
	assert_int_equal(t->events.ev[3].kind, REGISTRY_EVENT_DEREGISTERED);
	assert_false(t->events.ev[3].has_active);
	/* A monolith with only one side left still deregisters that side. */
	test_reg(t->r, REGISTRY_NODE, "hostpath", "a2");
	assert_int_equal(registry_deregister_monolith(t->r, "hostpath", "a2", &e), 0);
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "hostpath"), "");
	/* Bad input rolls nothing half-way. */
	assert_int_equal(registry_register_monolith(t->r, "hostpath", "", "/x", &e), CSID_EINVAL);
	assert_string_equal(test_active(t->r, REGISTRY_CONTROLLER, "hostpath"), "");
	registry_unsubscribe(t->r, c);
	registry_unsubscribe(t->r, n);
}

static void test_events_per_type(void **state)
{
	struct test_ctx *t = *state;
	uint64_t id;
	struct err e;

	assert_int_equal(
	    registry_subscribe(t->r, REGISTRY_NODE, test_on_event, &t->events, &id, &e), 0);
	test_reg(t->r, REGISTRY_CONTROLLER, "ebs", "c1");
	test_reg(t->r, REGISTRY_NODE, "ebs", "n1");
	test_reg(t->r, REGISTRY_NODE, "ebs", "n2");
	assert_int_equal(registry_deregister(t->r, REGISTRY_NODE, "ebs", "n2", &e), 0);
	assert_int_equal(registry_deregister(t->r, REGISTRY_CONTROLLER, "ebs", "c1", &e), 0);
	assert_int_equal(t->events.n, 3);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(t->events.ev[i].type, REGISTRY_NODE);
		assert_string_equal(t->events.ev[i].name, "ebs");
		assert_true(t->events.ev[i].read_ok);
	}
	assert_int_equal(t->events.ev[0].kind, REGISTRY_EVENT_REGISTERED);
	assert_string_equal(t->events.ev[1].active, "n2");
	assert_int_equal(t->events.ev[2].kind, REGISTRY_EVENT_DEREGISTERED);
	assert_string_equal(t->events.ev[2].instance, "n2");
	assert_true(t->events.ev[2].has_active);
	assert_string_equal(t->events.ev[2].active, "n1");
	/* No event for failed changes, nor after unsubscribing. */
	assert_int_equal(registry_deregister(t->r, REGISTRY_NODE, "ebs", "zz", &e), CSID_ENOTFOUND);
	registry_unsubscribe(t->r, id);
	test_reg(t->r, REGISTRY_NODE, "ebs", "n3");
	assert_int_equal(t->events.n, 3);
}

static void test_persist_restore(void **state)
{
	struct test_ctx *t = *state;
	struct registry_snapshot a, b;
	struct registry *r2;
	sqlite3 *db2;
	struct err e;

	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	test_reg(t->r, REGISTRY_NODE, "ebs", "i2");
	test_reg(t->r, REGISTRY_NODE, "ebs", "i3");
	test_reg(t->r, REGISTRY_CONTROLLER, "ebs", "c1");
	assert_int_equal(registry_register_monolith(t->r, "hostpath", "h1", "/run/h", &e), 0);
	assert_int_equal(registry_deregister(t->r, REGISTRY_NODE, "ebs", "i2", &e), 0);
	test_reg(t->r, REGISTRY_NODE, "ebs", "i1"); /* re-registered: newest */
	assert_int_equal(registry_snapshot(t->r, &a, &e), 0);

	/* A second agent process: new connection, new registry, restore. */
	assert_int_equal(agent_db_open(t->path, &db2, &e), 0);
	assert_int_equal(registry_new(NULL, db2, &r2, &e), 0);
	assert_int_equal(registry_restore(r2, &e), 5);
	assert_int_equal(registry_snapshot(r2, &b, &e), 0);
	assert_int_equal(a.nplugins, b.nplugins);
	assert_int_equal(a.nplugins, 4);
	for (size_t i = 0; i < a.nplugins; i++) {
		assert_int_equal(a.plugins[i].type, b.plugins[i].type);
		assert_string_equal(a.plugins[i].name, b.plugins[i].name);
		assert_int_equal(a.plugins[i].ninstances, b.plugins[i].ninstances);
		assert_memory_equal(a.plugins[i].instances, b.plugins[i].instances,
				    a.plugins[i].ninstances * sizeof(struct registry_instance));
	}
	assert_string_equal(test_active(r2, REGISTRY_NODE, "ebs"), "i1");
	/* Sequence numbers continue: a new registration wins over restored ones. */
	test_reg(r2, REGISTRY_NODE, "ebs", "i4");
	assert_string_equal(test_active(r2, REGISTRY_NODE, "ebs"), "i4");
	/* Restoring twice is refused. */
	assert_int_equal(registry_restore(r2, &e), CSID_EPRECOND);
	registry_snapshot_free(&a);
	registry_snapshot_free(&b);
	registry_free(r2);
	agent_db_close(db2);
}

static bool test_probe_i1_dead(void *ctx, enum registry_type type, const char *name,
			       const struct registry_instance *inst)
{
	int *calls = ctx;

	(*calls)++;
	return strcmp(inst->instance_id, "i1") != 0;
}

static void test_restore_prune(void **state)
{
	struct test_ctx *t = *state;
	struct test_events ev = {0};
	struct registry *r2, *r3;
	uint64_t id;
	int calls = 0;
	struct err e;

	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	test_reg(t->r, REGISTRY_NODE, "ebs", "i2");
	assert_int_equal(registry_new(NULL, t->db, &r2, &e), 0);
	assert_int_equal(registry_restore(r2, &e), 2);
	ev.r = r2;
	assert_int_equal(registry_subscribe(r2, REGISTRY_NODE, test_on_event, &ev, &id, &e), 0);
	assert_int_equal(registry_prune(r2, test_probe_i1_dead, &calls, &e), 1);
	assert_int_equal(calls, 2);
	assert_int_equal(ev.n, 1);
	assert_int_equal(ev.ev[0].kind, REGISTRY_EVENT_DEREGISTERED);
	assert_string_equal(ev.ev[0].instance, "i1");
	assert_string_equal(test_active(r2, REGISTRY_NODE, "ebs"), "i2");
	/* The drop was persisted. */
	assert_int_equal(registry_new(NULL, t->db, &r3, &e), 0);
	assert_int_equal(registry_restore(r3, &e), 1);
	assert_string_equal(test_active(r3, REGISTRY_NODE, "ebs"), "i2");
	registry_free(r3);
	registry_free(r2);
}

static void test_bad_input(void **state)
{
	struct test_ctx *t = *state;
	char long_name[300];
	struct registry *mem;
	struct err e;

	memset(long_name, 'a', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	assert_int_equal(registry_register(t->r, REGISTRY_NODE, "", "i", "/s", &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "plugin name is empty"));
	assert_int_equal(registry_register(t->r, REGISTRY_NODE, NULL, "i", "/s", &e), CSID_EINVAL);
	assert_int_equal(registry_register(t->r, REGISTRY_NODE, long_name, "i", "/s", &e),
			 CSID_EINVAL);
	assert_non_null(strstr(e.msg, "longer than 128"));
	assert_int_equal(registry_register(t->r, REGISTRY_NODE, "a\nb", "i", "/s", &e),
			 CSID_EINVAL);
	assert_int_equal(registry_register(t->r, REGISTRY_NODE, "a", "i", "", &e), CSID_EINVAL);
	assert_int_equal(registry_register(t->r, (enum registry_type)7, "a", "i", "/s", &e),
			 CSID_EINVAL);
	assert_int_equal(registry_deregister(t->r, REGISTRY_NODE, "a", NULL, &e), CSID_EINVAL);
	assert_int_equal(registry_type_parse("node"), REGISTRY_NODE);
	assert_int_equal(registry_type_parse("monolith"), -1);
	assert_int_equal(registry_type_parse(NULL), -1);
	assert_string_equal(registry_type_name((enum registry_type)9), "unknown");
	/* Nothing was registered, nothing persisted. */
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "a"), "");
	/* A memory-only registry cannot restore. */
	assert_int_equal(registry_new(NULL, NULL, &mem, &e), 0);
	assert_int_equal(registry_restore(mem, &e), CSID_EPRECOND);
	test_reg(mem, REGISTRY_NODE, "m", "i");
	assert_string_equal(test_active(mem, REGISTRY_NODE, "m"), "i");
	registry_free(mem);
	registry_free(NULL);
	registry_snapshot_free(NULL);
}

static void test_restore_skips_bad_rows(void **state)
{
	struct test_ctx *t = *state;
	struct registry *r2;
	struct err e;

	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	assert_int_equal(agent_db_exec(t->db,
				       "INSERT INTO registry_instances VALUES"
				       " ('bogus', 'x', 'y', '/z', 0, 99),"
				       " ('node', '', 'y', '/z', 0, 100),"
				       " ('node', 'ok', 'y', '/z', 0, -1)",
				       &e),
			 0);
	assert_int_equal(registry_new(NULL, t->db, &r2, &e), 0);
	assert_int_equal(registry_restore(r2, &e), 1);
	assert_string_equal(test_active(r2, REGISTRY_NODE, "ebs"), "i1");
	assert_string_equal(test_active(r2, REGISTRY_NODE, "ok"), "");
	registry_free(r2);
}

static void test_db_failure_keeps_memory(void **state)
{
	struct test_ctx *t = *state;
	struct err e;

	test_reg(t->r, REGISTRY_NODE, "ebs", "i1");
	/* Make every write fail: the change must not be applied in memory. */
	assert_int_equal(agent_db_exec(t->db, "DROP TABLE registry_instances", &e), 0);
	assert_true(registry_register(t->r, REGISTRY_NODE, "ebs", "i2", "/s", &e) < 0);
	assert_non_null(strstr(e.msg, "registry db write"));
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i1");
	assert_true(registry_register(t->r, REGISTRY_NODE, "new", "i2", "/s", &e) < 0);
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "new"), "");
	assert_true(registry_deregister(t->r, REGISTRY_NODE, "ebs", "i1", &e) < 0);
	assert_string_equal(test_active(t->r, REGISTRY_NODE, "ebs"), "i1");
}

static void test_db_migrate(void **state)
{
	struct test_ctx *t = *state;
	const char *v1[] = {"CREATE TABLE m_a (x INTEGER)"};
	const char *v2[] = {"CREATE TABLE m_a (x INTEGER)", "ALTER TABLE m_a ADD COLUMN y TEXT"};
	const char *bad[] = {"CREATE TABLE m_a (x INTEGER)", "ALTER TABLE m_a ADD COLUMN y TEXT",
			     "CREATE TABLE m_b (a); THIS IS NOT SQL"};
	struct err e;

	assert_int_equal(agent_db_migrate(t->db, "mod", v1, 1, &e), 0);
	/* Applied steps are skipped (re-running step 1 would fail: table exists). */
	assert_int_equal(agent_db_migrate(t->db, "mod", v1, 1, &e), 0);
	assert_int_equal(agent_db_migrate(t->db, "mod", v2, 2, &e), 0);
	assert_int_equal(agent_db_exec(t->db, "INSERT INTO m_a (x, y) VALUES (1, 'a')", &e), 0);
	/* A failing step is rolled back as a whole and names itself. */
	assert_true(agent_db_migrate(t->db, "mod", bad, 3, &e) < 0);
	assert_non_null(strstr(e.msg, "schema mod: step 3"));
	assert_true(agent_db_exec(t->db, "SELECT * FROM m_b", &e) < 0);
	/* A database from a newer agent is refused. */
	assert_int_equal(agent_db_migrate(t->db, "mod", v1, 1, &e), CSID_EPRECOND);
	assert_non_null(strstr(e.msg, "version 2"));
	/* Modules are independent. */
	assert_int_equal(agent_db_migrate(t->db, "other", NULL, 0, &e), 0);
	assert_int_equal(agent_db_migrate(t->db, "", v1, 1, &e), CSID_EINVAL);
	assert_int_equal(agent_db_migrate(NULL, "x", v1, 1, &e), CSID_EINVAL);
}

static void test_db_open_errors(void **state)
{
	struct test_ctx *t = *state;
	char p[200];
	sqlite3 *db = (sqlite3 *)1;
	struct err e;

	assert_int_equal(agent_db_open("", &db, &e), CSID_EINVAL);
	assert_null(db);
	snprintf(p, sizeof(p), "%s/no/such/dir/agent.db", t->dir);
	assert_true(agent_db_open(p, &db, &e) < 0);
	assert_non_null(strstr(e.msg, p));
	assert_null(db);
	assert_int_equal(agent_db_open(":memory:", &db, &e), 0);
	agent_db_close(db);
	agent_db_close(NULL);
	assert_int_equal(agent_db_err(SQLITE_BUSY), CSID_EABORTED);
	assert_int_equal(agent_db_err(SQLITE_OK), 0);
}

static int test_count_rows_of(sqlite3 *db, const char *table)
{
	sqlite3_stmt *st = NULL;
	char sql[64];
	int n = -1;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static int test_count_rows(sqlite3 *db)
{
	return test_count_rows_of(db, "t");
}

/*
 * The other process of test_db_one_process (this program run again with
 * --open-db PATH): exits 0 when opening PATH is refused as it should be.
 */
static int test_open_other(const char *path)
{
	sqlite3 *db = NULL;
	struct err e;
	int rc = agent_db_open(path, &db, &e);

	agent_db_close(db);
	if (rc == CSID_EUNAVAIL && strstr(e.msg, "locked") && strstr(e.msg, path))
		return 0;
	fprintf(stderr, "second process: rc=%d %s\n", rc, rc ? e.msg : "opened");
	return 1;
}

/*
 * The file is the process's: a second connection of the same process reads
 * while the first has a write open, and another process is refused with a
 * clear error.
 */
static void test_db_one_process(void **state)
{
	struct test_ctx *t = *state;
	char p[160], self[] = "/proc/self/exe", flag[] = "--open-db";
	char *argv[] = {self, flag, p, NULL};
	sqlite3 *w = NULL, *r = NULL;
	int status = -1;
	struct err e;
	pid_t pid;

	snprintf(p, sizeof(p), "%s/excl.db", t->dir);
	assert_int_equal(agent_db_open(p, &w, &e), 0);
	assert_int_equal(agent_db_open(p, &r, &e), 0);
	assert_int_equal(agent_db_exec(w, "CREATE TABLE t(x); INSERT INTO t VALUES (1)", &e), 0);
	assert_int_equal(test_count_rows(r), 1);
	/* A write under way does not stop the other connection's reads. */
	assert_int_equal(agent_db_exec(w, "BEGIN IMMEDIATE; INSERT INTO t VALUES (2)", &e), 0);
	assert_int_equal(test_count_rows(r), 1);
	assert_int_equal(agent_db_exec(w, "COMMIT", &e), 0);
	assert_int_equal(test_count_rows(r), 2);
	assert_int_equal(posix_spawn(&pid, self, NULL, NULL, argv, environ), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* Once every connection of this process is closed, the file is free again. */
	agent_db_close(r);
	agent_db_close(w);
	assert_int_equal(agent_db_open(p, &w, &e), 0);
	assert_int_equal(test_count_rows(w), 2);
	agent_db_close(w);
	unlink(p);
	snprintf(p, sizeof(p), "%s/excl.db-wal", t->dir);
	unlink(p);
}

static void test_text(sqlite3 *db, const char *sql, const char *want)
{
	sqlite3_stmt *st = NULL;

	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(st, 0), want);
	sqlite3_finalize(st);
}

/*
 * Two connections of the process take turns writing transactions of
 * several pages into the same WAL (each file's gathered frames follow the
 * other's; a page written twice in one transaction is rewritten in place;
 * checkpoints start the WAL again): every row is there, and the file is
 * sound, after both are closed and it is opened again.
 */
static void test_db_connections_share_wal(void **state)
{
	struct test_ctx *t = *state;
	char p[160], sql[160];
	sqlite3 *c[2] = {NULL, NULL};
	struct err e;

	snprintf(p, sizeof(p), "%s/shared.db", t->dir);
	for (int i = 0; i < 2; i++)
		assert_int_equal(agent_db_open(p, &c[i], &e), 0);
	assert_int_equal(agent_db_exec(c[0], "CREATE TABLE b(k INTEGER PRIMARY KEY, v BLOB)", &e),
			 0);
	for (int k = 0; k < 300; k++) {
		sqlite3 *db = c[k % 2];

		snprintf(sql, sizeof(sql),
			 "BEGIN; INSERT INTO b VALUES (%d, randomblob(%d));"
			 "UPDATE b SET v = randomblob(3000) WHERE k = %d; COMMIT",
			 k, 2000 + (k % 7) * 1000, k / 2);
		assert_int_equal(agent_db_exec(db, sql, &e), 0);
		if (k % 50 == 49)
			assert_int_equal(agent_db_exec(db, "PRAGMA wal_checkpoint(RESTART)", &e),
					 0);
		assert_int_equal(test_count_rows_of(c[(k + 1) % 2], "b"), k + 1);
	}
	for (int i = 0; i < 2; i++)
		agent_db_close(c[i]);
	assert_int_equal(agent_db_open(p, &c[0], &e), 0);
	assert_int_equal(test_count_rows_of(c[0], "b"), 300);
	test_text(c[0], "PRAGMA integrity_check", "ok");
	agent_db_close(c[0]);
	unlink(p);
	snprintf(p, sizeof(p), "%s/shared.db-wal", t->dir);
	unlink(p);
}

struct test_thread_arg {
	struct registry *r;
	int id;
};

static void *test_thread(void *p)
{
	struct test_thread_arg *a = p;
	char inst[32];
	struct err e;

	for (int i = 0; i < 50; i++) {
		snprintf(inst, sizeof(inst), "t%d-%d", a->id, i);
		if (registry_register(a->r, REGISTRY_NODE, "shared", inst, "/s", &e) != 0)
			return (void *)1;
		if (i % 2 == 0 && registry_deregister(a->r, REGISTRY_NODE, "shared", inst, &e) != 0)
			return (void *)1;
	}
	return NULL;
}

struct test_seq_check {
	uint64_t last;
	int n;
	bool ordered;
};

static void test_on_seq(void *ctx, const struct registry_event *ev)
{
	struct test_seq_check *c = ctx;

	if (ev->kind == REGISTRY_EVENT_REGISTERED) {
		if (ev->instance.seq <= c->last)
			c->ordered = false;
		c->last = ev->instance.seq;
	}
	c->n++;
}

static void test_concurrent(void **state)
{
	struct test_ctx *t = *state;
	struct test_seq_check chk = {.ordered = true};
	struct test_thread_arg args[4];
	struct registry_snapshot s;
	pthread_t th[4];
	uint64_t id;
	struct err e;

	assert_int_equal(registry_subscribe(t->r, REGISTRY_NODE, test_on_seq, &chk, &id, &e), 0);
	for (int i = 0; i < 4; i++) {
		args[i].r = t->r;
		args[i].id = i;
		assert_int_equal(pthread_create(&th[i], NULL, test_thread, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		void *ret;

		pthread_join(th[i], &ret);
		assert_null(ret);
	}
	/* 4 threads x (50 registrations + 25 deregistrations), in order. */
	assert_int_equal(chk.n, 4 * 75);
	assert_true(chk.ordered);
	assert_int_equal(registry_snapshot(t->r, &s, &e), 0);
	assert_int_equal(s.nplugins, 1);
	assert_int_equal(s.plugins[0].ninstances, 4 * 25);
	for (size_t i = 1; i < s.plugins[0].ninstances; i++)
		assert_true(s.plugins[0].instances[i - 1].seq < s.plugins[0].instances[i].seq);
	registry_snapshot_free(&s);
	registry_unsubscribe(t->r, id);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_newest_wins, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_deregister_old_keeps_new, test_setup,
					    test_teardown),
	    cmocka_unit_test_setup_teardown(test_interleaved, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_monolith, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_events_per_type, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_persist_restore, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_restore_prune, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_bad_input, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_restore_skips_bad_rows, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_db_failure_keeps_memory, test_setup,
					    test_teardown),
	    cmocka_unit_test_setup_teardown(test_db_migrate, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_db_open_errors, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_db_one_process, test_setup, test_teardown),
	    cmocka_unit_test_setup_teardown(test_db_connections_share_wal, test_setup,
					    test_teardown),
	    cmocka_unit_test_setup_teardown(test_concurrent, test_setup, test_teardown),
	};

	if (argc == 3 && strcmp(argv[1], "--open-db") == 0)
		return test_open_other(argv[2]);

	return cmocka_run_group_tests(tests, NULL, NULL);
}
