#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what the tests need
# (Go modules; the pinned third-party ACP peers of the interop tests, with
# npm), then runs every Go test under the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
if command -v npm >/dev/null 2>&1; then
  DSH_PEERS_DIR=$(bash scripts/peers.sh)
  export DSH_PEERS_DIR
elif [ "${CI:-}" = true ]; then
  echo "scripts/test.sh: npm is needed to install the interop peers" >&2
  exit 1
fi
go test -race -count=1 "$@" ./...
