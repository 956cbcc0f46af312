/*
 * File-system work on the plugin's own backing store (paths under
 * --data-dir only): creating volumes, copying a volume for a snapshot or a
 * clone, and removing a volume or snapshot. Functions return 0 or a
 * negative CSID_E* code with e set.
 */
#ifndef HP_FS_H
#define HP_FS_H

#include <stdint.h>

#include "util/err.h"

/* Creates a directory (mount volume) or a sparse file of size bytes (block volume). */
int hp_fs_create(const char *path, int block, int64_t size, struct err *e);
/*
 * Copies src (a directory tree or a regular file) to dst, which must not
 * exist. Files are copied sparse (only their data extents), or reflinked
 * where the file system can; directories keep modes and owners; symlinks
 * are copied as links; other special files are skipped. A file is then
 * grown to min_size when smaller (0 = keep). On failure dst is removed.
 */
int hp_fs_copy(const char *src, const char *dst, int64_t min_size, struct err *e);
/* Resizes a block volume's file (never shrinks). */
int hp_fs_grow(const char *path, int64_t size, struct err *e);
/*
 * Removes path (a file or a whole tree) without following symlinks and
 * without crossing into other mounts. A missing path is not an error.
 */
int hp_fs_remove(const char *path, struct err *e);
/* Bytes a file occupies (its size) or 0 for a directory. */
int64_t hp_fs_size(const char *path);

#endif
