/*
 * Secret fields of CSI messages, and a one-line text form of any CSI
 * message for logs in which every secret is replaced by <redacted>.
 *
 * The spec marks secret fields with the csi_secret field option, which
 * protoc-c does not keep, so csi_secret.c holds our own list: every
 * `secrets` map of proto/csi.proto (marked "// secret" there) and
 * VolumeCapability.MountVolume.mount_flags, of which the spec says "MAY
 * contain sensitive information ... the CO and the Plugin MUST NOT leak
 * this information". A unit test checks the list against the proto file.
 */
#ifndef CSID_CSI_SECRET_H
#define CSID_CSI_SECRET_H

#include <stdbool.h>
#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

/* Whether field f of messages of type d holds secrets (f borrowed from d). */
bool csi_secret_field(const ProtobufCMessageDescriptor *d, const ProtobufCFieldDescriptor *f);

/* Whether messages of type d have a secret field, directly or nested. */
bool csi_secret_has(const ProtobufCMessageDescriptor *d);

/*
 * Writes m into buf (len bytes, at least 1) as one line, e.g.
 *   {name:"v1", capacity_range:{required_bytes:1024}, secrets:<redacted>}
 * Fields at their default value are left out; maps print as {key:"value"};
 * bytes print as their length; strings are quoted with control and non-ASCII
 * bytes escaped as \xNN. Every secret field prints as <redacted>, whatever
 * it holds. Output that does not fit ends with "...". m NULL prints "null".
 * Returns buf.
 */
const char *csi_secret_format(const ProtobufCMessage *m, char *buf, size_t len);

#endif
