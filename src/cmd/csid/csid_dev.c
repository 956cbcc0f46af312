/*
 * `csid dev`: builds a server config and an agent config that fit
 * together and runs both on one libuv loop (csid_server_run and
 * csid_agent_run, the same code `csid server` and `csid agent` run).
 *
 * Start: flags -> dir (mkdtemp /tmp/csid-dev.XXXXXX, or -data-dir) -> a
 * random token (the server's agent_token and the agent's server_token)
 * and a free port for the agent's TCP listener (for tools such as
 * Prometheus) -> server started first (a busy -listen fails here, before
 * any plugin runs; its API also on <dir>/server/server.sock) -> agent
 * started (joins the server at that socket, or at http://<listen> when
 * the path is too long for one, and so tells the server its own socket
 * for controller RPCs: config.h; supervises csi-hostpath).
 *
 * Stop (SIGTERM/SIGINT, or either part failing): the server first (its
 * reconciler drains while the agent still answers), then the agent
 * (plugins stopped, mounts kept). Without -keep, every mount under dir is
 * then detached, deepest first, and <dir>/server, <dir>/agent,
 * <dir>/hostpath and dir itself (when empty) are removed: a -data-dir
 * holding files of its own keeps them.
 */
#include "csid_dev.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <uv.h>

#include "agent/mount_paths.h"
#include "agent/mountinfo.h"
#include "csi/csi_client.h"
#include "csid_agent.h"
#include "csid_flags.h"
#include "csid_server.h"
#include "util/conf.h"
#include "util/log.h"
#include "util/mkdir_p.h"

#define CSID_DEV_NODE "dev"
#define CSID_DEV_HP_ID "hostpath.csi.csid.dev"
#define CSID_DEV_TOKEN_BYTES 16
/* The file under the directory holding the token, for tools that call the agent. */
#define CSID_DEV_TOKEN_FILE "agent-token"

struct csid_dev {
	const char *flag_data_dir, *flag_listen, *flag_node, *flag_hostpath, *flag_level;
	bool keep;
	char dir[PATH_MAX];
	char token[2 * CSID_DEV_TOKEN_BYTES + 1];
	uv_loop_t loop;
	uv_signal_t sig_term, sig_int;
	struct csid_server_run *server;
	struct csid_agent_run *agent;
	bool server_stopped, agent_stopped; /* true too for a part never started */
	bool stopping;
	int exit_code;
};

static void csid_dev_usage(FILE *f)
{
	fprintf(f, "usage: csid dev [-data-dir DIR] [-listen HOST:PORT] [-node-name NAME]\n"
		   "                [-hostpath PATH] [-log-level LEVEL] [-keep]\n"
		   "\n"
		   "Runs a server (API on 127.0.0.1:4646), an agent (node \"dev\") and a\n"
		   "supervised csi-hostpath in one process, state under DIR (a new temporary\n"
		   "directory by default). SIGTERM/SIGINT stop it; without -keep, mounts under\n"
		   "DIR are detached and what csid dev made there is removed.\n");
}

static int csid_dev_flags(struct csid_dev *d, int argc, char **argv)
{
	const struct csid_flag flags[] = {
	    {"data-dir", &d->flag_data_dir, NULL}, {"listen", &d->flag_listen, NULL},
	    {"node-name", &d->flag_node, NULL},    {"hostpath", &d->flag_hostpath, NULL},
	    {"log-level", &d->flag_level, NULL},   {"keep", NULL, &d->keep}};

	return csid_flags_parse("dev", flags, sizeof(flags) / sizeof(flags[0]), argc, argv,
				csid_dev_usage);
}

/* A TCP port on 127.0.0.1 nobody listens on now (the kernel's pick). */
static int csid_dev_free_port(int *port, struct err *e)
{
	struct sockaddr_in sa = {0};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return err_errno(e, errno, "agent listener: socket");
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &len) != 0)
		rc = err_errno(e, errno, "agent listener: no free port on 127.0.0.1");
	else
		*port = ntohs(sa.sin_port);
	close(fd);
	return rc;
}

/* The directory: -data-dir (created when missing), or a new temporary one. */
static int csid_dev_make_dir(struct csid_dev *d, struct err *e)
{
	if (!d->flag_data_dir) {
		snprintf(d->dir, sizeof(d->dir), "/tmp/csid-dev.XXXXXX");
		if (!mkdtemp(d->dir))
			return err_errno(e, errno, "mkdtemp %s", d->dir);
		return 0;
	}
	if (!realpath(d->flag_data_dir, d->dir)) {
		int rc = mkdir_p(d->flag_data_dir, e);

		if (rc)
			return err_wrap(e, "-data-dir");
		if (!realpath(d->flag_data_dir, d->dir))
			return err_errno(e, errno, "-data-dir %s", d->flag_data_dir);
	}
	return 0;
}

/* The csi-hostpath beside this program, or the one on PATH. */
static void csid_dev_hostpath(struct csid_dev *d, char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	char *slash;

	if (d->flag_hostpath) {
		snprintf(buf, len, "%s", d->flag_hostpath);
		return;
	}
	snprintf(buf, len, "csi-hostpath");
	if (n <= 0)
		return;
	self[n] = '\0';
	slash = strrchr(self, '/');
	if (!slash)
		return;
	*slash = '\0';
	if ((size_t)snprintf(buf, len, "%s/csi-hostpath", self) >= len || access(buf, X_OK) != 0)
		snprintf(buf, len, "csi-hostpath");
}

/* A joined path, or CSID_EINVAL when it does not fit. */
static int csid_dev_path(char *buf, size_t len, const char *dir, const char *name, struct err *e)
{
	if ((size_t)snprintf(buf, len, "%s/%s", dir, name) >= len)
		return err_set(e, CSID_EINVAL, "path %s/%s is too long", dir, name);
	return 0;
}

/*
 * The token also goes to <dir>/agent-token (mode 0600): every request on
 * the agent's TCP API needs it, so a tool on this machine (Prometheus
 * scraping the agent's /v1/metrics, with credentials_file) can present it.
 */
static int csid_dev_write_token(struct csid_dev *d, struct err *e)
{
	char path[PATH_MAX];
	int fd, rc;
	size_t len = strlen(d->token);

	if ((rc = csid_dev_path(path, sizeof(path), d->dir, CSID_DEV_TOKEN_FILE, e)))
		return rc;
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return err_errno(e, errno, "token: %s", path);
	rc = write(fd, d->token, len) == (ssize_t)len && fchmod(fd, 0600) == 0
		 ? 0
		 : err_errno(e, errno, "token: %s", path);
	close(fd);
	return rc;
}

static int csid_dev_make_token(struct csid_dev *d, struct err *e)
{
	unsigned char raw[CSID_DEV_TOKEN_BYTES];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return err_errno(e, errno, "token: getrandom");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(d->token + 2 * i, 3, "%02x", raw[i]);
	explicit_bzero(raw, sizeof(raw));
	return csid_dev_write_token(d, e);
}

/*
 * The server's config: SQLite store under <dir>/server, the API on listen
 * and at the unix socket sock (NULL: none), the token.
 */
static int csid_dev_server_config(struct csid_dev *d, const char *listen, const char *sock,
				  struct server_config_file **out, struct err *e)
{
	char data[PATH_MAX];
	json_t *doc;
	char *text = NULL;
	int rc;

	if ((rc = csid_dev_path(data, sizeof(data), d->dir, "server", e)))
		return rc;
	doc = json_pack("{s:s, s:s, s:s, s:s, s:s*}", "data_dir", data, "listen", listen, "store",
			"sqlite", "agent_token", d->token, "socket", sock);
	text = doc ? json_dumps(doc, 0) : NULL;
	if (!text)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
	else if (!(rc = server_config_parse(text, strlen(text), out, e)) &&
		 (rc = server_config_finalize(*out, e))) {
		server_config_free(*out);
		*out = NULL;
	}
	json_decref(doc);
	free(text);
	return rc ? err_wrap(e, "server config") : 0;
}

/* The URL the agent joins the server at: listen, with a wildcard host made loopback. */
static int csid_dev_server_url(const char *listen, char *buf, size_t len, struct err *e)
{
	const char *colon = strrchr(listen, ':');
	size_t host = colon ? (size_t)(colon - listen) : 0;
	int n;

	if (!colon)
		return err_set(e, CSID_EINVAL, "-listen %s: expected HOST:PORT", listen);
	if ((host == 7 && !strncmp(listen, "0.0.0.0", 7)) || host == 0)
		n = snprintf(buf, len, "http://127.0.0.1%s", colon);
	else if (host == 4 && !strncmp(listen, "[::]", 4))
		n = snprintf(buf, len, "http://[::1]%s", colon);
	else
		n = snprintf(buf, len, "http://%s", listen);
	return (size_t)n < len ? 0 : err_set(e, CSID_EINVAL, "-listen %s: too long", listen);
}

/*
 * The agent's config: data under <dir>/agent, the node name, a TCP
 * listener on a free loopback port, the server and token, and
 * csi-hostpath as a supervised monolith with its data under <dir>/hostpath.
 */
static int csid_dev_agent_config(struct csid_dev *d, const char *server_url, struct config **out,
				 struct err *e)
{
	char data[PATH_MAX], hp_data[PATH_MAX], hp[PATH_MAX], addr[64];
	json_t *doc;
	char *text = NULL;
	int rc, port = 0;

	if ((rc = csid_dev_path(data, sizeof(data), d->dir, "agent", e)) ||
	    (rc = csid_dev_path(hp_data, sizeof(hp_data), d->dir, "hostpath", e)) ||
	    (rc = csid_dev_free_port(&port, e)))
		return err_wrap(e, "agent config");
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
	csid_dev_hostpath(d, hp, sizeof(hp));
	doc = json_pack("{s:s, s:s, s:{s:s}, s:[s], s:s,"
			" s:[{s:s, s:s, s:s, s:[s,s,s,s,s,s]}]}",
			"data_dir", data, "node_name", d->flag_node ? d->flag_node : CSID_DEV_NODE,
			"listener", "addr", addr, "servers", server_url, "server_token", d->token,
			"plugins", "id", CSID_DEV_HP_ID, "type", "monolith", "command", hp, "args",
			"--endpoint", "${CSI_ENDPOINT}", "--node-id", "${NODE_NAME}", "--data-dir",
			hp_data);
	text = doc ? json_dumps(doc, 0) : NULL;
	if (!text)
		rc = err_set(e, CSID_ENOMEM, "out of memory");
	else if (!(rc = config_parse(text, strlen(text), out, e)) &&
		 ((rc = config_finalize(*out, e)) ||
		  /* Docker and Podman find it at /run/docker/plugins/csid.sock. */
		  (rc = config_docker_enable(*out, NULL, e)))) {
		config_free(*out);
		*out = NULL;
	}
	json_decref(doc);
	free(text);
	return rc ? err_wrap(e, "agent config") : 0;
}

/* ---- stop (loop thread) ---- */

static void csid_dev_close_cb(uv_handle_t *h)
{
}

/* Both parts have stopped: let the loop end. */
static void csid_dev_maybe_done(struct csid_dev *d)
{
	if (!d->server_stopped || !d->agent_stopped || uv_is_closing((uv_handle_t *)&d->sig_term))
		return;
	uv_close((uv_handle_t *)&d->sig_term, csid_dev_close_cb);
	uv_close((uv_handle_t *)&d->sig_int, csid_dev_close_cb);
}

/* The server first, so that its reconciler drains while the agent still answers. */
static void csid_dev_stop(struct csid_dev *d)
{
	if (d->stopping)
		return;
	d->stopping = true;
	if (!d->server_stopped)
		csid_server_run_stop(d->server);
	else if (!d->agent_stopped)
		csid_agent_run_stop(d->agent);
	csid_dev_maybe_done(d);
}

static void csid_dev_server_stopped(void *ctx, int exit_code)
{
	struct csid_dev *d = ctx;

	d->server_stopped = true;
	if (exit_code)
		d->exit_code = 1;
	d->stopping = true;
	if (!d->agent_stopped)
		csid_agent_run_stop(d->agent);
	csid_dev_maybe_done(d);
}

/* The agent stops by itself only when it failed to start: stop the server too. */
static void csid_dev_agent_stopped(void *ctx, int exit_code)
{
	struct csid_dev *d = ctx;

	d->agent_stopped = true;
	if (exit_code)
		d->exit_code = 1;
	csid_dev_stop(d);
	csid_dev_maybe_done(d);
}

static void csid_dev_on_signal(uv_signal_t *h, int signo)
{
	struct csid_dev *d = h->data;

	log_info("msg=\"shutting down\" signal=%d", signo);
	csid_dev_stop(d);
}

/* ---- cleanup of the directory (after the loop) ---- */

static int csid_dev_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	if (remove(path) != 0 && errno != ENOENT)
		log_warn("msg=\"cannot remove\" path=%s errno=%d", path, errno);
	return 0;
}

/* Detaches every mount at or under dir, deepest first (the set is sorted). */
static void csid_dev_unmount_all(const char *dir)
{
	struct mount_table *t = mountinfo_table();
	struct mount_set set = {0};
	size_t dlen = strlen(dir);
	struct err e;
	char q[600];
	int n = 0;

	err_clear(&e);
	if (t->load(t, &set, &e) != 0) {
		log_error("msg=\"cannot read the mount table\" error=%s",
			  log_q(q, sizeof(q), e.msg));
		return;
	}
	for (size_t i = set.n; i-- > 0;) {
		const char *p = set.paths[i];
		bool lazy = false;

		if (strncmp(p, dir, dlen) != 0 || (p[dlen] != '/' && p[dlen] != '\0'))
			continue;
		if (mount_table_detach(t, p, &lazy, &e) != 0)
			log_error("msg=\"cannot unmount\" path=%s error=%s", p,
				  log_q(q, sizeof(q), e.msg));
		else
			n++;
	}
	mount_set_clear(&set);
	if (n)
		log_info("msg=\"mounts detached\" dir=%s count=%d", dir, n);
}

/* What csid dev made under dir, then dir itself when nothing else is left. */
static void csid_dev_remove_dir(const char *dir)
{
	static const char *const parts[] = {"server", "agent", "hostpath", CSID_DEV_TOKEN_FILE};
	char path[PATH_MAX];
	struct err e;

	err_clear(&e);
	csid_dev_unmount_all(dir);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		if (csid_dev_path(path, sizeof(path), dir, parts[i], &e) == 0)
			nftw(path, csid_dev_rm_entry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (rmdir(dir) != 0 && errno != ENOENT)
		log_warn("msg=\"data dir kept: it holds other files\" dir=%s", dir);
	else
		log_info("msg=\"data dir removed\" dir=%s", dir);
}

/* ---- start ---- */

/*
 * Where the agent joins the server (into join): the server's unix socket
 * <dir>/server/server.sock ("unix:" + it, also into sock), so that the
 * claims and the controller RPCs between them take no TCP round trip; or,
 * when that path is too long for a socket, url (sock empty).
 */
static void csid_dev_join(struct csid_dev *d, const char *url, char *sock, char *join, size_t len)
{
	int n = snprintf(sock, len, "%s/server/server.sock", d->dir);

	if (n < 0 || n > CONF_SOCK_MAX) {
		log_info("msg=\"data dir too long for a unix socket: the agent joins the server "
			 "over TCP\" dir=%s",
			 d->dir);
		sock[0] = '\0';
		snprintf(join, len, "%s", url);
		return;
	}
	snprintf(join, len, "unix:%s", sock);
}

static int csid_dev_start(struct csid_dev *d, struct err *e)
{
	const char *listen = d->flag_listen ? d->flag_listen : SERVER_CONFIG_LISTEN_DEFAULT;
	struct server_config_file *scfg = NULL;
	struct config *acfg = NULL;
	char url[300], sock[PATH_MAX], join[PATH_MAX + 8];
	int rc;

	if (!*listen)
		return err_set(e, CSID_EINVAL, "-listen: the server's TCP API is needed");
	if ((rc = csid_dev_server_url(listen, url, sizeof(url), e)) ||
	    (rc = csid_dev_make_token(d, e)))
		return rc;
	csid_dev_join(d, url, sock, join, sizeof(sock));
	if ((rc = csid_dev_server_config(d, listen, sock[0] ? sock : NULL, &scfg, e)))
		return rc;
	if ((rc = csid_dev_agent_config(d, join, &acfg, e))) {
		server_config_free(scfg);
		return rc;
	}
	d->server = csid_server_run_new(&d->loop, scfg, csid_dev_server_stopped, d);
	d->agent = csid_agent_run_new(&d->loop, acfg, csid_dev_agent_stopped, d);
	d->server_stopped = !d->server;
	d->agent_stopped = !d->agent;
	if (!d->server || !d->agent)
		return err_set(e, CSID_ENOMEM, "out of memory");
	if ((rc = csid_server_run_start(d->server, e)))
		return err_wrap(e, "server");
	if ((rc = csid_agent_run_start(d->agent, e)))
		return err_wrap(e, "agent");
	log_info("msg=\"dev running\" api=%s agent_joins=%s agent_socket=%s agent_addr=%s node=%s "
		 "data_dir=%s keep=%d",
		 url, join, csid_agent_run_config(d->agent)->listen_socket,
		 csid_agent_run_config(d->agent)->listen_addr,
		 csid_agent_run_config(d->agent)->node_name, d->dir, d->keep);
	return 0;
}

int csid_dev_main(int argc, char **argv)
{
	struct csid_dev d;
	struct err e;
	char q[600];
	int rc;

	memset(&d, 0, sizeof(d));
	d.server_stopped = d.agent_stopped = true;
	err_clear(&e);
	rc = csid_dev_flags(&d, argc, argv);
	if (rc)
		return rc == 1 ? 0 : 2;
	if (d.flag_level) {
		if (log_level_parse(d.flag_level) < 0) {
			fprintf(stderr,
				"csid dev: -log-level: expected debug, info, warn or error\n");
			return 2;
		}
		log_set_level((enum log_level)log_level_parse(d.flag_level));
	}
	if (csid_dev_make_dir(&d, &e) != 0) {
		log_error("msg=\"dev failed to start\" error=%s", log_q(q, sizeof(q), e.msg));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	/* Before any thread: libcurl's global setup is not thread-safe. */
	curl_global_init(CURL_GLOBAL_DEFAULT);
	uv_loop_init(&d.loop);
	uv_signal_init(&d.loop, &d.sig_term);
	uv_signal_init(&d.loop, &d.sig_int);
	d.sig_term.data = d.sig_int.data = &d;
	uv_signal_start(&d.sig_term, csid_dev_on_signal, SIGTERM);
	uv_signal_start(&d.sig_int, csid_dev_on_signal, SIGINT);
	if (csid_dev_start(&d, &e) != 0) {
		log_error("msg=\"dev failed to start\" error=%s", log_q(q, sizeof(q), e.msg));
		d.exit_code = 1;
		csid_dev_stop(&d);
	}
	uv_run(&d.loop, UV_RUN_DEFAULT);
	uv_loop_close(&d.loop);
	csid_agent_run_free(d.agent);
	csid_server_run_free(d.server);
	/* Join libuv's pool threads (their gRPC queues go with them) before gRPC stops. */
	uv_library_shutdown();
	csi_grpc_shutdown();
	curl_global_cleanup();
	if (d.keep)
		log_info("msg=\"data dir kept\" dir=%s", d.dir);
	else
		csid_dev_remove_dir(d.dir);
	return d.exit_code;
}
