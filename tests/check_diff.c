/* SPDX-License-Identifier: MIT */
/* check_diff.c - the random-program differential tester (tests/diff/, issue 32) as a Check
 * suite: a fixed budget of seeded programs, each run eagerly on the host (the reference), lazily
 * on the host with every op deferred, and eagerly and lazily on every OpenCL device; statuses,
 * values (bit for bit where exact, within the op table's ulps where not; lazy against eager on
 * one device always bit for bit) and the allocator's counts must agree. A failure prints the
 * minimized program as a C repro.
 *
 * CLT_DIFF_SEEDS=N runs the seeds 1..N, CLT_DIFF_SEEDS=A:B the seeds A..B. The default, 24,
 * takes about 45 s on two cores with cpu and two PoCL devices after the other suites (96 s with
 * every kernel cache empty): PoCL compiling each new fused chain, mix of dtypes and work size is
 * nearly all of it, and a second run with warm caches takes a few seconds. Where a device is
 * simulated (Oclgrind, which interprets kernels) the programs have small shapes, and there are
 * 16 of them. tests/difftest and tools/difftest-campaign run long campaigns.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"
#include "diff/difftest.h"

enum { DEFAULT_SEEDS = 24, DEFAULT_SEEDS_SIMULATED = 16 };

/* The seeds CLT_DIFF_SEEDS asks for ("N": 1..N; "A:B"), else 1..fallback. */
static void seed_range(uint64_t fallback, uint64_t *first, uint64_t *last) {
  const char *e = getenv("CLT_DIFF_SEEDS");
  *first = 1;
  *last = fallback;
  if (!e || !*e)
    return;
  char *end;
  uint64_t a = strtoull(e, &end, 10);
  if (*end == ':') {
    uint64_t b = strtoull(end + 1, &end, 10);
    ck_assert_msg(*end == 0 && b >= a, "CLT_DIFF_SEEDS=%s: expected N or A:B with A <= B", e);
    *first = a;
    *last = b;
  } else {
    ck_assert_msg(*end == 0 && a >= 1, "CLT_DIFF_SEEDS=%s: expected N or A:B with A <= B", e);
    *last = a;
  }
}

START_TEST(test_diff_programs) {
  dt_options o;
  dt_options_default(&o);
  uint64_t first, last;
  seed_range(o.small ? DEFAULT_SEEDS_SIMULATED : DEFAULT_SEEDS, &first, &last);
  printf("diff: seeds %" PRIu64 ":%" PRIu64 " (%" PRIu64 " programs%s) on cpu", first, last,
         last - first + 1, o.small ? ", small shapes" : "");
  for (int i = 0; i < o.ndevs; i++)
    printf(", %s", clt_device_name(o.devs[i]));
  printf("\n");
  fflush(stdout);
  dt_catch_crashes(); /* a crash names its seed */
  dt_summary s;
  dt_campaign(first, last, &o, &s);
  printf("difftest: %ld programs, %ld failures, %.1f s (%ld steps; %ld device runs skipped)\n",
         s.programs, s.failures, s.seconds, s.steps, s.skipped);
  fflush(stdout);
  ck_assert_msg(s.failures == 0,
                "difftest: %ld of %ld programs failed, the first with seed %" PRIu64
                " (the minimized programs and their C repros are printed above; rerun one with "
                "tests/difftest --seeds %" PRIu64 ":%" PRIu64 ")",
                s.failures, s.programs, s.first_failing_seed, s.first_failing_seed,
                s.first_failing_seed);
}
END_TEST

/* The tester itself: its oracle, its determinism, and that it generates every op of the table
 * in every form (a new row joins by itself). */
START_TEST(test_diff_selftest) {
  char why[512];
  ck_assert_msg(dt_selftest(why, sizeof why), "difftest: %s", why);
}
END_TEST

Suite *diff_suite(void);
Suite *diff_suite(void) {
  Suite *s = suite_create("diff");
  TCase *tc = cu_tcase("selftest");
  tcase_add_test(tc, test_diff_selftest);
  suite_add_tcase(s, tc);
  tc = cu_tcase("programs");
  tcase_add_test(tc, test_diff_programs);
  suite_add_tcase(s, tc);
  return s;
}
