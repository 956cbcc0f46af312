# Entry points. `make dev` and `make test` install the Debian packages they
# need first (apt-get, as root or through sudo), then build with CMake.

DEB_PACKAGES := cmake make gcc pkg-config libgrpc-dev protobuf-c-compiler \
	libprotobuf-c-dev libprotobuf-dev libuv1-dev libsqlite3-dev \
	libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libcmocka-dev \
	clang-format chromium chromium-driver groff-base man-db debootstrap dpkg-dev \
	prometheus docker.io podman busybox-static etcd-server etcd-client \
	libgnutls28-dev openssl
JOBS ?= $(shell nproc)
TEST_DIR := build/test
REL_DIR := build/release
FUZZ_DIR := build/fuzz
# make fuzz: every fuzz target (or FUZZ_TARGET=hostpath) for FUZZ_SECONDS each.
FUZZ_SECONDS ?= 120
FUZZ_TARGET ?=

# make install: PREFIX (default /usr/local) with the configs in /etc/csid;
# DESTDIR works as usual. make deb: build/release/csid_<version>_<arch>.deb
# (prefix /usr). make deb-check: that .deb in a fresh Debian 12 chroot.
PREFIX ?= /usr/local
DEB_CACHE := build/deb-cache

.PHONY: deps dev test release bench fuzz clean install deb deb-check

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'install ok installed' \
			|| missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -q && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -q --no-install-recommends $$missing; \
	fi

$(TEST_DIR)/CMakeCache.txt: | deps
	cmake -S . -B $(TEST_DIR) -DCMAKE_BUILD_TYPE=Debug -DCSID_SANITIZE=ON -DCSID_WERROR=ON

$(REL_DIR)/CMakeCache.txt: | deps
	cmake -S . -B $(REL_DIR) -DCMAKE_BUILD_TYPE=Release

test: deps $(TEST_DIR)/CMakeCache.txt
	cmake --build $(TEST_DIR) -j $(JOBS)
	cd $(TEST_DIR) && ctest --output-on-failure -j $(JOBS)

release: deps $(REL_DIR)/CMakeCache.txt
	cmake --build $(REL_DIR) -j $(JOBS)

install: deps
	cmake -S . -B $(REL_DIR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX) \
		-DCMAKE_INSTALL_SYSCONFDIR=/etc
	cmake --build $(REL_DIR) --target dist -j $(JOBS)
	cmake --install $(REL_DIR)

deb: deps
	cmake -S . -B $(REL_DIR) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
		-DCMAKE_INSTALL_SYSCONFDIR=/etc
	cmake --build $(REL_DIR) --target dist -j $(JOBS)
	rm -f $(REL_DIR)/csid_*.deb
	cd $(REL_DIR) && cpack -G DEB

deb-check: deb
	packaging/deb-check.sh $$(ls $(REL_DIR)/csid_*.deb) $(DEB_CACHE)

dev: release
	./scripts/dev.sh $(REL_DIR)

bench: release
	cmake --build $(REL_DIR) --target bench -j $(JOBS)
	@for b in $(REL_DIR)/bench_*; do echo "== $$b"; $$b || exit 1; done

# New inputs go to $(FUZZ_DIR)/corpus/<name> (the checked-in corpus is only
# read), crashes to $(FUZZ_DIR)/artifacts/<name>/.
fuzz: deps
	@command -v clang >/dev/null || { echo "make fuzz needs clang (apt-get install clang)"; exit 1; }
	cmake --preset fuzz
	@set -e; targets="$(FUZZ_TARGET)"; \
	[ -n "$$targets" ] || targets=$$(cd test/fuzz && ls fuzz_*.c | sed 's/\.c$$//'); \
	for t in $$targets; do \
		t=fuzz_$${t#fuzz_}; short=$${t#fuzz_}; \
		cmake --build $(FUZZ_DIR) --target $$t -j $(JOBS); \
		mkdir -p $(FUZZ_DIR)/corpus/$$short $(FUZZ_DIR)/artifacts/$$short; \
		echo "== $$t for $(FUZZ_SECONDS) s"; \
		$(FUZZ_DIR)/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
			-artifact_prefix=$(FUZZ_DIR)/artifacts/$$short/ \
			$(FUZZ_DIR)/corpus/$$short test/fuzz/corpus/$$short; \
	done

clean:
	rm -rf build
