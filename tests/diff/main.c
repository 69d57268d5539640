/* SPDX-License-Identifier: MIT */
/* main.c - tests/difftest, the random-program differential tester for long campaigns:
 *
 *   tests/difftest --seeds A:B [--device NAME]... [--small] [--no-minimize] [--verbose]
 *   tests/difftest --seeds N --print [--device NAME]
 *   tests/difftest --seeds N --crash
 *   tests/difftest --seeds A:B --numpy DIR
 *
 * runs the programs of seeds A to B (see difftest.h) on the host and on every device (or those
 * named), prints each failure with its minimized program and a C repro, and ends with the line
 * "difftest: N programs, M failures, T s". Exit status 0 when nothing failed, 1 otherwise, 2 on
 * a usage error. A crash prints the seed it was running; --crash minimizes a crash of the host's
 * runs (each try in a child process) and prints it as a C repro, --print prints a seed's program
 * as a C repro without running it (but on the host, eagerly). --numpy writes each program, run
 * eagerly on the host, to DIR for tests/diff/numpy_check.py (the NumPy lane).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h" /* clt__cl_matmul_clear_cache */
#include "difftest.h"

static int usage(const char *why) {
  fprintf(stderr,
          "difftest: %s\n"
          "usage: difftest --seeds A:B [--device NAME]... [--small] [--no-minimize] [--verbose]\n"
          "               [--print | --crash | --numpy DIR]\n"
          "  --seeds A:B    the seeds A to B, inclusive (or N: the seed N alone)\n"
          "  --device NAME  compare only NAME (cl:0, ...) with the host; repeatable\n"
          "                 (default: every device)\n"
          "  --small        small shapes and short programs (automatic on Oclgrind)\n"
          "  --no-minimize  print failing programs as generated\n"
          "  --verbose      print each seed before running it\n"
          "  --print        print the programs as C, unminimized, without running them\n"
          "  --crash        minimize a crash on the host, in child processes, and print it\n"
          "  --numpy DIR    write the programs, run on the host, to DIR for numpy_check.py\n",
          why);
  return 2;
}

int main(int argc, char **argv) {
  uint64_t first = 1, last = 100;
  const char *numpy_dir = NULL;
  bool devices_named = false, small = false, minimize = true, verbose = false, print = false,
       crash = false;
  dt_options o;
  dt_options_default(&o);
  int ndevs = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--seeds") == 0 && i + 1 < argc) {
      char *end;
      first = strtoull(argv[++i], &end, 10);
      last = first;
      if (*end == ':')
        last = strtoull(end + 1, &end, 10);
      if (*end || last < first)
        return usage("--seeds wants A:B with A <= B");
    } else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      clt_device *d;
      if (clt_device_get(argv[++i], &d) != CLT_OK)
        return usage(clt_last_error());
      if (!devices_named)
        ndevs = 0;
      devices_named = true;
      if (!clt_device_is_host(d) && ndevs < DT_MAX_DEVICES)
        o.devs[ndevs++] = d;
    } else if (strcmp(argv[i], "--small") == 0) {
      small = true;
    } else if (strcmp(argv[i], "--no-minimize") == 0) {
      minimize = false;
    } else if (strcmp(argv[i], "--verbose") == 0) {
      verbose = true;
    } else if (strcmp(argv[i], "--print") == 0) {
      print = true;
    } else if (strcmp(argv[i], "--numpy") == 0 && i + 1 < argc) {
      numpy_dir = argv[++i];
    } else if (strcmp(argv[i], "--crash") == 0) {
      crash = true;
    } else {
      return usage("unknown argument");
    }
  }
  if (devices_named) {
    o.ndevs = ndevs;
    o.small = false;
    for (int i = 0; i < ndevs; i++)
      o.small = o.small || dt_is_simulated(o.devs[i]);
  }
  o.small = o.small || small;
  o.minimize = minimize;
  o.verbose = verbose;
  if (numpy_dir) {
    dt_catch_crashes();
    int status = 0;
    for (uint64_t seed = first; seed <= last && seed >= first; seed++)
      status |= dt_export_numpy(seed, &o, numpy_dir);
    clt__cl_matmul_clear_cache();
    return status;
  }
  if (print || crash) {
    int status = 0;
    for (uint64_t seed = first; seed <= last && seed >= first; seed++)
      status |= print ? dt_print_seed(seed, &o) : dt_minimize_crash(seed, &o);
    clt__cl_matmul_clear_cache();
    return status;
  }
  dt_catch_crashes();
  printf("difftest: seeds %" PRIu64 ":%" PRIu64 " on cpu", first, last);
  for (int i = 0; i < o.ndevs; i++)
    printf(", %s", clt_device_name(o.devs[i]));
  printf("%s\n", o.small ? " (small shapes)" : "");
  fflush(stdout);
  dt_summary s;
  dt_campaign(first, last, &o, &s);
  printf("difftest: %ld programs, %ld failures, %.1f s (%ld steps", s.programs, s.failures,
         s.seconds, s.steps);
  if (s.skipped)
    printf("; %ld device runs skipped: f64 without fp64", s.skipped);
  printf(")\n");
  /* CLBlast's program cache emptied before main returns, as check_util.c does after each test:
   * released from CLBlast's static destructor (or an atexit handler: too late too), it corrupts
   * Oclgrind's heap at exit (tests/oclgrind/exit_release.c; an abort on Oclgrind after 300
   * programs had passed, reported as a crash of the last seed) */
  clt__cl_matmul_clear_cache();
  return s.failures ? 1 : 0;
}
