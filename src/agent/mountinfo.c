/*
 * The real mount table: reads /proc/self/mountinfo (proc(5): "36 35 98:0
 * /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw"), whose fifth
 * field is the mount point with space, tab, newline and backslash written
 * as octal escapes, and removes orphan mounts with umount2(MNT_DETACH)
 * (a forced unmount tries a plain umount2 first, lazy only when busy).
 * This is the only Linux-specific file of the mounter. A mount set is a
 * sorted array of strings so that a recovery over thousands of records
 * reads the table once and answers each record with a binary search.
 *
 * One path on its own (a mount request for a recorded mount, has_mount)
 * is answered by statx(2) instead of parsing the whole table, which
 * grows with every mount on the node: STATX_ATTR_MOUNT_ROOT (Linux 5.8)
 * says whether the path is the root of a mount. Comparing st_dev with the
 * parent's would not do: a bind mount of a directory of the same file
 * system (what csi-hostpath and many drivers publish) keeps the st_dev,
 * but it is still the root of a mount. The path is not followed when it
 * is a symbolic link (a mount is never on a link, and the table lists the
 * link's own path), and AT_STATX_DONT_SYNC keeps a network file system
 * from being asked. A kernel that does not report the attribute, or an
 * error other than "no such path", falls back to the table. Where the
 * two can differ (a mount hidden by a later mount over a parent), statx
 * answers for what a process opening the path would reach, which is the
 * question the mounter asks.
 */
#include "agent/mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

/* /proc/self/mountinfo is read whole; beyond this size something is wrong. */
#define MOUNTINFO_MAX_BYTES (64u << 20)

static int mountinfo_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

void mount_set_clear(struct mount_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->paths[i]);
	free(s->paths);
	s->paths = NULL;
	s->n = 0;
}

/* Index of the first element >= path. */
static size_t mountinfo_lower_bound(const struct mount_set *s, const char *path)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (strcmp(s->paths[mid], path) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

bool mount_set_has(const struct mount_set *s, const char *path)
{
	size_t i = mountinfo_lower_bound(s, path);

	return i < s->n && strcmp(s->paths[i], path) == 0;
}

int mount_set_add(struct mount_set *s, const char *path, struct err *e)
{
	size_t i = mountinfo_lower_bound(s, path);
	char **grown;
	char *copy;

	if (i < s->n && strcmp(s->paths[i], path) == 0)
		return 0;
	copy = strdup(path);
	grown = copy ? realloc(s->paths, (s->n + 1) * sizeof(*grown)) : NULL;
	if (grown == NULL) {
		free(copy);
		return err_set(e, CSID_ENOMEM, "mount set: out of memory");
	}
	s->paths = grown;
	memmove(&s->paths[i + 1], &s->paths[i], (s->n - i) * sizeof(*grown));
	s->paths[i] = copy;
	s->n++;
	return 0;
}

/* Decodes the \ooo escapes of one field of length len into a new string. */
static char *mountinfo_unescape(const char *f, size_t len)
{
	char *out = malloc(len + 1);
	size_t o = 0;

	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		if (f[i] == '\\' && i + 3 < len && f[i + 1] >= '0' && f[i + 1] <= '3' &&
		    f[i + 2] >= '0' && f[i + 2] <= '7' && f[i + 3] >= '0' && f[i + 3] <= '7') {
			out[o++] =
			    (char)((f[i + 1] - '0') * 64 + (f[i + 2] - '0') * 8 + (f[i + 3] - '0'));
			i += 3;
		} else {
			out[o++] = f[i];
		}
	}
	out[o] = '\0';
	return out;
}

int mountinfo_parse(const char *buf, size_t len, struct mount_set *out, struct err *e)
{
	size_t cap = 0;
	size_t pos = 0;

	out->paths = NULL;
	out->n = 0;
	while (pos < len) {
		const char *line = buf + pos;
		const char *nl = memchr(line, '\n', len - pos);
		size_t llen = nl ? (size_t)(nl - line) : len - pos;
		const char *f = line;
		const char *end = line + llen;
		char *path;

		pos += llen + 1;
		/* Skip four space-separated fields to reach the mount point. */
		for (int k = 0; k < 4 && f != NULL; k++) {
			f = memchr(f, ' ', (size_t)(end - f));
			f = f ? f + 1 : NULL;
		}
		if (f == NULL || f >= end || *f != '/')
			continue;
		const char *sp = memchr(f, ' ', (size_t)(end - f));
		size_t flen = sp ? (size_t)(sp - f) : (size_t)(end - f);

		if (out->n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			char **grown = realloc(out->paths, ncap * sizeof(*grown));

			if (grown == NULL)
				goto nomem;
			out->paths = grown;
			cap = ncap;
		}
		path = mountinfo_unescape(f, flen);
		if (path == NULL)
			goto nomem;
		out->paths[out->n++] = path;
	}
	if (out->n > 0) {
		size_t w = 1;

		qsort(out->paths, out->n, sizeof(*out->paths), mountinfo_cmp);
		for (size_t r = 1; r < out->n; r++) {
			if (strcmp(out->paths[r], out->paths[w - 1]) == 0)
				free(out->paths[r]);
			else
				out->paths[w++] = out->paths[r];
		}
		out->n = w;
	}
	return 0;
nomem:
	mount_set_clear(out);
	return err_set(e, CSID_ENOMEM, "mountinfo: out of memory");
}

static int mountinfo_load(struct mount_table *t, struct mount_set *out, struct err *e)
{
	size_t cap = 1 << 16, len = 0;
	char *buf = NULL;
	int fd;
	int rc = 0;

	out->paths = NULL;
	out->n = 0;
	fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return err_errno(e, errno, "open /proc/self/mountinfo");
	buf = malloc(cap);
	if (buf == NULL) {
		rc = err_set(e, CSID_ENOMEM, "mountinfo: out of memory");
		goto out;
	}
	for (;;) {
		ssize_t r;

		if (len == cap) {
			char *grown = cap < MOUNTINFO_MAX_BYTES ? realloc(buf, cap * 2) : NULL;

			if (grown == NULL) {
				rc = err_set(e, CSID_ETOOBIG, "mountinfo larger than %zu bytes",
					     cap);
				goto out;
			}
			buf = grown;
			cap *= 2;
		}
		r = read(fd, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = err_errno(e, errno, "read /proc/self/mountinfo");
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	rc = mountinfo_parse(buf, len, out, e);
out:
	free(buf);
	close(fd);
	return rc;
}

static int mountinfo_unmount(struct mount_table *t, const char *path, struct err *e)
{
	if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL && errno != ENOENT)
		return err_errno(e, errno, "umount %s", path);
	return 0;
}

static int mountinfo_detach(struct mount_table *t, const char *path, bool *lazy, struct err *e)
{
	*lazy = false;
	if (umount2(path, UMOUNT_NOFOLLOW) == 0 || errno == EINVAL || errno == ENOENT)
		return 0;
	if (errno != EBUSY)
		return err_errno(e, errno, "umount %s", path);
	*lazy = true;
	return mountinfo_unmount(t, path, e);
}

static int mountinfo_is_mounted(struct mount_table *t, const char *path, bool *out, struct err *e)
{
	struct mount_set s;
	struct statx sx;
	int rc;

	*out = false;
	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | AT_STATX_DONT_SYNC,
		  STATX_TYPE, &sx) == 0) {
		if (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) {
			*out = (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) != 0;
			return 0;
		}
	} else if (errno == ENOENT || errno == ENOTDIR) {
		return 0;
	}
	rc = mountinfo_load(t, &s, e);
	if (rc != 0)
		return rc;
	*out = mount_set_has(&s, path);
	mount_set_clear(&s);
	return 0;
}

static struct mount_table mountinfo_real = {
    .load = mountinfo_load,
    .unmount = mountinfo_unmount,
    .is_mounted = mountinfo_is_mounted,
    .detach = mountinfo_detach,
    .ctx = NULL,
};

struct mount_table *mountinfo_table(void)
{
	return &mountinfo_real;
}

int mount_table_is_mounted(struct mount_table *t, const char *path, bool *out, struct err *e)
{
	struct mount_set s;
	int rc;

	if (t->is_mounted != NULL)
		return t->is_mounted(t, path, out, e);
	rc = t->load(t, &s, e);

	if (rc != 0)
		return rc;
	*out = mount_set_has(&s, path);
	mount_set_clear(&s);
	return 0;
}

int mount_table_detach(struct mount_table *t, const char *path, bool *lazy, struct err *e)
{
	*lazy = false;
	if (t->detach != NULL)
		return t->detach(t, path, lazy, e);
	return t->unmount(t, path, e);
}
