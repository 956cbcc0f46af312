/*
 * The access modes of csictl's commands: our names
 * ("single-node-writer") of the CSI enum values, apart from the CSI
 * client (csictl_csi.c) so the commands that do not call plugins, which
 * use them too, do not link gRPC (see main.c).
 */
#include "csictl_csi.h"

#include <stddef.h>

static const char *const csictl_csi_modes[] = {
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_WRITER] = "single-node-writer",
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_READER_ONLY] =
	"single-node-reader-only",
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_READER_ONLY] =
	"multi-node-reader-only",
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_SINGLE_WRITER] =
	"multi-node-single-writer",
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__MULTI_NODE_MULTI_WRITER] =
	"multi-node-multi-writer",
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_SINGLE_WRITER] =
	"single-node-single-writer",
    [CSI__V1__VOLUME_CAPABILITY__ACCESS_MODE__MODE__SINGLE_NODE_MULTI_WRITER] =
	"single-node-multi-writer",
};

#define CSICTL_CSI_NMODES (sizeof(csictl_csi_modes) / sizeof(csictl_csi_modes[0]))

const char *csictl_csi_access_mode_name(int mode)
{
	if (mode <= 0 || (size_t)mode >= CSICTL_CSI_NMODES)
		return "unknown";
	return csictl_csi_modes[mode];
}

int csictl_csi_access_mode_parse(const char *name)
{
	for (size_t m = 1; m < CSICTL_CSI_NMODES; m++) {
		const char *ours = csictl_csi_modes[m];
		size_t i = 0;

		/* Ours ("single-node-writer") or CSI's ("SINGLE_NODE_WRITER"), any case. */
		for (; ours[i] && name[i]; i++) {
			char a = ours[i], b = name[i];

			if (b == '_')
				b = '-';
			if (b >= 'A' && b <= 'Z')
				b = (char)(b - 'A' + 'a');
			if (a != b)
				break;
		}
		if (!ours[i] && !name[i])
			return (int)m;
	}
	return -1;
}
