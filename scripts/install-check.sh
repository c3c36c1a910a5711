#!/usr/bin/env bash
# Tests the README's install command, go install
# github.com/dsh-go/dsh/cmd/dsh@latest, before anything is published.
#
# The tracked files of the working tree become the only version of
# github.com/dsh-go/dsh that a file:// module proxy serves (a Go
# pseudo-version of HEAD, as @latest resolves an untagged repository to);
# every other module comes from the local module download cache, else from
# the configured GOPROXY, with its checksum verified against the checksum
# database as for any user. The install runs with an empty GOPATH and module
# cache and GOFLAGS=-mod=mod, so it also fails if go.mod gains a replace
# directive (go install …@version refuses those) or the module zip is
# malformed. Then the installed dsh runs the README's commands: --version
# (which must name the served version) and the offline demo.
set -euo pipefail
cd "$(dirname "$0")/.."

module=github.com/dsh-go/dsh
commit=$(git rev-parse --short=12 HEAD)
version=v0.0.0-$(TZ=UTC git show -s --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)-$commit
tmp=$(mktemp -d)
trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' EXIT

# The proxy: list, .info, .mod and .zip of one version. The zip holds the
# working tree's tracked files (git stash create records them without
# touching the tree or any ref) minus nested modules, as a module zip does.
at=$tmp/proxy/$module/@v
mkdir -p "$at"
echo "$version" > "$at/list"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)" > "$at/$version.info"
cp go.mod "$at/$version.mod"
exclude=()
while read -r mod; do
  exclude+=(":(exclude)$(dirname "$mod")")
done < <(git ls-files '*/go.mod')
tree=$(git stash create)
git archive --format=zip --prefix="$module@$version/" "${tree:-HEAD}" -- . ${exclude[@]+"${exclude[@]}"} > "$at/$version.zip"

cache=$(go env GOMODCACHE)/cache/download
env GOPATH="$tmp/gopath" GOMODCACHE="$tmp/gopath/pkg/mod" GOFLAGS=-mod=mod GONOSUMDB="$module" \
  GOPROXY="file://$tmp/proxy,file://$cache,$(go env GOPROXY)" \
  go install "$module/cmd/dsh@latest"

dsh=$tmp/gopath/bin/dsh
got=$("$dsh" --version)
want="dsh $version"$'\n'"commit: $commit"
if [ "$(head -2 <<<"$got")" != "$want" ]; then
  printf 'install-check.sh: the installed dsh --version printed\n%s\nwant\n%s\n' "$got" "$want" >&2
  exit 1
fi
if ! out=$(DSH_HOME="$tmp/home" "$dsh" demo 2>&1); then
  printf 'install-check.sh: the installed dsh demo failed:\n%s\n' "$out" >&2
  exit 1
fi
echo "install-check.sh: go install $module/cmd/dsh@latest ($version) from an empty module cache works; --version and demo run" >&2
