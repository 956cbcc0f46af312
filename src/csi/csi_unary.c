/* One unary gRPC call's batch (csi_unary.h). */
#include "csi/csi_unary.h"

#include <string.h>

#include <grpc/byte_buffer.h>
#include <grpc/support/alloc.h>

void csi_unary_init(struct csi_unary *u)
{
	memset(u, 0, sizeof(*u));
	u->status = GRPC_STATUS_UNKNOWN;
	u->details = grpc_empty_slice();
	grpc_metadata_array_init(&u->initial);
	grpc_metadata_array_init(&u->trailing);
}

grpc_call_error csi_unary_start(struct csi_unary *u, const grpc_metadata *md, size_t nmd,
				uint32_t flags, void *tag)
{
	grpc_op ops[6];

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].flags = flags;
	ops[0].data.send_initial_metadata.count = nmd;
	ops[0].data.send_initial_metadata.metadata = (grpc_metadata *)(uintptr_t)md;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = u->send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &u->recv;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &u->trailing;
	ops[5].data.recv_status_on_client.status = &u->status;
	ops[5].data.recv_status_on_client.status_details = &u->details;
	ops[5].data.recv_status_on_client.error_string = &u->error_string;
	return grpc_call_start_batch(u->call, ops, 6, tag, NULL);
}

void csi_unary_release(struct csi_unary *u)
{
	if (u->error_string)
		gpr_free((void *)u->error_string);
	grpc_slice_unref(u->details);
	grpc_metadata_array_destroy(&u->initial);
	grpc_metadata_array_destroy(&u->trailing);
	if (u->send)
		grpc_byte_buffer_destroy(u->send);
	if (u->recv)
		grpc_byte_buffer_destroy(u->recv);
	if (u->call)
		grpc_call_unref(u->call);
	csi_unary_init(u);
}
