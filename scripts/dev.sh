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
dir=
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
	case "${args[i]}" in
	-listen | --listen) listen=${args[i + 1]:-$listen} ;;
	-listen=* | --listen=*) listen=${args[i]#*=} ;;
	-data-dir | --data-dir) dir=${args[i + 1]:-} ;;
	-data-dir=* | --data-dir=*) dir=${args[i]#*=} ;;
	esac
done
# Our own temporary directory, so the agent's socket can be named below;
# csid dev removes what it made in it, then the directory once empty.
if [ -z "$dir" ]; then
	dir=$(mktemp -d /tmp/csid-dev.XXXXXX)
	set -- -data-dir "$dir" "$@"
fi
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
Web console: $CSID_ADDR/ui/
From another shell:

  export CSID_ADDR=$CSID_ADDR CSID_AGENT_ADDR=unix:$dir/agent/agent.sock PATH=$build:\$PATH
  csictl plugin status
  csictl volume init > vol.json
  csictl volume create vol.json -wait
  P=\$(csictl volume mount data -alloc web-1); echo \$P   # the mounted path
  echo hello > \$P/hello
  csictl volume status data                             # shows the claim
  csictl volume unmount data -alloc web-1
  csictl volume delete data -wait
  csictl node status; csictl events                     # more to look at

Ctrl-C stops it and removes its directory (csid dev -keep keeps it).

TXT
fi
wait "$pid"
