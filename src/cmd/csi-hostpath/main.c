/*
 * csi-hostpath: csid's own CSI plugin. Parses the command line, creates
 * the plugin (hostpath.h) and serves it with the CSI server glue on one
 * unix socket until SIGTERM or SIGINT, then stops cleanly: hung calls are
 * released, calls in flight get a grace period, the socket is removed.
 */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "csi/csi_server.h"
#include "hostpath.h"
#include "util/log.h"

static const char hp_usage[] =
    "usage: csi-hostpath [options]\n"
    "\n"
    "A CSI plugin (Identity, Controller, GroupController, Node on one unix socket)\n"
    "whose volumes are directories (or sparse files, for block volumes) under\n"
    "--data-dir.\n"
    "\n"
    "  --endpoint EP          unix socket to serve (default: $CSI_ENDPOINT)\n"
    "  --data-dir DIR         volumes, snapshots and state (required)\n"
    "  --node-id ID           this node's ID (default: the host name)\n"
    "  --mode MODE            controller, node or monolith (default monolith)\n"
    "  --no-controller-publish  do not offer PUBLISH_UNPUBLISH_VOLUME\n"
    "  --enable-alpha         also serve what CSI v1.12 marks alpha: ControllerGetVolume,\n"
    "                         GetSnapshot, the VOLUME_CONDITION, GET_VOLUME, GET_SNAPSHOT\n"
    "                         and SINGLE_NODE_MULTI_WRITER capabilities, volume conditions\n"
    "  --require-stage-secret KEY  refuse NodeStageVolume (INVALID_ARGUMENT) unless its\n"
    "                         secrets hold KEY (to check a CO passes a volume's secrets)\n"
    "  --max-volumes-per-node N  reported by NodeGetInfo, enforced by ControllerPublishVolume\n"
    "                         (0 = no limit)\n"
    "  --capacity BYTES       total capacity for volumes and snapshots (default 100G;\n"
    "                         suffixes K, M, G, T)\n"
    "  --name NAME            plugin name (default " HP_DEFAULT_NAME ")\n"
    "  --threads N            server worker threads, 1..16 (default 2)\n"
    "  --faults FILE          fault script, re-read when it changes (format below)\n"
    "  --log-level LEVEL      debug, info, warn or error (default info)\n"
    "  --version, --help\n"
    "\n"
    "Topology: NodeGetInfo reports the segment " HP_TOPOLOGY_KEY "=<node id>.\n"
    "Node IDs accepted by ControllerPublishVolume: --node-id and the node IDs of\n"
    "every node or monolith csi-hostpath that shares this --data-dir.\n"
    "\n"
    "Fault script (one rule per line, # comments; write it atomically):\n"
    "  <Method|*> [nth=N] [times=K] [delay_ms=D] [code=NAME|NUM] [msg=\"text\"]\n"
    "             [hang] [crash|crash=after] [ready=true|false]\n"
    "  Calls are counted per method since the script was loaded; nth=N applies the\n"
    "  rule to calls N..N+K-1 (times, default 1, 0 = all from N), no nth to every\n"
    "  call. delay_ms sleeps, hang blocks until the script changes, crash exits\n"
    "  with status 137 before the call (crash=after: once it took effect), code\n"
    "  answers that gRPC status, ready=false makes Probe report not ready.\n"
    "  Examples:\n"
    "    NodeStageVolume nth=2 code=ABORTED msg=\"busy\"\n"
    "    CreateVolume delay_ms=2000\n"
    "    NodePublishVolume hang\n"
    "    DeleteVolume nth=3 crash\n"
    "    Probe ready=false\n";

enum {
	HP_OPT_ENDPOINT = 256,
	HP_OPT_DATA_DIR,
	HP_OPT_NODE_ID,
	HP_OPT_MODE,
	HP_OPT_NO_PUBLISH,
	HP_OPT_ENABLE_ALPHA,
	HP_OPT_REQUIRE_SECRET,
	HP_OPT_MAX_VOLUMES,
	HP_OPT_CAPACITY,
	HP_OPT_NAME,
	HP_OPT_THREADS,
	HP_OPT_FAULTS,
	HP_OPT_LOG_LEVEL,
	HP_OPT_VERSION,
	HP_OPT_HELP,
};

static const struct option hp_options[] = {
    {"endpoint", required_argument, NULL, HP_OPT_ENDPOINT},
    {"data-dir", required_argument, NULL, HP_OPT_DATA_DIR},
    {"node-id", required_argument, NULL, HP_OPT_NODE_ID},
    {"mode", required_argument, NULL, HP_OPT_MODE},
    {"no-controller-publish", no_argument, NULL, HP_OPT_NO_PUBLISH},
    {"enable-alpha", no_argument, NULL, HP_OPT_ENABLE_ALPHA},
    {"require-stage-secret", required_argument, NULL, HP_OPT_REQUIRE_SECRET},
    {"max-volumes-per-node", required_argument, NULL, HP_OPT_MAX_VOLUMES},
    {"capacity", required_argument, NULL, HP_OPT_CAPACITY},
    {"name", required_argument, NULL, HP_OPT_NAME},
    {"threads", required_argument, NULL, HP_OPT_THREADS},
    {"faults", required_argument, NULL, HP_OPT_FAULTS},
    {"log-level", required_argument, NULL, HP_OPT_LOG_LEVEL},
    {"version", no_argument, NULL, HP_OPT_VERSION},
    {"help", no_argument, NULL, HP_OPT_HELP},
    {NULL, 0, NULL, 0},
};

/* Parses a byte count with an optional K/M/G/T suffix (powers of 1024); -1 if bad. */
static long long hp_main_bytes(const char *s)
{
	char *end;
	long long n;
	int shift = 0;

	errno = 0;
	n = strtoll(s, &end, 10);
	if (errno || end == s || n < 0)
		return -1;
	switch (*end) {
	case 'K':
	case 'k':
		shift = 10;
		end++;
		break;
	case 'M':
	case 'm':
		shift = 20;
		end++;
		break;
	case 'G':
	case 'g':
		shift = 30;
		end++;
		break;
	case 'T':
	case 't':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (*end == 'i' || *end == 'B')
		end++;
	if (*end || n > (1LL << (62 - shift)))
		return -1;
	return n << shift;
}

static int hp_main_int(const char *s, long long min, long long max, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return errno || end == s || *end || *out < min || *out > max ? -1 : 0;
}

static int hp_main_bad(const char *opt, const char *val)
{
	fprintf(stderr, "csi-hostpath: invalid %s: %s\n", opt, val);
	return 2;
}

int main(int argc, char **argv)
{
	struct hp_config cfg = {
	    .mode = HP_MODE_MONOLITH, .controller_publish = true, .capacity = HP_DEFAULT_CAPACITY};
	const char *endpoint = getenv("CSI_ENDPOINT");
	char host[256] = "localhost";
	struct csi_server *srv = NULL;
	struct hp_plugin *p = NULL;
	long long threads = 2, n;
	sigset_t sigs;
	struct err e;
	int opt, sig, rc = 1;

	cfg.log_requests = log_level_parse(getenv("CSID_LOG_LEVEL")) == LOG_DEBUG;
	while ((opt = getopt_long(argc, argv, "h", hp_options, NULL)) != -1) {
		switch (opt) {
		case HP_OPT_ENDPOINT:
			endpoint = optarg;
			break;
		case HP_OPT_DATA_DIR:
			cfg.data_dir = optarg;
			break;
		case HP_OPT_NODE_ID:
			cfg.node_id = optarg;
			break;
		case HP_OPT_NAME:
			cfg.name = optarg;
			break;
		case HP_OPT_FAULTS:
			cfg.faults_path = optarg;
			break;
		case HP_OPT_NO_PUBLISH:
			cfg.controller_publish = false;
			break;
		case HP_OPT_ENABLE_ALPHA:
			cfg.enable_alpha = true;
			break;
		case HP_OPT_REQUIRE_SECRET:
			if (!optarg[0] || strlen(optarg) > 128)
				return hp_main_bad("--require-stage-secret", optarg);
			cfg.require_stage_secret = optarg;
			break;
		case HP_OPT_MODE:
			if (strcmp(optarg, "controller") == 0)
				cfg.mode = HP_MODE_CONTROLLER;
			else if (strcmp(optarg, "node") == 0)
				cfg.mode = HP_MODE_NODE;
			else if (strcmp(optarg, "monolith") == 0)
				cfg.mode = HP_MODE_MONOLITH;
			else
				return hp_main_bad("--mode", optarg);
			break;
		case HP_OPT_MAX_VOLUMES:
			if (hp_main_int(optarg, 0, 1000000, &n))
				return hp_main_bad("--max-volumes-per-node", optarg);
			cfg.max_volumes_per_node = n;
			break;
		case HP_OPT_CAPACITY:
			cfg.capacity = hp_main_bytes(optarg);
			if (cfg.capacity <= 0)
				return hp_main_bad("--capacity", optarg);
			break;
		case HP_OPT_THREADS:
			if (hp_main_int(optarg, 1, 16, &threads))
				return hp_main_bad("--threads", optarg);
			break;
		case HP_OPT_LOG_LEVEL:
			if (log_level_parse(optarg) < 0)
				return hp_main_bad("--log-level", optarg);
			log_set_level((enum log_level)log_level_parse(optarg));
			cfg.log_requests = log_level_parse(optarg) == LOG_DEBUG;
			break;
		case HP_OPT_VERSION:
			printf("csi-hostpath %s (CSI v1.12.0)\n", CSID_VERSION);
			return 0;
		case HP_OPT_HELP:
		case 'h':
			fputs(hp_usage, stdout);
			return 0;
		default:
			fputs(hp_usage, stderr);
			return 2;
		}
	}
	if (optind < argc)
		return hp_main_bad("argument", argv[optind]);
	if (!endpoint || !*endpoint) {
		fprintf(stderr, "csi-hostpath: no endpoint: set --endpoint or CSI_ENDPOINT\n");
		return 2;
	}
	if (!cfg.data_dir) {
		fprintf(stderr, "csi-hostpath: --data-dir is required\n");
		return 2;
	}
	if (!cfg.node_id) {
		gethostname(host, sizeof(host) - 1);
		cfg.node_id = host;
	}
	/* Few malloc arenas keep the peak RSS low with several worker threads. */
	mallopt(M_ARENA_MAX, 2);
	/* Block the stop signals before any thread starts, and wait for them below. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (hp_new(&cfg, &p, &e) != 0 ||
	    csi_server_new(endpoint, (int)threads, hp_handle, p, &srv, &e) != 0 ||
	    csi_server_start(srv, &e) != 0) {
		char q[600];

		log_error("msg=\"cannot start\" error=%s", log_q(q, sizeof(q), e.msg));
		goto done;
	}
	log_info("msg=\"serving\" endpoint=%s node=%s mode=%s controller_publish=%d alpha=%d"
		 " threads=%lld",
		 endpoint, p->node_id,
		 cfg.mode == HP_MODE_NODE         ? "node"
		 : cfg.mode == HP_MODE_CONTROLLER ? "controller"
						  : "monolith",
		 cfg.controller_publish, cfg.enable_alpha, threads);
	if (sigwait(&sigs, &sig) == 0)
		log_info("msg=\"stopping\" signal=%d", sig);
	hp_shutdown(p);
	csi_server_stop(srv, 2000);
	rc = 0;
done:
	csi_server_free(srv);
	hp_free(p);
	csi_grpc_shutdown();
	return rc;
}
