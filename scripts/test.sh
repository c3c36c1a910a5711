#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs what the tests need,
# then runs every Go test under the race detector.
set -euo pipefail
cd "$(dirname "$0")/.."
go mod download
go test -race -count=1 "$@" ./...
