/*
 * sd_notify(3) over $NOTIFY_SOCKET (see sd_notify.h): a unix datagram
 * socket opened for each message, so no descriptor stays open in the
 * service or leaks into the plugins it starts. A leading '@' names the
 * abstract namespace (the '@' becomes a NUL byte and the address length
 * counts only the name, without a terminating NUL).
 */
#include "util/sd_notify.h"

#include "util/log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sd_notify_send(const char *state, struct err *e)
{
	const char *path = getenv("NOTIFY_SOCKET");
	struct sockaddr_un sa;
	socklen_t salen;
	size_t len;
	ssize_t n;
	int fd, rc = 0;

	if (!path || !path[0])
		return 0;
	len = strlen(path);
	if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path))
		return err_set(e, CSID_EINVAL,
			       "NOTIFY_SOCKET: expected an absolute path or @name of at most %zu "
			       "bytes",
			       sizeof(sa.sun_path) - 1);
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	memcpy(sa.sun_path, path, len);
	if (path[0] == '@')
		sa.sun_path[0] = '\0';
	salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (path[0] == '/'));
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_errno(e, errno, "NOTIFY_SOCKET: socket");
	n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
	if (n < 0)
		rc = err_errno(e, errno, "NOTIFY_SOCKET %s: send", path);
	else if ((size_t)n != strlen(state))
		rc = err_set(e, CSID_EIO, "NOTIFY_SOCKET %s: short send", path);
	close(fd);
	return rc;
}

void sd_notify_state(const char *state)
{
	struct err e;
	char q[600];

	err_clear(&e);
	if (sd_notify_send(state, &e))
		log_warn("msg=\"cannot notify systemd\" error=%s", log_q(q, sizeof(q), e.msg));
}
