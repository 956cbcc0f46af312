/*
 * Decoded volume cache (server_vcache.h): a fixed table of slots chosen
 * by a hash of the volume ID, each holding one decoded version in an
 * arena of its own; a newer version of the same slot replaces it. One
 * mutex guards the table; copies out of and into a slot are made under
 * it (a copy costs a few microseconds, a parse a hundred).
 */
#include "server/server_vcache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SERVER_VCACHE_SLOTS 256

struct server_vcache_slot {
	struct arena *a; /* NULL: empty */
	struct model_volume *v;
	uint64_t history_index; /* the history's map below is of its text at this index; 0: none */
	struct model_history_map history;
};

struct server_vcache {
	pthread_mutex_t mu;
	struct server_vcache_slot slots[SERVER_VCACHE_SLOTS];
};

struct server_vcache *server_vcache_new(void)
{
	struct server_vcache *c = calloc(1, sizeof(*c));

	if (c)
		pthread_mutex_init(&c->mu, NULL);
	return c;
}

void server_vcache_free(struct server_vcache *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < SERVER_VCACHE_SLOTS; i++)
		arena_free(c->slots[i].a);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

static size_t server_vcache_slot_of(const char *id)
{
	uint64_t h = 1469598103934665603ULL; /* FNV-1a */

	for (; *id; id++)
		h = (h ^ (unsigned char)*id) * 1099511628211ULL;
	return (size_t)(h % SERVER_VCACHE_SLOTS);
}

static bool server_vcache_holds(const struct server_vcache_slot *s, const char *id,
				uint64_t create_index, uint64_t modify_index)
{
	return s->a && s->v->modify_index == modify_index && s->v->create_index == create_index &&
	       strcmp(s->v->id, id) == 0;
}

/* Keeps a copy of v in its slot; false when out of memory (the slot as it was). */
static bool server_vcache_keep(struct server_vcache *c, size_t i, const struct model_volume *v)
{
	struct server_vcache_slot *s = &c->slots[i];
	struct arena *a = arena_new();
	struct model_volume *copy = NULL;
	struct err e;

	if (!a || model_volume_copy(a, v, &copy, &e) != 0) {
		arena_free(a);
		return false;
	}
	/* The history's map is the volume's: another volume of the slot drops it. */
	if (!s->a || strcmp(s->v->id, v->id) != 0)
		s->history_index = 0;
	arena_free(s->a);
	s->a = a;
	s->v = copy;
	return true;
}

void server_vcache_put(struct server_vcache *c, const struct model_volume *v, uint64_t modify_index,
		       const struct model_history_map *history)
{
	struct server_vcache_slot *s;
	size_t i;

	if (!c || !v->id)
		return;
	i = server_vcache_slot_of(v->id);
	s = &c->slots[i];
	pthread_mutex_lock(&c->mu);
	if ((!s->a || s->v->modify_index < modify_index || strcmp(s->v->id, v->id) != 0) &&
	    server_vcache_keep(c, i, v)) {
		/* Only the stored fields: a reader fills the API view itself. */
		memset(&s->v->status, 0, sizeof(s->v->status));
		s->v->schedulable = false;
		s->v->plugin_health = NULL;
		s->v->plugin_registered = false;
		s->v->modify_index = modify_index;
	}
	if (history && history->n > 0 && s->a && strcmp(s->v->id, v->id) == 0 &&
	    modify_index > s->history_index) {
		s->history_index = modify_index;
		s->history = *history;
	}
	pthread_mutex_unlock(&c->mu);
}

bool server_vcache_history(struct server_vcache *c, const char *id, uint64_t modify_index,
			   size_t len, struct model_history_map *map)
{
	struct server_vcache_slot *s;
	bool held;

	if (!c || modify_index == 0)
		return false;
	s = &c->slots[server_vcache_slot_of(id)];
	pthread_mutex_lock(&c->mu);
	held = s->a && s->history_index == modify_index && s->history.len == len &&
	       strcmp(s->v->id, id) == 0;
	if (held)
		*map = s->history;
	pthread_mutex_unlock(&c->mu);
	return held;
}

bool server_vcache_peek(struct server_vcache *c, const char *id, uint64_t create_index,
			uint64_t modify_index, void (*fn)(const struct model_volume *v, void *ctx),
			void *ctx)
{
	size_t i = server_vcache_slot_of(id);
	bool held;

	if (!c)
		return false;
	pthread_mutex_lock(&c->mu);
	held = server_vcache_holds(&c->slots[i], id, create_index, modify_index);
	if (held)
		fn(c->slots[i].v, ctx);
	pthread_mutex_unlock(&c->mu);
	return held;
}

int server_vcache_decode(struct server_vcache *c, const char *id, const char *json, size_t len,
			 uint64_t create_index, uint64_t modify_index, struct arena *a,
			 struct model_volume **out, struct err *e)
{
	size_t i = server_vcache_slot_of(id);
	int rc;

	if (c) {
		pthread_mutex_lock(&c->mu);
		if (server_vcache_holds(&c->slots[i], id, create_index, modify_index)) {
			rc = model_volume_copy(a, c->slots[i].v, out, e);
			pthread_mutex_unlock(&c->mu);
			return rc;
		}
		pthread_mutex_unlock(&c->mu);
	}
	rc = model_volume_decode(a, json, len, out, e);
	if (rc)
		return rc;
	(*out)->create_index = create_index;
	(*out)->modify_index = modify_index;
	/* A record that does not name id (damaged) is not kept under id. */
	if (c && strcmp((*out)->id, id) == 0) {
		pthread_mutex_lock(&c->mu);
		if (!c->slots[i].a || c->slots[i].v->modify_index < modify_index ||
		    strcmp(c->slots[i].v->id, id) != 0)
			server_vcache_keep(c, i, *out);
		pthread_mutex_unlock(&c->mu);
	}
	return 0;
}
