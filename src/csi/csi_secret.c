/*
 * The list of secret fields of CSI messages and the redacting formatter.
 * The formatter walks protobuf-c descriptors generically, so it prints any
 * message (requests, responses, nested types) without per-type code; it
 * writes into the caller's bounded buffer and never allocates.
 */
#include "csi/csi_secret.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "csi.pb-c.h"
#include "csi/csi_rpc.h"

/* Nesting deeper than any CSI message; guards against hostile descriptors. */
#define CSI_SECRET_MAX_DEPTH 16

struct csi_secret_entry {
	const ProtobufCMessageDescriptor *msg;
	const char *field;
};

static const struct csi_secret_entry csi_secret_list[] = {
    {&csi__v1__create_volume_request__descriptor, "secrets"},
    {&csi__v1__delete_volume_request__descriptor, "secrets"},
    {&csi__v1__controller_publish_volume_request__descriptor, "secrets"},
    {&csi__v1__controller_unpublish_volume_request__descriptor, "secrets"},
    {&csi__v1__validate_volume_capabilities_request__descriptor, "secrets"},
    {&csi__v1__controller_modify_volume_request__descriptor, "secrets"},
    {&csi__v1__create_snapshot_request__descriptor, "secrets"},
    {&csi__v1__delete_snapshot_request__descriptor, "secrets"},
    {&csi__v1__list_snapshots_request__descriptor, "secrets"},
    {&csi__v1__get_snapshot_request__descriptor, "secrets"},
    {&csi__v1__controller_expand_volume_request__descriptor, "secrets"},
    {&csi__v1__node_stage_volume_request__descriptor, "secrets"},
    {&csi__v1__node_publish_volume_request__descriptor, "secrets"},
    {&csi__v1__node_expand_volume_request__descriptor, "secrets"},
    {&csi__v1__create_volume_group_snapshot_request__descriptor, "secrets"},
    {&csi__v1__delete_volume_group_snapshot_request__descriptor, "secrets"},
    {&csi__v1__get_volume_group_snapshot_request__descriptor, "secrets"},
    {&csi__v1__get_metadata_allocated_request__descriptor, "secrets"},
    {&csi__v1__get_metadata_delta_request__descriptor, "secrets"},
    /* "mount_flags MAY contain sensitive information" (csi.proto, MountVolume). */
    {&csi__v1__volume_capability__mount_volume__descriptor, "mount_flags"},
};

#define CSI_SECRET_N (sizeof(csi_secret_list) / sizeof(csi_secret_list[0]))

bool csi_secret_field(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f)
{
	for (size_t i = 0; i < CSI_SECRET_N; i++)
		if (csi_secret_list[i].msg == d && strcmp(csi_secret_list[i].field, f->name) == 0)
			return true;
	return false;
}

static bool csi_secret_has_depth(const ProtobufCMessageDescriptor *d, int depth)
{
	if (depth > CSI_SECRET_MAX_DEPTH)
		return false;
	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];

		if (csi_secret_field(d, f))
			return true;
		if (f->type == PROTOBUF_C_TYPE_MESSAGE &&
		    csi_secret_has_depth(f->descriptor, depth + 1))
			return true;
	}
	return false;
}

bool csi_secret_has(const ProtobufCMessageDescriptor *d)
{
	return d && csi_secret_has_depth(d, 0);
}

/* A bounded output line. */
struct csi_secret_out {
	char *buf;
	size_t len;
	size_t used;
	bool full;
};

static void csi_secret_put(struct csi_secret_out *o, const char *s, size_t n)
{
	size_t room = o->len - 1 - o->used;

	if (o->full)
		return;
	if (n > room) {
		n = room;
		o->full = true;
	}
	memcpy(o->buf + o->used, s, n);
	o->used += n;
}

static void csi_secret_puts(struct csi_secret_out *o, const char *s)
{
	csi_secret_put(o, s, strlen(s));
}

static void csi_secret_printf(struct csi_secret_out *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void csi_secret_printf(struct csi_secret_out *o, const char *fmt, ...)
{
	char tmp[64];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		csi_secret_put(o, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* A quoted string: printable ASCII as is, the rest as \xNN. */
static void csi_secret_quote(struct csi_secret_out *o, const char *s)
{
	csi_secret_put(o, "\"", 1);
	for (const unsigned char *p = (const unsigned char *)s; *p && !o->full; p++) {
		if (*p == '"' || *p == '\\') {
			char esc[2] = {'\\', (char)*p};

			csi_secret_put(o, esc, 2);
		} else if (*p < 0x20 || *p >= 0x7f) {
			csi_secret_printf(o, "\\x%02x", *p);
		} else {
			csi_secret_put(o, (const char *)p, 1);
		}
	}
	csi_secret_put(o, "\"", 1);
}

/* Whether a singular value is its type's default (then it is left out). */
static bool csi_secret_is_default(const ProtobufCFieldDescriptor *f, const void *v)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)v;

		return !s || !*s;
	}
	case PROTOBUF_C_TYPE_MESSAGE:
		return *(ProtobufCMessage *const *)v == NULL;
	case PROTOBUF_C_TYPE_BYTES:
		return ((const ProtobufCBinaryData *)v)->len == 0;
	default: {
		static const unsigned char zero[8];

		return memcmp(v, zero, csi_rpc_elem_size(f->type)) == 0;
	}
	}
}

static void csi_secret_message(struct csi_secret_out *o, const ProtobufCMessage *m, int depth);

static void csi_secret_value(struct csi_secret_out *o, const ProtobufCFieldDescriptor *f,
			     const void *v, int depth)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		csi_secret_printf(o, "%d", (int)*(const int32_t *)v);
		return;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		csi_secret_printf(o, "%u", (unsigned)*(const uint32_t *)v);
		return;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		csi_secret_printf(o, "%lld", (long long)*(const int64_t *)v);
		return;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		csi_secret_printf(o, "%llu", (unsigned long long)*(const uint64_t *)v);
		return;
	case PROTOBUF_C_TYPE_FLOAT:
		csi_secret_printf(o, "%g", (double)*(const float *)v);
		return;
	case PROTOBUF_C_TYPE_DOUBLE:
		csi_secret_printf(o, "%g", *(const double *)v);
		return;
	case PROTOBUF_C_TYPE_BOOL:
		csi_secret_puts(o, *(const protobuf_c_boolean *)v ? "true" : "false");
		return;
	case PROTOBUF_C_TYPE_ENUM: {
		int n = *(const int *)v;
		const ProtobufCEnumValue *ev =
		    protobuf_c_enum_descriptor_get_value(f->descriptor, n);

		if (ev)
			csi_secret_puts(o, ev->name);
		else
			csi_secret_printf(o, "%d", n);
		return;
	}
	case PROTOBUF_C_TYPE_STRING: {
		const char *s = *(char *const *)v;

		csi_secret_quote(o, s ? s : "");
		return;
	}
	case PROTOBUF_C_TYPE_BYTES:
		csi_secret_printf(o, "<%zu bytes>", ((const ProtobufCBinaryData *)v)->len);
		return;
	case PROTOBUF_C_TYPE_MESSAGE:
		csi_secret_message(o, *(ProtobufCMessage *const *)v, depth + 1);
		return;
	}
}

/* A map entry message: exactly the fields key = 1 and value = 2. */
static bool csi_secret_is_map_entry(const ProtobufCMessageDescriptor *d)
{
	size_t n = strlen(d->name);

	return d->n_fields == 2 && n > 5 && strcmp(d->name + n - 5, "Entry") == 0 &&
	       d->fields[0].id == 1 && strcmp(d->fields[0].name, "key") == 0 &&
	       d->fields[1].id == 2 && strcmp(d->fields[1].name, "value") == 0;
}

static void csi_secret_map(struct csi_secret_out *o, const ProtobufCFieldDescriptor *f,
			   ProtobufCMessage *const *entries, size_t n, int depth)
{
	const ProtobufCMessageDescriptor *d = f->descriptor;

	csi_secret_put(o, "{", 1);
	for (size_t i = 0; i < n && !o->full; i++) {
		const char *e = (const char *)entries[i];

		if (i)
			csi_secret_put(o, ", ", 2);
		if (!e) {
			csi_secret_puts(o, "null");
			continue;
		}
		csi_secret_value(o, &d->fields[0], e + d->fields[0].offset, depth);
		csi_secret_put(o, ":", 1);
		csi_secret_value(o, &d->fields[1], e + d->fields[1].offset, depth);
	}
	csi_secret_put(o, "}", 1);
}

static void csi_secret_repeated(struct csi_secret_out *o, const ProtobufCFieldDescriptor *f,
				const void *arr, size_t n, int depth)
{
	size_t sz = csi_rpc_elem_size(f->type);

	if (f->type == PROTOBUF_C_TYPE_MESSAGE && csi_secret_is_map_entry(f->descriptor)) {
		csi_secret_map(o, f, arr, n, depth);
		return;
	}
	csi_secret_put(o, "[", 1);
	for (size_t i = 0; i < n && !o->full; i++) {
		if (i)
			csi_secret_put(o, ", ", 2);
		csi_secret_value(o, f, (const char *)arr + i * sz, depth);
	}
	csi_secret_put(o, "]", 1);
}

static void csi_secret_message(struct csi_secret_out *o, const ProtobufCMessage *m, int depth)
{
	const ProtobufCMessageDescriptor *d;
	bool first = true;

	if (!m) {
		csi_secret_puts(o, "null");
		return;
	}
	if (depth > CSI_SECRET_MAX_DEPTH) {
		csi_secret_puts(o, "{...}");
		return;
	}
	d = m->descriptor;
	csi_secret_put(o, "{", 1);
	for (unsigned i = 0; i < d->n_fields && !o->full; i++) {
		const ProtobufCFieldDescriptor *f = &d->fields[i];
		const char *base = (const char *)m;
		const void *v = base + f->offset;
		size_t n = 0;

		if (f->label == PROTOBUF_C_LABEL_REPEATED) {
			n = *(const size_t *)(base + f->quantifier_offset);
			if (n == 0)
				continue;
		} else if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
			if (*(const uint32_t *)(base + f->quantifier_offset) != f->id)
				continue;
		} else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
			   f->type != PROTOBUF_C_TYPE_MESSAGE &&
			   f->type != PROTOBUF_C_TYPE_STRING) {
			if (!*(const protobuf_c_boolean *)(base + f->quantifier_offset))
				continue;
		} else if (csi_secret_is_default(f, v)) {
			continue;
		}
		if (!first)
			csi_secret_put(o, ", ", 2);
		first = false;
		csi_secret_puts(o, f->name);
		csi_secret_put(o, ":", 1);
		if (csi_secret_field(d, f))
			csi_secret_puts(o, "<redacted>");
		else if (f->label == PROTOBUF_C_LABEL_REPEATED)
			csi_secret_repeated(o, f, *(void *const *)v, n, depth);
		else
			csi_secret_value(o, f, v, depth);
	}
	csi_secret_put(o, "}", 1);
}

const char *csi_secret_format(const ProtobufCMessage *m, char *buf, size_t len)
{
	struct csi_secret_out o = {buf, len, 0, false};

	if (!buf || len == 0)
		return buf;
	csi_secret_message(&o, m, 0);
	if (o.full) {
		size_t tail = len > 4 ? 3 : len - 1;

		memcpy(buf + len - 1 - tail, "...", tail);
		o.used = len - 1;
	}
	buf[o.used] = '\0';
	return buf;
}
