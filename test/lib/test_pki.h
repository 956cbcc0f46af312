/*
 * Test helper: a small PKI made with `openssl` at test time, in an
 * existing parent's new directory dir: ca.pem/ca.key and other.pem/
 * other.key (two CAs), server.pem/.key for IP 127.0.0.1, client.pem/.key
 * and expired.pem/.key (clientAuth, signed by ca; expired a day ago), and
 * stranger.pem/.key (signed by other).
 */
#ifndef CSID_TEST_PKI_H
#define CSID_TEST_PKI_H

/* Makes the directory and the files. Returns 0 or -1 (a message on stderr). */
int test_pki_make(const char *dir);

#endif
