/*
 * Output helpers for csictl: aligned text tables, JSON printing, and a
 * generic protobuf-c message to JSON conversion (field names as in
 * csi.proto, enums by name, maps as objects, wrappers as plain values,
 * timestamps as RFC 3339 strings). Secret fields (csi/csi_secret.h:
 * secrets maps and mount flags) print as "<redacted>" when set. Every string that came from a
 * plugin or a server is cleaned before it reaches a terminal: control characters become '?', and
 * invalid UTF-8 becomes U+FFFD in JSON.
 */
#ifndef CSICTL_OUT_H
#define CSICTL_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>
#include <protobuf-c/protobuf-c.h>

#define CSICTL_TABLE_COLS_MAX 8

/* A table of strings; cells are copied. */
struct csictl_table;

/*
 * New table with ncols columns (at most CSICTL_TABLE_COLS_MAX) and the
 * given headers (ncols strings); headers NULL prints no header line.
 * Returns NULL when out of memory.
 */
struct csictl_table *csictl_table_new(size_t ncols, const char *const *headers);
/* Releases t; NULL is a no-op. */
void csictl_table_free(struct csictl_table *t);
/* Appends a row of ncols cells (NULL cells print as empty); 0 or CSID_ENOMEM. */
int csictl_table_add(struct csictl_table *t, const char *const *cells);
/* Appends a row given as ncols const char * arguments. */
int csictl_table_addv(struct csictl_table *t, ...);
/* Number of rows added so far. */
size_t csictl_table_rows(const struct csictl_table *t);
/* Prints the table, columns padded to their widest cell, two spaces apart. */
void csictl_table_print(const struct csictl_table *t, FILE *f);

/*
 * Copies s into buf (len bytes), replacing control characters (and DEL)
 * with '?' and truncating with "..." when it does not fit. Returns buf.
 */
const char *csictl_out_clean(const char *s, char *buf, size_t len);

/* Whether s is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
bool csictl_out_utf8_ok(const char *s);

/* A JSON string of s, repairing invalid UTF-8; NULL s gives "". */
json_t *csictl_out_json_str(const char *s);

/*
 * The JSON form of a message (see the file comment). Returns a new
 * reference, or NULL when out of memory.
 */
json_t *csictl_out_msg_json(const ProtobufCMessage *m);

/* Prints j indented, followed by a newline; steals no reference. */
void csictl_out_json_print(const json_t *j, FILE *f);

/*
 * Joins the string map field "field" of m (NULL m allowed) as "k=v,k=v" in
 * wire order into buf, cut to fit; "" when absent. Not cleaned: pass the
 * result through a table or csictl_out_clean before printing. Returns buf.
 */
const char *csictl_out_map_join(const ProtobufCMessage *m, const char *field, char *buf,
				size_t len);

#endif
