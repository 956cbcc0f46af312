/*
 * Test and benchmark helper: what /proc tells about another process (its
 * memory, its CPU time), for the tests and benchmarks that bound them.
 */
#ifndef CSID_TEST_PROC_STAT_H
#define CSID_TEST_PROC_STAT_H

#include <sys/types.h>

/* A number field of /proc/<pid>/status ("VmRSS:", "VmHWM:", "Threads:"); -1 when absent. */
long proc_stat_status(pid_t pid, const char *field);
/* User + system CPU time of the process, in seconds (/proc/<pid>/stat); -1 when unknown. */
double proc_stat_cpu_s(pid_t pid);

#endif
