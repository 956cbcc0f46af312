/*
 * Table and JSON output for csictl. A table is a flat array of copied
 * cells printed with each column padded to its widest cell (width counted
 * in UTF-8 code points). The message-to-JSON walker reads protobuf-c
 * descriptors, so every CSI response prints as JSON without per-message
 * code; a secret field (csi/csi_secret.h: every secrets map, and mount
 * flags) prints as "<redacted>" when set, never with its content.
 */
#include "csictl_out.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "csi/csi_rpc.h"
#include "csi/csi_secret.h"
#include "util/err.h"

/* Longest cell printed; longer values are cut with "...". */
#define CSICTL_CELL_MAX 1024

struct csictl_table {
	size_t ncols;
	size_t nrows; /* rows of cells, the header excluded */
	bool header;
	char **cells; /* (nrows + 1) * ncols; row 0 is the header */
	size_t cap; /* rows allocated */
};

const char *csictl_out_clean(const char *s, char *buf, size_t len)
{
	size_t i = 0;

	if (len == 0)
		return buf;
	if (!s)
		s = "";
	for (; *s && i + 1 < len; s++) {
		unsigned char c = (unsigned char)*s;

		buf[i++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	buf[i] = '\0';
	if (*s && len > 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}

static size_t csictl_out_width(const char *s)
{
	size_t w = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			w++;
	return w;
}

struct csictl_table *csictl_table_new(size_t ncols, const char *const *headers)
{
	struct csictl_table *t;

	if (ncols == 0 || ncols > CSICTL_TABLE_COLS_MAX)
		return NULL;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->ncols = ncols;
	t->header = headers != NULL;
	t->cap = 8;
	t->cells = calloc(t->cap * ncols, sizeof(char *));
	if (!t->cells) {
		free(t);
		return NULL;
	}
	for (size_t c = 0; headers && c < ncols; c++) {
		t->cells[c] = strdup(headers[c] ? headers[c] : "");
		if (!t->cells[c]) {
			csictl_table_free(t);
			return NULL;
		}
	}
	return t;
}

void csictl_table_free(struct csictl_table *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < (t->nrows + 1) * t->ncols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

int csictl_table_add(struct csictl_table *t, const char *const *cells)
{
	char **row;

	if (t->nrows + 2 > t->cap) {
		size_t cap = t->cap * 2;
		char **n = realloc(t->cells, cap * t->ncols * sizeof(char *));

		if (!n)
			return CSID_ENOMEM;
		memset(n + t->cap * t->ncols, 0, (cap - t->cap) * t->ncols * sizeof(char *));
		t->cells = n;
		t->cap = cap;
	}
	row = t->cells + (t->nrows + 1) * t->ncols;
	for (size_t c = 0; c < t->ncols; c++) {
		char buf[CSICTL_CELL_MAX];

		row[c] = strdup(csictl_out_clean(cells[c], buf, sizeof(buf)));
		if (!row[c]) {
			for (size_t k = 0; k < c; k++) {
				free(row[k]);
				row[k] = NULL;
			}
			return CSID_ENOMEM;
		}
	}
	t->nrows++;
	return 0;
}

int csictl_table_addv(struct csictl_table *t, ...)
{
	const char *cells[CSICTL_TABLE_COLS_MAX];
	va_list ap;

	va_start(ap, t);
	for (size_t c = 0; c < t->ncols; c++)
		cells[c] = va_arg(ap, const char *);
	va_end(ap);
	return csictl_table_add(t, cells);
}

size_t csictl_table_rows(const struct csictl_table *t)
{
	return t->nrows;
}

void csictl_table_print(const struct csictl_table *t, FILE *f)
{
	size_t width[CSICTL_TABLE_COLS_MAX] = {0};

	for (size_t r = t->header ? 0 : 1; r <= t->nrows; r++)
		for (size_t c = 0; c < t->ncols; c++) {
			size_t w = csictl_out_width(t->cells[r * t->ncols + c]);

			if (w > width[c])
				width[c] = w;
		}
	for (size_t r = t->header ? 0 : 1; r <= t->nrows; r++) {
		for (size_t c = 0; c < t->ncols; c++) {
			const char *cell = t->cells[r * t->ncols + c];

			if (c + 1 == t->ncols) {
				fputs(cell, f);
				break;
			}
			fputs(cell, f);
			for (size_t w = csictl_out_width(cell); w < width[c] + 2; w++)
				fputc(' ', f);
		}
		fputc('\n', f);
	}
}

/* Length of the valid UTF-8 sequence at s, or 0 when it is not valid. */
static size_t csictl_out_utf8_len(const unsigned char *s)
{
	size_t n;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if ((s[0] & 0xe0) == 0xc0) {
		n = 2;
		cp = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		n = 3;
		cp = s[0] & 0x0f;
	} else if ((s[0] & 0xf8) == 0xf0) {
		n = 4;
		cp = s[0] & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

bool csictl_out_utf8_ok(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		size_t n = csictl_out_utf8_len(p);

		if (n == 0)
			return false;
		p += n;
	}
	return true;
}

json_t *csictl_out_json_str(const char *s)
{
	const unsigned char *p;
	unsigned char *buf, *o;
	json_t *j;

	if (!s)
		s = "";
	j = json_string(s);
	if (j)
		return j;
	/* Invalid UTF-8: each bad byte becomes U+FFFD (3 bytes). */
	buf = malloc(strlen(s) * 3 + 1);
	if (!buf)
		return NULL;
	for (p = (const unsigned char *)s, o = buf; *p;) {
		size_t n = csictl_out_utf8_len(p);

		if (n == 0) {
			memcpy(o, "\xef\xbf\xbd", 3);
			o += 3;
			p++;
			continue;
		}
		memcpy(o, p, n);
		o += n;
		p += n;
	}
	*o = '\0';
	j = json_string((const char *)buf);
	free(buf);
	return j;
}

static bool csictl_out_is_map_entry(const ProtobufCMessageDescriptor *d)
{
	size_t len = strlen(d->short_name);

	return d->n_fields == 2 && len > 5 && strcmp(d->short_name + len - 5, "Entry") == 0 &&
	       strcmp(d->fields[0].name, "key") == 0 && strcmp(d->fields[1].name, "value") == 0 &&
	       d->fields[0].type == PROTOBUF_C_TYPE_STRING &&
	       d->fields[1].type == PROTOBUF_C_TYPE_STRING;
}

static json_t *csictl_out_timestamp(const ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *fs, *fn;
	int64_t secs;
	int32_t nanos;
	struct tm tm;
	time_t t;
	char buf[64];
	size_t n;

	fs = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "seconds");
	fn = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, "nanos");
	if (!fs || !fn)
		return json_null();
	secs = *(const int64_t *)((const char *)m + fs->offset);
	nanos = *(const int32_t *)((const char *)m + fn->offset);
	t = (time_t)secs;
	if (!gmtime_r(&t, &tm) || tm.tm_year > 8099 || tm.tm_year < -1899)
		return json_integer((json_int_t)secs);
	n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
	if (nanos > 0 && nanos < 1000000000)
		snprintf(buf + n, sizeof(buf) - n, ".%09" PRId32 "Z", nanos);
	else
		snprintf(buf + n, sizeof(buf) - n, "Z");
	return json_string(buf);
}

static json_t *csictl_out_value(const ProtobufCFieldDescriptor *f, const void *p);

/* Messages that print as something other than an object. */
static json_t *csictl_out_message(const ProtobufCMessage *m)
{
	const char *name = m->descriptor->name;

	if (strcmp(name, "google.protobuf.Timestamp") == 0)
		return csictl_out_timestamp(m);
	if (strncmp(name, "google.protobuf.", 16) == 0 && strstr(name, "Value") &&
	    m->descriptor->n_fields == 1)
		return csictl_out_value(&m->descriptor->fields[0],
					(const char *)m + m->descriptor->fields[0].offset);
	return csictl_out_msg_json(m);
}

static json_t *csictl_out_value(const ProtobufCFieldDescriptor *f, const void *p)
{
	const ProtobufCEnumValue *ev;

	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		return json_integer(*(const int32_t *)p);
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		return json_integer(*(const uint32_t *)p);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		return json_integer((json_int_t) * (const int64_t *)p);
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return json_integer((json_int_t) * (const uint64_t *)p);
	case PROTOBUF_C_TYPE_FLOAT:
		return json_real(*(const float *)p);
	case PROTOBUF_C_TYPE_DOUBLE:
		return json_real(*(const double *)p);
	case PROTOBUF_C_TYPE_BOOL:
		return json_boolean(*(const protobuf_c_boolean *)p);
	case PROTOBUF_C_TYPE_ENUM:
		ev = protobuf_c_enum_descriptor_get_value(f->descriptor, *(const int *)p);
		return ev ? json_string(ev->name) : json_integer(*(const int *)p);
	case PROTOBUF_C_TYPE_STRING:
		return csictl_out_json_str(*(char *const *)p);
	case PROTOBUF_C_TYPE_BYTES:
		return json_integer((json_int_t)((const ProtobufCBinaryData *)p)->len);
	case PROTOBUF_C_TYPE_MESSAGE:
		if (!*(ProtobufCMessage *const *)p)
			return json_null();
		return csictl_out_message(*(ProtobufCMessage *const *)p);
	}
	return json_null();
}

static json_t *csictl_out_repeated(const ProtobufCFieldDescriptor *f, const ProtobufCMessage *m)
{
	size_t n = *(const size_t *)((const char *)m + f->quantifier_offset);
	const char *arr = *(char *const *)((const char *)m + f->offset);
	bool is_map = f->type == PROTOBUF_C_TYPE_MESSAGE && csictl_out_is_map_entry(f->descriptor);
	json_t *j = is_map ? json_object() : json_array();

	if (!j)
		return NULL;
	for (size_t i = 0; i < n && arr; i++) {
		const void *p = arr + i * csi_rpc_elem_size(f->type);
		json_t *v;

		if (is_map) {
			const ProtobufCMessage *e = *(ProtobufCMessage *const *)p;
			const char *key =
			    *(char *const *)((const char *)e + e->descriptor->fields[0].offset);
			const char *val =
			    *(char *const *)((const char *)e + e->descriptor->fields[1].offset);
			json_t *jk = csictl_out_json_str(key);

			if (!jk || json_object_set_new(j, json_string_value(jk),
						       csictl_out_json_str(val))) {
				json_decref(jk);
				json_decref(j);
				return NULL;
			}
			json_decref(jk);
			continue;
		}
		v = csictl_out_value(f, p);
		if (!v || json_array_append_new(j, v)) {
			json_decref(j);
			return NULL;
		}
	}
	return j;
}

json_t *csictl_out_msg_json(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_t *obj = json_object();

	if (!obj)
		return NULL;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *member = (const char *)m + f->offset;
		json_t *v;

		if (csi_secret_field(d, f)) {
			/* Show that the field is set, never what it holds. */
			if (f->label == PROTOBUF_C_LABEL_REPEATED &&
			    *(const size_t *)((const char *)m + f->quantifier_offset) > 0 &&
			    json_object_set_new(obj, f->name, json_string("<redacted>"))) {
				json_decref(obj);
				return NULL;
			}
			continue;
		}
		if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    *(const uint32_t *)((const char *)m + f->quantifier_offset) != f->id)
			continue;
		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			v = csictl_out_repeated(f, m);
		} else {
			if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
			    !*(ProtobufCMessage *const *)member)
				continue;
			v = csictl_out_value(f, member);
		}
		if (!v || json_object_set_new(obj, f->name, v)) {
			json_decref(obj);
			return NULL;
		}
	}
	return obj;
}

void csictl_out_json_print(const json_t *j, FILE *f)
{
	json_dumpf(j, f, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	fputc('\n', f);
}

const char *csictl_out_map_join(const ProtobufCMessage *m, const char *field, char *buf, size_t len)
{
	const ProtobufCFieldDescriptor *f;
	size_t used = 0, n;
	ProtobufCMessage *const *arr;

	buf[0] = '\0';
	if (!m)
		return buf;
	f = protobuf_c_message_descriptor_get_field_by_name(m->descriptor, field);
	if (!f || f->label != PROTOBUF_C_LABEL_REPEATED || f->type != PROTOBUF_C_TYPE_MESSAGE ||
	    !csictl_out_is_map_entry(f->descriptor))
		return buf;
	n = *(const size_t *)((const char *)m + f->quantifier_offset);
	arr = *(ProtobufCMessage *const *const *)((const char *)m + f->offset);
	for (size_t i = 0; i < n && used + 1 < len; i++) {
		const ProtobufCMessage *e = arr[i];
		const char *k = *(char *const *)((const char *)e + e->descriptor->fields[0].offset);
		const char *v = *(char *const *)((const char *)e + e->descriptor->fields[1].offset);
		int w = snprintf(buf + used, len - used, "%s%s=%s", i ? "," : "", k ? k : "",
				 v ? v : "");

		if (w < 0)
			break;
		used += (size_t)w;
	}
	if (used >= len)
		used = len - 1;
	buf[used] = '\0';
	return buf;
}
