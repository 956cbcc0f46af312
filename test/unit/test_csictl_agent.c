/*
 * Unit tests of `csictl agent` without an agent: address parsing, path
 * escaping, the mount request body built from flags, rendering of canned
 * answers, and API error messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "csictl_agent.h"

/* Output captured from a renderer. */
struct capture {
	char *buf;
	size_t len;
	FILE *f;
};

static void capture_open(struct capture *c)
{
	c->buf = NULL;
	c->len = 0;
	c->f = open_memstream(&c->buf, &c->len);
	assert_non_null(c->f);
}

static const char *capture_close(struct capture *c)
{
	fclose(c->f);
	c->f = NULL;
	return c->buf;
}

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *j = json_loads(text, 0, &je);

	assert_non_null(j);
	return j;
}

static void test_addr(void **state)
{
	struct csictl_http_addr a;
	struct err e;
	char longpath[200];

	assert_int_equal(csictl_http_addr_parse("agent", "unix:/var/lib/csid/agent.sock", &a, &e),
			 0);
	assert_string_equal(a.socket, "/var/lib/csid/agent.sock");
	assert_string_equal(a.base, "http://localhost");
	assert_int_equal(csictl_http_addr_parse("agent", "unix:///run/a.sock", &a, &e), 0);
	assert_string_equal(a.socket, "/run/a.sock");
	assert_int_equal(csictl_http_addr_parse("agent", "/run/b.sock", &a, &e), 0);
	assert_string_equal(a.socket, "/run/b.sock");
	assert_int_equal(csictl_http_addr_parse("agent", "http://127.0.0.1:4646/", &a, &e), 0);
	assert_string_equal(a.socket, "");
	assert_string_equal(a.base, "http://127.0.0.1:4646");
	assert_int_equal(csictl_http_addr_parse("agent", "node1:4646", &a, &e), 0);
	assert_string_equal(a.base, "http://node1:4646");

	assert_int_equal(csictl_http_addr_parse("agent", "unix:relative.sock", &a, &e),
			 CSID_EINVAL);
	assert_non_null(strstr(e.msg, "absolute"));
	assert_int_equal(csictl_http_addr_parse("agent", "", &a, &e), CSID_EINVAL);
	assert_int_equal(csictl_http_addr_parse("agent", "ftp://x", &a, &e), CSID_EINVAL);
	memset(longpath, 'a', sizeof(longpath) - 1);
	longpath[0] = '/';
	longpath[sizeof(longpath) - 1] = '\0';
	assert_int_equal(csictl_http_addr_parse("agent", longpath, &a, &e), CSID_EINVAL);
}

static void test_escape(void **state)
{
	char buf[64];

	assert_int_equal(csictl_http_escape("vol-1_a.b~c", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "vol-1_a.b~c");
	assert_int_equal(csictl_http_escape("../etc/passwd", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "..%2Fetc%2Fpasswd");
	assert_int_equal(csictl_http_escape("a b?#%", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "a%20b%3F%23%25");
	assert_int_equal(csictl_http_escape("\xff", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "%FF");
	assert_int_equal(csictl_http_escape("abcdef", buf, 6), CSID_ETOOBIG);
	assert_int_equal(csictl_http_escape("abcde/", buf, 8), CSID_ETOOBIG);
	assert_int_equal(csictl_http_escape("abcde", buf, 6), 0);
}

/* Fills the map flags of o the way the command line does. */
static void opts_with_kv(struct csictl_agent_opts *o)
{
	const struct csictl_flag flags[] = {
	    {"context", CSICTL_FLAG_KV, &o->context, "K=V", "volume context"},
	    {"secret", CSICTL_FLAG_KV, &o->secrets, "K=V", "secret"},
	    {"publish-context", CSICTL_FLAG_KV, &o->publish_context, "K=V", "publish context"},
	};
	char *argv[] = {"-context", "k1=v1", "-secret=token=s3cr3t", "--publish-context", "pc=x=y"};
	struct csictl_args pos;
	struct err e;

	memset(o, 0, sizeof(*o));
	o->plugin = "hostpath.csi.csid.dev";
	assert_int_equal(csictl_flags_parse(flags, 3, 5, argv, &pos, &e), 0);
	assert_int_equal(pos.n, 0);
}

static void opts_free(struct csictl_agent_opts *o)
{
	csictl_kv_free(&o->context);
	csictl_kv_free(&o->secrets);
	csictl_kv_free(&o->publish_context);
}

static void test_mount_body(void **state)
{
	struct csictl_agent_opts o;
	json_t *j;
	struct err e;

	opts_with_kv(&o);
	o.readonly = true;
	o.access_mode = "MULTI_NODE_READER_ONLY";
	o.fs_type = "ext4";
	o.mount_flags.items[0] = "noatime";
	o.mount_flags.items[1] = "nodev";
	o.mount_flags.n = 2;
	assert_int_equal(csictl_agent_mount_body(&o, "vol-1", "alloc-9", &j, &e), 0);
	assert_string_equal(json_string_value(json_object_get(j, "volume_id")), "vol-1");
	/* Without -external-id the plugin's ID is the volume ID. */
	assert_string_equal(json_string_value(json_object_get(j, "external_id")), "vol-1");
	assert_string_equal(json_string_value(json_object_get(j, "plugin_id")),
			    "hostpath.csi.csid.dev");
	assert_string_equal(json_string_value(json_object_get(j, "alloc_id")), "alloc-9");
	assert_true(json_is_true(json_object_get(j, "read_only")));
	assert_string_equal(json_string_value(json_object_get(j, "attachment_mode")),
			    "file-system");
	assert_string_equal(json_string_value(json_object_get(j, "access_mode")),
			    "multi-node-reader-only");
	assert_string_equal(json_string_value(json_object_get(j, "fs_type")), "ext4");
	assert_int_equal(json_array_size(json_object_get(j, "mount_flags")), 2);
	assert_string_equal(json_string_value(json_array_get(json_object_get(j, "mount_flags"), 1)),
			    "nodev");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "volume_context"), "k1")), "v1");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "publish_context"), "pc")), "x=y");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(j, "secrets"), "token")), "s3cr3t");
	json_decref(j);

	/* Defaults, block devices, external IDs. */
	o.readonly = false;
	o.access_mode = NULL;
	o.fs_type = NULL;
	o.mount_flags.n = 0;
	o.block = true;
	o.external_id = "ext-77";
	assert_int_equal(csictl_agent_mount_body(&o, "vol-1", "a", &j, &e), 0);
	assert_string_equal(json_string_value(json_object_get(j, "attachment_mode")),
			    "block-device");
	assert_string_equal(json_string_value(json_object_get(j, "access_mode")),
			    "single-node-writer");
	assert_string_equal(json_string_value(json_object_get(j, "external_id")), "ext-77");
	assert_true(json_is_false(json_object_get(j, "read_only")));
	json_decref(j);
	opts_free(&o);
}

static void test_mount_body_errors(void **state)
{
	struct csictl_agent_opts o;
	json_t *j = NULL;
	struct err e;

	memset(&o, 0, sizeof(o));
	assert_int_equal(csictl_agent_mount_body(&o, "v", "a", &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "-plugin"));
	assert_null(j);
	o.plugin = "p";
	o.access_mode = "single-node-sometimes";
	assert_int_equal(csictl_agent_mount_body(&o, "v", "a", &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "single-node-sometimes"));
	o.access_mode = NULL;
	o.attachment_mode = "floppy";
	assert_int_equal(csictl_agent_mount_body(&o, "v", "a", &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "floppy"));
	o.attachment_mode = "file-system";
	o.block = true;
	assert_int_equal(csictl_agent_mount_body(&o, "v", "a", &j, &e), CSID_EINVAL);
	o.attachment_mode = NULL;
	o.fs_type = "xfs";
	assert_int_equal(csictl_agent_mount_body(&o, "v", "a", &j, &e), CSID_EINVAL);
	o.block = false;
	assert_int_equal(csictl_agent_mount_body(&o, "", "a", &j, &e), CSID_EINVAL);
	assert_int_equal(csictl_agent_mount_body(&o, "v", "", &j, &e), CSID_EINVAL);
	/* Non-UTF-8 bytes are repaired, not rejected by jansson. */
	assert_int_equal(csictl_agent_mount_body(&o, "v\xff", "a", &j, &e), 0);
	assert_string_equal(json_string_value(json_object_get(j, "volume_id")), "v\xef\xbf\xbd");
	json_decref(j);
}

static void test_render_plugins(void **state)
{
	struct capture c;
	struct err e;
	json_t *j;
	const char *out;

	/* The shape src/api/agent_api_plugins.c answers with. */
	j = parse(
	    "{\"plugins\": ["
	    " {\"id\": \"hostpath.csi.csid.dev\", \"type\": \"node\","
	    "  \"active_instance\": \"inst-2\", \"state\": \"healthy\","
	    "  \"health\": {\"healthy\": true, \"description\": \"probe ok\","
	    "  \"changed_ms\": 5},"
	    "  \"instances\": [{\"instance_id\": \"inst-1\"}, {\"instance_id\": \"inst-2\"}]},"
	    " {\"id\": \"ebs\", \"type\": \"controller\", \"active\": \"i-9\","
	    "  \"healthy\": false, \"instances\": 1}]}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_plugins(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_non_null(strstr(out, "PLUGIN"));
	assert_non_null(strstr(out, "hostpath.csi.csid.dev  node"));
	assert_non_null(strstr(out, "inst-2"));
	assert_non_null(strstr(out, "probe ok"));
	assert_non_null(strstr(out, "ebs"));
	assert_non_null(strstr(out, "i-9"));
	/* Three lines: the header and two plugins. */
	assert_int_equal(out[strlen(out) - 1], '\n');
	{
		int lines = 0;

		for (const char *p = out; *p; p++)
			lines += *p == '\n';
		assert_int_equal(lines, 3);
	}
	free(c.buf);
	json_decref(j);

	/* A bare array works too; a wrong shape is a clear error. */
	j = parse("[{\"id\": \"x\", \"type\": \"monolith\"}]");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_plugins(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_non_null(strstr(out, "monolith"));
	free(c.buf);
	json_decref(j);
	j = parse("{\"plugins\": 3}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_plugins(j, c.f, &e), CSID_EPROTO);
	assert_non_null(strstr(e.msg, "plugins"));
	capture_close(&c);
	free(c.buf);
	json_decref(j);
}

static void test_render_mounts(void **state)
{
	struct capture c;
	struct err e;
	json_t *j;
	const char *out;

	j = parse("{\"mounts\": [{\"volume_id\": \"vol-1\", \"alloc_id\": \"a1\","
		  " \"plugin_id\": \"hp\", \"read_only\": false, \"attachment_mode\": "
		  "\"file-system\", \"access_mode\": \"single-node-writer\", \"state\": "
		  "\"published\", \"target_path\": \"/d/mounts/per-alloc/a1/vol-1/x\", "
		  "\"external_id\": \"ext-77\", \"volume_context\": {\"z\": \"1\", \"a\": "
		  "\"2\"}},"
		  " {\"volume_id\": \"evil\\u001b[2J\", \"alloc_id\": \"a2\", \"usage\": "
		  "\"ro-block-device-multi-node-reader-only\"}]}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_mounts(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_non_null(strstr(out, "rw-file-system-single-node-writer"));
	assert_non_null(strstr(out, "ro-block-device-multi-node-reader-only"));
	assert_non_null(strstr(out, "/d/mounts/per-alloc/a1/vol-1/x"));
	assert_non_null(strstr(out, "published"));
	assert_non_null(strstr(out, "EXTERNAL-ID"));
	assert_non_null(strstr(out, "ext-77"));
	assert_non_null(strstr(out, "a=2,z=1"));
	/* A terminal escape from the agent never reaches the terminal. */
	assert_null(strchr(out, '\x1b'));
	assert_non_null(strstr(out, "evil?[2J"));
	free(c.buf);
	json_decref(j);
}

static void test_render_mount(void **state)
{
	struct capture c;
	struct err e;
	json_t *j;
	const char *out;

	j = parse("{\"source\": \"/s\", \"target\": \"/t\", \"is_device\": true}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_mount(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_non_null(strstr(out, "source:  /s"));
	assert_non_null(strstr(out, "target:  /t"));
	assert_non_null(strstr(out, "device:  yes"));
	free(c.buf);
	json_decref(j);
	j = parse("[1]");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_mount(j, c.f, &e), CSID_EPROTO);
	capture_close(&c);
	free(c.buf);
	json_decref(j);
}

static void test_render_object(void **state)
{
	struct capture c;
	struct err e;
	json_t *j;
	const char *out;

	/* The shape of GET /v1/agent/self. */
	j = parse("{\"node_name\": \"n1\", \"version\": \"0.1\", \"listener\": {\"socket\": "
		  "\"/d/agent.sock\", \"addr\": null}, \"uptime_ms\": 42, \"ok\": true, "
		  "\"list\": [1, 2]}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_object(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_non_null(strstr(out, "node_name:        n1\n"));
	assert_non_null(strstr(out, "listener.socket:  /d/agent.sock\n"));
	assert_non_null(strstr(out, "listener.addr:    \n"));
	assert_non_null(strstr(out, "uptime_ms:        42\n"));
	assert_non_null(strstr(out, "ok:               yes\n"));
	assert_non_null(strstr(out, "list:             [2 items]\n"));
	free(c.buf);
	json_decref(j);
	j = parse("[]");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_object(j, c.f, &e), CSID_EPROTO);
	capture_close(&c);
	free(c.buf);
	json_decref(j);
}

static void test_error_text(void **state)
{
	char buf[256];
	const char *b1 =
	    "{\"error\": \"plugin hostpath is not healthy\", \"code\": \"unavailable\"}";
	const char *b2 = "<html>bad gateway</html>\n";
	const char *b3 = "{\"error\": \"line\\nbreak\"}";

	assert_string_equal(csictl_http_error_text(503, b1, strlen(b1), buf, sizeof(buf)),
			    "unavailable: plugin hostpath is not healthy");
	assert_string_equal(csictl_http_error_text(502, b2, strlen(b2), buf, sizeof(buf)),
			    "HTTP 502: <html>bad gateway</html>");
	assert_string_equal(csictl_http_error_text(500, NULL, 0, buf, sizeof(buf)), "HTTP 500");
	assert_string_equal(csictl_http_error_text(400, b3, strlen(b3), buf, sizeof(buf)),
			    "line?break");
	/* A long body is cut, never overflows. */
	{
		char big[4096];

		memset(big, 'x', sizeof(big));
		csictl_http_error_text(500, big, sizeof(big), buf, sizeof(buf));
		assert_true(strlen(buf) < sizeof(buf));
	}
}

static void test_render_unmount(void **state)
{
	struct capture c;
	struct err e;
	json_t *j;
	const char *out;

	j = parse("{\"volume_id\": \"v1\", \"alloc_id\": \"a1\", \"unmounted\": true}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_unmount(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_string_equal(out, "volume v1 unmounted for allocation a1\n");
	free(c.buf);
	json_decref(j);
	j = parse("{\"volume_id\": \"v1\", \"alloc_id\": \"a1\", \"unmounted\": true, "
		  "\"forced\": true, \"skipped\": [\"node unstage: plugin p: INVALID_ARGUMENT: "
		  "no\", 7], \"detached\": [{\"path\": \"/t\", \"lazy\": true}, {\"path\": "
		  "\"/s\", \"lazy\": false}], \"kept\": [\"staging path /s2: in use\"]}");
	capture_open(&c);
	assert_int_equal(csictl_agent_render_unmount(j, c.f, &e), 0);
	out = capture_close(&c);
	assert_non_null(strstr(out, "volume v1 unmounted for allocation a1 (forced)\n"));
	assert_non_null(strstr(out, "skipped:"));
	assert_non_null(strstr(out, "INVALID_ARGUMENT: no"));
	assert_non_null(strstr(out, "/t (lazily: it was busy)"));
	assert_non_null(strstr(out, "/s\n"));
	assert_non_null(strstr(out, "left in place:"));
	assert_non_null(strstr(out, "staging path /s2: in use"));
	free(c.buf);
	json_decref(j);
	assert_int_equal(csictl_agent_render_unmount(NULL, stdout, &e), CSID_EPROTO);
}

static void test_connect_error(void **state)
{
	char buf[512];

	assert_string_equal(csictl_http_connect_error("agent",
						      "start csid agent or set CSID_AGENT_ADDR", 7,
						      "/run/a.sock", "x", buf, sizeof(buf)),
			    "no agent listening at /run/a.sock: start csid agent or set "
			    "CSID_AGENT_ADDR");
	assert_string_equal(
	    csictl_http_connect_error("agent", "start csid agent or set CSID_AGENT_ADDR", 28,
				      "http://h:1", "Timeout was reached", buf, sizeof(buf)),
	    "agent at http://h:1: Timeout was reached");
}

/* csictl_agent_context_parse of a C string. */
static int ctx_parse(const char *text, json_t **out, struct err *e)
{
	return csictl_agent_context_parse(text, strlen(text), out, e);
}

static void test_context_file(void **state)
{
	struct csictl_agent_opts o;
	json_t *j = NULL, *ctx;
	struct err e;
	static const char create_volume_out[] =
	    "{\"volume\": {\"capacity_bytes\": 1073741824, \"volume_id\": \"vol-12\", "
	    "\"volume_context\": {\"k1\": \"file\", \"k2\": \"file\"}, "
	    "\"accessible_topology\": [{\"segments\": {\"t\": \"n1\"}}]}}";

	/* The output of csictl csi create-volume -o json works as is. */
	assert_int_equal(
	    csictl_agent_context_parse(create_volume_out, strlen(create_volume_out), &j, &e), 0);
	assert_string_equal(json_string_value(json_object_get(j, "k2")), "file");
	opts_with_kv(&o);
	o.context_doc = j;
	assert_int_equal(csictl_agent_mount_body(&o, "v", "a", &ctx, &e), 0);
	/* -context k1=v1 wins over the file. */
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(ctx, "volume_context"), "k1")), "v1");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(ctx, "volume_context"), "k2")),
	    "file");
	json_decref(ctx);
	opts_free(&o);
	json_decref(j);

	assert_int_equal(ctx_parse("{\"a\": \"b\"}", &j, &e), 0);
	assert_int_equal(json_object_size(j), 1);
	json_decref(j);
	assert_int_equal(ctx_parse("{\"volume_context\": {\"a\": \"b\"}}", &j, &e), 0);
	assert_string_equal(json_string_value(json_object_get(j, "a")), "b");
	json_decref(j);
	assert_int_equal(ctx_parse("{\"volume\": {}}", &j, &e), 0);
	assert_int_equal(json_object_size(j), 0);
	json_decref(j);
	assert_int_equal(ctx_parse("[1]", &j, &e), CSID_EINVAL);
	assert_null(j);
	assert_int_equal(ctx_parse("{\"a\": 1}", &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "\"a\" is not a string"));
	assert_int_equal(ctx_parse("{\"volume_context\": 1}", &j, &e), CSID_EINVAL);
	assert_int_equal(ctx_parse("{\"a\": \"b\"", &j, &e), CSID_EINVAL);
}

/* The owner flags of `csictl volume mount`: one of three, checked before any request. */
static void test_owner_json(void **state)
{
	struct csictl_agent_opts o;
	json_t *j = NULL;
	int64_t ms = 0;
	struct err e;

	(void)state;
	memset(&o, 0, sizeof(o));
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), 0);
	assert_null(j);
	o.owner_pid = "1234";
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "pid")), 1234);
	json_decref(j);
	o.lease = "30s";
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "exclude each other"));
	assert_null(j);
	o.owner_pid = NULL;
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), 0);
	assert_int_equal(json_integer_value(json_object_get(j, "lease_ms")), 30000);
	json_decref(j);
	o.lease = NULL;
	o.owner_cgroup = "/sys/fs/cgroup/unified/job";
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), 0);
	assert_string_equal(json_string_value(json_object_get(j, "cgroup")),
			    "/sys/fs/cgroup/unified/job");
	json_decref(j);
	o.owner_cgroup = "job";
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "absolute"));
	o.owner_cgroup = NULL;
	o.owner_pid = "12ab";
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "process ID"));
	o.owner_pid = "0";
	assert_int_equal(csictl_agent_owner_json(&o, &j, &e), CSID_EINVAL);
	/* Leases: 1s to 24h, with the range in the message. */
	assert_int_equal(csictl_agent_lease_parse("1s", &ms, &e), 0);
	assert_int_equal(ms, 1000);
	assert_int_equal(csictl_agent_lease_parse("24h", &ms, &e), 0);
	assert_int_equal(ms, 24LL * 3600 * 1000);
	assert_int_equal(csictl_agent_lease_parse("0", &ms, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "from 1s to 24h"));
	assert_int_equal(csictl_agent_lease_parse("87600h", &ms, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "from 1s to 24h"));
	assert_int_equal(csictl_agent_lease_parse("999ms", &ms, &e), CSID_EINVAL);
	assert_non_null(strstr(e.msg, "from 1s to 24h"));
	assert_int_equal(csictl_agent_lease_parse("-5s", &ms, &e), CSID_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_addr),           cmocka_unit_test(test_escape),
	    cmocka_unit_test(test_mount_body),     cmocka_unit_test(test_mount_body_errors),
	    cmocka_unit_test(test_render_plugins), cmocka_unit_test(test_render_mounts),
	    cmocka_unit_test(test_render_mount),   cmocka_unit_test(test_error_text),
	    cmocka_unit_test(test_render_object),  cmocka_unit_test(test_render_unmount),
	    cmocka_unit_test(test_connect_error),  cmocka_unit_test(test_context_file),
	    cmocka_unit_test(test_owner_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
