#!/bin/sh
# SPDX-License-Identifier: MIT
# layers.sh - the layers that docs/architecture.md draws are the ones the code has (issue 25,
# item 4). Run by 'make check' (srcdir, top_builddir and CLT_EXPORTS_NM come from it).
#
# The table is the fenced block under "## Layers" in docs/architecture.md: a line that starts
# with a number gives that layer (0 is the bottom) to the files named on it and on the indented
# lines under it (words that start with "lib/"; "*" matches within a folder); a line
# "except FILE -> SYMBOL ..." allows FILE to name those symbols of a higher layer.
# From the objects of the build (nm), every global symbol a file uses and another file defines
# is a call (or a reference) from the one to the other. It must go down: to a lower layer, or
# within one folder of a backend (lib/host/, lib/ref/, lib/opencl/, lib/io/) on one layer. Calls
# through struct clt_backend's pointers are not links and are not seen: the table of the
# interface is declared in lib/backend.h, below its implementations.
# Also checked: every source file of the library has a layer and every name in the table is a
# file of the tree; no object outside lib/opencl/ refers to an OpenCL function (cl* or CL*), but those an
# except line names. Fails (1) with one line per broken rule; skipped (77) without objects.
set -u
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
NM=${CLT_EXPORTS_NM:-nm}
doc=$srcdir/docs/architecture.md

tmp=${TMPDIR:-/tmp}/clt-layers.$$
mkdir "$tmp" || exit 99
trap 'rm -rf "$tmp"' EXIT

# The objects: libtool's PIC ones (lib/X/.libs/libclt_core_la-Y.o, for lib/X/Y.c), or the plain
# ones where only static libraries are built.
find "$top_builddir/lib" -name 'lib*_la-*.o' | sort >"$tmp/all"
grep '/\.libs/' "$tmp/all" >"$tmp/objs"
[ -s "$tmp/objs" ] || cp "$tmp/all" "$tmp/objs"
if [ ! -s "$tmp/objs" ]; then
  echo "layers.sh: no objects under $top_builddir/lib: build first" >&2
  exit 77
fi

# "SOURCE D|U SYMBOL" for every global symbol of every object.
while read -r o; do
  rel=${o#"$top_builddir"/}
  dir=$(dirname "$rel")
  dir=${dir%/.libs}
  base=$(basename "$o" .o)
  src="$dir/${base#*_la-}.c"
  $NM "$o" | awk -v src="$src" '
    $1 == "U" { print src, "U", $2; next }
    NF == 3 && $2 ~ /^[TDRBCGSVW]$/ { print src, "D", $3 }'
done <"$tmp/objs" >"$tmp/syms" || exit 99

# The table, as "rank pattern" and "except file symbol" lines.
awk '
  /^## Layers/ { in_section = 1; next }
  in_section && /^## / { exit }
  in_section && /^```/ { if (in_block) exit; in_block = 1; next }
  !in_block { next }
  $1 == "except" {
    for (i = 4; i <= NF; i++) print "except", $2, $i
    next
  }
  $1 ~ /^[0-9]+$/ { rank = $1 }
  /^[^ 0-9]/ { next }
  { for (i = 1; i <= NF; i++) if ($i ~ /^lib\//) print rank, $i }' "$doc" >"$tmp/table"
if [ ! -s "$tmp/table" ]; then
  echo "layers.sh: no layer table under \"## Layers\" in $doc" >&2
  exit 1
fi

# Every name in the table is a file of the tree (or, as lib/kernels.c, of the build); one this
# build leaves out (lib/mpi/ without MPI) has no object, and nothing to check.
awk '$1 != "except" { print $2 }' "$tmp/table" | while read -r pat; do
  # shellcheck disable=SC2086 # the pattern's * is for the shell
  found=$( (cd "$srcdir" && ls $pat) 2>/dev/null; (cd "$top_builddir" && ls $pat) 2>/dev/null)
  [ -n "$found" ] || echo "docs/architecture.md names $pat, which is no source file of the library"
done >"$tmp/missing"

awk '
  FNR == 1 { part++ }
  part == 1 && $1 == "except" { allowed[$2 SUBSEP $3] = 1; next }
  part == 1 {
    pat[++np] = $2; prank[np] = $1
    re = $2; gsub(/\./, "\\.", re); gsub(/\*/, "[^/]*", re); pre[np] = "^" re "$"
    next
  }
  $2 == "D" { def[$3] = $1; files[$1] = 1; next }
  $2 == "U" { files[$1] = 1; use[++nu] = $1 SUBSEP $3 }
  function dir(f) { sub(/\/[^\/]*$/, "", f); return f }
  function rank_of(f,   i, best, exact) {
    best = -1
    for (i = 1; i <= np; i++)
      if (f == pat[i]) return prank[i]
      else if (f ~ pre[i] && best < 0) best = prank[i]
    return best
  }
  END {
    bad = 0
    for (f in files) {
      r[f] = rank_of(f)
      if (r[f] < 0) { print f " has no layer in docs/architecture.md"; bad = 1 }
    }
    for (k = 1; k <= nu; k++) {
      split(use[k], u, SUBSEP)
      a = u[1]; sym = u[2]
      if ((a SUBSEP sym) in allowed) continue
      if (sym ~ /^(cl|CL)[A-Z]/ && a !~ /^lib\/opencl\//) {
        print a " calls the OpenCL function " sym ": OpenCL calls stay in lib/opencl/"; bad = 1
        continue
      }
      if (!(sym in def)) continue
      b = def[sym]
      if (a == b || r[a] < 0 || r[b] < 0) continue
      if (r[b] < r[a]) continue
      if (r[b] == r[a] && dir(a) == dir(b) && dir(a) != "lib") continue
      print a " (layer " r[a] ") calls " sym " of " b " (layer " r[b] ")"; bad = 1
    }
    exit bad
  }' "$tmp/table" "$tmp/syms" >"$tmp/out"
status=$?
[ -s "$tmp/missing" ] && status=1
sort "$tmp/out" "$tmp/missing"
if [ $status -ne 0 ]; then
  echo "layers.sh: the code breaks the layers of docs/architecture.md (above): move the function" \
    "down, call it from above, or change the picture" >&2
  exit 1
fi
echo "layers.sh: $(wc -l <"$tmp/objs") objects, $(grep -c ' U ' "$tmp/syms") uses: every call goes down"
