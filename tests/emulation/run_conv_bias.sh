#!/bin/bash
# Runs kernels/cuda/conv_bias_cuda.cu's kernels on the host (tests/emulation/cuda_emul.h) against
# exact sums: a development aid for machines without a GPU, as run.sh is for layers_cuda.cu
# (not part of make test; ~10 s). On a GPU machine tests/test_model_options.c is the check.
# Usage: BUILD=build bash tests/emulation/run_conv_bias.sh [ROOT]
set -e
ROOT=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
D=$(mktemp -d); H=$(dirname "$0")
trap 'rm -rf "$D"' EXIT
python3 - "$ROOT" "$D" <<'PY'
import re, sys
s = open(sys.argv[1] + '/kernels/cuda/conv_bias_cuda.cu').read()
s = re.sub(r'([A-Za-z_]\w*(?:<[^<>;]*>)?)<<<(.*?)>>>\(', r'emul::launch(\2)(\1, ', s, flags=re.S)
s = s.replace('#include "kernels/conv_bias_cuda.cuh"', '#include "cuda_emul.h"\n#include "kernels/conv_bias_cuda.cuh"', 1)
open(sys.argv[2] + '/bias_emul.cc', 'w').write(s)
PY
F="-std=c++17 -O1 -w -I$H -I$ROOT -I/usr/local/cuda/include"
g++ $F -c "$D/bias_emul.cc" -o "$D/b.o"
g++ $F -c "$H/emul_runtime.cc" -o "$D/r.o"
g++ $F -c "$H/emul_conv_bias.cc" -o "$D/t.o"
g++ "$D/t.o" "$D/b.o" "$D/r.o" "$ROOT/${BUILD:-build}/libkernels.a" -L/usr/local/cuda/lib64 \
    -lcudart -lcublas -lcudnn -lopenblas -lpthread -lm -o "$D/emul_conv_bias"
"$D/emul_conv_bias"
