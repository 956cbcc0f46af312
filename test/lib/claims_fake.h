/*
 * A fake csid server behind the claim flow's client seam (struct
 * claims_client of agent/claims.h), for tests of the flow in virtual
 * time. It holds a few volumes and answers what the flow asks:
 *
 *   GET /v1/volume/<vol>[?index=N&wait=5s]   the volume (a blocking query
 *        whose index is current moves the fake clock by the wait, then
 *        publishes a pending publication when auto_publish is set)
 *   GET /v1/plugin/<plugin>                   {"controller_required"}
 *   PUT /v1/volume/<vol>/claim                the claim (or the scripted
 *        refusal), then the volume with its publication to the node
 *   PUT /v1/volume/<vol>/claim?wait=...       the same, answered as a
 *        claim that waits: {"volume", "claim", "publication",
 *        "publication_state", "node_stage"}; a pending publication is
 *        published at once with auto_publish, else the wait (5 s) passes
 *        on the clock and it is answered still publishing. An old_server
 *        ignores the wait and refuses a claim without access_mode (400),
 *        as servers before the claim that waits did.
 *   GET /v1/volume/<vol>/node-stage?alloc_id= the volume's secrets
 *   PUT /v1/volume/<vol>/release              drops the claim (404 when
 *        none), keeping the reason
 *
 * Faults: down (every request: CSID_EUNAVAIL, as if no server answered),
 * down_after_claim (down from the first granted claim on), a claim
 * refused with a status and code, a claim answered failed_precondition a
 * number of times first. Everything is counted.
 * Thread-safe (the owner watch releases from its own thread).
 */
#ifndef CSID_TEST_CLAIMS_FAKE_H
#define CSID_TEST_CLAIMS_FAKE_H

#include <pthread.h>
#include <stdbool.h>

#include "agent/claims.h"
#include "util/clock.h"

#define CLAIMS_FAKE_VOLS 4
#define CLAIMS_FAKE_CLAIMS 8
#define CLAIMS_FAKE_STR 256

struct claims_fake_volume {
	char id[CLAIMS_FAKE_STR];
	char plugin[CLAIMS_FAKE_STR];
	char access_mode[CLAIMS_FAKE_STR];
	bool controller_required; /* the claim makes a pending publication */
	bool auto_publish; /* a blocking query (or a claim's wait) publishes it */
	int publish_after; /* ... after this many waits that do not */
	long long modify_index;
	char pub_state[32]; /* "" none, "pending", "published" */
	char claims[CLAIMS_FAKE_CLAIMS][CLAIMS_FAKE_STR]; /* alloc IDs, "" free */
};

struct claims_fake {
	struct claims_client base; /* pass &fake->base as the client */
	pthread_mutex_t mu;
	struct clock_fake *clock; /* moved by blocking queries; may be NULL */
	char node[CLAIMS_FAKE_STR];
	struct claims_fake_volume vols[CLAIMS_FAKE_VOLS];
	int nvols;
	/* Faults. */
	bool down;
	bool down_after_claim; /* a granted claim sets down */
	int claim_status; /* 0: granted; else the HTTP status of a refusal */
	char claim_code[32]; /* its csid code name ("conflict") */
	int claim_precond; /* answer failed_precondition this many times first */
	bool old_server; /* a server before the claim that waits (above) */
	/* Called (without the lock) as each request arrives, before it is served; may be NULL. */
	void (*on_request)(void *ctx, const char *method, const char *path);
	void *on_request_ctx;
	/* Counts and the last release. */
	int requests, refused_down, claims_put, releases, releases_ok, blocking_queries,
	    stage_reads;
	int volume_reads, claim_waits, stage_answers; /* GETs of a volume; claims that waited */
	int cancels;
	int unwanted; /* requests served whose success answer the caller did not want parsed */
	int node_expanded; /* PUT /v1/volume/<id>/node-expanded */
	int64_t last_expanded; /* the capacity of the last one */
	char last_reason[512]; /* "" none */
	bool last_reason_null;
	int64_t release_times[16]; /* the clock at each release request (first 16) */
};

/* A fake server for node (no volume yet); clock may be NULL. */
void claims_fake_init(struct claims_fake *f, const char *node, struct clock_fake *clock);
void claims_fake_destroy(struct claims_fake *f);
/* Adds a volume of plugin with one capability (access mode, file-system); returns it. */
struct claims_fake_volume *claims_fake_add(struct claims_fake *f, const char *id,
					   const char *plugin, const char *access_mode);
/* Whether vol holds a claim of alloc. */
bool claims_fake_claimed(struct claims_fake *f, const char *vol, const char *alloc);
/* Sets down under the lock. */
void claims_fake_set_down(struct claims_fake *f, bool down);
/* The count of releases asked so far, under the lock. */
int claims_fake_releases(struct claims_fake *f);

#endif
