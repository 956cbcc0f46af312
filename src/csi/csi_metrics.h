/*
 * Metrics of the CSI RPCs this process makes on the wire, in the shape of
 * the Kubernetes CSI sidecars' csi_sidecar_operations_seconds: the
 * histogram csid_csi_operations_seconds{driver_name, method_name,
 * grpc_status_code}, where driver_name is the name the plugin gives in
 * GetPluginInfo, method_name the full gRPC method
 * ("/csi.v1.Node/NodePublishVolume") and grpc_status_code the status name
 * ("OK", "NOT_FOUND").
 *
 * The real gRPC client (csi_client.c) reports every call here, so no
 * caller has to. It knows an endpoint, not a plugin: each GetPluginInfo
 * answer teaches the endpoint's driver name (every plugin instance is
 * fingerprinted with GetPluginInfo before it is used), and calls on an
 * endpoint not yet named count as driver "unknown". The table of names
 * is bounded (the oldest entry goes); names are cut to 63 bytes.
 *
 * Calls a server makes through an agent (csi_remote.h) are made, and so
 * counted, by that agent. Thread-safe.
 */
#ifndef CSID_CSI_CSI_METRICS_H
#define CSID_CSI_CSI_METRICS_H

#include "csi/csi_rpc.h"

/* Records that the plugin at endpoint calls itself driver. */
void csi_metrics_learn(const char *endpoint, const char *driver);
/* Counts one finished call of rpc on endpoint with gRPC code (enum csi_code), taking seconds. */
void csi_metrics_observe(const char *endpoint, enum csi_rpc rpc, int code, double seconds);

#endif
