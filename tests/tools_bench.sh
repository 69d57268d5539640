#!/bin/sh
# SPDX-License-Identifier: MIT
# tools_bench.sh - clt-bench on tiny sizes: exit codes, --help, --version, a CSV whose rows
# parse, an SVG that is well-formed XML with both series, a clear error for a wrong --device,
# and the transfer and elementwise sections.
#
# Run by 'make check' with $top_builddir set (POCL_DEVICES="pthread pthread" by default); the
# program may be a libtool wrapper script, which is fine.
# Exit status: 0 pass, 1 fail, 99 hard error (automake's conventions).

top_builddir=${top_builddir:-.}
bench="$top_builddir/tools/clt-bench"
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/clt-bench-test.XXXXXX") || exit 99
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 99' HUP INT TERM
unset CLT_DEVICE

status=0
fail() {
  echo "FAIL: $*" >&2
  status=1
}

# run NAME ARGS...: runs clt-bench with ARGS, stdout to $tmpdir/NAME.out, stderr to
# $tmpdir/NAME.err; sets rc.
run() {
  name=$1
  shift
  "$bench" "$@" >"$tmpdir/$name.out" 2>"$tmpdir/$name.err"
  rc=$?
}

show() {
  sed "s/^/  $1: /" "$tmpdir/$1.out" "$tmpdir/$1.err"
}

# 1. --help and --version.
run help --help
[ "$rc" -eq 0 ] || fail "--help exited with status $rc"
grep -q '^Usage: clt-bench' "$tmpdir/help.out" || fail "--help prints no usage line"
for opt in --device --sizes --runs --naive --csv --plot --what; do
  grep -q -- "$opt" "$tmpdir/help.out" || fail "--help does not mention $opt"
done
run version --version
[ "$rc" -eq 0 ] || fail "--version exited with status $rc"
grep -Eq '^clt-bench \(clt\) [0-9]+\.[0-9]+\.[0-9]+$' "$tmpdir/version.out" ||
  fail "--version printed '$(cat "$tmpdir/version.out")'"

# 2. A small matmul run with a CSV and a plot.
run matmul --sizes 8,16,32 --runs 1 --naive --csv "$tmpdir/m.csv" --plot "$tmpdir/m.svg"
show matmul
if [ "$rc" -ne 0 ]; then
  fail "matmul run exited with status $rc"
else
  grep -q '^crossover: ' "$tmpdir/matmul.out" || fail "no crossover line in the table"
  # Header plus one row per size; every field numeric but the device and the winner.
  [ "$(wc -l <"$tmpdir/m.csv")" -eq 4 ] || fail "the CSV has not 4 lines"
  head -n 1 "$tmpdir/m.csv" | grep -q '^n,device,cpu_ms,cpu_gflops,device_ms,device_gflops,' ||
    fail "the CSV header is '$(head -n 1 "$tmpdir/m.csv")'"
  awk -F, 'NR == 1 { nf = NF; next }
    NF != nf { print "row " NR ": " NF " fields, the header has " nf; bad = 1 }
    { for (i = 1; i <= NF; i++) if (i != 2 && i != 7 && $i !~ /^[0-9]+(\.[0-9]+)?$/) {
        print "row " NR " field " i ": \"" $i "\" is not a number"; bad = 1 } }
    $7 != "cpu" && $7 != "device" { print "row " NR ": winner \"" $7 "\""; bad = 1 }
    END { exit bad }' "$tmpdir/m.csv" || fail "the CSV rows do not parse"
  awk -F, 'NR > 1 { printf "%s ", $1 } END { print "" }' "$tmpdir/m.csv" | grep -q '^8 16 32 $' ||
    fail "the CSV sizes are not 8 16 32"
  # The SVG: well-formed, with both series.
  if command -v xmllint >/dev/null 2>&1; then
    xmllint --noout "$tmpdir/m.svg" || fail "the SVG is not well-formed XML"
  else
    echo "SKIP: xmllint not found; the SVG is not checked for well-formedness"
  fi
  grep -q '<svg ' "$tmpdir/m.svg" || fail "the SVG has no <svg> element"
  grep -q '<path id="series-cpu"' "$tmpdir/m.svg" || fail "the SVG has no cpu series"
  grep -q '<path id="series-device"' "$tmpdir/m.svg" || fail "the SVG has no device series"
  grep -q 'id="legend"' "$tmpdir/m.svg" || fail "the SVG has no legend"
fi

# 3. A wrong --device: exit 2, naming the device and listing the ones that exist.
run baddev --device cl:99 --sizes 8 --runs 1
show baddev
[ "$rc" -eq 2 ] || fail "--device cl:99 exited with status $rc, not 2"
grep -q "cl:99" "$tmpdir/baddev.err" || fail "--device cl:99: the message does not name cl:99"
grep -q "available: cpu" "$tmpdir/baddev.err" ||
  fail "--device cl:99: the message does not list the devices"
[ -s "$tmpdir/baddev.out" ] && fail "--device cl:99 printed on stdout"

# 4. Usage errors exit 2 with a message on stderr.
for args in "--bogus" "--runs 0" "--sizes 8,x" "--what nothing" "--device"; do
  # shellcheck disable=SC2086
  run usage $args
  [ "$rc" -eq 2 ] || fail "'$args' exited with status $rc, not 2"
  [ -s "$tmpdir/usage.err" ] || fail "'$args' printed no message"
done

# 5. The elementwise and transfer sections on tiny sizes (transfer needs an OpenCL device).
has_cl=no
"$top_builddir"/tools/clt-devices 2>/dev/null | grep -q ' cl:0 ' && has_cl=yes
run elementwise --what elementwise --sizes 64,1K --runs 1 --csv "$tmpdir/e.csv" \
  --plot "$tmpdir/e.svg"
show elementwise
[ "$rc" -eq 0 ] || fail "--what elementwise exited with status $rc"
[ "$rc" -eq 0 ] && { [ "$(wc -l <"$tmpdir/e.csv")" -eq 3 ] || fail "elementwise CSV rows"; }
if [ "$has_cl" = yes ]; then
  run transfer --what transfer --sizes 64,1K --runs 1 --csv "$tmpdir/t.csv" --plot "$tmpdir/t.svg"
  show transfer
else
  echo "SKIP: no OpenCL device: --what transfer is not run"
  rc=skip
fi
if [ "$rc" = skip ]; then
  :
elif [ "$rc" -ne 0 ]; then
  fail "--what transfer exited with status $rc"
else
  [ "$(wc -l <"$tmpdir/t.csv")" -eq 3 ] || fail "transfer CSV rows"
  grep -q 'id="series-h2d-pinned"' "$tmpdir/t.svg" || fail "the transfer SVG has no H2D series"
  if command -v xmllint >/dev/null 2>&1; then
    xmllint --noout "$tmpdir/t.svg" || fail "the transfer SVG is not well-formed XML"
  fi
fi

[ "$status" -eq 0 ] && echo "tools_bench: ok"
exit "$status"
