#!/bin/sh
# SPDX-License-Identifier: MIT
# mpi_linear.sh - data-parallel training gives the single-process weights: runs
# examples/train_linear --weights, then examples/mpi_linear --weights under mpirun with 2 and 3
# ranks (3 shards of 33, 33 and 34 rows: unequal), and compares the printed weights number by
# number within a relative tolerance of 1e-4 (the sums run in another order, so the last bits
# may differ). Run by 'make check' with $top_builddir set, only when configure found MPI.
# Exit status: 0 pass, 1 fail, 77 skip (no mpirun), 99 hard error (automake's conventions).

top_builddir=${top_builddir:-.}
single=$top_builddir/examples/train_linear
multi=$top_builddir/examples/mpi_linear
tol=1e-4

if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin)"
  exit 77
fi
for p in "$single" "$multi"; do
  [ -x "$p" ] || { echo "ERROR: $p was not built" >&2; exit 99; }
done

# POCL_DEVICES and the mpirun flags ($flags), shared with the other MPI test.
. "$(dirname "$0")/mpi_env.sh"
unset CLT_MPI_CHUNK CLT_MPI_MAX_COUNT
bound=
command -v timeout >/dev/null 2>&1 && bound="timeout 120"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/mpi_linear.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

if ! $bound "$single" --weights >"$tmp/single" 2>"$tmp/single.err"; then
  cat "$tmp/single.err" >&2
  echo "FAIL: $single --weights failed" >&2
  exit 1
fi
echo "train_linear: $(tr '\n' ' ' <"$tmp/single")"

status=0
for np in 2 3; do
  # shellcheck disable=SC2086 # $bound and $flags are lists of words
  if ! $bound mpirun $flags -np $np "$multi" --weights >"$tmp/multi" 2>"$tmp/multi.err"; then
    cat "$tmp/multi.err" >&2
    echo "FAIL: mpirun -np $np $multi --weights failed" >&2
    status=1
    continue
  fi
  echo "mpi_linear -np $np: $(tr '\n' ' ' <"$tmp/multi")"
  # Three numbers each, pairwise within tol relative to the single-process value.
  if ! awk -v tol="$tol" -v np="$np" '
      NR == FNR { want[FNR] = $1; nwant = FNR; next }
      { got[FNR] = $1; ngot = FNR }
      END {
        if (nwant != 3 || ngot != 3) {
          printf "FAIL: -np %d: expected 3 numbers from each program, got %d and %d\n", np, nwant, ngot
          exit 1
        }
        bad = 0
        for (i = 1; i <= 3; i++) {
          d = got[i] - want[i]; if (d < 0) d = -d
          m = want[i]; if (m < 0) m = -m
          if (got[i] != got[i] + 0 || d > tol * (m > 1 ? m : 1)) {
            printf "FAIL: -np %d: weight %d is %s, single-process %s (tolerance %s)\n", np, i, got[i], want[i], tol
            bad = 1
          }
        }
        exit bad
      }' "$tmp/single" "$tmp/multi" >&2; then
    status=1
  fi
done
exit $status
