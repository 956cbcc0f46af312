/*
 * `csictl csi` dispatcher: parses the flags every CSI command shares,
 * checks them (sizes, durations, output format, endpoint, UTF-8), opens
 * one gRPC client for the endpoint and runs the command from the group
 * tables. Requests are built in an arena that lives for the run, with map
 * and capability fields filled by the helpers below, so the command files
 * only say which RPC they call and how they print the answer.
 */
#include "csictl_csi.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

static const struct csictl_csi_cmd *const csictl_csi_groups[] = {
    csictl_csi_identity_cmds, csictl_csi_volume_cmds, csictl_csi_node_cmds,
    csictl_csi_snapshot_cmds, csictl_csi_group_cmds,
};

#define CSICTL_CSI_NGROUPS (sizeof(csictl_csi_groups) / sizeof(csictl_csi_groups[0]))

#define CSICTL_CSI_FLAGS_MAX 32

/* The flag table, pointing into o. Returns the number of flags. */
static size_t csictl_csi_flags(struct csictl_csi_opts *o, struct csictl_flag *f)
{
	const struct csictl_flag table[] = {
	    {"endpoint", CSICTL_FLAG_STRING, &o->endpoint, "unix:///PATH",
	     "plugin socket (default $CSI_ENDPOINT)"},
	    {"timeout", CSICTL_FLAG_STRING, &o->timeout, "DURATION",
	     "deadline of each call, e.g. 500ms, 15s (default 15s)"},
	    {"o", CSICTL_FLAG_STRING, &o->output, "table|json", "output format (default table)"},
	    {"block", CSICTL_FLAG_BOOL, &o->block, NULL, "block volume (default: mount)"},
	    {"fs-type", CSICTL_FLAG_STRING, &o->fs_type, "TYPE", "file system type of a mount"},
	    {"mount-flag", CSICTL_FLAG_LIST, &o->mount_flags, "FLAG", "mount option (repeatable)"},
	    {"mount-group", CSICTL_FLAG_STRING, &o->mount_group, "GID", "volume mount group"},
	    {"access-mode", CSICTL_FLAG_LIST, &o->access_modes, "MODE",
	     "access mode (repeatable; default single-node-writer)"},
	    {"capacity", CSICTL_FLAG_STRING, &o->capacity, "SIZE",
	     "required bytes, e.g. 1Gi, 500M"},
	    {"limit", CSICTL_FLAG_STRING, &o->limit, "SIZE", "limit bytes"},
	    {"param", CSICTL_FLAG_KV, &o->params, "K=V", "parameter (repeatable)"},
	    {"secret", CSICTL_FLAG_KV, &o->secrets, "K=V", "secret (repeatable, never printed)"},
	    {"secrets-file", CSICTL_FLAG_STRING, &o->secrets_file, "FILE",
	     "secrets from a JSON object of strings"},
	    {"context", CSICTL_FLAG_KV, &o->context, "K=V", "volume context (repeatable)"},
	    {"publish-context", CSICTL_FLAG_KV, &o->publish_context, "K=V",
	     "publish context (repeatable)"},
	    {"mutable-param", CSICTL_FLAG_KV, &o->mutable_params, "K=V",
	     "mutable parameter (repeatable)"},
	    {"readonly", CSICTL_FLAG_BOOL, &o->readonly, NULL, "publish read-only"},
	    {"max-entries", CSICTL_FLAG_STRING, &o->max_entries, "N",
	     "page size of a listing (default: fetch every page)"},
	    {"starting-token", CSICTL_FLAG_STRING, &o->starting_token, "TOKEN",
	     "where a listing starts"},
	    {"staging", CSICTL_FLAG_STRING, &o->staging, "PATH", "staging target path"},
	    {"node", CSICTL_FLAG_STRING, &o->node_path, "PATH",
	     "expand: expand on the node at this volume path"},
	    {"from-snapshot", CSICTL_FLAG_STRING, &o->from_snapshot, "ID",
	     "create-volume: content from a snapshot"},
	    {"from-volume", CSICTL_FLAG_STRING, &o->from_volume, "ID",
	     "create-volume: clone of a volume"},
	    {"source-volume", CSICTL_FLAG_STRING, &o->source_volume, "ID",
	     "snapshot list: only snapshots of this volume"},
	    {"snapshot-id", CSICTL_FLAG_STRING, &o->snapshot_id, "ID",
	     "snapshot list: only this snapshot"},
	    {"h", CSICTL_FLAG_BOOL, &o->help, NULL, "help"},
	    {"help", CSICTL_FLAG_BOOL, &o->help, NULL, "help"},
	};

	_Static_assert(sizeof(table) / sizeof(table[0]) <= CSICTL_CSI_FLAGS_MAX,
		       "flag table too small");
	memcpy(f, table, sizeof(table));
	return sizeof(table) / sizeof(table[0]);
}

/*
 * The help of one command (only), of the commands of one group ("snapshot
 * -h": group names it), or of every command.
 */
static void csictl_csi_help(FILE *f, const struct csictl_csi_cmd *only, const char *group)
{
	struct csictl_csi_opts o;
	struct csictl_flag flags[CSICTL_CSI_FLAGS_MAX];
	size_t n = csictl_csi_flags(&o, flags);

	if (only) {
		fprintf(f, "usage: csictl csi %s [flags]\n\n%s\n", only->usage, only->help);
	} else {
		size_t glen = group ? strlen(group) : 0;

		fprintf(
		    f,
		    "usage: csictl csi%s%s COMMAND [ARGS] [flags]\n\n"
		    "A client for any CSI plugin; the endpoint is -endpoint or $CSI_ENDPOINT.\n\n"
		    "Commands:\n",
		    group ? " " : "", group ? group : "");
		for (size_t g = 0; g < CSICTL_CSI_NGROUPS; g++)
			for (const struct csictl_csi_cmd *c = csictl_csi_groups[g]; c->name; c++)
				if (!group ||
				    (strncmp(c->name, group, glen) == 0 && c->name[glen] == ' '))
					fprintf(f, "  %-36s %s\n", c->usage, c->help);
	}
	fputs("\nFlags (before or after the command):\n", f);
	csictl_flags_help(flags, n, f);
	fputs("\nAccess modes:", f);
	for (int m = 1; strcmp(csictl_csi_access_mode_name(m), "unknown") != 0; m++)
		fprintf(f, "%s %s", m == 1 ? "" : ",", csictl_csi_access_mode_name(m));
	fputs("\n\nExit status: 0 OK, 1 the call failed, 2 usage error.\n", f);
}

/* Finds the command named by the first one or two positional arguments. */
static const struct csictl_csi_cmd *csictl_csi_find(const struct csictl_args *pos, int *words)
{
	for (size_t g = 0; g < CSICTL_CSI_NGROUPS; g++)
		for (const struct csictl_csi_cmd *c = csictl_csi_groups[g]; c->name; c++) {
			const char *sp = strchr(c->name, ' ');

			if (!sp && strcmp(c->name, pos->v[0]) == 0) {
				*words = 1;
				return c;
			}
			if (sp && pos->n >= 2 && strlen(pos->v[0]) == (size_t)(sp - c->name) &&
			    strncmp(c->name, pos->v[0], (size_t)(sp - c->name)) == 0 &&
			    strcmp(sp + 1, pos->v[1]) == 0) {
				*words = 2;
				return c;
			}
		}
	return NULL;
}

static int csictl_csi_setup(struct csictl_csi *c, struct err *e)
{
	const char *ep = c->o.endpoint ? c->o.endpoint : getenv("CSI_ENDPOINT");
	char path[128];

	if (c->o.output && strcmp(c->o.output, "json") != 0 && strcmp(c->o.output, "table") != 0)
		return err_set(e, CSID_EINVAL, "-o must be table or json, not \"%.32s\"",
			       c->o.output);
	c->json = c->o.output && strcmp(c->o.output, "json") == 0;
	if (c->o.timeout && csictl_duration_parse(c->o.timeout, &c->timeout_ms, e))
		return err_wrap(e, "-timeout");
	if (c->o.secrets_file && csictl_kv_load_file(&c->o.secrets, c->o.secrets_file, e))
		return err_wrap(e, "-secrets-file");
	if (!ep || !*ep)
		return err_set(e, CSID_EINVAL, "no endpoint: give -endpoint or set CSI_ENDPOINT");
	if (csi_endpoint_parse(ep, path, e))
		return err_wrap(e, "endpoint");
	c->o.endpoint = ep;
	return 0;
}

int csictl_csi_main(int argc, char **argv, FILE *out, FILE *errf)
{
	struct csictl_csi c = {.out = out, .err = errf, .timeout_ms = CSI_DEFAULT_TIMEOUT_MS};
	struct csictl_flag flags[CSICTL_CSI_FLAGS_MAX];
	size_t nflags = csictl_csi_flags(&c.o, flags);
	const struct csictl_csi_cmd *cmd = NULL;
	struct csictl_args pos;
	struct err e;
	int status, words = 0;
	bool grpc = false;

	err_clear(&e);
	for (int i = 0; i < argc; i++)
		if (!csictl_out_utf8_ok(argv[i])) {
			status =
			    csictl_csi_usage_error(&c, "argument %d is not valid UTF-8", i + 1);
			goto out;
		}
	if (csictl_flags_parse(flags, nflags, argc, argv, &pos, &e)) {
		status = csictl_csi_usage_error(&c, "%s (see csictl csi -h)", e.msg);
		goto out;
	}
	if (pos.n > 0)
		cmd = csictl_csi_find(&pos, &words);
	if (c.o.help) {
		csictl_csi_help(out, cmd,
				!cmd && pos.n > 0 &&
					(strcmp(pos.v[0], "snapshot") == 0 ||
					 strcmp(pos.v[0], "group-snapshot") == 0)
				    ? pos.v[0]
				    : NULL);
		status = CSICTL_EXIT_OK;
		goto out;
	}
	if (pos.n == 0) {
		csictl_csi_help(errf, NULL, NULL);
		status = CSICTL_EXIT_USAGE;
		goto out;
	}
	if (!cmd && strcmp(pos.v[0], "snapshot") == 0) {
		status =
		    csictl_csi_usage_error(&c, "usage: csictl csi snapshot create|delete|list");
		goto out;
	}
	if (!cmd && strcmp(pos.v[0], "group-snapshot") == 0) {
		status = csictl_csi_usage_error(
		    &c, "usage: csictl csi group-snapshot create|get|delete");
		goto out;
	}
	if (!cmd) {
		status = csictl_csi_usage_error(&c, "unknown command \"%.64s\" (see csictl csi -h)",
						pos.v[0]);
		goto out;
	}
	c.args.n = pos.n - words;
	memcpy(c.args.v, pos.v + words, (size_t)c.args.n * sizeof(c.args.v[0]));
	if (c.args.n < cmd->min_args || c.args.n > cmd->max_args) {
		status = csictl_csi_usage_error(&c, "usage: csictl csi %s", cmd->usage);
		goto out;
	}
	if (csictl_csi_setup(&c, &e)) {
		status = csictl_csi_usage_error(&c, "%s", e.msg);
		goto out;
	}
	c.arena = arena_new();
	if (!c.arena) {
		status = csictl_csi_nomem(&c);
		goto out;
	}
	grpc = true;
	if (csi_client_grpc_new(c.o.endpoint, &c.client, &e)) {
		fprintf(errf, "error: %s\n", e.msg);
		status = CSICTL_EXIT_FAIL;
		goto out;
	}
	status = cmd->run(&c);
	fflush(out);
out:
	csi_client_free(c.client);
	if (grpc)
		csi_grpc_shutdown();
	arena_free(c.arena);
	csictl_kv_free(&c.o.params);
	csictl_kv_free(&c.o.secrets);
	csictl_kv_free(&c.o.context);
	csictl_kv_free(&c.o.publish_context);
	csictl_kv_free(&c.o.mutable_params);
	return status;
}

int csictl_csi_call(struct csictl_csi *c, enum csi_rpc rpc, const ProtobufCMessage *req,
		    ProtobufCMessage **resp)
{
	struct csi_status st;

	*resp = NULL;
	if (c->client->call(c->client, rpc, req, resp, c->timeout_ms, &st))
		return csictl_csi_fail(c, &st);
	return CSICTL_EXIT_OK;
}

int csictl_csi_call_show(struct csictl_csi *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			 csictl_csi_show_fn show)
{
	ProtobufCMessage *resp;
	int status = csictl_csi_call(c, rpc, req, &resp);

	if (status != CSICTL_EXIT_OK)
		return status;
	status = c->json ? csictl_csi_print_json(c, resp) : show(c, resp);
	csi_msg_free(resp);
	return status;
}

int csictl_csi_call_done(struct csictl_csi *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			 const char *fmt, ...)
{
	ProtobufCMessage *resp;
	char buf[512], clean[512];
	int status = csictl_csi_call(c, rpc, req, &resp);
	va_list ap;

	if (status != CSICTL_EXIT_OK)
		return status;
	csi_msg_free(resp);
	if (c->json) {
		fputs("{}\n", c->out);
		return CSICTL_EXIT_OK;
	}
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(c->out, "%s\n", csictl_out_clean(buf, clean, sizeof(clean)));
	return CSICTL_EXIT_OK;
}

int csictl_csi_fail(struct csictl_csi *c, const struct csi_status *st)
{
	char msg[CSI_STATUS_MSG_MAX];

	if (st->code == CSI_OK) {
		fputs("error: the call failed without a status\n", c->err);
		return CSICTL_EXIT_FAIL;
	}
	csictl_out_clean(st->message, msg, sizeof(msg));
	if (msg[0])
		fprintf(c->err, "error: %s: %s\n", csi_code_name(st->code), msg);
	else
		fprintf(c->err, "error: %s\n", csi_code_name(st->code));
	return CSICTL_EXIT_FAIL;
}

int csictl_csi_usage_error(struct csictl_csi *c, const char *fmt, ...)
{
	char buf[ERR_MSG_MAX + 64], clean[ERR_MSG_MAX + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fprintf(c->err, "error: %s\n", csictl_out_clean(buf, clean, sizeof(clean)));
	return CSICTL_EXIT_USAGE;
}

int csictl_csi_nomem(struct csictl_csi *c)
{
	fputs("error: out of memory\n", c->err);
	return CSICTL_EXIT_FAIL;
}

void *csictl_csi_msg_new(struct csictl_csi *c, const ProtobufCMessageDescriptor *desc)
{
	void *m = arena_alloc(c->arena, desc->sizeof_message);

	if (m)
		protobuf_c_message_init(desc, m);
	return m;
}

bool csictl_csi_caps_given(const struct csictl_csi *c)
{
	return c->o.block || c->o.fs_type || c->o.mount_group || c->o.mount_flags.n ||
	       c->o.access_modes.n;
}

static int csictl_csi_cap_build(struct csictl_csi *c, int mode, Csi__V1__VolumeCapability **out,
				struct err *e)
{
	Csi__V1__VolumeCapability *cap;
	Csi__V1__VolumeCapability__AccessMode *am;

	cap = csictl_csi_msg_new(c, &csi__v1__volume_capability__descriptor);
	am = csictl_csi_msg_new(c, &csi__v1__volume_capability__access_mode__descriptor);
	if (!cap || !am)
		return err_set(e, CSID_ENOMEM, "out of memory");
	am->mode = (Csi__V1__VolumeCapability__AccessMode__Mode)mode;
	cap->access_mode = am;
	if (c->o.block) {
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		cap->block =
		    csictl_csi_msg_new(c, &csi__v1__volume_capability__block_volume__descriptor);
		if (!cap->block)
			return err_set(e, CSID_ENOMEM, "out of memory");
	} else {
		Csi__V1__VolumeCapability__MountVolume *mv;

		mv = csictl_csi_msg_new(c, &csi__v1__volume_capability__mount_volume__descriptor);
		if (!mv)
			return err_set(e, CSID_ENOMEM, "out of memory");
		if (c->o.fs_type)
			mv->fs_type = (char *)c->o.fs_type;
		if (c->o.mount_group)
			mv->volume_mount_group = (char *)c->o.mount_group;
		mv->n_mount_flags = c->o.mount_flags.n;
		mv->mount_flags = (char **)c->o.mount_flags.items;
		cap->access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		cap->mount = mv;
	}
	*out = cap;
	return 0;
}

int csictl_csi_caps(struct csictl_csi *c, Csi__V1__VolumeCapability ***caps, size_t *n,
		    struct err *e)
{
	size_t count = c->o.access_modes.n ? c->o.access_modes.n : 1;
	Csi__V1__VolumeCapability **arr;

	if (c->o.block && (c->o.fs_type || c->o.mount_group || c->o.mount_flags.n))
		return err_set(
		    e, CSID_EINVAL,
		    "-block cannot be combined with -fs-type, -mount-flag or -mount-group");
	arr = arena_alloc(c->arena, count * sizeof(*arr));
	if (!arr)
		return err_set(e, CSID_ENOMEM, "out of memory");
	for (size_t i = 0; i < count; i++) {
		int mode = CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER;
		int rc;

		if (c->o.access_modes.n) {
			mode = csictl_csi_access_mode_parse(c->o.access_modes.items[i]);
			if (mode < 0)
				return err_set(e, CSID_EINVAL,
					       "unknown access mode \"%.64s\" (see csictl csi -h)",
					       c->o.access_modes.items[i]);
		}
		rc = csictl_csi_cap_build(c, mode, &arr[i], e);
		if (rc)
			return rc;
	}
	*caps = arr;
	*n = count;
	return 0;
}

int csictl_csi_cap_one(struct csictl_csi *c, Csi__V1__VolumeCapability **cap, struct err *e)
{
	Csi__V1__VolumeCapability **caps;
	size_t n;
	int rc;

	if (c->o.access_modes.n > 1)
		return err_set(e, CSID_EINVAL, "this command takes one -access-mode");
	rc = csictl_csi_caps(c, &caps, &n, e);
	if (rc)
		return rc;
	*cap = caps[0];
	return 0;
}

int csictl_csi_map_set(struct csictl_csi *c, ProtobufCMessage *m, const char *field,
		       const struct csictl_kv *kv)
{
	const ProtobufCFieldDescriptor *f;
	const ProtobufCMessageDescriptor *ed;
	ProtobufCMessage **arr;

	f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field);
	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE)
		return CSID_EINVAL;
	ed = f->descriptor;
	if (ed->n_fields != 2)
		return CSID_EINVAL;
	if (kv->n == 0)
		return 0;
	arr = arena_alloc(c->arena, kv->n * sizeof(*arr));
	if (!arr)
		return CSID_ENOMEM;
	for (size_t i = 0; i < kv->n; i++) {
		char *entry = csictl_csi_msg_new(c, ed);

		if (!entry)
			return CSID_ENOMEM;
		*(char **)(entry + ed->fields[0].offset) = kv->pairs[i].key;
		*(char **)(entry + ed->fields[1].offset) = kv->pairs[i].value;
		arr[i] = (ProtobufCMessage *)entry;
	}
	*(size_t *)((char *)m + f->quantifier_offset) = kv->n;
	*(ProtobufCMessage ***)((char *)m + f->offset) = arr;
	return 0;
}

int csictl_csi_capacity(struct csictl_csi *c, const char *required, Csi__V1__CapacityRange **out,
			struct err *e)
{
	Csi__V1__CapacityRange *r;
	int64_t req = 0, lim = 0;

	*out = NULL;
	if (!required && !c->o.limit)
		return 0;
	if (required && csictl_size_parse(required, &req, e))
		return e->code;
	if (c->o.limit && csictl_size_parse(c->o.limit, &lim, e))
		return err_wrap(e, "-limit");
	if (required && c->o.limit && lim < req)
		return err_set(e, CSID_EINVAL, "-limit is smaller than the required size");
	r = csictl_csi_msg_new(c, &csi__v1__capacity_range__descriptor);
	if (!r)
		return err_set(e, CSID_ENOMEM, "out of memory");
	r->required_bytes = req;
	r->limit_bytes = lim;
	*out = r;
	return 0;
}

/* Upper bound on pages followed by one listing. */
#define CSICTL_CSI_PAGES_MAX 100000

static int csictl_csi_list_print(struct csictl_csi *c, struct csictl_table **t, json_t *entries,
				 const char *next)
{
	json_t *j;
	int status;

	if (c->json) {
		j = json_pack("{sOso}", "entries", entries, "next_token",
			      csictl_out_json_str(next));
		if (!j)
			return csictl_csi_nomem(c);
		csictl_out_json_print(j, c->out);
		json_decref(j);
		return CSICTL_EXIT_OK;
	}
	status = csictl_csi_print_table(c, *t);
	*t = NULL;
	if (next[0]) {
		char clean[512];

		fprintf(c->out, "next token: %s\n", csictl_out_clean(next, clean, sizeof(clean)));
	}
	return status;
}

int csictl_csi_list(struct csictl_csi *c, void *req, csictl_csi_page_fn page, size_t ncols,
		    const char *const *headers)
{
	struct csictl_table *t = NULL;
	json_t *entries = NULL;
	char *token, *next = NULL;
	int status = CSICTL_EXIT_OK;

	token = strdup(c->o.starting_token ? c->o.starting_token : "");
	if (c->json)
		entries = json_array();
	else
		t = csictl_table_new(ncols, headers);
	if (!token || (!entries && !t)) {
		status = csictl_csi_nomem(c);
		goto out;
	}
	for (int n = 0;; n++) {
		status = page(c, req, token, t, entries, &next);
		if (status != CSICTL_EXIT_OK)
			goto out;
		if (c->o.max_entries || next[0] == '\0')
			break;
		if (strcmp(next, token) == 0 || n + 1 >= CSICTL_CSI_PAGES_MAX) {
			fputs("error: the plugin keeps returning the same next_token\n", c->err);
			status = CSICTL_EXIT_FAIL;
			goto out;
		}
		free(token);
		token = next;
		next = NULL;
	}
	status = csictl_csi_list_print(c, &t, entries, next);
out:
	free(token);
	free(next);
	csictl_table_free(t);
	json_decref(entries);
	return status;
}

int csictl_csi_print_json(struct csictl_csi *c, const ProtobufCMessage *m)
{
	json_t *j = csictl_out_msg_json(m);

	if (!j)
		return csictl_csi_nomem(c);
	csictl_out_json_print(j, c->out);
	json_decref(j);
	return CSICTL_EXIT_OK;
}

int csictl_csi_print_table(struct csictl_csi *c, struct csictl_table *t)
{
	if (!t)
		return csictl_csi_nomem(c);
	csictl_table_print(t, c->out);
	csictl_table_free(t);
	return CSICTL_EXIT_OK;
}
