#!/usr/bin/env bash
# Resolves jar sets pinned in peers/jars/pom.xml (one Maven profile each) from Maven Central into
# ${KOBS_JARS:-.cache/jars}/<profile>-<version>/, each with its runtime dependencies. Idempotent: a set
# resolved from the same pom is kept. Usage: scripts/jars.sh PROFILE... (setup.sh passes every profile).
set -euo pipefail
cd "$(dirname "$0")/.."
pom=peers/jars/pom.xml
cache=${KOBS_JARS:-.cache/jars}
pom_hash=$(sha256sum "$pom" | cut -d' ' -f1)
for profile in "$@"; do
  version=$(sed -n "s:.*<$profile.version>\(.*\)</$profile.version>.*:\1:p" "$pom")
  [ -n "$version" ] || { echo "jars: no <$profile.version> in $pom" >&2; exit 1; }
  dir=$cache/$profile-$version
  [ "$(cat "$dir/.resolved" 2>/dev/null)" = "$pom_hash" ] && continue
  echo "jars: resolving $profile $version from Maven Central into $dir"
  rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
  if ! mvn -B -f "$pom" -P "$profile" dependency:copy-dependencies -DincludeScope=runtime \
      -DoutputDirectory="$(realpath "$dir.tmp")" > "$dir.log" 2>&1; then
    tail -n 20 "$dir.log" >&2
    echo "jars: mvn could not resolve $profile $version (log: $dir.log)" >&2
    exit 1
  fi
  echo "$pom_hash" > "$dir.tmp/.resolved"
  rm -rf "$dir" && mv "$dir.tmp" "$dir"
done
