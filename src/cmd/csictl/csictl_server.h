/*
 * What every csictl command of the server's API shares (volume, plugin,
 * node, events): the connection flags -address (default $CSID_ADDR, else
 * http://127.0.0.1:4646), -token ($CSID_TOKEN), -o table|json and
 * -timeout; one run's state; printing answers; and the renderers of the
 * server's objects, which take the API's JSON and never see a secret.
 *
 * Exit status: 0 OK, 1 the request failed ("error: <code>: <message>"),
 * 2 usage error.
 */
#ifndef CSICTL_SERVER_H
#define CSICTL_SERVER_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "csictl_flags.h"
#include "csictl_http.h"

#define CSICTL_SERVER_DEFAULT_ADDR "http://127.0.0.1:4646"
#define CSICTL_SERVER_FLAGS_MAX 32

/* Connection flags of every server command; strings point into argv. */
struct csictl_server_opts {
	const char *address;
	const char *token;
	const char *ca_cert;
	const char *client_cert;
	const char *client_key;
	const char *output;
	const char *timeout;
	bool help;
};

/* One run of a server command. */
struct csictl_server {
	struct csictl_http http;
	struct csictl_args args;
	bool json;
	FILE *out;
	FILE *err;
};

/* Appends the connection flags to f (at index n); returns the new count. */
size_t csictl_server_flags(struct csictl_server_opts *o, struct csictl_flag *f, size_t n);

/*
 * Parses argv with flags (the command's, including the connection flags)
 * and sets s up. For -h it prints the help of the command that group (a
 * path of csictl_cmds.h) and the positional arguments name, and returns
 * -1; with no command it prints the group's help as a usage error. Prints
 * usage errors. Returns 0 to go on, else the exit status.
 */
int csictl_server_init(struct csictl_server *s, struct csictl_server_opts *o,
		       const struct csictl_flag *flags, size_t nflags, int argc, char **argv,
		       const char *group, FILE *out, FILE *err);
/*
 * csictl_server_init for a command with no flags of its own (o is
 * cleared and gets the connection flags only).
 */
int csictl_server_init_plain(struct csictl_server *s, struct csictl_server_opts *o, int argc,
			     char **argv, const char *group, FILE *out, FILE *err);

/* Sends the request; prints the JSON answer as is with -o json, else
 * through render (NULL: done_msg). Returns the exit status. */
typedef int (*csictl_server_render_fn)(const json_t *j, FILE *out);
int csictl_server_request(struct csictl_server *s, const char *method, const char *path,
			  const char *body, csictl_server_render_fn render, const char *done_msg);

/* Builds "/v1/<what>/<escaped id><suffix>" into buf; CSICTL_EXIT_USAGE when too long. */
int csictl_server_path(struct csictl_server *s, const char *what, const char *id,
		       const char *suffix, char *buf, size_t len);

/* Prints "error: <msg>" and returns CSICTL_EXIT_USAGE. */
int csictl_server_usage(struct csictl_server *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Renderers of the server's JSON. */
int csictl_render_volumes(const json_t *j, FILE *out);
int csictl_render_volume(const json_t *j, FILE *out);
int csictl_render_snapshots(const json_t *j, FILE *out);
int csictl_render_snapshot(const json_t *j, FILE *out);
int csictl_render_plugins(const json_t *j, FILE *out);
int csictl_render_plugin(const json_t *j, FILE *out);
int csictl_render_nodes(const json_t *j, FILE *out);
int csictl_render_node(const json_t *j, FILE *out);
/* One event line as a table row of text: "index topic type key". */
void csictl_render_event(const json_t *ev, FILE *out);

/* Command groups (argv holds what follows the group's name). */
int csictl_volume_main(int argc, char **argv, FILE *out, FILE *err);
int csictl_plugin_main(int argc, char **argv, FILE *out, FILE *err);
int csictl_node_main(int argc, char **argv, FILE *out, FILE *err);
int csictl_events_main(int argc, char **argv, FILE *out, FILE *err);
int csictl_operator_main(int argc, char **argv, FILE *out, FILE *err);
/* `csictl server members|leader` (csictl_members.c). */
int csictl_members_main(int argc, char **argv, FILE *out, FILE *err);
/* `csictl version`: argv starts with "version". */
int csictl_version_main(int argc, char **argv, FILE *out, FILE *err);

#endif
