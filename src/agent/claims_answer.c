/*
 * Decoding of a servers' volume answer for a mount (claims_answer.h),
 * member by member with the pull reader. A member of a kind the mount
 * cannot use is an error naming the member; null counts as absent.
 */
#include "agent/claims_answer.h"

#include <stdlib.h>
#include <string.h>

/* Longest key worth matching (longer ones are skipped). */
#define CA_KEY_MAX 32

struct ca {
	struct jsonr r;
	struct claims_answer *ans;
	const char *node;
	const char *where; /* the member being read (static text) */
};

/* Whether the next value is null (then taken): the member counts as absent. */
static bool ca_null(struct ca *x)
{
	return jsonr_peek(&x->r) == JSONR_NULL && jsonr_literal(&x->r) == 0;
}

static int ca_str(struct ca *x, const char **out)
{
	return claims_stage_str(&x->r, x->ans->a, out);
}

static int ca_int(struct ca *x, int64_t *out)
{
	*out = 0;
	if (ca_null(x))
		return 0;
	if (jsonr_peek(&x->r) != JSONR_NUMBER || jsonr_int(&x->r, out) != 0)
		return jsonr_fail(&x->r, "expected an integer");
	return 0;
}

static int ca_bool(struct ca *x, bool *out)
{
	*out = false;
	if (ca_null(x))
		return 0;
	if (jsonr_peek(&x->r) != JSONR_BOOL)
		return jsonr_fail(&x->r, "expected true or false");
	return jsonr_bool(&x->r, out);
}

/* Opens the object at the next value; 1 when opened, 0 for null (absent), -1. */
static int ca_open(struct ca *x, enum jsonr_kind kind)
{
	enum jsonr_kind k = jsonr_peek(&x->r);

	if (k == JSONR_NULL)
		return jsonr_literal(&x->r) ? -1 : 0;
	if (k != kind)
		return jsonr_fail(&x->r, kind == JSONR_OBJECT ? "expected an object"
							      : "expected an array");
	return jsonr_open(&x->r) ? -1 : 1;
}

/* The next key of the open object into key (""-filled when too long); 1, 0 at its end, -1. */
static int ca_key(struct ca *x, size_t *seen, char key[CA_KEY_MAX])
{
	size_t klen;
	int rc = jsonr_key(&x->r, seen, key, CA_KEY_MAX, &klen);

	if (rc == 1 && klen >= CA_KEY_MAX)
		key[0] = '\0';
	return rc;
}

/* mount_options: only fs_type. */
static int ca_mount_options(struct ca *x)
{
	char key[CA_KEY_MAX];
	size_t seen = 0;
	int rc = ca_open(x, JSONR_OBJECT);

	while (rc == 1 && (rc = ca_key(x, &seen, key)) == 1)
		rc = (strcmp(key, "fs_type") == 0 ? ca_str(x, &x->ans->fs_type) : jsonr_skip(&x->r))
			 ? -1
			 : 1;
	return rc < 0 ? -1 : 0;
}

/* status: only last_error. */
static int ca_status(struct ca *x)
{
	char key[CA_KEY_MAX];
	size_t seen = 0;
	int rc = ca_open(x, JSONR_OBJECT);

	while (rc == 1 && (rc = ca_key(x, &seen, key)) == 1)
		rc = (strcmp(key, "last_error") == 0 ? ca_str(x, &x->ans->last_error)
						     : jsonr_skip(&x->r))
			 ? -1
			 : 1;
	return rc < 0 ? -1 : 0;
}

/* claims: whether one of this node's is not node_expanded. */
static int ca_claims(struct ca *x)
{
	size_t items = 0;
	int rc = ca_open(x, JSONR_ARRAY);

	while (rc == 1 && (rc = jsonr_item(&x->r, &items)) == 1) {
		const char *node = NULL;
		bool expanded = false;
		char key[CA_KEY_MAX];
		size_t seen = 0;

		rc = ca_open(x, JSONR_OBJECT);
		while (rc == 1 && (rc = ca_key(x, &seen, key)) == 1)
			rc = (strcmp(key, "node_id") == 0         ? ca_str(x, &node)
			      : strcmp(key, "node_expanded") == 0 ? ca_bool(x, &expanded)
								  : jsonr_skip(&x->r))
				 ? -1
				 : 1;
		if (rc < 0)
			return -1;
		if (node && strcmp(node, x->node) == 0 && !expanded)
			x->ans->expand_here = true;
		rc = 1;
	}
	return rc < 0 ? -1 : 0;
}

/* One publication object into p, *node its node_id. */
static int ca_pub(struct ca *x, struct claims_answer_pub *p, const char **node)
{
	char key[CA_KEY_MAX];
	size_t seen = 0;
	int rc = ca_open(x, JSONR_OBJECT);

	while (rc == 1 && (rc = ca_key(x, &seen, key)) == 1) {
		if (strcmp(key, "node_id") == 0)
			rc = ca_str(x, node);
		else if (strcmp(key, "state") == 0)
			rc = ca_str(x, &p->state);
		else if (strcmp(key, "access_mode") == 0)
			rc = ca_str(x, &p->access_mode);
		else if (strcmp(key, "attachment_mode") == 0)
			rc = ca_str(x, &p->attachment_mode);
		else if (strcmp(key, "context") == 0)
			rc = claims_stage_map(&x->r, x->ans->a, &p->context, &p->n_context);
		else
			rc = jsonr_skip(&x->r);
		rc = rc ? -1 : 1;
	}
	if (!p->state)
		p->state = "";
	if (!p->access_mode)
		p->access_mode = "";
	return rc < 0 ? -1 : 0;
}

/* publications: the first to this node is kept. */
static int ca_publications(struct ca *x)
{
	size_t items = 0;
	int rc = ca_open(x, JSONR_ARRAY);

	while (rc == 1 && (rc = jsonr_item(&x->r, &items)) == 1) {
		struct claims_answer_pub *p = arena_alloc(x->ans->a, sizeof(*p));
		const char *node = NULL;

		if (!p)
			return jsonr_fail(&x->r, "out of memory");
		if (ca_pub(x, p, &node))
			return -1;
		if (!x->ans->pub && node && strcmp(node, x->node) == 0)
			x->ans->pub = p;
		rc = 1;
	}
	return rc < 0 ? -1 : 0;
}

/* One member of the volume (key); 0 or -1. */
static int ca_volume_member(struct ca *x, const char *key)
{
	struct claims_answer *ans = x->ans;
	static const char *const names[] = {"plugin_id",
					    "external_id",
					    "capacity",
					    "modify_index",
					    "context",
					    "mount_options",
					    "node_expansion_required",
					    "claims",
					    "publications",
					    "status"};
	size_t i = 0;

	while (i < sizeof(names) / sizeof(names[0]) && strcmp(names[i], key) != 0)
		i++;
	if (i < sizeof(names) / sizeof(names[0]))
		x->where = names[i];
	switch (i) {
	case 0:
		return ca_str(x, &ans->plugin_id);
	case 1:
		return ca_str(x, &ans->external_id);
	case 2:
		return ca_int(x, &ans->capacity);
	case 3:
		return ca_int(x, &ans->modify_index);
	case 4:
		return claims_stage_map(&x->r, ans->a, &ans->context, &ans->n_context);
	case 5:
		return ca_mount_options(x);
	case 6:
		return ca_bool(x, &ans->node_expansion_required);
	case 7:
		return ca_claims(x);
	case 8:
		return ca_publications(x);
	case 9:
		return ca_status(x);
	default:
		return jsonr_skip(&x->r);
	}
}

/* The "volume" object of a waited answer. */
static int ca_volume(struct ca *x)
{
	char key[CA_KEY_MAX];
	size_t seen = 0;
	int rc = ca_open(x, JSONR_OBJECT);

	x->ans->has_volume = rc == 1;
	while (rc == 1 && (rc = ca_key(x, &seen, key)) == 1)
		rc = ca_volume_member(x, key) ? -1 : 1;
	return rc < 0 ? -1 : 0;
}

/* The "claim" object: its capability. */
static int ca_claim(struct ca *x)
{
	char key[CA_KEY_MAX];
	size_t seen = 0;
	int rc = ca_open(x, JSONR_OBJECT);

	x->ans->has_claim = rc == 1;
	while (rc == 1 && (rc = ca_key(x, &seen, key)) == 1)
		rc = (strcmp(key, "access_mode") == 0 ? ca_str(x, &x->ans->claim_access_mode)
		      : strcmp(key, "attachment_mode") == 0
			  ? ca_str(x, &x->ans->claim_attachment_mode)
			  : jsonr_skip(&x->r))
			 ? -1
			 : 1;
	return rc < 0 ? -1 : 0;
}

/* The "node_stage" object. */
static int ca_stage(struct ca *x)
{
	if (ca_null(x))
		return 0;
	if (!(x->ans->stage = arena_alloc(x->ans->a, sizeof(*x->ans->stage))))
		return jsonr_fail(&x->r, "out of memory");
	return claims_stage_read(&x->r, x->ans->a, x->ans->stage);
}

/* The top-level object: the waited answer's members, else the volume's. */
static int ca_top(struct ca *x)
{
	static const char *const tops[] = {"volume", "claim", "publication_state", "node_stage"};
	char key[CA_KEY_MAX];
	unsigned once = 0;
	size_t seen = 0;
	int rc;

	if (jsonr_peek(&x->r) != JSONR_OBJECT)
		return jsonr_fail(&x->r, "expected an object");
	if (jsonr_open(&x->r))
		return -1;
	while ((rc = ca_key(x, &seen, key)) == 1) {
		x->where = "the answer";
		/* The answer's own members once each: a second would mix into the first. */
		for (unsigned i = 0; i < sizeof(tops) / sizeof(tops[0]); i++) {
			if (strcmp(key, tops[i]) != 0)
				continue;
			if (once & (1u << i))
				return jsonr_fail(&x->r, "duplicate key");
			once |= 1u << i;
		}
		if (strcmp(key, "volume") == 0) {
			x->where = "volume";
			rc = ca_volume(x);
		} else if (strcmp(key, "claim") == 0) {
			x->where = "claim";
			rc = ca_claim(x);
		} else if (strcmp(key, "publication_state") == 0) {
			x->where = "publication_state";
			x->ans->waited = true;
			rc = ca_str(x, &x->ans->publication_state);
		} else if (strcmp(key, "node_stage") == 0) {
			x->where = "node_stage";
			rc = ca_stage(x);
		} else {
			rc = ca_volume_member(x, key);
		}
		if (rc)
			return -1;
	}
	return rc < 0 ? -1 : jsonr_end(&x->r);
}

int claims_answer_decode(const char *text, size_t len, const char *node, struct claims_answer **out,
			 struct err *e)
{
	struct claims_answer *ans = calloc(1, sizeof(*ans));
	struct ca x = {.ans = ans, .node = node, .where = "the answer"};

	*out = NULL;
	if (!ans || !(ans->a = arena_new())) {
		free(ans);
		return err_set(e, CSID_ENOMEM, "out of memory");
	}
	jsonr_init(&x.r, text ? text : "", text ? len : 0);
	if (ca_top(&x)) {
		/* Static text only: the answer may hold secrets. */
		err_set(e, strcmp(x.r.err, "out of memory") == 0 ? CSID_ENOMEM : CSID_EPROTO,
			"the server's answer is malformed (%s): %s", x.where, x.r.err);
		claims_answer_free(ans);
		return e->code;
	}
	if (!ans->plugin_id)
		ans->plugin_id = "";
	if (!ans->publication_state)
		ans->publication_state = "";
	if (!ans->claim_access_mode)
		ans->claim_access_mode = "";
	*out = ans;
	return 0;
}

void claims_answer_free(struct claims_answer *ans)
{
	if (!ans)
		return;
	arena_wipe_free(ans->a);
	free(ans);
}
