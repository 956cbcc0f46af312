#!/usr/bin/env bash
# `make dev`: runs csid for a first try. The node agent (`csid agent`)
# supervises the bundled csi-hostpath plugin (controller and node in one
# process) on a fresh temporary directory, and this script prints how to
# drive both with csictl. Ctrl-C stops the agent; the script then unmounts
# whatever is left under the directory and removes it.
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
dir=$(mktemp -d /tmp/csid-dev.XXXXXX)
node=$(hostname)
cleanup() {
	kill "${pid:-}" 2>/dev/null || true
	wait "${pid:-}" 2>/dev/null || true
	# Deepest mounts first, so nothing stays busy.
	awk -v d="$dir" '$5 ~ "^"d { print $5 }' /proc/self/mountinfo | sort -r |
		xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
cat >"$dir/agent.json" <<JSON
{
  "data_dir": "$dir/agent",
  "node_name": "$node",
  "plugins": [
    {"id": "hostpath.csi.csid.dev", "type": "monolith",
     "command": "$build/csi-hostpath",
     "args": ["--endpoint", "\${CSI_ENDPOINT}", "--node-id", "\${NODE_NAME}",
              "--data-dir", "$dir/hostpath"]}
  ]
}
JSON
"$build/csid" agent -config "$dir/agent.json" &
pid=$!
export CSID_AGENT_ADDR="unix:$dir/agent/agent.sock"
for _ in $(seq 200); do
	"$build/csictl" agent plugins >/dev/null 2>&1 && break
	kill -0 "$pid" 2>/dev/null || exit 1
	sleep 0.05
done
sock=$(find "$dir/agent" -name csi.sock -print -quit)
cat <<TXT

csid agent is running (data in $dir), supervising csi-hostpath.
From another shell:

  export CSID_AGENT_ADDR=$CSID_AGENT_ADDR
  $build/csictl agent plugins
  $build/csictl csi -endpoint unix://$sock create-volume vol1 -capacity 1Gi
  $build/csictl csi -endpoint unix://$sock controller-publish VOLUME_ID $node
  $build/csictl agent mount vol1 alloc1 -plugin hostpath.csi.csid.dev -external-id VOLUME_ID
  $build/csictl agent mounts
  $build/csictl agent unmount vol1 alloc1

Ctrl-C stops it and removes $dir.
TXT
wait "$pid"
