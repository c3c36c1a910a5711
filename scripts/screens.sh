#!/usr/bin/env bash
# Regenerates the text captures of the interactive mode in README.md (the
# blocks between <!-- screen:NAME --> and <!-- /screen -->): runs the real
# binary on a pty against a loopback model, normalises ids and times, and
# writes the captures into the README. Run from anywhere in the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
DSH_UPDATE_SCREENS=1 go test -count=1 -timeout 10m -run '^TestREADMEScreens$' ./cmd/dsh
git --no-pager diff --stat -- README.md
