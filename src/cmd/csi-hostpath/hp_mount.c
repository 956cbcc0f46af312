/*
 * Host operations on CO paths: the real ones (mount(2), umount2(2),
 * statx, statvfs) and an in-memory fake for tests and fuzzing. A bind
 * mount that must be read-only (or carry noexec etc.) takes a second
 * mount(2) call, MS_REMOUNT|MS_BIND, because the kernel ignores those
 * flags on the first bind; the remount keeps the flags the kernel already
 * locked on the mount (nosuid, nodev, ... read back with statvfs).
 */
#include "hp_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static enum hp_path_kind hp_mount_real_kind(void *ctx, const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return HP_PATH_NONE;
	if (S_ISDIR(st.st_mode))
		return HP_PATH_DIR;
	if (S_ISREG(st.st_mode))
		return HP_PATH_FILE;
	return HP_PATH_OTHER;
}

static bool hp_mount_real_is_mount(void *ctx, const char *path)
{
	struct statx sx;

	if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &sx) != 0)
		return false;
	return (sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) &&
	       (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT);
}

static int hp_mount_real_mkdir(void *ctx, const char *path)
{
	return mkdir(path, 0750) == 0 ? 0 : -errno;
}

static int hp_mount_real_mkfile(void *ctx, const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0640);

	if (fd < 0)
		return -errno;
	close(fd);
	return 0;
}

static int hp_mount_real_remove(void *ctx, const char *path)
{
	struct stat st;

	if (lstat(path, &st) != 0)
		return -errno;
	if (S_ISDIR(st.st_mode))
		return rmdir(path) == 0 ? 0 : -errno;
	/* Only the empty file the plugin created as a block target. */
	if (!S_ISREG(st.st_mode) || st.st_size != 0)
		return -ENOTEMPTY;
	return unlink(path) == 0 ? 0 : -errno;
}

static unsigned long hp_mount_real_locked(const char *target)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (statvfs(target, &sv) != 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_RDONLY)
		f |= MS_RDONLY;
	return f;
}

static int hp_mount_real_bind(void *ctx, const char *src, const char *target, unsigned long flags)
{
	int rc;

	if (mount(src, target, NULL, MS_BIND, NULL) != 0)
		return -errno;
	if (!flags)
		return 0;
	flags |= hp_mount_real_locked(target);
	if (mount(NULL, target, NULL, MS_BIND | MS_REMOUNT | flags, NULL) == 0)
		return 0;
	rc = -errno;
	umount2(target, MNT_DETACH);
	return rc;
}

static int hp_mount_real_umount(void *ctx, const char *target)
{
	if (umount2(target, UMOUNT_NOFOLLOW) == 0)
		return 0;
	/* A busy mount is detached so the CO's unpublish can complete. */
	if (errno == EBUSY && umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
		return 0;
	return -errno;
}

static int hp_mount_real_statfs(void *ctx, const char *path, struct hp_fsstats *st)
{
	struct statvfs sv;

	if (statvfs(path, &sv) != 0)
		return -errno;
	st->bytes_total = (int64_t)(sv.f_blocks * sv.f_frsize);
	st->bytes_avail = (int64_t)(sv.f_bavail * sv.f_frsize);
	st->bytes_used = (int64_t)((sv.f_blocks - sv.f_bfree) * sv.f_frsize);
	st->inodes_total = (int64_t)sv.f_files;
	st->inodes_free = (int64_t)sv.f_ffree;
	st->inodes_used = (int64_t)(sv.f_files - sv.f_ffree);
	return 0;
}

/* Decodes the octal escapes (\\040 for a space) of a mountinfo field in place. */
static void hp_mount_unescape(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
		    s[3] >= '0' && s[3] <= '7') {
			*out++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 3;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

static int hp_mount_real_root(void *ctx, const char *path, char *buf, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int rc = -ENOENT;

	if (!f)
		return -errno;
	while (getline(&line, &cap, f) > 0) {
		char *save = NULL, *root = NULL, *mp = NULL, *tok;
		int i = 0;

		for (tok = strtok_r(line, " ", &save); tok && i < 5;
		     tok = strtok_r(NULL, " ", &save), i++) {
			if (i == 3)
				root = tok;
			else if (i == 4)
				mp = tok;
		}
		if (!mp)
			continue;
		hp_mount_unescape(mp);
		if (strcmp(mp, path) != 0)
			continue;
		hp_mount_unescape(root);
		snprintf(buf, len, "%s", root); /* later lines are mounted on top */
		rc = 0;
	}
	free(line);
	fclose(f);
	return rc;
}

const struct hp_mount_ops hp_mount_real = {
    .kind = hp_mount_real_kind,
    .is_mount = hp_mount_real_is_mount,
    .mkdir = hp_mount_real_mkdir,
    .mkfile = hp_mount_real_mkfile,
    .remove = hp_mount_real_remove,
    .bind = hp_mount_real_bind,
    .umount = hp_mount_real_umount,
    .statfs = hp_mount_real_statfs,
    .mount_root = hp_mount_real_root,
};

/* --- the fake --- */

#define HP_MOUNT_FAKE_MAX 256

struct hp_mount_fake_path {
	char *path;
	char *root;
	enum hp_path_kind kind;
	bool mounted;
	unsigned long flags;
};

struct hp_mount_fake {
	struct hp_mount_fake_path p[HP_MOUNT_FAKE_MAX];
	int n;
	bool dirs_exist;
};

struct hp_mount_fake *hp_mount_fake_new(bool dirs_exist)
{
	struct hp_mount_fake *f = calloc(1, sizeof(*f));

	if (f)
		f->dirs_exist = dirs_exist;
	return f;
}

void hp_mount_fake_free(struct hp_mount_fake *f)
{
	if (!f)
		return;
	for (int i = 0; i < f->n; i++) {
		free(f->p[i].path);
		free(f->p[i].root);
	}
	free(f);
}

static struct hp_mount_fake_path *hp_mount_fake_find(const struct hp_mount_fake *f,
						     const char *path)
{
	for (int i = 0; i < f->n; i++)
		if (strcmp(f->p[i].path, path) == 0)
			return (struct hp_mount_fake_path *)&f->p[i];
	return NULL;
}

static int hp_mount_fake_add(struct hp_mount_fake *f, const char *path, enum hp_path_kind kind)
{
	struct hp_mount_fake_path *e = hp_mount_fake_find(f, path);

	if (e)
		return -EEXIST;
	if (f->n == HP_MOUNT_FAKE_MAX)
		return -ENOSPC;
	e = &f->p[f->n];
	e->path = strdup(path);
	if (!e->path)
		return -ENOMEM;
	e->root = NULL;
	e->kind = kind;
	e->mounted = false;
	e->flags = 0;
	f->n++;
	return 0;
}

int hp_mount_fake_add_dir(struct hp_mount_fake *f, const char *path)
{
	return hp_mount_fake_add(f, path, HP_PATH_DIR);
}

int hp_mount_fake_mounts(const struct hp_mount_fake *f)
{
	int n = 0;

	for (int i = 0; i < f->n; i++)
		n += f->p[i].mounted;
	return n;
}

long hp_mount_fake_flags(const struct hp_mount_fake *f, const char *path)
{
	const struct hp_mount_fake_path *e = hp_mount_fake_find(f, path);

	return e && e->mounted ? (long)e->flags : -1;
}

static enum hp_path_kind hp_mount_fake_kind(void *ctx, const char *path)
{
	struct hp_mount_fake *f = ctx;
	struct hp_mount_fake_path *e = hp_mount_fake_find(f, path);

	if (e)
		return e->kind;
	return f->dirs_exist ? HP_PATH_DIR : HP_PATH_NONE;
}

static bool hp_mount_fake_is_mount(void *ctx, const char *path)
{
	struct hp_mount_fake_path *e = hp_mount_fake_find(ctx, path);

	return e && e->mounted;
}

static int hp_mount_fake_mkdir(void *ctx, const char *path)
{
	return hp_mount_fake_add(ctx, path, HP_PATH_DIR);
}

static int hp_mount_fake_mkfile(void *ctx, const char *path)
{
	return hp_mount_fake_add(ctx, path, HP_PATH_FILE);
}

static int hp_mount_fake_remove(void *ctx, const char *path)
{
	struct hp_mount_fake *f = ctx;
	struct hp_mount_fake_path *e = hp_mount_fake_find(f, path);

	if (!e)
		return -ENOENT;
	if (e->mounted)
		return -EBUSY;
	free(e->path);
	free(e->root);
	*e = f->p[--f->n];
	return 0;
}

static int hp_mount_fake_bind(void *ctx, const char *src, const char *target, unsigned long flags)
{
	struct hp_mount_fake *f = ctx;
	struct hp_mount_fake_path *e = hp_mount_fake_find(f, target), *s;
	char *root;
	int rc;

	if (!e) {
		if (!f->dirs_exist)
			return -ENOENT;
		rc = hp_mount_fake_add(f, target, HP_PATH_DIR);
		if (rc)
			return rc;
		e = hp_mount_fake_find(f, target);
	}
	/* A bind of a bind shows the first source as its root, as the kernel does. */
	s = hp_mount_fake_find(f, src);
	root = strdup(s && s->mounted && s->root ? s->root : src);
	if (!root)
		return -ENOMEM;
	free(e->root);
	e->root = root;
	e->mounted = true;
	e->flags = flags;
	return 0;
}

static int hp_mount_fake_umount(void *ctx, const char *target)
{
	struct hp_mount_fake_path *e = hp_mount_fake_find(ctx, target);

	if (!e)
		return -ENOENT;
	if (!e->mounted)
		return -EINVAL;
	e->mounted = false;
	return 0;
}

static int hp_mount_fake_statfs(void *ctx, const char *path, struct hp_fsstats *st)
{
	if (hp_mount_fake_kind(ctx, path) == HP_PATH_NONE)
		return -ENOENT;
	*st = (struct hp_fsstats){.bytes_total = 1 << 30,
				  .bytes_avail = 1 << 29,
				  .bytes_used = 1 << 29,
				  .inodes_total = 1000,
				  .inodes_free = 900,
				  .inodes_used = 100};
	return 0;
}

static int hp_mount_fake_root(void *ctx, const char *path, char *buf, size_t len)
{
	struct hp_mount_fake_path *e = hp_mount_fake_find(ctx, path);

	if (!e || !e->mounted || !e->root)
		return -ENOENT;
	snprintf(buf, len, "%s", e->root);
	return 0;
}

const struct hp_mount_ops hp_mount_fake_ops = {
    .kind = hp_mount_fake_kind,
    .is_mount = hp_mount_fake_is_mount,
    .mkdir = hp_mount_fake_mkdir,
    .mkfile = hp_mount_fake_mkfile,
    .remove = hp_mount_fake_remove,
    .bind = hp_mount_fake_bind,
    .umount = hp_mount_fake_umount,
    .statfs = hp_mount_fake_statfs,
    .mount_root = hp_mount_fake_root,
};
