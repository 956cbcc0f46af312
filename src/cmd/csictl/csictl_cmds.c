/*
 * csictl's command table (csictl_cmds.h) and what is printed from it:
 * the help of one command, a group's listing and the bash completion.
 * A leaf's help lists its own flags, then those its group gives every
 * subcommand; a group's help lists every flag of its table.
 */
#include "csictl_cmds.h"

#include <string.h>

#define CSICTL_SERVER_COMMON "address token o timeout"
#define CSICTL_AGENT_COMMON "address o timeout"
#define CSICTL_CMD_PATH_MAX 128

const struct csictl_cmd csictl_cmds[] = {
    {"", NULL, NULL, "The command-line client of csid."},
    {"volume", NULL, CSICTL_SERVER_COMMON,
     "Volumes of a csid server: create, claim, mount, snapshot. mount, unmount and renew "
     "go through the local agent (-address names the agent, default $CSID_AGENT_ADDR)."},
    {"volume init", NULL, "", "Prints a commented example spec (csictl volume init > vol.json)."},
    {"volume register", "FILE", "", "Registers an existing volume (the spec names external_id)."},
    {"volume create", "FILE", "wait", "Creates the volume through its plugin."},
    {"volume status", "[ID]", "node plugin prefix per-page next-token",
     "Lists volumes, or shows one with its claims."},
    {"volume delete", "ID", "wait", "Deletes the volume in its plugin, then deregisters it."},
    {"volume deregister", "ID", "force", "Forgets the volume; -force even while it is claimed."},
    {"volume detach", "ID NODE", "", "Releases every claim of NODE (an operator's exit)."},
    {"volume expand", "ID", "size wait",
     "Grows the volume to at least -size; with -wait, waits and prints the new capacity."},
    {"volume cancel", "ID", "", "Drops the volume's pending expand and modify."},
    {"volume modify", "ID K=V...", "", "Changes mutable parameters of the volume."},
    {"volume claim", "ID", "alloc node read-only mode access-mode attachment-mode",
     "Claims the volume for an allocation on a node (low level: nothing is mounted)."},
    {"volume release", "ID", "alloc force",
     "Releases a claim; -force frees it at once and says what it skipped."},
    {"volume mount", "ID",
     "alloc read-only access-mode attachment-mode owner-pid owner-cgroup lease",
     "The local agent claims the volume, mounts it for the allocation and prints the path. "
     "With an owner (a process, a cgroup v2 directory or a lease of 1s to 24h) the agent "
     "unmounts it and releases the claim by itself when the process exits, the cgroup is "
     "empty or the lease lapses."},
    {"volume unmount", "ID", "alloc force",
     "The local agent unmounts the volume for the allocation, then releases the claim."},
    {"volume renew", "ID", "alloc lease",
     "Renews the lease owning a mount: it runs again from now."},
    {"volume snapshot", NULL, CSICTL_SERVER_COMMON, "Snapshots of volumes."},
    {"volume snapshot create", "VOL SNAP", "wait name param secret secrets-file",
     "Cuts a snapshot SNAP of volume VOL through its plugin."},
    {"volume snapshot delete", "SNAP", "wait", "Deletes a snapshot in its plugin and forgets it."},
    {"volume snapshot list", "[VOL]", "prefix", "Lists snapshots, of one volume or all."},
    {"volume snapshot status", "SNAP", "", "Shows one snapshot."},
    {"plugin", NULL, CSICTL_SERVER_COMMON, "Plugins a csid server knows."},
    {"plugin status", "[ID]", "",
     "Lists plugins with their healthy and expected controllers and nodes, or shows one."},
    {"node", NULL, CSICTL_SERVER_COMMON, "Nodes registered with a csid server."},
    {"node status", "[ID]", "", "Lists nodes with their status and plugins, or shows one."},
    {"events", NULL, "index topic " CSICTL_SERVER_COMMON,
     "Follows the server's event stream until interrupted; -index N resumes after index N, "
     "-topic keeps one of volume, claim, snapshot, node, plugin."},
    {"operator", NULL, CSICTL_SERVER_COMMON,
     "Operator tasks on a csid server's catalogue (a write token is needed)."},
    {"operator snapshot", NULL, "",
     "Every volume, snapshot and node record of the server's store, read at one index."},
    {"operator snapshot save", "FILE", "",
     "Writes the snapshot to FILE (mode 0600: the records hold the volumes' secrets)."},
    {"operator snapshot restore", "FILE", "",
     "Loads FILE into a server whose store is empty (refused otherwise): a restore, or the "
     "move from a SQLite server to an etcd one."},
    {"server", NULL, CSICTL_SERVER_COMMON,
     "The servers of an installation (those sharing one etcd store) and their leader."},
    {"server members", NULL, "",
     "Lists every server with its address, start time, the node heartbeats it took in its "
     "last member record, and which one leads (runs the reconciler and node liveness)."},
    {"server leader", NULL, "", "Shows who leads, since when, and this server's ID."},
    {"server installation", NULL, "",
     "Shows the installation's ID and its cluster-wide settings beside those this server runs "
     "with."},
    {"agent", NULL, CSICTL_AGENT_COMMON,
     "Drives a csid agent directly: its plugins and mounts (-address, default "
     "$CSID_AGENT_ADDR)."},
    {"agent self", NULL, "", "The agent: node name, data dir, version, counts."},
    {"agent plugins", NULL, "", "Plugins known to the agent, with their health."},
    {"agent mounts", NULL, "", "Volumes the agent has mounted."},
    {"agent mount", "VOLUME ALLOC",
     "plugin external-id readonly block attachment-mode access-mode fs-type mount-flag "
     "context publish-context secret secrets-file context-file",
     "Mounts a volume for an allocation through a node plugin (stage, then publish)."},
    {"agent unmount", "VOLUME ALLOC", "force",
     "Unmounts it (unpublish, then unstage when no other allocation uses it); -force makes "
     "the RPCs once, then the agent unmounts what is left itself, drops the record and says "
     "what it skipped."},
    {"csi", NULL,
     "endpoint timeout o block fs-type mount-flag mount-group access-mode capacity limit param "
     "secret secrets-file context publish-context mutable-param readonly max-entries "
     "starting-token staging node from-snapshot from-volume source-volume snapshot-id",
     "Calls a CSI plugin directly, for debugging plugins (-endpoint, default $CSI_ENDPOINT)."},
    {"csi info", NULL, NULL, NULL},
    {"csi caps", NULL, NULL, NULL},
    {"csi probe", NULL, NULL, NULL},
    {"csi create-volume", NULL, NULL, NULL},
    {"csi delete-volume", NULL, NULL, NULL},
    {"csi get-volume", NULL, NULL, NULL},
    {"csi modify-volume", NULL, NULL, NULL},
    {"csi capacity", NULL, NULL, NULL},
    {"csi list-volumes", NULL, NULL, NULL},
    {"csi validate", NULL, NULL, NULL},
    {"csi controller-publish", NULL, NULL, NULL},
    {"csi controller-unpublish", NULL, NULL, NULL},
    {"csi expand", NULL, NULL, NULL},
    {"csi node-info", NULL, NULL, NULL},
    {"csi stage", NULL, NULL, NULL},
    {"csi unstage", NULL, NULL, NULL},
    {"csi publish", NULL, NULL, NULL},
    {"csi unpublish", NULL, NULL, NULL},
    {"csi stats", NULL, NULL, NULL},
    {"csi snapshot", NULL, NULL, NULL},
    {"csi snapshot create", NULL, NULL, NULL},
    {"csi snapshot delete", NULL, NULL, NULL},
    {"csi snapshot list", NULL, NULL, NULL},
    {"csi group-snapshot", NULL, NULL, NULL},
    {"csi group-snapshot create", NULL, NULL, NULL},
    {"csi group-snapshot get", NULL, NULL, NULL},
    {"csi group-snapshot delete", NULL, NULL, NULL},
    {"version", NULL, "client " CSICTL_SERVER_COMMON,
     "Prints csictl's version, then the server's (from GET /v1/status/health); -client "
     "prints csictl's only."},
    {"completion", "bash", "",
     "Prints the bash completion script (installed as "
     "/usr/share/bash-completion/completions/csictl)."},
    {NULL, NULL, NULL, NULL},
};

const struct csictl_cmd *csictl_cmd_get(const char *path)
{
	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++)
		if (strcmp(c->path, path) == 0)
			return c;
	return NULL;
}

/* Whether child's path is parent's path plus one word. */
static bool csictl_cmd_is_child(const struct csictl_cmd *parent, const struct csictl_cmd *child)
{
	size_t n = strlen(parent->path);
	const char *rest = child->path + n;

	if (!child->path[0] || strncmp(child->path, parent->path, n) != 0)
		return false;
	if (n) {
		if (*rest != ' ')
			return false;
		rest++;
	}
	return *rest && !strchr(rest, ' ');
}

bool csictl_cmd_is_group(const struct csictl_cmd *cmd)
{
	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++)
		if (csictl_cmd_is_child(cmd, c))
			return true;
	return false;
}

/* The group holding cmd (the entry of its path without the last word). */
static const struct csictl_cmd *csictl_cmd_parent(const struct csictl_cmd *cmd)
{
	char path[CSICTL_CMD_PATH_MAX];
	const char *sp = strrchr(cmd->path, ' ');
	size_t n = sp ? (size_t)(sp - cmd->path) : 0;

	if (!cmd->path[0] || n >= sizeof(path))
		return NULL;
	memcpy(path, cmd->path, n);
	path[n] = '\0';
	return csictl_cmd_get(path);
}

/* Whether name is one of the space-separated words of list. */
static bool csictl_cmd_word_in(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p && *p;) {
		size_t len = strcspn(p, " ");

		if (len == n && strncmp(p, name, n) == 0)
			return true;
		p += len;
		p += strspn(p, " ");
	}
	return false;
}

/* Prints text wrapped at about 76 columns, each line indented by indent. */
static void csictl_cmd_wrap(const char *text, int indent, FILE *f)
{
	int col = 0;

	while (*text) {
		size_t len = strcspn(text, " ");

		if (col && col + 1 + (int)len > 76) {
			fputc('\n', f);
			col = 0;
		}
		if (!col)
			col = fprintf(f, "%*s", indent, "");
		else
			col += fprintf(f, " ");
		col += fprintf(f, "%.*s", (int)len, text);
		text += len;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

/* The length of help's first sentence, without its full stop. */
static size_t csictl_cmd_first_sentence(const char *help)
{
	const char *end = strstr(help, ". ");

	if (end)
		return (size_t)(end - help);
	end = help + strlen(help);
	return end > help && end[-1] == '.' ? (size_t)(end - help - 1) : (size_t)(end - help);
}

static void csictl_cmd_usage_line(const struct csictl_cmd *c, FILE *f)
{
	fprintf(f, "usage: csictl%s%s", c->path[0] ? " " : "", c->path);
	if (csictl_cmd_is_group(c))
		fputs(" COMMAND [ARGS]", f);
	else if (c->args)
		fprintf(f, " %s", c->args);
	fputs(" [flags]\n\n", f);
}

void csictl_cmd_help(const char *group, const struct csictl_args *args,
		     const struct csictl_flag *flags, size_t n, FILE *f)
{
	const struct csictl_cmd *c = csictl_cmd_get(group), *parent;
	char path[CSICTL_CMD_PATH_MAX];
	bool is_group;

	if (!c)
		return;
	snprintf(path, sizeof(path), "%s", group);
	for (int i = 0; args && i < args->n; i++) {
		const struct csictl_cmd *next;
		char longer[CSICTL_CMD_PATH_MAX];

		if ((size_t)snprintf(longer, sizeof(longer), "%s%s%s", path, path[0] ? " " : "",
				     args->v[i]) >= sizeof(longer) ||
		    !(next = csictl_cmd_get(longer)))
			break;
		c = next;
		snprintf(path, sizeof(path), "%s", longer);
	}
	is_group = csictl_cmd_is_group(c);
	csictl_cmd_usage_line(c, f);
	csictl_cmd_wrap(c->help ? c->help : "", 0, f);
	if (is_group) {
		fputs("\nCommands:\n", f);
		for (const struct csictl_cmd *s = csictl_cmds; s->path; s++) {
			char left[96];

			if (!csictl_cmd_is_child(c, s))
				continue;
			snprintf(left, sizeof(left), "%s%s%s",
				 s->path + strlen(c->path) + !!c->path[0], s->args ? " " : "",
				 s->args ? s->args : "");
			fprintf(f, "  %-28s ", left);
			if (strlen(left) > 28)
				fputs("\n                               ", f);
			if (s->help)
				fprintf(f, "%.*s\n", (int)csictl_cmd_first_sentence(s->help),
					s->help);
			else
				fputs("(csictl csi -h)\n", f);
		}
	}
	parent = is_group ? NULL : csictl_cmd_parent(c);
	if (n) {
		fputs("\nFlags:\n", f);
		for (size_t i = 0; i < n; i++) {
			bool own = csictl_cmd_word_in(c->flags, flags[i].name);
			bool common = parent && csictl_cmd_word_in(parent->flags, flags[i].name);

			if (is_group || own || common)
				csictl_flags_help(&flags[i], 1, f);
		}
	}
	fputs("\nExit status: 0 OK, 1 the request failed, 2 usage error.\n", f);
}

/* The flags of one command for completion: its own, then its group's. */
static void csictl_cmd_bash_flags(const struct csictl_cmd *c, FILE *f)
{
	const struct csictl_cmd *parent = csictl_cmd_is_group(c) ? NULL : csictl_cmd_parent(c);
	const char *lists[2] = {c->flags, parent ? parent->flags : NULL};

	fputs("-h", f);
	for (int l = 0; l < 2; l++)
		for (const char *p = lists[l]; p && *p;) {
			size_t len = strcspn(p, " ");

			if (len)
				fprintf(f, " -%.*s", (int)len, p);
			p += len;
			p += strspn(p, " ");
		}
}

void csictl_cmd_completion_bash(FILE *f)
{
	fputs("# bash completion for csictl, printed by `csictl completion bash` from the\n"
	      "# command table of csictl (src/cmd/csictl/csictl_cmds.c).\n"
	      "_csictl()\n"
	      "{\n"
	      "\tlocal cur=\"${COMP_WORDS[COMP_CWORD]}\" path=\"\" w i words flags files=\"\"\n"
	      "\t# The command path: the words before the cursor that name a subcommand.\n"
	      "\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	      "\t\tw=\"${COMP_WORDS[i]}\"\n"
	      "\t\t[[ $w == -* ]] && continue\n"
	      "\t\tif _csictl_words \"$path\" | grep -qxF -- \"$w\"; then\n"
	      "\t\t\tpath=\"${path:+$path }$w\"\n"
	      "\t\tfi\n"
	      "\tdone\n"
	      "\twords=$(_csictl_words \"$path\")\n"
	      "\tcase \"$path\" in\n",
	      f);
	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++) {
		fprintf(f, "\t\"%s\") flags=\"", c->path);
		csictl_cmd_bash_flags(c, f);
		fputs("\"", f);
		if (c->args && strstr(c->args, "FILE"))
			fputs(" files=1", f);
		else if (c->args &&
			 strspn(c->args, "abcdefghijklmnopqrstuvwxyz") == strlen(c->args))
			fprintf(f, " words=%s",
				c->args); /* a literal argument: "completion bash" */
		fputs(" ;;\n", f);
	}
	fputs("\tesac\n"
	      "\tif [[ $cur == -* ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
	      "\telif [[ -n $words ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
	      "\telif [[ -n $files ]]; then\n"
	      "\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
	      "\telse\n"
	      "\t\tCOMPREPLY=()\n"
	      "\tfi\n"
	      "}\n\n"
	      "# The subcommands of a command path, one a line.\n"
	      "_csictl_words()\n"
	      "{\n"
	      "\tcase \"$1\" in\n",
	      f);
	for (const struct csictl_cmd *c = csictl_cmds; c->path; c++) {
		if (!csictl_cmd_is_group(c))
			continue;
		fprintf(f, "\t\"%s\") printf '%%s\\n'", c->path);
		for (const struct csictl_cmd *s = csictl_cmds; s->path; s++)
			if (csictl_cmd_is_child(c, s))
				fprintf(f, " %s",
					strrchr(s->path, ' ') ? strrchr(s->path, ' ') + 1
							      : s->path);
		fputs(" ;;\n", f);
	}
	fputs("\tesac\n"
	      "}\n\n"
	      "complete -F _csictl csictl\n",
	      f);
}
