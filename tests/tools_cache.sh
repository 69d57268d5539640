#!/bin/sh
# SPDX-License-Identifier: MIT
# tools_cache.sh - clt-cache and clt-devices as a user runs them: help and version, info on an
# empty cache, warm filling it, list, clear removing the entries and nothing else, errors for an
# unknown device and an unknown command, and CLT_CACHE=0. The cache is a fresh temp directory
# (CLT_CACHE_DIR). Run by 'make check' with $top_builddir set.
# Exit status: 0 pass, 1 fail, 77 skip, 99 hard error (automake's conventions).

top_builddir=${top_builddir:-.}
cache=$top_builddir/tools/clt-cache
devices=$top_builddir/tools/clt-devices
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/clt-tools-cache.XXXXXX") || exit 99
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 99' HUP INT TERM

CLT_CACHE_DIR=$tmpdir/cache
export CLT_CACHE_DIR
mkdir "$CLT_CACHE_DIR" || exit 99
unset CLT_CACHE CLT_DEVICE

status=0
fail() {
  echo "FAIL: $*" >&2
  status=1
}
# run NAME CMD...: runs CMD with its output in $tmpdir/NAME.out and .err; sets rc.
run() {
  name=$1
  shift
  "$@" >"$tmpdir/$name.out" 2>"$tmpdir/$name.err"
  rc=$?
}
show() { cat "$tmpdir/$1.out" "$tmpdir/$1.err"; }

# 1. --help and --version exit 0 for both tools.
for tool in "$cache" "$devices"; do
  base=$(basename "$tool")
  run help "$tool" --help
  [ "$rc" -eq 0 ] && grep -q '^Usage: ' "$tmpdir/help.out" || fail "$base --help (status $rc)"
  run version "$tool" --version
  [ "$rc" -eq 0 ] && grep -q "^$base (clt) [0-9]*\.[0-9]*\.[0-9]*$" "$tmpdir/version.out" ||
    fail "$base --version (status $rc): $(cat "$tmpdir/version.out")"
done

# 2. info on the empty cache.
run info "$cache" info
show info
[ "$rc" -eq 0 ] || fail "clt-cache info exited with status $rc"
grep -q "^kernel cache: $CLT_CACHE_DIR\$" "$tmpdir/info.out" || fail "info does not name the directory"
grep -q '^entries: *0$' "$tmpdir/info.out" || fail "info on an empty cache does not say 0 entries"

# 3. warm fills the cache (needs an OpenCL device).
if ! "$devices" | grep -q ' cl:0 '; then
  echo "SKIP: no OpenCL device cl:0 (set POCL_DEVICES=\"pthread pthread\")"
  exit 77
fi
run warm "$cache" warm --device cl:0
show warm
[ "$rc" -eq 0 ] || fail "clt-cache warm --device cl:0 exited with status $rc"
# stderr is not a terminal here: no progress bar.
if grep -q '\[#' "$tmpdir/warm.err"; then fail "warm drew a progress bar on a non-terminal"; fi
count=$(ls "$CLT_CACHE_DIR" | grep -c '^[0-9a-f]\{64\}\.bin$')
[ "$count" -gt 0 ] || fail "warm left no entries in $CLT_CACHE_DIR"
echo "warm: $count entries"

# 4. list shows every entry, and info counts them.
run list "$cache" list
[ "$rc" -eq 0 ] || fail "clt-cache list exited with status $rc"
listed=$(grep -c '^[0-9a-f]\{64\}\.bin  ' "$tmpdir/list.out")
[ "$listed" -eq "$count" ] || fail "list shows $listed entries, the directory holds $count"
run info2 "$cache"
grep -q "^entries: *$count\$" "$tmpdir/info2.out" || fail "info does not say $count entries"

# 5. clear removes the entries and nothing else.
echo keep >"$CLT_CACHE_DIR/notes.txt"
run clear "$cache" clear
show clear
[ "$rc" -eq 0 ] || fail "clt-cache clear exited with status $rc"
grep -q "^removed $count entries" "$tmpdir/clear.out" || fail "clear does not say it removed $count"
left=$(ls "$CLT_CACHE_DIR" | grep -c '\.bin')
[ "$left" -eq 0 ] || fail "clear left $left entries"
[ "$(cat "$CLT_CACHE_DIR/notes.txt" 2>/dev/null)" = keep ] || fail "clear touched notes.txt"

# 6. An unknown device fails, naming it.
run baddev "$cache" warm --device cl:9
show baddev
[ "$rc" -ne 0 ] || fail "warm --device cl:9 succeeded"
grep -q 'cl:9' "$tmpdir/baddev.err" || fail "warm --device cl:9 does not name cl:9 on stderr"

# 7. An unknown command or option exits 2.
run badcmd "$cache" frobnicate
[ "$rc" -eq 2 ] || fail "an unknown command exited with status $rc, not 2"
[ -s "$tmpdir/badcmd.err" ] || fail "an unknown command gave no message"
run badopt "$cache" --frobnicate
[ "$rc" -eq 2 ] || fail "an unknown option exited with status $rc, not 2"

# 8. CLT_CACHE=0: info says the cache is off.
CLT_CACHE=0 "$cache" info >"$tmpdir/off.out" 2>&1
rc=$?
cat "$tmpdir/off.out"
[ "$rc" -eq 0 ] || fail "CLT_CACHE=0 clt-cache info exited with status $rc"
grep -q 'off' "$tmpdir/off.out" || fail "CLT_CACHE=0: info does not say the cache is off"

[ "$status" -eq 0 ] && echo "tools_cache: ok"
exit "$status"
