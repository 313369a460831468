#!/usr/bin/env bash
# Time from `opkit init` to the first green `make test`, then an edit-and-test cycle:
#   cold: empty cargo target dir; `opkit init`, `opkit create api`, `make manifests`,
#         `make test` (the scaffolded controller test on an in-process control plane);
#   warm: touch src/controller/memcached.rs, `make test` again.
#
#   tools/bench/init-to-test.sh            # prints cold and warm seconds and crates compiled
#
# Uses $OPKIT if set, else target/release/opkit, else target/debug/opkit (build one with
# `cargo build -p opkit-cli`). The target dir is target/init-test-bench (emptied first).
# Each phase's cargo output is kept in target/init-test-bench/*.log.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
opkit=${OPKIT:-}
if [ -z "$opkit" ]; then
  for candidate in "$root/target/release/opkit" "$root/target/debug/opkit"; do
    [ -x "$candidate" ] && { opkit=$candidate; break; }
  done
fi
[ -n "$opkit" ] && [ -x "$opkit" ] || { echo "build the CLI first: cargo build -p opkit-cli" >&2; exit 1; }
bench=$root/target/init-test-bench
rm -rf "$bench"
mkdir -p "$bench"
export CARGO_TARGET_DIR=$bench/target
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
# `phase NAME CMD...`: runs CMD in the project, logs its output, prints seconds and the
# number of crates cargo compiled.
phase() {
  local name=$1; shift
  local start end
  start=$(now)
  "$@" > "$bench/$name.log" 2>&1 || { tail -40 "$bench/$name.log" >&2; exit 1; }
  end=$(now)
  printf '%-16s %7.1f s  %4d crates compiled\n' "$name" "$(echo "$end - $start" | bc)" \
    "$(grep -c '^ *Compiling ' "$bench/$name.log" || true)"
}

mkdir "$work/memcached-operator" && cd "$work/memcached-operator"
start=$(now)
phase init "$opkit" init --domain example.com --repo github.com/example/memcached-operator
phase create-api "$opkit" create api --group cache --version v1alpha1 --kind Memcached
phase make-manifests make manifests OPKIT="$opkit"
phase make-test make test OPKIT="$opkit"
printf '%-16s %7.1f s\n' "cold total" "$(echo "$(now) - $start" | bc)"
touch src/controller/memcached.rs
phase warm-make-test make test OPKIT="$opkit"
