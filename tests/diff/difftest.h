/* SPDX-License-Identifier: MIT */
/* difftest.h - the seeded random-program differential tester of clt (issue 32).
 *
 * A seed gives a program: a list of steps over a pool of tensor slots that uses clt's public API
 * (creation with edge values, every row of the op table in every form, views and chains of
 * views (diagonal too), tril/triu, reductions, matmul (torch.matmul shapes), cat/stack/
 * index_select, casts, copies, fills, and reads, prints and
 * evaluations in the middle; in a third of the programs, autograd too: tensors that require
 * grad, grad mode off around writes, backward and the leaves' gradients). It runs eagerly on the host (the reference), lazily on the host
 * with every op deferred, and lazily and eagerly on every other device. Every step's status must
 * be the same in every run; at each read, lazy and eager on one device must give the same bits
 * (lib/lazy.c's invariant), and each device eager the reference's values: the same bits where
 * the operations are exact, within a tolerance derived from the op table's ulps where not. A
 * failing program is minimized (steps dropped, data simplified while the same mismatch remains)
 * and printed as a self-contained C program over clt.h.
 *
 * tests/check_diff.c runs a budget of seeds as a Check suite; tests/difftest (tests/diff/main.c)
 * runs long campaigns; tools/difftest-campaign wraps it.
 */
#ifndef CLT_DIFFTEST_H
#define CLT_DIFFTEST_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "clt.h"

#define DT_MAX_DEVICES 16

typedef struct dt_options {
  /* The devices compared with the host's eager reference, each eagerly and lazily; the host
   * itself always runs lazily (every op deferred) too. */
  clt_device *devs[DT_MAX_DEVICES];
  int ndevs;
  bool small;    /* small shapes and short programs (simulated devices such as Oclgrind) */
  bool minimize; /* on a failure, minimize the program before printing it */
  bool verbose;  /* print each seed before running it (a crash then names its seed) */
  FILE *out;     /* failures, minimized programs and repros (stdout if NULL) */
} dt_options;

typedef struct dt_summary {
  long programs, failures, steps;
  long skipped; /* device runs skipped (f64 on a device without fp64) */
  double seconds;
  uint64_t first_failing_seed; /* valid when failures > 0 */
} dt_summary;

/* Fills o with every OpenCL (and other backend's) device of the registry, small shapes if one of
 * them is simulated (Oclgrind), minimization on, output to stdout. */
void dt_options_default(dt_options *o);

/* 1 if d is a simulated device (Oclgrind interprets kernels: small shapes, fewer seeds). */
bool dt_is_simulated(clt_device *d);

/* Generates and runs the program of seed; returns 0 if every run agreed, 1 after printing the
 * failure (minimized, with a repro, when o->minimize) to o->out. steps (may be NULL) receives the
 * program's length. */
int dt_check_seed(uint64_t seed, const dt_options *o, long *steps);

/* Makes a crash (SIGSEGV, SIGABRT, ...) print the seed being run on stderr before the process
 * dies as it would have: "difftest: seed N crashed". */
void dt_catch_crashes(void);

/* Prints the program of seed as a C repro, unminimized, without running it anywhere but on the
 * host eagerly: its lazy run on o's first device (else the host) against that device's eager
 * run, compared at its last step. For a program that crashes the tester. */
int dt_print_seed(uint64_t seed, const dt_options *o);

/* Minimizes the program of seed while it still crashes the host (lazily, else eagerly), each
 * try in a child process, and prints the result as a C repro; 1 if it does not crash there. */
int dt_minimize_crash(uint64_t seed, const dt_options *o);

/* Runs the seeds first..last (inclusive) and fills s. */
void dt_campaign(uint64_t first, uint64_t last, const dt_options *o, dt_summary *s);

/* The NumPy lane (tests/diff/numpy_check.py): runs the program of seed eagerly on the host and
 * writes DIR/seed-N.json (every step: its kind, operands' slots, dtype, shape, scalars and dims,
 * its status and clt_last_error(), the inputs it creates, and the tensor it made or wrote) and
 * DIR/seed-N.bin (the data those entries point into, in clt's layout, C order). 1 on an I/O
 * error. */
int dt_export_numpy(uint64_t seed, const dt_options *o, const char *dir);

/* The tester's checks of itself: its oracle flags what it must (one bit off, bit for bit; an
 * exact value one ulp off; an approximate one far off) and passes what it must; a seed always
 * gives the same program; every row of the op table in every form, and every kind of step, is
 * generated within 300 seeds. On failure, false with the reason in why. */
bool dt_selftest(char *why, size_t n);

#endif /* CLT_DIFFTEST_H */
