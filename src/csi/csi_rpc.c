/*
 * The RPC table of csi_rpc.h, expanded into descriptors and method paths.
 */
#include "csi/csi_rpc.h"

#include <string.h>

/* clang-format off */
static const struct csi_rpc_info csi_rpc_table[CSI_RPC_COUNT] = {
#define CSI_RPC_ROW_(id, svc, method, snake)                          \
	[CSI_RPC_##id] = {"/csi.v1." #svc "/" #method, #method, #svc, \
			  &csi__v1__##snake##_request__descriptor,    \
			  &csi__v1__##snake##_response__descriptor},
	CSI_RPCS(CSI_RPC_ROW_)
#undef CSI_RPC_ROW_
};
/* clang-format on */

const struct csi_rpc_info *csi_rpc_info(enum csi_rpc rpc)
{
	if ((unsigned)rpc >= CSI_RPC_COUNT)
		return NULL;
	return &csi_rpc_table[rpc];
}

int csi_rpc_by_path(const char *path, size_t len)
{
	for (int i = 0; i < CSI_RPC_COUNT; i++)
		if (strlen(csi_rpc_table[i].path) == len &&
		    memcmp(csi_rpc_table[i].path, path, len) == 0)
			return i;
	return -1;
}

int csi_rpc_by_name(const char *name)
{
	for (int i = 0; i < CSI_RPC_COUNT; i++)
		if (strcmp(csi_rpc_table[i].name, name) == 0)
			return i;
	return -1;
}

size_t csi_rpc_elem_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
	case PROTOBUF_C_TYPE_ENUM:
		return 4;
	case PROTOBUF_C_TYPE_FLOAT:
		return sizeof(float);
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		return 8;
	case PROTOBUF_C_TYPE_DOUBLE:
		return sizeof(double);
	case PROTOBUF_C_TYPE_BOOL:
		return sizeof(protobuf_c_boolean);
	case PROTOBUF_C_TYPE_STRING:
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(void *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	}
	return 0;
}
