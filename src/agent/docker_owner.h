/*
 * The owners of Docker/Podman mounts: the container that uses a mount,
 * found through what the engine tells of it, and made the owner of the
 * mount's claim (agent/owners.h, pid kind), so a container that dies
 * without an Unmount (its engine killed with it) does not hold its claim
 * for ever, while one that outlives its engine keeps its volume.
 *
 * A Mount comes before the container's process exists, so each new
 * mount is watched for a while (DOCKER_OWNER_WAIT_MS) until its
 * container runs:
 *
 *   - when the mount ID is a container ID: the oldest process whose
 *     cgroup is the container's (".../libpod-<id>", ".../docker/<id>",
 *     "docker-<id>.scope"; cgroup v1 and v2 alike);
 *   - else the mounts the engine made, seen from the container (Docker
 *     and Podman 4 send mount IDs of their own): the oldest process of a
 *     mount namespace other than the agent's whose mountinfo holds the
 *     mount's target (same device and root), in a namespace no other
 *     mount of that volume here took; a mount of it under this agent's
 *     mount directory (mounts_dir) does not count: that is a copy of
 *     the agent's own mount, which every mount namespace made while the
 *     volume was mounted here holds (the runtime's setup of any other
 *     container, of this engine or another, a process unshared from the
 *     host), while a container has the volume where the engine bound it
 *     (its destination, under the container's root);
 *   - and, for a mount these have not explained within 3 s, with
 *     engine_socket (Docker): the engine's API lists the running
 *     containers that use the volume, and the mount takes the pid of one
 *     not taken by another mount of that volume here (State.Pid of its
 *     inspect). It is not asked first: asking dockerd while it starts the
 *     container slows every start down (bench/docker.c: 1.07x against
 *     1.5x to 2.2x with the engine asked every 200 ms).
 *
 * Only the first process of a pid namespace of its own (a container's
 * init, PID 1 inside) is taken from the system: the runtime's processes
 * that set a container up pass through its cgroup and mount namespace
 * and exit at once, and must never own a claim. A container sharing the
 * host's pid namespace (--pid=host) is found through the engine only.
 * A mount whose container is never found keeps its claim until its
 * Unmount (logged).
 *
 * Podman's mount (DOCKER_OWNER_PODMAN_ID) is one for all the containers
 * of a volume, so no single process owns it: it is watched for users
 * instead (the namespaces found as above, every second), and once a
 * container was seen and none is left for 2 s (containers and their
 * engine killed without an Unmount), or none was seen in wait_ms, it is
 * released through cfg.release. Thread-safe; one thread of its own polls.
 */
#ifndef CSID_AGENT_DOCKER_OWNER_H
#define CSID_AGENT_DOCKER_OWNER_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

#define DOCKER_OWNER_WAIT_MS 60000
/*
 * The one mount ID Podman 4 sends for every container (it counts a
 * volume's users itself: Mount for the first, Unmount after the last).
 */
#define DOCKER_OWNER_PODMAN_ID "2f73349cfc4630255319c6c8dfc1b46a8996ace9d14d8e07563b165915918ec2"

/* Makes pid the owner of the mount of vol for alloc; 0 or a code with e set. */
typedef int (*docker_owner_record_fn)(void *ctx, const char *vol, const char *alloc, int pid,
				      struct err *e);

struct docker_owner_config {
	const char *engine_socket; /* the Docker engine API; NULL or "": none */
	const char *proc_root; /* "/proc" (tests: a fake tree) */
	/* Where the agent mounts (the mounter's <data_dir>/mounts); NULL: no mount skipped. */
	const char *mounts_dir;
	int64_t wait_ms; /* 0: DOCKER_OWNER_WAIT_MS */
	int64_t poll_ms; /* 0: 200 ms */
	docker_owner_record_fn record;
	void *ctx;
	/* Unmounts and releases a shared mount no container uses any more (with reason). */
	void (*release)(void *ctx, const char *vol, const char *alloc, const char *reason);
	void *release_ctx;
};

struct docker_owner;

/* Starts the polling thread. Returns 0 and *out, or a code with e set. */
int docker_owner_new(const struct docker_owner_config *cfg, struct docker_owner **out,
		     struct err *e);
/* Stops the thread and frees. NULL is a no-op. */
void docker_owner_free(struct docker_owner *o);

/* Looks for the container of the new mount of vol for alloc (the engine's mount ID) at target. */
void docker_owner_watch(struct docker_owner *o, const char *vol, const char *alloc,
			const char *target);
/* The mount went (Unmount): stop looking, and free its container for another mount. */
void docker_owner_drop(struct docker_owner *o, const char *vol, const char *alloc);

/*
 * The main pid of container id from the cgroups of the processes under
 * proc_root: the oldest process whose cgroup path ends in a component
 * naming id and which is PID 1 of its pid namespace (the last NSpid of
 * its status). Returns the pid, 0 when none, or a negative code.
 */
int docker_owner_pid_by_cgroup(const char *proc_root, const char *id);

/*
 * The main pid of a container that bind-mounted target (a mount point of
 * this mount namespace) from the processes under proc_root: the oldest
 * PID 1 of a pid namespace, in another mount namespace, whose mountinfo
 * has a mount with target's device and root at a mount point not under
 * skip_under (NULL: anywhere), that namespace not among taken (ntaken
 * "mnt:[N]" strings). Its namespace goes to ns_out (cap bytes); users
 * (may be NULL) counts every such container, taken or not. Returns the
 * pid, 0 when none, or a negative code.
 */
int docker_owner_pid_by_mount(const char *proc_root, const char *target, const char *skip_under,
			      const char *const *taken, size_t ntaken, char *ns_out, size_t cap,
			      int *users);

/*
 * From a Docker engine's answer to GET /containers/json (len bytes): the
 * IDs of the running containers, into *out (a JSON array, the caller's).
 * Returns 0 or CSID_EPROTO.
 */
int docker_owner_parse_list(const char *body, size_t len, json_t **out, struct err *e);

#endif
