#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/numpy_lane.sh - the NumPy reference lane of the differential tester (issue 32): the
# programs of seeds 1..CLT_NUMPY_SEEDS (default 8000, about 15 s; or A:B), run eagerly on the host by
# tests/difftest --numpy, replayed in NumPy by tests/diff/numpy_check.py, which allows only the
# differences docs/operations.md documents. Skips (77) without python3 and numpy.
srcdir=${srcdir:-.}
seeds=${CLT_NUMPY_SEEDS:-8000}
case $seeds in *:*) range=$seeds ;; *) range=1:$seeds ;; esac
py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy' 2>/dev/null; then
    py=$p
    break
  fi
done
if [ -z "$py" ]; then
  echo "numpy_lane: SKIP: no python3 with numpy (Debian: apt-get install python3-numpy)"
  exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/clt-numpy.XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
./tests/difftest --seeds "$range" --numpy "$dir" || exit 1
"$py" "$srcdir/tests/diff/numpy_check.py" --ops "$srcdir/include/clt_ops.h" "$dir"
