/*
 * Fuzz target: what csictl reads from outside. The input is taken as an
 * agent answer (rendered as plugins, mounts and a mount result, and as an
 * error body, and as a -context-file) and as command-line values (sizes, durations, counts, agent
 * addresses, path escaping). Every input must give output or a clear
 * error: never a crash, a leak, or an escape character on the terminal.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "csictl_agent.h"
#include "csictl_flags.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_csictl_render(const json_t *j)
{
	int (*const renders[])(const json_t *, FILE *, struct err *) = {
	    csictl_agent_render_plugins,
	    csictl_agent_render_mounts,
	    csictl_agent_render_mount,
	    csictl_agent_render_unmount,
	};

	for (size_t i = 0; i < sizeof(renders) / sizeof(renders[0]); i++) {
		char *buf = NULL;
		size_t len = 0;
		FILE *f = open_memstream(&buf, &len);
		struct err e;

		if (!f)
			abort();
		err_clear(&e);
		if (renders[i](j, f, &e) != 0 && !e.msg[0])
			abort();
		fclose(f);
		/* Cells are cleaned: no control character but the line ends. */
		for (size_t k = 0; k < len; k++)
			if ((unsigned char)buf[k] < 0x20 && buf[k] != '\n')
				abort();
		free(buf);
	}
}

static void fuzz_csictl_values(const char *s)
{
	struct csictl_http_addr a;
	char esc[256];
	struct err e;
	int64_t v;
	int32_t n;

	if (csictl_size_parse(s, &v, &e) == 0 && v < 0)
		abort();
	if (csictl_duration_parse(s, &v, &e) == 0 && (v <= 0 || v > 24LL * 3600 * 1000))
		abort();
	if (csictl_int_parse(s, &n, &e) == 0 && n < 0)
		abort();
	if (csictl_http_addr_parse("agent", s, &a, &e) == 0 && a.socket[0] && a.socket[0] != '/')
		abort();
	if (csictl_http_escape(s, esc, sizeof(esc)) == 0 && strpbrk(esc, "/ ?#"))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1), msg[512];
	json_t *j;

	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	j = json_loadb((const char *)data, size, 0, NULL);
	if (j)
		fuzz_csictl_render(j);
	json_decref(j);
	/* As a -context-file: an object of strings, or nothing. */
	if (csictl_agent_context_parse((const char *)data, size, &j, NULL) == 0) {
		const char *key;
		json_t *v;

		if (!json_is_object(j))
			abort();
		json_object_foreach(j, key, v) if (!json_is_string(v)) abort();
		json_decref(j);
	}
	csictl_http_error_text(500, (const char *)data, size, msg, sizeof(msg));
	for (const char *p = msg; *p; p++)
		if ((unsigned char)*p < 0x20)
			abort();
	fuzz_csictl_values(s);
	free(s);
	return 0;
}
