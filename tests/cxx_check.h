/* SPDX-License-Identifier: MIT */
// cxx_check.h - the one assertion of the C++ tests (tests/cxx_api.cpp, tests/cxx_noexcept.cpp):
// CHECK(cond) reports a failed condition with its line and counts it in failures, which main
// turns into the exit status.
#ifndef CLT_CXX_CHECK_H
#define CLT_CXX_CHECK_H

#include <cstdio>

static int failures = 0;
#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond);                \
      failures++;                                                                                  \
    }                                                                                              \
  } while (0)

#endif
