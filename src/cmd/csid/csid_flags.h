/*
 * The command-line flags of csid's subcommands: "-name value",
 * "-name=value", the same with "--", and switches without a value
 * ("-keep"). One parser for `csid agent`, `csid server` and `csid dev`, so
 * their flags read the same.
 */
#ifndef CSID_CMD_FLAGS_H
#define CSID_CMD_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct csid_flag {
	const char *name; /* without the dash */
	const char **value; /* a flag with a value: set to the argv string (borrowed) */
	bool *on; /* or a switch: set to true */
};

/*
 * Parses argv (what follows the subcommand) into flags. "-h", "-help" and
 * "--help" print usage to stdout and return 1; an unknown flag, a
 * positional argument or a missing value prints "csid <cmd>: bad flag or
 * missing value" and usage to stderr and returns 2; else 0.
 */
int csid_flags_parse(const char *cmd, const struct csid_flag *flags, size_t nflags, int argc,
		     char **argv, void (*usage)(FILE *f));

struct conf_http;
struct err;

/*
 * Sets the process's client TLS (util/curl_tls.h) from a config's "http"
 * section: ca_file (else $CSID_CACERT), client_cert_file and
 * client_key_file. Returns 0 or a code with e set.
 */
int csid_flags_client_tls(const struct conf_http *h, struct err *e);

#endif
