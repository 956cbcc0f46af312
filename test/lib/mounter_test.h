/*
 * Shared fixture of the mounter tests: a temporary directory with a data
 * dir, an agent database and the fake plugin's state file; a mounter
 * opened on them with the fake client and table; a standard request and
 * the standard sequence of operations (mount A, mount B, unmount A,
 * unmount B of one volume); and the consistency checks every test runs.
 * Uses cmocka assertions.
 */
#ifndef CSID_TEST_MOUNTER_TEST_H
#define CSID_TEST_MOUNTER_TEST_H

#include <limits.h>
#include <stdbool.h>

#include "agent/mounter.h"
#include "mounter_fake.h"

#define MT_TIMEOUT_MS 1234
#define MT_PLUGIN "fake.csi"
#define MT_SECRET "s3cr3t-value"
#define MT_FLAG "nodev,key=flag-s3cr3t"

struct mt_env {
	char dir[256];
	char data[300];
	char real_data[PATH_MAX];
	char db[300];
	char fake_state[300];
	struct mounter_fake fake;
	struct mounter *m;
	struct mounter_plugin plugin;
};

/* Creates a fresh temporary directory and opens everything on it. */
void mt_env_open(struct mt_env *env, bool stage);
/* Opens everything on an existing directory (for a crash child or a restart). */
void mt_env_attach(struct mt_env *env, const char *dir, bool stage);
/* Closes the mounter and removes the directory. */
void mt_env_close(struct mt_env *env);
/* Closes the mounter and opens it again on the same files (a restart). */
void mt_reopen(struct mt_env *env);

/*
 * cmocka setup/teardown for tests that open envs themselves: every env
 * opened meanwhile lives under one scratch directory, removed by the
 * teardown even when the test failed half-way.
 */
int mt_scratch_setup(void **state);
int mt_scratch_teardown(void **state);
/* The current scratch directory ("" when none is set up). */
const char *mt_scratch_dir(void);

/* cmocka setup/teardown around a staging env in *state. */
int mt_setup(void **state);
int mt_teardown(void **state);

/* A request of vol for alloc: rw file-system single-node-multi-writer, with
 * fs type, a mount flag, contexts and a secret. Points to static data. */
void mt_request(struct mounter_request *req, const char *vol, const char *alloc);

struct mt_op {
	bool mount;
	const char *vol;
	const char *alloc;
	bool claimed; /* a mount of the claim flow (mounter_request.claimed) */
};
#define MT_OPS 4
#define MT_RPCS_STAGED 6 /* RPCs of the sequence with STAGE_UNSTAGE */
#define MT_RPCS_PLAIN 4 /* ... and without */
extern const struct mt_op mt_ops[MT_OPS];
/* Runs op i of the standard sequence; returns the mounter's code. */
int mt_run_op(struct mt_env *env, int i, struct err *e);

/* Writes op to the progress file path (a crash child notes where it is); 0 or -1. */
int mt_progress_write(const char *path, int op);
/* Reads the op a crashed child was in (asserts it is one of the sequence). */
int mt_progress_read(const char *path);

/* mounter_lookup_fn giving env's plugin (ctx is the env). */
int mt_lookup(void *ctx, const char *plugin_id, struct mounter_plugin *out, struct err *e);

/*
 * Asserts consistency between the records and the fake node: every
 * target or stage the plugin holds belongs to a record, every published
 * record is mounted (and staged when it has a staging path), no protocol
 * violation was counted. stable: every record must also be published.
 */
void mt_check(struct mt_env *env, bool stable);
/* Asserts there is no record and nothing staged or published. */
void mt_check_empty(struct mt_env *env);
/* Asserts the database files contain neither the secret nor the mount flag. */
void mt_assert_no_secret_in_db(struct mt_env *env);
/* Removes a directory tree (not following symlinks); missing is fine. */
void mt_rm_rf(const char *dir);

#endif
