/*
 * Test helper: the end of a program's log on stderr, when a test fails
 * and the log goes with its temporary directory.
 */
#ifndef CSID_TEST_LOG_TAIL_H
#define CSID_TEST_LOG_TAIL_H

/* Prints the last 4 KiB of path to stderr (nothing when it cannot be read). */
void log_tail_print(const char *path);

#endif
