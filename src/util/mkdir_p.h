/*
 * Creating a directory and its missing parents, for the node's data
 * directories (the mounter's, the plugin supervisor's).
 */
#ifndef CSID_UTIL_MKDIR_P_H
#define CSID_UTIL_MKDIR_P_H

#include "util/err.h"

/*
 * Creates dir and every missing parent with mode 0750 (the agent and the
 * plugin, both root, are the only users). Returns 0 or a code from errno
 * with e set. An existing directory is fine; an existing non-directory is
 * not (CSID_EEXIST).
 */
int mkdir_p(const char *dir, struct err *e);

#endif
