/*
 * The reconciler's status of volumes and snapshots (attempts, next
 * attempt, last error) on every server of a cluster. Only the leader
 * runs the reconciler, so only it knows them; it shares the statuses it
 * has (at most SERVER_STATUS_SHARED_MAX, each error cut to
 * SERVER_STATUS_ERR_MAX bytes) in its member record, and every other
 * server keeps those of the leader's last record it read, sorted by kind
 * and ID, and answers from them. A follower's status is so at most about
 * two record periods (node_ttl / 2) old; no store write is made for it.
 */
#include <stdlib.h>
#include <string.h>

#include "server/server_int.h"

static int server_status_cmp(const void *x, const void *y)
{
	const struct server_member_status *a = x, *b = y;

	if (a->kind != b->kind)
		return a->kind < b->kind ? -1 : 1;
	return strcmp(a->id, b->id);
}

int server_status_get(struct server *s, enum store_kind kind, const char *id, struct arena *a,
		      struct model_status *out)
{
	struct server_member_status key = {.kind = kind, .id = (char *)id}, *hit;
	int rc = CSID_ENOTFOUND;

	if (server_leader_leading(s->leader))
		return reconciler_status(s->rec, kind, id, a, out);
	memset(out, 0, sizeof(*out));
	if (!id)
		return rc;
	pthread_mutex_lock(&s->mu);
	hit = s->nshared ? bsearch(&key, s->shared, s->nshared, sizeof(key), server_status_cmp)
			 : NULL;
	if (hit) {
		*out = hit->st;
		out->last_error = hit->st.last_error ? arena_strdup(a, hit->st.last_error) : NULL;
		rc = hit->st.last_error && !out->last_error ? CSID_ENOMEM : 0;
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

int server_status_share(struct server *s, struct arena *a, struct server_member_status **out,
			size_t *n)
{
	struct reconciler_status_entry *x = arena_alloc(a, SERVER_STATUS_SHARED_MAX * sizeof(*x));

	*out = NULL;
	*n = 0;
	if (!x)
		return CSID_ENOMEM;
	*n = reconciler_statuses(s->rec, a, x, SERVER_STATUS_SHARED_MAX, SERVER_STATUS_ERR_MAX);
	if (*n && !(*out = arena_alloc(a, *n * sizeof(**out))))
		return CSID_ENOMEM;
	for (size_t i = 0; i < *n; i++)
		(*out)[i] = (struct server_member_status){x[i].kind, (char *)x[i].id, x[i].st};
	return 0;
}

void server_status_keep(struct server *s, const struct server_member *m, size_t n)
{
	const struct server_member *leader = NULL;
	struct server_member_status *kept = NULL;
	struct arena *a = arena_new();
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		if (m[i].leader)
			leader = &m[i];
	if (!a)
		return;
	if (leader && leader->nstatus &&
	    !(kept = arena_alloc(a, leader->nstatus * sizeof(*kept)))) {
		arena_free(a);
		return;
	}
	for (size_t i = 0; leader && i < leader->nstatus; i++) {
		const struct server_member_status *x = &leader->status[i];

		kept[k] = *x;
		kept[k].id = arena_strdup(a, x->id);
		kept[k].st.last_error = x->st.last_error ? arena_strdup(a, x->st.last_error) : NULL;
		if (kept[k].id && (!x->st.last_error || kept[k].st.last_error))
			k++;
	}
	if (k)
		qsort(kept, k, sizeof(*kept), server_status_cmp);
	pthread_mutex_lock(&s->mu);
	arena_free(s->shared_arena);
	s->shared_arena = a;
	s->shared = kept;
	s->nshared = k;
	pthread_mutex_unlock(&s->mu);
}
