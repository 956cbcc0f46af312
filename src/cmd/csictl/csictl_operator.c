/*
 * `csictl operator snapshot save FILE` and `csictl operator snapshot
 * restore FILE`: a consistent copy of a csid server's catalogue at one
 * index (GET /v1/operator/snapshot), written to FILE with mode 0600 (it
 * holds the secrets volumes were created with) through a temporary file
 * and a rename; and that copy loaded into a server whose store is empty
 * (POST /v1/operator/snapshot, in batches the server takes as one
 * transaction each). Saving from a SQLite server and restoring into an
 * etcd one moves an installation to etcd.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "csictl_csi.h"
#include "csictl_server.h"
#include "server/server_backup.h"

/* The largest snapshot read or written. */
#define OPERATOR_SNAPSHOT_MAX (1024u << 20)

/* Writes data to path through path.tmp (0600), fsync and rename. */
static int operator_write_file(const char *path, const char *data, size_t len, FILE *err)
{
	char tmp[4200];
	int fd;
	size_t off = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
		fprintf(err, "error: %s: path too long\n", path);
		return CSICTL_EXIT_USAGE;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		goto fail;
	while (off < len) {
		ssize_t w = write(fd, data + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto fail;
		off += (size_t)w;
	}
	if (fsync(fd) != 0 || close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto fail;
	return CSICTL_EXIT_OK;
fail:
	fprintf(err, "error: write %s: %s\n", path, strerror(errno));
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return CSICTL_EXIT_FAIL;
}

static int operator_save(struct csictl_server *s, const char *path)
{
	struct csictl_http_answer ans;
	json_t *doc;
	int ret;

	s->http.body_max = OPERATOR_SNAPSHOT_MAX;
	ret = csictl_http_do(&s->http, "GET", "/v1/operator/snapshot", NULL, &ans);
	if (ret)
		return ret;
	if (ans.status != 200) {
		char msg[1200];

		fprintf(s->err, "error: %s\n",
			csictl_http_error_text(ans.status, ans.data, ans.len, msg, sizeof(msg)));
		csictl_http_answer_free(&ans);
		return CSICTL_EXIT_FAIL;
	}
	doc = json_loadb(ans.data, ans.len, 0, NULL);
	ret = doc ? operator_write_file(path, ans.data, ans.len, s->err) : CSICTL_EXIT_FAIL;
	if (!doc)
		fprintf(s->err, "error: the server's snapshot is not valid JSON\n");
	if (!ret)
		fprintf(s->out, "saved %zu objects at index %s to %s\n",
			json_array_size(json_object_get(doc, "objects")), ans.index, path);
	json_decref(doc);
	explicit_bzero(ans.data, ans.len);
	csictl_http_answer_free(&ans);
	return ret;
}

/* Sends one batch of objs; adds the count written to *done. */
static int operator_send(struct csictl_server *s, json_t *objs, bool first, size_t *done)
{
	json_t *req = json_pack("{s:s, s:i, s:b, s:O}", "format", SERVER_BACKUP_FORMAT, "version",
				SERVER_BACKUP_VERSION, "first", first, "objects", objs);
	char *body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_t *ans = NULL;
	int ret;

	json_decref(req);
	if (!body) {
		fprintf(s->err, "error: out of memory\n");
		return CSICTL_EXIT_FAIL;
	}
	ret = csictl_http_json(&s->http, "POST", "/v1/operator/snapshot", body, &ans);
	explicit_bzero(body, strlen(body));
	free(body);
	if (!ret)
		*done += (size_t)json_integer_value(json_object_get(ans, "restored"));
	json_decref(ans);
	return ret;
}

static int operator_restore(struct csictl_server *s, const char *path)
{
	json_error_t jerr;
	json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr), *objs, *batch, *o;
	const char *format = json_string_value(json_object_get(doc, "format"));
	size_t i, bytes = 0, done = 0;
	bool first = true;
	int ret = 0;

	if (!doc) {
		fprintf(s->err, "error: %s: line %d: %s\n", path, jerr.line, jerr.text);
		return CSICTL_EXIT_FAIL;
	}
	objs = json_object_get(doc, "objects");
	if (!format || strcmp(format, SERVER_BACKUP_FORMAT) != 0 || !json_is_array(objs)) {
		fprintf(s->err, "error: %s: not a csid snapshot\n", path);
		json_decref(doc);
		return CSICTL_EXIT_FAIL;
	}
	batch = json_array();
	json_array_foreach(objs, i, o)
	{
		char *t = json_dumps(o, JSON_COMPACT);
		size_t len = t ? strlen(t) : 0;

		if (t)
			explicit_bzero(t, len);
		free(t);
		if (json_array_size(batch) > 0 &&
		    (json_array_size(batch) == SERVER_BACKUP_BATCH_OPS ||
		     bytes + len > SERVER_BACKUP_BATCH_MAX)) {
			if ((ret = operator_send(s, batch, first, &done)))
				break;
			first = false;
			json_array_clear(batch);
			bytes = 0;
		}
		json_array_append(batch, o);
		bytes += len + 1;
	}
	if (!ret && (json_array_size(batch) > 0 || first))
		ret = operator_send(s, batch, first, &done);
	if (ret)
		fprintf(s->err, "error: restore stopped after %zu of %zu objects\n", done,
			json_array_size(objs));
	else
		fprintf(s->out, "restored %zu objects from %s\n", done, path);
	json_decref(batch);
	json_decref(doc);
	return ret;
}

int csictl_operator_main(int argc, char **argv, FILE *out, FILE *err)
{
	struct csictl_server_opts o;
	struct csictl_server s;
	int ret;

	ret = csictl_server_init_plain(&s, &o, argc, argv, "operator", out, err);
	if (ret)
		return ret < 0 ? 0 : ret;
	if (s.args.n != 3 || strcmp(s.args.v[0], "snapshot") != 0 ||
	    (strcmp(s.args.v[1], "save") != 0 && strcmp(s.args.v[1], "restore") != 0))
		return csictl_server_usage(&s, "usage: csictl operator snapshot save|restore FILE");
	if (strcmp(s.args.v[1], "save") == 0)
		return operator_save(&s, s.args.v[2]);
	return operator_restore(&s, s.args.v[2]);
}
