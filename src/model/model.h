/*
 * The control plane's objects: volumes (with their claims and controller
 * publications), snapshots and nodes, as plain structs; their validation;
 * their JSON encodings (what the store keeps, what the API shows, what a
 * spec file holds). Pure functions, no I/O, no clock of their own (times
 * are passed in), thread-safe. The server, the agent, csictl and the tests
 * share them. The claim rules are in model_claim.h, the reconciler's
 * decisions in server/.
 *
 * Memory: a decoded object and everything it points to lives in the
 * struct arena passed to the decoder (util/arena.h); free the arena to
 * free it. Code that changes an object allocates the new strings and
 * arrays from the same arena. Secrets (the secrets maps, mount flags) are
 * kept because the plugin needs them, but only the store encoding
 * carries them: the API encoding and every message leave them out.
 *
 * JSON shapes (keys in snake_case; maps are objects of strings; absent
 * or null keys take the documented defaults: "", 0, false, empty; the
 * encoders always write maps and arrays, and leave out unset strings):
 *   volume spec (PUT /v1/volume/<id>, /create; spec files):
 *     {"id" (may be left to the URL), "name", "plugin_id",
 *      "external_id" (register only),
 *      "capacity_min", "capacity_max" (bytes; or strings "10GiB", "500M"),
 *      "capabilities": [{"access_mode": "single-node-writer",
 *                        "attachment_mode": "file-system" (default)}],
 *      "mount_options": {"fs_type", "mount_flags": [...]},
 *      "parameters", "mutable_parameters", "secrets", "context" (maps),
 *      "topology_request": {"requisite": [{seg map}], "preferred": [...]},
 *      "snapshot_source", "clone_source" (IDs)}
 *   volume: the spec keys plus "state", "failure" (why it failed, when it
 *     did), "capacity", "accessible_topology",
 *     "claims": [claim], "past_claims": [claim] (store view: only in
 *     records written before the claim history, see model_history_append;
 *     the API view of one volume shows its history there),
 *     "publications": [pub],
 *     "node_expansion_required", "pending": {"capacity_min",
 *     "mutable_parameters"}, "created_ms", "updated_ms".
 *     The store view keeps "secrets" and "mount_options.mount_flags".
 *     The API view leaves both out and adds "status": {"last_error",
 *     "attempts", "next_attempt_ms"}, "create_index", "modify_index",
 *     "schedulable", "plugin_health", "plugin_registered" (filled by the
 *     server, never stored).
 *   claim: {"alloc_id", "node_id", "plugin_node_id", "mode": "read|write",
 *           "access_mode", "attachment_mode", "read_only", "state",
 *           "claimed_ms", "updated_ms", "note", "held_by_agent",
 *           "node_expanded"}
 *   publication: {"node_id", "plugin_node_id", "read_only", "access_mode",
 *           "attachment_mode", "state": "publishing|published|unpublishing",
 *           "context": {...}}
 *   snapshot: {"id", "volume_id", "plugin_id", "external_id", "name",
 *           "parameters", "secrets" (store only), "state", "ready_to_use",
 *           "size_bytes", "creation_time_ms", "created_ms"; the API view
 *           adds "status", "create_index", "modify_index"}
 *   snapshot spec (PUT /v1/snapshot/<id>): {"id", "volume_id", "name",
 *           "parameters", "secrets"}
 *   node: {"id", "instance_id" (the registering agent's, optional; store
 *          only: the API view shows "instance_tag" instead),
 *          "status": "ready|down" (default ready), "registered_ms",
 *          "updated_ms", "address" (the agent's API, "http://host:port"
 *          or "host:port": where the server runs controller RPCs of the
 *          node's controller plugins), "plugins": [{"plugin_id", "type": "controller|node",
 *            "healthy", "health", "version", "capabilities": [names],
 *            "plugin_node_id", "max_volumes", "topology": {seg map}}],
 *          "allocations": [{"volume_id", "alloc_id"}] (the agent's report;
 *            absent: not reported; never stored)}
 *          (one encoding; the API layer adds the indices if it shows them)
 * Store decoders skip unknown keys (an older program reads a newer
 * record); the spec decoders refuse them.
 */
#ifndef CSID_MODEL_MODEL_H
#define CSID_MODEL_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/arena.h"
#include "util/err.h"

/* IDs (volume, allocation, node, snapshot): 1..MODEL_ID_MAX bytes of
 * [A-Za-z0-9._-], not "." nor "..". Plugin IDs: domain notation, <= 63. */
#define MODEL_ID_MAX 128
#define MODEL_PLUGIN_ID_MAX 63
/* Spec size limits (CSI): strings 128 bytes, maps 4 KiB in all. */
#define MODEL_STRING_MAX 128
#define MODEL_MAP_BYTES_MAX 4096
#define MODEL_CAPS_MAX 16
#define MODEL_TOPOLOGIES_MAX 64
#define MODEL_MOUNT_FLAGS_MAX 64
/* Node fingerprints: CSI node IDs are at most 256 bytes (NodeGetInfo). */
#define MODEL_NODE_ID_MAX 256
#define MODEL_HEALTH_MAX 1024
#define MODEL_PLUGIN_CAPS_MAX 64
#define MODEL_NODE_PLUGINS_MAX 256
/* Allocations one node's report may list. */
#define MODEL_NODE_ALLOCS_MAX 4096
/* A node's agent address ("http://10.0.0.5:4650"). */
#define MODEL_ADDRESS_MAX 256
/* Past claims kept per volume, in its claim history (oldest dropped first). */
#define MODEL_PAST_CLAIMS_MAX 16
/* Largest spec text model_volume_spec_decode accepts (bytes). */
#define MODEL_SPEC_MAX (256 * 1024)

/* Access modes, numbered as on the CSI wire (VolumeCapability.AccessMode). */
enum model_access {
	MODEL_ACCESS_UNKNOWN = 0,
	MODEL_ACCESS_SINGLE_NODE_WRITER = 1,
	MODEL_ACCESS_SINGLE_NODE_READER_ONLY = 2,
	MODEL_ACCESS_MULTI_NODE_READER_ONLY = 3,
	MODEL_ACCESS_MULTI_NODE_SINGLE_WRITER = 4,
	MODEL_ACCESS_MULTI_NODE_MULTI_WRITER = 5,
	MODEL_ACCESS_SINGLE_NODE_SINGLE_WRITER = 6,
	MODEL_ACCESS_SINGLE_NODE_MULTI_WRITER = 7,
};

enum model_attachment { MODEL_ATTACH_FILE_SYSTEM, MODEL_ATTACH_BLOCK_DEVICE };

/* "single-node-writer" ...; NULL for UNKNOWN or outside the enum. */
const char *model_access_name(enum model_access a);
int model_access_parse(const char *s, enum model_access *out, struct err *e);
/* "file-system" / "block-device". */
const char *model_attachment_name(enum model_attachment a);
int model_attachment_parse(const char *s, enum model_attachment *out, struct err *e);
/* Whether a allows a writer at all (not one of the *-reader-only modes). */
bool model_access_writable(enum model_access a);
/* Whether a lets more than one node use the volume (MULTI_NODE_*). */
bool model_access_multi_node(enum model_access a);

struct model_kv {
	char *key;
	char *value;
};

/* A string map, sorted by key, keys unique. */
struct model_map {
	struct model_kv *kv;
	size_t n;
};

/* Value of key, or NULL. */
const char *model_map_get(const struct model_map *m, const char *key);
/* Sets key to value (both copied into a), keeping the map sorted and its
 * keys unique. Returns 0 or CSID_ENOMEM. */
int model_map_put(struct arena *a, struct model_map *m, const char *key, const char *value,
		  struct err *e);
/* Whether a and b hold the same pairs. */
bool model_map_equal(const struct model_map *a, const struct model_map *b);

struct model_capability {
	enum model_access access;
	enum model_attachment attachment;
};

/* One topology segment set ({"zone": "a", "rack": "7"}). */
struct model_topology {
	struct model_map segments;
};

/* Whether node (a node plugin's accessible topology) satisfies t: every
 * segment of t is present in node with the same value. */
bool model_topology_match(const struct model_topology *t, const struct model_topology *node);

enum model_claim_mode { MODEL_CLAIM_READ, MODEL_CLAIM_WRITE };

/*
 * Claim lifecycle (a table in model.c; every change goes through
 * model_claim_transition): claimed -> node-unpublished ->
 * controller-unpublished -> freed (moved to past claims) -> removed
 * (dropped from past claims). A claim may skip forward only to freed: an
 * operator's force-free goes from claimed or node-unpublished straight to
 * freed (a plugin without controller publish goes node-unpublished ->
 * controller-unpublished -> freed in one write). It never goes back and
 * never stays put (from == to is refused: callers test the state first).
 *   claimed                 -> node-unpublished, freed
 *   node-unpublished        -> controller-unpublished, freed
 *   controller-unpublished  -> freed
 *   freed                   -> removed
 *   removed                 -> (none)
 */
enum model_claim_state {
	MODEL_CLAIM_CLAIMED,
	MODEL_CLAIM_NODE_UNPUBLISHED,
	MODEL_CLAIM_CONTROLLER_UNPUBLISHED,
	MODEL_CLAIM_FREED,
	MODEL_CLAIM_REMOVED, /* final: the claim is gone (never stored) */
};
#define MODEL_CLAIM_STATE_COUNT 5

const char *model_claim_state_name(enum model_claim_state s);
int model_claim_state_parse(const char *s, enum model_claim_state *out, struct err *e);
const char *model_claim_mode_name(enum model_claim_mode m);
int model_claim_mode_parse(const char *s, enum model_claim_mode *out, struct err *e);

struct model_claim {
	char *alloc_id;
	char *node_id; /* csid node */
	char *plugin_node_id; /* the plugin's CSI node ID at claim time */
	enum model_claim_mode mode;
	struct model_capability cap;
	bool read_only;
	enum model_claim_state state;
	int64_t claimed_ms; /* wall clock */
	int64_t updated_ms;
	char *note; /* why it moved last ("released", "force-freed: skipped ..."), or NULL */
	/*
	 * The agent of the node made this claim for its own mount flow
	 * (`csictl volume mount`): the server releases it once that agent no
	 * longer reports the allocation (server_gc.c). A claim an external
	 * scheduler made through the API is never collected that way.
	 */
	bool held_by_agent;
	/*
	 * The claim's node reported NodeExpandVolume done for the volume's
	 * current node_expansion_required (server_volume_node_expanded).
	 */
	bool node_expanded;
};

/* Whether the claim lifecycle allows from -> to. */
bool model_claim_can_move(enum model_claim_state from, enum model_claim_state to);
/*
 * Moves c to state `to` at now_ms with note (copied into a, may be NULL),
 * logging "claim <vol>/<alloc>: from -> to". Returns 0, or CSID_EPRECOND
 * when the table forbids it (c unchanged), or CSID_ENOMEM.
 */
int model_claim_transition(struct arena *a, const char *volume_id, struct model_claim *c,
			   enum model_claim_state to, const char *note, int64_t now_ms,
			   struct err *e);

/* Controller publication of a volume to one node (ControllerPublishVolume). */
enum model_pub_state {
	MODEL_PUB_PUBLISHING, /* wanted; ControllerPublishVolume not yet OK */
	MODEL_PUB_PUBLISHED, /* done; context recorded */
	MODEL_PUB_UNPUBLISHING, /* no claim needs it; ControllerUnpublishVolume due */
};

const char *model_pub_state_name(enum model_pub_state s);

struct model_publication {
	char *node_id;
	char *plugin_node_id;
	struct model_capability cap;
	bool read_only;
	enum model_pub_state state;
	struct model_map context; /* publish_context, passed to the node */
};

enum model_volume_state {
	MODEL_VOL_CREATING, /* CreateVolume due */
	MODEL_VOL_REGISTERING, /* existing volume: ValidateVolumeCapabilities due */
	MODEL_VOL_READY, /* usable */
	MODEL_VOL_DELETING, /* DeleteVolume due once every claim is freed, then deregistered */
	MODEL_VOL_FAILED, /* a final error during create/register: see status */
};

const char *model_volume_state_name(enum model_volume_state s);

/* What the reconciler last saw for the volume (kept in memory and shown). */
struct model_status {
	char *last_error; /* NULL when the last attempt succeeded */
	int attempts; /* failed attempts in a row */
	int64_t next_attempt_ms; /* wall clock, 0: none scheduled */
};

struct model_volume {
	/* spec */
	char *id;
	char *name; /* the CreateVolume name (defaults to id) */
	char *plugin_id;
	char *external_id; /* the plugin's volume ID; NULL until created */
	int64_t capacity_min; /* required_bytes, 0: unset */
	int64_t capacity_max; /* limit_bytes, 0: unset */
	struct model_capability *caps;
	size_t ncaps;
	char *fs_type;
	char **mount_flags; /* secret-like: never shown */
	size_t nmount_flags;
	struct model_map parameters;
	struct model_map mutable_parameters;
	struct model_map secrets;
	struct model_map context; /* volume_context */
	struct model_topology *requisite;
	size_t nrequisite;
	struct model_topology *preferred;
	size_t npreferred;
	char *snapshot_source; /* snapshot ID (ours), or NULL */
	char *clone_source; /* volume ID (ours), or NULL */

	/* observed */
	enum model_volume_state state;
	int64_t capacity; /* bytes, as the plugin reported */
	struct model_topology *accessible;
	size_t naccessible;
	bool node_expansion_required;
	/* state failed: the final error that failed it (kept in the store, shown) */
	char *failure;
	/* wanted changes the reconciler has not applied yet (0 / empty: none) */
	int64_t pending_capacity_min;
	struct model_map pending_mutable;

	struct model_claim *claims; /* active (state < FREED) */
	size_t nclaims;
	struct model_claim *past_claims; /* freed, newest last, at most MODEL_PAST_CLAIMS_MAX */
	size_t npast_claims;
	struct model_publication *pubs;
	size_t npubs;

	int64_t created_ms;
	int64_t updated_ms;
	uint64_t create_index; /* from the store, not encoded */
	uint64_t modify_index;

	/* filled by the server for the API view, never stored */
	struct model_status status;
	bool schedulable;
	char *plugin_health; /* "healthy" or why not */
	bool plugin_registered; /* some node or this server offers the plugin */
};

enum model_snapshot_state {
	MODEL_SNAP_CREATING,
	MODEL_SNAP_READY,
	MODEL_SNAP_DELETING,
	MODEL_SNAP_FAILED
};
const char *model_snapshot_state_name(enum model_snapshot_state s);

struct model_snapshot {
	char *id;
	char *volume_id; /* source volume (ours) */
	char *plugin_id;
	char *external_id; /* the plugin's snapshot ID; NULL until created */
	char *name; /* the CreateSnapshot name (defaults to id) */
	struct model_map parameters;
	struct model_map secrets;
	enum model_snapshot_state state;
	bool ready_to_use;
	int64_t size_bytes;
	int64_t creation_time_ms;
	char *failure; /* state failed: the final error that failed it */
	int64_t created_ms;
	uint64_t create_index;
	uint64_t modify_index;
	struct model_status status; /* filled by the server, never stored */
};

enum model_plugin_type { MODEL_PLUGIN_CONTROLLER, MODEL_PLUGIN_NODE };
/* "controller" / "node". */
const char *model_plugin_type_name(enum model_plugin_type t);

/* One plugin as a node's fingerprint reports it. */
struct model_node_plugin {
	char *plugin_id;
	enum model_plugin_type type;
	bool healthy;
	char *health; /* description */
	char *version;
	char **caps; /* capability names ("PUBLISH_UNPUBLISH_VOLUME", "STAGE_UNSTAGE_VOLUME") */
	size_t ncaps;
	char *plugin_node_id; /* node plugins */
	int64_t max_volumes;
	struct model_topology topology; /* node plugins */
};

enum model_node_status { MODEL_NODE_READY, MODEL_NODE_DOWN };
/* "ready" / "down". */
const char *model_node_status_name(enum model_node_status s);

/* One allocation a node's agent holds a mount for (or is mounting): its report. */
struct model_node_alloc {
	char *volume_id;
	char *alloc_id;
};

struct model_node {
	char *id;
	/*
	 * The registering agent's instance ID (optional): while a node is
	 * live, the server refuses a fingerprint from another instance, so two
	 * agents configured with one node name cannot take turns.
	 */
	char *instance_id;
	enum model_node_status status;
	int64_t registered_ms;
	int64_t updated_ms;
	char *address; /* the agent's API address, or NULL */
	struct model_node_plugin *plugins;
	size_t nplugins;
	/*
	 * The allocations report ("allocations"): sent by an agent with every
	 * fingerprint, kept in the server's memory, never in the node record
	 * (the server strips it before it stores the node). allocs_reported
	 * false: the key was absent (an operator's PUT, an agent that does not
	 * report yet), which is not the same as an empty report.
	 */
	bool allocs_reported;
	struct model_node_alloc *allocs;
	size_t nallocs;
	uint64_t create_index;
	uint64_t modify_index;
};

/* Checks an ID as above; what names the field ("volume id"). The message
 * quotes at most a short, sanitised prefix of a hostile input. */
int model_id_check(const char *what, const char *id, size_t len, struct err *e);
int model_plugin_id_check(const char *id, struct err *e);

/*
 * Validates a volume spec (as submitted) and reports every problem at
 * once: e->msg is "volume spec: <problem>; <problem>; ..." (bounded) and
 * the code CSID_EINVAL. for_create: CreateVolume fields are checked
 * (no external_id allowed; snapshot/clone source at most one); otherwise
 * (register) external_id is required.
 */
int model_volume_validate(const struct model_volume *v, bool for_create, struct err *e);

/* Validates a snapshot spec (id, volume_id, name, maps), every problem at
 * once: "snapshot spec: ...", CSID_EINVAL. */
int model_snapshot_validate(const struct model_snapshot *s, struct err *e);
/* Validates a node fingerprint (id, plugin IDs, types, sizes, no plugin
 * twice with one type), every problem at once: "node: ...", CSID_EINVAL. */
int model_node_validate(const struct model_node *n, struct err *e);

/* Which encoding: what the store keeps (secrets included), or what the API shows. */
enum model_view { MODEL_VIEW_STORE, MODEL_VIEW_API };

/*
 * JSON text of an object (malloc'd, NUL-terminated, *len without the NUL;
 * free with free(); the caller wipes a MODEL_VIEW_STORE text that holds
 * secrets with model_wipe_free). Returns 0 or CSID_ENOMEM.
 */
int model_volume_encode(const struct model_volume *v, enum model_view view, char **out, size_t *len,
			struct err *e);
int model_snapshot_encode(const struct model_snapshot *s, enum model_view view, char **out,
			  size_t *len, struct err *e);
/*
 * The answer of a claim that waited, written in one go: {"volume": v's
 * API view, "claim": c, "publication": p (each NULL: null),
 * "publication_state": state, and unless stage is NULL "node_stage":
 * {"secrets", "mount_flags", "fs_type"} of stage (the volume as stored:
 * v may be a view without them)}, as model_volume_encode writes each
 * part. With stage the text holds secrets: the caller wipes it
 * (model_wipe_free). Returns 0 or CSID_ENOMEM.
 */
int model_claim_answer_encode(const struct model_volume *v, const struct model_claim *c,
			      const struct model_publication *p, const char *state,
			      const struct model_volume *stage, char **out, size_t *len,
			      struct err *e);
int model_node_encode(const struct model_node *n, char **out, size_t *len, struct err *e);
/*
 * The API view of a node: as model_node_encode, but instance_id (which
 * proves an agent is the node's, see server_node_instance_check) is
 * replaced by "instance_tag", model_node_instance_tag of it.
 */
int model_node_encode_api(const struct model_node *n, char **out, size_t *len, struct err *e);

/*
 * The header an agent's requests for its node carry: the agent's instance
 * ID, which proves it is the node's agent (a credential: never logged).
 */
#define MODEL_NODE_INSTANCE_HEADER "X-Csid-Node-Instance"
/* Hex digits of an instance tag. */
#define MODEL_INSTANCE_TAG_LEN 8
/*
 * A short tag of an agent's instance ID that tells agents apart in
 * answers, messages and logs without giving the ID away (the ID is a
 * credential: it never appears in any of them).
 */
void model_node_instance_tag(const char *instance_id, char out[MODEL_INSTANCE_TAG_LEN + 1]);
/* Zeroes then frees a text that may hold secrets. NULL is a no-op. */
void model_wipe_free(char *text, size_t len);
/* Zeroes every string value in a JSON value (a secrets map, mount flags) before it is freed. */
void model_json_wipe(json_t *v);

/*
 * Decoders of the store encoding (trusted, but still checked: a damaged
 * record gives CSID_EPROTO, never a crash). Everything goes into a.
 */
int model_volume_decode(struct arena *a, const char *json, size_t len, struct model_volume **out,
			struct err *e);
int model_snapshot_decode(struct arena *a, const char *json, size_t len,
			  struct model_snapshot **out, struct err *e);
int model_node_decode(struct arena *a, const char *json, size_t len, struct model_node **out,
		      struct err *e);

/*
 * A volume's claim history, the record of its freed claims kept apart
 * from the volume record (store kind STORE_CLAIM_HISTORY, ID the
 * volume's; server/server_pastclaims.h): {"past_claims": [claim]}, newest
 * last. The decoder puts the claims into a; it returns 0, CSID_ENOMEM or
 * CSID_EPROTO for a damaged record.
 */
int model_history_decode(struct arena *a, const char *json, size_t len, struct model_claim **out,
			 size_t *n, struct err *e);
/*
 * Where the claims of a history record's text (len bytes) are: the
 * object of claim i from byte start[i] to end[i], oldest first, at most
 * MODEL_PAST_CLAIMS_MAX (the newest).
 */
struct model_history_map {
	size_t len, n;
	uint32_t start[MODEL_PAST_CLAIMS_MAX], end[MODEL_PAST_CLAIMS_MAX];
};

/*
 * The history record old (old_len bytes; 0: none yet) with c[0..n)
 * appended, the oldest dropped past MODEL_PAST_CLAIMS_MAX: the kept
 * claims' text is copied, not decoded and encoded again (a release of a
 * volume with a full history decoded and re-encoded 16 claims: 188 K
 * instructions). Unknown keys of old are dropped. known: old's map, as
 * made by the append that wrote old (NULL: none; one that does not fit
 * old is not used), which spares reading old through (86 K instructions
 * at 16 claims). Returns 0 with *out (malloc'd, free with free(); a claim
 * holds no secret) and, when made is not NULL, its map; CSID_ENOMEM; or
 * CSID_EPROTO when old is not a history record (its claims' own fields
 * are checked by the decoder, when the history is read).
 */
int model_history_append(const char *old, size_t old_len, const struct model_history_map *known,
			 const struct model_claim *c, size_t n, char **out, size_t *len,
			 struct model_history_map *made, struct err *e);

/*
 * Decodes a volume spec from outside (API body or spec file): strict JSON
 * object, only the spec keys, right types, sizes within the CSI limits;
 * "#" or "//" comment lines are allowed when allow_comments (spec files).
 * An unknown key is refused with its path ("capabilities[1].acces_mode:
 * unknown key"). Does not validate semantics: call model_volume_validate.
 * Returns 0 and *out (in a), or CSID_EINVAL / CSID_ETOOBIG with e set
 * (never echoing a secret).
 */
int model_volume_spec_decode(struct arena *a, const char *text, size_t len, bool allow_comments,
			     struct model_volume **out, struct err *e);

/*
 * Strict decoders of the other bodies from outside, as
 * model_volume_spec_decode (no comments): a snapshot spec {"id",
 * "volume_id", "name", "parameters", "secrets"} (PUT /v1/snapshot/<id>),
 * and a node fingerprint in the node JSON shape (PUT /v1/node/<id>; its
 * "status" and times are ignored by the server). Call the matching
 * *_validate next.
 */
int model_snapshot_spec_decode(struct arena *a, const char *text, size_t len,
			       struct model_snapshot **out, struct err *e);
int model_node_spec_decode(struct arena *a, const char *text, size_t len, struct model_node **out,
			   struct err *e);

/*
 * Blanks the whole-line comments ("#" or "//" after blanks) of a spec
 * file's text in place, keeping line numbers: what is left is plain JSON
 * for the API. model_volume_spec_decode does this itself when
 * allow_comments.
 */
void model_spec_uncomment(char *s, size_t len);

/* A commented example spec file (for `csictl volume init`); static text. */
const char *model_volume_spec_example(void);

/* Parses "10GiB", "500M", "1073741824" into bytes; CSID_EINVAL / CSID_ERANGE. */
int model_parse_size(const char *s, int64_t *out, struct err *e);

/* Deep copy of v into a (to change a decoded volume safely). */
int model_volume_copy(struct arena *a, const struct model_volume *v, struct model_volume **out,
		      struct err *e);

/* Deep copies of a snapshot and of a node into a. */
int model_snapshot_copy(struct arena *a, const struct model_snapshot *s,
			struct model_snapshot **out, struct err *e);
int model_node_copy(struct arena *a, const struct model_node *n, struct model_node **out,
		    struct err *e);

/* The active claim of alloc_id, or NULL. */
struct model_claim *model_volume_claim(const struct model_volume *v, const char *alloc_id);
/* The publication for node_id, or NULL. */
struct model_publication *model_volume_pub(const struct model_volume *v, const char *node_id);

/*
 * Moves the active claim of alloc_id to state `to` (model_claim_transition).
 * Reaching freed moves it from claims to past_claims (newest last); when
 * past_claims would hold more than MODEL_PAST_CLAIMS_MAX, the oldest is
 * removed (freed -> removed, logged). New arrays come from a. Returns 0,
 * CSID_ENOTFOUND (no active claim of alloc_id), CSID_EPRECOND (the table
 * forbids it, v unchanged) or CSID_ENOMEM.
 */
int model_volume_claim_move(struct arena *a, struct model_volume *v, const char *alloc_id,
			    enum model_claim_state to, const char *note, int64_t now_ms,
			    struct err *e);

/*
 * Whether a node whose plugin reports topology node (NULL: none) can reach
 * v: it matches one of v's accessible topologies, or, when the plugin
 * reported none (a registered volume), one of the requisite ones; a
 * volume with neither is reachable from everywhere.
 */
bool model_volume_reachable(const struct model_volume *v, const struct model_topology *node);

#endif
