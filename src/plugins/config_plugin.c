/*
 * Plugin definitions of a config file (config_plugin.h): parsing with the
 * JSON path of any offending value in the message, copies, comparison
 * and the expansion of ${...} variables in args and env.
 */
#include "plugins/config_plugin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/conf.h"

#define CONFIG_ARGS_MAX 256
#define CONFIG_ARG_LEN_MAX 4096

static char *config_plugin_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

void config_plugin_clear(struct config_plugin *p)
{
	if (!p)
		return;
	free(p->id);
	free(p->command);
	free(p->socket);
	for (size_t i = 0; i < p->nargs; i++)
		free(p->args[i]);
	free(p->args);
	for (size_t i = 0; i < p->nenv; i++) {
		free(p->env[i].name);
		free(p->env[i].value);
	}
	free(p->env);
	memset(p, 0, sizeof(*p));
}

int config_plugin_copy(struct config_plugin *dst, const struct config_plugin *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->type = src->type;
	dst->id = config_plugin_strdup(src->id);
	dst->command = config_plugin_strdup(src->command);
	dst->socket = config_plugin_strdup(src->socket);
	if ((src->id && !dst->id) || (src->command && !dst->command) ||
	    (src->socket && !dst->socket))
		goto fail;
	if (src->nargs) {
		dst->args = calloc(src->nargs, sizeof(*dst->args));
		if (!dst->args)
			goto fail;
		for (; dst->nargs < src->nargs; dst->nargs++) {
			dst->args[dst->nargs] = strdup(src->args[dst->nargs]);
			if (!dst->args[dst->nargs])
				goto fail;
		}
	}
	if (src->nenv) {
		dst->env = calloc(src->nenv, sizeof(*dst->env));
		if (!dst->env)
			goto fail;
		for (; dst->nenv < src->nenv; dst->nenv++) {
			struct config_env *d = &dst->env[dst->nenv];

			d->name = strdup(src->env[dst->nenv].name);
			d->value = strdup(src->env[dst->nenv].value);
			if (!d->name || !d->value) {
				dst->nenv++;
				goto fail;
			}
		}
	}
	return 0;
fail:
	config_plugin_clear(dst);
	return CSID_ENOMEM;
}

static bool config_plugin_streq(const char *a, const char *b)
{
	if (!a || !b)
		return a == b;
	return strcmp(a, b) == 0;
}

bool config_plugin_equal(const struct config_plugin *a, const struct config_plugin *b)
{
	if (!config_plugin_streq(a->id, b->id) || a->type != b->type ||
	    !config_plugin_streq(a->command, b->command) ||
	    !config_plugin_streq(a->socket, b->socket) || a->nargs != b->nargs ||
	    a->nenv != b->nenv)
		return false;
	for (size_t i = 0; i < a->nargs; i++)
		if (strcmp(a->args[i], b->args[i]) != 0)
			return false;
	for (size_t i = 0; i < a->nenv; i++)
		if (strcmp(a->env[i].name, b->env[i].name) != 0 ||
		    strcmp(a->env[i].value, b->env[i].value) != 0)
			return false;
	return true;
}

const char *config_plugin_type_name(enum config_plugin_type t)
{
	switch (t) {
	case CONFIG_PLUGIN_CONTROLLER:
		return "controller";
	case CONFIG_PLUGIN_NODE:
		return "node";
	case CONFIG_PLUGIN_MONOLITH:
		return "monolith";
	}
	return "unknown";
}

int config_plugin_check_id(const char *kind, const char *id, struct err *e)
{
	size_t len = id ? strlen(id) : 0;

	if (len == 0)
		return err_set(e, CSID_EINVAL, "%s is empty", kind);
	if (len > CONFIG_ID_MAX)
		return err_set(e, CSID_EINVAL, "%s is longer than %d bytes", kind, CONFIG_ID_MAX);
	if (strchr(id, '/') || strchr(id, '\\'))
		return err_set(e, CSID_EINVAL, "%s must not contain '/' or '\\'", kind);
	if (strstr(id, ".."))
		return err_set(e, CSID_EINVAL, "%s must not contain \"..\"", kind);
	if (strcmp(id, ".") == 0)
		return err_set(e, CSID_EINVAL, "%s must not be \".\"", kind);
	if (conf_has_ctl(id, len))
		return err_set(e, CSID_EINVAL, "%s must not contain control characters", kind);
	/* IDs appear unquoted in key=value logs and in paths: keep them plain. */
	if (strpbrk(id, " \"'=`$"))
		return err_set(e, CSID_EINVAL,
			       "%s must not contain spaces, quotes, '=', '`' or '$'", kind);
	return 0;
}

/* Checks that every ${...} in s names a variable config_plugin_expand() knows. */
static int config_plugin_check_vars(const char *s, const char *path, struct err *e)
{
	for (const char *p = strstr(s, "${"); p; p = strstr(p + 2, "${")) {
		if (strncmp(p, "${CSI_ENDPOINT}", 15) != 0 &&
		    strncmp(p, "${CSI_ENDPOINT_PATH}", 20) != 0 &&
		    strncmp(p, "${NODE_NAME}", 12) != 0)
			return err_set(e, CSID_EINVAL,
				       "%s: unknown variable (only ${CSI_ENDPOINT}, "
				       "${CSI_ENDPOINT_PATH} and ${NODE_NAME} are expanded)",
				       path);
	}
	return 0;
}

static int config_plugin_parse_args(json_t *v, const char *path, struct config_plugin *p,
				    struct err *e)
{
	char sub[96];
	size_t i;
	json_t *a;

	if (!json_is_array(v))
		return err_set(e, CSID_EINVAL, "%s.args: expected an array of strings", path);
	if (json_array_size(v) > CONFIG_ARGS_MAX)
		return err_set(e, CSID_EINVAL, "%s.args: more than %d arguments", path,
			       CONFIG_ARGS_MAX);
	p->args = calloc(json_array_size(v) + 1, sizeof(*p->args));
	if (!p->args)
		return err_set(e, CSID_ENOMEM, "%s.args: out of memory", path);
	json_array_foreach(v, i, a)
	{
		int rc;

		snprintf(sub, sizeof(sub), "%s.args[%zu]", path, i);
		rc = conf_get_string(a, sub, CONFIG_ARG_LEN_MAX, &p->args[i], e);
		if (rc)
			return rc;
		p->nargs++;
		rc = config_plugin_check_vars(p->args[i], sub, e);
		if (rc)
			return rc;
	}
	return 0;
}

static int config_plugin_parse_env(json_t *v, const char *path, struct config_plugin *p,
				   struct err *e)
{
	const char *key;
	json_t *val;

	if (!json_is_object(v))
		return err_set(e, CSID_EINVAL, "%s.env: expected an object of strings", path);
	if (json_object_size(v) > CONFIG_ARGS_MAX)
		return err_set(e, CSID_EINVAL, "%s.env: more than %d variables", path,
			       CONFIG_ARGS_MAX);
	p->env = calloc(json_object_size(v) + 1, sizeof(*p->env));
	if (!p->env)
		return err_set(e, CSID_ENOMEM, "%s.env: out of memory", path);
	json_object_foreach(v, key, val)
	{
		struct config_env *env = &p->env[p->nenv];
		char sub[96];
		size_t klen = strlen(key);
		int rc;

		if (klen == 0 || klen > 256 || strchr(key, '=') || conf_has_ctl(key, klen))
			return err_set(e, CSID_EINVAL,
				       "%s.env: invalid variable name (empty, too long, or holds "
				       "'=' or a control character)",
				       path);
		snprintf(sub, sizeof(sub), "%s.env.%.40s", path, key);
		env->name = strdup(key);
		if (!env->name)
			return err_set(e, CSID_ENOMEM, "%s: out of memory", sub);
		p->nenv++;
		rc = conf_get_string(val, sub, CONFIG_ARG_LEN_MAX, &env->value, e);
		if (rc)
			return rc;
		rc = config_plugin_check_vars(env->value, sub, e);
		if (rc)
			return rc;
	}
	return 0;
}

const char *const config_plugin_keys[] = {"id", "type", "command", "args", "env", "socket", NULL};

static int config_plugin_parse_one(json_t *obj, const char *key, size_t idx, int default_type,
				   struct config_plugin *p, struct err *e)
{
	char path[96], sub[128];
	const char *type;
	json_t *v;
	int rc;

	snprintf(path, sizeof(path), "%.64s[%zu]", key, idx);
	if (!json_is_object(obj))
		return err_set(e, CSID_EINVAL, "%s: expected an object", path);
	rc = conf_check_keys(obj, path, config_plugin_keys, e);
	if (rc)
		return rc;
	snprintf(sub, sizeof(sub), "%s.id", path);
	v = json_object_get(obj, "id");
	if (!v)
		return err_set(e, CSID_EINVAL, "%s: missing", sub);
	rc = conf_get_string(v, sub, CONFIG_ID_MAX * 2, &p->id, e);
	if (!rc)
		rc = config_plugin_check_id(sub, p->id, e);
	if (rc)
		return rc;
	v = json_object_get(obj, "type");
	type = v ? json_string_value(v) : NULL;
	if (!v && default_type >= 0)
		p->type = (enum config_plugin_type)default_type;
	else if (type && strcmp(type, "controller") == 0)
		p->type = CONFIG_PLUGIN_CONTROLLER;
	else if (type && strcmp(type, "node") == 0)
		p->type = CONFIG_PLUGIN_NODE;
	else if (type && strcmp(type, "monolith") == 0)
		p->type = CONFIG_PLUGIN_MONOLITH;
	else
		return err_set(e, CSID_EINVAL,
			       "%s.type: expected \"controller\", \"node\" or \"monolith\"", path);
	v = json_object_get(obj, "socket");
	if (v) {
		snprintf(sub, sizeof(sub), "%s.socket", path);
		rc = conf_get_string(v, sub, CONF_SOCK_MAX, &p->socket, e);
		if (rc)
			return rc;
		if (p->socket[0] != '/' || conf_has_ctl(p->socket, strlen(p->socket)))
			return err_set(e, CSID_EINVAL, "%s: must be an absolute path", sub);
		if (json_object_get(obj, "command") || json_object_get(obj, "args") ||
		    json_object_get(obj, "env"))
			return err_set(e, CSID_EINVAL,
				       "%s: \"socket\" excludes \"command\", \"args\" and \"env\"",
				       path);
		return 0;
	}
	v = json_object_get(obj, "command");
	if (!v)
		return err_set(e, CSID_EINVAL, "%s: needs either \"command\" or \"socket\"", path);
	snprintf(sub, sizeof(sub), "%s.command", path);
	rc = conf_get_string(v, sub, CONF_PATH_MAX, &p->command, e);
	if (rc)
		return rc;
	if (!p->command[0] || conf_has_ctl(p->command, strlen(p->command)))
		return err_set(e, CSID_EINVAL, "%s: empty or holds a control character", sub);
	v = json_object_get(obj, "args");
	if (v) {
		rc = config_plugin_parse_args(v, path, p, e);
		if (rc)
			return rc;
	}
	v = json_object_get(obj, "env");
	if (v)
		return config_plugin_parse_env(v, path, p, e);
	return 0;
}

int config_plugin_parse_list(json_t *v, const char *key, int default_type,
			     struct config_plugin **out, size_t *n, struct err *e)
{
	size_t i;
	json_t *item;

	if (!json_is_array(v))
		return err_set(e, CSID_EINVAL, "%s: expected an array", key);
	if (json_array_size(v) > CONFIG_ARGS_MAX)
		return err_set(e, CSID_EINVAL, "%s: more than %d plugins", key, CONFIG_ARGS_MAX);
	*out = calloc(json_array_size(v) + 1, sizeof(**out));
	if (!*out)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", key);
	json_array_foreach(v, i, item)
	{
		int rc = config_plugin_parse_one(item, key, i, default_type, &(*out)[i], e);

		(*n)++;
		if (rc)
			return rc;
		for (size_t j = 0; j < i; j++)
			if (strcmp((*out)[j].id, (*out)[i].id) == 0)
				return err_set(e, CSID_EINVAL,
					       "%s[%zu].id: duplicate of %s[%zu].id", key, i, key,
					       j);
	}
	return 0;
}

char *config_plugin_expand(const char *tmpl, const char *endpoint, const char *node_name)
{
	size_t cap = strlen(tmpl) + 1, len = 0;
	const char *p = tmpl, *path = endpoint;
	char *out;

	/* The bare socket path, for plugins that take a path rather than a URL. */
	if (strncmp(endpoint, "unix://", 7) == 0)
		path = endpoint + 7;
	else if (strncmp(endpoint, "unix:", 5) == 0)
		path = endpoint + 5;

	for (const char *q = strstr(tmpl, "${"); q; q = strstr(q + 2, "${"))
		cap += strlen(endpoint) + strlen(node_name);
	out = malloc(cap);
	if (!out)
		return NULL;
	while (*p) {
		const char *val = NULL;
		size_t skip = 0;

		if (strncmp(p, "${CSI_ENDPOINT}", 15) == 0) {
			val = endpoint;
			skip = 15;
		} else if (strncmp(p, "${CSI_ENDPOINT_PATH}", 20) == 0) {
			val = path;
			skip = 20;
		} else if (strncmp(p, "${NODE_NAME}", 12) == 0) {
			val = node_name;
			skip = 12;
		}
		if (val) {
			memcpy(out + len, val, strlen(val));
			len += strlen(val);
			p += skip;
		} else {
			out[len++] = *p++;
		}
	}
	out[len] = '\0';
	return out;
}
