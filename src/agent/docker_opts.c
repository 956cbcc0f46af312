/*
 * Docker volume options -> a csid volume spec (docker_opts.h). Each
 * option is checked on its own, in a table; the spec is then checked as
 * a whole by the server, whose message the engine shows as is.
 */
#include "agent/docker_opts.h"

#include <ctype.h>
#include <stdint.h>
#include <string.h>

#include "model/model.h"

#define DOCKER_OPTS_NAME_MAX 128
#define DOCKER_OPTS_VALUE_MAX 1024
#define DOCKER_OPTS_KNOWN                                                                       \
	"plugin, size, access-mode, fs-type, mount-flags, param.KEY, from-snapshot, clone-of, " \
	"external-id"

int docker_opts_name_check(const char *name, struct err *e)
{
	size_t n = strlen(name);
	bool ok = n >= 1 && n <= DOCKER_OPTS_NAME_MAX && !strstr(name, "..");

	for (size_t i = 0; ok && i < n; i++)
		ok = isalnum((unsigned char)name[i]) || name[i] == '.' || name[i] == '_' ||
		     name[i] == '-';
	if (ok)
		return 0;
	for (size_t i = 0; i < n && n <= 40; i++)
		if (!isprint((unsigned char)name[i]) || name[i] == '"')
			n = 41;
	if (n > 40)
		return err_set(e, CSID_EINVAL,
			       "volume name (%zu bytes): must be 1 to %d bytes of letters, digits, "
			       "'.', '_' and '-', without \"..\"",
			       strlen(name), DOCKER_OPTS_NAME_MAX);
	return err_set(e, CSID_EINVAL,
		       "volume name \"%s\": must be 1 to %d bytes of letters, digits, '.', '_' "
		       "and '-', without \"..\"",
		       name, DOCKER_OPTS_NAME_MAX);
}

/* Whether an option name looks like it carries a secret. */
static bool docker_opts_secret_like(const char *key)
{
	static const char *const words[] = {"secret", "password",   "passwd",
					    "token",  "credential", NULL};
	char low[DOCKER_OPTS_VALUE_MAX];
	size_t i;

	for (i = 0; key[i] && i < sizeof(low) - 1; i++)
		low[i] = (char)tolower((unsigned char)key[i]);
	low[i] = '\0';
	for (i = 0; words[i]; i++)
		if (strstr(low, words[i]))
			return true;
	return false;
}

/* The default plugin: the only one this node runs. */
static int docker_opts_default_plugin(const char *const *plugins, size_t n, const char **out,
				      struct err *e)
{
	char list[400] = "";
	size_t len = 0;

	if (n == 1) {
		*out = plugins[0];
		return 0;
	}
	for (size_t i = 0; i < n && len < sizeof(list); i++) {
		int w = snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", plugins[i]);

		len += w > 0 ? (size_t)w : 0;
	}
	if (n == 0)
		return err_set(e, CSID_EINVAL,
			       "option plugin: not given, and this node runs no node plugin");
	return err_set(e, CSID_EINVAL,
		       "option plugin: not given, and this node runs %zu node plugins (%.300s): "
		       "name one with -o plugin=ID",
		       n, list);
}

/* "a,b,c" -> ["a", "b", "c"] (empty items skipped). */
static json_t *docker_opts_list(const char *s)
{
	json_t *a = json_array();
	const char *p = s;

	while (a && *p) {
		const char *c = strchr(p, ',');
		size_t n = c ? (size_t)(c - p) : strlen(p);

		if (n && json_array_append_new(a, json_stringn(p, n)) != 0) {
			json_decref(a);
			return NULL;
		}
		p += n + (c ? 1 : 0);
	}
	return a;
}

/* Applies one option key=val to spec (caps: its one capability). */
static int docker_opts_one(json_t *spec, json_t *cap, const char *key, const char *val,
			   const char **plugin, bool *register_, struct err *e)
{
	static const struct {
		const char *opt, *field;
	} plain[] = {
	    {"from-snapshot", "snapshot_source"},
	    {"clone-of", "clone_source"},
	    {"external-id", "external_id"},
	};
	json_t *mo = json_object_get(spec, "mount_options");

	if (docker_opts_secret_like(key))
		return err_set(e, CSID_EINVAL,
			       "option %.64s: secrets are never taken as volume options (the "
			       "engine shows options to anyone who inspects the volume); put the "
			       "secret in a volume spec file and create the volume with `csictl "
			       "volume create FILE` (the server holds it and gives it only to the "
			       "node that mounts), then use the volume by name",
			       key);
	if (strlen(val) > DOCKER_OPTS_VALUE_MAX)
		return err_set(e, CSID_EINVAL, "option %.64s: value longer than %d bytes", key,
			       DOCKER_OPTS_VALUE_MAX);
	if (strcmp(key, "plugin") == 0) {
		*plugin = val;
		return 0;
	}
	if (strcmp(key, "size") == 0) {
		int64_t bytes;
		int rc = model_parse_size(val, &bytes, e);

		if (rc)
			return err_wrap(e, "option size");
		if (bytes <= 0)
			return err_set(e, CSID_EINVAL, "option size: must be more than 0 bytes");
		return json_object_set_new(spec, "capacity_min", json_integer(bytes)) == 0
			   ? 0
			   : err_set(e, CSID_ENOMEM, "out of memory");
	}
	if (strcmp(key, "access-mode") == 0) {
		enum model_access a;

		if (model_access_parse(val, &a, e))
			return err_wrap(e, "option access-mode");
		return json_object_set_new(cap, "access_mode", json_string(model_access_name(a)))
			   ? err_set(e, CSID_ENOMEM, "out of memory")
			   : 0;
	}
	if (strcmp(key, "fs-type") == 0)
		return json_object_set_new(mo, "fs_type", json_string(val))
			   ? err_set(e, CSID_ENOMEM, "out of memory")
			   : 0;
	if (strcmp(key, "mount-flags") == 0)
		return json_object_set_new(mo, "mount_flags", docker_opts_list(val))
			   ? err_set(e, CSID_ENOMEM, "out of memory")
			   : 0;
	if (strncmp(key, "param.", 6) == 0 && key[6]) {
		if (json_object_set_new(json_object_get(spec, "parameters"), key + 6,
					json_string(val)))
			return err_set(e, CSID_ENOMEM, "out of memory");
		return 0;
	}
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		if (strcmp(key, plain[i].opt) != 0)
			continue;
		if (!val[0])
			return err_set(e, CSID_EINVAL, "option %s: empty", key);
		if (strcmp(key, "external-id") == 0)
			*register_ = true;
		return json_object_set_new(spec, plain[i].field, json_string(val))
			   ? err_set(e, CSID_ENOMEM, "out of memory")
			   : 0;
	}
	return err_set(e, CSID_EINVAL, "unknown option \"%.64s\" (known: " DOCKER_OPTS_KNOWN ")",
		       key);
}

int docker_opts_spec(const char *name, json_t *opts, const char *const *plugins, size_t n,
		     json_t **spec, bool *register_, struct err *e)
{
	const char *key, *plugin = NULL;
	json_t *s, *cap, *val;
	int rc;

	*spec = NULL;
	*register_ = false;
	if ((rc = docker_opts_name_check(name, e)))
		return rc;
	if (opts && !json_is_object(opts))
		return err_set(e, CSID_EINVAL, "Opts: expected an object of strings");
	s = json_pack("{s:s, s:s, s:[{s:s, s:s}], s:{}, s:{}}", "id", name, "name", name,
		      "capabilities", "access_mode", "single-node-writer", "attachment_mode",
		      "file-system", "mount_options", "parameters");
	if (!s)
		return err_set(e, CSID_ENOMEM, "out of memory");
	cap = json_array_get(json_object_get(s, "capabilities"), 0);
	json_object_foreach(opts, key, val)
	{
		if (!json_is_string(val) ||
		    strlen(json_string_value(val)) != json_string_length(val)) {
			rc = err_set(e, CSID_EINVAL, "option %.64s: expected a string", key);
			goto fail;
		}
		if ((rc = docker_opts_one(s, cap, key, json_string_value(val), &plugin, register_,
					  e)))
			goto fail;
	}
	if (*register_ &&
	    (json_object_get(s, "snapshot_source") || json_object_get(s, "clone_source") ||
	     json_object_get(s, "capacity_min"))) {
		rc = err_set(e, CSID_EINVAL,
			     "option external-id registers an existing volume: not with size, "
			     "from-snapshot or clone-of");
		goto fail;
	}
	if (!plugin && (rc = docker_opts_default_plugin(plugins, n, &plugin, e)))
		goto fail;
	if (*register_ &&
	    json_object_set_new(s, "name", json_string(DOCKER_OPTS_REGISTERED_NAME))) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	if (json_object_set_new(s, "plugin_id", json_string(plugin))) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto fail;
	}
	*spec = s;
	return 0;
fail:
	json_decref(s);
	return rc;
}
