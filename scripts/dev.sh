#!/usr/bin/env bash
# `make dev`: starts the bundled csi-hostpath plugin on a socket under a
# fresh temporary directory and says how to talk to it. Ctrl-C stops it
# and removes the directory (after unmounting anything left under it).
set -euo pipefail
build=${1:-build/release}
dir=$(mktemp -d /tmp/csid-dev.XXXXXX)
sock=$dir/csi.sock
cleanup() {
	kill "${pid:-}" 2>/dev/null || true
	wait "${pid:-}" 2>/dev/null || true
	grep -o " $dir[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
	rm -rf "$dir"
}
trap cleanup EXIT INT TERM
"$build/csi-hostpath" --endpoint "unix://$sock" --data-dir "$dir/data" --node-id "$(hostname)" &
pid=$!
for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.05; done
cat <<TXT

csi-hostpath is serving on unix://$sock (data in $dir/data).
Try it from another shell:

  $build/csictl csi -endpoint unix://$sock info
  $build/csictl csi -endpoint unix://$sock create-volume vol1 -capacity 1Gi
  $build/csictl csi -endpoint unix://$sock list-volumes

Ctrl-C stops it.
TXT
wait "$pid"
