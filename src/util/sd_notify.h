/*
 * Service readiness for systemd (Type=notify units): the sd_notify(3)
 * protocol written out, without libsystemd. systemd passes the address of
 * a datagram socket in $NOTIFY_SOCKET (a path, or "@name" for the
 * abstract namespace); a service sends it newline-separated VAR=value
 * lines such as "READY=1" or "STOPPING=1", one datagram per message.
 *
 * Why our own: the protocol is one sendto(2) on a documented, stable
 * socket; linking libsystemd would add it and its compression and crypto
 * libraries to every program for that, and the programs also run where
 * there is no systemd (csid dev, containers, the tests).
 */
#ifndef CSID_UTIL_SD_NOTIFY_H
#define CSID_UTIL_SD_NOTIFY_H

#include "util/err.h"

/*
 * Sends state (e.g. "READY=1\nSTATUS=serving") to $NOTIFY_SOCKET. Returns
 * 0 when it was sent or when $NOTIFY_SOCKET is unset or empty (not under
 * systemd), else a negative CSID_E* code with e set. Thread-safe.
 */
int sd_notify_send(const char *state, struct err *e);

/* sd_notify_send, logging a warning when it fails: for the programs. */
void sd_notify_state(const char *state);

#endif
