/*
 * Snapshots of csi-hostpath (Controller service): CreateSnapshot,
 * DeleteSnapshot, ListSnapshots and GetSnapshot. Same handler contract as
 * hp_controller.h.
 */
#ifndef HP_SNAPSHOT_H
#define HP_SNAPSHOT_H

#include "hp_controller.h"

HP_CTL_HANDLER(hp_snap_create);
HP_CTL_HANDLER(hp_snap_delete);
HP_CTL_HANDLER(hp_snap_list);
HP_CTL_HANDLER(hp_snap_get);

#endif
