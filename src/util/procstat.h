/*
 * Reading a process's /proc/PID/stat: its state and its start time, which
 * together tell a live process from a zombie and from a later process that
 * reused the PID. Used by the plugin supervisor (stale plugin processes),
 * the owner watch (claim owners), the Docker owner search and the process
 * metrics.
 */
#ifndef CSID_UTIL_PROCSTAT_H
#define CSID_UTIL_PROCSTAT_H

#include <stddef.h>
#include <stdint.h>

/*
 * Parses the len bytes of a /proc/PID/stat: *state (field 3, 'R', 'Z'...)
 * and *start (field 22, clock ticks after boot). The command name (field 2)
 * may hold spaces and parentheses: fields are counted after its last ')'.
 * Returns 0 or CSID_EINVAL.
 */
int procstat_parse(const char *text, size_t len, char *state, uint64_t *start);

/*
 * Reads and parses /proc/PID/stat (pid 0: this process). Returns 0,
 * CSID_ENOTFOUND when no such process exists (a zombie still exists:
 * callers check *state), CSID_EIO for an unparsable file, or a code from
 * errno.
 */
int procstat_read(int pid, char *state, uint64_t *start);

#endif
