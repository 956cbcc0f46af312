/* Whole-file replacement through a synced temporary file (file_replace.h). */
#include "util/file_replace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int file_replace(const char *path, const char *text, mode_t mode, struct err *e)
{
	size_t len = strlen(text);
	char tmp[4200];
	int fd, rc = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		return err_set(e, CSID_EINVAL, "%s: path too long", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0)
		return err_errno(e, errno, "create %s", tmp);
	if (write(fd, text, len) != (ssize_t)len || fsync(fd) != 0)
		rc = err_errno(e, errno, "write %s", tmp);
	close(fd);
	if (!rc && rename(tmp, path) != 0)
		rc = err_errno(e, errno, "rename %s", tmp);
	if (rc)
		unlink(tmp);
	return rc;
}
