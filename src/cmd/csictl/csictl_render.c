/*
 * Tables of the server's objects for csictl: volumes, snapshots, plugins,
 * nodes and events, from the API's JSON (model.h's shapes). Every string
 * goes through the table, which cleans it for a terminal; a missing field
 * prints as "-", so an older or newer server still renders.
 */
#include "csictl_server.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csictl_csi.h"
#include "csictl_out.h"

static const char *rd_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && *s ? s : "-";
}

static const char *rd_int(const json_t *o, const char *key, char *buf, size_t len)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v))
		return "-";
	snprintf(buf, len, "%" PRId64, (int64_t)json_integer_value(v));
	return buf;
}

static const char *rd_bool(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);

	return json_is_boolean(v) ? (json_is_true(v) ? "yes" : "no") : "-";
}

static const char *rd_size(const json_t *o, const char *key, char *buf, size_t len)
{
	const json_t *v = json_object_get(o, key);

	if (!json_is_integer(v) || json_integer_value(v) <= 0)
		return "-";
	return csictl_size_format(json_integer_value(v), buf, len);
}

/* A wall-clock time in ms as "2026-11-24T12:00:00Z". */
static const char *rd_time(const json_t *o, const char *key, char *buf, size_t len)
{
	const json_t *v = json_object_get(o, key);
	time_t t;
	struct tm tm;

	if (!json_is_integer(v) || json_integer_value(v) <= 0)
		return "-";
	t = (time_t)(json_integer_value(v) / 1000);
	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
	return buf;
}

/* "rw single-node-writer file-system" of a capability object. */
static const char *rd_cap(const json_t *c, char *buf, size_t len)
{
	snprintf(buf, len, "%s/%s", rd_str(c, "access_mode"), rd_str(c, "attachment_mode"));
	return buf;
}

/* Joins an object of strings as k=v,k=v. */
static const char *rd_map(const json_t *m, char *buf, size_t len)
{
	const char *k;
	json_t *v;
	size_t o = 0;

	buf[0] = '\0';
	json_object_foreach((json_t *)m, k, v)
	{
		int n = snprintf(buf + o, len - o, "%s%s=%s", o ? "," : "", k,
				 json_string_value(v) ? json_string_value(v) : "");

		if (n < 0 || (size_t)n >= len - o)
			break;
		o += (size_t)n;
	}
	return buf[0] ? buf : "-";
}

static void rd_kv(struct csictl_table *t, const char *k, const char *v)
{
	csictl_table_addv(t, k, v && *v ? v : "-");
}

int csictl_render_volumes(const json_t *j, FILE *out)
{
	static const char *const hdr[] = {"ID",     "PLUGIN", "STATE",     "CAPACITY",
					  "CLAIMS", "SCHED.", "LAST ERROR"};
	struct csictl_table *t = csictl_table_new(7, hdr);
	const json_t *vols = json_object_get(j, "volumes"), *v;
	size_t i;

	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach((json_t *)vols, i, v)
	{
		char cap[32], claims[32];
		const json_t *st = json_object_get(v, "status");

		snprintf(claims, sizeof(claims), "%zu",
			 json_array_size(json_object_get(v, "claims")));
		csictl_table_addv(t, rd_str(v, "id"), rd_str(v, "plugin_id"), rd_str(v, "state"),
				  rd_size(v, "capacity", cap, sizeof(cap)), claims,
				  rd_bool(v, "schedulable"),
				  json_object_get(st, "last_error") ? rd_str(st, "last_error")
								    : rd_str(v, "failure"));
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	if (json_string_value(json_object_get(j, "next_token")))
		fprintf(out, "(more: -next-token %s)\n",
			json_string_value(json_object_get(j, "next_token")));
	return 0;
}

static void rd_claims(const json_t *list, const char *title, FILE *out)
{
	static const char *const hdr[] = {"ALLOC", "NODE", "MODE", "ACCESS", "STATE", "NOTE"};
	struct csictl_table *t;
	const json_t *c;
	size_t i;

	if (!json_array_size(list))
		return;
	t = csictl_table_new(6, hdr);
	if (!t)
		return;
	json_array_foreach((json_t *)list, i, c)
	{
		char cap[160];

		csictl_table_addv(t, rd_str(c, "alloc_id"), rd_str(c, "node_id"), rd_str(c, "mode"),
				  rd_cap(c, cap, sizeof(cap)), rd_str(c, "state"),
				  rd_str(c, "note"));
	}
	fprintf(out, "\n%s\n", title);
	csictl_table_print(t, out);
	csictl_table_free(t);
}

static void rd_pubs(const json_t *list, FILE *out)
{
	static const char *const hdr[] = {"NODE", "PLUGIN NODE ID", "STATE", "READ-ONLY"};
	struct csictl_table *t;
	const json_t *p;
	size_t i;

	if (!json_array_size(list))
		return;
	t = csictl_table_new(4, hdr);
	if (!t)
		return;
	json_array_foreach((json_t *)list, i, p)
	    csictl_table_addv(t, rd_str(p, "node_id"), rd_str(p, "plugin_node_id"),
			      rd_str(p, "state"), rd_bool(p, "read_only"));
	fprintf(out, "\nPublications\n");
	csictl_table_print(t, out);
	csictl_table_free(t);
}

int csictl_render_volume(const json_t *j, FILE *out)
{
	const json_t *v = json_object_get(j, "volume") ? json_object_get(j, "volume") : j;
	const json_t *st = json_object_get(v, "status"), *c;
	struct csictl_table *t = csictl_table_new(2, NULL);
	char a[64], b[64], caps[512] = "", buf[1024];
	size_t i, o = 0;

	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(v, "capabilities"), i, c)
	{
		char one[160];
		int n = snprintf(caps + o, sizeof(caps) - o, "%s%s", o ? ", " : "",
				 rd_cap(c, one, sizeof(one)));

		if (n < 0 || (size_t)n >= sizeof(caps) - o)
			break;
		o += (size_t)n;
	}
	rd_kv(t, "id:", rd_str(v, "id"));
	rd_kv(t, "name:", rd_str(v, "name"));
	rd_kv(t, "plugin:", rd_str(v, "plugin_id"));
	rd_kv(t, "external id:", rd_str(v, "external_id"));
	rd_kv(t, "state:", rd_str(v, "state"));
	if (json_object_get(v, "failure"))
		rd_kv(t, "failed because:", rd_str(v, "failure"));
	rd_kv(t, "capacity:", rd_size(v, "capacity", a, sizeof(a)));
	rd_kv(t, "capabilities:", caps);
	rd_kv(t, "schedulable:", rd_bool(v, "schedulable"));
	rd_kv(t, "plugin health:", rd_str(v, "plugin_health"));
	rd_kv(t, "context:", rd_map(json_object_get(v, "context"), buf, sizeof(buf)));
	if (json_is_true(json_object_get(v, "node_expansion_required")))
		rd_kv(t, "node expansion:", "required");
	if (json_object_get(st, "last_error")) {
		rd_kv(t, "last error:", rd_str(st, "last_error"));
		rd_kv(t, "attempts:", rd_int(st, "attempts", a, sizeof(a)));
		rd_kv(t, "next attempt:", rd_time(st, "next_attempt_ms", b, sizeof(b)));
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	rd_claims(json_object_get(v, "claims"), "Claims", out);
	rd_pubs(json_object_get(v, "publications"), out);
	rd_claims(json_object_get(v, "past_claims"), "Past claims", out);
	if (json_string_value(json_object_get(j, "skipped")))
		fprintf(out, "\nskipped: %s\n",
			csictl_out_clean(json_string_value(json_object_get(j, "skipped")), buf,
					 sizeof(buf)));
	return 0;
}

int csictl_render_snapshots(const json_t *j, FILE *out)
{
	static const char *const hdr[] = {"ID", "VOLUME", "STATE", "READY", "SIZE", "CREATED"};
	struct csictl_table *t = csictl_table_new(6, hdr);
	const json_t *s;
	size_t i;

	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(j, "snapshots"), i, s)
	{
		char size[32], when[64];

		csictl_table_addv(t, rd_str(s, "id"), rd_str(s, "volume_id"), rd_str(s, "state"),
				  rd_bool(s, "ready_to_use"),
				  rd_size(s, "size_bytes", size, sizeof(size)),
				  rd_time(s, "creation_time_ms", when, sizeof(when)));
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

int csictl_render_snapshot(const json_t *s, FILE *out)
{
	struct csictl_table *t = csictl_table_new(2, NULL);
	const json_t *st = json_object_get(s, "status");
	char a[64], b[64];

	if (!t)
		return CSICTL_EXIT_FAIL;
	rd_kv(t, "id:", rd_str(s, "id"));
	rd_kv(t, "volume:", rd_str(s, "volume_id"));
	rd_kv(t, "plugin:", rd_str(s, "plugin_id"));
	rd_kv(t, "external id:", rd_str(s, "external_id"));
	rd_kv(t, "state:", rd_str(s, "state"));
	if (json_object_get(s, "failure"))
		rd_kv(t, "failed because:", rd_str(s, "failure"));
	rd_kv(t, "ready to use:", rd_bool(s, "ready_to_use"));
	rd_kv(t, "size:", rd_size(s, "size_bytes", a, sizeof(a)));
	rd_kv(t, "created:", rd_time(s, "creation_time_ms", b, sizeof(b)));
	if (json_object_get(st, "last_error"))
		rd_kv(t, "last error:", rd_str(st, "last_error"));
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

static const char *rd_count(const json_t *o, const char *key, char *buf, size_t len)
{
	const json_t *c = json_object_get(o, key);
	char h[24], x[24];

	snprintf(buf, len, "%s/%s", rd_int(c, "healthy", h, sizeof(h)),
		 rd_int(c, "expected", x, sizeof(x)));
	return buf;
}

int csictl_render_plugins(const json_t *j, FILE *out)
{
	static const char *const hdr[] = {"ID", "CONTROLLERS", "NODES", "CONTROLLER REQUIRED",
					  "VERSIONS"};
	struct csictl_table *t = csictl_table_new(5, hdr);
	const json_t *p, *v;
	size_t i, k;

	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(j, "plugins"), i, p)
	{
		char c[48], n[48], vers[256] = "";
		size_t o = 0;

		json_array_foreach(json_object_get(p, "versions"), k, v)
		{
			int w = snprintf(vers + o, sizeof(vers) - o, "%s%s", o ? "," : "",
					 json_string_value(v) ? json_string_value(v) : "");

			if (w < 0 || (size_t)w >= sizeof(vers) - o)
				break;
			o += (size_t)w;
		}
		csictl_table_addv(t, rd_str(p, "id"), rd_count(p, "controllers", c, sizeof(c)),
				  rd_count(p, "nodes", n, sizeof(n)),
				  rd_bool(p, "controller_required"), vers[0] ? vers : "-");
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

int csictl_render_plugin(const json_t *p, FILE *out)
{
	static const char *const hdr[] = {"NODE", "TYPE", "HEALTHY", "VERSION", "HEALTH"};
	json_t *list = json_pack("{s:[O]}", "plugins", p);
	struct csictl_table *t;
	const json_t *x;
	size_t i;

	if (!list)
		return CSICTL_EXIT_FAIL;
	csictl_render_plugins(list, out);
	json_decref(list);
	t = csictl_table_new(5, hdr);
	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(p, "instances"), i, x) csictl_table_addv(
	    t, json_string_value(json_object_get(x, "node_id")) ? rd_str(x, "node_id") : "(server)",
	    rd_str(x, "type"), rd_bool(x, "healthy"), rd_str(x, "version"), rd_str(x, "health"));
	fprintf(out, "\nInstances\n");
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

int csictl_render_nodes(const json_t *j, FILE *out)
{
	static const char *const hdr[] = {"ID", "STATUS", "PLUGINS", "UPDATED"};
	struct csictl_table *t = csictl_table_new(4, hdr);
	const json_t *n, *p;
	size_t i, k;

	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(j, "nodes"), i, n)
	{
		char plugins[512] = "", when[64];
		size_t o = 0;

		json_array_foreach(json_object_get(n, "plugins"), k, p)
		{
			int w = snprintf(
			    plugins + o, sizeof(plugins) - o, "%s%s(%s%s)", o ? "," : "",
			    rd_str(p, "plugin_id"), rd_str(p, "type"),
			    json_is_true(json_object_get(p, "healthy")) ? "" : ",unhealthy");

			if (w < 0 || (size_t)w >= sizeof(plugins) - o)
				break;
			o += (size_t)w;
		}
		csictl_table_addv(t, rd_str(n, "id"), rd_str(n, "status"),
				  plugins[0] ? plugins : "-",
				  rd_time(n, "updated_ms", when, sizeof(when)));
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

int csictl_render_node(const json_t *n, FILE *out)
{
	static const char *const hdr[] = {"PLUGIN", "TYPE",     "HEALTHY", "PLUGIN NODE ID",
					  "MAX",    "TOPOLOGY", "HEALTH"};
	struct csictl_table *t = csictl_table_new(2, NULL), *pt;
	const json_t *p;
	char a[64], b[64];
	size_t i;

	if (!t)
		return CSICTL_EXIT_FAIL;
	rd_kv(t, "id:", rd_str(n, "id"));
	rd_kv(t, "status:", rd_str(n, "status"));
	rd_kv(t, "registered:", rd_time(n, "registered_ms", a, sizeof(a)));
	rd_kv(t, "updated:", rd_time(n, "updated_ms", b, sizeof(b)));
	csictl_table_print(t, out);
	csictl_table_free(t);
	pt = csictl_table_new(7, hdr);
	if (!pt)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(n, "plugins"), i, p)
	{
		char max[32], topo[512];

		csictl_table_addv(pt, rd_str(p, "plugin_id"), rd_str(p, "type"),
				  rd_bool(p, "healthy"), rd_str(p, "plugin_node_id"),
				  rd_int(p, "max_volumes", max, sizeof(max)),
				  rd_map(json_object_get(p, "topology"), topo, sizeof(topo)),
				  rd_str(p, "health"));
	}
	fprintf(out, "\nPlugins\n");
	csictl_table_print(pt, out);
	csictl_table_free(pt);
	return 0;
}

void csictl_render_event(const json_t *ev, FILE *out)
{
	const json_t *o = json_object_get(ev, "object");
	char idx[32], line[1024], clean[1024];
	const char *extra = "";

	if (json_object_get(o, "state"))
		extra = rd_str(o, "state");
	else if (json_object_get(o, "status"))
		extra = rd_str(o, "status");
	snprintf(line, sizeof(line), "%-8s %-9s %-22s %s%s%s",
		 rd_int(ev, "index", idx, sizeof(idx)), rd_str(ev, "topic"), rd_str(ev, "type"),
		 rd_str(ev, "key"), *extra ? " " : "", extra);
	fprintf(out, "%s\n", csictl_out_clean(line, clean, sizeof(clean)));
	fflush(out);
}
