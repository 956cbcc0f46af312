/*
 * The strict decoder of volume specs from outside (API bodies and spec
 * files): a JSON object with only the spec keys, the right types, sizes
 * within the CSI limits, and for spec files whole-line "#" and "//"
 * comments. Errors name the JSON path ("capabilities[1].acces_mode:
 * unknown key") and never echo a value: a JSON syntax error gives its
 * line and column and jansson's reason without the text it stopped near,
 * since that text may be a secret. The same for snapshot specs and node
 * fingerprints. Also the commented example spec that `csictl volume
 * init` writes.
 */
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/model_int.h"

static const char *const model_spec_keys[] = {"id",
					      "name",
					      "plugin_id",
					      "external_id",
					      "capacity_min",
					      "capacity_max",
					      "capabilities",
					      "mount_options",
					      "parameters",
					      "mutable_parameters",
					      "secrets",
					      "context",
					      "topology_request",
					      "snapshot_source",
					      "clone_source",
					      NULL};

/* Blanks whole-line comments ("#" or "//" after optional blanks) in place;
 * line numbers stay as they were. A JSON string cannot span lines, so a
 * line that starts so is never inside one. */
void model_spec_uncomment(char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t j = i;

		while (j < len && (s[j] == ' ' || s[j] == '\t'))
			j++;
		if (j < len && (s[j] == '#' || (s[j] == '/' && j + 1 < len && s[j + 1] == '/')))
			while (j < len && s[j] != '\n')
				s[j++] = ' ';
		while (j < len && s[j] != '\n')
			j++;
		i = j + 1;
	}
}

/* jansson's reason without " near '...'" (which may quote a secret). */
static void model_spec_reason(char *buf, size_t cap, const char *text)
{
	const char *near = strstr(text, " near '");
	size_t n = near ? (size_t)(near - text) : strlen(text);

	if (n >= cap)
		n = cap - 1;
	memcpy(buf, text, n);
	buf[n] = '\0';
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)buf[i] < 0x20 || (unsigned char)buf[i] >= 0x7f)
			buf[i] = '?';
}

/*
 * Parses text (at most MODEL_SPEC_MAX bytes; comment lines blanked when
 * allow_comments) into *root, a JSON object holding only the keys of
 * allowed. The caller wipes and frees *root.
 */
static int model_spec_load(struct model_dec *d, const char *text, size_t len, bool allow_comments,
			   const char *const *allowed, json_t **root)
{
	json_error_t jerr;
	char *copy = NULL;

	*root = NULL;
	if (len > MODEL_SPEC_MAX)
		return err_set(d->e, CSID_ETOOBIG, "%s: larger than %d bytes", d->what,
			       MODEL_SPEC_MAX);
	if (allow_comments) {
		copy = malloc(len ? len : 1);
		if (!copy)
			return err_set(d->e, CSID_ENOMEM, "%s: out of memory", d->what);
		memcpy(copy, text, len);
		model_spec_uncomment(copy, len);
		text = copy;
	}
	*root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (copy) {
		memset(copy, 0, len);
		free(copy);
	}
	if (!*root) {
		char reason[128];

		model_spec_reason(reason, sizeof(reason), jerr.text);
		return err_set(d->e, CSID_EINVAL, "%s: line %d column %d: %s", d->what, jerr.line,
			       jerr.column, reason);
	}
	return model_dec_object(d, *root, "", allowed);
}

static void model_spec_free(json_t *root)
{
	if (root) {
		model_json_wipe(root);
		json_decref(root);
	}
}

int model_volume_spec_decode(struct arena *a, const char *text, size_t len, bool allow_comments,
			     struct model_volume **out, struct err *e)
{
	struct model_dec d = {.a = a, .e = e, .strict = true, .what = "volume spec"};
	struct model_volume *v = NULL;
	json_t *root = NULL;
	int rc = model_spec_load(&d, text, len, allow_comments, model_spec_keys, &root);

	if (!rc && !(v = arena_alloc(a, sizeof(*v))))
		rc = err_set(e, CSID_ENOMEM, "volume spec: out of memory");
	if (!rc)
		rc = model_dec_volume_spec(&d, root, v);
	if (!rc)
		*out = v;
	model_spec_free(root);
	return rc;
}

static const char *const model_snapshot_spec_keys[] = {"id",         "volume_id", "name",
						       "parameters", "secrets",   NULL};

int model_snapshot_spec_decode(struct arena *a, const char *text, size_t len,
			       struct model_snapshot **out, struct err *e)
{
	struct model_dec d = {.a = a, .e = e, .strict = true, .what = "snapshot spec"};
	struct model_snapshot *s = NULL;
	json_t *root = NULL;
	int rc = model_spec_load(&d, text, len, false, model_snapshot_spec_keys, &root);

	if (!rc && !(s = arena_alloc(a, sizeof(*s))))
		rc = err_set(e, CSID_ENOMEM, "snapshot spec: out of memory");
	if (!rc)
		rc = model_dec_str(&d, root, "id", "", MODEL_ID_MAX, &s->id);
	if (!rc)
		rc = model_dec_str(&d, root, "volume_id", "", MODEL_ID_MAX, &s->volume_id);
	if (!rc)
		rc = model_dec_str(&d, root, "name", "", MODEL_STRING_MAX, &s->name);
	if (!rc)
		rc = model_dec_map(&d, root, "parameters", "", false, &s->parameters);
	if (!rc)
		rc = model_dec_map(&d, root, "secrets", "", true, &s->secrets);
	if (!rc)
		*out = s;
	model_spec_free(root);
	return rc;
}

int model_node_spec_decode(struct arena *a, const char *text, size_t len, struct model_node **out,
			   struct err *e)
{
	struct model_dec d = {.a = a, .e = e, .strict = true, .what = "node"};
	struct model_node *n = NULL;
	json_t *root = NULL;
	int rc = model_spec_load(&d, text, len, false, NULL, &root);

	if (!rc && !(n = arena_alloc(a, sizeof(*n))))
		rc = err_set(e, CSID_ENOMEM, "node: out of memory");
	if (!rc)
		rc = model_dec_node(&d, root, n);
	if (!rc)
		*out = n;
	model_spec_free(root);
	return rc;
}

const char *model_volume_spec_example(void)
{
	return "# A csid volume spec. Lines starting with # or // are comments.\n"
	       "# Register an existing volume:  csictl volume register FILE\n"
	       "# Create one through its plugin: csictl volume create FILE\n"
	       "{\n"
	       "  # The volume's ID in csid: letters, digits, '.', '_' and '-'.\n"
	       "  \"id\": \"data\",\n"
	       "  # The name given to the plugin's CreateVolume (default: the ID).\n"
	       "  \"name\": \"data\",\n"
	       "  \"plugin_id\": \"hostpath.csi.csid.dev\",\n"
	       "  # Only to register a volume that exists already: the plugin's ID of it.\n"
	       "  // \"external_id\": \"vol-0123456789\",\n"
	       "  # Capacity range in bytes, or with a unit: B, K, KB, KiB, M, MiB, G, GiB, T, "
	       "TiB.\n"
	       "  \"capacity_min\": \"1GiB\",\n"
	       "  \"capacity_max\": \"10GiB\",\n"
	       "  # How the volume may be used. access_mode: single-node-writer,\n"
	       "  # single-node-reader-only, single-node-single-writer, single-node-multi-writer,\n"
	       "  # multi-node-reader-only, multi-node-single-writer, multi-node-multi-writer.\n"
	       "  # attachment_mode: file-system (default) or block-device.\n"
	       "  \"capabilities\": [\n"
	       "    {\"access_mode\": \"single-node-writer\", \"attachment_mode\": "
	       "\"file-system\"}\n"
	       "  ],\n"
	       "  # File-system capabilities only. Mount flags are kept secret.\n"
	       "  \"mount_options\": {\"fs_type\": \"ext4\", \"mount_flags\": [\"noatime\"]},\n"
	       "  # Passed to CreateVolume as they are.\n"
	       "  \"parameters\": {\"type\": \"ssd\"},\n"
	       "  # Changed later with `csictl volume modify` (ControllerModifyVolume).\n"
	       "  \"mutable_parameters\": {},\n"
	       "  # Passed to every plugin call; never shown by the API nor logged.\n"
	       "  \"secrets\": {},\n"
	       "  # The volume context, for a registered volume.\n"
	       "  \"context\": {},\n"
	       "  # Where the volume must (requisite) or should (preferred) be reachable.\n"
	       "  \"topology_request\": {\n"
	       "    \"requisite\": [],\n"
	       "    \"preferred\": []\n"
	       "  }\n"
	       "  # Create from a snapshot or clone another volume (IDs in csid):\n"
	       "  // ,\"snapshot_source\": \"data-snap-1\"\n"
	       "  // ,\"clone_source\": \"data-old\"\n"
	       "}\n";
}
