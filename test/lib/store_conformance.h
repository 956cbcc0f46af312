/*
 * The store conformance suite (store_conformance.c): the contract of
 * src/store/store.h as cmocka tests, run against each backend by a small
 * test program per backend (test/unit/test_store.c for memory,
 * test_store_sqlite.c, test/integration/test_store_etcd.c), so no backend
 * can drift from the others.
 */
#ifndef CSID_TEST_STORE_CONFORMANCE_H
#define CSID_TEST_STORE_CONFORMANCE_H

#include <stddef.h>

#include "store/store.h"

struct store_conformance {
	const char *name; /* "memory", "sqlite", "etcd" */
	/*
	 * Opens a fresh, empty store for one test; *ctx is the backend's, for
	 * close. Returns 0 or a code with e set.
	 */
	int (*open)(void *arg, struct store **out, void **ctx, struct err *e);
	/* Removes what open made (called after store_close). */
	void (*close)(void *arg, void *ctx);
	void *arg;
	size_t value_max; /* the largest value the backend takes */
};

/* Runs every contract test against backend; returns the number that failed. */
int store_conformance_run(const struct store_conformance *backend);

#endif
