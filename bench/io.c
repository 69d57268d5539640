/* SPDX-License-Identifier: MIT */
/* io.c - what loading a checkpoint costs: clt_load against Python's safetensors.numpy.load_file
 * on the same file.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/io [--quick] [--file PATH] [--runs N]
 *
 * Writes a safetensors file of 200 MB (50 f32 tensors of 10^6 elements; --quick: 20 MB) with
 * clt_save, or uses PATH, then measures, in one run, medians over N fresh processes of each kind
 * (default 9, after one untimed round; the kinds take turns within each round, so that the drift
 * of a shared machine's load falls on all of them alike) of the FIRST load in each process, the
 * case a program starting up meets (clt's devices are opened before the clock starts, as
 * `import` comes before the clock in Python):
 *   clt_load(path, clt_cpu())    every tensor into host memory;
 *   clt_load(path, cl:0)         every tensor onto the first OpenCL device (if there is one),
 *                                through clt's staging buffers, until the copies finish;
 *   safetensors.numpy.load_file  in $PYTHON (default python3), when it imports safetensors.
 * and, in this process, the median of N later loads to cpu (the allocator's cache warm).
 * The page cache cannot be dropped without root, so every run reads a file already in the page
 * cache (one read of the whole file comes first): these are warm-cache numbers, and both sides
 * are measured the same way. Lines "kv KEY VALUE" carry the numbers for scripts.
 *
 * A child process is this program run as `io --child cpu|cl:0 PATH`: it opens the devices,
 * times one clt_load and prints the milliseconds. */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_NAME "io"
#include "bench.h"

static double load_ms(const char *path, clt_device *dev) {
  clt_params *p;
  double t0 = now_s();
  CLT_CHECK(clt_load(path, dev, &p));
  if (dev != clt_cpu())
    CLT_CHECK(clt_device_synchronize(dev));
  double ms = 1e3 * (now_s() - t0);
  clt_params_release(p);
  return ms;
}

/* Runs cmd and reads one number (milliseconds) from its output; < 0 if it failed. */
static double run_ms(const char *cmd) {
  FILE *f = popen(cmd, "r");
  if (!f)
    return -1;
  double ms = -1;
  char line[512];
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "%lf", &ms) != 1)
      fputs(line, stderr);
  return pclose(f) == 0 ? ms : -1;
}

/* Medians over runs rounds of fresh processes, the commands taking turns within each round
 * (the machine's load drifts: turns share it fairly), after one untimed round; out[k] < 0 if
 * command k ever failed (cmds[k] NULL: skipped). */
static void first_loads(const char *const *cmds, int ncmds, int runs, double *out) {
  double v[4][64];
  int ok[4];
  for (int k = 0; k < ncmds; k++)
    ok[k] = cmds[k] != NULL;
  for (int r = -1; r < runs; r++)
    for (int k = 0; k < ncmds; k++)
      if (ok[k]) {
        double ms = run_ms(cmds[k]);
        if (ms < 0)
          ok[k] = 0;
        else if (r >= 0)
          v[k][r] = ms;
      }
  for (int k = 0; k < ncmds; k++)
    out[k] = ok[k] ? median(v[k], runs) : -1;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--child") == 0) {
    clt_device *dev;
    CLT_CHECK(clt_device_get(argv[2], &dev));
    printf("%.3f\n", load_ms(argv[3], dev));
    return 0;
  }
  const char *file = NULL;
  int quick = 0, runs = 9;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0)
      quick = 1;
    else if (strcmp(argv[i], "--file") == 0 && i + 1 < argc)
      file = argv[++i];
    else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = atoi(argv[++i]);
    else
      die("usage: io [--quick] [--file PATH] [--runs N]");
  }
  if (runs < 1 || runs > 64)
    die("--runs takes 1 to 64");
  char made[128] = "";
  if (!file) {
    snprintf(made, sizeof made, "%s/clt-bench-io-%ld.safetensors",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid());
    int ntensors = quick ? 5 : 50;
    int64_t shape[1] = {1000000};
    clt_params *p;
    CLT_CHECK(clt_params_create(&p));
    for (int i = 0; i < ntensors; i++) {
      clt_tensor *t;
      char name[64];
      snprintf(name, sizeof name, "layers.%d.weight", i);
      CLT_CHECK(clt_rand(CLT_F32, 1, shape, clt_cpu(), &t));
      CLT_CHECK(clt_params_add(p, name, t));
      clt_tensor_release(t);
    }
    CLT_CHECK(clt_save(made, p));
    clt_params_release(p);
    file = made;
  }
  /* Into the page cache. */
  FILE *f = fopen(file, "rb");
  if (!f)
    die("cannot open %s", file);
  static char buf[1 << 20];
  size_t total = 0, r;
  while ((r = fread(buf, 1, sizeof buf, f)) > 0)
    total += r;
  fclose(f);
  printf("file: %s, %.1f MB, page cache warm (reads of a file already cached)\n", file,
         (double)total / 1e6);

  char self[1024], cmd[3][4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0)
    die("cannot find my own executable");
  self[n] = '\0';
  const char *py = getenv("PYTHON") ? getenv("PYTHON") : "python3";
  snprintf(cmd[0], sizeof cmd[0], "'%s' --child cpu '%s'", self, file);
  snprintf(cmd[1], sizeof cmd[1], "'%s' --child cl:0 '%s'", self, file);
  snprintf(cmd[2], sizeof cmd[2],
           "'%s' -c 'import sys, time, safetensors.numpy as st\n"
           "t = time.perf_counter(); d = st.load_file(sys.argv[1])\n"
           "print((time.perf_counter() - t) * 1e3)' '%s' 2>/dev/null",
           py, file);
  const char *cmds[3] = {cmd[0], clt_device_count() > 0 ? cmd[1] : NULL, cmd[2]};
  double ms[3];
  first_loads(cmds, 3, runs, ms);
  double clt_cpu_ms = ms[0], clt_dev_ms = ms[1], py_ms = ms[2];
  if (clt_cpu_ms < 0)
    die("a child process failed (run %s --child cpu %s to see why)", self, file);
  double warm[64];
  load_ms(file, clt_cpu());
  for (int i = 0; i < runs; i++)
    warm[i] = load_ms(file, clt_cpu());
  double warm_ms = median(warm, runs);

  printf("first load in a fresh process, median of %d processes:\n", runs);
  printf("  clt_load -> cpu                  %8.1f ms  %6.2f GB/s\n", clt_cpu_ms,
         (double)total / clt_cpu_ms / 1e6);
  if (clt_dev_ms >= 0)
    printf("  clt_load -> cl:0                 %8.1f ms  %6.2f GB/s\n", clt_dev_ms,
           (double)total / clt_dev_ms / 1e6);
  if (py_ms >= 0) {
    printf("  safetensors.numpy.load_file      %8.1f ms  %6.2f GB/s\n", py_ms,
           (double)total / py_ms / 1e6);
    printf("  clt -> cpu over safetensors.numpy: %.2fx time\n", clt_cpu_ms / py_ms);
  } else {
    printf("peer missing: %s cannot import safetensors.numpy (pip install safetensors numpy)\n",
           py);
  }
  printf("later loads in one process (allocator cache warm), median of %d:\n", runs);
  printf("  clt_load -> cpu                  %8.1f ms  %6.2f GB/s\n", warm_ms,
         (double)total / warm_ms / 1e6);
  printf("kv io_first_load_cpu_ms %.2f\n", clt_cpu_ms);
  if (clt_dev_ms >= 0)
    printf("kv io_first_load_cl0_ms %.2f\n", clt_dev_ms);
  if (py_ms >= 0)
    printf("kv io_first_load_safetensors_numpy_ms %.2f\n", py_ms);
  printf("kv io_warm_load_cpu_ms %.2f\n", warm_ms);
  if (made[0])
    remove(made);
  return 0;
}
