/*
 * Test helpers for csi-hostpath (see hostpath_proc.h). Mount cleanup reads
 * /proc/self/mountinfo and detaches every mount below the test's temporary
 * directory, deepest first, so a failed test never leaves a mount behind.
 */
#include "hostpath_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "proc_guard.h"
#include "util/arena.h"

/* Longest wait for a started plugin to accept on its socket. */
#define HPP_START_MS 60000

int64_t hpp_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hpp_pause_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

int hpp_mkdtemp(const char *prefix, char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/%s-XXXXXX", prefix);
	return mkdtemp(buf) ? 0 : -1;
}

static void hpp_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] && s[3]) {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/* One pass: detaches the deepest mount below dir; returns 1 if one was found. */
static int hpp_umount_one(const char *dir)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL, best[4096] = "";
	size_t cap = 0, dlen = strlen(dir);

	if (!f)
		return 0;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *tok, *mp = NULL;
		int i = 0;

		for (tok = strtok_r(line, " ", &save); tok && i < 5;
		     tok = strtok_r(NULL, " ", &save), i++)
			if (i == 4)
				mp = tok;
		if (!mp)
			continue;
		hpp_unescape(mp);
		if (strncmp(mp, dir, dlen) != 0 || (mp[dlen] != '/' && mp[dlen] != '\0'))
			continue;
		if (strlen(mp) >= strlen(best))
			snprintf(best, sizeof(best), "%s", mp);
	}
	free(line);
	fclose(f);
	if (!best[0])
		return 0;
	return umount2(best, MNT_DETACH) == 0 ? 1 : 0;
}

int hpp_umount_under(const char *dir)
{
	int n = 0;

	while (n < 10000 && hpp_umount_one(dir))
		n++;
	return n;
}

static int hpp_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	remove(path);
	return 0;
}

void hpp_rmrf(const char *path)
{
	if (!path || !path[0])
		return;
	hpp_umount_under(path);
	nftw(path, hpp_rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

int hpp_write_file(const char *path, const char *text)
{
	char tmp[4200];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "we");
	if (!f)
		return -1;
	fputs(text, f);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

/* --- in process --- */

static int hpp_inproc_open(struct hpp_inproc *t, const struct hp_config *cfg)
{
	struct hp_config c = {0};
	struct err e;

	if (cfg)
		c = *cfg;
	else
		c.controller_publish = true;
	c.data_dir = t->data;
	if (!c.ops) {
		c.ops = &hp_mount_fake_ops;
		c.ops_ctx = t->fake;
	}
	if (!c.node_id)
		c.node_id = "node-1";
	if (!c.capacity)
		c.capacity = 1LL << 40;
	if (hp_new(&c, &t->p, &e) != 0) {
		fprintf(stderr, "hp_new: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static int hpp_inproc_caller_call(void *ctx, enum csi_rpc rpc, const void *req, void *resp)
{
	return hpp_call(ctx, rpc, req, resp);
}

int hpp_inproc_start(struct hpp_inproc *t, const struct hp_config *cfg)
{
	memset(t, 0, sizeof(*t));
	t->caller.call = hpp_inproc_caller_call;
	t->caller.ctx = t;
	if (hpp_mkdtemp("csid-hp", t->dir, sizeof(t->dir)) != 0)
		return -1;
	snprintf(t->data, sizeof(t->data), "%s/data", t->dir);
	t->fake = hp_mount_fake_new(false);
	if (!t->fake)
		return -1;
	return hpp_inproc_open(t, cfg);
}

int hpp_inproc_restart(struct hpp_inproc *t, const struct hp_config *cfg)
{
	hp_free(t->p);
	t->p = NULL;
	return hpp_inproc_open(t, cfg);
}

void hpp_inproc_stop(struct hpp_inproc *t)
{
	hp_free(t->p);
	t->p = NULL;
	arena_free(t->a);
	t->a = NULL;
	hp_mount_fake_free(t->fake);
	t->fake = NULL;
	hpp_rmrf(t->dir);
}

int hpp_call(struct hpp_inproc *t, enum csi_rpc rpc, const void *req, void *resp)
{
	ProtobufCMessage *r = NULL;
	int code;

	arena_free(t->a);
	t->a = arena_new();
	t->msg[0] = '\0';
	code = hp_handle(t->p, rpc, req, &r, t->a, t->msg);
	if (resp)
		*(ProtobufCMessage **)resp = r;
	return code;
}

Csi__V1__VolumeCapability *hpp_cap(struct hpp_cap *c, bool block, int mode)
{
	csi__v1__volume_capability__init(&c->cap);
	csi__v1__volume_capability__access_mode__init(&c->mode);
	csi__v1__volume_capability__mount_volume__init(&c->mount);
	csi__v1__volume_capability__block_volume__init(&c->block);
	c->mode.mode = mode;
	c->cap.access_mode = &c->mode;
	if (block) {
		c->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK;
		c->cap.block = &c->block;
	} else {
		c->cap.access_type_case = CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT;
		c->cap.mount = &c->mount;
	}
	c->list[0] = &c->cap;
	return &c->cap;
}

int hpp_create(const struct hpp_caller *c, const char *name, int64_t req, int64_t lim, bool block,
	       char *id)
{
	Csi__V1__CreateVolumeRequest r = CSI__V1__CREATE_VOLUME_REQUEST__INIT;
	Csi__V1__CapacityRange cr = CSI__V1__CAPACITY_RANGE__INIT;
	Csi__V1__CreateVolumeResponse *out = NULL;
	struct hpp_cap cap;
	int code;

	hpp_cap(&cap, block, CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER);
	r.name = (char *)name;
	r.volume_capabilities = cap.list;
	r.n_volume_capabilities = 1;
	if (req || lim) {
		cr.required_bytes = req;
		cr.limit_bytes = lim;
		r.capacity_range = &cr;
	}
	code = c->call(c->ctx, CSI_RPC_CREATE_VOLUME, &r, &out);
	if (code == CSI_OK && id)
		snprintf(id, 64, "%s", out->volume->volume_id);
	return code;
}

int hpp_delete(const struct hpp_caller *c, const char *vol)
{
	Csi__V1__DeleteVolumeRequest r = CSI__V1__DELETE_VOLUME_REQUEST__INIT;

	r.volume_id = (char *)vol;
	return c->call(c->ctx, CSI_RPC_DELETE_VOLUME, &r, NULL);
}

int hpp_ctl_publish(const struct hpp_caller *c, const char *vol, const char *node, bool block,
		    int mode, bool ro)
{
	Csi__V1__ControllerPublishVolumeRequest r =
	    CSI__V1__CONTROLLER_PUBLISH_VOLUME_REQUEST__INIT;
	struct hpp_cap cap;

	r.volume_id = (char *)vol;
	r.node_id = (char *)node;
	r.readonly = ro;
	r.volume_capability = hpp_cap(&cap, block, mode);
	return c->call(c->ctx, CSI_RPC_CONTROLLER_PUBLISH_VOLUME, &r, NULL);
}

int hpp_ctl_unpublish(const struct hpp_caller *c, const char *vol, const char *node)
{
	Csi__V1__ControllerUnpublishVolumeRequest r =
	    CSI__V1__CONTROLLER_UNPUBLISH_VOLUME_REQUEST__INIT;

	r.volume_id = (char *)vol;
	r.node_id = (char *)node;
	return c->call(c->ctx, CSI_RPC_CONTROLLER_UNPUBLISH_VOLUME, &r, NULL);
}

int hpp_stage(const struct hpp_caller *c, const char *vol, const char *path, bool block, int mode)
{
	Csi__V1__NodeStageVolumeRequest r = CSI__V1__NODE_STAGE_VOLUME_REQUEST__INIT;
	struct hpp_cap cap;

	r.volume_id = (char *)vol;
	r.staging_target_path = (char *)path;
	r.volume_capability = hpp_cap(&cap, block, mode);
	return c->call(c->ctx, CSI_RPC_NODE_STAGE_VOLUME, &r, NULL);
}

int hpp_unstage(const struct hpp_caller *c, const char *vol, const char *path)
{
	Csi__V1__NodeUnstageVolumeRequest r = CSI__V1__NODE_UNSTAGE_VOLUME_REQUEST__INIT;

	r.volume_id = (char *)vol;
	r.staging_target_path = (char *)path;
	return c->call(c->ctx, CSI_RPC_NODE_UNSTAGE_VOLUME, &r, NULL);
}

int hpp_publish(const struct hpp_caller *c, const char *vol, const char *staging,
		const char *target, bool block, int mode, bool ro)
{
	Csi__V1__NodePublishVolumeRequest r = CSI__V1__NODE_PUBLISH_VOLUME_REQUEST__INIT;
	struct hpp_cap cap;

	r.volume_id = (char *)vol;
	r.staging_target_path = (char *)staging;
	r.target_path = (char *)target;
	r.readonly = ro;
	r.volume_capability = hpp_cap(&cap, block, mode);
	return c->call(c->ctx, CSI_RPC_NODE_PUBLISH_VOLUME, &r, NULL);
}

int hpp_unpublish(const struct hpp_caller *c, const char *vol, const char *target)
{
	Csi__V1__NodeUnpublishVolumeRequest r = CSI__V1__NODE_UNPUBLISH_VOLUME_REQUEST__INIT;

	r.volume_id = (char *)vol;
	r.target_path = (char *)target;
	return c->call(c->ctx, CSI_RPC_NODE_UNPUBLISH_VOLUME, &r, NULL);
}

/* --- the real binary --- */

int hpp_wait_socket(const char *path, int ms)
{
	int64_t deadline = hpp_now_ms() + ms;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	while (hpp_now_ms() < deadline) {
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int ok = fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;

		if (fd >= 0)
			close(fd);
		if (ok)
			return 0;
		hpp_pause_ms(5);
	}
	return -1;
}

/*
 * A socket that accepts is not yet a server that answers: wait until a
 * Probe gets any gRPC answer (the fault script may make it an error), so
 * a test's first call does not race the plugin's start under load.
 */
static int hpp_proc_wait_serving(struct hpp_proc *h)
{
	Csi__V1__ProbeRequest r = CSI__V1__PROBE_REQUEST__INIT;
	int64_t deadline = hpp_now_ms() + HPP_START_MS;
	struct hpp_client cl;
	int rc = -1;

	if (hpp_client_open(&cl, h->endpoint) != 0)
		return -1;
	while (rc != 0 && hpp_now_ms() < deadline) {
		int code = hpp_client_call(&cl, CSI_RPC_PROBE, &r, NULL, 5000);

		if (code != CSI_UNAVAILABLE && code != CSI_DEADLINE_EXCEEDED)
			rc = 0;
		else
			hpp_pause_ms(20);
	}
	hpp_client_close(&cl);
	return rc;
}

static int hpp_proc_spawn(struct hpp_proc *h, const char *const *extra)
{
#ifdef CSI_HOSTPATH_BIN
	const char *argv[64];
	posix_spawn_file_actions_t fa;
	char sock[160];
	int n = 0, rc;

	argv[n++] = CSI_HOSTPATH_BIN;
	argv[n++] = "--endpoint";
	argv[n++] = h->endpoint;
	argv[n++] = "--data-dir";
	argv[n++] = h->data;
	argv[n++] = "--faults";
	argv[n++] = h->faults;
	argv[n++] = "--node-id";
	argv[n++] = "node-1";
	for (int i = 0; extra && extra[i] && n < 63; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	snprintf(sock, sizeof(sock), "%s/csi.sock", h->dir);
	unlink(sock);
	/*
	 * Nothing of ctest's: stdin and stdout go to /dev/null and stderr to
	 * the log, so even a plugin that outlived the test could not hold the
	 * test's output pipe open.
	 */
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, h->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	rc = proc_guard_spawn(&h->pid, CSI_HOSTPATH_BIN, &fa, (char *const *)argv, NULL);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		h->pid = 0;
		return -1;
	}
	proc_guard_track(h->pid);
	/* A sanitized plugin on a loaded 2-core machine can take seconds to listen. */
	if (hpp_wait_socket(sock, HPP_START_MS) != 0 || hpp_proc_wait_serving(h) != 0) {
		fprintf(stderr, "csi-hostpath did not serve on %s within %d ms (log %s)\n", sock,
			HPP_START_MS, h->log);
		hpp_proc_kill(h, SIGKILL);
		return -1;
	}
	return 0;
#else
	return -1;
#endif
}

int hpp_proc_start(struct hpp_proc *h, const char *const *extra)
{
	memset(h, 0, sizeof(*h));
	if (hpp_mkdtemp("csid-hpp", h->dir, sizeof(h->dir)) != 0)
		return -1;
	snprintf(h->endpoint, sizeof(h->endpoint), "unix://%s/csi.sock", h->dir);
	snprintf(h->data, sizeof(h->data), "%s/data", h->dir);
	snprintf(h->faults, sizeof(h->faults), "%s/faults", h->dir);
	snprintf(h->log, sizeof(h->log), "%s/plugin.log", h->dir);
	proc_guard_track_dir(h->dir);
	return hpp_proc_spawn(h, extra);
}

int hpp_proc_restart(struct hpp_proc *h, const char *const *extra)
{
	if (h->pid > 0)
		hpp_proc_kill(h, SIGKILL);
	return hpp_proc_spawn(h, extra);
}

int hpp_proc_wait_exit(struct hpp_proc *h, int ms)
{
	int64_t deadline = hpp_now_ms() + ms;
	int status;

	if (h->pid <= 0)
		return -1;
	while (hpp_now_ms() < deadline) {
		pid_t r = waitpid(h->pid, &status, WNOHANG);

		if (r == h->pid) {
			proc_guard_untrack(h->pid);
			h->pid = 0;
			return status;
		}
		if (r < 0)
			return -1;
		hpp_pause_ms(5);
	}
	return -1;
}

int hpp_proc_kill(struct hpp_proc *h, int sig)
{
	int status;

	if (h->pid <= 0)
		return -1;
	kill(h->pid, sig);
	status = hpp_proc_wait_exit(h, 10000);
	if (status == -1 && h->pid > 0) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, &status, 0);
		proc_guard_untrack(h->pid);
		h->pid = 0;
	}
	return status;
}

void hpp_proc_cleanup(struct hpp_proc *h)
{
	if (h->pid > 0)
		hpp_proc_kill(h, SIGKILL);
	if (h->dir[0]) {
		hpp_rmrf(h->dir);
		proc_guard_untrack_dir(h->dir);
	}
	h->dir[0] = '\0';
}

static int hpp_client_caller_call(void *ctx, enum csi_rpc rpc, const void *req, void *resp)
{
	return hpp_client_call(ctx, rpc, req, resp, 0);
}

int hpp_client_open(struct hpp_client *cl, const char *endpoint)
{
	struct err e;

	memset(cl, 0, sizeof(*cl));
	cl->caller.call = hpp_client_caller_call;
	cl->caller.ctx = cl;
	if (csi_client_grpc_new(endpoint, &cl->c, &e) != 0) {
		fprintf(stderr, "client: %s\n", e.msg);
		return -1;
	}
	return 0;
}

void hpp_client_close(struct hpp_client *cl)
{
	csi_msg_free(cl->last);
	cl->last = NULL;
	csi_client_free(cl->c);
	cl->c = NULL;
}

int hpp_client_call(struct hpp_client *cl, enum csi_rpc rpc, const void *req, void *resp,
		    int timeout_ms)
{
	csi_msg_free(cl->last);
	cl->last = NULL;
	memset(&cl->st, 0, sizeof(cl->st));
	cl->c->call(cl->c, rpc, req, &cl->last, timeout_ms ? timeout_ms : 10000, &cl->st);
	if (resp)
		*(ProtobufCMessage **)resp = cl->last;
	return cl->st.code;
}

int hpp_client_wait_ready(struct hpp_client *cl, int ms)
{
	Csi__V1__ProbeRequest r = CSI__V1__PROBE_REQUEST__INIT;
	int64_t deadline = hpp_now_ms() + ms;

	while (hpp_now_ms() < deadline) {
		if (hpp_client_call(cl, CSI_RPC_PROBE, &r, NULL, 1000) == CSI_OK)
			return 0;
		hpp_pause_ms(10);
	}
	return -1;
}

long hpp_vmhwm_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int hpp_list_volumes(const char *endpoint, char ids[][80], bool *published, int max)
{
	Csi__V1__ListVolumesRequest req = CSI__V1__LIST_VOLUMES_REQUEST__INIT;
	Csi__V1__ListVolumesResponse *resp = NULL;
	struct hpp_client cl;
	int n = 0;

	if (hpp_client_open(&cl, endpoint) != 0)
		return -1;
	req.max_entries = 1000;
	if (hpp_client_call(&cl, CSI_RPC_LIST_VOLUMES, &req, &resp, 0) != 0) {
		hpp_client_close(&cl);
		return -1;
	}
	for (size_t i = 0; i < resp->n_entries && n < max; i++, n++) {
		Csi__V1__ListVolumesResponse__Entry *e = resp->entries[i];

		snprintf(ids[n], 80, "%s", e->volume->volume_id);
		if (published)
			published[n] = e->status && e->status->n_published_node_ids > 0;
	}
	hpp_client_close(&cl);
	return n;
}
