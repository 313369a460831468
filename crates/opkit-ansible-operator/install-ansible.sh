#!/usr/bin/env bash
# Installs what the Ansible operator runs: ansible-runner, ansible-core and the Python
# kubernetes client from PyPI, and the kubernetes.core collection. That collection is not
# on PyPI by itself: it is taken out of the `ansible` community package's wheel (which
# bundles it), without installing the other collections of that package, into the user's
# collections path (~/.ansible/collections, where ansible looks by default).
# Idempotent and quiet: does nothing when everything is there.
set -euo pipefail
ANSIBLE_PACKAGE_VERSION=12.3.0 # bundles kubernetes.core 6.x, for ansible-core 2.19
dest="${ANSIBLE_COLLECTIONS_DEST:-$HOME/.ansible/collections}"
if ! command -v ansible-runner >/dev/null 2>&1 || ! python3 -c "import ansible, kubernetes" >/dev/null 2>&1; then
  python3 -m pip install -q --disable-pip-version-check ansible-runner "ansible-core>=2.16" kubernetes
fi
if [ ! -f "$dest/ansible_collections/kubernetes/core/MANIFEST.json" ]; then
  wheel_dir=$(mktemp -d)
  trap 'rm -rf "$wheel_dir"' EXIT
  python3 -m pip download -q --disable-pip-version-check --no-deps "ansible==$ANSIBLE_PACKAGE_VERSION" -d "$wheel_dir"
  python3 - "$wheel_dir" "$dest" <<'PY'
import glob, sys, zipfile
wheel = glob.glob(sys.argv[1] + "/ansible-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("ansible_collections/kubernetes/core/"):
            z.extract(name, sys.argv[2])
PY
fi
