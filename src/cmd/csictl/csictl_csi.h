/*
 * `csictl csi`: a command-line client for any CSI plugin at a unix socket.
 * csictl_csi.c parses the flags shared by every command, opens the client
 * and dispatches to the command groups (identity, volume, node, snapshot,
 * group-snapshot), each in its own file with its own table of commands.
 * This header is the contract between the dispatcher and the groups: the
 * parsed options, the run context, and helpers that turn flags into
 * request fields.
 *
 * Exit status of every command: 0 when the plugin answered OK, 1 when a
 * call failed (the gRPC code name and message are printed on stderr as
 * "error: NOT_FOUND: ..."), 2 for a usage error.
 */
#ifndef CSICTL_CSI_H
#define CSICTL_CSI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "csi/csi_client.h"
#include "csictl_flags.h"
#include "csictl_out.h"
#include "util/arena.h"

#define CSICTL_EXIT_OK 0
#define CSICTL_EXIT_FAIL 1
#define CSICTL_EXIT_USAGE 2

/* Everything the flags can say; strings point into argv. */
struct csictl_csi_opts {
	const char *endpoint;
	const char *timeout;
	const char *output;
	bool help;
	/* volume capability */
	bool block;
	const char *fs_type;
	const char *mount_group;
	struct csictl_list mount_flags;
	struct csictl_list access_modes;
	/* sizes */
	const char *capacity;
	const char *limit;
	/* maps */
	struct csictl_kv params;
	struct csictl_kv secrets;
	struct csictl_kv context;
	struct csictl_kv publish_context;
	struct csictl_kv mutable_params;
	const char *secrets_file;
	/* misc */
	bool readonly;
	const char *max_entries;
	const char *starting_token;
	const char *staging;
	const char *node_path;
	const char *from_snapshot;
	const char *from_volume;
	const char *source_volume;
	const char *snapshot_id;
};

/* One run of one command. */
struct csictl_csi {
	struct csictl_csi_opts o;
	struct csictl_args args; /* positional arguments after the command name */
	struct csi_client *client;
	struct arena *arena; /* request messages are built here */
	int64_t timeout_ms;
	bool json;
	FILE *out;
	FILE *err;
};

/* One command: name, argument count range, usage line, handler. */
struct csictl_csi_cmd {
	const char *name;
	int min_args;
	int max_args;
	const char *usage; /* e.g. "create-volume NAME" */
	const char *help; /* one line */
	int (*run)(struct csictl_csi *c);
};

/* The command groups; each table ends with a zeroed entry. */
extern const struct csictl_csi_cmd csictl_csi_identity_cmds[];
extern const struct csictl_csi_cmd csictl_csi_volume_cmds[];
extern const struct csictl_csi_cmd csictl_csi_node_cmds[];
extern const struct csictl_csi_cmd csictl_csi_snapshot_cmds[];
extern const struct csictl_csi_cmd csictl_csi_group_cmds[];

/*
 * Runs `csictl csi` with argv holding what follows "csi". Output goes to
 * out, errors to errf. Returns the exit status.
 */
int csictl_csi_main(int argc, char **argv, FILE *out, FILE *errf);

/* Prints what the answer of a call means as a table (table mode). */
typedef int (*csictl_csi_show_fn)(struct csictl_csi *c, const ProtobufCMessage *resp);

/*
 * Calls rpc with req. Returns CSICTL_EXIT_OK with *resp (free it with
 * csi_msg_free), or prints the failure and returns CSICTL_EXIT_FAIL.
 */
int csictl_csi_call(struct csictl_csi *c, enum csi_rpc rpc, const ProtobufCMessage *req,
		    ProtobufCMessage **resp);
/* Calls rpc and prints the answer: as JSON, else through show. Returns the exit status. */
int csictl_csi_call_show(struct csictl_csi *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			 csictl_csi_show_fn show);
/* Calls an RPC whose answer is empty and prints the message (or {}). */
int csictl_csi_call_done(struct csictl_csi *c, enum csi_rpc rpc, const ProtobufCMessage *req,
			 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Prints "error: CODE: message" for a failed call and returns CSICTL_EXIT_FAIL. */
int csictl_csi_fail(struct csictl_csi *c, const struct csi_status *st);
/* Prints "error: <msg>" and returns CSICTL_EXIT_USAGE. */
int csictl_csi_usage_error(struct csictl_csi *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "error: out of memory" and returns CSICTL_EXIT_FAIL. */
int csictl_csi_nomem(struct csictl_csi *c);

/*
 * Builds the volume capabilities the flags describe (block or mount with
 * fs type, flags and mount group; one capability per -access-mode, or
 * single-node-writer when none is given) in the arena. Returns 0, or
 * CSID_EINVAL with e set for an unknown access mode, or CSID_ENOMEM.
 */
int csictl_csi_caps(struct csictl_csi *c, Csi__V1__VolumeCapability ***caps, size_t *n,
		    struct err *e);
/* The one capability of a single-capability RPC (at most one -access-mode). */
int csictl_csi_cap_one(struct csictl_csi *c, Csi__V1__VolumeCapability **cap, struct err *e);
/* True when any capability flag was given. */
bool csictl_csi_caps_given(const struct csictl_csi *c);

/*
 * Fills the map<string,string> field "field" of m (built in the arena)
 * from kv. Returns 0 or CSID_ENOMEM / CSID_EINVAL (no such map field).
 */
int csictl_csi_map_set(struct csictl_csi *c, ProtobufCMessage *m, const char *field,
		       const struct csictl_kv *kv);

/*
 * Capacity range from -capacity (required) and -limit; *out stays NULL
 * when neither is given. Returns 0 or CSID_EINVAL/CSID_ERANGE with e set.
 */
int csictl_csi_capacity(struct csictl_csi *c, const char *required, Csi__V1__CapacityRange **out,
			struct err *e);

/* Allocates and initialises a message of type desc in the arena; NULL when out of memory. */
void *csictl_csi_msg_new(struct csictl_csi *c, const ProtobufCMessageDescriptor *desc);

/* Our name of an access mode ("single-node-writer"), "unknown" otherwise. */
const char *csictl_csi_access_mode_name(int mode);
/* The CSI mode for a name (ours, or the CSI enum name in any case); -1 if none. */
int csictl_csi_access_mode_parse(const char *name);

/*
 * One page of a listing: calls the RPC with starting_token token, adds its
 * entries to t (table mode) or appends their JSON to entries (json mode),
 * and sets *next to a malloc'd copy of next_token. Returns an exit status.
 */
typedef int (*csictl_csi_page_fn)(struct csictl_csi *c, void *req, const char *token,
				  struct csictl_table *t, json_t *entries, char **next);

/*
 * Runs a paged listing: from -starting-token, one page with -max-entries,
 * else every page until next_token is empty (an error when the plugin
 * returns the token it was given). Prints a table with the given headers
 * and a "next token:" line, or {"entries": [...], "next_token": "..."}.
 */
int csictl_csi_list(struct csictl_csi *c, void *req, csictl_csi_page_fn page, size_t ncols,
		    const char *const *headers);

/*
 * The size and creation-time cells of a snapshot: "1Mi" and
 * "2026-01-02T03:04:05Z" ("" without a creation time).
 */
void csictl_csi_snapshot_cells(const Csi__V1__Snapshot *s, char *size, size_t size_len,
			       char *created, size_t created_len);

/* Prints m as JSON on c->out; returns CSICTL_EXIT_OK or a failure status. */
int csictl_csi_print_json(struct csictl_csi *c, const ProtobufCMessage *m);
/* Prints a table, frees it; a NULL table (out of memory) reports the failure. */
int csictl_csi_print_table(struct csictl_csi *c, struct csictl_table *t);

#endif
