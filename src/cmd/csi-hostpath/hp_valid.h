/*
 * Checks of everything the CO sends csi-hostpath: names, IDs, node IDs,
 * paths, string maps and volume capabilities. Each check returns 0 or
 * CSI_INVALID_ARGUMENT with the status message (CSI_STATUS_MSG_MAX bytes)
 * written to msg; what names the field is "what". Messages never quote
 * map values or mount flags (they may be secret).
 */
#ifndef HP_VALID_H
#define HP_VALID_H

#include <stdbool.h>
#include <stddef.h>

#include "csi.pb-c.h"

#define HP_NAME_MAX 128
#define HP_ID_MAX 128
#define HP_NODE_ID_MAX 256
#define HP_MAP_MAX 4096

/*
 * A volume or snapshot name: 1..128 bytes of valid UTF-8, no control
 * character, no '/' or '\\', no "..".
 */
int hp_valid_name(const char *s, const char *what, char *msg);
/* A volume or snapshot ID: 1..128 bytes of [A-Za-z0-9._-], no "..". */
int hp_valid_id(const char *s, const char *what, char *msg);
/* A node ID: 1..256 bytes of valid UTF-8 without control characters. */
int hp_valid_node_id(const char *s, const char *what, char *msg);
/*
 * A CO path: absolute, shorter than 4096 bytes, no control character, no
 * empty, "." or ".." component, no trailing '/', not "/" itself, and not
 * inside data_dir (when data_dir is not NULL).
 */
int hp_valid_path(const char *s, const char *what, const char *data_dir, char *msg);
/* Whether s is valid UTF-8 (overlong forms and surrogates rejected). */
bool hp_valid_utf8(const char *s, size_t len);

/* The layout shared by every protobuf-c map entry type (base, key, value). */
struct hp_kv {
	ProtobufCMessage base;
	char *key;
	char *value;
};

/*
 * A protobuf map field given as its entry array: total size at most
 * HP_MAP_MAX bytes, keys non-empty.
 */
int hp_valid_map(void *const *entries, size_t n, const char *what, char *msg);
/* Value of key in a map field, or NULL. */
const char *hp_map_get(void *const *entries, size_t n, const char *key);

/*
 * One capability: access type set, access mode 1..7, fs_type of at most
 * 32 bytes of [a-z0-9._-]. *block tells the access type.
 */
int hp_valid_cap(const Csi__V1__VolumeCapability *c, const char *what, bool *block, char *msg);
/* A non-empty list of capabilities all of one access type (*block). */
int hp_valid_caps(Csi__V1__VolumeCapability *const *caps, size_t n, bool *block, char *msg);
/* Whether a mode allows several nodes (MULTI_NODE_*). */
bool hp_mode_multi_node(int mode);
/* Whether a mode is read-only (SINGLE_NODE_READER_ONLY, MULTI_NODE_READER_ONLY). */
bool hp_mode_read_only(int mode);
/*
 * A canonical key of a capability for "same arguments" checks: access
 * type, mode, fs type and a hash of the mount flags (never the flags).
 */
void hp_cap_key(const Csi__V1__VolumeCapability *c, char *buf, size_t len);
/* MS_* flags of the mount flags the plugin honours on a bind mount. */
unsigned long hp_cap_mount_flags(const Csi__V1__VolumeCapability *c);
/* 64-bit FNV-1a hash, chained through h (start with HP_FNV_INIT). */
#define HP_FNV_INIT 0xcbf29ce484222325ull
unsigned long long hp_fnv(unsigned long long h, const void *data, size_t len);

#endif
