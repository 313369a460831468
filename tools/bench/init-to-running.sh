#!/usr/bin/env bash
# Time from `opkit init` to a running operator: init, create api, the tutorial's edits
# (the Memcached files of examples/memcached-operator), `opkit generate`, then `opkit run`
# until the operator logs "starting manager", against a local `opkit cluster start`.
#
#   tools/bench/init-to-running.sh cold   # emptied cargo target dir: every dependency is built
#   tools/bench/init-to-running.sh warm   # the target dir a cold run left: only the project builds
#
# Prints one line: mode and seconds. Needs `cargo build --release -p opkit-cli` first.
set -euo pipefail
mode=${1:-warm}
root=$(cd "$(dirname "$0")/../.." && pwd)
opkit=$root/target/release/opkit
[ -x "$opkit" ] || { echo "build the CLI first: cargo build --release -p opkit-cli" >&2; exit 1; }
work=$(mktemp -d)
export CARGO_TARGET_DIR=$root/target/init-bench
case "$mode" in
  cold) rm -rf "$CARGO_TARGET_DIR" ;;
  warm) ;;
  *) echo "usage: $0 cold|warm" >&2; exit 2 ;;
esac
cleanup() {
  [ -n "${run_pid:-}" ] && kill -TERM "$run_pid" 2>/dev/null && wait "$run_pid" 2>/dev/null
  [ -n "${cluster_pid:-}" ] && kill -TERM "$cluster_pid" 2>/dev/null && wait "$cluster_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

"$opkit" cluster start --in-memory --port 0 --data-dir "$work/cluster" -o json > "$work/cluster.json" &
cluster_pid=$!
until [ -s "$work/cluster.json" ]; do sleep 0.1; done
export KUBECONFIG=$work/cluster/kubeconfig

start=$(date +%s.%N)
mkdir "$work/memcached-operator" && cd "$work/memcached-operator"
"$opkit" init --domain example.com --repo github.com/example/memcached-operator >/dev/null 2>&1
"$opkit" create api --group cache --version v1alpha1 --kind Memcached >/dev/null 2>&1
example=$root/examples/memcached-operator
for f in src/api/cache_v1alpha1/memcached.rs src/controller/memcached.rs config/samples/cache_v1alpha1_memcached.yaml; do
  cp "$example/$f" "$f"
done
"$opkit" generate >/dev/null 2>&1
: > "$work/run.log"
"$opkit" run -- --metrics-bind-address 0 --health-probe-bind-address 0 > "$work/run.log" 2>&1 &
run_pid=$!
until grep -q "starting manager" "$work/run.log"; do
  kill -0 "$run_pid" 2>/dev/null || { cat "$work/run.log" >&2; exit 1; }
  sleep 0.2
done
end=$(date +%s.%N)
echo "$mode $(echo "$end - $start" | bc) s"
