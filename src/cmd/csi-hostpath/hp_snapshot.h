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

struct hp_snap;
/* The CSI Snapshot message of s (with its group_snapshot_id); NULL when out of memory. */
Csi__V1__Snapshot *hp_snap_msg(struct arena *a, const struct hp_snap *s);

#endif
