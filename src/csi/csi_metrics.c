/*
 * CSI RPC metrics (see csi_metrics.h): a small table from endpoint to the
 * driver name its GetPluginInfo gave, replaced round robin when full, and
 * the histogram.
 */
#include "csi/csi_metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "csi/csi_client.h"
#include "util/metrics.h"

#define CSI_METRICS_NAMES 128
#define CSI_METRICS_ENDPOINT_MAX 128
#define CSI_METRICS_DRIVER_MAX 64

struct csi_metrics_name {
	char endpoint[CSI_METRICS_ENDPOINT_MAX];
	char driver[CSI_METRICS_DRIVER_MAX];
};

static pthread_mutex_t csi_metrics_mu = PTHREAD_MUTEX_INITIALIZER;
static struct csi_metrics_name csi_metrics_names[CSI_METRICS_NAMES];
static size_t csi_metrics_next; /* the slot the next new endpoint takes */

static struct metrics_family csi_metrics_ops = METRICS_FAMILY(
    "csid_csi_operations_seconds",
    "CSI RPCs made by this process, by plugin driver name, gRPC method and status code.",
    METRICS_HISTOGRAM, metrics_latency_buckets, METRICS_LATENCY_NBUCKETS, "driver_name",
    "method_name", "grpc_status_code");

/* The slot of endpoint, or NULL; csi_metrics_mu held. */
static struct csi_metrics_name *csi_metrics_find(const char *endpoint)
{
	for (size_t i = 0; i < CSI_METRICS_NAMES; i++)
		if (csi_metrics_names[i].endpoint[0] &&
		    strcmp(csi_metrics_names[i].endpoint, endpoint) == 0)
			return &csi_metrics_names[i];
	return NULL;
}

void csi_metrics_learn(const char *endpoint, const char *driver)
{
	struct csi_metrics_name *n;

	if (!endpoint || !driver || !driver[0] || strlen(endpoint) >= CSI_METRICS_ENDPOINT_MAX)
		return;
	pthread_mutex_lock(&csi_metrics_mu);
	n = csi_metrics_find(endpoint);
	if (!n) {
		n = &csi_metrics_names[csi_metrics_next];
		csi_metrics_next = (csi_metrics_next + 1) % CSI_METRICS_NAMES;
		snprintf(n->endpoint, sizeof(n->endpoint), "%s", endpoint);
	}
	snprintf(n->driver, sizeof(n->driver), "%s", driver);
	pthread_mutex_unlock(&csi_metrics_mu);
}

void csi_metrics_observe(const char *endpoint, enum csi_rpc rpc, int code, double seconds)
{
	const struct csi_rpc_info *info = csi_rpc_info(rpc);
	char driver[CSI_METRICS_DRIVER_MAX] = "unknown";
	const char *v[3];
	struct csi_metrics_name *n;

	if (!info)
		return;
	pthread_mutex_lock(&csi_metrics_mu);
	n = endpoint ? csi_metrics_find(endpoint) : NULL;
	if (n)
		memcpy(driver, n->driver, sizeof(driver));
	pthread_mutex_unlock(&csi_metrics_mu);
	v[0] = driver;
	v[1] = info->path;
	v[2] = csi_code_name(code);
	metrics_observe(&csi_metrics_ops, v, seconds);
}
