#!/usr/bin/env bash
# Builds the release binaries the GPU machine runs (scripts/h200.sh) and
# stages them, stripped, in .carry/ (git-ignored; the device tool carries it).
# The device tool carries 64 MiB at most: binaries are staged gzipped
# (h200.sh unpacks them), the CPU-side benchmarks that the `cpu` and `fil`
# sections need (cpu_vs_bellperson, fil_c2) only with CARRY_BENCHES=1, and
# the `pce` test binary only without it.
set -euo pipefail
cd "$(dirname "$0")/.."
exe() { python3 -c '
import sys, json
for line in sys.stdin:
    try: m = json.loads(line)
    except ValueError: continue
    if m.get("reason") == "compiler-artifact" and "/deps/" in (m.get("executable") or ""): print(m["executable"])'; }
rm -rf .carry && mkdir -p .carry
# nvcc on PATH, as on any GPU host with a toolkit (NVCC, CUDA_HOME and .cuda/ build the same way).
[ -x .cuda/nvidia/cu13/bin/nvcc ] && export PATH="$PWD/.cuda/nvidia/cu13/bin:$PATH"
cargo build --release --bin cuzk
cp target/release/cuzk .carry/
cp "$(cargo test --release --no-run -p cuzk-gpu --test gpu_ops --message-format=json | exe)" .carry/gpu_ops
cp "$(cargo test --release --no-run --test gpu_proofs --message-format=json | exe)" .carry/gpu_proofs
cp "$(cargo bench --no-run -p cuzk-gpu --bench msm --message-format=json | exe)" .carry/msm
cp "$(cargo test --release --no-run -p cuzk-stages --test setup --message-format=json | exe)" .carry/setup_test
cp "$(cargo bench --no-run -p cuzk-stages --bench setup --message-format=json | exe)" .carry/setup_bench
if [ "${CARRY_BENCHES:-0}" = 1 ]; then
  cp "$(cargo bench --no-run --bench cpu_vs_bellperson --message-format=json | exe)" .carry/cpu_vs_bellperson
  cp "$(cargo bench --no-run --bench fil_c2 --message-format=json | exe)" .carry/fil_c2
else
  cp "$(cargo test --release --no-run --test pce --message-format=json | exe)" .carry/pce
fi
if [ -x .cuda/nvidia/cu13/bin/nvcc ]; then
  (cd anchors && cargo build --release)
  cp anchors/target/release/supraseal-bench .carry/
fi
strip .carry/*
gzip -9 .carry/*
du -sh .carry
