/* SPDX-License-Identifier: MIT */
/* mpi_allreduce.c - what clt_mpi_allreduce costs against MPI_Allreduce on plain host buffers.
 *
 *   $ POCL_DEVICES="pthread pthread" mpirun -np 2 ./bench/mpi_allreduce [--quick] [--reps N]
 *                                                                       [--mib M] [--kv]
 *
 * Sums M MiB of f32 (64 by default) over the ranks, in one run, each case timed from a barrier
 * until the slowest rank has the result (for device tensors: until the copies back have
 * finished, clt_device_synchronize), median over --reps runs (9) after two warm-ups:
 *   (a) MPI_Allreduce(MPI_IN_PLACE) on a malloc'ed host buffer, in one call: the reference;
 *   (a') the same in calls of 1 MiB: Open MPI's shared-memory allreduce of one large buffer
 *        runs out of cache, so pieces are faster, and clt's staging gets this for free;
 *   (a'') MPI alone: one 1 MiB host buffer summed as many times as (a') calls, memory
 *        that stays in cache), the bound for a pipeline that hides its copies completely;
 *   (b) clt_mpi_allreduce of a host tensor (handed to MPI in place, in one call);
 *   (c) clt_mpi_allreduce of a tensor on this rank's device (clt_mpi_device: cl:0, cl:1, ...),
 *       staged in chunks of 1 MiB (the default) whose copies overlap MPI, then of 256 KiB,
 *       4 MiB and 16 MiB, then whole (clt_mpi_chunk_set(0): read all, MPI, write all, no
 *       overlap), which shows what the overlap gains.
 * Prints each median and the reference's time over clt's (above 1: clt is faster); the target
 * for (c) against (a) is 0.8. --kv adds "kv key value" lines (milliseconds). --quick: 8 MiB,
 * 3 reps. */
#define _POSIX_C_SOURCE 200809L
#include <clt_mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BENCH_NAME "mpi_allreduce"
#include "bench.h"

static int rank, nranks;

/* Runs one case reps + 2 times; returns the median over ranks' slowest times, in seconds. */
static double time_case(int reps, void (*run)(void *ctx), void *ctx) {
  double t[64];
  int n = reps < 64 ? reps : 64;
  for (int i = 0; i < 2 + n; i++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_s();
    run(ctx);
    double mine = now_s() - t0, slowest = 0;
    MPI_Allreduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (i >= 2)
      t[i - 2] = slowest;
  }
  return median(t, n);
}

typedef struct state {
  float *raw;
  size_t n;
  clt_tensor *host, *dev_t;
  clt_device *dev;
} state;

static void run_raw(void *p) {
  state *s = p;
  if (MPI_Allreduce(MPI_IN_PLACE, s->raw, (int)s->n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    die("MPI_Allreduce failed");
}

static void run_raw_pieces(void *p) {
  state *s = p;
  size_t piece = ((size_t)1 << 20) / sizeof(float);
  for (size_t i = 0; i < s->n; i += piece)
    if (MPI_Allreduce(MPI_IN_PLACE, s->raw + i, (int)(s->n - i < piece ? s->n - i : piece),
                      MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
      die("MPI_Allreduce failed");
}

static void run_raw_hot(void *p) {
  state *s = p;
  size_t piece = ((size_t)1 << 20) / sizeof(float);
  for (size_t i = 0; i < s->n; i += piece)
    if (MPI_Allreduce(MPI_IN_PLACE, s->raw, (int)(s->n - i < piece ? s->n - i : piece), MPI_FLOAT,
                      MPI_SUM, MPI_COMM_WORLD) != MPI_SUCCESS)
      die("MPI_Allreduce failed");
}

static void run_clt_host(void *p) {
  state *s = p;
  CLT_CHECK(clt_mpi_allreduce(s->host, CLT_MPI_SUM, MPI_COMM_WORLD));
}

static void run_clt_device(void *p) {
  state *s = p;
  CLT_CHECK(clt_mpi_allreduce(s->dev_t, CLT_MPI_SUM, MPI_COMM_WORLD));
  CLT_CHECK(clt_device_synchronize(s->dev));
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int reps = 9, kv = 0;
  double mib = 64;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      mib = 8;
      reps = 3;
    } else if (strcmp(argv[i], "--kv") == 0) {
      kv = 1;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (strcmp(argv[i], "--mib") == 0 && i + 1 < argc) {
      mib = atof(argv[++i]);
    } else {
      if (rank == 0)
        fprintf(stderr, "usage: mpirun -np 2 %s [--quick] [--reps N] [--mib M] [--kv]\n", argv[0]);
      MPI_Finalize();
      return 2;
    }
  }
  if (reps < 1 || mib <= 0)
    die("--reps and --mib must be positive");

  state s = {0};
  s.n = (size_t)(mib * (1 << 20)) / sizeof(float);
  CLT_CHECK(clt_mpi_device(MPI_COMM_WORLD, &s.dev));
  int64_t shape[1] = {(int64_t)s.n};
  s.raw = malloc(s.n * sizeof(float));
  if (!s.raw)
    die("out of memory");
  for (size_t i = 0; i < s.n; i++)
    s.raw[i] = (float)((i + (size_t)rank) % 7);
  CLT_CHECK(clt_from_host(s.raw, CLT_F32, 1, shape, clt_cpu(), &s.host));
  CLT_CHECK(clt_from_host(s.raw, CLT_F32, 1, shape, s.dev, &s.dev_t));
  CLT_CHECK(clt_device_synchronize(s.dev));
  if (rank == 0) {
    printf("mpi_allreduce: %d ranks, %.0f MiB f32 (%zu elements) summed, median of %d runs\n",
           nranks, mib, s.n, reps);
    printf("rank 0: %s; %s\n", clt_mpi_device_reason(), clt_device_description(s.dev));
  }

  double raw = time_case(reps, run_raw, &s);
  double pieces = time_case(reps, run_raw_pieces, &s);
  double hot = time_case(reps, run_raw_hot, &s);
  double host = time_case(reps, run_clt_host, &s);
  enum { NDEV = 5 };
  const size_t chunks[NDEV] = {(size_t)1 << 20, (size_t)256 << 10, (size_t)4 << 20,
                               (size_t)16 << 20, 0};
  const char *names[NDEV] = {"1 MiB chunks (default)", "256 KiB chunks", "4 MiB chunks",
                             "16 MiB chunks", "whole (no overlap)"};
  const char *keys[NDEV] = {"chunk1m", "chunk256k", "chunk4m", "chunk16m", "whole"};
  double dev[NDEV];
  for (int c = 0; c < NDEV; c++) {
    clt_mpi_chunk_set(chunks[c]);
    dev[c] = time_case(reps, run_clt_device, &s);
  }
  clt_mpi_chunk_set((size_t)1 << 20);

  if (rank == 0) {
    double gb = (double)s.n * sizeof(float) / 1e9;
    printf("  %-58s %9.2f ms %7.2f GB/s\n", "MPI_Allreduce, host buffer (reference)", raw * 1e3,
           gb / raw);
    printf("  %-58s %9.2f ms %7.2f GB/s  %.2fx\n", "MPI_Allreduce, host buffer, 1 MiB calls",
           pieces * 1e3, gb / pieces, raw / pieces);
    printf("  %-58s %9.2f ms %7.2f GB/s  %.2fx\n",
           "MPI_Allreduce, 1 MiB calls on one buffer (MPI alone)", hot * 1e3, gb / hot, raw / hot);
    printf("  %-58s %9.2f ms %7.2f GB/s  %.2fx\n", "clt_mpi_allreduce, host tensor", host * 1e3,
           gb / host, raw / host);
    for (int c = 0; c < NDEV; c++) {
      char label[96];
      snprintf(label, sizeof label, "clt_mpi_allreduce, %s tensor, %s", clt_device_name(s.dev),
               names[c]);
      printf("  %-58s %9.2f ms %7.2f GB/s  %.2fx\n", label, dev[c] * 1e3, gb / dev[c],
             raw / dev[c]);
    }
    printf("the last column: the reference's (one MPI_Allreduce call) time over this row's "
           "(target for the device tensor with the default chunks: >= 0.8x)\n");
    printf("default chunks against MPI_Allreduce in 1 MiB calls: %.2fx, against MPI alone: "
           "%.2fx; overlap gain over whole staging: %.2fx\n",
           pieces / dev[0], hot / dev[0], dev[NDEV - 1] / dev[0]);
    if (kv) {
      printf("kv mpi_allreduce_raw_ms %.4f\nkv mpi_allreduce_raw_pieces_ms %.4f\n"
             "kv mpi_allreduce_raw_hot_ms %.4f\nkv mpi_allreduce_host_ms %.4f\n",
             raw * 1e3, pieces * 1e3, hot * 1e3, host * 1e3);
      for (int c = 0; c < NDEV; c++)
        printf("kv mpi_allreduce_dev_%s_ms %.4f\n", keys[c], dev[c] * 1e3);
    }
  }
  clt_tensor_release(s.host);
  clt_tensor_release(s.dev_t);
  free(s.raw);
  MPI_Finalize();
  return 0;
}
