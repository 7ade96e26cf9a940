#!/bin/bash
# Runs our CUDA layer kernels (kernels/cuda/layers_cuda.cu and layers_cuda_bn.cu) on the host
# (one std::thread per CUDA thread; blocks in turn; __syncthreads and warp shuffles through
# barriers) against the CPU reference.
# Usage: BUILD=build bash tests/emulation/run.sh [ROOT] [part: 0 element-wise, 1 2 3 BN shapes; default all]
# A development aid for machines without a GPU (not part of make test: ~1 min for part 0,
# minutes per BN part): after changing our CUDA layer kernels, run it; on a GPU machine
# tests/test_layers_gpu.c is the real check. Launches are rewritten by a regex
# (kernel<<<grid, block, smem, stream>>>(...) -> emul::launch(...)(kernel, ...)), so keep
# launches on that form.
# (links $ROOT/$BUILD/libkernels.a for check.c's error helpers)
# Slow (minutes per BN shape on 2 cores): for checking kernel logic without a GPU.
set -e
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}; PART=${2:--1}
D=$(mktemp -d); H=$(dirname "$0")
trap 'rm -rf "$D"' EXIT
python3 - "$ROOT" "$D" <<'PY'
import re, sys
for name in ('layers_cuda', 'layers_cuda_bn'):  # the kernels by family (kernels/cuda/)
    s = open(sys.argv[1] + '/kernels/cuda/' + name + '.cu').read()
    s = re.sub(r'extern __shared__ float (\w+)\[\];', r'float *\1 = emul::dynamic_smem<float>();', s)
    s = re.sub(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)<<<(.*?)>>>\(', r'emul::launch(\2)(\1, ', s)
    open(sys.argv[2] + '/' + name + '_emul.cc', 'w').write('#include "cuda_emul.h"\n' + s)
PY
F="-std=c++17 -O1 -w -I$H -I$ROOT -I/usr/local/cuda/include"
g++ $F -c "$D/layers_cuda_emul.cc" -o "$D/l.o"
g++ $F -c "$D/layers_cuda_bn_emul.cc" -o "$D/lbn.o"
g++ $F -c "$H/emul_runtime.cc" -o "$D/r.o"
g++ $F -c "$H/emul_test.cc" -o "$D/t.o"
gcc -O2 -I"$ROOT" -c "$ROOT/kernels/reference/layers_cpu.c" -o "$D/c.o"
g++ "$D/t.o" "$D/l.o" "$D/lbn.o" "$D/r.o" "$D/c.o" "$ROOT/${BUILD:-build}/libkernels.a" -L/usr/local/cuda/lib64 \
    -lcudart -lcublas -lcudnn -lopenblas -lpthread -lm -o "$D/emul_test"
"$D/emul_test" "$PART"
