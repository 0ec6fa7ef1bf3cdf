#!/usr/bin/env bash
# Builds the GPU bench's binaries for an NVIDIA machine without a Rust toolchain, and packs them
# into one folder to carry there (issue 49, item 5):
#
#   bench/gpu/build.sh                  # here: -> gpu-carry/{bench,tests}.tar.xz
#   BIN_DIR=gpu-carry DEVICE=cuda:0 bench/gpu/run.sh     # there
#
# CubeCL's CUDA backend compiles kernels through LLVM by default, and cubecl-llvm's build script
# downloads an LLVM bundle that build machines here cannot reach. So the binaries take the other
# compiler CubeCL has, NVRTC (CUDA C++, found at run time in the GPU machine's CUDA toolkit:
# towers-bench's `cuda-nvrtc` feature), and are linked without LLVM: DOCS_RS=1 is that build
# script's documented switch to step aside, and the linker leaves LLVM's symbols unresolved.
# Nothing on the NVRTC path calls them; a library of stubs, built here from what `ldd -r`
# finds missing, resolves them at load time (run.sh preloads it) and aborts loudly, naming the
# symbol, if one is ever called. CUDARC_CUDA_VERSION: the CUDA API cudarc binds (default 13000,
# the H200 machines' driver and toolkit, CUDA 13.0).
#
# Its own target directory (target/cuda-nvrtc): the flags above differ from every other build.
# Cold, on 2 cores: about 25 minutes to build, then about 9 and 3 minutes of xz (2026-12-04).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${CARRY_DIR:-gpu-carry}
target=target/cuda-nvrtc
# What the binaries are built from, read now (the build takes a while): packed into each archive
# and left beside them, so that run.sh prints it and a carry left in gpu-carry/ can be checked
# against the code before a GPU lease is spent on it.
built_from=$(git rev-parse HEAD; git status --porcelain --untracked-files=no | sed 's/^/changed: /'
  date -u '+built %Y-%m-%d %H:%M UTC')
# What run.sh runs: the benches, the examples (cold tuning), and the two test binaries with
# the GPU tests (`run.sh --tests`: TOWERS_GPU_DEVICE=cuda:0, against flex), carried as
# gpu-tests and multigpu-gpu-tests.
bins=(bench_models bench_towers bench_step bench_graph)
examples=(cifar10 inception)
mkdir -p "$target" # for the artifact list, before cargo makes it on a fresh checkout

DOCS_RS=1 CUDARC_CUDA_VERSION="${CUDARC_CUDA_VERSION:-13000}" \
  RUSTFLAGS="-C link-arg=-Wl,--unresolved-symbols=ignore-all" CARGO_TARGET_DIR=$target \
  cargo build --release -p towers-bench -p burn-towers -p towers-multigpu \
  --features towers-bench/cuda-nvrtc,burn-towers/cuda,towers-multigpu/cuda \
  "${bins[@]/#/--bin=}" "${examples[@]/#/--example=}" --test=integration \
  --message-format=json-render-diagnostics >"$target/artifacts.json"

work=$(mktemp -d)
# Each artifact under the name it is carried as: the test binaries' own names carry a hash.
python3 - "$target/artifacts.json" "$work" <<'PY'
import json, os, shutil, sys
tests = {".": "gpu-tests", "crates/multigpu": "multigpu-gpu-tests"}  # by the crate's folder
for line in open(sys.argv[1]):
    message = json.loads(line)
    if message.get("reason") != "compiler-artifact" or not message.get("executable"):
        continue
    name = message["target"]["name"]
    if "test" in message["target"]["kind"]:
        name = tests[os.path.relpath(os.path.dirname(message["manifest_path"]))]
    shutil.copy(message["executable"], f"{sys.argv[2]}/{name}")
PY
carried=("${bins[@]}" "${examples[@]}" gpu-tests multigpu-gpu-tests)
for file in "${carried[@]}"; do [ -x "$work/$file" ] || { echo "error: no $file built" >&2; exit 1; }; done

# The stubs: every symbol some binary leaves unresolved against this machine's libraries.
for file in "${carried[@]}"; do
  ldd -r "$work/$file" 2>&1 | sed -n 's/^undefined symbol: \([^ 	]*\).*/\1/p'
done | sort -u >"$work/symbols"
unexpected=$(grep -v -E '^(LLVM|cubecl_)' "$work/symbols" || true)
if [ -n "$unexpected" ]; then
  # Only LLVM's own symbols may go missing: anything else is a library the GPU machine must
  # have, or a real link error.
  echo "error: unresolved symbols that are not LLVM's:" >&2
  echo "$unexpected" | head -n 20 >&2
  exit 1
fi
{
  echo '#include <stdio.h>'
  echo '#include <stdlib.h>'
  echo 'static void stub(const char *name) {'
  echo '  fprintf(stderr, "fatal: %s called, but this build has no LLVM (bench/gpu/build.sh)\n", name);'
  echo '  abort();'
  echo '}'
  while read -r symbol; do echo "void $symbol(void) { stub(\"$symbol\"); }"; done <"$work/symbols"
} >"$work/stubs.c"
cc -shared -fPIC -O1 -o "$work/libllvm-stubs.so" "$work/stubs.c"
echo "$(wc -l <"$work/symbols") LLVM symbols stubbed"

# The carry, in two archives that a device call takes one at a time (a call carries 64 MiB
# with the working tree, ~12 MB: on 2026-12-04 the benches and examples packed to 50 MB, the
# test binaries to 11; name one in `carry`, as `gpu-carry/bench.tar.xz`): the benches and
# examples, and the test binaries. Stripped (panics still name their file and line; backtraces lose their
# names), then xz at its strongest, whose window spans every binary of an archive (they share
# most of their code).
strip "${carried[@]/#/$work/}"
mkdir -p "$out"
pack() { # ARCHIVE FILE...: the files and the stubs, into $out/ARCHIVE.tar.xz
  local archive=$1; shift
  (cd "$work" && tar -cf - "$@" libllvm-stubs.so built-from) \
    | xz -T1 --lzma2=preset=9,dict=1GiB >"$out/$archive.tar.xz"
  echo "$out/$archive.tar.xz: $(du -h "$out/$archive.tar.xz" | cut -f1)"
}
echo "$built_from" >"$work/built-from"
pack bench "${bins[@]}" "${examples[@]}"
pack tests gpu-tests multigpu-gpu-tests
cp "$work/built-from" "$out/built-from"
rm -rf "$work"
