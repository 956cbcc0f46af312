/*
 * Operator endpoints: GET /v1/operator/snapshot answers a snapshot of the
 * catalogue (server_backup.h) with its index in X-Csid-Index; POST
 * /v1/operator/snapshot writes one restore batch and answers
 * {"restored": n}. Both need a write token when tokens are configured
 * (a snapshot holds secrets); the answer text is wiped once sent.
 */
#include "api/server_api_int.h"

#include <string.h>

#include "server/server.h"
#include "server/server_backup.h"

int server_api_operator(struct server_api *api, const struct http_request *req,
			struct http_reply *rep, struct err *e)
{
	uint64_t index = 0;
	size_t len = 0, n = 0;
	int rc;

	if (strcmp(req->url, "/v1/operator/snapshot") != 0)
		return err_set(e, CSID_ENOTFOUND, "no such endpoint: %.200s", req->url);
	if (strcmp(req->method, "GET") == 0) {
		rc = server_backup_save(api->store, &rep->text, &len, &index, e);
		if (rc)
			return rc;
		rep->wipe = true;
		server_api_set_index(rep, index);
		return 0;
	}
	if (strcmp(req->method, "POST") == 0) {
		rc = server_backup_restore(api->store, req->body, req->len, &n, e);
		if (rc)
			return rc;
		rep->doc = json_pack("{s:I}", "restored", (json_int_t)n);
		server_api_set_index(rep, store_index(api->store));
		return rep->doc ? 0 : err_set(e, CSID_ENOMEM, "out of memory");
	}
	rep->allow = "GET, POST";
	return HTTP_METHOD_NOT_ALLOWED;
}
