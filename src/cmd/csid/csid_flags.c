/*
 * The flag parser of csid's subcommands (csid_flags.h): each argument is
 * matched against the table by name; a value comes after '=' or as the
 * next argument.
 */
#include "csid_flags.h"

#include <stdlib.h>
#include <string.h>

#include "util/conf_http.h"
#include "util/curl_tls.h"

int csid_flags_parse(const char *cmd, const struct csid_flag *flags, size_t nflags, int argc,
		     char **argv, void (*usage)(FILE *f))
{
	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i];
		size_t k = nflags, len = 0;

		if (!strcmp(arg, "-h") || !strcmp(arg, "-help") || !strcmp(arg, "--help")) {
			usage(stdout);
			return 1;
		}
		if (arg[0] == '-') {
			arg += arg[1] == '-' ? 2 : 1;
			len = strcspn(arg, "=");
			for (k = 0; k < nflags; k++)
				if (strlen(flags[k].name) == len &&
				    !strncmp(arg, flags[k].name, len))
					break;
		}
		if (k < nflags && flags[k].on && arg[len] == '\0') {
			*flags[k].on = true;
			continue;
		}
		if (k == nflags || flags[k].on || (arg[len] != '=' && i + 1 >= argc)) {
			fprintf(stderr, "csid %s: bad flag or missing value: \"%s\"\n", cmd,
				argv[i]);
			usage(stderr);
			return 2;
		}
		*flags[k].value = arg[len] == '=' ? arg + len + 1 : argv[++i];
	}
	return 0;
}

int csid_flags_client_tls(const struct conf_http *h, struct err *e)
{
	struct curl_tls t = {
	    .ca_file = h->ca_file ? h->ca_file : getenv("CSID_CACERT"),
	    .cert_file = h->client_cert_file,
	    .key_file = h->client_key_file,
	};

	if (t.ca_file && !t.ca_file[0])
		t.ca_file = NULL;
	return curl_tls_set(&t, e);
}
