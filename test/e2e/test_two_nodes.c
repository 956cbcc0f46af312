/*
 * End to end: two nodes, one server (cluster.h: a real `csid server`, two
 * `csid agent`s node-1 and node-2 with their own data dirs, each
 * supervising csi-hostpath as a monolith with controller publish on, the
 * plugins sharing one hostpath data dir so a volume is the same on both
 * nodes). Everything goes through `csictl volume mount|unmount` as on each
 * node.
 *
 * single-node-writer: node-1 mounts it for web-1 and writes a file; node-2
 * asking for web-2 is refused with an error naming the holder (web-1 on
 * node-1) and mounts nothing; once node-1 unmounted, node-2's mount
 * succeeds (waiting, if need be, until web-1's release is done: its
 * controller unpublish is slowed for that) and sees the file node-1
 * wrote; web-1's claim is freed. Unmounted on node-2 and deleted at once
 * (the unpublish still slow), the volume is gone.
 *
 * multi-node-reader-only: a write claim is refused; read-only mounts on
 * both nodes at once, both published to their node read-only, both read a
 * file put in the volume beforehand and a write fails with EROFS on both;
 * unmounted on both, nothing stays mounted and both claims end freed.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cluster.h"
#include "hostpath_proc.h"

#define T_PATH_MAX 1024
#define T_SLOW_UNPUBLISH "ControllerUnpublishVolume delay_ms=1000\n"

/*
 * `csictl volume mount vol -alloc alloc [-read-only]` on node i; the
 * printed path goes to path (T_PATH_MAX), which must be a mount.
 */
static void t_mount(struct cluster *c, int i, const char *vol, const char *alloc, bool ro,
		    char *path)
{
	char *args[] = {"volume", "mount",       (char *)vol,
			"-alloc", (char *)alloc, ro ? "-read-only" : NULL,
			NULL};
	struct csictl_run r;

	cluster_csictl(c, i, &r, args);
	if (r.status != 0)
		cluster_dump_logs(c, "volume mount failed");
	csictl_expect_ok(&r);
	snprintf(path, T_PATH_MAX, "%s", r.out);
	path[strcspn(path, "\n")] = '\0';
	csictl_runner_free(&c->rn, &r);
	assert_true(strncmp(path, c->a[i]->dir, strlen(c->a[i]->dir)) == 0);
	assert_true(agent_proc_is_mount(path));
}

/* `csictl volume unmount vol -alloc alloc` on node i; path is no mount after it. */
static void t_unmount(struct cluster *c, int i, const char *vol, const char *alloc,
		      const char *path)
{
	char *args[] = {"volume", "unmount", (char *)vol, "-alloc", (char *)alloc, NULL};
	struct csictl_run r;

	cluster_csictl(c, i, &r, args);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "unmounted"));
	csictl_runner_free(&c->rn, &r);
	assert_false(agent_proc_is_mount(path));
	assert_int_equal(agent_proc_mount_count(c->a[i]), 0);
}

/* Writes text to dir/name; returns 0 or the errno of the failure. */
static int t_write(const char *dir, const char *name, const char *text)
{
	char path[T_PATH_MAX + 64];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return errno;
	if (write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		rc = errno ? errno : EIO;
	if (close(fd) != 0 && rc == 0)
		rc = errno;
	return rc;
}

/* Fails the test unless dir/name holds text. */
static void t_expect_file(const char *dir, const char *name, const char *text)
{
	char path[T_PATH_MAX + 64], buf[256] = "";
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(buf, sizeof(buf), f));
	fclose(f);
	assert_string_equal(buf, text);
}

/* The element of list whose field key is value (NULL when none). */
static json_t *t_find(json_t *list, const char *key, const char *value)
{
	json_t *el;
	size_t i;

	json_array_foreach(list, i, el)
	{
		const char *got = json_string_value(json_object_get(el, key));

		if (got && strcmp(got, value) == 0)
			return el;
	}
	return NULL;
}

/* The claim of alloc in volume doc v (NULL when none). */
static json_t *t_claim(json_t *v, const char *alloc)
{
	return t_find(json_object_get(v, "claims"), "alloc_id", alloc);
}

/* The publication of doc v to node (NULL when none). */
static json_t *t_pub(json_t *v, const char *node)
{
	return t_find(json_object_get(v, "publications"), "node_id", node);
}

/* The server holds alloc's claim on node in mode, and the volume is published there. */
/*
 * Volume id once each of its publications is published: a mount's is
 * recorded just after the claim's answer (docs/server-api.md).
 */
static json_t *t_volume_published(struct cluster *c, const char *id)
{
	char path[256];

	snprintf(path, sizeof(path), "/v1/volume/%s", id);
	assert_true(
	    server_proc_wait_doc(&c->s, path, server_proc_volume_all_published, CLUSTER_WAIT_MS));
	return cluster_volume(c, id);
}

static void t_expect_claim(json_t *v, const char *alloc, const char *node, const char *mode,
			   bool read_only)
{
	json_t *cl = t_claim(v, alloc), *pub = t_pub(v, node);

	assert_non_null(cl);
	assert_string_equal(json_string_value(json_object_get(cl, "node_id")), node);
	assert_string_equal(json_string_value(json_object_get(cl, "mode")), mode);
	assert_string_equal(json_string_value(json_object_get(cl, "state")), "claimed");
	assert_non_null(pub);
	assert_string_equal(json_string_value(json_object_get(pub, "state")), "published");
	assert_true(json_is_boolean(json_object_get(pub, "read_only")));
	assert_int_equal(json_is_true(json_object_get(pub, "read_only")), read_only);
}

static void test_single_writer_moves_between_nodes(void **state)
{
	struct cluster *c = *state;
	char p1[T_PATH_MAX], p2[T_PATH_MAX];
	char *second[] = {"volume", "mount", "solo", "-alloc", "web-2", NULL};
	char *del[] = {"volume", "delete", "solo", "-wait", NULL};
	struct csictl_run r;
	json_t *v, *past;

	cluster_create_volume(c, "solo", "single-node-writer");
	t_mount(c, 0, "solo", "web-1", false, p1);
	assert_int_equal(t_write(p1, "from-node-1", "written on node-1\n"), 0);

	/* node-2 is refused while node-1 holds it, and the error names the holder. */
	cluster_csictl(c, 1, &r, second);
	csictl_expect_fail(&r, 1, "held on another node by alloc web-1");
	assert_non_null(strstr(r.err, "node-1"));
	csictl_runner_free(&c->rn, &r);
	assert_int_equal(agent_proc_mount_count(c->a[1]), 0);
	assert_int_equal(agent_proc_mounts_under(c->a[1]->dir), 0);
	v = t_volume_published(c, "solo");
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 1);
	t_expect_claim(v, "web-1", "node-1", "write", false);
	assert_null(t_pub(v, "node-2"));
	json_decref(v);

	/*
	 * Once node-1 let go, node-2 mounts it, and sees what node-1 wrote. The
	 * controller unpublish is slowed (on both plugins: the server may
	 * drive either) so that node-2 asks while web-1 is still being
	 * released: the claim waits for it instead of failing.
	 */
	assert_int_equal(agent_proc_write_faults(c->a[0], T_SLOW_UNPUBLISH), 0);
	assert_int_equal(agent_proc_write_faults(c->a[1], T_SLOW_UNPUBLISH), 0);
	t_unmount(c, 0, "solo", "web-1", p1);
	v = cluster_volume(c, "solo");
	assert_non_null(t_claim(v, "web-1"));
	assert_string_not_equal(json_string_value(json_object_get(t_claim(v, "web-1"), "state")),
				"claimed");
	json_decref(v);
	t_mount(c, 1, "solo", "web-2", false, p2);
	t_expect_file(p2, "from-node-1", "written on node-1\n");
	assert_int_equal(t_write(p2, "from-node-2", "written on node-2\n"), 0);
	v = t_volume_published(c, "solo");
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 1);
	t_expect_claim(v, "web-2", "node-2", "write", false);
	assert_null(t_pub(v, "node-1"));
	past = t_find(json_object_get(v, "past_claims"), "alloc_id", "web-1");
	assert_non_null(past);
	assert_string_equal(json_string_value(json_object_get(past, "state")), "freed");
	json_decref(v);

	/*
	 * Unmount and delete at once, as the README's tour does, while the
	 * unpublish is still slow: the delete lets the release finish first.
	 */
	t_unmount(c, 1, "solo", "web-2", p2);
	cluster_csictl(c, 1, &r, del);
	csictl_expect_ok(&r);
	assert_non_null(strstr(r.out, "deleted"));
	csictl_runner_free(&c->rn, &r);
	assert_int_equal(server_proc_http(&c->s, "GET", "/v1/volume/solo", NULL, NULL), 404);
	assert_int_equal(agent_proc_mounts_under(c->a[0]->data_dir), 0);
	assert_int_equal(agent_proc_mounts_under(c->a[1]->data_dir), 0);
}

static void test_readers_on_both_nodes(void **state)
{
	struct cluster *c = *state;
	char p1[T_PATH_MAX], p2[T_PATH_MAX], vol_dir[AGENT_PROC_PATH + 96];
	char *writer[] = {"volume", "mount", "shared", "-alloc", "w-1", NULL};
	const char *const allocs[] = {"r-1", "r-2", NULL};
	struct csictl_run r;
	json_t *v;

	cluster_create_volume(c, "shared", "multi-node-reader-only");
	/* Content for the readers, put in the shared backing directory. */
	v = cluster_volume(c, "shared");
	snprintf(vol_dir, sizeof(vol_dir), "%s/volumes/%s", c->a[0]->hp_dir,
		 json_string_value(json_object_get(v, "external_id")));
	json_decref(v);
	assert_int_equal(t_write(vol_dir, "seed", "for every reader\n"), 0);

	/* A write claim on a reader-only volume is refused, and mounts nothing. */
	cluster_csictl(c, 0, &r, writer);
	csictl_expect_fail(&r, 1, "a write claim is refused");
	csictl_runner_free(&c->rn, &r);
	assert_int_equal(agent_proc_mount_count(c->a[0]), 0);

	t_mount(c, 0, "shared", "r-1", true, p1);
	t_mount(c, 1, "shared", "r-2", true, p2);
	assert_true(agent_proc_is_mount(p1));
	v = t_volume_published(c, "shared");
	assert_int_equal(json_array_size(json_object_get(v, "claims")), 2);
	t_expect_claim(v, "r-1", "node-1", "read", true);
	t_expect_claim(v, "r-2", "node-2", "read", true);
	json_decref(v);
	t_expect_file(p1, "seed", "for every reader\n");
	t_expect_file(p2, "seed", "for every reader\n");
	assert_int_equal(t_write(p1, "nope", "x"), EROFS);
	assert_int_equal(t_write(p2, "nope", "x"), EROFS);
	assert_int_equal(t_write(p1, "seed", "x"), EROFS);

	t_unmount(c, 0, "shared", "r-1", p1);
	/* node-2 still reads while node-1 is gone. */
	t_expect_file(p2, "seed", "for every reader\n");
	t_unmount(c, 1, "shared", "r-2", p2);
	assert_true(cluster_wait_freed(c, "shared", allocs));
	assert_int_equal(agent_proc_mounts_under(c->a[0]->data_dir), 0);
	assert_int_equal(agent_proc_mounts_under(c->a[1]->data_dir), 0);
	t_expect_file(vol_dir, "seed", "for every reader\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_single_writer_moves_between_nodes, cluster_setup2,
					    cluster_teardown),
	    cmocka_unit_test_setup_teardown(test_readers_on_both_nodes, cluster_setup2,
					    cluster_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
