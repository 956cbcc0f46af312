/*
 * /proc/PID/stat (procstat.h): one parser for every reader, counted from
 * the last parenthesis so a hostile command name cannot shift the fields.
 */
#include "util/procstat.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "util/err.h"

int procstat_parse(const char *text, size_t len, char *state, uint64_t *start)
{
	const char *end = text + len, *p = NULL;
	uint64_t v = 0;
	int field = 3;

	for (const char *q = text; q < end; q++)
		if (*q == ')')
			p = q;
	if (!p || p + 2 >= end || p[1] != ' ')
		return CSID_EINVAL;
	p += 2;
	*state = *p;
	/* Fields 3.. are space-separated; skip to field 22. */
	while (field < 22) {
		while (p < end && *p != ' ')
			p++;
		if (p >= end)
			return CSID_EINVAL;
		p++;
		field++;
	}
	if (p >= end || *p < '0' || *p > '9')
		return CSID_EINVAL;
	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return CSID_EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p < end && *p != ' ' && *p != '\n')
		return CSID_EINVAL;
	*start = v;
	return 0;
}

int procstat_read(int pid, char *state, uint64_t *start)
{
	char path[64], buf[1024];
	ssize_t n;
	int fd;

	if (pid == 0)
		snprintf(path, sizeof(path), "/proc/self/stat");
	else
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? CSID_ENOTFOUND : err_from_errno(errno);
	n = read(fd, buf, sizeof(buf));
	if (n < 0) {
		int saved = errno;

		close(fd);
		/* The process ended between open and read. */
		return saved == ESRCH ? CSID_ENOTFOUND : err_from_errno(saved);
	}
	close(fd);
	return procstat_parse(buf, (size_t)n, state, start) ? CSID_EIO : 0;
}
