/*
 * Test helpers around csi-hostpath: temporary directories that are
 * cleaned even when mounts were left inside them, an in-process plugin on
 * the fake mount operations (unit tests call hp_handle directly), and the
 * real csi-hostpath binary started as a child process on a private socket
 * (integration and end-to-end tests). Polls use deadlines, never bare
 * sleeps. Any test may reuse them.
 */
#ifndef CSID_TEST_HOSTPATH_PROC_H
#define CSID_TEST_HOSTPATH_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "csi/csi_client.h"
#include "cmd/csi-hostpath/hostpath.h"

/* Makes a fresh directory /tmp/<prefix>-XXXXXX into buf (>= 64 bytes); 0 or -1. */
int hpp_mkdtemp(const char *prefix, char *buf, size_t len);
/* Unmounts (MNT_DETACH, deepest first) every mount at or below dir; returns how many. */
int hpp_umount_under(const char *dir);
/* Unmounts everything below path, then removes the tree. Missing path is fine. */
void hpp_rmrf(const char *path);
/* Writes text to path atomically (temporary file + rename); 0 or -1. */
int hpp_write_file(const char *path, const char *text);
/* Milliseconds on the monotonic clock. */
int64_t hpp_now_ms(void);
/* Sleeps ms milliseconds; only for poll loops with a deadline. */
void hpp_pause_ms(int ms);

/*
 * Something that sends one request and returns the gRPC code: the plugin
 * in process or a gRPC client. *resp (may be NULL) gets the response,
 * valid until the next call. The request helpers below take one.
 */
struct hpp_caller {
	int (*call)(void *ctx, enum csi_rpc rpc, const void *req, void *resp);
	void *ctx;
};

/* --- the plugin in process, on fake mounts --- */

struct hpp_inproc {
	struct hpp_caller caller; /* calls hpp_call on this plugin */
	char dir[64]; /* temp dir; the data dir is <dir>/data */
	char data[96];
	struct hp_mount_fake *fake;
	struct hp_plugin *p;
	struct arena *a; /* responses of the last call live here */
	char msg[CSI_STATUS_MSG_MAX];
};

/*
 * Starts a plugin: cfg may be NULL or set mode, flags, capacity, faults;
 * data_dir, ops (the fake, dirs not existing by default), node_id
 * ("node-1") and capacity (1 TiB) are filled in when unset. 0 or -1.
 */
int hpp_inproc_start(struct hpp_inproc *t, const struct hp_config *cfg);
/* Restarts the plugin on the same data dir (the fake mount table is kept). */
int hpp_inproc_restart(struct hpp_inproc *t, const struct hp_config *cfg);
void hpp_inproc_stop(struct hpp_inproc *t);
/*
 * Calls hp_handle with req (a request message of rpc's type); *resp (may be
 * NULL) gets the response, valid until the next call. Returns the gRPC code.
 */
int hpp_call(struct hpp_inproc *t, enum csi_rpc rpc, const void *req, void *resp);

/* A volume capability with its parts in one struct (no allocation). */
struct hpp_cap {
	Csi__V1__VolumeCapability cap;
	Csi__V1__VolumeCapability__AccessMode mode;
	Csi__V1__VolumeCapability__MountVolume mount;
	Csi__V1__VolumeCapability__BlockVolume block;
	Csi__V1__VolumeCapability *list[1]; /* {&cap}, for repeated fields */
};

/* Fills c as a block or mount (no fs type) capability with access mode; returns &c->cap. */
Csi__V1__VolumeCapability *hpp_cap(struct hpp_cap *c, bool block, int mode);
/*
 * CreateVolume of name (size range req/lim, block or mount, mode
 * SINGLE_NODE_WRITER); the volume ID goes to id (>= 64 bytes, may be
 * NULL) on success. Returns the gRPC code, as every helper below.
 */
int hpp_create(const struct hpp_caller *c, const char *name, int64_t req, int64_t lim, bool block,
	       char *id);
int hpp_delete(const struct hpp_caller *c, const char *vol);
/* ControllerPublishVolume / ControllerUnpublishVolume of vol on node. */
int hpp_ctl_publish(const struct hpp_caller *c, const char *vol, const char *node, bool block,
		    int mode, bool ro);
int hpp_ctl_unpublish(const struct hpp_caller *c, const char *vol, const char *node);
/* NodeStageVolume / NodeUnstageVolume of vol at path. */
int hpp_stage(const struct hpp_caller *c, const char *vol, const char *path, bool block, int mode);
int hpp_unstage(const struct hpp_caller *c, const char *vol, const char *path);
/* NodePublishVolume / NodeUnpublishVolume of vol at target. */
int hpp_publish(const struct hpp_caller *c, const char *vol, const char *staging,
		const char *target, bool block, int mode, bool ro);
int hpp_unpublish(const struct hpp_caller *c, const char *vol, const char *target);

/* --- the real binary --- */

struct hpp_proc {
	char dir[64]; /* temp dir holding the socket, data, faults */
	char endpoint[128]; /* unix://<dir>/csi.sock */
	char data[96];
	char faults[96]; /* <dir>/faults (passed with --faults) */
	char log[96]; /* the plugin's stderr */
	pid_t pid;
};

/*
 * Creates the temp dir and starts CSI_HOSTPATH_BIN with --endpoint,
 * --data-dir, --faults, --node-id node-1 and the extra arguments (NULL
 * terminated, may be NULL); waits up to 10 s for the socket to accept.
 * 0 or -1.
 */
int hpp_proc_start(struct hpp_proc *h, const char *const *extra);
/* Starts the binary again on the same dir (after a kill). 0 or -1. */
int hpp_proc_restart(struct hpp_proc *h, const char *const *extra);
/* Sends sig and reaps the process (at most 10 s; then SIGKILL). Returns its wait status. */
int hpp_proc_kill(struct hpp_proc *h, int sig);
/* Waits up to ms for the process to exit by itself; its wait status or -1. */
int hpp_proc_wait_exit(struct hpp_proc *h, int ms);
/* Stops the process if running, unmounts and removes the temp dir. */
void hpp_proc_cleanup(struct hpp_proc *h);
/* A gRPC client to a plugin that keeps the last response until the next call. */
struct hpp_client {
	struct hpp_caller caller; /* calls hpp_client_call with the default deadline */
	struct csi_client *c;
	ProtobufCMessage *last;
	struct csi_status st; /* status of the last call */
};

/* Connects to endpoint; 0 or -1. */
int hpp_client_open(struct hpp_client *cl, const char *endpoint);
void hpp_client_close(struct hpp_client *cl);
/*
 * Calls rpc with req and a deadline of timeout_ms (0 = 10 s); *resp (may
 * be NULL) gets the response, valid until the next call. Returns the gRPC code.
 */
int hpp_client_call(struct hpp_client *cl, enum csi_rpc rpc, const void *req, void *resp,
		    int timeout_ms);
/* Repeats Probe until it answers OK (e.g. after a restart), at most ms. 0 or -1. */
int hpp_client_wait_ready(struct hpp_client *cl, int ms);

/*
 * ListVolumes of the plugin at endpoint (one page of up to 1000): the
 * volume IDs into ids (at most max) and, when published is not NULL,
 * whether each is published to a node. Returns how many, or -1.
 */
int hpp_list_volumes(const char *endpoint, char ids[][80], bool *published, int max);

/* VmHWM (peak RSS) of pid in KiB, or -1. */
long hpp_vmhwm_kb(pid_t pid);
/* Waits until a unix socket accepts connections, at most ms. 0 or -1. */
int hpp_wait_socket(const char *path, int ms);

#endif
