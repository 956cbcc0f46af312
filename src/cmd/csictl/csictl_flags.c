/*
 * Flag parsing and the small value parsers (sizes, durations, integers)
 * shared by every csictl command group. The parser is table-driven: each
 * flag names its kind and where its value goes, so a command group only
 * declares its table. Everything that comes from the command line is
 * checked here, so the commands never see a malformed value.
 */
#include "csictl_flags.h"

#include "model/model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const struct csictl_flag *csictl_flags_find(const struct csictl_flag *flags, size_t n,
						   const char *name, size_t len)
{
	for (size_t i = 0; i < n; i++)
		if (strlen(flags[i].name) == len && memcmp(flags[i].name, name, len) == 0)
			return &flags[i];
	return NULL;
}

static int csictl_flags_kv_add(struct csictl_kv *kv, const char *flag, const char *s, struct err *e)
{
	const char *eq = strchr(s, '=');
	struct csictl_kv_pair *p;

	if (!eq || eq == s)
		return err_set(e, CSID_EINVAL, "flag -%s: expected KEY=VALUE, got \"%.64s\"", flag,
			       s);
	if (kv->n >= CSICTL_KV_MAX)
		return err_set(e, CSID_EINVAL, "flag -%s: more than %d values", flag,
			       CSICTL_KV_MAX);
	for (size_t i = 0; i < kv->n; i++)
		if (strlen(kv->pairs[i].key) == (size_t)(eq - s) &&
		    memcmp(kv->pairs[i].key, s, (size_t)(eq - s)) == 0)
			return err_set(e, CSID_EINVAL, "flag -%s: key \"%.*s\" given twice", flag,
				       (int)(eq - s) > 64 ? 64 : (int)(eq - s), s);
	p = realloc(kv->pairs, (kv->n + 1) * sizeof(*p));
	if (!p)
		return err_set(e, CSID_ENOMEM, "out of memory");
	kv->pairs = p;
	p = &kv->pairs[kv->n];
	p->key = strndup(s, (size_t)(eq - s));
	p->value = strdup(eq + 1);
	if (!p->key || !p->value) {
		free(p->key);
		free(p->value);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	kv->n++;
	return 0;
}

static int csictl_flags_bool(const char *flag, const char *v, bool *dst, struct err *e)
{
	if (!v || strcmp(v, "true") == 0 || strcmp(v, "1") == 0) {
		*dst = true;
		return 0;
	}
	if (strcmp(v, "false") == 0 || strcmp(v, "0") == 0) {
		*dst = false;
		return 0;
	}
	return err_set(e, CSID_EINVAL, "flag -%s: expected true or false, got \"%.64s\"", flag, v);
}

static int csictl_flags_store(const struct csictl_flag *f, const char *v, struct err *e)
{
	struct csictl_list *l;

	switch (f->kind) {
	case CSICTL_FLAG_STRING:
		*(const char **)f->dst = v;
		return 0;
	case CSICTL_FLAG_KV:
		return csictl_flags_kv_add(f->dst, f->name, v, e);
	case CSICTL_FLAG_LIST:
		l = f->dst;
		if (l->n >= CSICTL_LIST_MAX)
			return err_set(e, CSID_EINVAL, "flag -%s: more than %d values", f->name,
				       CSICTL_LIST_MAX);
		l->items[l->n++] = v;
		return 0;
	case CSICTL_FLAG_BOOL:
		break;
	}
	return err_set(e, CSID_EINTERNAL, "flag -%s: bad kind", f->name);
}

int csictl_flags_parse(const struct csictl_flag *flags, size_t n, int argc, char **argv,
		       struct csictl_args *pos, struct err *e)
{
	bool only_args = false;

	pos->n = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i], *name, *eq, *v;
		const struct csictl_flag *f;
		size_t len;
		int rc;

		if (only_args || a[0] != '-' || a[1] == '\0') {
			if (pos->n >= CSICTL_ARGS_MAX)
				return err_set(e, CSID_EINVAL, "too many arguments");
			pos->v[pos->n++] = a;
			continue;
		}
		if (strcmp(a, "--") == 0) {
			only_args = true;
			continue;
		}
		name = a + (a[1] == '-' ? 2 : 1);
		eq = strchr(name, '=');
		len = eq ? (size_t)(eq - name) : strlen(name);
		f = csictl_flags_find(flags, n, name, len);
		if (!f)
			return err_set(e, CSID_EINVAL, "unknown flag -%.*s",
				       len > 64 ? 64 : (int)len, name);
		if (f->kind == CSICTL_FLAG_BOOL) {
			rc = csictl_flags_bool(f->name, eq ? eq + 1 : NULL, f->dst, e);
			if (rc)
				return rc;
			continue;
		}
		if (eq) {
			v = eq + 1;
		} else {
			if (i + 1 >= argc)
				return err_set(e, CSID_EINVAL, "flag -%s needs a value", f->name);
			v = argv[++i];
		}
		rc = csictl_flags_store(f, v, e);
		if (rc)
			return rc;
	}
	return 0;
}

void csictl_flags_help(const struct csictl_flag *flags, size_t n, FILE *f)
{
	for (size_t i = 0; i < n; i++) {
		char left[64];

		snprintf(left, sizeof(left), "-%s%s%s", flags[i].name, flags[i].arg ? " " : "",
			 flags[i].arg ? flags[i].arg : "");
		fprintf(f, "  %-28s %s\n", left, flags[i].help);
	}
}

/* Largest file csictl_kv_load_file reads. */
#define CSICTL_KV_FILE_MAX (64 * 1024)

int csictl_kv_load_file(struct csictl_kv *kv, const char *path, struct err *e)
{
	char *buf = NULL, *pair = NULL;
	FILE *f = fopen(path, "r");
	json_t *j = NULL, *v;
	const char *key;
	size_t n;
	int rc = 0;

	if (!f)
		return err_errno(e, errno, "%.200s", path);
	buf = malloc(CSICTL_KV_FILE_MAX + 1);
	if (!buf) {
		rc = err_set(e, CSID_ENOMEM, "out of memory");
		goto out;
	}
	n = fread(buf, 1, CSICTL_KV_FILE_MAX + 1, f);
	if (n > CSICTL_KV_FILE_MAX) {
		rc = err_set(e, CSID_ETOOBIG, "%.200s is larger than %d bytes", path,
			     CSICTL_KV_FILE_MAX);
		goto out;
	}
	j = json_loadb(buf, n, 0, NULL);
	if (!json_is_object(j)) {
		rc = err_set(e, CSID_EINVAL, "%.200s: expected a JSON object of strings", path);
		goto out;
	}
	json_object_foreach(j, key, v)
	{
		size_t len;

		if (!json_is_string(v) || strchr(key, '=')) {
			rc = err_set(e, CSID_EINVAL,
				     "%.200s: \"%.64s\" must be a string and its key has no '='",
				     path, key);
			goto out;
		}
		len = strlen(key) + 1 + json_string_length(v) + 1;
		pair = malloc(len);
		if (!pair) {
			rc = err_set(e, CSID_ENOMEM, "out of memory");
			goto out;
		}
		snprintf(pair, len, "%s=%s", key, json_string_value(v));
		rc = csictl_flags_kv_add(kv, "secrets-file", pair, e);
		explicit_bzero(pair, len);
		free(pair);
		pair = NULL;
		if (rc)
			goto out;
	}
out:
	if (buf) {
		explicit_bzero(buf, CSICTL_KV_FILE_MAX + 1);
		free(buf);
	}
	json_decref(j);
	fclose(f);
	return rc;
}

void csictl_kv_free(struct csictl_kv *kv)
{
	if (!kv)
		return;
	for (size_t i = 0; i < kv->n; i++) {
		/* Values may be secrets: wipe them before the memory is reused. */
		explicit_bzero(kv->pairs[i].value, strlen(kv->pairs[i].value));
		free(kv->pairs[i].key);
		free(kv->pairs[i].value);
	}
	free(kv->pairs);
	kv->pairs = NULL;
	kv->n = 0;
}

/* Reads leading decimal digits into *out; returns the first other character. */
static const char *csictl_flags_digits(const char *s, uint64_t *out, bool *overflow)
{
	uint64_t v = 0;

	*overflow = false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - 9) / 10)
			*overflow = true;
		else
			v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return s;
}

/* A unit suffix and what one of it is worth. */
struct csictl_flags_unit {
	const char *suffix;
	uint64_t mult;
};

/*
 * Reads digits and one of the suffixes in units. Returns 1 and
 * *value, *mult when it matched (*overflow when the digits did not fit),
 * 0 for anything else.
 */
static int csictl_flags_number(const char *s, const struct csictl_flags_unit *units, size_t n,
			       uint64_t *value, uint64_t *mult, bool *overflow)
{
	const char *rest;

	if (!s || *s < '0' || *s > '9')
		return 0;
	rest = csictl_flags_digits(s, value, overflow);
	for (size_t i = 0; i < n; i++)
		if (strcmp(rest, units[i].suffix) == 0) {
			*mult = units[i].mult;
			return 1;
		}
	return 0;
}

int csictl_size_parse(const char *s, int64_t *out, struct err *e)
{
	/* One parser of sizes for every input: the model's. */
	struct err me;
	int rc;

	err_clear(&me);
	rc = model_parse_size(s, out, &me);
	if (rc)
		return err_set(e, rc, "invalid size \"%.64s\": %s", s ? s : "", me.msg);
	return 0;
}

const char *csictl_size_format(int64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"Ti", "Gi", "Mi", "Ki"};

	for (int i = 0; i < 4; i++) {
		int64_t m = (int64_t)1 << (10 * (4 - i));

		if (bytes > 0 && bytes % m == 0) {
			snprintf(buf, len, "%" PRId64 "%s", bytes / m, units[i]);
			return buf;
		}
	}
	snprintf(buf, len, "%" PRId64, bytes);
	return buf;
}

int csictl_duration_parse(const char *s, int64_t *ms, struct err *e)
{
	static const struct csictl_flags_unit units[] = {
	    {"", 1000}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000},
	};
	const uint64_t max_ms = 24ULL * 3600 * 1000;
	uint64_t v, mult;
	bool overflow;

	if (!csictl_flags_number(s, units, sizeof(units) / sizeof(units[0]), &v, &mult, &overflow))
		return err_set(
		    e, CSID_EINVAL,
		    "invalid duration \"%.64s\": expected digits with a unit ms, s, m or h",
		    s ? s : "");
	if (overflow || v == 0 || v > max_ms / mult)
		return err_set(e, CSID_EINVAL,
			       "duration \"%.64s\" must be more than 0 and at most 24h", s);
	*ms = (int64_t)(v * mult);
	return 0;
}

int csictl_int_parse(const char *s, int32_t *out, struct err *e)
{
	static const struct csictl_flags_unit units[] = {{"", 1}};
	uint64_t v, mult;
	bool overflow;

	if (!csictl_flags_number(s, units, 1, &v, &mult, &overflow))
		return err_set(e, CSID_EINVAL, "invalid number \"%.64s\": expected digits",
			       s ? s : "");
	if (overflow || v > INT32_MAX)
		return err_set(e, CSID_EINVAL, "number \"%.64s\" is too large", s);
	*out = (int32_t)v;
	return 0;
}
