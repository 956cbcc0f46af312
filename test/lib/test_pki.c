/*
 * Test PKI with openssl (see test_pki.h): openssl spawned without a shell,
 * its output dropped.
 */
#include "test_pki.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Runs openssl with args (NULL-terminated, without argv[0]), its output dropped; 0 when it
 * succeeded. */
static int openssl(const char *const *args)
{
	char *argv[32] = {"openssl"};
	posix_spawn_file_actions_t fa;
	int status = -1, i;
	pid_t pid;

	for (i = 0; args[i] && i < 30; i++)
		argv[i + 1] = (char *)args[i];
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	if (posix_spawnp(&pid, "openssl", &fa, NULL, argv, environ) == 0)
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
	posix_spawn_file_actions_destroy(&fa);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "openssl %s failed\n", args[0]);
		return -1;
	}
	return 0;
}

/* <dir>/<name><suffix> into buf. */
static const char *pki_path(char *buf, size_t cap, const char *dir, const char *name,
			    const char *suffix)
{
	snprintf(buf, cap, "%s/%s%s", dir, name, suffix);
	return buf;
}

/* A self-signed CA <name>.pem/<name>.key. */
static int make_ca(const char *dir, const char *name)
{
	char key[300], pem[300], subj[64];

	snprintf(subj, sizeof(subj), "/CN=csid-test-%s", name);
	return openssl((const char *const[]){
	    "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
	    "-keyout", pki_path(key, sizeof(key), dir, name, ".key"), "-out",
	    pki_path(pem, sizeof(pem), dir, name, ".pem"), "-days", "2", "-subj", subj, NULL});
}

/* A key and a certificate <name>.pem/<name>.key signed by ca, valid days (negative: expired). */
static int make_cert(const char *dir, const char *name, const char *ca, int days, const char *ext)
{
	char key[300], pem[300], csr[300], extf[300], cap[300], cak[300], srl[300], subj[64], d[16];
	FILE *f = fopen(pki_path(extf, sizeof(extf), dir, name, ".ext"), "w");

	if (!f)
		return -1;
	fprintf(f, "%s\n", ext);
	fclose(f);
	snprintf(subj, sizeof(subj), "/CN=%s", name);
	snprintf(d, sizeof(d), "%d", days);
	if (openssl((const char *const[]){
		"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
		"-keyout", pki_path(key, sizeof(key), dir, name, ".key"), "-out",
		pki_path(csr, sizeof(csr), dir, name, ".csr"), "-subj", subj, NULL}) != 0)
		return -1;
	return openssl((const char *const[]){
	    "x509", "-req", "-in", csr, "-CA", pki_path(cap, sizeof(cap), dir, ca, ".pem"),
	    "-CAkey", pki_path(cak, sizeof(cak), dir, ca, ".key"), "-CAserial",
	    pki_path(srl, sizeof(srl), dir, ca, ".srl"), "-CAcreateserial", "-out",
	    pki_path(pem, sizeof(pem), dir, name, ".pem"), "-days", d, "-extfile", extf, NULL});
}

int test_pki_make(const char *dir)
{
	if (mkdir(dir, 0700) != 0 || make_ca(dir, "ca") || make_ca(dir, "other"))
		return -1;
	if (make_cert(dir, "server", "ca", 2, "subjectAltName=IP:127.0.0.1") ||
	    make_cert(dir, "client", "ca", 2, "extendedKeyUsage=clientAuth") ||
	    make_cert(dir, "expired", "ca", -1, "extendedKeyUsage=clientAuth") ||
	    make_cert(dir, "stranger", "other", 2, "extendedKeyUsage=clientAuth"))
		return -1;
	return 0;
}
