/*
 * Fault injection for csi-hostpath: a script of rules, one per line, that
 * tests and benchmarks write to the file given with --faults. The file is
 * re-read whenever it changes (one stat(2) per call); write it atomically
 * (write a temporary file, then rename it over the old one). Format:
 *
 *   # comment
 *   <Method|*> [nth=N] [times=K] [delay_ms=D] [code=NAME|NUMBER] [msg="text"]
 *              [hang] [crash|crash=after] [ready=true|false]
 *
 * Method is a CSI method name (NodeStageVolume, Probe, ...) or "*" for
 * every method. Calls are counted per method from the last (re)load; a
 * rule with nth=N applies to calls N .. N+K-1 (times=K, default 1, 0 =
 * every call from N on); without nth it applies to every call. Effects,
 * in order: delay_ms sleeps; hang blocks the call until the file changes
 * or the plugin stops; crash exits the process with status 137 before
 * the call runs, crash=after once it has run and its effect is committed;
 * code answers that gRPC status (e.g. ABORTED, 10) with msg instead of
 * running the call; ready=false makes Probe answer ready=false. Every
 * matching rule contributes (the longest delay, the first code).
 */
#ifndef HP_FAULTS_H
#define HP_FAULTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "csi/csi_client.h"

#define HP_FAULTS_MAX_RULES 256
#define HP_FAULTS_MAX_LINE 1024

enum hp_crash { HP_CRASH_NONE, HP_CRASH_BEFORE, HP_CRASH_AFTER };

/* What the faults say about one call. */
struct hp_fault_action {
	int64_t delay_ms;
	bool hang;
	enum hp_crash crash;
	int code; /* gRPC code to answer, 0 = none */
	char msg[CSI_STATUS_MSG_MAX];
	int ready; /* Probe: -1 not set, 0 not ready, 1 ready */
};

struct hp_faults;

/*
 * Parses a script (len bytes, need not be NUL-terminated). Returns 0 and
 * *out, or CSID_EINVAL with e naming the line and the problem.
 */
int hp_faults_parse(const char *text, size_t len, struct hp_faults **out, struct err *e);
void hp_faults_free(struct hp_faults *f);
/* Number of rules. */
int hp_faults_rules(const struct hp_faults *f);
/* Counts one call of rpc and fills act with the effects of every matching rule. */
void hp_faults_match(struct hp_faults *f, enum csi_rpc rpc, struct hp_fault_action *act);

/* A fault script file, watched for changes. Thread-safe. */
struct hp_faults_file;

/*
 * Loads path (a missing file means no faults until it appears). A file
 * that does not parse fails here; later a bad version is logged and
 * treated as empty.
 */
int hp_faults_file_new(const char *path, struct hp_faults_file **out, struct err *e);
void hp_faults_file_free(struct hp_faults_file *ff);
/* Reloads when the file changed, then hp_faults_match. */
void hp_faults_file_match(struct hp_faults_file *ff, enum csi_rpc rpc, struct hp_fault_action *act);
/* Whether the file changed since it was last loaded. */
bool hp_faults_file_changed(struct hp_faults_file *ff);

#endif
