#!/usr/bin/env bash
# Installs the third-party peers of the interop tests (exact pins from
# tools/peers/package.json) into .cache/peers, once per version of that file,
# and prints the folder. Needs node and npm.
set -euo pipefail
cd "$(dirname "$0")/.."
peers=.cache/peers
want=$(sha256sum tools/peers/package.json | cut -c1-16)
if [ "$(cat "$peers/.stamp" 2>/dev/null)" != "$want" ]; then
  rm -rf "$peers" && mkdir -p "$peers"
  cp tools/peers/package.json "$peers/"
  (cd "$peers" && npm install --no-audit --no-fund --omit=dev --loglevel=error >&2)
  echo "$want" > "$peers/.stamp"
fi
echo "$PWD/$peers"
