/*
 * Test helper: a real one-member etcd (Debian's /usr/bin/etcd) on two free
 * loopback ports, its data in a temporary directory (<base>/cse-XXXXXX,
 * base /dev/shm unless set: tests need etcd's semantics, not the disk's
 * fsync latency), its output in <dir>/etcd.log. The process and the directory are
 * recorded with the proc guard, so they go even when a test fails before
 * its cleanup. etcd_proc_stop and etcd_proc_start on the same struct
 * restart it on the same ports and data (a member that went down and came
 * back).
 */
#ifndef CSID_TEST_ETCD_PROC_H
#define CSID_TEST_ETCD_PROC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define ETCD_PROC_BIN "/usr/bin/etcd"

struct etcd_proc {
	const char *base; /* where the directory goes; NULL: /dev/shm */
	/*
	 * A test_pki directory: clients then speak TLS (https://) with its
	 * server.pem and must show a certificate of its ca.pem. NULL: plain.
	 */
	const char *pki;
	char dir[128];
	char log[160];
	char url[64]; /* client URL, "http://127.0.0.1:PORT" ("https://" with pki) */
	char peer[64];
	char name[16]; /* the member's name ("default" alone, "m0".. in a cluster) */
	char cluster[512]; /* --initial-cluster */
	pid_t pid; /* 0 when not running */
};

/* Makes the directory and picks the ports (first call), starts etcd, waits until it answers. */
int etcd_proc_start(struct etcd_proc *p);
/*
 * Starts a cluster of n members (m[0..n), each a struct as above with its
 * own directory and ports) and waits until every one is healthy. A member
 * stopped later comes back with etcd_proc_start on its struct. Returns 0
 * or -1 (then every member is stopped).
 */
int etcd_cluster_start(struct etcd_proc *m, size_t n);
/*
 * Stops (SIGSTOP) or resumes (SIGCONT) the member and waits until every
 * one of its threads is stopped, or none is. Returns 0 or -1.
 */
int etcd_proc_pause(struct etcd_proc *p, bool pause);
/* SIGKILL (or SIGTERM) and reap; a no-op when not running. */
void etcd_proc_stop(struct etcd_proc *p, int sig);
/* Stops it and removes the directory. */
void etcd_proc_cleanup(struct etcd_proc *p);
/* What a member has spent so far: CPU time and the Range and Txn calls it handled. */
struct etcd_proc_usage {
	double cpu_s; /* user + system, from /proc/<pid>/stat */
	double range, txn; /* grpc_server_handled_total of its /metrics, every code */
};

/* Reads p's usage (zeros for what cannot be read). */
void etcd_proc_usage(struct etcd_proc *p, struct etcd_proc_usage *u);
/* POSTs body to path of the gateway ("/v3/kv/compaction"); returns the HTTP status or -1. */
long etcd_proc_post(struct etcd_proc *p, const char *path, const char *body);
/* Puts key with value (raw bytes up to their NUL) through the gateway; the HTTP status or -1. */
long etcd_proc_put(struct etcd_proc *p, const char *key, const char *value);

#endif
