#!/bin/sh
# SPDX-License-Identifier: MIT
# no_opencl.sh - clt must work with no OpenCL platform at all: the host device alone.
#
# Points the ICD loader at an empty vendors directory (OCL_ICD_VENDORS), so that
# clGetPlatformIDs finds nothing, then checks that clt-devices lists only cpu and that an
# ordinary program (tests/outside) computes on cpu, and on ref:0 when CLT_REF_DEVICES=1 asks for
# the reference backend, which needs no OpenCL. Run by 'make check' with $top_builddir set;
# the programs may be libtool wrapper scripts, which is fine.
# Exit status: 0 pass, 1 fail, 99 hard error (automake's conventions).

top_builddir=${top_builddir:-.}
tmpdir=$(mktemp -d "${TMPDIR:-/tmp}/clt-no-opencl.XXXXXX") || exit 99
trap 'rm -rf "$tmpdir"' EXIT
trap 'exit 99' HUP INT TERM

OCL_ICD_VENDORS=$tmpdir
export OCL_ICD_VENDORS
unset CLT_DEVICE
# the host alone: no reference devices either (step 5 asks for one)
unset CLT_REF_DEVICES

status=0
fail() {
  echo "FAIL: $*" >&2
  status=1
}

# 1. clt-devices lists cpu and nothing else.
"$top_builddir"/tools/clt-devices >"$tmpdir/devices.out" 2>"$tmpdir/devices.err"
rc=$?
if [ "$rc" -eq 0 ]; then
  cat "$tmpdir/devices.out"
  grep -q '^\* cpu ' "$tmpdir/devices.out" || fail "clt-devices does not list cpu as the default"
  if grep -q 'cl:' "$tmpdir/devices.out"; then fail "clt-devices lists an OpenCL device"; fi
else
  cat "$tmpdir/devices.out" "$tmpdir/devices.err"
  fail "clt-devices exited with status $rc"
fi

# 2. The JSON form is one object, cpu, the default.
"$top_builddir"/tools/clt-devices --json >"$tmpdir/json.out" 2>"$tmpdir/json.err"
rc=$?
if [ "$rc" -eq 0 ]; then
  [ "$(grep -c '"name"' "$tmpdir/json.out")" -eq 1 ] || fail "clt-devices --json lists more than cpu"
  grep -q '"name": "cpu", "kind": "host"' "$tmpdir/json.out" || fail "clt-devices --json has no cpu"
  grep -q '"default": true' "$tmpdir/json.out" || fail "clt-devices --json marks no default"
else
  cat "$tmpdir/json.out" "$tmpdir/json.err"
  fail "clt-devices --json exited with status $rc"
fi

# 3. An ordinary program runs on cpu.
"$top_builddir"/tests/outside >"$tmpdir/outside.out" 2>"$tmpdir/outside.err"
rc=$?
if [ "$rc" -eq 0 ]; then
  cat "$tmpdir/outside.out"
  grep -q '^default: cpu$' "$tmpdir/outside.out" || fail "outside: the default device is not cpu"
  grep -q '^outside: ok$' "$tmpdir/outside.out" || fail "outside did not print 'outside: ok'"
else
  cat "$tmpdir/outside.out" "$tmpdir/outside.err"
  fail "outside exited with status $rc"
fi

# 4. CLT_DEVICE naming a missing device warns on stderr and falls back to cpu.
CLT_DEVICE=cl:0 "$top_builddir"/tests/outside >"$tmpdir/fallback.out" 2>"$tmpdir/fallback.err"
rc=$?
if [ "$rc" -eq 0 ]; then
  grep -q '^default: cpu$' "$tmpdir/fallback.out" || fail "CLT_DEVICE=cl:0: default is not cpu"
  grep -q '^outside: ok$' "$tmpdir/fallback.out" || fail "CLT_DEVICE=cl:0: outside failed"
  [ -s "$tmpdir/fallback.err" ] || fail "CLT_DEVICE=cl:0 with no OpenCL device gave no warning"
  sed 's/^/stderr: /' "$tmpdir/fallback.err"
else
  cat "$tmpdir/fallback.out" "$tmpdir/fallback.err"
  fail "CLT_DEVICE=cl:0 outside exited with status $rc"
fi

# 5. A device of another backend needs no OpenCL: ref:0 (CLT_REF_DEVICES=1, lib/ref/) computes,
# and is never the default.
CLT_REF_DEVICES=1 "$top_builddir"/tests/outside >"$tmpdir/ref.out" 2>"$tmpdir/ref.err"
rc=$?
if [ "$rc" -eq 0 ]; then
  grep -q '^default: cpu$' "$tmpdir/ref.out" || fail "CLT_REF_DEVICES=1: default is not cpu"
  grep -q '^add on ref:0: 42$' "$tmpdir/ref.out" || fail "CLT_REF_DEVICES=1: no add on ref:0"
  grep -q '^outside: ok$' "$tmpdir/ref.out" || fail "CLT_REF_DEVICES=1: outside failed"
else
  cat "$tmpdir/ref.out" "$tmpdir/ref.err"
  fail "CLT_REF_DEVICES=1 outside exited with status $rc"
fi

[ "$status" -eq 0 ] && echo "no_opencl: ok"
exit "$status"
