/*
 * What the HTTP layer opens before serving (see http_int.h): the unix
 * listener (a stale socket file replaced, mode 0600), the TCP listener
 * ("host:port", "[v6]:port"), and the PEM files of TLS, read whole and
 * wiped when freed (one of them is a private key).
 */
#include "api/http_int.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int http_listen_unix(const char *name, const char *path, struct err *e)
{
	struct sockaddr_un sa;
	int fd;

	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa.sun_path))
		return err_set(e, CSID_EINVAL, "%s: listener socket %s: longer than %zu bytes",
			       name, path, sizeof(sa.sun_path) - 1);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "socket");
	/* A socket file that nobody answers on is left over from a crash: replace it. */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		return err_set(e, CSID_EEXIST, "%s: listener socket %s: another process listens",
			       name, path);
	}
	close(fd);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "socket");
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(fd, 128) != 0) {
		int rc = err_errno(e, errno, "%s: listener socket %s", name, path);

		close(fd);
		return rc;
	}
	return fd;
}

int http_listen_tcp(const char *name, const char *addr, struct err *e)
{
	char host[256], *colon;
	struct addrinfo hints, *res = NULL;
	int fd, one = 1, rc;

	snprintf(host, sizeof(host), "%s", addr);
	colon = strrchr(host, ':');
	if (!colon)
		return err_set(e, CSID_EINVAL, "%s: listener addr %s: expected host:port", name,
			       addr);
	*colon = '\0';
	/* "[::1]:4646" */
	if (host[0] == '[' && colon > host + 1 && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	rc = getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res);
	if (rc != 0)
		return err_set(e, CSID_EINVAL, "%s: listener addr %s: %s", name, addr,
			       gai_strerror(rc));
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		freeaddrinfo(res);
		return err_errno(e, errno, "socket");
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
		rc = err_errno(e, errno, "%s: listener addr %s", name, addr);
		close(fd);
		freeaddrinfo(res);
		return rc;
	}
	freeaddrinfo(res);
	return fd;
}

/* Reads a PEM file of at most HTTP_TLS_FILE_MAX bytes into *out (malloc'd, NUL-terminated). */
int http_read_pem(const char *name, const char *what, const char *path, char **out, struct err *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	struct stat st;
	size_t len = 0;
	char *buf = NULL;

	*out = NULL;
	if (fd < 0)
		return err_errno(e, errno, "%s: %s %s", name, what, path);
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0 ||
	    st.st_size > HTTP_TLS_FILE_MAX) {
		rc = err_set(e, CSID_EINVAL, "%s: %s %s: not a file of 1 byte to 1 MiB", name, what,
			     path);
		goto out;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (!buf) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	while (len < (size_t)st.st_size) {
		ssize_t r = read(fd, buf + len, (size_t)st.st_size - len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	buf[len] = '\0';
	if (len != (size_t)st.st_size) {
		rc = err_set(e, CSID_EIO, "%s: %s %s: short read", name, what, path);
		explicit_bzero(buf, len);
		free(buf);
		buf = NULL;
	}
out:
	close(fd);
	*out = buf;
	return rc;
}

void http_free_pem(char *p)
{
	if (p) {
		explicit_bzero(p, strlen(p));
		free(p);
	}
}
