/*
 * The mount table seen by the volume mounter: "which paths are mount
 * points", and the removal of a mount nobody owns. The real table reads
 * /proc/self/mountinfo and calls umount2(2) (this module's .c is the one
 * platform-specific file of the mounter); tests supply a fake table by
 * filling struct mount_table with their own functions.
 */
#ifndef CSID_AGENT_MOUNTINFO_H
#define CSID_AGENT_MOUNTINFO_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* A sorted, de-duplicated set of mount points (absolute paths). Owns its strings. */
struct mount_set {
	char **paths;
	size_t n;
};

struct mount_table {
	/*
	 * Fills *out with every current mount point (out is zeroed first;
	 * release it with mount_set_clear). Returns 0 or a negative code with
	 * e set.
	 */
	int (*load)(struct mount_table *t, struct mount_set *out, struct err *e);
	/* Detaches the mount at path. Returns 0 or a negative code with e set. */
	int (*unmount)(struct mount_table *t, const char *path, struct err *e);
	/*
	 * Optional (NULL: load the table and look path up): whether path is
	 * a mount point, answered for this one path without reading the
	 * whole table. Returns 0 with *out, or a negative code with e set.
	 */
	int (*is_mounted)(struct mount_table *t, const char *path, bool *out, struct err *e);
	/*
	 * Optional (NULL: unmount, reported as not lazy): unmounts path,
	 * lazily (detached, cleaned up once no longer busy) only when a
	 * plain unmount finds it busy; *lazy says which. Not mounted is
	 * fine. Returns 0 or a negative code with e set.
	 */
	int (*detach)(struct mount_table *t, const char *path, bool *lazy, struct err *e);
	void *ctx; /* for the implementation */
};

/* The real table of this process's mount namespace (a static object). */
struct mount_table *mountinfo_table(void);

/*
 * Parses the mountinfo text buf[0..len) into out (zeroed first). Lines
 * that do not parse are skipped. Octal escapes (\040 for a space) in the
 * mount point are decoded. Returns 0 or CSID_ENOMEM.
 */
int mountinfo_parse(const char *buf, size_t len, struct mount_set *out, struct err *e);

/* Adds a copy of path (kept sorted; a duplicate is ignored). 0 or CSID_ENOMEM. */
int mount_set_add(struct mount_set *s, const char *path, struct err *e);
/* Whether path is in s (binary search). */
bool mount_set_has(const struct mount_set *s, const char *path);
/* Frees the strings and resets s to empty; s may be already empty. */
void mount_set_clear(struct mount_set *s);

/*
 * Whether path is a mount point: t->is_mounted when t has it, else t
 * loaded into a set and path looked up.
 */
int mount_table_is_mounted(struct mount_table *t, const char *path, bool *out, struct err *e);

/* Unmounts path through t->detach when t has it, else t->unmount (*lazy false). */
int mount_table_detach(struct mount_table *t, const char *path, bool *lazy, struct err *e);

#endif
