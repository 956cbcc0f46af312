/*
 * One unary gRPC call as one batch, shared by the gRPC clients (the CSI
 * client, csi_client.c, and etcd's, src/store/etcd_client.c): send the
 * initial metadata, the request and the close; receive the initial
 * metadata, the answer and the status. Each client makes its call and
 * reads the outcome its own way; this is the batch and what it holds.
 * Only those clients include this header: it carries gRPC's types, which
 * csi_client.h keeps out.
 *
 * Not thread-safe: one struct csi_unary belongs to one call at a time.
 */
#ifndef CSID_CSI_CSI_UNARY_H
#define CSID_CSI_CSI_UNARY_H

#include <stddef.h>
#include <stdint.h>

#include <grpc/grpc.h>

struct csi_unary {
	grpc_call *call; /* set by the caller; released with the rest */
	grpc_byte_buffer *send; /* the request; set by the caller */
	grpc_byte_buffer *recv; /* the answer; NULL when none came */
	grpc_metadata_array initial, trailing;
	grpc_status_code status;
	grpc_slice details;
	const char *error_string; /* gRPC's own words on a failure; may be NULL */
};

/* Readies u for a call: nothing held, status UNKNOWN. */
void csi_unary_init(struct csi_unary *u);

/*
 * Starts the batch on u->call, completing with tag on the call's queue:
 * initial metadata md[0..nmd) with flags (GRPC_INITIAL_METADATA_*),
 * u->send, the close, and the receives into u. Returns gRPC's answer
 * (GRPC_CALL_OK when started).
 */
grpc_call_error csi_unary_start(struct csi_unary *u, const grpc_metadata *md, size_t nmd,
				uint32_t flags, void *tag);

/* Releases what u holds, its call included, and readies it again (csi_unary_init). */
void csi_unary_release(struct csi_unary *u);

#endif
