#!/bin/sh
# SPDX-License-Identifier: MIT
# examples_interop.sh - runs the examples of issue 14 as a user would: examples/heat_stencil (a
# kernel of one's own from a .cl file, checked against the host) and, when configure found
# CLBlast, examples/clblast_direct (one's own CLBlastSgemm between clt operations). Each
# example checks its own result and exits non-zero on a mismatch. With no OpenCL device they
# say so and succeed. Run by 'make check' with $srcdir and $top_builddir set.
# Exit status: 0 pass, 1 fail, 99 hard error (automake's conventions).

srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
status=0

if "$top_builddir/examples/heat_stencil" "$srcdir/examples/heat_stencil.cl"; then
  echo "PASS: examples/heat_stencil"
else
  echo "FAIL: examples/heat_stencil (exit status $?)"
  status=1
fi

if [ -x "$top_builddir/examples/clblast_direct" ]; then
  if "$top_builddir/examples/clblast_direct"; then
    echo "PASS: examples/clblast_direct"
  else
    echo "FAIL: examples/clblast_direct (exit status $?)"
    status=1
  fi
else
  echo "SKIP: examples/clblast_direct (configure did not find CLBlast)"
fi
exit $status
