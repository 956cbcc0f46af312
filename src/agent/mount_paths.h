/*
 * Names and paths of the volume mounter. A usage (read-only flag,
 * attachment mode, access mode, mount options) names its directory with a
 * segment such as "rw-file-system-single-node-writer". Staging directories
 * live at <data_dir>/mounts/staging/<plugin>/<volume>/<usage> and publish
 * targets at <data_dir>/mounts/per-alloc/<alloc>/<volume>/<usage>.
 *
 * Every name that becomes a path component (plugin, volume, allocation)
 * goes through mount_name_check first, so nothing escapes its directory.
 * Pure functions, no I/O; thread-safe.
 */
#ifndef CSID_AGENT_MOUNT_PATHS_H
#define CSID_AGENT_MOUNT_PATHS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/err.h"

/* Longest name accepted as a path component (the CSI string limit). */
#define MOUNT_NAME_MAX 128

enum mount_attachment { MOUNT_ATTACH_FILE_SYSTEM, MOUNT_ATTACH_BLOCK_DEVICE, MOUNT_ATTACH_COUNT_ };

/* The seven access modes of DESIGN.md, in the order listed there. */
enum mount_access {
	MOUNT_ACCESS_SINGLE_NODE_READER_ONLY,
	MOUNT_ACCESS_SINGLE_NODE_WRITER,
	MOUNT_ACCESS_SINGLE_NODE_SINGLE_WRITER,
	MOUNT_ACCESS_SINGLE_NODE_MULTI_WRITER,
	MOUNT_ACCESS_MULTI_NODE_READER_ONLY,
	MOUNT_ACCESS_MULTI_NODE_SINGLE_WRITER,
	MOUNT_ACCESS_MULTI_NODE_MULTI_WRITER,
	MOUNT_ACCESS_COUNT_
};

/*
 * How an allocation uses a volume. mount_flags may hold sensitive values
 * (CSI spec): they are passed to the plugin, hashed for comparison, and
 * never stored, listed or logged. Pointers are borrowed.
 */
struct mount_usage {
	bool read_only;
	enum mount_attachment attachment;
	enum mount_access access;
	const char *fs_type; /* NULL or "" for the plugin default */
	const char *const *mount_flags; /* n_mount_flags strings */
	size_t n_mount_flags;
};

/* "file-system" / "block-device"; NULL outside the enum. */
const char *mount_attachment_name(enum mount_attachment a);
/* Parses an attachment name; returns 0 and *out, or CSID_EINVAL with e set. */
int mount_attachment_parse(const char *s, enum mount_attachment *out, struct err *e);
/* "single-node-writer" etc.; NULL outside the enum. */
const char *mount_access_name(enum mount_access a);
/* Parses an access-mode name; returns 0 and *out, or CSID_EINVAL with e set. */
int mount_access_parse(const char *s, enum mount_access *out, struct err *e);
/* The CSI wire value (Csi__V1__VolumeCapability__AccessMode__Mode) of a. */
int mount_access_csi_mode(enum mount_access a);

/*
 * Checks that the len bytes at s are usable as one path component: not
 * empty, at most MOUNT_NAME_MAX bytes, no '/', no "..", not ".", no NUL
 * or other control character. what names the field in the message
 * ("volume id"). Returns 0 or CSID_EINVAL with e set; the message never
 * echoes more than a short, sanitised prefix of the input.
 */
int mount_name_check_len(const char *what, const char *s, size_t len, struct err *e);
/* mount_name_check_len for a C string (NULL is rejected). */
int mount_name_check(const char *what, const char *s, struct err *e);

/*
 * Writes the usage segment ("ro-block-device-multi-node-reader-only") to
 * buf of size len. Returns 0, or CSID_EINVAL for an attachment or access
 * mode outside the enums, or CSID_ETOOBIG when buf is too small.
 */
int mount_usage_segment(const struct mount_usage *u, char *buf, size_t len, struct err *e);

/*
 * 64-bit fingerprint of the mount options (fs_type and flags, in order),
 * used to compare two usages without keeping the flags. Written as 16
 * hex digits plus NUL to out (17 bytes).
 */
void mount_usage_options_hash(const struct mount_usage *u, char out[17]);

/*
 * <data_dir>/mounts/staging/<plugin>/<volume>/<usage> into buf (PATH_MAX
 * bytes is always enough). Every name is checked. Returns 0, CSID_EINVAL
 * for a bad name or usage, or CSID_ETOOBIG when the path would not fit.
 */
int mount_staging_path(const char *data_dir, const char *plugin_id, const char *volume_id,
		       const struct mount_usage *u, char *buf, size_t len, struct err *e);
/* <data_dir>/mounts/per-alloc/<alloc>/<volume>/<usage>; as mount_staging_path. */
int mount_target_path(const char *data_dir, const char *alloc_id, const char *volume_id,
		      const struct mount_usage *u, char *buf, size_t len, struct err *e);

#endif
