/*
 * `csictl server members`, `csictl server leader` and `csictl server
 * installation`: the servers of an installation (those sharing one etcd
 * store; a server on its own store is its only member), which one leads
 * and since when, and the cluster-wide settings as the installation
 * record has them beside those the answering server runs with.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "csictl_csi.h"
#include "csictl_out.h"
#include "csictl_server.h"
#include "util/conf.h"

/* A wall-clock time in ms as UTC RFC 3339, or "-". */
static const char *members_time(const json_t *o, const char *key, char *buf, size_t len)
{
	json_int_t ms = json_integer_value(json_object_get(o, key));
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (ms <= 0 || !gmtime_r(&t, &tm) || !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		return "-";
	return buf;
}

static const char *members_str(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s && s[0] ? s : "-";
}

static int members_render(const json_t *j, FILE *out)
{
	static const char *const hdr[] = {"ID", "ADDRESS", "LEADER", "STARTED", "NODES HEARD"};
	struct csictl_table *t = csictl_table_new(5, hdr);
	const json_t *m;
	size_t i;

	if (!t)
		return CSICTL_EXIT_FAIL;
	json_array_foreach(json_object_get(j, "members"), i, m)
	{
		char when[64], heard[24];

		snprintf(heard, sizeof(heard), "%lld",
			 (long long)json_integer_value(json_object_get(m, "nodes_heard")));
		csictl_table_addv(t, members_str(m, "id"), members_str(m, "address"),
				  json_is_true(json_object_get(m, "leader")) ? "yes" : "no",
				  members_time(m, "started_ms", when, sizeof(when)), heard);
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	return 0;
}

static int members_render_leader(const json_t *j, FILE *out)
{
	const json_t *l = json_object_get(j, "leader");
	char when[64];

	fprintf(out, "This server   %s%s\n", members_str(j, "server_id"),
		json_is_true(json_object_get(j, "leading")) ? " (leads)" : "");
	if (json_is_string(json_object_get(j, "installation")))
		fprintf(out, "Installation  %s\n", members_str(j, "installation"));
	if (json_is_string(json_object_get(j, "id_conflict")))
		fprintf(out,
			"ID conflict   %s writes this server's member record too (one ID for two "
			"servers)\n",
			members_str(j, "id_conflict"));
	if (!json_is_object(l)) {
		fprintf(out, "Leader        none (an election is under way)\n");
		return 0;
	}
	fprintf(out, "Leader        %s\n", members_str(l, "id"));
	fprintf(out, "Address       %s\n", members_str(l, "address"));
	fprintf(out, "Since         %s\n", members_time(l, "since_ms", when, sizeof(when)));
	fprintf(out, "Term          %lld\n",
		(long long)json_integer_value(json_object_get(l, "term")));
	return 0;
}

static int members_render_installation(const json_t *j, FILE *out)
{
	static const char *const hdr[] = {"SETTING", "INSTALLATION", "THIS SERVER", "RULE"};
	struct csictl_table *t = csictl_table_new(4, hdr);
	const json_t *x;
	bool stale = false;
	char when[64];
	size_t i;

	if (!t)
		return CSICTL_EXIT_FAIL;
	fprintf(out, "Installation  %s\n", members_str(j, "installation"));
	fprintf(out, "Created       %s\n", members_time(j, "created_ms", when, sizeof(when)));
	fprintf(out, "This server   %s\n\n", members_str(j, "server_id"));
	json_array_foreach(json_object_get(j, "settings"), i, x)
	{
		json_int_t have = json_integer_value(json_object_get(x, "installation_ms"));
		json_int_t mine = json_integer_value(json_object_get(x, "server_ms"));
		char a[32], b[40];

		conf_format_duration(have, a, sizeof(a));
		conf_format_duration(mine, b, sizeof(b));
		if (have != mine) {
			stale = true;
			strncat(b, " (old)", sizeof(b) - strlen(b) - 1);
		}
		csictl_table_addv(t, members_str(x, "key"), a, b,
				  json_is_true(json_object_get(x, "must_agree"))
				      ? "every server the same"
				      : "the installation's is used");
	}
	csictl_table_print(t, out);
	csictl_table_free(t);
	if (stale)
		fprintf(out,
			"\nThis server still runs with settings the installation no longer has "
			"(another server was started with -update-settings): restart it with "
			"the new config.\n");
	return 0;
}

int csictl_members_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct csictl_server_opts o;
	struct csictl_server s;
	int ret;

	ret = csictl_server_init_plain(&s, &o, argc, argv, "server", out, err);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (s.args.n == 1 && strcmp(s.args.v[0], "members") == 0)
		return csictl_server_request(&s, "GET", "/v1/status/members", NULL, members_render,
					     NULL);
	if (s.args.n == 1 && strcmp(s.args.v[0], "leader") == 0)
		return csictl_server_request(&s, "GET", "/v1/status/leader", NULL,
					     members_render_leader, NULL);
	if (s.args.n == 1 && strcmp(s.args.v[0], "installation") == 0)
		return csictl_server_request(&s, "GET", "/v1/status/installation", NULL,
					     members_render_installation, NULL);
	return csictl_server_usage(&s, "usage: csictl server members|leader|installation");
}
