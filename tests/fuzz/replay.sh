#!/bin/sh
# SPDX-License-Identifier: MIT
# replay.sh - runs every fuzz target's seed corpus (tests/fuzz/corpus/<target>) through the target
# code with a plain main (tests/fuzz/replay_<target>), so that 'make check' catches a regression on
# those inputs without clang or libFuzzer: a broken invariant aborts, a file named ok-* must load
# (or the call under test succeed) and one named bad-* must fail. Run by 'make check' with
# $srcdir and $top_builddir set. Exit status: 0 pass, 1 fail, 99 hard error.

srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
corpus=$srcdir/tests/fuzz/corpus
if [ ! -d "$corpus" ]; then
  echo "FAIL: no seed corpus at $corpus" >&2
  exit 99
fi

status=0
for target in safetensors npy device_name shape; do
  # At least 8 inputs per target, so that a corpus lost from the tarball fails here.
  if ! "$top_builddir/tests/fuzz/replay_$target" --min 8 "$corpus/$target"; then
    echo "FAIL: the $target corpus" >&2
    status=1
  fi
done
exit $status
