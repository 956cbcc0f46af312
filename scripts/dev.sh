#!/usr/bin/env bash
# `make dev`: runs `csid dev` in the foreground: a server (API on
# 127.0.0.1:4646), an agent (node "dev") and the bundled csi-hostpath
# (controller and node in one process, controller publish on) in one
# process, on a fresh temporary directory. Once the plugin is up it prints
# the csictl commands to try from another shell. Ctrl-C stops it; csid dev
# then unmounts whatever is left under the directory and removes it.
# Arguments after the build directory go to csid dev (-keep, -listen ...).
set -euo pipefail
build=$(cd "${1:-build/release}" && pwd)
shift || true
listen=127.0.0.1:4646
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case "${args[i]}" in
	-listen | --listen) listen=${args[i + 1]:-$listen} ;;
	-listen=* | --listen=*) listen=${args[i]#*=} ;;
	esac
done
"$build/csid" dev "$@" &
pid=$!
# Ctrl-C reaches csid dev as well (same process group): wait for its cleanup.
trap 'kill -TERM "$pid" 2>/dev/null || true; wait "$pid" || true; exit 130' INT TERM
export CSID_ADDR="http://$listen"
up() {
	"$build/csictl" plugin status -o json 2>/dev/null | tr -d ' \n' |
		grep -q '"controllers":{"healthy":1,"expected":1},"nodes":{"healthy":1'
}
for _ in $(seq 600); do
	up && break
	kill -0 "$pid" 2>/dev/null || break
	sleep 0.1
done
if up; then
	cat <<TXT

csid dev is running: server API $CSID_ADDR, node "dev", csi-hostpath supervised.
From another shell:

  export CSID_ADDR=$CSID_ADDR PATH=$build:\$PATH
  csictl plugin status
  csictl node status
  csictl volume init > vol.json
  csictl volume create vol.json -wait
  csictl volume status data
  csictl volume claim data -alloc web-1 -node dev
  csictl volume release data -alloc web-1
  csictl volume delete data -wait

Ctrl-C stops it and removes its directory (csid dev -keep keeps it).

TXT
fi
wait "$pid"
