/*
 * A scripted fake controller plugin for the reconciler's tests. Its
 * struct csi_client answers the controller RPCs like a zero-latency plugin
 * that keeps its volumes, snapshots and publications in memory (create is
 * idempotent by name, delete and unpublish of what is gone answer OK,
 * publish of a missing volume NOT_FOUND, ...). On top of that default, a
 * test scripts answers per RPC (the next n calls answer a gRPC code),
 * fails every call that names one volume, delays calls (real time, for
 * threaded tests), and reads back a log of every call and the largest
 * number of calls that were in flight at once.
 *
 * csi_fake_controllers() gives the reconciler's controller seam over a
 * list of fakes (one per plugin ID); a fake can be marked down
 * (acquire answers CSID_EUNAVAIL) or without controller service
 * (CSID_ENOTFOUND). Thread-safe.
 */
#ifndef CSID_TEST_CSI_FAKE_H
#define CSID_TEST_CSI_FAKE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "csi/csi_client.h"
#include "server/reconciler.h"

#define CSI_FAKE_MAX 256 /* volumes, snapshots, publications, scripted answers */
#define CSI_FAKE_LOG 4096
#define CSI_FAKE_ID 128

/* Every controller capability csi-hostpath has, as acquire reports them. */
#define CSI_FAKE_CAPS_ALL                                                                    \
	((1ULL << 1) | (1ULL << 2) | (1ULL << 3) | (1ULL << 5) | (1ULL << 6) | (1ULL << 7) | \
	 (1ULL << 8) | (1ULL << 9) | (1ULL << 14))

/* One call as the fake saw it. */
struct csi_fake_call {
	enum csi_rpc rpc;
	char volume[CSI_FAKE_ID]; /* the plugin volume ID (or the name for CreateVolume) */
	char node[CSI_FAKE_ID]; /* publish / unpublish */
	char snapshot[CSI_FAKE_ID]; /* snapshot name or ID */
	bool readonly; /* publish */
	int64_t required_bytes; /* create, expand */
	size_t nsecrets;
	int code; /* what it answered */
};

struct csi_fake_vol {
	char id[CSI_FAKE_ID];
	char name[CSI_FAKE_ID];
	int64_t capacity;
	char source[CSI_FAKE_ID]; /* snapshot or volume it was made from, "" none */
	int modified; /* ControllerModifyVolume calls */
};

struct csi_fake_snap {
	char id[CSI_FAKE_ID];
	char name[CSI_FAKE_ID];
	char volume[CSI_FAKE_ID];
	int polls; /* CreateSnapshot and ListSnapshots answers about it */
};

struct csi_fake_pub {
	char volume[CSI_FAKE_ID];
	char node[CSI_FAKE_ID];
	bool readonly;
};

struct csi_fake {
	struct csi_client client; /* first: handed out by the seam */
	const char *plugin_id;
	uint64_t caps; /* ControllerGetCapabilities bits; CSI_FAKE_CAPS_ALL by default */
	bool down; /* acquire: CSID_EUNAVAIL */
	bool no_controller; /* acquire: CSID_ENOTFOUND */
	int snapshot_polls; /* answers about a snapshot with ready_to_use=false first */
	bool node_expansion; /* ControllerExpandVolume asks for node expansion */
	int delay_ms; /* real delay of every call */
	/* Called (no lock held) after the fake answered a call, before it returns. */
	void (*hook)(void *ctx, enum csi_rpc rpc, int code);
	void *hook_ctx;
	bool confirm_none; /* ValidateVolumeCapabilities confirms nothing */
	struct csi_fake *next; /* the seam's list */

	pthread_mutex_t mu;
	/* Scripted answers: the next calls of an RPC answer these codes first. */
	struct {
		enum csi_rpc rpc;
		int code;
	} script[CSI_FAKE_MAX];
	int nscript;
	char fail_volume[CSI_FAKE_ID]; /* every call naming this volume (name or ID) fails */
	int fail_volume_code;

	struct csi_fake_vol vols[CSI_FAKE_MAX];
	int nvols;
	struct csi_fake_snap snaps[CSI_FAKE_MAX];
	int nsnaps;
	struct csi_fake_pub pubs[CSI_FAKE_MAX];
	int npubs;
	int next_id;

	struct csi_fake_call log[CSI_FAKE_LOG];
	int nlog; /* calls logged (at most CSI_FAKE_LOG kept) */
	int calls[CSI_RPC_COUNT];
	int in_flight;
	int max_in_flight;
	int acquired; /* clients handed out and not released */
};

void csi_fake_init(struct csi_fake *f, const char *plugin_id);
void csi_fake_fini(struct csi_fake *f);
/* The next n calls of rpc answer code (after those scripted before). */
void csi_fake_script(struct csi_fake *f, enum csi_rpc rpc, int code, int n);
/* Every call naming volume (CreateVolume name or volume ID) answers code; 0 stops. */
void csi_fake_fail_volume(struct csi_fake *f, const char *volume, int code);
/* Calls of rpc so far. */
int csi_fake_calls(struct csi_fake *f, enum csi_rpc rpc);
/* Whether the fake holds a volume named name / a publication of volume ID on node. */
bool csi_fake_has_volume(struct csi_fake *f, const char *name);
bool csi_fake_has_pub(struct csi_fake *f, const char *volume_id, const char *node);
bool csi_fake_has_snapshot(struct csi_fake *f, const char *name);
/* The plugin volume ID of the volume named name ("" when none), copied into out. */
void csi_fake_volume_id(struct csi_fake *f, const char *name, char *out, size_t len);

/* The reconciler's controller seam over the list starting at first (linked by next). */
struct reconciler_controllers csi_fake_controllers(struct csi_fake *first);

#endif
