/*
 * A last line of defence for tests that spawn processes: every helper that
 * starts a child (csi-hostpath, the agent, csictl) records its pid, and
 * every helper that makes a temporary directory for mounts and plugins
 * records the directory. When the test program exits with records left
 * (a setup failed half-way, a fixture was never torn down) or when a
 * sanitizer aborts it, the guard kills the recorded children and every
 * process whose working directory lies under a recorded directory (the
 * plugins a killed agent left behind), detaches the mounts below the
 * directories and removes them. So no orphan keeps ctest's output pipe
 * open and no mount outlives the run.
 *
 * The guard owns copies of what it is given; callers untrack after they
 * reaped a child or removed a directory themselves. Not thread-safe: the
 * helpers call it from the test's main thread only.
 */
#ifndef CSID_TEST_PROC_GUARD_H
#define CSID_TEST_PROC_GUARD_H

#include <spawn.h>
#include <sys/types.h>

/*
 * posix_spawn (posix_spawnp when path has no slash) of a long-lived child
 * (a server, a plugin, etcd, dockerd): envp NULL means this environment.
 * Called on the main thread, the child goes through the pdeath-exec
 * wrapper, so the kernel kills it (SIGKILL) when the test program dies in
 * a way that runs no cleanup (ctest's timeout, a killed ctest). Not on
 * other threads: the kernel's parent-death signal follows the thread that
 * spawned, and a helper thread that starts a server and returns would
 * take it along. The pid is the program's own either way. Returns
 * posix_spawn's result (0 or an errno value).
 */
int proc_guard_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
		     char *const *argv, char *const *envp);
/* Records a child to kill and reap at exit. */
void proc_guard_track(pid_t pid);
/* Forgets a child (reaped by the caller). Unknown pids are ignored. */
void proc_guard_untrack(pid_t pid);
/* Records a directory to clear at exit (processes inside, mounts, files). */
void proc_guard_track_dir(const char *dir);
/* Forgets a directory. Unknown directories are ignored. */
void proc_guard_untrack_dir(const char *dir);
/* Kills every process whose working directory is under dir, detaches the
 * mounts below it and removes it (dir need not be recorded). */
void proc_guard_clear_dir(const char *dir);
/* Kills, unmounts and removes everything still recorded, now; then forgets it. */
void proc_guard_run(void);

#endif
