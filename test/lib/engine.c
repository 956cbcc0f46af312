/*
 * Sandboxed container engines for end-to-end tests (engine.h).
 */
#include "engine.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "child_proc.h"
#include "log_tail.h"
#include "proc_guard.h"

#define ENGINE_DOCKER "/usr/bin/docker"
#define ENGINE_DOCKERD "/usr/sbin/dockerd"
#define ENGINE_PODMAN "/usr/bin/podman"
#define ENGINE_BUSYBOX "/bin/busybox"
#define ENGINE_START_MS 60000

static int64_t engine_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void engine_nap(void)
{
	struct timespec ts = {0, 20 * 1000000L};

	nanosleep(&ts, NULL);
}

/* The environment of the engine's processes: TMPDIR in its directory, extra ("NAME=value") too. */
static int engine_env(struct engine *en, char **envp, size_t cap, const char *extra)
{
	const char *set[] = {en->tmpdir, extra, NULL};

	return child_proc_env(envp, cap, set);
}

/* Runs argv (env: extra "NAME=value" or NULL) to completion within ms; output to out. */
static int engine_spawn(struct engine *en, char *const *argv, const char *env, int64_t ms,
			char *out, size_t cap)
{
	char path[ENGINE_PATH + 32], *envp[512];
	int fd, status;
	ssize_t r;

	if (engine_env(en, envp, 512, env) < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/out-XXXXXX", en->dir);
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	status = child_proc_run(argv, envp, fd, ms);
	if (out && cap) {
		r = pread(fd, out, cap - 1, 0);
		out[r > 0 ? r : 0] = '\0';
	}
	close(fd);
	unlink(path);
	return status;
}

int engine_run(struct engine *en, char *out, size_t cap, const char *const *args)
{
	char root[ENGINE_PATH + 16], run[ENGINE_PATH + 16];
	char host[ENGINE_PATH + 32], env[ENGINE_PATH + 64];
	char *argv[64];
	int n = 0;

	if (en->podman) {
		snprintf(root, sizeof(root), "%s/root", en->dir);
		snprintf(run, sizeof(run), "%s/run", en->dir);
		snprintf(env, sizeof(env), "CONTAINERS_CONF=%s", en->conf);
		argv[n++] = (char *)ENGINE_PODMAN;
		argv[n++] = (char *)"--root";
		argv[n++] = root;
		argv[n++] = (char *)"--runroot";
		argv[n++] = run;
		argv[n++] = (char *)"--tmpdir";
		argv[n++] = en->tmpdir + strlen("TMPDIR=");
		argv[n++] = (char *)"--storage-driver";
		argv[n++] = (char *)"vfs";
	} else {
		snprintf(host, sizeof(host), "unix://%s", en->sock);
		argv[n++] = (char *)ENGINE_DOCKER;
		argv[n++] = (char *)"-H";
		argv[n++] = host;
	}
	for (; *args && n < 63; args++)
		argv[n++] = (char *)*args;
	argv[n] = NULL;
	return engine_spawn(en, argv, en->podman ? env : NULL, ENGINE_RUN_MS, out, cap);
}

static int engine_write(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		return -1;
	fputs(text, f);
	return fclose(f) == 0 ? 0 : -1;
}

/* <dir>/rootfs.tar: /bin/busybox and the applets the tests use. */
static int engine_rootfs(struct engine *en)
{
	static const char *const applets[] = {"sh",    "cat",   "echo", "ls", "true",
					      "sleep", "mkdir", "test", "rm", NULL};
	char root[ENGINE_PATH + 16], p[ENGINE_PATH + 64], buf[65536];
	char *tar[] = {(char *)"/bin/tar", (char *)"-C", root, (char *)"-cf", p, (char *)".", NULL};
	int in, outfd, rc = 0;
	ssize_t r;

	snprintf(root, sizeof(root), "%s/rootfs", en->dir);
	snprintf(p, sizeof(p), "%s/bin", root);
	if (mkdir(root, 0755) != 0 || mkdir(p, 0755) != 0)
		return -1;
	snprintf(p, sizeof(p), "%s/bin/busybox", root);
	in = open(ENGINE_BUSYBOX, O_RDONLY);
	outfd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	while (in >= 0 && outfd >= 0 && (r = read(in, buf, sizeof(buf))) > 0)
		if (write(outfd, buf, (size_t)r) != r)
			rc = -1;
	if (in < 0 || outfd < 0)
		rc = -1;
	if (in >= 0)
		close(in);
	if (outfd >= 0)
		close(outfd);
	for (int i = 0; rc == 0 && applets[i]; i++) {
		snprintf(p, sizeof(p), "%s/bin/%s", root, applets[i]);
		rc = symlink("busybox", p);
	}
	snprintf(p, sizeof(p), "%s/rootfs.tar", en->dir);
	if (rc == 0)
		rc = engine_spawn(en, tar, NULL, 30000, NULL, 0) == 0 ? 0 : -1;
	return rc;
}

static int engine_import(struct engine *en)
{
	char tar[ENGINE_PATH + 16], out[2048];
	const char *args[] = {"import", tar, ENGINE_IMAGE, NULL};

	snprintf(tar, sizeof(tar), "%s/rootfs.tar", en->dir);
	if (engine_rootfs(en) != 0 || engine_run(en, out, sizeof(out), args) != 0) {
		fprintf(stderr, "engine: image import failed: %s\n", out);
		return -1;
	}
	return 0;
}

static int engine_mkdir(struct engine *en, char *why, size_t len)
{
	snprintf(en->dir, sizeof(en->dir), "/tmp/cen-XXXXXX");
	if (!mkdtemp(en->dir)) {
		snprintf(why, len, "mkdtemp: %s", strerror(errno));
		en->dir[0] = '\0';
		return -1;
	}
	proc_guard_track_dir(en->dir);
	snprintf(en->tmpdir, sizeof(en->tmpdir), "TMPDIR=%s/tmp", en->dir);
	if (mkdir(en->tmpdir + strlen("TMPDIR="), 0700) != 0) {
		snprintf(why, len, "mkdir %s: %s", en->tmpdir, strerror(errno));
		return -1;
	}
	return 0;
}

static void engine_dump_log(struct engine *en)
{
	fprintf(stderr, "---- end of %s ----\n", en->log);
	log_tail_print(en->log);
}

static int engine_dockerd(struct engine *en)
{
	char data[ENGINE_PATH + 16], exec[ENGINE_PATH + 16], host[ENGINE_PATH + 32],
	    pidf[ENGINE_PATH + 16], out[256];
	char *argv[] = {(char *)ENGINE_DOCKERD,
			(char *)"--iptables=false",
			(char *)"--ip6tables=false",
			(char *)"--bridge=none",
			(char *)"--storage-driver=vfs",
			(char *)"--data-root",
			data,
			(char *)"--exec-root",
			exec,
			(char *)"-H",
			host,
			(char *)"--pidfile",
			pidf,
			NULL};
	const char *version[] = {"version", "--format", "{{.Server.Version}}", NULL};
	char *envp[512];
	posix_spawn_file_actions_t fa;
	int64_t deadline = engine_now_ms() + ENGINE_START_MS;
	int rc;

	snprintf(data, sizeof(data), "%s/data", en->dir);
	snprintf(exec, sizeof(exec), "%s/exec", en->dir);
	snprintf(host, sizeof(host), "unix://%s", en->sock);
	snprintf(pidf, sizeof(pidf), "%s/docker.pid", en->dir);
	if (engine_env(en, envp, 512, NULL) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, en->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	/* containerd, which dockerd starts, inherits the environment and its TMPDIR. */
	rc = proc_guard_spawn(&en->pid, ENGINE_DOCKERD, &fa, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0) {
		en->pid = 0;
		return -1;
	}
	proc_guard_track(en->pid);
	while (engine_now_ms() < deadline) {
		int st;

		if (waitpid(en->pid, &st, WNOHANG) == en->pid) {
			proc_guard_untrack(en->pid);
			en->pid = 0;
			break;
		}
		if (engine_run(en, out, sizeof(out), version) == 0)
			return 0;
		engine_nap();
	}
	fprintf(stderr, "engine: dockerd did not answer\n");
	engine_dump_log(en);
	return -1;
}

int engine_docker_start(struct engine *en, char *why, size_t len)
{
	memset(en, 0, sizeof(*en));
	if (getuid() != 0 || access(ENGINE_DOCKERD, X_OK) != 0 ||
	    access(ENGINE_DOCKER, X_OK) != 0 || access(ENGINE_BUSYBOX, X_OK) != 0) {
		snprintf(why, len,
			 "needs root, %s, %s and %s (Debian docker.io and busybox-static)",
			 ENGINE_DOCKERD, ENGINE_DOCKER, ENGINE_BUSYBOX);
		return 1;
	}
	if (engine_mkdir(en, why, len) != 0)
		return -1;
	snprintf(en->sock, sizeof(en->sock), "%s/docker.sock", en->dir);
	snprintf(en->log, sizeof(en->log), "%s/dockerd.log", en->dir);
	if (engine_dockerd(en) != 0)
		return -1;
	return engine_import(en);
}

int engine_docker_restart(struct engine *en)
{
	return en->pid ? 0 : engine_dockerd(en);
}

void engine_docker_kill(struct engine *en)
{
	if (en->pid <= 0)
		return;
	kill(en->pid, SIGKILL);
	waitpid(en->pid, NULL, 0);
	proc_guard_untrack(en->pid);
	en->pid = 0;
}

int engine_podman_start(struct engine *en, const char *plugin, const char *socket, char *why,
			size_t len)
{
	char conf[1024];

	memset(en, 0, sizeof(*en));
	en->podman = true;
	if (getuid() != 0 || access(ENGINE_PODMAN, X_OK) != 0 ||
	    access(ENGINE_BUSYBOX, X_OK) != 0) {
		snprintf(why, len, "needs root, %s and %s (Debian podman and busybox-static)",
			 ENGINE_PODMAN, ENGINE_BUSYBOX);
		return 1;
	}
	if (engine_mkdir(en, why, len) != 0)
		return -1;
	snprintf(en->conf, sizeof(en->conf), "%s/containers.conf", en->dir);
	snprintf(en->log, sizeof(en->log), "%s/events.log", en->dir);
	/* Root here lacks CAP_SYS_RESOURCE: podman's default ulimits cannot be set. */
	snprintf(conf, sizeof(conf),
		 "[containers]\n"
		 "default_ulimits = [\"nofile=4096:4096\", \"nproc=4096:4096\"]\n"
		 "[engine]\n"
		 "cgroup_manager = \"cgroupfs\"\n"
		 "events_logger = \"file\"\n"
		 "events_logfile_path = \"%s\"\n"
		 "[engine.volume_plugins]\n"
		 "%s = \"%s\"\n",
		 en->log, plugin, socket);
	if (engine_write(en->conf, conf) != 0) {
		snprintf(why, len, "cannot write %s", en->conf);
		return -1;
	}
	return engine_import(en);
}

pid_t engine_container_pid(struct engine *en, const char *name)
{
	const char *args[] = {"inspect", "--format", "{{.State.Pid}}", name, NULL};
	char out[256];
	long pid;

	if (engine_run(en, out, sizeof(out), args) != 0)
		return -1;
	pid = strtol(out, NULL, 10);
	return pid > 0 ? (pid_t)pid : -1;
}

/* Whether process pid was started from dir: its command line or its root is under it. */
static bool engine_proc_ours(const char *dir, const char *pid)
{
	char path[64], buf[4096], root[4096];
	size_t dl = strlen(dir);
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/root", pid);
	n = readlink(path, root, sizeof(root) - 1);
	if (n > 0) {
		root[n] = '\0';
		if (strncmp(root, dir, dl) == 0 && (root[dl] == '/' || !root[dl]))
			return true;
	}
	snprintf(path, sizeof(path), "/proc/%s/cmdline", pid);
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	for (ssize_t i = 0; i < n; i++)
		if (!buf[i])
			buf[i] = ' ';
	buf[n > 0 ? n : 0] = '\0';
	return strstr(buf, dir) != NULL;
}

/* Kills every process started from the directory (containerd, shims, conmon, containers). */
static void engine_kill_all(struct engine *en)
{
	for (int pass = 0; pass < 3; pass++) {
		DIR *d = opendir("/proc");
		struct dirent *de;
		int killed = 0;

		while (d && (de = readdir(d))) {
			if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
			    atoi(de->d_name) == (int)getpid())
				continue;
			if (engine_proc_ours(en->dir, de->d_name) &&
			    kill(atoi(de->d_name), SIGKILL) == 0)
				killed++;
		}
		if (d)
			closedir(d);
		if (!killed)
			break;
		for (int i = 0; i < 10; i++)
			engine_nap();
	}
}

void engine_stop(struct engine *en)
{
	const char *ps[] = {"ps", "-aq", NULL};
	char out[8192];

	if (!en->dir[0])
		return;
	if ((en->pid > 0 || en->podman) && engine_run(en, out, sizeof(out), ps) == 0) {
		char *save = NULL;

		for (char *id = strtok_r(out, "\n", &save); id; id = strtok_r(NULL, "\n", &save)) {
			const char *rm[] = {"rm", "-f", id, NULL};
			char ign[1024];

			engine_run(en, ign, sizeof(ign), rm);
		}
	}
	if (en->pid > 0) {
		int64_t deadline = engine_now_ms() + 30000;

		kill(en->pid, SIGTERM);
		while (waitpid(en->pid, NULL, WNOHANG) == 0) {
			if (engine_now_ms() > deadline) {
				kill(en->pid, SIGKILL);
				waitpid(en->pid, NULL, 0);
				break;
			}
			engine_nap();
		}
		proc_guard_untrack(en->pid);
		en->pid = 0;
	}
	engine_kill_all(en);
	/* Detaches <exec-root>/netns/default and every other mount below, then removes. */
	proc_guard_clear_dir(en->dir);
	proc_guard_untrack_dir(en->dir);
	en->dir[0] = '\0';
}
