#!/usr/bin/env bash
# The GPU bench (issue 49, item 5), from binaries built beforehand, on a machine without Rust:
#
#   BIN_DIR=dir DEVICE=cuda:0 bench/gpu/run.sh          # the full run, < 10 min on a GPU
#   BIN_DIR=target/debug DEVICE=wgpu bench/gpu/run.sh --smoke   # one step of each (CI, lavapipe: ~4 min)
#
# BIN_DIR holds bench_models and bench_towers, built with the GPU backend's feature (`cargo build
# --release -p towers-bench --features cuda --bin bench_models --bin bench_towers`; default
# target/release). TUNING_BUNDLE: a tuning bundle written by an example's `--save-tuning` on a
# machine with the same GPU and versions; it becomes CubeCL's tuning database here (where
# CubeCL looks from the working directory: `target/environment/default.db` under the outermost
# Cargo.toml above it, else `~/.cache/cubecl/default.db`), so the warm-up tunes nothing. Then: the CIFAR-10 and Inception v3 training
# steps (bench_models: forward, backward, plain SGD) in f32 and bf16 on 1 tower, the CIFAR-10
# step on 2 towers of the one GPU and through `Towers` on 1 (bench_towers), PyTorch's steps on
# the same GPU where python3 has torch (bench/peers/torch_step.py), and the ratios (PyTorch's
# ms/image over ours: above 1, we are faster). Logs in $OUT (default gpu-bench-results/).
# flex+GPU towers are not timed here: bench_towers pairs one device with itself.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
BIN_DIR="${BIN_DIR:-target/release}"
DEVICE="${DEVICE:-wgpu}"
OUT="${OUT:-gpu-bench-results}"
smoke=false
[ "${1:-}" = "--smoke" ] && smoke=true
mkdir -p "$OUT"
export TOWERS_BENCH_DEVICE="$DEVICE"
for bin in bench_models bench_towers; do
  [ -x "$BIN_DIR/$bin" ] || { echo "error: no $BIN_DIR/$bin (set BIN_DIR)" >&2; exit 2; }
done
tuning_db() { # where CubeCL keeps its tuning, seen from here (cubecl-environment's root.rs)
  local dir=$PWD root=""
  while :; do
    [ -f "$dir/Cargo.toml" ] && root=$dir
    [ "$dir" = / ] && break
    dir=$(dirname "$dir")
  done
  if [ -n "$root" ]; then echo "$root/target/environment/default.db"
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/cubecl/default.db"; fi
}
if [ -n "${TUNING_BUNDLE:-}" ]; then
  db=$(tuning_db)
  mkdir -p "$(dirname "$db")"
  cp "$TUNING_BUNDLE" "$db"
  echo "tuning: $TUNING_BUNDLE is now $db"
fi
# Smoke: one timed step each and the small net only; the full run times the steps after the
# warm-ups (which also tune every kernel the steps use, shown on stderr).
if $smoke; then reps=1; towers_reps=1; models="cifar10"; else reps=5; towers_reps=10; models="cifar10 inception"; fi
start=$SECONDS

echo "== our steps on $DEVICE (bench_models, ms/image)"
for model in $models; do
  for precision in f32 bf16; do
    "$BIN_DIR/bench_models" "$reps" "$model" "$precision" | tee -a "$OUT/ours.txt"
  done
done
echo "== 1 tower and 2 towers of $DEVICE (bench_towers, CIFAR-10 net without LRN)"
"$BIN_DIR/bench_towers" "$towers_reps" | tee "$OUT/towers.txt"

torch_ok=false
if ! $smoke && python3 -c "import torch" 2>/dev/null; then
  torch_ok=true
  echo "== PyTorch on the same GPU"
  python3 "$here/../peers/torch_step.py" --models "${models// /,}" --precisions f32,bf16 \
    | tee "$OUT/torch.txt"
fi

# Ratios: PyTorch's train-step ms/image over ours, per model and precision. bench_models'
# columns, as ours_ms reads them: a change there must come here too.
columns="model batch forward ms/image train step ms/image launches/step"
header=$(grep -m1 '^model ' "$OUT/ours.txt" | tr -s ' ')
[ "$header" = "$columns" ] || {
  echo "error: bench_models' columns are '$header'; this script reads '$columns'" >&2
  exit 1
}
ours_ms() { # MODEL-NAME PRECISION -> our train step ms/image (a row's last fields: train step
  # ms/image, launches/step); empty without the row (a precision the device lacks), an error
  # where that field is not a time
  local ms
  ms=$(awk -v name="$1 ($2)" 'index($0, name) == 1 { print $(NF-1) }' "$OUT/ours.txt" | tail -n 1)
  [ -z "$ms" ] || [[ "$ms" =~ ^[0-9]+\.[0-9]+$ ]] || {
    echo "error: bench_models' row for $1 ($2) has '$ms' where its train step ms/image goes" >&2
    exit 1
  }
  echo "$ms"
}
echo "== ratios (PyTorch ms/image / ours; above 1: faster than PyTorch)"
for model in $models; do
  case $model in cifar10) name="CIFAR-10 net, 24x24";; inception) name="Inception v3, 299x299";; esac
  for precision in f32 bf16; do
    ours=$(ours_ms "$name" "$precision")
    if $torch_ok; then
      theirs=$(awk -v m="$model" -v p="$precision" '$1 == m && $2 == p { print $4 }' "$OUT/torch.txt")
      awk -v o="$ours" -v t="$theirs" -v m="$model" -v p="$precision" \
        'BEGIN { printf "%-10s %-5s ours %8.3f  torch %8.3f  ratio %.2fx\n", m, p, o, t, t / o }'
    else
      echo "$model $precision: ours ${ours:-?} ms/image (no torch here: no ratio)"
    fi
  done
done | tee "$OUT/ratios.txt"
echo "done in $((SECONDS - start)) s; logs in $OUT/"
