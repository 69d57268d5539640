#!/bin/sh
# SPDX-License-Identifier: MIT
# torch_grad.sh - clt's gradients against PyTorch's (issue 26): tests/torch_grad computes two
# losses of a 2-layer perceptron (cross_entropy; and mse_loss of softmax, logsumexp, log_softmax,
# tanh of a narrowed, transposed view) and their gradients with respect to W1, b1, W2, b2 and x
# in f64 on cpu and on each device of $CLT_TORCH_GRAD_DEVICES (default: every OpenCL device),
# lazy (deferred and fused) and eager, writing .npy files; tests/torch_grad.py recomputes them in
# PyTorch (float64, CPU) from the same weights and batch and wants each loss and gradient within
# a relative 1e-5 (max |clt - torch| over max |torch|, per tensor). PyTorch is test-only and never
# installed by the build or CI: the python is $CLT_TORCH_PYTHON, else python3 if it imports torch;
# with neither, the test skips (77). Run it with
#   make check TESTS=tests/torch_grad.sh CLT_TORCH_PYTHON=/path/to/venv/bin/python
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error (automake's conventions).
set -u
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
prog=$top_builddir/tests/torch_grad
[ -x "$prog" ] || { echo "ERROR: $prog was not built (make check builds it)" >&2; exit 99; }

has_torch() { "$1" -c 'import torch' >/dev/null 2>&1; }
py=
if [ -n "${CLT_TORCH_PYTHON-}" ]; then
  if ! has_torch "$CLT_TORCH_PYTHON"; then
    echo "ERROR: CLT_TORCH_PYTHON=$CLT_TORCH_PYTHON cannot import torch" >&2
    exit 99
  fi
  py=$CLT_TORCH_PYTHON
elif command -v python3 >/dev/null 2>&1 && has_torch python3; then
  py=python3
fi
if [ -z "$py" ]; then
  echo "SKIP: torch_grad: no python with PyTorch; run with CLT_TORCH_PYTHON=/path/to/python"
  echo "  (a python that imports torch, e.g. a venv with 'pip install torch'; CPU is enough):"
  echo "  make check TESTS=tests/torch_grad.sh CLT_TORCH_PYTHON=/path/to/python"
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/torch_grad.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
devices=${CLT_TORCH_GRAD_DEVICES-}
if [ -z "$devices" ]; then
  n=$("$top_builddir/tools/clt-devices" 2>/dev/null | grep -cE '^[* ] +cl:[0-9]')
  i=0
  while [ "$i" -lt "${n:-0}" ]; do
    devices="$devices cl:$i"
    i=$((i + 1))
  done
fi
fail=0
dirs=
for d in cpu $devices; do
  # Deferred and fused (lazy, on the host too: CLT_LAZY_HOST_MIN=1), then eager.
  for mode in lazy eager; do
    out=$tmp/$(echo "$d" | tr ':' '_')-$mode
    mkdir "$out" || exit 99
    if [ $mode = lazy ]; then
      CLT_LAZY=1 CLT_LAZY_HOST_MIN=1 "$prog" "$out" "$d" >"$tmp/log" 2>&1
    else
      CLT_LAZY=0 "$prog" "$out" "$d" >"$tmp/log" 2>&1
    fi
    rc=$?
    case $rc in
      0) dirs="$dirs $d,$mode=$out" ;;
      77) cat "$tmp/log"; echo "SKIP: torch_grad on $d ($mode)" ;;
      *) cat "$tmp/log"; echo "FAIL: torch_grad on $d ($mode; exit status $rc)"; fail=1 ;;
    esac
  done
done
if [ -n "$dirs" ]; then
  # shellcheck disable=SC2086 # one word per device
  "$py" "$srcdir/tests/torch_grad.py" $dirs || fail=1
else
  echo "FAIL: torch_grad: no device gave gradients"
  fail=1
fi
exit $fail
