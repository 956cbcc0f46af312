/*
 * `csictl volume ...`: the volume catalogue of a csid server.
 *   init                              print a commented example spec
 *   register FILE                     register an existing volume
 *   create FILE [-wait]               create it through its plugin
 *   status [ID]                       list volumes, or show one
 *   delete ID [-wait]                 DeleteVolume, then deregister
 *   deregister ID [-force]            forget it (force: even if claimed)
 *   detach ID NODE                    release every claim of a node
 *   expand ID -size SIZE [-wait]      grow it (wait: print the new capacity)
 *   cancel ID                         drop the pending expand and modify
 *   modify ID K=V...                  change mutable parameters
 *   claim ID -alloc A -node N         claim it (low level)
 *   release ID -alloc A [-force]      release a claim (low level)
 *   mount ID -alloc A [-read-only]    the local agent claims and mounts it
 *     [-owner-pid P | -owner-cgroup C | -lease D]   ... owned by a process,
 *                                     a cgroup or a lease: released when gone
 *   unmount ID -alloc A               the local agent unmounts, then releases
 *   renew ID -alloc A [-lease D]      renew the lease owning a mount
 *   snapshot create|delete|list|status
 * Spec files are JSON with "#" or "//" comment lines; they are checked
 * here with the model's decoder before anything is sent, so a mistake is
 * reported with its JSON path without a round trip.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csictl_agent.h"
#include "csictl_csi.h"
#include "csictl_out.h"
#include "csictl_server.h"
#include "model/model.h"
#include "util/clock.h"

#define VOLUME_SPEC_MAX (1024 * 1024)
/* How long -wait follows a volume at most. */
#define VOLUME_WAIT_MS (10 * 60 * 1000)

struct volume_opts {
	struct csictl_server_opts c;
	bool wait;
	bool force;
	bool read_only;
	const char *size;
	const char *alloc;
	const char *node;
	const char *mode;
	const char *access_mode;
	const char *attachment_mode;
	const char *plugin;
	const char *prefix;
	const char *per_page;
	const char *next_token;
	const char *name;
	struct csictl_kv params;
	struct csictl_kv secrets;
	const char *secrets_file;
};

static size_t volume_flags(struct volume_opts *o, struct csictl_flag *f)
{
	const struct csictl_flag table[] = {
	    {"wait", CSICTL_FLAG_BOOL, &o->wait, NULL,
	     "create, delete, expand, snapshot create and delete: follow until done or "
	     "failed"},
	    {"force", CSICTL_FLAG_BOOL, &o->force, NULL,
	     "deregister, release: skip what cannot be done, and say what was skipped"},
	    {"size", CSICTL_FLAG_STRING, &o->size, "SIZE", "expand: new minimum (10Gi, 500M)"},
	    {"alloc", CSICTL_FLAG_STRING, &o->alloc, "ID", "claim, release: the allocation"},
	    {"node", CSICTL_FLAG_STRING, &o->node, "ID", "claim: the node; status: filter"},
	    {"read-only", CSICTL_FLAG_BOOL, &o->read_only, NULL, "claim: a read claim"},
	    {"mode", CSICTL_FLAG_STRING, &o->mode, "read|write", "claim: claim mode"},
	    {"access-mode", CSICTL_FLAG_STRING, &o->access_mode, "MODE",
	     "claim: one of the volume's access modes"},
	    {"attachment-mode", CSICTL_FLAG_STRING, &o->attachment_mode, "MODE",
	     "claim: file-system (default) or block-device"},
	    {"plugin", CSICTL_FLAG_STRING, &o->plugin, "ID", "status: only this plugin"},
	    {"prefix", CSICTL_FLAG_STRING, &o->prefix, "P", "status, snapshot list: ID prefix"},
	    {"per-page", CSICTL_FLAG_STRING, &o->per_page, "N", "status: page size (100)"},
	    {"next-token", CSICTL_FLAG_STRING, &o->next_token, "T", "status: next page"},
	    {"name", CSICTL_FLAG_STRING, &o->name, "NAME", "snapshot create: plugin-side name"},
	    {"param", CSICTL_FLAG_KV, &o->params, "K=V", "snapshot create: parameter"},
	    {"secret", CSICTL_FLAG_KV, &o->secrets, "K=V", "snapshot create: secret"},
	    {"secrets-file", CSICTL_FLAG_STRING, &o->secrets_file, "FILE",
	     "snapshot create: secrets from a JSON object of strings"},
	};

	memcpy(f, table, sizeof(table));
	return csictl_server_flags(&o->c, f, sizeof(table) / sizeof(table[0]));
}

/* Reads a spec file, checks it with the model and returns its JSON without comment lines. */
static int volume_read_spec(struct csictl_server *s, const char *file, bool create, char **body,
			    char *id, size_t idlen)
{
	struct model_volume *v = NULL;
	struct arena *a = NULL;
	char *text = NULL;
	size_t len = 0;
	struct err e;
	FILE *f;
	int ret = CSICTL_EXIT_FAIL;

	err_clear(&e);
	f = fopen(file, "rb");
	if (!f)
		return csictl_server_usage(s, "%s: cannot open", file);
	text = malloc(VOLUME_SPEC_MAX + 1);
	if (text)
		len = fread(text, 1, VOLUME_SPEC_MAX + 1, f);
	fclose(f);
	if (!text || len > VOLUME_SPEC_MAX) {
		fprintf(s->err, "error: %s: larger than %d bytes\n", file, VOLUME_SPEC_MAX);
		goto out;
	}
	text[len] = '\0';
	a = arena_new();
	if (!a || model_volume_spec_decode(a, text, len, true, &v, &e) != 0 ||
	    model_volume_validate(v, create, &e) != 0) {
		fprintf(s->err, "error: %s: %s\n", file, a ? e.msg : "out of memory");
		goto out;
	}
	if (!v->id) {
		fprintf(s->err, "error: %s: id: required\n", file);
		goto out;
	}
	snprintf(id, idlen, "%s", v->id);
	/* The API takes plain JSON: blank the comment lines. */
	model_spec_uncomment(text, len);
	*body = text;
	text = NULL;
	ret = 0;
out:
	if (text) {
		memset(text, 0, len);
		free(text);
	}
	arena_free(a);
	return ret;
}

/* Prints one progress line when what it says changed. */
static void volume_progress(struct csictl_server *s, const json_t *v, char *last, size_t len)
{
	const json_t *st = json_object_get(v, "status");
	const char *err = json_string_value(json_object_get(st, "last_error"));
	const char *id = json_string_value(json_object_get(v, "id"));
	const char *state = json_string_value(json_object_get(v, "state"));
	char line[1200], clean[1200];

	if (err)
		snprintf(line, sizeof(line), "%s: %s (attempt %lld failed: %s)", id ? id : "?",
			 state ? state : "?",
			 (long long)json_integer_value(json_object_get(st, "attempts")), err);
	else
		snprintf(line, sizeof(line), "%s: %s", id ? id : "?", state ? state : "?");
	if (strcmp(line, last) == 0)
		return;
	snprintf(last, len, "%s", line);
	fprintf(s->err, "%s\n", csictl_out_clean(line, clean, sizeof(clean)));
}

/*
 * Whether a followed object j is where the wait wants it: 1 done, 0 not
 * yet, -1 never (the reason printed to s->err).
 */
typedef int (*volume_done_fn)(struct csictl_server *s, const json_t *j, const void *arg);

/* Done when the state is arg (a string); never when it is failed. */
static int volume_done_state(struct csictl_server *s, const json_t *j, const void *arg)
{
	const char *state = json_string_value(json_object_get(j, "state"));

	(void)s;
	if (state && arg && strcmp(state, arg) == 0)
		return 1;
	return state && strcmp(state, "failed") == 0 ? -1 : 0;
}

/*
 * Follows what (volume or snapshot) id with blocking queries until done
 * says so (then prints it, or fails), or it is gone (gone_ok: success,
 * e.g. after delete). Returns the exit status.
 */
static int volume_follow(struct csictl_server *s, const char *what, const char *id,
			 volume_done_fn done, const void *arg, bool gone_ok,
			 csictl_server_render_fn render)
{
	struct clock *c = clock_real();
	int64_t deadline = clock_now_ms(c) + VOLUME_WAIT_MS;
	char path[1400], base[1200], last[1200] = "", index[24] = "0";
	int ret;

	ret = csictl_server_path(s, what, id, NULL, base, sizeof(base));
	if (ret)
		return ret;
	while (clock_now_ms(c) < deadline) {
		struct csictl_http_answer ans;
		json_t *j;
		int at;

		snprintf(path, sizeof(path), "%s?index=%s&wait=10s", base, index);
		ret = csictl_http_do(&s->http, "GET", path, NULL, &ans);
		if (ret)
			return ret;
		if (ans.status == 404 && gone_ok) {
			fprintf(s->out, "%s %s deleted\n", what, id);
			csictl_http_answer_free(&ans);
			return 0;
		}
		if (ans.status != 200) {
			char msg[1200];

			fprintf(s->err, "error: %s\n",
				csictl_http_error_text(ans.status, ans.data, ans.len, msg,
						       sizeof(msg)));
			csictl_http_answer_free(&ans);
			return CSICTL_EXIT_FAIL;
		}
		snprintf(index, sizeof(index), "%s", ans.index[0] ? ans.index : "0");
		j = json_loadb(ans.data, ans.len, 0, NULL);
		csictl_http_answer_free(&ans);
		if (!j) {
			fprintf(s->err, "error: the server's answer is not valid JSON\n");
			return CSICTL_EXIT_FAIL;
		}
		volume_progress(s, j, last, sizeof(last));
		at = done(s, j, arg);
		if (at > 0) {
			ret = s->json ? (csictl_out_json_print(j, s->out), 0) : render(j, s->out);
			json_decref(j);
			return ret;
		}
		json_decref(j);
		if (at < 0)
			return CSICTL_EXIT_FAIL;
	}
	fprintf(s->err, "error: %s %s: still not done after %d s\n", what, id,
		VOLUME_WAIT_MS / 1000);
	return CSICTL_EXIT_FAIL;
}

/* Whether the volume's plugin is offered by no node and not by the server. */
static bool volume_plugin_missing(const json_t *j)
{
	return json_is_false(json_object_get(j, "plugin_registered"));
}

/*
 * Done when the volume is gone; never while its plugin is on no node:
 * DeleteVolume needs the plugin, so waiting would only run out the clock.
 */
static int volume_done_delete(struct csictl_server *s, const json_t *j, const void *arg)
{
	const char *health = json_string_value(json_object_get(j, "plugin_health"));
	char clean[600];

	(void)arg;
	if (!volume_plugin_missing(j))
		return 0;
	fprintf(
	    s->err,
	    "error: %s; the delete waits for the plugin (register it, or forget the volume "
	    "with csictl volume deregister ID -force)\n",
	    csictl_out_clean(health ? health : "its plugin is on no node", clean, sizeof(clean)));
	return -1;
}

/* A warning when no node nor the server offers the volume's plugin (create -wait). */
static int volume_render_warning(const json_t *j, FILE *out)
{
	const char *plugin = json_string_value(json_object_get(j, "plugin_id"));
	char clean[600];

	if (volume_plugin_missing(j))
		fprintf(out,
			"warning: plugin %s is offered by no node and not by the server (yet?); "
			"the volume waits for it\n",
			csictl_out_clean(plugin ? plugin : "?", clean, sizeof(clean)));
	return 0;
}

/* The answer to create or register, with a warning when no one offers its plugin. */
static int volume_render_recorded(const json_t *j, FILE *out)
{
	int ret = csictl_render_volume(j, out);

	volume_render_warning(j, out);
	return ret;
}

/* volume_follow until the state is done (NULL: until gone). */
static int volume_wait(struct csictl_server *s, const char *what, const char *id, const char *done,
		       bool gone_ok, csictl_server_render_fn render)
{
	return volume_follow(s, what, id, volume_done_state, done, gone_ok, render);
}

/*
 * Done when no expand is pending any more: at the capacity asked (*arg),
 * or short of it when the request was cancelled or replaced by a smaller one.
 */
static int volume_done_expand(struct csictl_server *s, const json_t *j, const void *arg)
{
	int64_t want = *(const int64_t *)arg;
	const json_t *pending = json_object_get(json_object_get(j, "pending"), "capacity_min");
	json_int_t cap = json_integer_value(json_object_get(j, "capacity"));

	if (json_integer_value(pending) > 0)
		return 0;
	if (cap >= want)
		return 1;
	fprintf(s->err,
		"error: no expand pending any more, and the capacity is %lld bytes, "
		"not the %lld asked (cancelled?)\n",
		(long long)cap, (long long)want);
	return -1;
}

static int volume_render_capacity(const json_t *j, FILE *out)
{
	const char *id = json_string_value(json_object_get(j, "id"));
	json_int_t cap = json_integer_value(json_object_get(j, "capacity"));
	char clean[600];

	fprintf(out, "volume %s: capacity %lld bytes%s\n",
		csictl_out_clean(id ? id : "?", clean, sizeof(clean)), (long long)cap,
		json_is_true(json_object_get(j, "node_expansion_required"))
		    ? " (node expansion required)"
		    : "");
	return 0;
}

static int volume_put_spec(struct csictl_server *s, struct volume_opts *o, bool create)
{
	char id[MODEL_ID_MAX + 1], path[1200], *body = NULL;
	int ret;

	if (s->args.n != 2)
		return csictl_server_usage(s, "usage: csictl volume %s FILE",
					   create ? "create" : "register");
	ret = volume_read_spec(s, s->args.v[1], create, &body, id, sizeof(id));
	if (!ret)
		ret = csictl_server_path(s, "volume", id, create ? "/create" : NULL, path,
					 sizeof(path));
	if (!ret)
		ret = csictl_server_request(
		    s, "PUT", path, body, o->wait ? volume_render_warning : volume_render_recorded,
		    NULL);
	if (body) {
		memset(body, 0, strlen(body));
		free(body);
	}
	if (!ret && o->wait)
		ret = volume_wait(s, "volume", id, "ready", false, csictl_render_volume);
	return ret;
}

static int volume_status(struct csictl_server *s, struct volume_opts *o)
{
	char path[2400], esc[4][600];
	const char *vals[4] = {o->plugin, o->node, o->prefix, o->next_token};
	static const char *const keys[4] = {"plugin", "node", "prefix", "next_token"};
	size_t off;

	if (s->args.n == 2) {
		int ret = csictl_server_path(s, "volume", s->args.v[1], NULL, path, sizeof(path));

		return ret ? ret
			   : csictl_server_request(s, "GET", path, NULL, csictl_render_volume,
						   NULL);
	}
	if (s->args.n != 1)
		return csictl_server_usage(s, "usage: csictl volume status [ID]");
	off = (size_t)snprintf(path, sizeof(path), "/v1/volumes?per_page=%s",
			       o->per_page ? o->per_page : "100");
	for (int i = 0; i < 4; i++) {
		if (!vals[i])
			continue;
		if (csictl_http_escape(vals[i], esc[i], sizeof(esc[i])))
			return csictl_server_usage(s, "-%s is too long", keys[i]);
		off += (size_t)snprintf(path + off, sizeof(path) - off, "&%s=%s", keys[i], esc[i]);
	}
	return csictl_server_request(s, "GET", path, NULL, csictl_render_volumes, NULL);
}

static int volume_delete(struct csictl_server *s, struct volume_opts *o)
{
	char path[1200];
	int ret;

	if (s->args.n != 2)
		return csictl_server_usage(s, "usage: csictl volume delete ID [-wait]");
	ret = csictl_server_path(s, "volume", s->args.v[1], "/delete", path, sizeof(path));
	if (!ret)
		ret = csictl_server_request(s, "DELETE", path, NULL,
					    o->wait ? NULL : csictl_render_volume, NULL);
	if (!ret && o->wait)
		ret = volume_follow(s, "volume", s->args.v[1], volume_done_delete, NULL, true,
				    csictl_render_volume);
	return ret;
}

static int volume_deregister_render(const json_t *j, FILE *out)
{
	const char *skipped = json_string_value(json_object_get(j, "skipped"));
	char clean[1200];

	const char *id = json_string_value(json_object_get(j, "id"));

	fprintf(out, "volume %s deregistered\n",
		csictl_out_clean(id ? id : "?", clean, sizeof(clean)));
	if (skipped)
		fprintf(out, "skipped: %s\n", csictl_out_clean(skipped, clean, sizeof(clean)));
	return 0;
}

static int volume_deregister(struct csictl_server *s, struct volume_opts *o)
{
	char path[1200];
	int ret;

	if (s->args.n != 2)
		return csictl_server_usage(s, "usage: csictl volume deregister ID [-force]");
	ret = csictl_server_path(s, "volume", s->args.v[1], o->force ? "?force=true" : NULL, path,
				 sizeof(path));
	return ret ? ret
		   : csictl_server_request(s, "DELETE", path, NULL, volume_deregister_render, NULL);
}

/*
 * PUTs body (a JSON object, consumed) to /v1/volume/<id><suffix> and shows
 * the volume with render (NULL: nothing).
 */
static int volume_action(struct csictl_server *s, const char *id, const char *suffix, json_t *body,
			 csictl_server_render_fn render)
{
	char path[1200], *text;
	int ret;

	if (!body)
		return csictl_server_usage(s, "out of memory");
	text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return csictl_server_usage(s, "out of memory");
	ret = csictl_server_path(s, "volume", id, suffix, path, sizeof(path));
	if (!ret)
		ret = csictl_server_request(s, "PUT", path, text, render, NULL);
	memset(text, 0, strlen(text));
	free(text);
	return ret;
}

static int volume_expand(struct csictl_server *s, struct volume_opts *o)
{
	struct err e;
	int64_t size;
	int ret;

	err_clear(&e);
	if (s->args.n != 2 || !o->size)
		return csictl_server_usage(s, "usage: csictl volume expand ID -size SIZE [-wait]");
	if (csictl_size_parse(o->size, &size, &e))
		return csictl_server_usage(s, "-size: %s", e.msg);
	ret = volume_action(s, s->args.v[1], "/expand",
			    json_pack("{s:I}", "capacity_min", (json_int_t)size),
			    o->wait ? NULL : csictl_render_volume);
	if (!ret && o->wait)
		ret = volume_follow(s, "volume", s->args.v[1], volume_done_expand, &size, false,
				    volume_render_capacity);
	return ret;
}

static json_t *volume_kv_json(const struct csictl_kv *kv)
{
	json_t *o = json_object();

	for (size_t i = 0; o && i < kv->n; i++)
		json_object_set_new(o, kv->pairs[i].key, csictl_out_json_str(kv->pairs[i].value));
	return o;
}

static int volume_claim(struct csictl_server *s, struct volume_opts *o)
{
	const char *mode = o->mode;

	if (s->args.n != 2 || !o->alloc || !o->node)
		return csictl_server_usage(s, "usage: csictl volume claim ID -alloc A -node N "
					      "[-read-only] [-access-mode M] [-attachment-mode M]");
	if (o->read_only)
		mode = "read";
	return volume_action(s, s->args.v[1], "/claim",
			     json_pack("{s:s, s:s, s:s?, s:s, s:s}", "alloc_id", o->alloc,
				       "node_id", o->node, "mode", mode, "access_mode",
				       o->access_mode ? o->access_mode : "single-node-writer",
				       "attachment_mode",
				       o->attachment_mode ? o->attachment_mode : "file-system"),
			     csictl_render_volume);
}

static int volume_snapshot(struct csictl_server *s, struct volume_opts *o)
{
	const char *sub = s->args.n > 1 ? s->args.v[1] : "";
	char path[1400], esc[600];
	struct err e;
	int ret;

	err_clear(&e);
	if (strcmp(sub, "list") == 0 && s->args.n <= 3) {
		size_t off = (size_t)snprintf(path, sizeof(path), "/v1/snapshots?per_page=1000");

		if (s->args.n == 3) {
			if (csictl_http_escape(s->args.v[2], esc, sizeof(esc)))
				return csictl_server_usage(s, "volume ID is too long");
			snprintf(path + off, sizeof(path) - off, "&volume=%s", esc);
		}
		return csictl_server_request(s, "GET", path, NULL, csictl_render_snapshots, NULL);
	}
	if ((strcmp(sub, "delete") == 0 || strcmp(sub, "status") == 0) && s->args.n == 3) {
		bool del = strcmp(sub, "delete") == 0;

		ret = csictl_server_path(s, "snapshot", s->args.v[2], NULL, path, sizeof(path));
		if (!ret)
			ret = csictl_server_request(s, del ? "DELETE" : "GET", path, NULL,
						    o->wait && del ? NULL : csictl_render_snapshot,
						    NULL);
		if (!ret && del && o->wait)
			ret = volume_wait(s, "snapshot", s->args.v[2], NULL, true,
					  csictl_render_snapshot);
		return ret;
	}
	if (strcmp(sub, "create") == 0 && s->args.n == 4) {
		json_t *body;

		if (o->secrets_file && csictl_kv_load_file(&o->secrets, o->secrets_file, &e))
			return csictl_server_usage(s, "%s", e.msg);
		body = json_pack("{s:s, s:s?, s:o, s:o}", "volume_id", s->args.v[2], "name",
				 o->name, "parameters", volume_kv_json(&o->params), "secrets",
				 volume_kv_json(&o->secrets));
		ret = csictl_server_path(s, "snapshot", s->args.v[3], NULL, path, sizeof(path));
		if (!ret && body) {
			char *text = json_dumps(body, JSON_COMPACT);

			ret = text ? csictl_server_request(s, "PUT", path, text,
							   o->wait ? NULL : csictl_render_snapshot,
							   NULL)
				   : csictl_server_usage(s, "out of memory");
			if (text) {
				memset(text, 0, strlen(text));
				free(text);
			}
		}
		json_decref(body);
		if (!ret && o->wait)
			ret = volume_wait(s, "snapshot", s->args.v[3], "ready", false,
					  csictl_render_snapshot);
		return ret;
	}
	return csictl_server_usage(s, "usage: csictl volume snapshot create VOL SNAP [-wait] | "
				      "delete SNAP [-wait] | list [VOL] | status SNAP");
}

static int volume_run(struct csictl_server *s, struct volume_opts *o)
{
	const char *cmd = s->args.v[0];
	struct err e;

	err_clear(&e);
	if (strcmp(cmd, "init") == 0) {
		fputs(model_volume_spec_example(), s->out);
		return 0;
	}
	if (strcmp(cmd, "register") == 0 || strcmp(cmd, "create") == 0)
		return volume_put_spec(s, o, strcmp(cmd, "create") == 0);
	if (strcmp(cmd, "status") == 0)
		return volume_status(s, o);
	if (strcmp(cmd, "delete") == 0)
		return volume_delete(s, o);
	if (strcmp(cmd, "deregister") == 0)
		return volume_deregister(s, o);
	if (strcmp(cmd, "snapshot") == 0)
		return volume_snapshot(s, o);
	if (strcmp(cmd, "claim") == 0)
		return volume_claim(s, o);
	if (strcmp(cmd, "release") == 0) {
		if (s->args.n != 2 || !o->alloc)
			return csictl_server_usage(
			    s, "usage: csictl volume release ID -alloc A [-force]");
		return volume_action(
		    s, s->args.v[1], "/release",
		    json_pack("{s:s, s:b}", "alloc_id", o->alloc, "force", o->force),
		    csictl_render_volume);
	}
	if (strcmp(cmd, "detach") == 0) {
		if (s->args.n != 3)
			return csictl_server_usage(s, "usage: csictl volume detach ID NODE");
		return volume_action(s, s->args.v[1], "/detach",
				     json_pack("{s:s}", "node_id", s->args.v[2]),
				     csictl_render_volume);
	}
	if (strcmp(cmd, "expand") == 0)
		return volume_expand(s, o);
	if (strcmp(cmd, "cancel") == 0) {
		if (s->args.n != 2)
			return csictl_server_usage(s, "usage: csictl volume cancel ID");
		return volume_action(s, s->args.v[1], "/cancel", json_object(),
				     csictl_render_volume);
	}
	if (strcmp(cmd, "modify") == 0) {
		json_t *params = json_object();

		if (s->args.n < 3) {
			json_decref(params);
			return csictl_server_usage(s, "usage: csictl volume modify ID K=V...");
		}
		for (int i = 2; params && i < s->args.n; i++) {
			const char *eq = strchr(s->args.v[i], '=');
			char key[256];

			if (!eq || eq == s->args.v[i] ||
			    (size_t)(eq - s->args.v[i]) >= sizeof(key)) {
				json_decref(params);
				return csictl_server_usage(s, "modify: expected K=V, not \"%.64s\"",
							   s->args.v[i]);
			}
			memcpy(key, s->args.v[i], (size_t)(eq - s->args.v[i]));
			key[eq - s->args.v[i]] = '\0';
			json_object_set_new(params, key, csictl_out_json_str(eq + 1));
		}
		return volume_action(s, s->args.v[1], "/modify",
				     json_pack("{s:o}", "mutable_parameters", params),
				     csictl_render_volume);
	}
	return csictl_server_usage(s, "unknown command \"%.64s\" (see csictl volume -h)", cmd);
}

int csictl_volume_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct volume_opts o;
	struct csictl_flag flags[CSICTL_SERVER_FLAGS_MAX];
	struct csictl_server s;
	size_t n;
	int ret;

	/* Through the local agent, with its flags (-address, CSID_AGENT_ADDR). */
	if (argc > 0 && (strcmp(argv[0], "mount") == 0 || strcmp(argv[0], "unmount") == 0 ||
			 strcmp(argv[0], "renew") == 0))
		return csictl_agent_volume_main(argc, argv, out, err);
	memset(&o, 0, sizeof(o));
	n = volume_flags(&o, flags);
	ret = csictl_server_init(&s, &o.c, flags, n, argc, argv, "volume", out, err);
	if (ret == 0)
		ret = volume_run(&s, &o);
	else if (ret < 0)
		ret = 0;
	csictl_kv_free(&o.params);
	csictl_kv_free(&o.secrets);
	return ret;
}
