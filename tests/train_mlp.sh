#!/bin/sh
# SPDX-License-Identifier: MIT
# train_mlp.sh - examples/train_mlp gives the same loss curve on every device (issue 26): the
# per-epoch losses (--losses, %.9g) on cpu and on each device of $CLT_TRAIN_MLP_DEVICES (default:
# every OpenCL device, cl:1 with the grid launch shape) agree within a relative 1e-4 (the ops run
# in the same order everywhere, but reductions and matmuls may sum in another order on another
# device: measured, the curves on cpu, PoCL and Oclgrind differ by 1e-7 relative at most), and the
# curve goes down (the example itself fails below 90% accuracy). Run by 'make check'; the GPU lane
# (.ci/lanes/60-gpu) runs it with Oclgrind as cl:0.
# Exit status: 0 pass, 1 fail, 99 hard error (automake's conventions).
set -u
top_builddir=${top_builddir:-.}
ex=$top_builddir/examples/train_mlp
[ -x "$ex" ] || { echo "ERROR: $ex was not built" >&2; exit 99; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/train_mlp.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
tol=1e-4
if ! CLT_DEVICE=cpu "$ex" --losses >"$tmp/cpu" 2>"$tmp/cpu.err"; then
  cat "$tmp/cpu.err"
  echo "FAIL: train_mlp on cpu"
  exit 1
fi
devices=${CLT_TRAIN_MLP_DEVICES-}
if [ -z "$devices" ]; then
  n=$("$top_builddir/tools/clt-devices" 2>/dev/null | grep -cE '^[* ] +cl:[0-9]')
  i=0
  while [ "$i" -lt "${n:-0}" ]; do
    devices="$devices cl:$i"
    i=$((i + 1))
  done
fi
fail=0
for d in $devices; do
  if ! CLT_DEVICE=$d CLT_KERNEL_SHAPE=cl:1=grid "$ex" --losses >"$tmp/dev" 2>"$tmp/dev.err"; then
    cat "$tmp/dev.err"
    echo "FAIL: train_mlp on $d"
    fail=1
    continue
  fi
  if awk -v tol="$tol" -v d="$d" '
      NR == FNR { want[FNR] = $1; n = FNR; next }
      { got[FNR] = $1; m = FNR }
      END {
        if (n != m || n < 2) { printf "FAIL: %s: %d losses, cpu %d\n", d, m, n; exit 1 }
        worst = 0
        for (i = 1; i <= n; i++) {
          r = (got[i] - want[i]) / want[i]; if (r < 0) r = -r
          if (r > worst) worst = r
        }
        if (worst > tol) { printf "FAIL: %s: the loss curve differs from cpu by %g relative\n", d, worst; exit 1 }
        if (!(want[n] < want[1] / 4)) { printf "FAIL: the loss went from %s to %s only\n", want[1], want[n]; exit 1 }
        printf "PASS: %s: %d epochs, loss %s -> %s, %g relative to cpu at most\n", d, n, got[1], got[n], worst
      }' "$tmp/cpu" "$tmp/dev"; then :; else fail=1; fi
done
exit $fail
