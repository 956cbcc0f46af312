/*
 * Helpers shared by the JSON config parsers (the agent's, the server's,
 * the plugin definitions): every key of an object checked against a
 * fixed list, strings copied with a cap, durations such as "1m30s".
 * Messages name the JSON path of the offending value.
 */
#ifndef CSID_UTIL_CONF_H
#define CSID_UTIL_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "util/err.h"

/* sun_path holds 108 bytes including the terminating NUL. */
#define CONF_SOCK_MAX 107
/* The longest file path a config names. */
#define CONF_PATH_MAX 4096

/* Whether s (len bytes) holds a control character. */
bool conf_has_ctl(const char *s, size_t len);
/*
 * Whether s is "unix:" followed by an absolute socket path of at most
 * CONF_SOCK_MAX bytes without control characters (and not "unix://"):
 * the address of an API on this host (a server's or an agent's socket).
 */
bool conf_is_unix_addr(const char *s);
/* Parses "1h2m3s", "100ms", "1.5s" into milliseconds; -1 when invalid. */
int64_t conf_parse_duration(const char *s);
/* A duration as Go prints it ("500ms", "2s", "1m30s", "5m0s", "1h0m0s") into buf. */
void conf_format_duration(int64_t ms, char *buf, size_t cap);
/*
 * Checks that every key of obj is in allowed (NULL-terminated); path names
 * obj in the message. Returns 0 or CSID_EINVAL with e set.
 */
int conf_check_keys(json_t *obj, const char *path, const char *const *allowed, struct err *e);
/*
 * Copies the JSON string v (no NUL byte, at most max bytes) into *out (the
 * caller's); path names it in errors. Returns 0, CSID_EINVAL or
 * CSID_ENOMEM with e set.
 */
int conf_get_string(json_t *v, const char *path, size_t max, char **out, struct err *e);
/*
 * Replaces the string *dst (freed) with a copy of src, for command-line
 * overrides of a loaded config. Returns 0 or CSID_ENOMEM with e set (*dst
 * then unchanged).
 */
int conf_set_string(char **dst, const char *src, struct err *e);
/*
 * Checks that the data directory *dir (a config's `data_dir`, or -data-dir)
 * is set, makes it absolute against the working directory, and refuses it
 * when it leaves fewer than reserve bytes of CONF_PATH_MAX for the paths
 * built under it. Returns 0, CSID_EINVAL or CSID_ENOMEM with e set.
 */
int conf_data_dir(char **dir, size_t reserve, struct err *e);

/*
 * The keys a config parser accepts, for the reference page
 * docs/configuration.md and its test (test/unit/test_config_docs.c): each
 * object's key list, the very array the parser checks documents against,
 * under the JSON path of that object ("" for the top, "timings",
 * "plugins[]"). A key added to one of those arrays must get its row in the
 * page; a new nested object gets its own entry here.
 */
struct conf_keyset {
	const char *path;
	const char *const *keys; /* NULL-terminated */
};

#endif
