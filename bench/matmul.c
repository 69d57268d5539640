/* SPDX-License-Identifier: MIT */
/* matmul.c - what clt_matmul reaches, per path, against the libraries it builds on.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/matmul [--full] [--runs N]
 *
 * f32 products of n x n matrices, n = 256, 512, 1024 (and 2048 with --full), on cpu and cl:0
 * (then matrix-vector products, n = 4096, against cblas_sgemv and the gemm with n = 1 that a
 * one-column product used to be):
 *   - clt_matmul on cpu (CBLAS or clt's loops) and on cl:0 by every path this build and device
 *     offer (CLT_MATMUL=native, clblast, kernel; the env var is read at each call);
 *   - CLBlastSgemm called directly on a context and queue of our own for the same device (the
 *     first device of the first platform), buffers resident;
 *   - cblas_sgemm (OpenBLAS) on host memory.
 * Medians of 5 runs (--runs N: N, at most 64) after one warm-up, wall clock, each run ending
 * when the device is done (clt_timer_stop / clFinish). GFLOP/s = 2 n^3 / s / 1e9; "vs blas" divides
 * by host OpenBLAS.
 */
#define _POSIX_C_SOURCE 200809L
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif

#include "config.h"

#include <CL/cl.h>
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef HAVE_CBLAS
#include <cblas.h>
#endif
#ifdef HAVE_CLBLAST
#include <clblast_c.h>
#endif

enum { MAX_RUNS = 64 };
static int runs = 5;

#if defined(HAVE_CBLAS) || defined(HAVE_CLBLAST)
static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
#endif

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

_Noreturn static void die(const char *what) {
  fprintf(stderr, "bench/matmul: %s: %s\n", what, clt_last_error());
  exit(1);
}

/* Median seconds of clt_matmul(a, b) on dev; -1 if the path fails. */
static double time_clt(clt_device *dev, clt_tensor *a, clt_tensor *b) {
  double t[MAX_RUNS];
  for (int r = -1; r < runs; r++) {
    clt_timer *tm;
    clt_tensor *c;
    if (clt_timer_start(dev, &tm) != CLT_OK)
      die("clt_timer_start");
    if (clt_matmul(a, b, &c) != CLT_OK) {
      fprintf(stderr, "bench/matmul: %s\n", clt_last_error());
      clt_timer_release(tm);
      return -1;
    }
    double ms;
    if (clt_timer_stop(tm, &ms) != CLT_OK)
      die("clt_timer_stop");
    clt_timer_release(tm);
    clt_tensor_release(c);
    if (r >= 0)
      t[r] = ms / 1e3;
  }
  return median(t, runs);
}

#ifdef HAVE_CBLAS
static double time_cblas(int n, const float *a, const float *b, float *c) {
  double t[MAX_RUNS];
  for (int r = -1; r < runs; r++) {
    double t0 = now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
    if (r >= 0)
      t[r] = now() - t0;
  }
  return median(t, runs);
}
#endif

#ifdef HAVE_CLBLAST
/* CLBlastSgemm on our own context and queue for the first device of the first platform. */
static double time_clblast(int n, const float *a, const float *b) {
  cl_platform_id pl;
  cl_device_id dv;
  cl_int err;
  if (clGetPlatformIDs(1, &pl, NULL) != CL_SUCCESS ||
      clGetDeviceIDs(pl, CL_DEVICE_TYPE_ALL, 1, &dv, NULL) != CL_SUCCESS)
    return -1;
  cl_context ctx = clCreateContext(NULL, 1, &dv, NULL, NULL, &err);
  if (err != CL_SUCCESS)
    return -1;
  cl_command_queue q = clCreateCommandQueue(ctx, dv, 0, &err);
  size_t bytes = (size_t)n * n * sizeof(float);
  cl_mem ma = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)a, &err);
  cl_mem mb = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, bytes, (void *)b, &err);
  cl_mem mc = clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
  double t[MAX_RUNS], result = 0;
  for (int r = -1; r < runs && result == 0; r++) {
    clFinish(q);
    double t0 = now();
    cl_event ev = NULL;
    if (CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, (size_t)n,
                     (size_t)n, (size_t)n, 1.0f, ma, 0, (size_t)n, mb, 0, (size_t)n, 0.0f, mc, 0,
                     (size_t)n, &q, &ev) != CLBlastSuccess)
      result = -1;
    clFinish(q);
    if (ev)
      clReleaseEvent(ev);
    if (r >= 0)
      t[r] = now() - t0;
  }
  clReleaseMemObject(ma);
  clReleaseMemObject(mb);
  clReleaseMemObject(mc);
  clReleaseCommandQueue(q);
  clReleaseContext(ctx);
  return result < 0 ? -1 : median(t, runs);
}
#endif

static double blas_gflops;

static int row_k = -1; /* the inner size: n (products of matrices) or 1 (matrix-vector) */

static void row(int n, const char *dev, const char *what, double s) {
  double gf = s > 0 ? 2.0 * n * (double)n * (row_k < 0 ? n : row_k) / s / 1e9 : 0;
  if (s <= 0) {
    printf("%6d  %-5s  %-24s  %10s  %9s  %8s\n", n, dev, what, "n/a", "n/a", "n/a");
    return;
  }
  char ratio[16] = "n/a";
  if (blas_gflops > 0)
    snprintf(ratio, sizeof ratio, "%.2f", gf / blas_gflops);
  printf("%6d  %-5s  %-24s  %10.3f  %9.1f  %8s\n", n, dev, what, s * 1e3, gf, ratio);
  fflush(stdout);
}

#ifdef HAVE_CBLAS
/* Median seconds of y = A x (n x n, f32) by cblas_sgemv, or (gemm) by cblas_sgemm with n = 1,
 * the call a product with one column made before clt ran them as gemv. */
static double time_cblas_mv(int n, const float *a, const float *x, float *y, int gemm) {
  double t[MAX_RUNS];
  for (int r = -1; r < runs; r++) {
    double t0 = now();
    if (gemm)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, 1, n, 1.0f, a, n, x, 1, 0.0f, y, 1);
    else
      cblas_sgemv(CblasRowMajor, CblasNoTrans, n, n, 1.0f, a, n, x, 1, 0.0f, y, 1);
    if (r >= 0)
      t[r] = now() - t0;
  }
  return median(t, runs);
}
#endif

/* The matrix-vector rows: A (n x n) times x (n), f32, 2 n^2 flops; "vs blas" against sgemv. */
static void matvec_rows(int n, clt_device *cl0) {
  size_t elems = (size_t)n * n;
  float *ha = malloc(elems * sizeof(float)), *hx = malloc((size_t)n * sizeof(float)),
        *hy = malloc((size_t)n * sizeof(float));
  if (!ha || !hx || !hy)
    die("out of memory");
  for (size_t i = 0; i < elems; i++)
    ha[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
  for (int i = 0; i < n; i++)
    hx[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
  printf("%6s  %-5s  %-24s  %10s  %9s  %8s\n", "n", "dev", "matrix-vector A x", "ms", "GFLOP/s",
         "vs gemv");
  double flops = 2.0 * (double)n * n;
  blas_gflops = 0;
  row_k = 1;
#ifdef HAVE_CBLAS
  double sv = time_cblas_mv(n, ha, hx, hy, 0);
  blas_gflops = flops / sv / 1e9;
  row(n, "host", "cblas_sgemv (OpenBLAS)", sv);
  row(n, "host", "cblas_sgemm, n = 1", time_cblas_mv(n, ha, hx, hy, 1));
#endif
  clt_tensor *a, *x;
  if (clt_from_host(ha, CLT_F32, 2, (int64_t[]){n, n}, clt_cpu(), &a) != CLT_OK ||
      clt_from_host(hx, CLT_F32, 1, (int64_t[]){n}, clt_cpu(), &x) != CLT_OK)
    die("clt_from_host");
  char what[64];
  snprintf(what, sizeof what, "clt_matmul A x [%s]", clt_matmul_path(clt_cpu()));
  row(n, "cpu", what, time_clt(clt_cpu(), a, x));
  if (cl0) {
    if (clt_move(&a, cl0) != CLT_OK || clt_move(&x, cl0) != CLT_OK)
      die("clt_move");
    const char *saved = getenv("CLT_MATMUL");
    static const char *paths[] = {"native", "clblast"};
    for (int p = 0; p < 2; p++) {
      setenv("CLT_MATMUL", paths[p], 1);
      if (!clt_matmul_path(cl0))
        continue;
      snprintf(what, sizeof what, "clt_matmul A x [%s]", paths[p]);
      row(n, "cl:0", what, time_clt(cl0, a, x));
    }
    if (saved)
      setenv("CLT_MATMUL", saved, 1);
    else
      unsetenv("CLT_MATMUL");
  }
  clt_tensor_release(a);
  clt_tensor_release(x);
  free(ha);
  free(hx);
  free(hy);
}

int main(int argc, char **argv) {
  int full = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--full") == 0) {
      full = 1;
    } else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc) {
      runs = atoi(argv[++i]);
      if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "bench/matmul: --runs takes 1 to %d\n", MAX_RUNS);
        return 2;
      }
    } else {
      fprintf(stderr, "usage: %s [--full] [--runs N]\n", argv[0]);
      return 2;
    }
  }
  int sizes[4] = {256, 512, 1024, 2048};
  int nsizes = full ? 4 : 3;
  clt_device *cl0 = clt_device_count() > 0 ? clt_device_at(0) : NULL;
  const char *saved = getenv("CLT_MATMUL");
  printf("clt %s bench/matmul: f32 n x n x n, median of %d after 1 warm-up\n", clt_version(), runs);
  printf("cpu: clt_matmul path %s; cl:0: %s, default path %s\n", clt_matmul_path(clt_cpu()),
         cl0 ? clt_device_description(cl0) : "absent", cl0 ? clt_matmul_path(cl0) : "n/a");
  printf("%6s  %-5s  %-24s  %10s  %9s  %8s\n", "n", "dev", "what", "ms", "GFLOP/s", "vs blas");
  for (int si = 0; si < nsizes; si++) {
    int n = sizes[si];
    int64_t shape[2] = {n, n};
    size_t elems = (size_t)n * n;
    float *ha = malloc(elems * sizeof(float)), *hb = malloc(elems * sizeof(float)),
          *hc = malloc(elems * sizeof(float));
    if (!ha || !hb || !hc)
      return 1;
    for (size_t i = 0; i < elems; i++) {
      ha[i] = (float)((i * 7919) % 1000) / 1000.0f - 0.5f;
      hb[i] = (float)((i * 104729) % 1000) / 1000.0f - 0.5f;
    }
    blas_gflops = 0;
#ifdef HAVE_CBLAS
    double sb = time_cblas(n, ha, hb, hc);
    blas_gflops = 2.0 * n * (double)n * n / sb / 1e9;
    row(n, "host", "cblas_sgemm (OpenBLAS)", sb);
#endif
    clt_tensor *a, *b;
    if (clt_from_host(ha, CLT_F32, 2, shape, clt_cpu(), &a) != CLT_OK ||
        clt_from_host(hb, CLT_F32, 2, shape, clt_cpu(), &b) != CLT_OK)
      die("clt_from_host");
    char what[64];
    snprintf(what, sizeof what, "clt_matmul [%s]", clt_matmul_path(clt_cpu()));
    row(n, "cpu", what, time_clt(clt_cpu(), a, b));
    if (cl0) {
      if (clt_move(&a, cl0) != CLT_OK || clt_move(&b, cl0) != CLT_OK)
        die("clt_move");
      static const char *paths[] = {"native", "clblast", "kernel"};
      for (int p = 0; p < 3; p++) {
        if (strcmp(paths[p], "kernel") == 0 && n > 1024)
          continue; /* minutes on a CPU device */
        setenv("CLT_MATMUL", paths[p], 1);
        if (!clt_matmul_path(cl0)) {
          unsetenv("CLT_MATMUL");
          continue;
        }
        snprintf(what, sizeof what, "clt_matmul [%s]", paths[p]);
        row(n, "cl:0", what, time_clt(cl0, a, b));
      }
      if (saved)
        setenv("CLT_MATMUL", saved, 1);
      else
        unsetenv("CLT_MATMUL");
#ifdef HAVE_CLBLAST
      row(n, "cl:0", "CLBlastSgemm (direct)", time_clblast(n, ha, hb));
#endif
    }
    clt_tensor_release(a);
    clt_tensor_release(b);
    free(ha);
    free(hb);
    free(hc);
  }
  matvec_rows(4096, cl0);
  return 0;
}
