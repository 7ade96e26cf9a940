#!/usr/bin/env bash
# Prepares the GPU check on this (GPU-less) machine: builds the suite for sm_90 into
# build-device/ and copies the non-CUDA shared libraries the programs need (Google
# Benchmark, TurboJPEG, cmocka; not CUDA, cuDNN or NCCL, which the GPU machine has)
# into device-stage/lib. Then: run tool, carry ["build-device", "device-stage"],
# command "bash scripts/device-check.sh 420".
set -euo pipefail
cd "$(dirname "$0")/.."
make -j"$(nproc)" BUILD=build-device CUDA_ARCH="${CUDA_ARCH:-90}" all
rm -rf device-stage && mkdir -p device-stage/lib
for prog in build-device/bench_* build-device/tests/test_* build-device/context build-device/train; do
  [[ -x $prog && ! -d $prog ]] || continue
  ldd "$prog" | awk '/=> \// { print $3 }'
done | sort -u | grep -E 'libbenchmark|libturbojpeg|libcmocka|libgomp|libmpi|libopen-|libhwloc|libevent|libpmix' |
  while read -r lib; do cp -L "$lib" device-stage/lib/; done
du -sh build-device device-stage
