/*
 * Unit tests of the Docker volume bridge: the option -> spec mapping
 * (src/agent/docker_opts.c) and the bridge's core (src/agent/
 * docker_bridge.c) against a fake catalogue and a fake claim flow:
 * defaults, sizes with units, unknown options listing the known ones,
 * secrets refused, hostile names; a create that ends ready, one that
 * fails (its record dropped), one of a volume the catalogue has; a mount
 * asked twice for one ID mounts once; an unmount of an ID never mounted
 * calls nothing; a remove deletes what was created and deregisters what
 * was registered. The owner finders on fake /proc trees: a container's
 * main process from the cgroups, and from the mounts (containers of
 * other mount namespaces holding the volume, counted, a taken one
 * skipped); the Docker engine's container list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <sys/stat.h>
#include <unistd.h>

#include "agent/docker_bridge.h"
#include "agent/docker_opts.h"
#include "agent/docker_owner.h"

/* ---- options ---- */

static json_t *t_spec(const char *name, const char *opts_json, int *rc, struct err *e)
{
	const char *plugins[] = {"hp.csi"};
	json_t *opts = opts_json ? json_loads(opts_json, 0, NULL) : NULL, *spec = NULL;
	bool reg = false;

	err_clear(e);
	*rc = docker_opts_spec(name, opts, plugins, 1, &spec, &reg, e);
	json_decref(opts);
	return spec;
}

static void t_opts_defaults(void **state)
{
	struct err e;
	int rc;
	json_t *s = t_spec("data", NULL, &rc, &e);
	json_t *cap = json_array_get(json_object_get(s, "capabilities"), 0);

	(void)state;
	assert_int_equal(rc, 0);
	assert_string_equal(json_string_value(json_object_get(s, "id")), "data");
	assert_string_equal(json_string_value(json_object_get(s, "plugin_id")), "hp.csi");
	assert_string_equal(json_string_value(json_object_get(cap, "access_mode")),
			    "single-node-writer");
	assert_null(json_object_get(s, "capacity_min"));
	json_decref(s);
}

static void t_opts_all(void **state)
{
	struct err e;
	int rc;
	json_t *s = t_spec("data",
			   "{\"size\": \"10Mi\", \"access-mode\": \"multi-node-multi-writer\","
			   " \"fs-type\": \"ext4\", \"mount-flags\": \"noatime,,ro\","
			   " \"param.tier\": \"fast\", \"from-snapshot\": \"snap-1\","
			   " \"plugin\": \"other.csi\"}",
			   &rc, &e);
	json_t *mo = json_object_get(s, "mount_options");

	(void)state;
	assert_int_equal(rc, 0);
	assert_int_equal(json_integer_value(json_object_get(s, "capacity_min")), 10485760);
	assert_string_equal(
	    json_string_value(json_object_get(json_array_get(json_object_get(s, "capabilities"), 0),
					      "access_mode")),
	    "multi-node-multi-writer");
	assert_string_equal(json_string_value(json_object_get(mo, "fs_type")), "ext4");
	assert_int_equal(json_array_size(json_object_get(mo, "mount_flags")), 2);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(s, "parameters"), "tier")), "fast");
	assert_string_equal(json_string_value(json_object_get(s, "snapshot_source")), "snap-1");
	assert_string_equal(json_string_value(json_object_get(s, "plugin_id")), "other.csi");
	json_decref(s);
}

static void t_opts_refused(void **state)
{
	static const struct {
		const char *name, *opts, *msg;
	} cases[] = {
	    {"data", "{\"colour\": \"red\"}", "known: plugin, size"},
	    {"data", "{\"secret.key\": \"hunter2\"}", "secrets are never taken"},
	    {"data", "{\"param.password\": \"hunter2\"}", "secrets are never taken"},
	    {"data", "{\"size\": \"0\"}", "more than 0"},
	    {"data", "{\"size\": \"ten\"}", "option size"},
	    {"data", "{\"access-mode\": \"sometimes\"}", "option access-mode"},
	    {"data", "{\"external-id\": \"v1\", \"size\": \"1M\"}", "not with size"},
	    {"data", "{\"size\": 10}", "expected a string"},
	    {"a/b", NULL, "volume name"},
	    {"a..b", NULL, "volume name"},
	    {"", NULL, "volume name"},
	};
	struct err e;
	int rc;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *s = t_spec(cases[i].name, cases[i].opts, &rc, &e);

		assert_null(s);
		assert_int_equal(rc, CSID_EINVAL);
		if (!strstr(e.msg, cases[i].msg))
			fail_msg("case %zu: %s", i, e.msg);
		assert_null(strstr(e.msg, "hunter2"));
	}
}

static void t_opts_long_name_and_plugins(void **state)
{
	const char *two[] = {"a.csi", "b.csi"};
	char name[301];
	json_t *spec = NULL, *opts;
	bool reg;
	struct err e;

	(void)state;
	memset(name, 'a', 300);
	name[300] = '\0';
	err_clear(&e);
	assert_int_equal(docker_opts_name_check(name, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "300 bytes"));
	assert_int_equal(docker_opts_spec("data", NULL, two, 2, &spec, &reg, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "a.csi, b.csi"));
	assert_int_equal(docker_opts_spec("data", NULL, two, 0, &spec, &reg, &e), CSID_EINVAL);
	opts = json_pack("{s:s}", "external-id", "v-1");
	assert_int_equal(docker_opts_spec("r", opts, two, 1, &spec, &reg, &e), 0);
	json_decref(opts);
	assert_true(reg);
	assert_string_equal(json_string_value(json_object_get(spec, "name")),
			    DOCKER_OPTS_REGISTERED_NAME);
	json_decref(spec);
}

/* ---- the bridge against fakes ---- */

struct fake {
	json_t *vols; /* id -> volume */
	json_t *mounts; /* [{"volume_id", "alloc_id", "target", "state"}] */
	const char *create_state; /* what a create ends in */
	int mount_calls, unmount_calls;
	char last[256]; /* method and path of the last write */
};

static int fake_server(void *ctx, const char *method, const char *path, json_t *body, json_t **doc,
		       struct err *e)
{
	struct fake *f = ctx;
	char id[200];
	const char *p = path + strlen("/v1/volume/");
	size_t n = strcspn(p, "/?");
	json_t *v;

	*doc = NULL;
	if (strncmp(path, "/v1/volumes", 11) == 0) {
		const char *k;
		json_t *list = json_array();

		json_object_foreach(f->vols, k, v) json_array_append(list, v);
		*doc = json_pack("{s:o}", "volumes", list);
		return 0;
	}
	snprintf(id, sizeof(id), "%.*s", (int)n, p);
	v = json_object_get(f->vols, id);
	if (strcmp(method, "GET") == 0) {
		if (!v)
			return err_set(e, CSID_ENOTFOUND, "volume %s not found", id);
		*doc = json_deep_copy(v);
		return 0;
	}
	snprintf(f->last, sizeof(f->last), "%s %s", method, path);
	if (strcmp(method, "PUT") == 0) {
		json_t *nv = json_deep_copy(body);
		bool create = strstr(path, "/create") != NULL;

		json_object_set_new(nv, "state", json_string(create ? f->create_state : "ready"));
		if (create && strcmp(f->create_state, "failed") == 0)
			json_object_set_new(nv, "failure", json_string("OUT_OF_RANGE: too big"));
		json_object_set_new(nv, "modify_index", json_integer(7));
		json_object_set_new(f->vols, id, nv);
		*doc = json_deep_copy(nv);
		return 0;
	}
	if (!v)
		return err_set(e, CSID_ENOTFOUND, "volume %s not found", id);
	json_object_del(f->vols, id);
	*doc = json_object();
	return 0;
}

static int fake_mount(void *ctx, const char *vol, const char *alloc, char *path, size_t cap,
		      struct err *e)
{
	struct fake *f = ctx;

	(void)e;
	f->mount_calls++;
	snprintf(path, cap, "/m/%s/%s", vol, alloc);
	json_array_append_new(f->mounts,
			      json_pack("{s:s, s:s, s:s, s:s}", "volume_id", vol, "alloc_id", alloc,
					"target", path, "state", "published"));
	return 0;
}

static int fake_unmount(void *ctx, const char *vol, const char *alloc, const char *reason,
			struct err *e)
{
	struct fake *f = ctx;
	json_t *m;
	size_t i;

	(void)reason;
	(void)e;
	f->unmount_calls++;
	json_array_foreach(f->mounts, i, m)
	{
		if (strcmp(json_string_value(json_object_get(m, "volume_id")), vol) == 0 &&
		    strcmp(json_string_value(json_object_get(m, "alloc_id")), alloc) == 0) {
			json_array_remove(f->mounts, i);
			break;
		}
	}
	return 0;
}

static int fake_mounts(void *ctx, json_t **out, struct err *e)
{
	(void)e;
	*out = json_deep_copy(((struct fake *)ctx)->mounts);
	return 0;
}

static int fake_plugins(void *ctx, json_t **out, struct err *e)
{
	(void)ctx;
	(void)e;
	*out = json_pack("[s]", "hp.csi");
	return 0;
}

struct t_bridge {
	struct fake f;
	struct docker_bridge *b;
};

static int t_bridge_setup(void **state)
{
	struct t_bridge *t = calloc(1, sizeof(*t));
	struct docker_bridge_config cfg = {
	    .ops = {fake_server, fake_mount, fake_unmount, fake_mounts, fake_plugins, NULL, NULL},
	    .wait_ms = 1000,
	};
	struct err e;

	if (!t)
		return -1;
	t->f.vols = json_object();
	t->f.mounts = json_array();
	t->f.create_state = "ready";
	cfg.ops.ctx = &t->f;
	*state = t;
	return docker_bridge_new(&cfg, &t->b, &e);
}

static int t_bridge_teardown(void **state)
{
	struct t_bridge *t = *state;

	docker_bridge_free(t->b);
	json_decref(t->f.vols);
	json_decref(t->f.mounts);
	free(t);
	return 0;
}

static void t_bridge_create(void **state)
{
	struct t_bridge *t = *state;
	json_t *vol = NULL;
	struct err e;

	err_clear(&e);
	assert_int_equal(docker_bridge_create(t->b, "data", NULL, &e), 0);
	assert_string_equal(t->f.last, "PUT /v1/volume/data/create");
	/* Known to the catalogue: used as it is, nothing sent. */
	t->f.last[0] = '\0';
	assert_int_equal(docker_bridge_create(t->b, "data", NULL, &e), 0);
	assert_string_equal(t->f.last, "");
	assert_int_equal(docker_bridge_get(t->b, "data", &vol, &e), 0);
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(vol, "Status"), "state")), "ready");
	json_decref(vol);
	/* A create that fails leaves no record, and says why. */
	t->f.create_state = "failed";
	assert_int_equal(docker_bridge_create(t->b, "big", NULL, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "OUT_OF_RANGE: too big"));
	assert_null(json_object_get(t->f.vols, "big"));
	assert_string_equal(t->f.last, "DELETE /v1/volume/big?force=true");
}

static void t_bridge_mount_unmount(void **state)
{
	struct t_bridge *t = *state;
	char path[DOCKER_BRIDGE_PATH_MAX], again[DOCKER_BRIDGE_PATH_MAX];
	struct err e;

	err_clear(&e);
	assert_int_equal(docker_bridge_create(t->b, "data", NULL, &e), 0);
	assert_int_equal(docker_bridge_mount(t->b, "data", "c1", path, &e), 0);
	assert_int_equal(docker_bridge_mount(t->b, "data", "c1", again, &e), 0);
	assert_string_equal(path, again);
	assert_int_equal(t->f.mount_calls, 1);
	assert_int_equal(docker_bridge_path(t->b, "data", again, &e), 0);
	assert_string_equal(path, again);
	/* Never mounted: done, nothing called. */
	assert_int_equal(docker_bridge_unmount(t->b, "data", "c9", &e), 0);
	assert_int_equal(t->f.unmount_calls, 0);
	assert_int_equal(docker_bridge_unmount(t->b, "data", "c1", &e), 0);
	assert_int_equal(t->f.unmount_calls, 1);
	assert_int_equal(docker_bridge_unmount(t->b, "data", "c1", &e), 0);
	assert_int_equal(t->f.unmount_calls, 1);
	assert_int_equal(docker_bridge_mount(t->b, "data", "../x", path, &e), CSID_EINVAL);
	assert_int_equal(docker_bridge_mount(t->b, "a/b", "c1", path, &e), CSID_EINVAL);
	assert_int_equal(t->f.mount_calls, 1);
}

static void t_bridge_remove(void **state)
{
	struct t_bridge *t = *state;
	json_t *list = NULL, *opts;
	struct err e;

	err_clear(&e);
	assert_int_equal(docker_bridge_create(t->b, "made", NULL, &e), 0);
	opts = json_pack("{s:s}", "external-id", "v-1");
	assert_int_equal(docker_bridge_create(t->b, "reg", opts, &e), 0);
	json_decref(opts);
	assert_string_equal(t->f.last, "PUT /v1/volume/reg");
	assert_int_equal(docker_bridge_list(t->b, &list, &e), 0);
	assert_int_equal(json_array_size(list), 2);
	json_decref(list);
	assert_int_equal(docker_bridge_remove(t->b, "reg", &e), 0);
	assert_string_equal(t->f.last, "DELETE /v1/volume/reg");
	assert_int_equal(docker_bridge_remove(t->b, "made", &e), 0);
	assert_string_equal(t->f.last, "DELETE /v1/volume/made/delete");
	/* Gone already: done. */
	assert_int_equal(docker_bridge_remove(t->b, "made", &e), 0);
}

/* ---- owners ---- */

#define T_ID "9a2d4df09a56c16b5cc092e7dbe3c64891d54ede64c4689974238b294d25543b"

static void t_proc(const char *root, int pid, const char *cgroup, unsigned long start, char st,
		   int ns_pid)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%d", root, pid);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/%d/cgroup", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s", cgroup);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%d/stat", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%d (sh (x)) %c 1 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 %lu 0 0\n", pid, st,
		start);
	fclose(f);
	snprintf(path, sizeof(path), "%s/%d/status", root, pid);
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "Name:\tsh\nPid:\t%d\nNSpid:\t%d\t%d\nVmRSS:\t1 kB\n", pid, pid, ns_pid);
	fclose(f);
}

static void t_owner_cgroup(void **state)
{
	static const int pids[] = {10, 20, 21, 22, 23, 30};
	char root[] = "/tmp/cdo-XXXXXX", path[256];

	(void)state;
	assert_non_null(mkdtemp(root));
	t_proc(root, 10, "0::/user.slice\n", 100, 'S', 10);
	/*
	 * The container's init (PID 1 inside), a child of it (younger), a
	 * zombie older than both, and the runtime's setup stage, older, in
	 * the cgroup but not the init of a pid namespace.
	 */
	t_proc(root, 20,
	       "9:name=systemd:/libpod_parent/libpod-" T_ID "\n8:pids:/libpod_parent/libpod-" T_ID
	       "\n",
	       500, 'S', 1);
	t_proc(root, 21, "8:pids:/libpod_parent/libpod-" T_ID "\n", 600, 'R', 2);
	t_proc(root, 22, "8:pids:/docker/" T_ID "\n", 50, 'Z', 1);
	t_proc(root, 23, "8:pids:/docker/" T_ID "\n", 40, 'S', 23);
	t_proc(root, 30, "8:pids:/libpod_parent/libpod-conmon-other\n", 10, 'S', 1);
	assert_int_equal(docker_owner_pid_by_cgroup(root, T_ID), 20);
	assert_int_equal(docker_owner_pid_by_cgroup(root, "0123456789abcdef0123"), 0);
	/* Too short to name one container. */
	assert_int_equal(docker_owner_pid_by_cgroup(root, "libpod"), 0);
	for (size_t i = 0; i < sizeof(pids) / sizeof(pids[0]); i++) {
		snprintf(path, sizeof(path), "%s/%d/cgroup", root, pids[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%d/stat", root, pids[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%d/status", root, pids[i]);
		unlink(path);
		snprintf(path, sizeof(path), "%s/%d", root, pids[i]);
		rmdir(path);
	}
	assert_int_equal(rmdir(root), 0);
}

/* Writes root/<dir>/<name> with text (dir made), or a symlink to text when link. */
static void t_file(const char *root, const char *dir, const char *name, const char *text, bool link)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, dir);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", root, dir, name);
	if (link) {
		assert_int_equal(symlink(text, path), 0);
		return;
	}
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void t_owner_mounts(void **state)
{
	static const char *const files[] = {
	    "self/ns/mnt", "self/mountinfo", "39/ns/mnt", "39/mountinfo",
	    "39/stat",     "39/status",      "40/ns/mnt", "40/mountinfo",
	    "40/stat",     "40/status",      "41/ns/mnt", "41/mountinfo",
	    "41/stat",     "41/status",      "42/ns/mnt", "42/mountinfo",
	    "42/stat",     "42/status",      NULL};
	static const char *const dirs[] = {"self/ns", "self", "39/ns", "39", "40/ns", "40",
					   "41/ns",   "41",   "42/ns", "42", NULL};
	static const char target[] = "/var/lib/csid/mounts/per-alloc/a1/pv/rw";
	static const char mounts[] = "/var/lib/csid/mounts";
	char root[] = "/tmp/cdm-XXXXXX", ns[64] = "", path[256];
	const char *taken[] = {"mnt:[4026532001]"};
	int users = -1;

	(void)state;
	assert_non_null(mkdtemp(root));
	/* The agent's namespace: the target is a bind of the volume's directory. */
	t_file(root, "self", "mountinfo",
	       "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
	       "90 22 8:1 /srv/hp/volumes/pv /var/lib/csid/mounts/per-alloc/a1/pv/rw rw - ext4 "
	       "/dev/sda1 rw\n",
	       false);
	t_file(root, "self/ns", "mnt", "mnt:[4026531840]", true);
	/*
	 * Two containers with the volume at /data, one process of ours with
	 * it too, and, older than all, the first process of a namespace made
	 * while the volume was mounted here (another container's setup, a
	 * process unshared from the host): copies of the agent's mounts only.
	 */
	for (int pid = 39; pid <= 42; pid++) {
		char dir[16], nsd[16], st[160], status[128];

		snprintf(dir, sizeof(dir), "%d", pid);
		snprintf(nsd, sizeof(nsd), "%d/ns", pid);
		t_file(
		    root, dir, "mountinfo",
		    pid == 39
			? "300 299 8:1 / / rw - ext4 /dev/sda1 rw\n"
			  "301 300 8:1 /srv/hp/volumes/pv /var/lib/csid/mounts/staging/hp/pv/rw "
			  "rw - ext4 /dev/sda1 rw\n"
			  "302 300 8:1 /srv/hp/volumes/pv /var/lib/csid/mounts/per-alloc/a0/pv/rw "
			  "rw - ext4 /dev/sda1 rw\n"
			: "300 299 8:1 /srv/hp/volumes/pv /data rw - ext4 /dev/sda1 rw\n",
		    false);
		t_file(root, nsd, "mnt",
		       pid == 42   ? "mnt:[4026531840]"
		       : pid == 40 ? "mnt:[4026532001]"
		       : pid == 39 ? "mnt:[4026532003]"
				   : "mnt:[4026532002]",
		       true);
		snprintf(st, sizeof(st), "%d (sh) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %d 0 0\n",
			 pid, 1000 + pid);
		t_file(root, dir, "stat", st, false);
		snprintf(status, sizeof(status), "Name:\tsh\nNSpid:\t%d\t1\n", pid);
		t_file(root, dir, "status", status, false);
	}
	assert_int_equal(
	    docker_owner_pid_by_mount(root, target, mounts, NULL, 0, ns, sizeof(ns), &users), 40);
	assert_string_equal(ns, "mnt:[4026532001]");
	assert_int_equal(users, 2);
	/* Copies counted (nothing skipped): the oldest namespace holding one would own the mount.
	 */
	assert_int_equal(
	    docker_owner_pid_by_mount(root, target, NULL, NULL, 0, ns, sizeof(ns), &users), 39);
	assert_int_equal(users, 3);
	/* Only a prefix of a path component is not under mounts_dir. */
	assert_int_equal(docker_owner_pid_by_mount(root, target, "/var/lib/csid/mou", NULL, 0, ns,
						   sizeof(ns), NULL),
			 39);
	/* 40's namespace is taken by another mount of the volume: 41. */
	assert_int_equal(
	    docker_owner_pid_by_mount(root, target, mounts, taken, 1, ns, sizeof(ns), NULL), 41);
	/* Not a mount point here: nobody. */
	assert_int_equal(
	    docker_owner_pid_by_mount(root, "/nope", mounts, NULL, 0, ns, sizeof(ns), &users), 0);
	for (int i = 0; files[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, files[i]);
		unlink(path);
	}
	for (int i = 0; dirs[i]; i++) {
		snprintf(path, sizeof(path), "%s/%s", root, dirs[i]);
		rmdir(path);
	}
	assert_int_equal(rmdir(root), 0);
}

static void t_owner_engine_list(void **state)
{
	static const char list[] =
	    "[{\"Id\": \"aaa\", \"State\": \"running\"}, {\"Id\": \"bbb\", \"State\": "
	    "\"exited\"}, {\"Names\": [\"x\"]}, {\"Id\": \"ccc\"}]";
	json_t *ids = NULL;
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(docker_owner_parse_list(list, strlen(list), &ids, &e), 0);
	assert_int_equal(json_array_size(ids), 2);
	assert_string_equal(json_string_value(json_array_get(ids, 0)), "aaa");
	assert_string_equal(json_string_value(json_array_get(ids, 1)), "ccc");
	json_decref(ids);
	assert_int_equal(docker_owner_parse_list("{\"message\": \"x\"}", 16, &ids, &e),
			 CSID_EPROTO);
	assert_null(ids);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(t_opts_defaults),
	    cmocka_unit_test(t_opts_all),
	    cmocka_unit_test(t_opts_refused),
	    cmocka_unit_test(t_opts_long_name_and_plugins),
	    cmocka_unit_test_setup_teardown(t_bridge_create, t_bridge_setup, t_bridge_teardown),
	    cmocka_unit_test_setup_teardown(t_bridge_mount_unmount, t_bridge_setup,
					    t_bridge_teardown),
	    cmocka_unit_test_setup_teardown(t_bridge_remove, t_bridge_setup, t_bridge_teardown),
	    cmocka_unit_test(t_owner_cgroup),
	    cmocka_unit_test(t_owner_mounts),
	    cmocka_unit_test(t_owner_engine_list),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
