/*
 * The change log kept in memory, shared by the memory and SQLite backends
 * (not for callers of the store): the changes in index order in an array
 * used as a queue, trimmed in batches to STORE_CHANGES_KEEP at index
 * boundaries. Values are immutable and reference-counted (struct
 * store_val), so a backend that holds the same value elsewhere (the memory
 * store's objects) shares it instead of copying it.
 *
 * The log is only what this process wrote since it opened the store: it
 * starts empty at the store's index then (store_log_init), and reading
 * from before that gives CSID_ERANGE, as after a trim.
 *
 * Not thread-safe: the backend holds its own lock around every call.
 */
#ifndef CSID_STORE_STORE_LOG_H
#define CSID_STORE_STORE_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* An immutable value shared by reference count; data is NUL-terminated. */
struct store_val {
	size_t refs;
	size_t len;
	char data[];
};

/* A new value (one reference) with a copy of value[0..len); NULL: out of memory. */
struct store_val *store_val_new(const char *value, size_t len);
/* Drops one reference; NULL is a no-op. */
void store_val_put(struct store_val *v);

/* One change as the log keeps it. */
struct store_log_change {
	uint64_t index;
	uint64_t create_index;
	enum store_op_type type;
	enum store_kind kind;
	char *id; /* owned */
	struct store_val *val; /* a reference; NULL for a DELETE */
};

struct store_log {
	struct store_log_change *log;
	size_t cap, head, n;
	uint64_t compacted; /* the highest index whose changes may be gone */
	uint64_t index; /* the index of the last change appended, or the start */
};

/* An empty log that starts after index (older changes give CSID_ERANGE). */
void store_log_init(struct store_log *l, uint64_t index);
/* Frees every change; l is then empty and must be initialised again. */
void store_log_fini(struct store_log *l);

/* Makes room for n more changes; 0 or CSID_ENOMEM. */
int store_log_reserve(struct store_log *l, size_t n);

/*
 * Appends one change of transaction index (not below the last one) into
 * room store_log_reserve made; cannot fail. Takes id (malloc'd) and the
 * reference val.
 */
void store_log_append(struct store_log *l, uint64_t index, enum store_op_type type,
		      enum store_kind kind, char *id, struct store_val *val, uint64_t create_index);

/*
 * Ends the appends of one transaction: records index as the log's
 * (also when the transaction recorded nothing new), and drops the oldest
 * whole transactions beyond STORE_CHANGES_KEEP once there are a batch
 * more.
 */
void store_log_commit(struct store_log *l, uint64_t index);

/*
 * store_changes from the log: the changes after `after`, at most limit
 * (0: all) but never ending a page inside a transaction, with copies of
 * their values when values is true (else value NULL and len 0). Returns
 * 0, CSID_ERANGE (compacted) or CSID_ENOMEM; out->index is l->index.
 */
int store_log_read(const struct store_log *l, uint64_t after, size_t limit, bool values,
		   struct store_changes *out, struct err *e);

#endif
