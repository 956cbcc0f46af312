/*
 * Helpers of the JSON config parsers (conf.h): key lists, bounded
 * strings, durations, the data directory.
 */
#include "util/conf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/log.h"

bool conf_has_ctl(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return true;
	return false;
}

bool conf_is_unix_addr(const char *s)
{
	size_t n;

	/* One form: unix://... would read as a URL with a host. */
	if (strncmp(s, "unix:", 5) != 0 || s[5] != '/' || s[6] == '/')
		return false;
	n = strlen(s + 5);
	return n <= CONF_SOCK_MAX && !conf_has_ctl(s + 5, n);
}

int64_t conf_parse_duration(const char *s)
{
	int64_t total = 0;

	if (!s || !*s)
		return -1;
	if (strcmp(s, "0") == 0)
		return 0;
	while (*s) {
		int64_t whole = 0, frac = 0, fscale = 1, unit;
		int digits = 0;

		while (*s >= '0' && *s <= '9') {
			if (whole > INT64_MAX / 100)
				return -1;
			whole = whole * 10 + (*s++ - '0');
			digits++;
		}
		if (*s == '.') {
			s++;
			while (*s >= '0' && *s <= '9') {
				if (fscale < 1000000) {
					frac = frac * 10 + (*s - '0');
					fscale *= 10;
				}
				s++;
				digits++;
			}
		}
		if (!digits)
			return -1;
		if (strncmp(s, "ms", 2) == 0) {
			unit = 1;
			s += 2;
		} else if (*s == 's') {
			unit = 1000;
			s++;
		} else if (*s == 'm') {
			unit = 60000;
			s++;
		} else if (*s == 'h') {
			unit = 3600000;
			s++;
		} else {
			return -1;
		}
		/* Durations longer than a year are a mistake, not a setting. */
		if (whole > 366LL * 24 * 3600 * 1000 / unit)
			return -1;
		total += whole * unit + frac * unit / fscale;
		if (total > 366LL * 24 * 3600 * 1000)
			return -1;
	}
	return total;
}

int conf_check_keys(json_t *obj, const char *path, const char *const *allowed, struct err *e)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		bool ok = false;

		for (int i = 0; allowed[i]; i++)
			if (strcmp(key, allowed[i]) == 0)
				ok = true;
		if (!ok) {
			char q[160];

			return err_set(e, CSID_EINVAL, "%s: unknown key %.100s", path,
				       log_q(q, sizeof(q), key));
		}
	}
	return 0;
}

int conf_get_string(json_t *v, const char *path, size_t max, char **out, struct err *e)
{
	size_t len;

	if (!json_is_string(v))
		return err_set(e, CSID_EINVAL, "%s: expected a string", path);
	len = json_string_length(v);
	if (len > max)
		return err_set(e, CSID_EINVAL, "%s: longer than %zu bytes", path, max);
	if (memchr(json_string_value(v), '\0', len))
		return err_set(e, CSID_EINVAL, "%s: contains a NUL byte", path);
	*out = strdup(json_string_value(v));
	if (!*out)
		return err_set(e, CSID_ENOMEM, "%s: out of memory", path);
	return 0;
}

int conf_set_string(char **dst, const char *src, struct err *e)
{
	char *s = strdup(src);

	if (!s)
		return err_set(e, CSID_ENOMEM, "config: out of memory");
	free(*dst);
	*dst = s;
	return 0;
}

int conf_data_dir(char **dir, size_t reserve, struct err *e)
{
	char cwd[CONF_PATH_MAX], buf[CONF_PATH_MAX + 64];
	int rc;

	if (!*dir || !(*dir)[0])
		return err_set(e, CSID_EINVAL, "data_dir: not set (config or -data-dir)");
	if ((*dir)[0] != '/') {
		if (!getcwd(cwd, sizeof(cwd)))
			return err_errno(e, errno, "data_dir: getcwd");
		snprintf(buf, sizeof(buf), "%s/%s", cwd, *dir);
		if ((rc = conf_set_string(dir, buf, e)))
			return rc;
	}
	if (strlen(*dir) >= CONF_PATH_MAX - reserve)
		return err_set(e, CSID_EINVAL, "data_dir: too long");
	return 0;
}

void conf_format_duration(int64_t ms, char *buf, size_t cap)
{
	int64_t h = ms / 3600000, m = ms / 60000 % 60, sec = ms / 1000 % 60, rest = ms % 1000;
	char frac[8] = "";

	if (ms < 1000) {
		snprintf(buf, cap, "%lldms", (long long)ms);
		return;
	}
	if (rest) {
		snprintf(frac, sizeof(frac), ".%03lld", (long long)rest);
		for (size_t n = strlen(frac); n > 0 && frac[n - 1] == '0'; n--)
			frac[n - 1] = '\0';
	}
	if (h)
		snprintf(buf, cap, "%lldh%lldm%lld%ss", (long long)h, (long long)m, (long long)sec,
			 frac);
	else if (m)
		snprintf(buf, cap, "%lldm%lld%ss", (long long)m, (long long)sec, frac);
	else
		snprintf(buf, cap, "%lld%ss", (long long)sec, frac);
}
