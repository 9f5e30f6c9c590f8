# Thin wrapper over meson + ninja. `make` builds build/src/cli/capsule
# (linked as build/capsule too); `make run` shows what capsule does with the
# bundled examples; `make check` installs test dependencies and runs every
# test: unit, check cases, external suites, ajv, an ASan+UBSan build, fuzzers.
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 20
PREFIX ?= /usr/local
DESTDIR ?=

.PHONY: all deps build run check test test-asan fuzz clean format format-check

all: build

deps:
	@scripts/deps.sh build

$(BUILD)/build.ninja:
	@scripts/deps.sh build
	meson setup $(BUILD)

build: $(BUILD)/build.ninja
	ninja -C $(BUILD)
	@ln -sf src/cli/capsule $(BUILD)/capsule
	$(MAKE) -s -C examples/selu-text

run: build
	scripts/demo.sh $(BUILD)/capsule

# `make install PREFIX=/usr DESTDIR=/tmp/pkg`: the binary, the bash and
# zsh completions, the man page (generated from docs/cli.md) and the docs
# (what a package holds)
.PHONY: install uninstall
install: build
	install -Dm755 $(BUILD)/src/cli/capsule $(DESTDIR)$(PREFIX)/bin/capsule
	install -Dm644 completions/capsule.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/capsule
	install -Dm644 completions/_capsule $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_capsule
	install -Dm644 $(BUILD)/src/cli/capsule.1 $(DESTDIR)$(PREFIX)/share/man/man1/capsule.1
	install -d $(DESTDIR)$(PREFIX)/share/doc/capsule
	install -m644 README.md docs/*.md $(DESTDIR)$(PREFIX)/share/doc/capsule/

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/capsule $(DESTDIR)$(PREFIX)/share/bash-completion/completions/capsule
	rm -f $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_capsule $(DESTDIR)$(PREFIX)/share/man/man1/capsule.1
	rm -rf $(DESTDIR)$(PREFIX)/share/doc/capsule

test: build
	meson test -C $(BUILD) --print-errorlogs

$(ASAN_BUILD)/build.ninja:
	meson setup $(ASAN_BUILD) -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug

test-asan: $(ASAN_BUILD)/build.ninja
	ninja -C $(ASAN_BUILD)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	  LSAN_OPTIONS=print_suppressions=0 \
	  meson test -C $(ASAN_BUILD) --print-errorlogs --no-suite slow

$(FUZZ_BUILD)/build.ninja:
	CC=clang meson setup $(FUZZ_BUILD) -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug

fuzz: $(FUZZ_BUILD)/build.ninja
	ninja -C $(FUZZ_BUILD)
	tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

check:
	scripts/check-tracked.sh
	@scripts/deps.sh test
	scripts/check-size.py
	$(MAKE) format-check
	$(MAKE) test
	$(MAKE) test-asan
	$(MAKE) fuzz

format:
	clang-format -i $$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c')

# Fails (and names the files) when a C file differs from .clang-format's
# layout (clang-format 14, Debian 12's; part of make check).
format-check:
	@bad=$$(for f in $$(git ls-files 'src/*.c' 'src/*.h' 'tests/*.c'); do \
	  clang-format --dry-run -Werror "$$f" >/dev/null 2>&1 || echo "$$f"; done); \
	if [ -n "$$bad" ]; then echo "not formatted (run make format):"; echo "$$bad"; exit 1; fi; \
	echo "format: every C file matches .clang-format"

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
