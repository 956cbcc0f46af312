/*
 * Usage naming, name validation and path building for the volume mounter.
 * The usage segment is built from two fixed tables (attachment and access
 * names), so it can only contain [a-z-]; the names from outside (plugin,
 * volume, allocation) are checked byte by byte before they are joined.
 */
#include "agent/mount_paths.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "csi.pb-c.h"

static const char *const mount_paths_attachments[MOUNT_ATTACH_COUNT_] = {
    [MOUNT_ATTACH_FILE_SYSTEM] = "file-system",
    [MOUNT_ATTACH_BLOCK_DEVICE] = "block-device",
};

static const struct {
	const char *name;
	int csi;
} mount_paths_access[MOUNT_ACCESS_COUNT_] = {
    [MOUNT_ACCESS_SINGLE_NODE_READER_ONLY] =
	{"single-node-reader-only",
	 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY},
    [MOUNT_ACCESS_SINGLE_NODE_WRITER] =
	{"single-node-writer", CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER},
    [MOUNT_ACCESS_SINGLE_NODE_SINGLE_WRITER] =
	{"single-node-single-writer",
	 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER},
    [MOUNT_ACCESS_SINGLE_NODE_MULTI_WRITER] =
	{"single-node-multi-writer",
	 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER},
    [MOUNT_ACCESS_MULTI_NODE_READER_ONLY] =
	{"multi-node-reader-only",
	 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY},
    [MOUNT_ACCESS_MULTI_NODE_SINGLE_WRITER] =
	{"multi-node-single-writer",
	 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER},
    [MOUNT_ACCESS_MULTI_NODE_MULTI_WRITER] =
	{"multi-node-multi-writer",
	 CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER},
};

const char *mount_attachment_name(enum mount_attachment a)
{
	if ((unsigned)a >= MOUNT_ATTACH_COUNT_)
		return NULL;
	return mount_paths_attachments[a];
}

/* Copies at most 32 printable bytes of s for an error message. */
static const char *mount_paths_excerpt(const char *s, size_t len, char *buf, size_t size)
{
	size_t o = 0;

	if (s == NULL)
		return "(null)";
	for (size_t i = 0; i < len && i < 32 && o + 1 < size; i++)
		buf[o++] = (s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"') ? s[i] : '?';
	buf[o] = '\0';
	return buf;
}

int mount_attachment_parse(const char *s, enum mount_attachment *out, struct err *e)
{
	char ex[40];

	for (int i = 0; s != NULL && i < MOUNT_ATTACH_COUNT_; i++) {
		if (strcmp(s, mount_paths_attachments[i]) == 0) {
			*out = (enum mount_attachment)i;
			return 0;
		}
	}
	return err_set(e, CSID_EINVAL, "attachment mode \"%s\": want file-system or block-device",
		       mount_paths_excerpt(s, s ? strlen(s) : 0, ex, sizeof(ex)));
}

const char *mount_access_name(enum mount_access a)
{
	if ((unsigned)a >= MOUNT_ACCESS_COUNT_)
		return NULL;
	return mount_paths_access[a].name;
}

int mount_access_parse(const char *s, enum mount_access *out, struct err *e)
{
	char ex[40];

	for (int i = 0; s != NULL && i < MOUNT_ACCESS_COUNT_; i++) {
		if (strcmp(s, mount_paths_access[i].name) == 0) {
			*out = (enum mount_access)i;
			return 0;
		}
	}
	return err_set(e, CSID_EINVAL,
		       "access mode \"%s\": want one of single-node-reader-only, "
		       "single-node-writer, single-node-single-writer, single-node-multi-writer, "
		       "multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer",
		       mount_paths_excerpt(s, s ? strlen(s) : 0, ex, sizeof(ex)));
}

int mount_access_csi_mode(enum mount_access a)
{
	if ((unsigned)a >= MOUNT_ACCESS_COUNT_)
		return CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__UNKNOWN;
	return mount_paths_access[a].csi;
}

int mount_name_check_len(const char *what, const char *s, size_t len, struct err *e)
{
	char ex[40];

	if (s == NULL || len == 0)
		return err_set(e, CSID_EINVAL, "%s is empty", what);
	if (len > MOUNT_NAME_MAX)
		return err_set(e, CSID_EINVAL, "%s \"%s...\" is longer than %d bytes", what,
			       mount_paths_excerpt(s, len, ex, sizeof(ex)), MOUNT_NAME_MAX);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '\0')
			return err_set(e, CSID_EINVAL, "%s contains a NUL byte", what);
		if (c < 0x20 || c == 0x7f)
			return err_set(e, CSID_EINVAL, "%s \"%s\" contains a control character",
				       what, mount_paths_excerpt(s, len, ex, sizeof(ex)));
		if (c == '/')
			return err_set(e, CSID_EINVAL, "%s \"%s\" contains '/'", what,
				       mount_paths_excerpt(s, len, ex, sizeof(ex)));
		if (c == '.' && i + 1 < len && s[i + 1] == '.')
			return err_set(e, CSID_EINVAL, "%s \"%s\" contains \"..\"", what,
				       mount_paths_excerpt(s, len, ex, sizeof(ex)));
	}
	if (len == 1 && s[0] == '.')
		return err_set(e, CSID_EINVAL, "%s is \".\"", what);
	return 0;
}

int mount_name_check(const char *what, const char *s, struct err *e)
{
	if (s == NULL)
		return err_set(e, CSID_EINVAL, "%s is missing", what);
	/* Read one byte past the limit at most, so a huge string costs nothing. */
	return mount_name_check_len(what, s, strnlen(s, MOUNT_NAME_MAX + 1), e);
}

int mount_usage_segment(const struct mount_usage *u, char *buf, size_t len, struct err *e)
{
	const char *att = mount_attachment_name(u->attachment);
	const char *acc = mount_access_name(u->access);
	int n;

	if (att == NULL)
		return err_set(e, CSID_EINVAL, "attachment mode %d is not known",
			       (int)u->attachment);
	if (acc == NULL)
		return err_set(e, CSID_EINVAL, "access mode %d is not known", (int)u->access);
	n = snprintf(buf, len, "%s-%s-%s", u->read_only ? "ro" : "rw", att, acc);
	if (n < 0 || (size_t)n >= len)
		return err_set(e, CSID_ETOOBIG, "usage segment does not fit %zu bytes", len);
	return 0;
}

/* FNV-1a over one field, with a separator so ("ab","c") differs from ("a","bc"). */
static uint64_t mount_paths_fnv(uint64_t h, const char *s)
{
	for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p != '\0'; p++) {
		h ^= *p;
		h *= 1099511628211ULL;
	}
	h ^= 0xff;
	h *= 1099511628211ULL;
	return h;
}

void mount_usage_options_hash(const struct mount_usage *u, char out[17])
{
	uint64_t h = 14695981039346656037ULL;

	h = mount_paths_fnv(h, u->fs_type);
	for (size_t i = 0; i < u->n_mount_flags; i++)
		h = mount_paths_fnv(h, u->mount_flags[i]);
	snprintf(out, 17, "%016llx", (unsigned long long)h);
}

static int mount_paths_join(const char *data_dir, const char *kind, const char *first_what,
			    const char *first, const char *volume_id, const struct mount_usage *u,
			    char *buf, size_t len, struct err *e)
{
	char seg[96];
	int n;
	int rc;

	if (data_dir == NULL || data_dir[0] != '/')
		return err_set(e, CSID_EINVAL, "data dir must be an absolute path");
	rc = mount_name_check(first_what, first, e);
	if (rc == 0)
		rc = mount_name_check("volume id", volume_id, e);
	if (rc == 0)
		rc = mount_usage_segment(u, seg, sizeof(seg), e);
	if (rc != 0)
		return rc;
	n = snprintf(buf, len, "%s/mounts/%s/%s/%s/%s", data_dir, kind, first, volume_id, seg);
	if (n < 0 || (size_t)n >= len)
		return err_set(e, CSID_ETOOBIG, "%s path under %s is longer than %zu bytes", kind,
			       data_dir, len - 1);
	return 0;
}

int mount_staging_path(const char *data_dir, const char *plugin_id, const char *volume_id,
		       const struct mount_usage *u, char *buf, size_t len, struct err *e)
{
	return mount_paths_join(data_dir, "staging", "plugin id", plugin_id, volume_id, u, buf, len,
				e);
}

int mount_target_path(const char *data_dir, const char *alloc_id, const char *volume_id,
		      const struct mount_usage *u, char *buf, size_t len, struct err *e)
{
	return mount_paths_join(data_dir, "per-alloc", "alloc id", alloc_id, volume_id, u, buf, len,
				e);
}

/* Whether the existing path is a directory; 0, or a code with e set. */
