/*
 * Test helper: real container engines in a sandbox, for the end-to-end
 * tests of the Docker volume plugin. A Docker engine is a dockerd of its
 * own (its own containerd, data root, exec root and API socket under a
 * private directory, no iptables, no bridge, the vfs storage driver); a
 * Podman engine is the podman command with its own --root, --runroot and
 * containers.conf (default_ulimits, which root here needs, and the
 * [engine.volume_plugins] table naming csid's socket). Either gets the
 * image ENGINE_IMAGE, made offline from busybox-static (`import` of a
 * tar of a root file system holding /bin/busybox and its applets).
 *
 * Every process the engine runs (dockerd, containerd, the docker and
 * podman commands) has TMPDIR set to <dir>/tmp. containerd writes a
 * stack dump (containerd.<pid>.stacks.log) there on SIGUSR1, which
 * dockerd sends it before killing and starting it again when its first
 * connection to a containerd it just started fails (a start race that
 * load makes likely).
 *
 * engine_stop works after any failure: containers removed (or their
 * processes killed), dockerd stopped, every process started from the
 * directory killed (containerd, shims, conmon), the mounts under the
 * directory detached (<exec-root>/netns/default included) and the
 * directory removed.
 */
#ifndef CSID_TEST_ENGINE_H
#define CSID_TEST_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define ENGINE_IMAGE "csidtest:1"
#define ENGINE_PATH 96
/* Longest wait for an engine command (container runs included). */
#define ENGINE_RUN_MS 120000

struct engine {
	bool podman;
	char dir[ENGINE_PATH]; /* /tmp/cen-XXXXXX */
	char sock[ENGINE_PATH + 16]; /* dockerd's API socket */
	char log[ENGINE_PATH + 16]; /* dockerd's output */
	char conf[ENGINE_PATH + 32]; /* podman's containers.conf */
	char tmpdir[ENGINE_PATH + 16]; /* "TMPDIR=<dir>/tmp" */
	pid_t pid; /* dockerd; 0 when not running */
};

/*
 * Starts a sandboxed dockerd and imports the image. Returns 0, 1 when no
 * engine can start here (why says it: no dockerd, not root), or -1 on a
 * failure (its log printed). engine_stop cleans up either way.
 */
int engine_docker_start(struct engine *en, char *why, size_t len);
/* Starts dockerd again on the same directories (after a kill). 0 or -1. */
int engine_docker_restart(struct engine *en);
/* Kills dockerd alone with SIGKILL and reaps it (its containers keep running). */
void engine_docker_kill(struct engine *en);

/*
 * Prepares a Podman engine that finds volume plugin `plugin` at socket
 * and imports the image. Returns 0, 1 (cannot run here, why set) or -1.
 */
int engine_podman_start(struct engine *en, const char *plugin, const char *socket, char *why,
			size_t len);

/*
 * Runs the engine's command line with args (NULL-terminated, without the
 * program and the sandbox flags); its stdout and stderr go to out (cap
 * bytes, NUL-terminated). Returns the exit status, or -1 when it could
 * not run or passed ENGINE_RUN_MS (then killed).
 */
int engine_run(struct engine *en, char *out, size_t cap, const char *const *args);

/* The main pid of a running container, or -1. */
pid_t engine_container_pid(struct engine *en, const char *name);

/* Stops and removes everything (see above). Safe to call more than once. */
void engine_stop(struct engine *en);

#endif
