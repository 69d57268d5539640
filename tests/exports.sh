#!/bin/sh
# SPDX-License-Identifier: MIT
# exports.sh - the shared libraries export the public headers, nothing more and nothing less
# (issue 12, item 7). Run by 'make check', which sets:
#   CLT_EXPORTS_CPP      the C preprocessor with the build's flags
#   CLT_EXPORTS_HEADERS  the installed headers (include/clt.h ...), relative to $srcdir
#   CLT_EXPORTS_LIBS     the installed libraries (lib/libclt.la ...), relative to $top_builddir
#   CLT_EXPORTS_NM       nm
# For each library, nm -D --defined-only must show exactly the functions its headers declare
# (clt_mpi.h for libclt_mpi, the others for libclt), each declared with CLT_API (CLT_MPI_API),
# plus, for libclt only, the clt_internal_ functions of lib/clt-internal-mpi.h, the interface
# libclt_mpi uses, and in a fault-injection build (tests only) the clt__fault_ switch of
# lib/fault.h. Any other clt__ symbol, or anything else, fails; so does a declared function
# that is not exported. Skipped (77) where there is no shared library to look at.
set -u
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
CPP=${CLT_EXPORTS_CPP:-cc -E -I$srcdir/include}
NM=${CLT_EXPORTS_NM:-nm}
HEADERS=${CLT_EXPORTS_HEADERS:-include/clt.h}
LIBS=${CLT_EXPORTS_LIBS:-lib/libclt.la}
MARK=clt_exports_api_marker_

tmp=${TMPDIR:-/tmp}/clt-exports.$$
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT

faults=no
grep -q '^#define CLT_FAULT_INJECTION 1' "$top_builddir/config.h" 2>/dev/null && faults=yes

# The functions declared in the text of header $1 (after the preprocessor, so a macro that
# declares counts; only lines that come from $1 itself), one "name marked|unmarked" a line.
declared() {
  base=$(basename "$1")
  $CPP -DCLT_API=$MARK -DCLT_MPI_API=$MARK -DCLT_INTERNAL_API=$MARK "$1" >"$tmp/pp" || return 1
  awk -v base="$base" '
    /^# [0-9]+ "/ { f = $3; gsub(/"/, "", f); n = split(f, p, "/"); mine = (p[n] == base); next }
    /^#/ { next }
    mine { print }' "$tmp/pp" | tr '\n' ' ' | tr ';{}' '\n\n\n' |
    awk -v mark=$MARK '
      match($0, /clt_[A-Za-z0-9_]*[ \t]*\(/) {
        if ($0 ~ /(^|[^A-Za-z0-9_])(typedef|static)[^A-Za-z0-9_]/) next
        name = substr($0, RSTART, RLENGTH); sub(/[ \t]*\($/, "", name)
        print name, (index($0, mark) ? "marked" : "unmarked")
      }'
}

fail=0
checked=0
for la in $LIBS; do
  lib=$(basename "$la" .la)
  so=$top_builddir/$(dirname "$la")/.libs/$lib.so
  if [ ! -f "$so" ]; then
    echo "exports.sh: $so not built (a static-only build?); not checked"
    continue
  fi
  : >"$tmp/want"
  for h in $HEADERS; do
    case $h in *.hpp) continue ;; esac # C++, header-only (clt.hpp): nothing of it is in a library
    owner=libclt
    [ "$(basename "$h")" = clt_mpi.h ] && owner=libclt_mpi
    [ "$owner" = "$lib" ] || continue
    declared "$srcdir/$h" >"$tmp/decl" || {
      echo "FAIL: the preprocessor failed on $h"
      fail=1
      continue
    }
    awk -v h="$h" '$2 == "unmarked" { print "FAIL: " h " declares " $1 " without its export marker (CLT_API)" }' \
      "$tmp/decl"
    grep -q unmarked "$tmp/decl" && fail=1
    cut -d' ' -f1 "$tmp/decl" >>"$tmp/want"
  done
  if [ "$lib" = libclt ] && [ -f "$srcdir/lib/clt-internal-mpi.h" ] &&
    case " $LIBS " in *libclt_mpi.la*) true ;; *) false ;; esac; then
    declared "$srcdir/lib/clt-internal-mpi.h" | cut -d' ' -f1 >>"$tmp/want"
  fi
  sort -u "$tmp/want" -o "$tmp/want"
  # Defined, exported, not the linker's own markers or version nodes.
  $NM -D --defined-only "$so" | awk 'NF >= 3 && $2 != "A" { print $3 }' |
    sed 's/@.*//' | grep -v -x -e _init -e _fini -e _edata -e _end -e __bss_start |
    sort -u >"$tmp/have"
  n=$(wc -l <"$tmp/have")
  c=$(grep -c '^clt__' "$tmp/have")
  if [ "$faults" = yes ] && [ "$lib" = libclt ]; then
    c="$c (the clt__fault_ switch of a fault-injection build)"
    grep -v '^clt__fault_' "$tmp/have" >"$tmp/have2"
    mv "$tmp/have2" "$tmp/have"
  fi
  extra=$(comm -13 "$tmp/want" "$tmp/have")
  missing=$(comm -23 "$tmp/want" "$tmp/have")
  for s in $extra; do
    echo "FAIL: $lib.so exports $s, which no public header of it declares"
    fail=1
  done
  for s in $missing; do
    echo "FAIL: $lib.so does not export $s, which its headers declare"
    fail=1
  done
  echo "exports.sh: $lib.so exports $n symbols, clt__ ones: $c; $(wc -l <"$tmp/want") declared"
  checked=$((checked + 1))
done
[ "$checked" -gt 0 ] || exit 77
exit $fail
