/*
 * Backing-store file work for csi-hostpath. Everything goes through
 * directory file descriptors (openat, mkdirat, unlinkat with O_NOFOLLOW),
 * so a symlink planted inside a volume can never redirect a copy or a
 * removal outside the tree, and removal stops at mount boundaries.
 * Recursion is bounded (HP_FS_DEPTH) to keep the stack small.
 */
#include "hp_fs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#define HP_FS_DEPTH 64

int hp_fs_create(const char *path, int block, int64_t size, struct err *e)
{
	int fd;

	if (!block) {
		if (mkdir(path, 0770) != 0)
			return err_errno(e, errno, "mkdir %s", path);
		return 0;
	}
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0660);
	if (fd < 0)
		return err_errno(e, errno, "create %s", path);
	if (ftruncate(fd, size) != 0) {
		int rc = err_errno(e, errno, "size %s", path);

		close(fd);
		unlink(path);
		return rc;
	}
	close(fd);
	return 0;
}

int hp_fs_grow(const char *path, int64_t size, struct err *e)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
	int rc = 0;

	if (fd < 0)
		return err_errno(e, errno, "open %s", path);
	if (fstat(fd, &st) != 0)
		rc = err_errno(e, errno, "stat %s", path);
	else if (st.st_size < size && ftruncate(fd, size) != 0)
		rc = err_errno(e, errno, "grow %s", path);
	close(fd);
	return rc;
}

int64_t hp_fs_size(const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return 0;
	return st.st_size;
}

/* Copies the data extents of in to out (holes stay holes), then sets the size. */
static int hp_fs_copy_data(int in, int out, off_t size)
{
	off_t pos = 0;

	if (ioctl(out, FICLONE, in) == 0)
		return 0;
	while (pos < size) {
		off_t data = lseek(in, pos, SEEK_DATA), hole, off;

		if (data < 0 && errno == ENXIO)
			break; /* no more data: the rest is a hole */
		if (data < 0) {
			/* No SEEK_DATA here: copy everything that is left. */
			data = pos;
			hole = size;
		} else {
			hole = lseek(in, data, SEEK_HOLE);
			if (hole < 0 || hole > size)
				hole = size;
		}
		off = data;
		while (off < hole) {
			off_t src_off = off, dst_off = off;
			ssize_t n =
			    copy_file_range(in, &src_off, out, &dst_off, (size_t)(hole - off), 0);

			if (n < 0)
				return -errno;
			if (n == 0)
				break;
			off += n;
		}
		pos = hole;
	}
	return ftruncate(out, size) == 0 ? 0 : -errno;
}

static int hp_fs_copy_file(int sdir, const char *sname, int ddir, const char *dname,
			   const struct stat *st, int64_t min_size)
{
	int in = openat(sdir, sname, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	int out = -1, rc;
	off_t size = st->st_size;

	if (in < 0)
		return -errno;
	out = openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
		     st->st_mode & 07777);
	if (out < 0) {
		rc = -errno;
		goto done;
	}
	rc = hp_fs_copy_data(in, out, size);
	if (!rc && min_size > size && ftruncate(out, min_size) != 0)
		rc = -errno;
	if (!rc &&
	    (fchown(out, st->st_uid, st->st_gid) != 0 || fchmod(out, st->st_mode & 07777) != 0))
		rc = -errno;
done:
	if (out >= 0)
		close(out);
	close(in);
	return rc;
}

/* Where a tree walk stands: the other directory (copy) or device (remove), and the depth. */
struct hp_fs_walk {
	int dfd;
	dev_t dev;
	int depth;
};

/*
 * Calls fn for every entry of directory fd but "." and "..", stopping at
 * the first error; takes no ownership of fd.
 */
static int hp_fs_each(int fd, int (*fn)(int fd, const char *name, const struct hp_fs_walk *w),
		      const struct hp_fs_walk *w)
{
	int dupfd = dup(fd), rc = 0;
	DIR *d;
	struct dirent *de;

	if (dupfd < 0)
		return -errno;
	d = fdopendir(dupfd);
	if (!d) {
		rc = -errno;
		close(dupfd);
		return rc;
	}
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		rc = fn(fd, de->d_name, w);
		if (rc)
			break;
	}
	closedir(d);
	return rc;
}

static int hp_fs_copy_entry(int sfd, const char *name, const struct hp_fs_walk *w)
{
	struct hp_fs_walk sub = {.depth = w->depth + 1};
	int dfd = w->dfd;
	struct stat st;
	char link[4096];
	ssize_t n;
	int s2, d2, rc;

	if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return -errno;
	if (S_ISREG(st.st_mode))
		return hp_fs_copy_file(sfd, name, dfd, name, &st, 0);
	if (S_ISLNK(st.st_mode)) {
		n = readlinkat(sfd, name, link, sizeof(link) - 1);
		if (n < 0)
			return -errno;
		link[n] = '\0';
		return symlinkat(link, dfd, name) == 0 ? 0 : -errno;
	}
	if (!S_ISDIR(st.st_mode))
		return 0; /* devices, fifos and sockets are not copied */
	if (w->depth >= HP_FS_DEPTH)
		return -ELOOP;
	if (mkdirat(dfd, name, 0700) != 0)
		return -errno;
	s2 = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (s2 < 0)
		return -errno;
	d2 = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (d2 < 0) {
		rc = -errno;
		close(s2);
		return rc;
	}
	sub.dfd = d2;
	rc = hp_fs_each(s2, hp_fs_copy_entry, &sub);
	if (!rc && (fchown(d2, st.st_uid, st.st_gid) != 0 || fchmod(d2, st.st_mode & 07777) != 0))
		rc = -errno;
	close(d2);
	close(s2);
	return rc;
}

int hp_fs_copy(const char *src, const char *dst, int64_t min_size, struct err *e)
{
	struct stat st;
	int sfd = -1, dfd = -1, rc;

	if (lstat(src, &st) != 0)
		return err_errno(e, errno, "stat %s", src);
	if (S_ISREG(st.st_mode)) {
		rc = hp_fs_copy_file(AT_FDCWD, src, AT_FDCWD, dst, &st, min_size);
		goto done;
	}
	if (!S_ISDIR(st.st_mode))
		return err_set(e, CSID_EINTERNAL, "%s is neither a file nor a directory", src);
	if (mkdir(dst, st.st_mode & 07777) != 0)
		return err_errno(e, errno, "mkdir %s", dst);
	sfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	dfd = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (sfd < 0 || dfd < 0)
		rc = -errno;
	else
		rc = hp_fs_each(sfd, hp_fs_copy_entry, &(struct hp_fs_walk){.dfd = dfd});
	if (sfd >= 0)
		close(sfd);
	if (dfd >= 0)
		close(dfd);
done:
	if (rc) {
		hp_fs_remove(dst, NULL);
		return err_errno(e, -rc, "copy %s to %s", src, dst);
	}
	return 0;
}

static int hp_fs_remove_entry(int dfd, const char *name, const struct hp_fs_walk *w)
{
	struct hp_fs_walk sub = {.dev = w->dev, .depth = w->depth + 1};
	struct stat st;
	int fd, rc;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dfd, name, 0) == 0 || errno == ENOENT ? 0 : -errno;
	if (st.st_dev != w->dev)
		return -EXDEV; /* a mount inside a volume: leave it alone */
	if (w->depth >= HP_FS_DEPTH)
		return -ELOOP;
	fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -errno;
	rc = hp_fs_each(fd, hp_fs_remove_entry, &sub);
	close(fd);
	if (rc)
		return rc;
	return unlinkat(dfd, name, AT_REMOVEDIR) == 0 || errno == ENOENT ? 0 : -errno;
}

int hp_fs_remove(const char *path, struct err *e)
{
	struct stat st;
	int fd, rc;

	/* Fast path: most volumes are deleted empty. */
	if (rmdir(path) == 0 || errno == ENOENT)
		return 0;
	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : err_errno(e, errno, "stat %s", path);
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) != 0 && errno != ENOENT)
			return err_errno(e, errno, "remove %s", path);
		return 0;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return err_errno(e, errno, "open %s", path);
	rc = hp_fs_each(fd, hp_fs_remove_entry, &(struct hp_fs_walk){.dev = st.st_dev});
	close(fd);
	if (rc)
		return err_errno(e, -rc, "remove %s", path);
	if (rmdir(path) != 0 && errno != ENOENT)
		return err_errno(e, errno, "remove %s", path);
	return 0;
}
