/* SPDX-License-Identifier: MIT */
/* views.c - what views cost: ops on narrowed and transposed views against the same ops on
 * contiguous tensors, clt_contiguous and clt_cat against a raw copy of the same bytes.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/views [--reps N] [--kv] [--why]
 *
 * Measures, in one run, with the cases of each section interleaved (one run of each case per
 * round, rotating which goes first, so that a noisy neighbour slows them alike), medians over N
 * rounds (default 9) after 2 warm-up rounds, wall clock (CLOCK_MONOTONIC). Every clt timed
 * region ends with clt_device_synchronize; results are released outside it.
 *   (a) add of two narrowed views, rows 1..4096 of (4098 x 4096) f32 matrices (16M elements,
 *       contiguous views at an offset), against the add of two contiguous 4096 x 4096
 *       tensors; on cl:0 and on cpu (issue 25: >= 0.95x);
 *   (b) add of the transposed 4096 x 4096 f32 view (clt_transpose) and a contiguous one,
 *       against the contiguous add; on cl:0 and on cpu (issue 25: >= 0.8x); and, for
 *       comparison, the same add through a clt_contiguous copy of the view first;
 *   (c) clt_contiguous of that transposed view (64 MiB) against a raw copy of 64 MiB:
 *       clEnqueueCopyBuffer on a context and queue of our own (the first device of the first
 *       platform) for cl:0, memcpy for cpu (>= 0.9x);
 *   (d) clt_cat on cl:0 of 8 tensors of 2M f32 along dim 0, and of 8 (2048 x 1024) tensors
 *       along dim 1, against the same raw 64 MiB clEnqueueCopyBuffer (>= 0.8x).
 * (c) on cl:0 and (d) also time a raw float4 copy kernel in clt's launch shape (issue 13 speaks
 * of "a raw copy kernel's bandwidth"); on PoCL it is sometimes faster, sometimes slower than
 * clEnqueueCopyBuffer.
 * Inputs hold position-dependent values, and every clt result is checked once, at sampled
 * positions, against values computed on the host, so that no case can measure the wrong work.
 * --why adds raw variants of the strided copy: clt's index split per element, a walk along rows,
 * 64 x 64 tiles (and of 4 x 4 float4 blocks), on the raw cl:0 device; element by element and tiled
 * on the host. GB/s are 10^9 bytes per second of bytes read plus written: add moves 12 B per
 * element, a copy 8 B. --kv adds "key value" lines (milliseconds) for bench/run.
 */
#define _POSIX_C_SOURCE 200809L
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <clt.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "views"
#define BENCH_SECTIONS 8 /* cases in a section, at the most */
#include "bench.h"

/* The median over the last section's rounds of case ref's time over case i's: the ratio of two
 * cases measured back to back, which a slow drift of the machine's load moves less than the
 * ratio of their medians. */
static double paired(int ref, int i) {
  double q[MAX_REPS];
  for (int r = 0; r < reps; r++)
    q[r] = times[ref][r] / times[i][r];
  return median(q, reps);
}

/* ---- state --------------------------------------------------------------------------------- */

enum { N = 4096, PARTS = 8 };
#define NUMEL ((size_t)N * N) /* 16M: 64 MiB of f32 */

/* The tensors of one device: x, y contiguous N x N; p, q (N + 2) x N, with pn, qn their rows
 * 1..N; xt the transposed view of x; the cat parts. */
typedef struct side {
  clt_device *dev;
  clt_tensor *x, *y, *p, *q, *pn, *qn, *xt, *row[PARTS], *col[PARTS];
} side;

typedef struct bench {
  side cl, cpu;
  side *s;            /* the side the current section runs on */
  clt_tensor *result; /* released by after() */
  /* host data: x, y, p, q (flat, C order) */
  float *hx, *hy, *hp, *hq, *check;
  /* raw references */
  cl_device_id cl_dev;
  cl_context ctx;
  cl_command_queue q;
  cl_mem rsrc, rdst;
  cl_kernel k_copy, k_div, k_rows, k_tiled, k_tiled4;
  cl_uint cu; /* compute units */
  size_t copy_global;
  cl_ulong copy_chunk4;
  float *msrc, *mdst;
  int64_t why_sr, why_sc; /* the --why host copy's source strides */
} bench;

/* The raw kernels: a float4 copy (one contiguous chunk per work-item, the shape clt uses on CPU
 * devices), and three ways of copying a 2-D strided source (rows x cols at strides sr, sc) into
 * a contiguous destination, for --why: an index split into coordinates per element (what clt's
 * strided kernel does on GPUs, and did on CPU devices), a walk along rows (coordinates once per
 * row, what it does on CPU devices), and 64 x 64 tiles, of
 * elements or of 4 x 4 blocks transposed in float4 registers. */
static const char *raw_kernels =
    "__kernel void copy_f32_chunk(__global const float4 *restrict a,\n"
    "                             __global float4 *restrict c, ulong n4, ulong chunk4) {\n"
    "  ulong start = (ulong)get_global_id(0) * chunk4, end = min(start + chunk4, n4);\n"
    "  for (ulong i = start; i < end; i++)\n"
    "    c[i] = a[i];\n"
    "}\n"
    "__kernel void copy2d_div(__global const float *restrict a, __global float *restrict c,\n"
    "                         long rows, long cols, long sr, long sc, ulong chunk) {\n"
    "  ulong n = (ulong)(rows * cols);\n"
    "  ulong start = (ulong)get_global_id(0) * chunk, end = min(start + chunk, n);\n"
    "  for (ulong i = start; i < end; i++) {\n"
    "    ulong q = i / (ulong)cols;\n"
    "    long j = (long)(i - q * (ulong)cols);\n"
    "    ulong q2 = q / (ulong)rows;\n"
    "    long r = (long)(q - q2 * (ulong)rows);\n"
    "    c[i] = a[r * sr + j * sc];\n"
    "  }\n"
    "}\n"
    "__kernel void copy2d_rows(__global const float *restrict a, __global float *restrict c,\n"
    "                          long rows, long cols, long sr, long sc, ulong chunk) {\n"
    "  long r0 = (long)(get_global_id(0) * chunk), r1 = min(r0 + (long)chunk, rows);\n"
    "  for (long r = r0; r < r1; r++)\n"
    "    for (long j = 0; j < cols; j++)\n"
    "      c[r * cols + j] = a[r * sr + j * sc];\n"
    "}\n"
    "__kernel void copy2d_tiled(__global const float *restrict a, __global float *restrict c,\n"
    "                           long rows, long cols, long sr, long sc, ulong chunk) {\n"
    "  long r0 = (long)(get_global_id(0) * chunk), r1 = min(r0 + (long)chunk, rows);\n"
    "  for (long rt = r0; rt < r1; rt += 64)\n"
    "    for (long jt = 0; jt < cols; jt += 64)\n"
    "      for (long r = rt; r < min(rt + 64, r1); r++)\n"
    "        for (long j = jt; j < min(jt + 64, cols); j++)\n"
    "          c[r * cols + j] = a[r * sr + j * sc];\n"
    "}\n"
    "__kernel void copy2d_tiled4(__global const float *restrict a, __global float *restrict c,\n"
    "                            long rows, long cols, long sr, long sc, ulong chunk) {\n"
    "  /* sr == 1 and rows, cols multiples of 4: 4 x 4 blocks transposed in registers */\n"
    "  long r0 = (long)(get_global_id(0) * chunk), r1 = min(r0 + (long)chunk, rows);\n"
    "  for (long rt = r0; rt < r1; rt += 64)\n"
    "    for (long jt = 0; jt < cols; jt += 64)\n"
    "      for (long r = rt; r < min(rt + 64, r1); r += 4)\n"
    "        for (long j = jt; j < min(jt + 64, cols); j += 4) {\n"
    "          float4 c0 = vload4(0, a + r + j * sc), c1 = vload4(0, a + r + (j + 1) * sc);\n"
    "          float4 c2 = vload4(0, a + r + (j + 2) * sc), c3 = vload4(0, a + r + (j + 3) * sc);\n"
    "          vstore4((float4)(c0.x, c1.x, c2.x, c3.x), 0, c + r * cols + j);\n"
    "          vstore4((float4)(c0.y, c1.y, c2.y, c3.y), 0, c + (r + 1) * cols + j);\n"
    "          vstore4((float4)(c0.z, c1.z, c2.z, c3.z), 0, c + (r + 2) * cols + j);\n"
    "          vstore4((float4)(c0.w, c1.w, c2.w, c3.w), 0, c + (r + 3) * cols + j);\n"
    "        }\n"
    "}\n";

static void release_result(void *p) {
  bench *b = p;
  clt_tensor_release(b->result);
  b->result = NULL;
}

static void run_add_contig(void *p) {
  bench *b = p;
  CLT_CHECK(clt_add(b->s->x, b->s->y, &b->result));
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
static void run_add_narrow(void *p) {
  bench *b = p;
  CLT_CHECK(clt_add(b->s->pn, b->s->qn, &b->result));
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
static void run_add_transposed(void *p) {
  bench *b = p;
  CLT_CHECK(clt_add(b->s->xt, b->s->y, &b->result));
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
/* (b), the other way: a contiguous copy of the transposed operand first, then the fast add */
static void run_add_via_copy(void *p) {
  bench *b = p;
  clt_tensor *c;
  CLT_CHECK(clt_contiguous(b->s->xt, &c));
  CLT_CHECK(clt_add(c, b->s->y, &b->result));
  clt_tensor_release(c);
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
static void run_contiguous(void *p) {
  bench *b = p;
  CLT_CHECK(clt_contiguous(b->s->xt, &b->result));
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
static void run_cat0(void *p) {
  bench *b = p;
  CLT_CHECK(clt_cat(PARTS, b->s->row, 0, &b->result));
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
static void run_cat1(void *p) {
  bench *b = p;
  CLT_CHECK(clt_cat(PARTS, b->s->col, 1, &b->result));
  CLT_CHECK(clt_device_synchronize(b->s->dev));
}
static void run_raw_copy(void *p) {
  bench *b = p;
  CL_CHECK(clEnqueueCopyBuffer(b->q, b->rsrc, b->rdst, 0, 0, NUMEL * sizeof(float), 0, NULL, NULL));
  CL_CHECK(clFinish(b->q));
}
static void run_raw_copy_kernel(void *p) {
  bench *b = p;
  CL_CHECK(clEnqueueNDRangeKernel(b->q, b->k_copy, 1, NULL, &b->copy_global, NULL, 0, NULL, NULL));
  CL_CHECK(clFinish(b->q));
}
/* --why on the host: the transposed copy, one thread, element by element and in 64 x 64 tiles
 * (as lib/host/elementwise.c copies) */
static void run_host_naive(void *p) {
  bench *b = p;
  for (int64_t r = 0; r < N; r++)
    for (int64_t j = 0; j < N; j++)
      b->mdst[r * N + j] = b->msrc[r * b->why_sr + j * b->why_sc];
  __asm__ volatile("" : : "r"(b->mdst) : "memory");
}
static void run_host_tiled(void *p) {
  bench *b = p;
  for (int64_t rt = 0; rt < N; rt += 64)
    for (int64_t jt = 0; jt < N; jt += 64)
      for (int64_t r = rt; r < rt + 64; r++)
        for (int64_t j = jt; j < jt + 64; j++)
          b->mdst[r * N + j] = b->msrc[r * b->why_sr + j * b->why_sc];
  __asm__ volatile("" : : "r"(b->mdst) : "memory");
}
static void run_memcpy(void *p) {
  bench *b = p;
  memcpy(b->mdst, b->msrc, NUMEL * sizeof(float));
  /* keep the copy from being optimized away */
  __asm__ volatile("" : : "r"(b->mdst) : "memory");
}

/* --why on cl:0: variant v of the 2-D copy (kernel, source strides) */
typedef struct why_variant {
  const char *label;
  int kernel; /* 0: per-element index split, 1: rows, 2: tiles, 3: tiles of 4 x 4 blocks */
  int transposed;
} why_variant;

static const why_variant why_variants[] = {
    {"raw, index split per element, contiguous source", 0, 0},
    {"raw, index split per element, transposed source", 0, 1},
    {"raw, walk along rows, contiguous source", 1, 0},
    {"raw, walk along rows, transposed source", 1, 1},
    {"raw, 64 x 64 tiles, transposed source", 2, 1},
    {"raw, 64 x 64 tiles of 4 x 4 float4 blocks, transposed", 3, 1},
};
enum { WHY_VARIANTS = sizeof why_variants / sizeof why_variants[0] };

static void run_why(bench *b, int v) {
  const why_variant *w = &why_variants[v];
  cl_kernel k = w->kernel == 0   ? b->k_div
                : w->kernel == 1 ? b->k_rows
                : w->kernel == 2 ? b->k_tiled
                                 : b->k_tiled4;
  cl_long rows = N, cols = N, sr = w->transposed ? 1 : N, sc = w->transposed ? N : 1;
  cl_ulong items = (cl_ulong)b->cu * 4;
  cl_ulong total = w->kernel == 0 ? (cl_ulong)NUMEL : (cl_ulong)N; /* elements or rows */
  cl_ulong chunk = (total + items - 1) / items;
  chunk = (chunk + 63) / 64 * 64; /* whole tiles */
  size_t global = (size_t)((total + chunk - 1) / chunk);
  CL_CHECK(clSetKernelArg(k, 0, sizeof(cl_mem), &b->rsrc));
  CL_CHECK(clSetKernelArg(k, 1, sizeof(cl_mem), &b->rdst));
  CL_CHECK(clSetKernelArg(k, 2, sizeof rows, &rows));
  CL_CHECK(clSetKernelArg(k, 3, sizeof cols, &cols));
  CL_CHECK(clSetKernelArg(k, 4, sizeof sr, &sr));
  CL_CHECK(clSetKernelArg(k, 5, sizeof sc, &sc));
  CL_CHECK(clSetKernelArg(k, 6, sizeof chunk, &chunk));
  CL_CHECK(clEnqueueNDRangeKernel(b->q, k, 1, NULL, &global, NULL, 0, NULL, NULL));
  CL_CHECK(clFinish(b->q));
}
#define WHY_RUN_(v)                                                                                \
  static void run_why##v(void *p) { run_why(p, v); }
WHY_RUN_(0)
WHY_RUN_(1)
WHY_RUN_(2)
WHY_RUN_(3)
WHY_RUN_(4)
WHY_RUN_(5)
static void (*const why_runs[WHY_VARIANTS])(void *) = {run_why0, run_why1, run_why2,
                                                       run_why3, run_why4, run_why5};

/* Checks the last --why kernel's copy (transposed or not) at sampled positions. */
static void verify_why(bench *b, int transposed, const char *what) {
  CL_CHECK(clEnqueueReadBuffer(b->q, b->rdst, CL_TRUE, 0, NUMEL * sizeof(float), b->check, 0, NULL,
                               NULL));
  for (size_t k = 0; k < NUMEL; k += 4099) {
    size_t i = k / N, j = k % N;
    float want = transposed ? b->hx[j * N + i] : b->hx[k];
    if (b->check[k] != want)
      die("%s: element (%zu, %zu) is %g, expected %g", what, i, j, (double)b->check[k],
          (double)want);
  }
}

/* ---- setup --------------------------------------------------------------------------------- */

/* Position-dependent values, exact in f32, whose sums are exact too. */
static float *host_data(size_t n, unsigned mod, unsigned shift) {
  float *v = malloc(n * sizeof *v);
  if (!v)
    die("out of host memory");
  for (size_t i = 0; i < n; i++)
    v[i] = (float)((i + shift) % mod);
  return v;
}

static void side_setup(bench *b, side *s, clt_device *dev) {
  int64_t sq[2] = {N, N}, tall[2] = {N + 2, N}, row[1] = {(int64_t)(NUMEL / PARTS)},
          col[2] = {N / 2, (int64_t)(NUMEL / PARTS / (N / 2))};
  s->dev = dev;
  CLT_CHECK(clt_from_host(b->hx, CLT_F32, 2, sq, dev, &s->x));
  CLT_CHECK(clt_from_host(b->hy, CLT_F32, 2, sq, dev, &s->y));
  CLT_CHECK(clt_from_host(b->hp, CLT_F32, 2, tall, dev, &s->p));
  CLT_CHECK(clt_from_host(b->hq, CLT_F32, 2, tall, dev, &s->q));
  CLT_CHECK(clt_narrow(s->p, 0, 1, N, &s->pn));
  CLT_CHECK(clt_narrow(s->q, 0, 1, N, &s->qn));
  CLT_CHECK(clt_transpose(s->x, 0, 1, &s->xt));
  if (!clt_is_contiguous(s->pn) || clt_tensor_offset(s->pn) != N)
    die("the narrowed view is not contiguous at offset %d", N);
  if (clt_is_contiguous(s->xt))
    die("the transposed view is contiguous");
  /* the cat parts: consecutive 2M pieces of hx; the (2048 x 1024) ones too */
  for (int i = 0; i < PARTS; i++) {
    const float *piece = b->hx + (size_t)i * (NUMEL / PARTS);
    CLT_CHECK(clt_from_host(piece, CLT_F32, 1, row, dev, &s->row[i]));
    CLT_CHECK(clt_from_host(piece, CLT_F32, 2, col, dev, &s->col[i]));
  }
  CLT_CHECK(clt_device_synchronize(dev));
}

static void side_teardown(side *s) {
  clt_tensor *t[] = {s->x, s->y, s->p, s->q, s->pn, s->qn, s->xt};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    clt_tensor_release(t[i]);
  for (int i = 0; i < PARTS; i++) {
    clt_tensor_release(s->row[i]);
    clt_tensor_release(s->col[i]);
  }
}

static void raw_setup(bench *b) {
  raw_open(&b->cl_dev, &b->ctx, &b->q);
  cl_int err;
  cl_program prog = raw_program(b->ctx, b->cl_dev, raw_kernels, "the raw kernels");
  b->k_copy = raw_kernel(prog, "copy_f32_chunk");
  b->k_div = raw_kernel(prog, "copy2d_div");
  b->k_rows = raw_kernel(prog, "copy2d_rows");
  b->k_tiled = raw_kernel(prog, "copy2d_tiled");
  b->k_tiled4 = raw_kernel(prog, "copy2d_tiled4");
  clReleaseProgram(prog);
  b->rsrc = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, NUMEL * sizeof(float), NULL, &err);
  CL_CHECK(err);
  b->rdst = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, NUMEL * sizeof(float), NULL, &err);
  CL_CHECK(err);
  CL_CHECK(
      clEnqueueWriteBuffer(b->q, b->rsrc, CL_TRUE, 0, NUMEL * sizeof(float), b->hx, 0, NULL, NULL));
  float zero = 0;
  CL_CHECK(clEnqueueFillBuffer(b->q, b->rdst, &zero, sizeof zero, 0, NUMEL * sizeof(float), 0, NULL,
                               NULL));
  CL_CHECK(clFinish(b->q));
  /* clt's launch shape on CPU devices (lib/opencl/opencl.c): 4 chunks per compute unit */
  cl_uint cu = 1;
  CL_CHECK(clGetDeviceInfo(b->cl_dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
  b->cu = cu ? cu : 1;
  cl_ulong n4 = NUMEL / 4, items = (cl_ulong)b->cu * 4;
  b->copy_chunk4 = (n4 + items - 1) / items;
  b->copy_global = (size_t)((n4 + b->copy_chunk4 - 1) / b->copy_chunk4);
  CL_CHECK(clSetKernelArg(b->k_copy, 0, sizeof(cl_mem), &b->rsrc));
  CL_CHECK(clSetKernelArg(b->k_copy, 1, sizeof(cl_mem), &b->rdst));
  CL_CHECK(clSetKernelArg(b->k_copy, 2, sizeof n4, &n4));
  CL_CHECK(clSetKernelArg(b->k_copy, 3, sizeof b->copy_chunk4, &b->copy_chunk4));
  b->msrc = host_data(NUMEL, 8191, 0);
  b->mdst = calloc(NUMEL, sizeof(float));
  if (!b->mdst)
    die("out of host memory");
  memset(b->mdst, 1, NUMEL * sizeof(float)); /* touch every page before timing */
}

static void raw_teardown(bench *b) {
  cl_kernel k[] = {b->k_copy, b->k_div, b->k_rows, b->k_tiled, b->k_tiled4};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    clReleaseKernel(k[i]);
  clReleaseMemObject(b->rsrc);
  clReleaseMemObject(b->rdst);
  clReleaseCommandQueue(b->q);
  clReleaseContext(b->ctx);
  free(b->msrc);
  free(b->mdst);
}

/* ---- checks -------------------------------------------------------------------------------- */

/* The expected value of element (i, j) of a result, i < rows, j < cols. */
typedef float (*expect_fn)(const bench *b, size_t i, size_t j);

static float e_add(const bench *b, size_t i, size_t j) {
  return b->hx[i * N + j] + b->hy[i * N + j];
}
static float e_narrow(const bench *b, size_t i, size_t j) {
  return b->hp[(i + 1) * N + j] + b->hq[(i + 1) * N + j];
}
static float e_tadd(const bench *b, size_t i, size_t j) {
  return b->hx[j * N + i] + b->hy[i * N + j];
}
static float e_transposed(const bench *b, size_t i, size_t j) { return b->hx[j * N + i]; }
static float e_cat0(const bench *b, size_t i, size_t j) { return b->hx[i * N + j]; }
/* dim 1: part k = j / 1024 holds hx[k * 2M + i * 1024 + (j % 1024)] */
static float e_cat1(const bench *b, size_t i, size_t j) {
  size_t w = NUMEL / PARTS / (N / 2);
  return b->hx[(j / w) * (NUMEL / PARTS) + i * w + j % w];
}

/* Reads t (rows x cols, 64 MiB) and compares its corners and 4096 pseudo-random elements with
 * expect; dies on the first difference. Releases t. */
static void verify(bench *b, clt_tensor *t, size_t rows, size_t cols, expect_fn expect,
                   const char *what) {
  if ((size_t)clt_tensor_numel(t) != rows * cols)
    die("%s: %lld elements, expected %zu", what, (long long)clt_tensor_numel(t), rows * cols);
  CLT_CHECK(clt_tensor_read(t, b->check, NUMEL * sizeof(float)));
  clt_tensor_release(t);
  uint64_t r = 0x9e3779b97f4a7c15ull;
  for (int k = 0; k < 4096 + 2; k++) {
    size_t i, j;
    if (k < 2) {
      i = k ? rows - 1 : 0;
      j = k ? cols - 1 : 0;
    } else {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      i = (size_t)(r % rows);
      j = (size_t)((r >> 32) % cols);
    }
    float got = b->check[i * cols + j], want = expect(b, i, j);
    if (got != want)
      die("%s: element (%zu, %zu) is %g, expected %g", what, i, j, (double)got, (double)want);
  }
}

static void verify_side(bench *b, side *s, const char *dev) {
  char what[64];
  clt_tensor *t;
  snprintf(what, sizeof what, "clt_add on %s", dev);
  CLT_CHECK(clt_add(s->x, s->y, &t));
  verify(b, t, N, N, e_add, what);
  snprintf(what, sizeof what, "clt_add of narrowed views on %s", dev);
  CLT_CHECK(clt_add(s->pn, s->qn, &t));
  verify(b, t, N, N, e_narrow, what);
  snprintf(what, sizeof what, "clt_add of a transposed view on %s", dev);
  CLT_CHECK(clt_add(s->xt, s->y, &t));
  verify(b, t, N, N, e_tadd, what);
  snprintf(what, sizeof what, "clt_contiguous of a transposed view on %s", dev);
  CLT_CHECK(clt_contiguous(s->xt, &t));
  verify(b, t, N, N, e_transposed, what);
  snprintf(what, sizeof what, "clt_cat along dim 0 on %s", dev);
  CLT_CHECK(clt_cat(PARTS, s->row, 0, &t));
  verify(b, t, 1, NUMEL, e_cat0, what);
  snprintf(what, sizeof what, "clt_cat along dim 1 on %s", dev);
  CLT_CHECK(clt_cat(PARTS, s->col, 1, &t));
  verify(b, t, N / 2, 2 * N, e_cat1, what);
}

/* The raw copies must have copied hx. */
static void verify_raw(bench *b) {
  CL_CHECK(clEnqueueReadBuffer(b->q, b->rdst, CL_TRUE, 0, NUMEL * sizeof(float), b->check, 0, NULL,
                               NULL));
  if (memcmp(b->check, b->hx, NUMEL * sizeof(float)) != 0)
    die("raw clEnqueueCopyBuffer: the copy differs from its source");
  if (memcmp(b->mdst, b->msrc, NUMEL * sizeof(float)) != 0)
    die("memcpy: the copy differs from its source");
}

/* ---- report -------------------------------------------------------------------------------- */

static void header(const char *title, const char *c3) {
  printf("\n%s\n  %-56s %9s %8s %8s %8s\n", title, "", "ms", "GB/s", c3, "target");
}

static void row(const char *label, double s, double bytes, double ref_s, const char *target) {
  printf("  %-56s %9.3f %8.2f %8.2f %8s\n", label, s * 1e3, bytes / s / 1e9, ref_s / s, target);
}

int main(int argc, char **argv) {
  int kv = 0, why = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--kv") == 0) {
      kv = 1;
    } else if (strcmp(argv[i], "--why") == 0) {
      why = 1;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > MAX_REPS)
        die("--reps takes 1 to %d", MAX_REPS);
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("Usage: %s [--reps N] [--kv] [--why]\n"
             "Times ops on views (narrowed, transposed), clt_contiguous and clt_cat on cl:0 and\n"
             "cpu against the same work on contiguous tensors or a raw copy.\n"
             "  --reps N  interleaved rounds per section after 2 warm-up rounds (default 9)\n"
             "  --kv      also print \"key value\" lines (for bench/run)\n"
             "  --why     also time raw variants of the strided copy (what the misses cost)\n",
             argv[0]);
      return 0;
    } else {
      fprintf(stderr, "views: unknown option '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  if (clt_device_count() < 1) {
    printf("views: no OpenCL device, nothing to measure (try POCL_DEVICES=\"pthread pthread\" "
           "with pocl-opencl-icd installed)\n");
    return 0;
  }

  static bench b;
  b.hx = host_data(NUMEL, 8191, 0);
  b.hy = host_data(NUMEL, 4093, 7);
  b.hp = host_data(NUMEL + 2 * N, 4099, 3);
  b.hq = host_data(NUMEL + 2 * N, 4091, 11);
  b.check = malloc(NUMEL * sizeof(float));
  if (!b.check)
    die("out of host memory");
  clt_device *dev = clt_device_at(0);
  if (dev == NULL)
    die("clt_device_at(0): %s", clt_last_error());
  raw_setup(&b);
  side_setup(&b, &b.cl, dev);
  side_setup(&b, &b.cpu, clt_cpu());

  char raw_name[256] = "";
  clGetDeviceInfo(b.cl_dev, CL_DEVICE_NAME, sizeof raw_name - 1, raw_name, NULL);
  clt_device_info info;
  CLT_CHECK(clt_device_info_get(dev, &info));
  printf("clt %s bench/views: medians of %d interleaved rounds after %d warm-up; GB/s = 1e9 B/s "
         "read + written\n",
         clt_version(), reps, WARMUP);
  printf("clt cl:0: %s\n", clt_device_description(dev));
  printf("raw:      %s (first device of the first platform; own context and queue)\n", raw_name);
  if (info.model != NULL && strcmp(info.model, raw_name) != 0)
    printf("warning: clt's cl:0 is \"%s\", not the raw device: ratios compare different devices\n",
           info.model);

  double n = (double)NUMEL;
  side *sides[2] = {&b.cl, &b.cpu};
  const char *names[2] = {"cl:0", "cpu"};
  double narrow[2][2], tadd[2][3], contig[2][3], cat[4], narrow_paired[2], tadd_paired[2],
      contig_paired[2];

  for (int d = 0; d < 2; d++) {
    char title[128];
    b.s = sides[d];
    /* (a) */
    bench_case a_cases[2] = {{run_add_contig, release_result}, {run_add_narrow, release_result}};
    time_section(a_cases, 2, &b, narrow[d]);
    narrow_paired[d] = paired(0, 1);
    snprintf(title, sizeof title, "(a) add of narrowed views, 4096 x 4096 f32 on %s", names[d]);
    header(title, "vs contig");
    row("contiguous tensors", narrow[d][0], 12 * n, narrow[d][0], "");
    row("rows 1..4096 of (4098 x 4096) tensors (contiguous views)", narrow[d][1], 12 * n,
        narrow[d][0], ">= 0.95");
    printf("  %-56s %9s %8s %8.2f\n", "  median of the per-round ratios", "", "", narrow_paired[d]);
    /* (b) */
    bench_case b_cases[3] = {{run_add_contig, release_result},
                             {run_add_transposed, release_result},
                             {run_add_via_copy, release_result}};
    time_section(b_cases, 3, &b, tadd[d]);
    tadd_paired[d] = paired(0, 1);
    snprintf(title, sizeof title, "(b) add of a transposed view, 4096 x 4096 f32 on %s", names[d]);
    header(title, "vs contig");
    row("contiguous tensors", tadd[d][0], 12 * n, tadd[d][0], "");
    row("clt_transpose(x) + contiguous y", tadd[d][1], 12 * n, tadd[d][0], ">= 0.8");
    printf("  %-56s %9s %8s %8.2f\n", "  median of the per-round ratios", "", "", tadd_paired[d]);
    row("  the same through clt_contiguous(clt_transpose(x)) first", tadd[d][2], 12 * n, tadd[d][0],
        "");
    /* (c) */
    /* on cl:0, a raw copy kernel too (issue 13 speaks of "a raw copy kernel's bandwidth") */
    bench_case c_cases[3] = {{d == 0 ? run_raw_copy : run_memcpy, NULL},
                             {run_contiguous, release_result},
                             {run_raw_copy_kernel, NULL}};
    time_section(c_cases, d == 0 ? 3 : 2, &b, contig[d]);
    contig_paired[d] = paired(0, 1);
    snprintf(title, sizeof title, "(c) clt_contiguous of the transposed view, 64 MiB on %s",
             names[d]);
    header(title, "vs raw");
    row(d == 0 ? "raw clEnqueueCopyBuffer, 64 MiB (own context and queue)"
               : "memcpy, 64 MiB (one thread)",
        contig[d][0], 8 * n, contig[d][0], "");
    if (d == 0)
      row("raw float4 copy kernel, chunked (clt's CPU-device shape)", contig[d][2], 8 * n,
          contig[d][0], "");
    row("clt_contiguous(clt_transpose(x))", contig[d][1], 8 * n, contig[d][0], ">= 0.9");
    printf("  %-56s %9s %8s %8.2f\n", "  median of the per-round ratios", "", "", contig_paired[d]);
  }

  /* (d) */
  b.s = &b.cl;
  bench_case d_cases[4] = {{run_raw_copy, NULL},
                           {run_cat0, release_result},
                           {run_cat1, release_result},
                           {run_raw_copy_kernel, NULL}};
  time_section(d_cases, 4, &b, cat);
  header("(d) clt_cat of 8 tensors, 64 MiB f32 in all, on cl:0", "vs raw");
  row("raw clEnqueueCopyBuffer, 64 MiB (own context and queue)", cat[0], 8 * n, cat[0], "");
  row("raw float4 copy kernel, chunked (clt's CPU-device shape)", cat[3], 8 * n, cat[0], "");
  row("clt_cat, 8 x 2M along dim 0", cat[1], 8 * n, cat[0], ">= 0.8");
  row("clt_cat, 8 x (2048 x 1024) along dim 1", cat[2], 8 * n, cat[0], ">= 0.8");

  if (why) {
    /* What the misses cost: the strided copy of clt's kernel against the same copy without an
     * index split per element, and with tiles; on the host, one thread, element by element
     * against tiles. */
    bench_case w_cases[WHY_VARIANTS + 1] = {{run_raw_copy_kernel, NULL}};
    double w[WHY_VARIANTS + 1];
    for (int v = 0; v < WHY_VARIANTS; v++)
      w_cases[v + 1] = (bench_case){why_runs[v], NULL};
    time_section(w_cases, WHY_VARIANTS + 1, &b, w);
    header("(why) raw 2-D copies of 4096 x 4096 f32 on the raw cl:0 device", "vs kernel");
    row("raw float4 copy kernel, chunked", w[0], 8 * n, w[0], "");
    for (int v = 0; v < WHY_VARIANTS; v++) {
      row(why_variants[v].label, w[v + 1], 8 * n, w[0], "");
      run_why(&b, v);
      verify_why(&b, why_variants[v].transposed, why_variants[v].label);
    }
    b.why_sr = 1;
    b.why_sc = N;
    bench_case h_cases[3] = {{run_memcpy, NULL}, {run_host_naive, NULL}, {run_host_tiled, NULL}};
    double h[3];
    time_section(h_cases, 3, &b, h);
    header("(why) transposed copy of 4096 x 4096 f32 on the host, one thread", "vs memcpy");
    row("memcpy", h[0], 8 * n, h[0], "");
    row("element by element, in destination order", h[1], 8 * n, h[0], "");
    row("64 x 64 tiles", h[2], 8 * n, h[0], "");
    for (int v = 1; v < 3; v++) {
      h_cases[v].run(&b);
      for (size_t k = 0; k < NUMEL; k += 4099)
        if (b.mdst[k] != b.msrc[(k % N) * N + k / N])
          die("the host transposed copy (%d) is wrong at %zu", v, k);
    }
    memcpy(b.mdst, b.msrc, NUMEL * sizeof(float));
  }

  /* The results must be right. */
  run_raw_copy(&b);
  verify_raw(&b);
  run_raw_copy_kernel(&b);
  verify_raw(&b);
  verify_side(&b, &b.cl, "cl:0");
  verify_side(&b, &b.cpu, "cpu");
  printf("\nchecked: every clt result above at 4098 positions, and both raw copies in full\n");

  printf("\nsummary (time of the reference over clt's; targets from issue 25):\n"
         "  narrowed add    cl:0 %.2fx  cpu %.2fx  (>= 0.95; per-round ratios: %.2fx, %.2fx)\n"
         "  transposed add  cl:0 %.2fx  cpu %.2fx  (>= 0.8; per-round ratios: %.2fx, %.2fx)\n"
         "  contiguous(t)   cl:0 %.2fx (raw copy kernel: %.2fx)  cpu %.2fx  (>= 0.9 of a raw "
         "copy; per-round ratios: %.2fx, %.2fx)\n"
         "  cat, cl:0       dim 0 %.2fx  dim 1 %.2fx (raw copy kernel: %.2fx, %.2fx)  (>= 0.8 of "
         "a raw copy)\n",
         narrow[0][0] / narrow[0][1], narrow[1][0] / narrow[1][1], narrow_paired[0],
         narrow_paired[1], tadd[0][0] / tadd[0][1], tadd[1][0] / tadd[1][1], tadd_paired[0],
         tadd_paired[1], contig[0][0] / contig[0][1], contig[0][2] / contig[0][1],
         contig[1][0] / contig[1][1], contig_paired[0], contig_paired[1], cat[0] / cat[1],
         cat[0] / cat[2], cat[3] / cat[1], cat[3] / cat[2]);
  if (kv) {
    printf("\n");
    for (int d = 0; d < 2; d++) {
      const char *k = d == 0 ? "cl" : "cpu";
      printf("kv views_add_%s_contig_ms %.4f\nkv views_add_%s_narrow_ms %.4f\n", k,
             narrow[d][0] * 1e3, k, narrow[d][1] * 1e3);
      printf("kv views_tadd_%s_contig_ms %.4f\nkv views_tadd_%s_transposed_ms %.4f\n"
             "kv views_tadd_%s_via_copy_ms %.4f\n",
             k, tadd[d][0] * 1e3, k, tadd[d][1] * 1e3, k, tadd[d][2] * 1e3);
      printf("kv views_contiguous_%s_%s_ms %.4f\nkv views_contiguous_%s_clt_ms %.4f\n", k,
             d == 0 ? "raw_copy" : "memcpy", contig[d][0] * 1e3, k, contig[d][1] * 1e3);
    }
    printf("kv views_contiguous_cl_raw_kernel_ms %.4f\nkv views_cat_cl_raw_kernel_ms %.4f\n",
           contig[0][2] * 1e3, cat[3] * 1e3);
    printf("kv views_cat_cl_raw_copy_ms %.4f\nkv views_cat0_cl_clt_ms %.4f\n"
           "kv views_cat1_cl_clt_ms %.4f\n",
           cat[0] * 1e3, cat[1] * 1e3, cat[2] * 1e3);
  }

  side_teardown(&b.cl);
  side_teardown(&b.cpu);
  raw_teardown(&b);
  free(b.hx);
  free(b.hy);
  free(b.hp);
  free(b.hq);
  free(b.check);
  return 0;
}
