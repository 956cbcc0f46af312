/*
 * The seam between csi-hostpath and the host for every operation on a
 * path the CO gave (staging and target paths): bind mounts, creating and
 * removing the publish target, stat and statvfs. The real operations call
 * mount(2)/umount2(2) directly (never mount(8)); the fake keeps a small
 * in-memory table of paths so unit tests and the fuzz target never touch
 * the host. Every operation returns 0 or a negative errno value.
 */
#ifndef HP_MOUNT_H
#define HP_MOUNT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum hp_path_kind { HP_PATH_NONE, HP_PATH_DIR, HP_PATH_FILE, HP_PATH_OTHER };

struct hp_fsstats {
	int64_t bytes_total, bytes_avail, bytes_used;
	int64_t inodes_total, inodes_free, inodes_used;
};

struct hp_mount_ops {
	/* Kind of path (following symlinks); HP_PATH_NONE when it does not exist. */
	enum hp_path_kind (*kind)(void *ctx, const char *path);
	/* Whether path is the root of a mount. */
	bool (*is_mount)(void *ctx, const char *path);
	/* Creates an empty directory (mode 0750) or an empty file (0640); -EEXIST if present. */
	int (*mkdir)(void *ctx, const char *path);
	int (*mkfile)(void *ctx, const char *path);
	/* Removes an empty directory or an empty regular file; -ENOENT if absent. */
	int (*remove)(void *ctx, const char *path);
	/*
	 * Bind-mounts src onto target, then, when flags (MS_RDONLY,
	 * MS_NOEXEC, ...) are set, remounts the bind with them.
	 */
	int (*bind)(void *ctx, const char *src, const char *target, unsigned long flags);
	/* Unmounts target; -EINVAL when it is not a mount point. */
	int (*umount)(void *ctx, const char *target);
	int (*statfs)(void *ctx, const char *path, struct hp_fsstats *st);
	/*
	 * Root of the topmost mount at path (the source path inside its file
	 * system, as /proc/self/mountinfo shows it) into buf; -ENOENT if none.
	 */
	int (*mount_root)(void *ctx, const char *path, char *buf, size_t len);
};

/* The real operations (ctx unused). */
extern const struct hp_mount_ops hp_mount_real;

/*
 * The fake: a table of at most 256 paths with a kind and a mount flag.
 * With dirs_exist set, a path not in the table reads as an existing
 * directory (so the fuzz target reaches the mount code).
 */
struct hp_mount_fake;
extern const struct hp_mount_ops hp_mount_fake_ops;
struct hp_mount_fake *hp_mount_fake_new(bool dirs_exist);
void hp_mount_fake_free(struct hp_mount_fake *f);
/* Adds an existing directory (as the CO would create a staging dir). */
int hp_mount_fake_add_dir(struct hp_mount_fake *f, const char *path);
/* Number of paths currently mounted, and the flags of one mount (-1 if none). */
int hp_mount_fake_mounts(const struct hp_mount_fake *f);
long hp_mount_fake_flags(const struct hp_mount_fake *f, const char *path);

#endif
