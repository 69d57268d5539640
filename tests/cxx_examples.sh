#!/bin/sh
# SPDX-License-Identifier: MIT
# cxx_examples.sh - the C++ examples against their C twins (issue 16): examples/portable_cpp prints
# exactly what examples/portable prints, examples/train_linear_cpp trains to the same weights and
# examples/train_mlp_cpp to the same losses, examples/cg_poisson_cpp to the same solution,
# bit for bit (--weights prints them with %.9g, which tells every f32 apart), printing the same
# lines on the way (stdout and stderr both compared). On cl:0 when there is one, else on cpu.
set -u
top_builddir=${top_builddir:-.}
ex=$top_builddir/examples
tmp=${TMPDIR:-/tmp}/clt-cxx-examples.$$
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT

CLT_DEVICE=cl:0
"$ex/portable" >/dev/null 2>&1 || CLT_DEVICE=cpu
export CLT_DEVICE
echo "cxx_examples.sh: on $CLT_DEVICE"

fail=0
same() { # NAME ARGS...: the C and the C++ program print the same, and both succeed
  name=$1
  shift
  "$ex/$name" "$@" >"$tmp/c" 2>"$tmp/c.err" || { echo "FAIL: $name $* failed"; cat "$tmp/c.err"; fail=1; }
  "$ex/${name}_cpp" "$@" >"$tmp/cpp" 2>"$tmp/cpp.err" || { echo "FAIL: ${name}_cpp $* failed"; cat "$tmp/cpp.err"; fail=1; }
  if cmp -s "$tmp/c" "$tmp/cpp" && cmp -s "$tmp/c.err" "$tmp/cpp.err"; then
    echo "PASS: ${name}_cpp${*:+ $*} prints what $name prints ($(cat "$tmp/c" "$tmp/c.err" | wc -l) lines)"
  else
    echo "FAIL: ${name}_cpp${*:+ $*} differs from $name (stdout, then stderr):"
    diff "$tmp/c" "$tmp/cpp"
    diff "$tmp/c.err" "$tmp/cpp.err"
    fail=1
  fi
}
same portable
# --weights: the weights alone on stdout, at %.9g; the rest of the output (epochs, losses,
# transfers) on stderr, compared too
same train_linear --weights
# --losses: the per-epoch losses of the MLP (autograd, cross_entropy, AdamW), at %.9g
same train_mlp --losses
# the Poisson problem by CG and by clt::linalg::solve, without the times
same cg_poisson --no-times 12
exit $fail
