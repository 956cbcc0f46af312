/*
 * Validation of CO input for csi-hostpath. Hostile input (path traversal,
 * very long or non-UTF-8 strings, control bytes) is refused here with
 * INVALID_ARGUMENT, before any lookup or any path is built from it.
 * protobuf-c does not check UTF-8 itself, so names are checked here.
 */
#include "hp_valid.h"

#include <stdio.h>
#include <string.h>
#include <sys/mount.h>

#include "csi/csi_client.h"
#include "hostpath.h"

bool hp_valid_utf8(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;

	while (i < len) {
		unsigned c = u[i];
		size_t n;
		unsigned cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			n = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			n = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (len - i <= n)
			return false;
		for (size_t k = 1; k <= n; k++) {
			if ((u[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (u[i + k] & 0x3f);
		}
		if ((n == 2 && cp < 0x800) || (n == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += n + 1;
	}
	return true;
}

static bool hp_valid_has_ctl(const char *s)
{
	for (const unsigned char *u = (const unsigned char *)s; *u; u++)
		if (*u < 0x20 || *u == 0x7f)
			return true;
	return false;
}

static int hp_valid_text(const char *s, const char *what, size_t max, char *msg)
{
	size_t len;

	if (!s || !*s)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is required", what);
	len = strlen(s);
	if (len > max)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is longer than %zu bytes", what, max);
	if (!hp_valid_utf8(s, len))
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is not valid UTF-8", what);
	if (hp_valid_has_ctl(s))
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s contains a control character", what);
	return 0;
}

int hp_valid_name(const char *s, const char *what, char *msg)
{
	int rc = hp_valid_text(s, what, HP_NAME_MAX, msg);

	if (rc)
		return rc;
	if (strchr(s, '/') || strchr(s, '\\') || strstr(s, ".."))
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s must not contain '/', '\\' or '..'",
			       what);
	return 0;
}

int hp_valid_id(const char *s, const char *what, char *msg)
{
	if (!s || !*s)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is required", what);
	if (strlen(s) > HP_ID_MAX)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is longer than %d bytes", what,
			       HP_ID_MAX);
	for (const char *c = s; *c; c++) {
		if ((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		    (*c >= '0' && *c <= '9') || *c == '-' || *c == '_' || *c == '.')
			continue;
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "%s may only contain letters, digits, '.', '_' and '-'", what);
	}
	if (s[0] == '.' || strstr(s, ".."))
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s must not start with '.' or hold '..'",
			       what);
	return 0;
}

int hp_valid_node_id(const char *s, const char *what, char *msg)
{
	return hp_valid_text(s, what, HP_NODE_ID_MAX, msg);
}

int hp_valid_path(const char *s, const char *what, const char *data_dir, char *msg)
{
	size_t len, dlen;
	const char *c;

	if (!s || !*s)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is required", what);
	len = strlen(s);
	if (len >= HP_PATH_MAX - 16)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is too long", what);
	if (s[0] != '/' || len == 1)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s must be an absolute path below /",
			       what);
	if (hp_valid_has_ctl(s))
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s contains a control character", what);
	for (c = s; *c; c++) {
		const char *comp = c + 1;
		size_t clen;

		if (*c != '/')
			continue;
		clen = strcspn(comp, "/");
		if (clen == 0 || (clen == 1 && comp[0] == '.') ||
		    (clen == 2 && comp[0] == '.' && comp[1] == '.'))
			return hp_fail(msg, CSI_INVALID_ARGUMENT,
				       "%s must be a clean path (no empty, '.' or '..' part)",
				       what);
	}
	if (data_dir) {
		dlen = strlen(data_dir);
		if (strncmp(s, data_dir, dlen) == 0 && (s[dlen] == '/' || s[dlen] == '\0'))
			return hp_fail(msg, CSI_INVALID_ARGUMENT,
				       "%s must not be inside the plugin's data dir", what);
	}
	return 0;
}

int hp_valid_map(void *const *entries, size_t n, const char *what, char *msg)
{
	size_t total = 0;

	for (size_t i = 0; i < n; i++) {
		const struct hp_kv *kv = entries[i];

		if (!kv || !kv->key || !*kv->key)
			return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s has an empty key", what);
		total += strlen(kv->key) + (kv->value ? strlen(kv->value) : 0);
		if (total > HP_MAP_MAX)
			return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is larger than %d bytes",
				       what, HP_MAP_MAX);
	}
	return 0;
}

const char *hp_map_get(void *const *entries, size_t n, const char *key)
{
	for (size_t i = 0; i < n; i++) {
		const struct hp_kv *kv = entries[i];

		if (kv && kv->key && strcmp(kv->key, key) == 0)
			return kv->value ? kv->value : "";
	}
	return NULL;
}

int hp_valid_cap(const Csi__V1__VolumeCapability *c, const char *what, bool *block, char *msg)
{
	const char *fs;
	int mode;

	if (!c)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s is required", what);
	if (!c->access_mode)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s: access_mode is required", what);
	mode = (int)c->access_mode->mode;
	if (mode < 1 || mode > 7)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s: access mode %d is not supported",
			       what, mode);
	if (c->access_type_case == CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_BLOCK && c->block) {
		*block = true;
		return 0;
	}
	if (c->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT || !c->mount)
		return hp_fail(msg, CSI_INVALID_ARGUMENT,
			       "%s: access_type (block or mount) is required", what);
	*block = false;
	fs = c->mount->fs_type ? c->mount->fs_type : "";
	if (strlen(fs) > 32 || strspn(fs, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen(fs))
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s: fs_type is not a valid name", what);
	for (size_t i = 0; i < c->mount->n_mount_flags; i++)
		if (!c->mount->mount_flags[i] || strlen(c->mount->mount_flags[i]) > 256)
			return hp_fail(msg, CSI_INVALID_ARGUMENT, "%s: a mount flag is too long",
				       what);
	return 0;
}

int hp_valid_caps(Csi__V1__VolumeCapability *const *caps, size_t n, bool *block, char *msg)
{
	bool first = false, b = false;
	int rc;

	if (n == 0)
		return hp_fail(msg, CSI_INVALID_ARGUMENT, "volume_capabilities is required");
	for (size_t i = 0; i < n; i++) {
		rc = hp_valid_cap(caps[i], "volume capability", &b, msg);
		if (rc)
			return rc;
		if (i == 0)
			first = b;
		else if (b != first)
			return hp_fail(msg, CSI_INVALID_ARGUMENT,
				       "volume_capabilities mix block and mount access types");
	}
	*block = first;
	return 0;
}

bool hp_mode_multi_node(int mode)
{
	return mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER;
}

bool hp_mode_read_only(int mode)
{
	return mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY ||
	       mode == CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY;
}

unsigned long long hp_fnv(unsigned long long h, const void *data, size_t len)
{
	const unsigned char *u = data;

	for (size_t i = 0; i < len; i++) {
		h ^= u[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

void hp_cap_key(const Csi__V1__VolumeCapability *c, char *buf, size_t len)
{
	unsigned long long h = HP_FNV_INIT;
	int mode = c && c->access_mode ? (int)c->access_mode->mode : 0;

	if (!c || c->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT ||
	    !c->mount) {
		snprintf(buf, len, "block:%d", mode);
		return;
	}
	for (size_t i = 0; i < c->mount->n_mount_flags; i++)
		h = hp_fnv(h, c->mount->mount_flags[i], strlen(c->mount->mount_flags[i]) + 1);
	snprintf(buf, len, "mount:%d:%s:%016llx", mode, c->mount->fs_type ? c->mount->fs_type : "",
		 h);
}

unsigned long hp_cap_mount_flags(const Csi__V1__VolumeCapability *c)
{
	static const struct {
		const char *name;
		unsigned long flag;
	} known[] = {
	    {"ro", MS_RDONLY},         {"nosuid", MS_NOSUID},   {"nodev", MS_NODEV},
	    {"noexec", MS_NOEXEC},     {"noatime", MS_NOATIME}, {"nodiratime", MS_NODIRATIME},
	    {"relatime", MS_RELATIME},
	};
	unsigned long f = 0;

	if (!c || c->access_type_case != CSI__V1__VOLUME_CAPABILITY__ACCESS_TYPE_MOUNT || !c->mount)
		return 0;
	for (size_t i = 0; i < c->mount->n_mount_flags; i++)
		for (size_t k = 0; k < sizeof(known) / sizeof(known[0]); k++)
			if (c->mount->mount_flags[i] &&
			    strcmp(c->mount->mount_flags[i], known[k].name) == 0)
				f |= known[k].flag;
	return f;
}
