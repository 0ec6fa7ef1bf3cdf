#!/usr/bin/env bash
# The GPU check: run on a machine with a GPU. It lists the devices, runs the GPU tests on each
# GPU device entry, and the benchmarks, and writes everything to one results folder.
#
#   scripts/gpu-check.sh                          # wgpu only (any Vulkan/Metal driver)
#   FEATURES=wgpu,cuda GPU_DEVICES="cuda:0 wgpu" scripts/gpu-check.sh
#
# FEATURES      cargo features to build (default `wgpu`; `cuda` needs cubecl's LLVM bundle, which
#               its build script downloads: see docs/guide/03-devices-and-gpus.md)
# GPU_DEVICES   device list entries to test and benchmark, one by one (default `wgpu`)
# OUT_DIR       where results go (default gpu-check-results)
set -uo pipefail
cd "$(dirname "$0")/.."
features=${FEATURES:-wgpu}
gpu_devices=${GPU_DEVICES:-wgpu}
out=${OUT_DIR:-gpu-check-results}
mkdir -p "$out"
failures=0

run() { # run NAME COMMAND...: logs to $out/NAME.log, records failures
  local name=$1; shift
  echo "=== $name: $*"
  if "$@" >"$out/$name.log" 2>&1; then echo "    ok"; else echo "    FAILED (see $out/$name.log)"; failures=$((failures + 1)); fi
}

cargo build --release --features "$features" --examples --tests 2>&1 | tail -3
run devices cargo run --release --features "$features" --example cifar10 -- --list-devices
cat "$out/devices.log"

for dev in $gpu_devices; do
  tag=${dev//[:*]/_}
  run "tests-$tag" env TOWERS_GPU_DEVICE="$dev" \
    cargo test --release --features "$features" --test integration gpu:: -- --nocapture
  run "bench_models-$tag" env TOWERS_BENCH_DEVICE="$dev" \
    cargo run --release -p towers-bench --features "$features" --bin bench_models
  run "bench_towers-$tag" env TOWERS_BENCH_DEVICE="$dev" \
    cargo run --release -p towers-bench --features "$features" --bin bench_towers
  for list in "$dev" "$dev,$dev"; do
    ltag=${list//[:*,]/_}
    run "cifar10-$ltag" cargo run --release --features "$features" --example cifar10 -- \
      --devices "$list" --max-steps 200 --log-every 50 --train-dir "$out/train-cifar10-$ltag"
    run "inception-$ltag" cargo run --release --features "$features" --example inception -- \
      --devices "$list" --image-size 299 --batch-size 32 --max-steps 20 --log-every 5 \
      --train-dir "$out/train-inception-$ltag"
  done
done

{
  echo "# GPU check, $(date -u +%FT%TZ), features $features"
  nvidia-smi -L 2>/dev/null || true
  cat "$out/devices.log"
  for f in "$out"/bench_*.log; do echo; echo "## $f"; cat "$f"; done
  for f in "$out"/cifar10-*.log "$out"/inception-*.log; do
    echo; echo "## $f"; grep -E 'examples/sec|precision|done at' "$f" | tail -4
  done
} >"$out/results.md"
echo "results: $out/results.md ($failures failed)"
exit $((failures > 0))
