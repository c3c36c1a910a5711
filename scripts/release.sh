#!/usr/bin/env bash
# Builds the release binaries of dsh into dist/ (git-ignored): stripped,
# static (CGO_ENABLED=0) and reproducible, one per target, with LICENSE,
# THIRD_PARTY_LICENSES (the licence texts of every module linked in, checked
# by internal/tools/licenses) and SHA256SUMS. It publishes nothing.
#
#   bash scripts/release.sh [--check] [GOOS/GOARCH ...]
#
# The targets default to every release platform: linux/amd64 linux/arm64
# darwin/amd64 darwin/arm64. (Not windows/amd64: internal/proc manages Unix
# process groups only.)
#
# Every build of one commit with one Go toolchain is byte-identical: paths
# are trimmed (-trimpath), no VCS information is read (-buildvcs=false), and
# the version, the commit, its time (the "build date") and whether tracked
# files were changed are stamped with -ldflags -X, so a binary built from
# a copy of the tree without .git is the same binary. The version is
# $VERSION when set, else the v* tag on HEAD, else the Go pseudo-version of
# HEAD (v0.0.0-YYYYMMDDHHMMSS-commit12); +dirty is added when tracked files
# were changed.
#
# --check (CI) then builds the first target again, from a copy of the tree
# in another directory with an empty build cache, and fails unless the two
# binaries are byte-identical; and runs the binary built for this machine,
# if any, and fails unless --version prints the stamped version, commit and
# date.
set -euo pipefail
cd "$(dirname "$0")/.."

check=false
if [ "${1:-}" = --check ]; then
  check=true
  shift
fi
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(linux/amd64 linux/arm64 darwin/amd64 darwin/arm64)
fi
dist=${DIST:-dist}

commit=$(git rev-parse HEAD)
date=$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)
modified=false
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  modified=true
fi
if [ -z "${VERSION:-}" ]; then
  VERSION=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null) ||
    VERSION=v0.0.0-$(TZ=UTC git show -s --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)-${commit:0:12}
  if [ "$modified" = true ]; then
    VERSION+=+dirty
  fi
fi
if ! [[ $VERSION =~ ^v[0-9A-Za-z.+-]+$ ]]; then
  echo "release.sh: VERSION must be v followed by letters, digits, '.', '+' or '-', got '$VERSION'" >&2
  exit 2
fi
ldflags="-s -w -X main.stampVersion=$VERSION -X main.stampCommit=$commit -X main.stampDate=$date -X main.stampModified=$modified"

# build TARGET OUTPUT: one binary, from the current directory. Everything
# that changes the output is set here, whatever the caller's environment.
build() {
  env CGO_ENABLED=0 GOOS="${1%/*}" GOARCH="${1#*/}" GOAMD64=v1 GOARM64=v8.0 GOFLAGS=-mod=readonly GOEXPERIMENT= \
    go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$2" ./cmd/dsh
}

mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
# Only what an earlier run wrote is removed: $DIST may name any folder.
rm -f "$dist"/dsh-v* "$dist/LICENSE" "$dist/THIRD_PARTY_LICENSES" "$dist/SHA256SUMS"
echo "release.sh: dsh $VERSION (commit $commit, $date) for ${targets[*]}" >&2
files=()
for t in "${targets[@]}"; do
  out=dsh-$VERSION-${t%/*}-${t#*/}
  build "$t" "$dist/$out"
  files+=("$out")
done
cp LICENSE "$dist/"
platforms=$(IFS=,; echo "${targets[*]}")
(cd internal/tools/licenses && go run . -platforms "$platforms" -notices "$dist/THIRD_PARTY_LICENSES" ../../.. ./cmd/dsh >/dev/null)
files+=(LICENSE THIRD_PARTY_LICENSES)
sums=$(cd "$dist" && if command -v sha256sum >/dev/null; then sha256sum -- "${files[@]}"; else shasum -a 256 -- "${files[@]}"; fi)
echo "$sums" > "$dist/SHA256SUMS"
(cd "$dist" && ls -l -- "${files[@]}" SHA256SUMS) >&2

if [ "$check" != true ]; then
  exit 0
fi
first=${targets[0]}
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$tmp/src"
(cd "$tmp/src" && GOCACHE="$tmp/cache" build "$first" "$tmp/again")
if ! cmp "$dist/dsh-$VERSION-${first%/*}-${first#*/}" "$tmp/again"; then
  echo "release.sh: two builds of $first differ" >&2
  exit 1
fi
echo "release.sh: a second build of $first, elsewhere and with an empty build cache, is byte-identical" >&2

host=$(go env GOOS)/$(go env GOARCH)
for t in "${targets[@]}"; do
  if [ "$t" = "$host" ]; then
    want="dsh $VERSION"$'\n'"commit: $commit"
    if [ "$modified" = true ]; then
      want+=" (modified)"
    fi
    want+=$'\n'"date: $date"
    got=$("$dist/dsh-$VERSION-${t%/*}-${t#*/}" --version)
    if [ "$(head -3 <<<"$got")" != "$want" ]; then
      printf 'release.sh: --version printed\n%s\nwant\n%s\n' "$got" "$want" >&2
      exit 1
    fi
    echo "release.sh: the $t binary's --version prints the stamped version, commit and date" >&2
  fi
done
