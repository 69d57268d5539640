#!/bin/sh
# SPDX-License-Identifier: MIT
# mpi.sh - runs tests/mpi_test under mpirun with 2 and then 3 ranks (more ranks than the two
# PoCL devices, so that two ranks share one), first with the default chunk size and 64 MiB
# tensors (--large), then with tiny chunks and MPI counts, each also with CLT_MPI_MAP=0 (PoCL's
# devices share the host's memory, so MPI works on the mapped tensors unless told to copy them
# through staging slots), then on the reference backend's ref:0 too (CLT_REF_DEVICES=1, --ref),
# which always copies; each run bounded by a 240 s timeout
# so that a hang fails instead of stalling 'make check'. Run by 'make check' with $top_builddir
# set, only when configure found MPI.
# Exit status: 0 pass, 1 fail, 77 skip (no mpirun), 99 hard error (automake's conventions).

top_builddir=${top_builddir:-.}
prog=$top_builddir/tests/mpi_test

if ! command -v mpirun >/dev/null 2>&1; then
  echo "SKIP: mpirun not found (apt-get install openmpi-bin)"
  exit 77
fi
[ -x "$prog" ] || { echo "ERROR: $prog was not built" >&2; exit 99; }

# POCL_DEVICES and the mpirun flags ($flags), shared with the other MPI test.
. "$(dirname "$0")/mpi_env.sh"
limit=240
if command -v timeout >/dev/null 2>&1; then
  bound="timeout $limit"
else
  bound=
fi

# Each run is bounded so that a hang fails instead of stalling 'make check'.
run() { # run NP ARGS...: mpirun -np NP tests/mpi_test ARGS, bounded; sets status on failure
  np=$1
  shift
  # shellcheck disable=SC2086 # $bound and $flags are lists of words
  $bound mpirun $flags -np "$np" "$prog" "$@"
  rc=$?
  if [ "$rc" -eq 124 ]; then
    echo "FAIL: mpirun -np $np $prog $* timed out after $limit s" >&2
    status=1
  elif [ "$rc" -ne 0 ]; then
    echo "FAIL: mpirun -np $np $prog $* exited with $rc" >&2
    status=1
  fi
}

# run_copies NP ARGS...: run, with MPI on copies of device tensors, never on mapped memory
run_copies() {
  CLT_MPI_MAP=0
  export CLT_MPI_MAP
  run "$@"
  unset CLT_MPI_MAP
}

status=0
# The default chunks, with the large tensors (ordering, 64 MiB).
unset CLT_MPI_CHUNK CLT_MPI_MAX_COUNT CLT_MPI_MAP
for np in 2 3; do
  run $np --large
done
run_copies 2 --large
# Chunks of 20 bytes (5 f32, 2 f64: boundaries inside most tensors) and MPI calls of at most
# 3 elements (host tensors cross chunk boundaries too), small tensors only.
CLT_MPI_CHUNK=20
CLT_MPI_MAX_COUNT=3
export CLT_MPI_CHUNK CLT_MPI_MAX_COUNT
for np in 2 3; do
  run $np
  run_copies $np
done
# The reference backend (lib/ref/), staged with memcpy: tiny chunks at 2 and 3 ranks, then the
# default chunks.
CLT_REF_DEVICES=1
export CLT_REF_DEVICES
for np in 2 3; do
  run $np --ref
done
unset CLT_MPI_CHUNK CLT_MPI_MAX_COUNT
run 2 --ref
exit $status
