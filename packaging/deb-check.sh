#!/bin/sh
# packaging/deb-check.sh DEB [CACHE_DIR]: installs the .deb in a fresh
# Debian 12 chroot and checks what an operator gets: `csid version` and
# `csictl version` work (csictl against a csid server started in the
# chroot), the configs, man pages and bash completion are in place, and
# the chroot's `systemd-analyze verify` accepts the units. Run by `make deb-check`, as
# root (chroot, mount).
#
# The chroot comes from debootstrap --variant=minbase (Debian's archive),
# cached as CACHE_DIR/bookworm-minbase.tar; the runtime libraries the .deb
# depends on are installed once on top of it and cached too
# (bookworm-deps-<hash of Depends>.tar), so a second run needs no network.
# Every run unpacks a fresh copy, and removes it (mounts first) on exit.
set -eu

deb=$(realpath "$1")
cache=$(realpath -m "${2:-build/deb-cache}")
mirror=${CSID_DEB_MIRROR:-http://deb.debian.org/debian}
port=${CSID_DEB_CHECK_PORT:-14646}
mkdir -p "$cache"
work=$(mktemp -d "$cache/check.XXXXXX")
root=$work/root
server_pid=""

cleanup() {
	if [ -n "$server_pid" ]; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if mountpoint -q "$root/proc"; then umount -l "$root/proc"; fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

fail() {
	echo "deb-check: FAIL: $*" >&2
	exit 1
}

step() {
	echo "deb-check: $*"
}

# 1. A minimal Debian 12.
base=$cache/bookworm-minbase.tar
if [ ! -f "$base" ]; then
	command -v debootstrap >/dev/null || fail "debootstrap is not installed (apt-get install debootstrap)"
	step "debootstrap --variant=minbase bookworm (cached as $base)"
	debootstrap --variant=minbase bookworm "$work/boot" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log"; fail "debootstrap"; }
	tar -C "$work/boot" -cf "$base.tmp" . && mv "$base.tmp" "$base"
	rm -rf "$work/boot"
fi

# 2. With the packages the .deb depends on, and what a server running it
# has: systemd (to verify the units with) and man-db.
depends=$(dpkg-deb -f "$deb" Depends)
names=$( (echo "$depends" | tr ',' '\n' | sed 's/|.*//; s/(.*)//; s/ //g'; echo systemd; echo man-db) |
	grep -v '^$' | sort -u)
key=$(echo "$names" | sha256sum | cut -c1-16)
with_deps=$cache/bookworm-deps-$key.tar
mkdir -p "$root"
if [ -f "$with_deps" ]; then
	tar -C "$root" -xf "$with_deps"
else
	step "installing the runtime dependencies in the chroot (cached as $with_deps)"
	tar -C "$root" -xf "$base"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	echo "deb $mirror bookworm main" >"$root/etc/apt/sources.list"
	mount -t proc proc "$root/proc"
	# shellcheck disable=SC2086
	chroot "$root" sh -c "apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(echo $names) && apt-get clean" \
		>"$work/apt.log" 2>&1 || { tail -20 "$work/apt.log"; fail "apt-get install in the chroot"; }
	umount "$root/proc"
	tar -C "$root" -cf "$with_deps.tmp" . && mv "$with_deps.tmp" "$with_deps"
fi
mount -t proc proc "$root/proc"

# 3. The package itself, offline.
step "dpkg -i $(basename "$deb")"
cp "$deb" "$root/tmp/csid.deb"
chroot "$root" dpkg -i /tmp/csid.deb >"$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i"; }
version=$(dpkg-deb -f "$deb" Version)
for f in /usr/bin/csid /usr/bin/csictl /usr/bin/csictl-csi /usr/bin/csi-hostpath \
	/etc/csid/server.json /etc/csid/agent.json \
	/usr/lib/systemd/system/csid-server.service /usr/lib/systemd/system/csid-agent.service \
	/usr/share/man/man8/csid.8.gz /usr/share/man/man1/csictl.1.gz \
	/usr/share/bash-completion/completions/csictl; do
	[ -e "$root$f" ] || fail "$f is not installed"
done
grep -qx /etc/csid/server.json "$root/var/lib/dpkg/info/csid.conffiles" || fail "server.json is not a conffile"

# 4. The programs.
out=$(chroot "$root" csid version) || fail "csid version"
[ "$out" = "csid $version" ] || fail "csid version printed \"$out\", expected \"csid $version\""
step "csid version: $out"
out=$(chroot "$root" csictl version -client) || fail "csictl version -client"
[ "$out" = "csictl $version" ] || fail "csictl version -client printed \"$out\""
chroot "$root" csid server -config /etc/csid/server.json -listen "127.0.0.1:$port" \
	>"$work/server.log" 2>&1 &
server_pid=$!
tries=0
until out=$(chroot "$root" csictl version -address "http://127.0.0.1:$port" 2>&1); do
	tries=$((tries + 1))
	if [ "$tries" -gt 300 ] || ! kill -0 "$server_pid" 2>/dev/null; then
		cat "$work/server.log"
		fail "csictl version: the server in the chroot did not answer: $out"
	fi
	sleep 0.1
done
expected=$(printf 'csictl %s\nserver %s' "$version" "$version")
[ "$out" = "$expected" ] || fail "csictl version printed \"$out\""
step "csictl version: $(echo "$out" | tr '\n' ' ')"
kill -TERM "$server_pid"
wait "$server_pid" || fail "csid server did not stop cleanly on SIGTERM"
server_pid=""

out=$(chroot "$root" env MANPAGER=cat MANWIDTH=80 man csid 2>&1) || fail "man csid: $out"
echo "$out" | grep -q "timings.heartbeat" || fail "man csid lacks the agent's keys"
out=$(chroot "$root" env MANPAGER=cat MANWIDTH=80 man csictl 2>&1) || fail "man csictl: $out"
echo "$out" | grep -q "csictl volume snapshot create" || fail "man csictl lacks its commands"
step "man csid, man csictl: rendered"

# 5. The units, as the chroot's systemd reads them.
if ! chroot "$root" systemd-analyze verify \
	/usr/lib/systemd/system/csid-server.service /usr/lib/systemd/system/csid-agent.service \
	>"$work/verify.log" 2>&1; then
	cat "$work/verify.log"
	fail "systemd-analyze verify"
fi
if grep -v '^$' "$work/verify.log" | grep -q .; then
	cat "$work/verify.log"
	fail "systemd-analyze verify warned"
fi
step "systemd-analyze verify: both units accepted"
step "OK"
