/*
 * Validation of what comes from outside: volume specs, snapshot specs and
 * node fingerprints. Each reports every problem at once, joined with "; "
 * into one bounded message ("volume spec: id: missing; capabilities: at
 * least one is required (and 2 more)"), CSID_EINVAL. A secret map is named
 * but neither its keys nor its values; a mount flag by its index only.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "model/model.h"
#include "model/model_int.h"
#include "util/conf.h"

/* ---- validation ---- */

/* Every problem of one validation, joined with "; " into a bounded text. */
struct model_problems {
	char text[ERR_MSG_MAX - 32];
	size_t len;
	int n;
	int dropped;
};

static void model_problem(struct model_problems *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void model_problem(struct model_problems *p, const char *fmt, ...)
{
	char one[256];
	va_list ap;
	size_t need;

	va_start(ap, fmt);
	vsnprintf(one, sizeof(one), fmt, ap);
	va_end(ap);
	need = strlen(one) + (p->n ? 2 : 0);
	/* Leave room for the " (and N more)" tail. */
	if (p->len + need + 24 >= sizeof(p->text)) {
		p->dropped++;
		return;
	}
	p->len += (size_t)snprintf(p->text + p->len, sizeof(p->text) - p->len, "%s%s",
				   p->n ? "; " : "", one);
	p->n++;
}

/* 0 when p holds no problem, else CSID_EINVAL with "<what>: <problems>". */
static int model_problems_end(const struct model_problems *p, const char *what, struct err *e)
{
	if (!p->n && !p->dropped)
		return 0;
	if (p->dropped)
		return err_set(e, CSID_EINVAL, "%s: %s (and %d more)", what, p->text, p->dropped);
	return err_set(e, CSID_EINVAL, "%s: %s", what, p->text);
}

/* An ID field through model_id_check, its message as a problem. */
static void model_check_id(struct model_problems *p, const char *what, const char *id)
{
	struct err e;

	err_clear(&e);
	if (model_id_check(what, id, id ? strlen(id) : 0, &e))
		model_problem(p, "%s", e.msg);
}

static bool model_has_ctl(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	return false;
}

/* A CSI string field: at most MODEL_STRING_MAX bytes, no control characters. */
static void model_check_string(struct model_problems *p, const char *what, const char *s,
			       bool secret)
{
	char q[48];

	if (strlen(s) > MODEL_STRING_MAX)
		model_problem(p, "%s: longer than %d bytes", what, MODEL_STRING_MAX);
	else if (model_has_ctl(s) && secret)
		model_problem(p, "%s: contains a control character", what);
	else if (model_has_ctl(s))
		model_problem(p, "%s \"%s\": contains a control character", what,
			      model_sanitize(q, sizeof(q), s, strlen(s)));
}

/* A map: keys non-empty, sorted and unique, at most MODEL_MAP_BYTES_MAX
 * bytes of keys and values. Names no key of a secret map. */
static void model_check_map(struct model_problems *p, const char *what, const struct model_map *m,
			    bool secret)
{
	size_t bytes = 0;
	char q[48];

	for (size_t i = 0; i < m->n; i++) {
		const struct model_kv *kv = &m->kv[i];

		if (!kv->key || !kv->value) {
			model_problem(p, "%s: a key or value is missing", what);
			return;
		}
		bytes += strlen(kv->key) + strlen(kv->value);
		if (!kv->key[0])
			model_problem(p, "%s: empty key", what);
		else if (i && strcmp(m->kv[i - 1].key, kv->key) >= 0 && secret)
			model_problem(p, "%s: keys not sorted or not unique", what);
		else if (i && strcmp(m->kv[i - 1].key, kv->key) >= 0)
			model_problem(p, "%s: key \"%s\" not sorted or not unique", what,
				      model_sanitize(q, sizeof(q), kv->key, strlen(kv->key)));
	}
	if (bytes > MODEL_MAP_BYTES_MAX)
		model_problem(p, "%s: more than %d bytes of keys and values", what,
			      MODEL_MAP_BYTES_MAX);
}

static bool model_topology_equal(const struct model_topology *a, const struct model_topology *b)
{
	return model_map_equal(&a->segments, &b->segments);
}

static void model_check_topologies(struct model_problems *p, const char *what,
				   const struct model_topology *t, size_t n)
{
	char path[64];

	if (n > MODEL_TOPOLOGIES_MAX)
		model_problem(p, "%s: more than %d topologies", what, MODEL_TOPOLOGIES_MAX);
	for (size_t i = 0; i < n && i < MODEL_TOPOLOGIES_MAX; i++) {
		snprintf(path, sizeof(path), "%s[%zu]", what, i);
		if (t[i].segments.n == 0)
			model_problem(p, "%s: no segments", path);
		model_check_map(p, path, &t[i].segments, false);
	}
}

static void model_check_caps(struct model_problems *p, const struct model_volume *v)
{
	if (v->ncaps == 0)
		model_problem(p, "capabilities: at least one is required");
	if (v->ncaps > MODEL_CAPS_MAX)
		model_problem(p, "capabilities: more than %d", MODEL_CAPS_MAX);
	for (size_t i = 0; i < v->ncaps && i < MODEL_CAPS_MAX; i++) {
		const struct model_capability *c = &v->caps[i];

		if (!model_access_name(c->access))
			model_problem(p, "capabilities[%zu].access_mode: unknown", i);
		if (!model_attachment_name(c->attachment))
			model_problem(p, "capabilities[%zu].attachment_mode: unknown", i);
		for (size_t j = 0; j < i; j++)
			if (v->caps[j].access == c->access &&
			    v->caps[j].attachment == c->attachment)
				model_problem(
				    p, "capabilities[%zu]: duplicate of capabilities[%zu]", i, j);
	}
}

static void model_check_mount(struct model_problems *p, const struct model_volume *v)
{
	bool fs = false;

	for (size_t i = 0; i < v->ncaps; i++)
		fs |= v->caps[i].attachment == MODEL_ATTACH_FILE_SYSTEM;
	/* CSI: mount options belong to MountVolume, the file-system access type. */
	if ((v->fs_type || v->nmount_flags) && v->ncaps && !fs)
		model_problem(p, "mount_options: only for file-system capabilities");
	if (v->fs_type)
		model_check_string(p, "mount_options.fs_type", v->fs_type, false);
	if (v->nmount_flags > MODEL_MOUNT_FLAGS_MAX)
		model_problem(p, "mount_options.mount_flags: more than %d flags",
			      MODEL_MOUNT_FLAGS_MAX);
	for (size_t i = 0; i < v->nmount_flags && i < MODEL_MOUNT_FLAGS_MAX; i++) {
		char what[64];

		snprintf(what, sizeof(what), "mount_options.mount_flags[%zu]", i);
		if (!v->mount_flags[i] || !v->mount_flags[i][0])
			model_problem(p, "%s: empty", what);
		else
			model_check_string(p, what, v->mount_flags[i], true);
	}
}

static void model_check_topology_request(struct model_problems *p, const struct model_volume *v)
{
	model_check_topologies(p, "topology_request.requisite", v->requisite, v->nrequisite);
	model_check_topologies(p, "topology_request.preferred", v->preferred, v->npreferred);
	/* CSI: "If requisite is specified, all topologies in preferred list
	 * MUST also be present in the list of requisite topologies." */
	if (!v->nrequisite)
		return;
	for (size_t i = 0; i < v->npreferred && i < MODEL_TOPOLOGIES_MAX; i++) {
		bool found = false;

		for (size_t j = 0; j < v->nrequisite && !found; j++)
			found = model_topology_equal(&v->preferred[i], &v->requisite[j]);
		if (!found)
			model_problem(p, "topology_request.preferred[%zu]: not in requisite", i);
	}
}

int model_volume_validate(const struct model_volume *v, bool for_create, struct err *e)
{
	struct model_problems p = {.len = 0};
	struct err sub;

	p.text[0] = '\0';
	model_check_id(&p, "id", v->id);
	if (v->name) {
		if (!v->name[0])
			model_problem(&p, "name: empty");
		model_check_string(&p, "name", v->name, false);
	}
	err_clear(&sub);
	if (model_plugin_id_check(v->plugin_id, &sub))
		model_problem(&p, "%s", sub.msg);
	if (for_create && v->external_id)
		model_problem(&p, "external_id: only for registering an existing volume");
	if (!for_create && (!v->external_id || !v->external_id[0]))
		model_problem(&p, "external_id: required to register an existing volume");
	else if (!for_create)
		model_check_string(&p, "external_id", v->external_id, false);
	if (v->capacity_min < 0)
		model_problem(&p, "capacity_min: negative");
	if (v->capacity_max < 0)
		model_problem(&p, "capacity_max: negative");
	if (v->capacity_min > 0 && v->capacity_max > 0 && v->capacity_max < v->capacity_min)
		model_problem(&p, "capacity_max: smaller than capacity_min");
	model_check_caps(&p, v);
	model_check_mount(&p, v);
	model_check_map(&p, "parameters", &v->parameters, false);
	model_check_map(&p, "mutable_parameters", &v->mutable_parameters, false);
	model_check_map(&p, "secrets", &v->secrets, true);
	model_check_map(&p, "context", &v->context, false);
	model_check_topology_request(&p, v);
	if (!for_create && (v->snapshot_source || v->clone_source))
		model_problem(&p, "snapshot_source, clone_source: only for creating a volume");
	if (for_create && v->snapshot_source && v->clone_source)
		model_problem(&p, "snapshot_source, clone_source: at most one of them");
	if (for_create && v->snapshot_source)
		model_check_id(&p, "snapshot_source", v->snapshot_source);
	if (for_create && v->clone_source)
		model_check_id(&p, "clone_source", v->clone_source);
	return model_problems_end(&p, "volume spec", e);
}

int model_snapshot_validate(const struct model_snapshot *s, struct err *e)
{
	struct model_problems p = {.len = 0};

	p.text[0] = '\0';
	model_check_id(&p, "id", s->id);
	model_check_id(&p, "volume_id", s->volume_id);
	if (s->name) {
		if (!s->name[0])
			model_problem(&p, "name: empty");
		model_check_string(&p, "name", s->name, false);
	}
	model_check_map(&p, "parameters", &s->parameters, false);
	model_check_map(&p, "secrets", &s->secrets, true);
	return model_problems_end(&p, "snapshot spec", e);
}

static void model_check_node_plugin(struct model_problems *p, const struct model_node *n, size_t i)
{
	const struct model_node_plugin *pl = &n->plugins[i];
	char what[64];
	struct err sub;

	err_clear(&sub);
	if (model_plugin_id_check(pl->plugin_id, &sub))
		model_problem(p, "plugins[%zu]: %s", i, sub.msg);
	if (!model_plugin_type_name(pl->type))
		model_problem(p, "plugins[%zu].type: unknown", i);
	/* CSI: NodeGetInfoResponse.node_id is at most 256 bytes. */
	if (pl->plugin_node_id && strlen(pl->plugin_node_id) > MODEL_NODE_ID_MAX)
		model_problem(p, "plugins[%zu].plugin_node_id: longer than %d bytes", i,
			      MODEL_NODE_ID_MAX);
	else if (pl->plugin_node_id && model_has_ctl(pl->plugin_node_id))
		model_problem(p, "plugins[%zu].plugin_node_id: contains a control character", i);
	if (pl->health && strlen(pl->health) > MODEL_HEALTH_MAX)
		model_problem(p, "plugins[%zu].health: longer than %d bytes", i, MODEL_HEALTH_MAX);
	if (pl->version) {
		snprintf(what, sizeof(what), "plugins[%zu].version", i);
		model_check_string(p, what, pl->version, false);
	}
	if (pl->max_volumes < 0)
		model_problem(p, "plugins[%zu].max_volumes: negative", i);
	if (pl->ncaps > MODEL_PLUGIN_CAPS_MAX)
		model_problem(p, "plugins[%zu].capabilities: more than %d", i,
			      MODEL_PLUGIN_CAPS_MAX);
	for (size_t j = 0; j < pl->ncaps && j < MODEL_PLUGIN_CAPS_MAX; j++) {
		snprintf(what, sizeof(what), "plugins[%zu].capabilities[%zu]", i, j);
		model_check_string(p, what, pl->caps[j] ? pl->caps[j] : "", false);
	}
	snprintf(what, sizeof(what), "plugins[%zu].topology", i);
	model_check_map(p, what, &pl->topology.segments, false);
	for (size_t j = 0; j < i; j++)
		if (n->plugins[j].type == pl->type && n->plugins[j].plugin_id && pl->plugin_id &&
		    strcmp(n->plugins[j].plugin_id, pl->plugin_id) == 0)
			model_problem(p, "plugins[%zu]: duplicate of plugins[%zu]", i, j);
}

/*
 * An agent address: "host:port" or "http(s)://host:port", the host a name,
 * an IPv4 address or a bracketed IPv6 one; no path, user or query. Or
 * "unix:/path", the agent's unix socket, for servers on its host.
 */
static void model_check_address(struct model_problems *p, const char *s)
{
	const char *hp = s, *colon;
	size_t n = strlen(s);

	if (strncmp(s, "unix:", 5) == 0) {
		if (!conf_is_unix_addr(s))
			model_problem(p,
				      "address: expected unix:/PATH, an absolute socket path "
				      "of at most %d bytes",
				      CONF_SOCK_MAX);
		return;
	}
	if (strncmp(s, "http://", 7) == 0)
		hp = s + 7;
	else if (strncmp(s, "https://", 8) == 0)
		hp = s + 8;
	colon = strrchr(hp, ':');
	if (!n || n > MODEL_ADDRESS_MAX || !colon || colon == hp || !colon[1] ||
	    strspn(colon + 1, "0123456789") != strlen(colon + 1) || strlen(colon + 1) > 5 ||
	    strspn(hp, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]") !=
		strlen(hp))
		model_problem(p, "address: expected host:port or http://host:port");
}

int model_node_validate(const struct model_node *n, struct err *e)
{
	struct model_problems p = {.len = 0};

	p.text[0] = '\0';
	model_check_id(&p, "id", n->id);
	if (n->instance_id)
		model_check_id(&p, "instance_id", n->instance_id);
	if (!model_node_status_name(n->status))
		model_problem(&p, "status: unknown");
	if (n->address)
		model_check_address(&p, n->address);
	if (n->nplugins > MODEL_NODE_PLUGINS_MAX)
		model_problem(&p, "plugins: more than %d", MODEL_NODE_PLUGINS_MAX);
	for (size_t i = 0; i < n->nplugins && i < MODEL_NODE_PLUGINS_MAX; i++)
		model_check_node_plugin(&p, n, i);
	if (n->nallocs > MODEL_NODE_ALLOCS_MAX)
		model_problem(&p, "allocations: more than %d", MODEL_NODE_ALLOCS_MAX);
	for (size_t i = 0; i < n->nallocs && i < MODEL_NODE_ALLOCS_MAX; i++) {
		model_check_id(&p, "allocations[].volume_id", n->allocs[i].volume_id);
		model_check_id(&p, "allocations[].alloc_id", n->allocs[i].alloc_id);
	}
	return model_problems_end(&p, "node", e);
}
