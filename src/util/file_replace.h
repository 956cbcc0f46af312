/*
 * Writing a small file so that a reader (or the next start after a crash)
 * sees either the old content or the whole new one: the text goes to
 * "<path>.tmp", is synced, and is renamed over path.
 */
#ifndef CSID_UTIL_FILE_REPLACE_H
#define CSID_UTIL_FILE_REPLACE_H

#include <sys/types.h>

#include "util/err.h"

/*
 * Replaces path's content with text (mode for a new file). Returns 0 or a
 * code from errno with e naming the file; the temporary file is removed
 * on failure.
 */
int file_replace(const char *path, const char *text, mode_t mode, struct err *e);

#endif
