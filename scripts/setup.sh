#!/usr/bin/env bash
# Installs what building and testing cuzk needs on a fresh Debian/Ubuntu
# machine that has Rust (rustup) and Python 3 with pip:
#   - protoc (Debian's protobuf-compiler): build.rs generates the daemon's
#     cuzk.v1 gRPC code with it;
#   - the CUDA 13.0 compiler from PyPI into .cuda/, so the CUDA kernels are
#     built even on machines without a GPU (the binary then falls back to the
#     CPU at run time, and uses the GPU where one is present), and cuobjdump
#     beside it.
# Safe to run again: it skips what is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else "$@"; fi; }

if ! command -v protoc >/dev/null; then
  echo "setup: installing protobuf-compiler" >&2
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq protobuf-compiler >/dev/null
fi

cuda="$root/.cuda/nvidia/cu13"
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "setup: installing the CUDA 13.0 compiler from PyPI into .cuda/" >&2
  python3 -m pip install -q --disable-pip-version-check --target "$root/.cuda" \
    nvidia-cuda-nvcc==13.0.88 nvidia-cuda-crt==13.0.88 nvidia-nvvm==13.0.88 \
    nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85
fi
# cuobjdump lists the architectures the built kernels carry (a kernels test
# checks them). Its first wheel is 13.2; it reads 13.0's objects. A separate
# target: pip --target skips directories that already exist (nvidia/).
if [ ! -x "$cuda/bin/cuobjdump" ]; then
  echo "setup: installing cuobjdump from PyPI into .cuda/" >&2
  python3 -m pip install -q --disable-pip-version-check --target "$root/.cuda/cuobjdump" \
    nvidia-cuda-cuobjdump==13.2.51
  ln -sfn "$root/.cuda/cuobjdump/nvidia/cu13/bin/cuobjdump" "$cuda/bin/cuobjdump"
fi
# The wheels put everything under lib/; nvcc and cc-rs look in lib64/ and
# targets/x86_64-linux/ as a toolkit install has them.
ln -sfn lib "$cuda/lib64"
mkdir -p "$cuda/targets/x86_64-linux"
ln -sfn ../../lib "$cuda/targets/x86_64-linux/lib"
ln -sfn ../../include "$cuda/targets/x86_64-linux/include"
echo "setup: ready (protoc $(protoc --version | cut -d' ' -f2), nvcc $("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))" >&2
