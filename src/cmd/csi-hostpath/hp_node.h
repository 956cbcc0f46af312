/*
 * The Node service of csi-hostpath: stage, publish, unpublish, unstage,
 * volume stats, expansion, capabilities and node info. Same handler
 * contract as hp_controller.h; every operation on a CO path goes through
 * the plugin's hp_mount_ops.
 */
#ifndef HP_NODE_H
#define HP_NODE_H

#include "hp_controller.h"

HP_CTL_HANDLER(hp_node_stage);
HP_CTL_HANDLER(hp_node_unstage);
HP_CTL_HANDLER(hp_node_publish);
HP_CTL_HANDLER(hp_node_unpublish);
HP_CTL_HANDLER(hp_node_stats);
HP_CTL_HANDLER(hp_node_expand);
HP_CTL_HANDLER(hp_node_caps);
HP_CTL_HANDLER(hp_node_info);

#endif
