#!/usr/bin/env bash
# Installs the official JavaScript Kubernetes client (@kubernetes/client-node, the version
# package-lock.json pins) from the npm registry into DEST, for the tests that drive it
# against the local control plane (crates/opkit-apiserver/tests/api/pod_streams_as_kube.rs
# finds it in OPKIT_JS_CLIENT, or in target/tools/js-client).
# Usage: tools/js-client/install.sh [DEST]   (default DEST: target/tools/js-client)
# Prints DEST. Does nothing when DEST already holds the pinned version.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dest=${1:-target/tools/js-client}
command -v npm >/dev/null || { echo "js-client: npm is required" >&2; exit 1; }
if cmp -s "$here/package-lock.json" "$dest/package-lock.json" \
  && [ -f "$dest/node_modules/@kubernetes/client-node/package.json" ]; then
  echo "$dest"
  exit 0
fi
mkdir -p "$dest"
cp "$here/package.json" "$here/package-lock.json" "$dest/"
(cd "$dest" && npm ci --no-audit --no-fund --silent >&2)
echo "$dest"
