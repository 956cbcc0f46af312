/*
 * csictl-csi: the program behind `csictl csi ...` (csictl runs it from
 * its own directory): calls a CSI plugin directly over gRPC. It is a
 * program of its own so that only it links gRPC; everything it does is
 * csictl's CSI client (src/cmd/csictl/csictl_csi*.c).
 */
#include <stdio.h>

#include "csictl_csi.h"

int main(int argc, char **argv)
{
	return csictl_csi_main(argc - 1, argv + 1, stdout, stderr);
}
