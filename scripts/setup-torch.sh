#!/usr/bin/env bash
# setup-torch.sh: PyTorch for the twin (scripts/torch_twin.py; tests/test_twin.c) in a virtual
# environment, cache/venv, that the twin's users pick when $PYTHON is unset
# (tests/test_twin.c, scripts/twin_compare.py). A virtual environment because a stock Debian
# python3 refuses `pip install` (PEP 668: "externally-managed-environment").
#   - cache/venv already imports torch: nothing to do (CI's every run after the first).
#   - else the venv is made with --system-site-packages, so a torch the base Python already
#     has (a pyenv or conda Python, Debian's python3-torch) is reused, not downloaded again;
#   - only when that venv still cannot import torch: pip install torch into it (PyPI, a
#     large download; SETUP_TORCH_PIP_ARGS replaces "torch", e.g. "torch --index-url
#     https://download.pytorch.org/whl/cpu" for the CPU-only wheel).
# Exits 0 when the venv imports torch; else 1, saying exactly why and what to run.
# SETUP_SKIP_TORCH=1: does nothing (exit 0). SETUP_PYTHON: the base Python (python3).
# SETUP_VENV: the environment's folder (cache/venv; the twin's users look only there).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${SETUP_VENV:-$root/cache/venv}
base=${SETUP_PYTHON:-python3}
py=$venv/bin/python

if [[ ${SETUP_SKIP_TORCH:-0} == 1 ]]; then
  echo "setup: SETUP_SKIP_TORCH=1: not installing torch (the twin's tests will skip)"
  exit 0
fi

torch_version() { "$1" -c 'import torch; print(torch.__version__)' 2>/dev/null | tail -n 1; }

# Says why it cannot, the fix, and fails.
cannot() {
  echo "setup: cannot install torch for the PyTorch twin: $1" >&2
  echo "setup: fix it and rerun bash scripts/setup.sh, or set PYTHON to a Python with torch," \
       "or SETUP_SKIP_TORCH=1 to go without the twin (its tests then skip; CI fails)" >&2
  exit 1
}

if [[ -x $py ]] && v=$(torch_version "$py") && [[ -n $v ]]; then
  echo "setup: torch $v in $venv"
  exit 0
fi
if [[ ! -x $py ]]; then
  command -v "$base" >/dev/null 2>&1 || [[ -x $base ]] ||
    cannot "no $base to make the virtual environment with (Debian: apt-get install python3 python3-venv)"
  # The base Python's pip (Debian's python3-pip, seen through --system-site-packages)
  # installs into the venv just as well, and skipping ensurepip saves seconds per venv.
  no_pip=()
  "$base" -c 'import pip' >/dev/null 2>&1 && no_pip=(--without-pip)
  if ! out=$("$base" -m venv --system-site-packages "${no_pip[@]}" "$venv" 2>&1); then
    rm -rf "$venv"
    cannot "$base -m venv failed: $(tail -n 1 <<<"$out") (Debian: apt-get install python3-venv)"
  fi
fi
if v=$(torch_version "$py") && [[ -n $v ]]; then
  echo "setup: torch $v in $venv (reused from $base through --system-site-packages; nothing downloaded)"
  exit 0
fi
read -r -a pip_args <<<"${SETUP_TORCH_PIP_ARGS:-torch}"
echo "setup: installing torch into $venv for the PyTorch twin ($py -m pip install ${pip_args[*]}; a large download)"
if ! out=$("$py" -m pip install --quiet --disable-pip-version-check "${pip_args[@]}" 2>&1); then
  cannot "$py -m pip install ${pip_args[*]} failed: $(grep -E 'ERROR|error:' <<<"$out" | tail -n 2 | tr '\n' ' ')"
fi
v=$(torch_version "$py")
[[ -n $v ]] || cannot "pip installed torch into $venv but $py still cannot import it: $("$py" -c 'import torch' 2>&1 | tail -n 1)"
echo "setup: torch $v installed in $venv"
