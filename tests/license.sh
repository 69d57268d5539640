#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/license.sh - the license is stated (issue 25): LICENSE is the MIT license, every source
# file of the tree names it in an SPDX line within its first three lines, and clt.pc says it.
# Run by 'make check' with $srcdir and $top_builddir set (also from the dist tarball).
# Exit status: 0 pass, 1 fail.
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
status=0
if ! grep -q '^MIT License' "$srcdir/LICENSE" 2>/dev/null; then
  echo "FAIL: $srcdir/LICENSE is missing or not the MIT license"
  status=1
fi
checked=0
missing=$(find "$srcdir/lib" "$srcdir/include" "$srcdir/kernels" "$srcdir/tests" "$srcdir/tools" \
  "$srcdir/bench" "$srcdir/examples" \
  \( -name '*.c' -o -name '*.h' -o -name '*.cl' -o -name '*.cpp' -o -name '*.hpp' \
  -o -name '*.sh' -o -name '*.py' -o -name '*.awk' \) -type f 2>/dev/null |
  grep -v '/lib/kernels\.c$' | while read -r f; do
    head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' || echo "$f"
  done)
checked=$(find "$srcdir/lib" "$srcdir/include" "$srcdir/kernels" "$srcdir/tests" "$srcdir/tools" \
  "$srcdir/bench" "$srcdir/examples" \
  \( -name '*.c' -o -name '*.h' -o -name '*.cl' -o -name '*.cpp' -o -name '*.hpp' \
  -o -name '*.sh' -o -name '*.py' -o -name '*.awk' \) -type f 2>/dev/null | wc -l)
if [ -n "$missing" ]; then
  echo "FAIL: source files without 'SPDX-License-Identifier: MIT' in their first three lines:"
  echo "$missing"
  status=1
fi
for f in "$srcdir/Makefile.am" "$srcdir/configure.ac"; do
  head -n 3 "$f" | grep -q 'SPDX-License-Identifier: MIT' || {
    echo "FAIL: $f has no SPDX line"
    status=1
  }
done
if [ -f "$top_builddir/clt.pc" ]; then
  lic=$(sed -n 's/^license=//p' "$top_builddir/clt.pc")
  if [ "$lic" != MIT ]; then
    echo "FAIL: clt.pc says license=$lic"
    status=1
  fi
fi
[ "$status" -eq 0 ] && echo "PASS: LICENSE, $checked source files with an SPDX line, clt.pc"
exit $status
