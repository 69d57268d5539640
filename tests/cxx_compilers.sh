#!/bin/sh
# SPDX-License-Identifier: MIT
# cxx_compilers.sh - include/clt.hpp compiles cleanly (C++17, -Wall -Wextra -Wpedantic -Werror)
# with every C++ compiler here: g++ and clang++ when present, besides the configured one that
# 'make check' builds tests/cxx_api with. Compile only (the configured build links and runs them);
# both the exceptions form and CLT_NO_EXCEPTIONS with -fno-exceptions. Skips (77) with none.
set -u
srcdir=${srcdir:-.}
tried=0
fail=0
for cxx in g++ clang++; do
  command -v "$cxx" >/dev/null 2>&1 || { echo "SKIP: $cxx not found"; continue; }
  for t in "cxx_api.cpp" "cxx_noexcept.cpp -DCLT_NO_EXCEPTIONS -fno-exceptions"; do
    # shellcheck disable=SC2086 # $t is a file and its flags
    set -- $t
    file=$1
    shift
    if "$cxx" -std=c++17 -Wall -Wextra -Wpedantic -Werror -I"$srcdir/include" "$@" -fsyntax-only \
      "$srcdir/tests/$file"; then
      echo "PASS: $cxx $file${*:+ $*}"
    else
      echo "FAIL: $cxx $file${*:+ $*}"
      fail=1
    fi
    tried=$((tried + 1))
  done
done
[ "$tried" -gt 0 ] || exit 77
exit $fail
