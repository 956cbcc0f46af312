/*
 * The node's claim flow: a volume of the csid servers mounted on this
 * node for an allocation, and unmounted again. Every front end of the
 * agent (its HTTP API, the Docker volume plugin bridge) calls these
 * functions; none of them speaks to the servers or the database itself.
 *
 * A mount (claims_mount) reads the volume on a server, waits for the
 * volume's node plugin to be healthy here, claims the volume for the
 * allocation on this node (the server checks the claim rules; a claim
 * answered failed_precondition is retried while the volume or the
 * node's fingerprint is not ready), follows the volume with blocking
 * queries until its publication to this node is published (or its
 * plugin needs no ControllerPublishVolume), reads the node-stage data
 * (secrets, mount flags, fs_type: claims_stage.h), mounts through the
 * mounter (the mount's record marked as the claim flow's from its first
 * write on, agent/mount_store.h) and records its owner (agent/owners_watch.h). The allocation is in
 * the agent's report of held allocations (agent/held_allocs.h) from before the claim goes out until
 * its mount record exists. A mount that fails after the claim (or is rolled back once mounted)
 * takes down what it mounted and releases the claim at once (unless the allocation had it mounted
 * already: a repeated mount that fails leaves that mount and its claim), with the reason "mount
 * failed: <error>", through the same durable path as an unmount's release (below), so the volume is
 * free for another claim or its delete without waiting for the server's lost-claim pass
 * (server/server_gc.h).
 *
 * A volume grown with node_expansion_required is grown on this node too
 * (NodeExpandVolume through the mounter, then reported to the server):
 * by a background pass over the volumes the server's heartbeat answers
 * name (held_allocs_expand) while it is mounted here, and by a mount
 * right after it mounted (claims_expand.c).
 *
 * An unmount (claims_unmount) takes the mount down (unpublish, then
 * unstage when unused) and only then releases the claim, recorded
 * durably first (claims_state.h); a release no server answers stays
 * recorded and is retried with backoff (1 s doubling to 30 s) by
 * claims_step (claims_release.c). Nothing mounted counts as done, and so
 * does a release the server answers not_found, so an unmount may be
 * repeated. The allocation stays in the report until the release went.
 * When the owner watch finds a mount's owner gone, or a server names an
 * allocation released while the node was away (held_allocs_released),
 * the same unmount runs with the reason, which the release carries to
 * the server's claim note (claims_owners.c, claims_orphans.c).
 *
 * Seams, so the flow runs in tests without a network or real time: the
 * servers are reached through struct claims_client (the real one over
 * HTTP: agent/claims_http.h; a fake server: test/lib/claims_fake.h), the
 * node plugin through a mounter_lookup_fn, time through the clock. Every
 * deadline and pause of the flow is on that clock, so a fake clock in
 * auto-advance mode runs a 60 s publication wait at once. Without
 * threads (config.manual), nothing runs by itself: claims_step does the
 * due background work (orphans, pending releases) at the clock's now and
 * says when it is next due.
 *
 * Front ends: `csid agent` (src/cmd/csid/csid_agent.c) creates the
 * module with its client and hands it, borrowed, to every front end (the
 * agent HTTP API, the Docker volume plugin bridge), which stop before it
 * is freed. A front end calls claims_mount / claims_unmount for its
 * allocations and claims_server_request for anything else it asks the
 * servers (a volume's create, delete or read); it never owns the client.
 *
 * Thread-safety: every function may be called from any thread, except
 * claims_step (one thread, and only in manual mode) and claims_free.
 * Strings are borrowed for the call unless a comment says otherwise.
 * Secrets (node-stage data, the server token) never reach a message or
 * a log line.
 */
#ifndef CSID_AGENT_CLAIMS_H
#define CSID_AGENT_CLAIMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "agent/held_allocs.h"
#include "agent/mounter.h"
#include "agent/owners.h"
#include "util/clock.h"
#include "util/err.h"

/* How long a mount waits for its claim and for its publication (ms, on the clock). */
#define CLAIMS_WAIT_MS 60000
/* How long a patient server request retries while no server answers (ms). */
#define CLAIMS_SERVER_WAIT_MS 30000
/* The wait of one blocking query of the volume, and of the claim that waits. */
#define CLAIMS_BLOCK_WAIT "5s"
/*
 * The query of the claim that waits for the publication and answers the
 * node-stage data, with the volume as this node needs it (view=node: an
 * older server ignores it and answers the whole volume, which does too).
 */
#define CLAIMS_CLAIM_WAIT "?wait=" CLAIMS_BLOCK_WAIT "&node_stage=true&view=node"
/* Pauses between tries of an unanswered request (ms). */
#define CLAIMS_RETRY_MIN_MS 200
#define CLAIMS_RETRY_MAX_MS 3000
/* Backoff of the pending releases (ms). */
#define CLAIMS_RELEASE_MIN_MS 1000
#define CLAIMS_RELEASE_MAX_MS 30000
/* Node expansion passes (claims_expand.c): the first retry of a failure (ms). */
#define CLAIMS_EXPAND_MIN_MS 1000
/* Room for a server path with its query. */
#define CLAIMS_PATH_MAX 2048
/* Room for an access or attachment mode name. */
#define CLAIMS_MODE_MAX 64

/*
 * The seam to the csid servers. request: one request, each server tried
 * once in order until one answers; 0 with *status (the HTTP status) and
 * *text, the answer's bytes (*len of them, NUL-terminated; NULL when it
 * had none), which the caller zeroes and frees (wipe_free: a node-stage
 * answer holds secrets), or CSID_EUNAVAIL with e set when no server
 * answered (a 5xx counts as none). want_ok false: the caller needs only
 * the status of a 2xx answer, whose body a client may leave out (*text
 * NULL). body: JSON text or NULL. cancel: requests in flight and to come
 * give up at once with CSID_EUNAVAIL (the agent stops). Both are
 * thread-safe.
 */
struct claims_client {
	int (*request)(struct claims_client *c, const char *method, const char *path,
		       const char *body, bool want_ok, long *status, char **text, size_t *len,
		       struct err *e);
	void (*cancel)(struct claims_client *c);
};

struct claims_config {
	const char *node_name; /* copied; required */
	struct mounter *mounter; /* borrowed; required */
	/* The node plugin a mount goes through (waited for, a reference taken); required. */
	mounter_lookup_fn lookup;
	mounter_release_fn release; /* may be NULL */
	void *lookup_ctx;
	/* The allocations reported to the servers (borrowed); NULL: none reported. */
	struct held_allocs *held;
	/*
	 * The servers (borrowed; outlives the module); NULL: the agent joined
	 * no servers, mounts are refused, and nothing runs in the background.
	 */
	struct claims_client *client;
	/* The agent database, for the durable rows and the owners; NULL: nothing recorded. */
	const char *db_path;
	struct clock *clock; /* borrowed; NULL: the real clock */
	/* No thread of its own: the caller steps claims_step (tests; the owner watch still runs).
	 */
	bool manual;
};

struct claims;

/*
 * Opens the durable rows and, with a client, starts the owner watch and
 * (unless manual) the thread that sends pending releases and unmounts
 * orphans; with a db_path the pending releases of a previous run are
 * sent first. Returns 0 and *out, or a code with e set.
 */
int claims_new(const struct claims_config *cfg, struct claims **out, struct err *e);
/*
 * Makes every server request and wait in flight or to come give up at
 * once (CSID_EUNAVAIL) and stops the background work, so the front ends
 * can stop without waiting on a silent server. Call before stopping them.
 * The client is cancelled for good (claims_client.cancel). NULL is a
 * no-op.
 */
void claims_shutdown(struct claims *c);
/* Shuts down (if not yet) and frees; no call may be in progress. NULL is a no-op. */
void claims_free(struct claims *c);

/* A mount request. Borrowed for the call. */
struct claims_mount_req {
	const char *volume_id; /* the servers' volume ID (a path component) */
	const char *alloc_id; /* the allocation (a path component), e.g. a container's mount ID */
	bool read_only; /* claimed in mode "read", mounted read-only */
	/* The claim's capability; NULL: the volume's first one. */
	const char *access_mode; /* "single-node-writer", ... */
	const char *attachment_mode; /* "file-system" or "block-device" */
	/*
	 * The owner (NULL: none): the mount is released when it is gone. Its
	 * kind and pid, cgroup or lease_ms are read; a pid is checked to be
	 * live and its start time taken, a cgroup to be a live cgroup v2
	 * directory, before anything is claimed (CSID_EINVAL). Owners need a
	 * client (CSID_EPRECOND otherwise).
	 */
	const struct owners_spec *owner;
};

/* What a mount gives: the path and the claim. */
struct claims_mount_result {
	char path[MOUNTER_PATH_MAX]; /* the per-allocation target the plugin published to */
	char source[MOUNTER_PATH_MAX]; /* the staging path when staged, else the target */
	bool is_device; /* block-device attachment: path is a device file */
	/* The claim granted (its capability after the volume's defaults). */
	char access_mode[CLAIMS_MODE_MAX];
	char attachment_mode[CLAIMS_MODE_MAX];
	bool read_only;
};

/*
 * Claims req->volume_id for req->alloc_id on this node and mounts it.
 * Returns 0 with *out filled, or a code with e set: CSID_EINVAL (a bad
 * name or owner), CSID_EPRECOND (no servers; the claim still refused
 * after CLAIMS_WAIT_MS), the server's refusal of the claim as its code
 * (CSID_ECONFLICT: held elsewhere, with the server's message naming the
 * holder), CSID_ETIMEDOUT (not published after CLAIMS_WAIT_MS, with the
 * volume's last error), CSID_EUNAVAIL (no server answered, or the node
 * plugin is not healthy), or the mounter's code. A failure after the
 * claim says what became of the claim: "not mounted; the claim was
 * released", "...; the claim's release is pending" (no server answered:
 * retried in the background), or "claimed, not mounted; the claim is
 * kept" (the rollback's unmount failed: an unmount releases it).
 * Blocks for up to about two minutes; calls for different allocations
 * run in parallel.
 */
int claims_mount(struct claims *c, const struct claims_mount_req *req,
		 struct claims_mount_result *out, struct err *e);

/* What an unmount did. */
struct claims_unmount_result {
	bool unmounted; /* a mount was taken down (false: there was none) */
	bool released; /* the server released the claim */
	bool release_pending; /* no server took it: recorded, retried in the background */
	char release_error[ERR_MSG_MAX]; /* why it is pending ("" otherwise) */
};

/*
 * Unmounts volume vol for alloc (if mounted) and then releases the claim.
 * reason: why (a claim owner gone, the engine's unmount), carried by the
 * release to the server's claim note; NULL: asked by the allocation.
 * Returns 0 with *out (a release no server answered is pending, not an
 * error; one the server answers not_found means nothing was held), or a
 * code with e set: the unmount failed (the claim is kept), or the server
 * refused the release ("unmount again to retry").
 */
int claims_unmount(struct claims *c, const char *vol, const char *alloc, const char *reason,
		   struct claims_unmount_result *out, struct err *e);

/*
 * One request to the servers through the module's client, for front ends
 * that manage volumes (create, delete, get): method, path (with its
 * query; claims_volume_path builds one), body a JSON document or NULL
 * (borrowed). Retried with backoff on the clock while no server answers,
 * for at most CLAIMS_SERVER_WAIT_MS. Returns 0 and *doc (the caller
 * frees it; NULL when a 2xx answer had no JSON), or the csid code of the
 * server's error answer (its "code", else its HTTP status) with e holding
 * the server's message; CSID_EUNAVAIL: no server answered;
 * CSID_EPRECOND: the agent joined no servers.
 */
int claims_server_request(struct claims *c, const char *method, const char *path, json_t *body,
			  json_t **doc, struct err *e);

/*
 * "/v1/volume/<vol><rest>" with vol percent-escaped, in out (len bytes).
 * rest: "" or a suffix such as "/claim" or "?index=3". Returns 0, or
 * CSID_EINVAL (too long) with e set.
 */
int claims_volume_path(const char *vol, const char *rest, char *out, size_t len, struct err *e);

/*
 * Renews the lease that owns the mount of vol for alloc (lease_ms 0: the
 * lease's own length). Returns 0 with *out (the renewed owner), or
 * CSID_EINVAL / CSID_ENOTFOUND (no lease owner recorded) with e set.
 */
int claims_owner_renew(struct claims *c, const char *vol, const char *alloc, int64_t lease_ms,
		       struct owners_spec *out, struct err *e);
/*
 * Makes s the owner of the mount already made for vol and alloc, for a
 * front end that learns the owner only after the mount (the Docker
 * bridge finds a container's process once the engine started it): the
 * owner is checked as at mount time (CSID_EINVAL: a pid that is not
 * live; CSID_EPRECOND: no client), then recorded. Returns 0 or a code
 * with e set.
 */
int claims_owner_set(struct claims *c, const char *vol, const char *alloc, struct owners_spec *s,
		     struct err *e);
/* The releases recorded that no server has taken yet (for the metrics). */
size_t claims_releases_pending(struct claims *c);
/* A copy of every recorded owner (free *out). Returns 0 or CSID_ENOMEM. */
int claims_owners_list(struct claims *c, struct owners_entry **out, size_t *n);

/*
 * vol for alloc is about to be mounted without a claim (the agent's
 * low-level mount): such a mount is never unmounted for the servers, so
 * a mark a claim left is dropped. Returns 0 or a code with e set.
 */
int claims_mark_unclaimed(struct claims *c, const char *vol, const char *alloc, struct err *e);

/*
 * Manual mode: unmounts the orphans queued so far, then sends the
 * pending releases when they are due at the clock's now (at once after
 * an unmount left one pending; then with backoff while none is taken),
 * and runs the node expansion pass of the volumes the last heartbeat
 * answer named when it is due (at once when an answer named one anew;
 * after a failure from CLAIMS_EXPAND_MIN_MS doubling: claims_expand.c).
 * Returns the clock time
 * at which the pending releases are next due (the thread also wakes for
 * the next expansion pass).
 */
int64_t claims_step(struct claims *c);

#endif
