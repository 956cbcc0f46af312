/*
 * The GroupController service of csi-hostpath (volume group snapshots,
 * CSI v1.12, not alpha): GroupControllerGetCapabilities,
 * CreateVolumeGroupSnapshot, GetVolumeGroupSnapshot and
 * DeleteVolumeGroupSnapshot. Same handler contract as hp_controller.h;
 * served in controller and monolith modes.
 */
#ifndef HP_GROUP_H
#define HP_GROUP_H

#include "hp_controller.h"

/* Most source volumes one group snapshot may have. */
#define HP_GROUP_MAX 64

HP_CTL_HANDLER(hp_group_caps);
HP_CTL_HANDLER(hp_group_create);
HP_CTL_HANDLER(hp_group_get);
HP_CTL_HANDLER(hp_group_delete);

#endif
