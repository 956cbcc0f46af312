/*
 * Connections per local process on a unix-socket listener. libmicrohttpd
 * bounds connections per client address on TCP only; on a unix socket
 * every client has the same (empty) address, so one local process that
 * leaks connections could hold every slot (and, on a threaded listener,
 * a thread each) until the idle timeout, and lock out csictl, the
 * container engines and every other caller. Here each new unix
 * connection is counted by the peer's process ID (SO_PEERCRED, taken by
 * the kernel at connect time); one beyond limits.per_client is shut
 * down at once (libmicrohttpd then sees the end of the stream and
 * closes it), with a warning at most once a second naming the process.
 *
 * The table is a small array searched in order: it holds one entry per
 * process with connections open, a handful in practice and at most
 * max_conns.
 */
#include "api/http_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "util/clock.h"
#include "util/log.h"

void http_peers_init(struct http_peers *p)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
}

void http_peers_fini(struct http_peers *p)
{
	pthread_mutex_destroy(&p->mu);
	free(p->v);
	p->v = NULL;
	p->n = p->cap = 0;
}

/* Adds delta to pid's count (mu held); returns the new count, 0 when out of memory. */
static unsigned http_peers_add(struct http_peers *p, pid_t pid, int delta)
{
	size_t i;

	for (i = 0; i < p->n && p->v[i].pid != pid; i++)
		;
	if (i == p->n) {
		if (delta < 0)
			return 0;
		if (p->n == p->cap) {
			size_t cap = p->cap ? 2 * p->cap : 8;
			struct http_peer *v = realloc(p->v, cap * sizeof(*v));

			if (!v)
				return 0;
			p->v = v;
			p->cap = cap;
		}
		p->v[p->n++] = (struct http_peer){.pid = pid};
	}
	p->v[i].n = (unsigned)((int)p->v[i].n + delta);
	if (p->v[i].n > 0)
		return p->v[i].n;
	p->v[i] = p->v[--p->n];
	return 0;
}

void http_peers_started(struct http_server *s, struct MHD_Connection *c, void **socket_ctx)
{
	const union MHD_ConnectionInfo *fd_info =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	const union MHD_ConnectionInfo *addr =
	    MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	struct http_peers *p = &s->peers;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	unsigned n, limit = s->cfg.limits.per_client;
	bool warn = false;
	unsigned long refused = 0;

	*socket_ctx = NULL;
	if (!fd_info || !addr || !addr->client_addr || addr->client_addr->sa_family != AF_UNIX ||
	    getsockopt(fd_info->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
	    cred.pid <= 0)
		return;
	pthread_mutex_lock(&p->mu);
	n = http_peers_add(p, cred.pid, 1);
	if (n > limit) {
		int64_t now_s = clock_now_ms(clock_real()) / 1000;

		p->refused++;
		if (now_s != p->warned_s) {
			p->warned_s = now_s;
			warn = true;
			refused = p->refused;
			p->refused = 0;
		}
	}
	pthread_mutex_unlock(&p->mu);
	/* Counted (also over the limit): the close takes it away again. */
	if (n > 0)
		*socket_ctx = (void *)(intptr_t)cred.pid;
	if (n <= limit)
		return;
	shutdown(fd_info->connect_fd, SHUT_RDWR);
	if (warn)
		log_warn("msg=\"%s: a local process holds too many connections; closed\" pid=%d "
			 "uid=%u limit=%u closed_since_last_warning=%lu",
			 s->name, (int)cred.pid, (unsigned)cred.uid, limit, refused);
}

void http_peers_closed(struct http_server *s, void *socket_ctx)
{
	pid_t pid = (pid_t)(intptr_t)socket_ctx;

	if (pid <= 0)
		return;
	pthread_mutex_lock(&s->peers.mu);
	http_peers_add(&s->peers, pid, -1);
	pthread_mutex_unlock(&s->peers.mu);
}
