/* SPDX-License-Identifier: MIT */
/* ops.c - clt's elementwise add and sum against raw OpenCL kernels on the same device.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/ops [--reps N] [--kv]
 *
 * Measures, in one run, with the cases of each section interleaved (one run of each case per
 * round, so that a noisy neighbour slows them alike), medians over N rounds (default 9) after 2
 * warm-up rounds, wall clock (CLOCK_MONOTONIC), every timed region ending when the work is done:
 *   (a) add of two 16M f32 vectors on cl:0: clt_add + clt_device_synchronize against two raw
 *       float4 kernels of our own, each work-item walking one contiguous chunk (what clt does on
 *       CPU devices) and a grid-stride loop over work-groups of 256 (what clt does on GPUs);
 *   (b) sum of 16M f32 on cl:0: clt_sum + synchronize against a raw two-kernel reduction
 *       (float4 partial sums per contiguous chunk, then one work-item adds the partials);
 *   (c) latency of a 3-element add on cl:0: clt_add + synchronize + release against
 *       clEnqueueNDRangeKernel + clFinish;
 *   (d) clt_add on cpu, 16M f32 and 3 elements (compare with NumPy: bench/peers.py).
 * Raw OpenCL runs on a context and queue of our own for the first device of the first platform,
 * buffers resident. GB/s are 10^9 bytes per second: add moves 12 B per element, sum 4 B.
 * --kv adds "key value" lines (milliseconds or microseconds) for bench/run.
 */
#define _POSIX_C_SOURCE 200809L
#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <clt.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_NAME "ops"
#define BENCH_SECTIONS 4 /* cases in a section, at the most */
#include "bench.h"

/* ---- state --------------------------------------------------------------------------------- */

typedef struct bench {
  size_t n;    /* elements of the large vectors */
  long calls;  /* calls per run in the latency cases */
  long hcalls; /* the same on cpu */
  clt_device *dev;
  clt_tensor *a, *b, *a3, *b3, *ha, *hb, *ha3, *hb3, *result;
  /* raw OpenCL */
  cl_device_id cl_dev;
  cl_context ctx;
  cl_command_queue q;
  cl_mem ra, rb, rc, rpartial, rsum, ra3, rb3, rc3;
  cl_kernel k_chunk, k_stride, k_partial, k_final, k_add3;
  size_t chunk_global, stride_global, stride_local, partial_global, three;
  cl_ulong chunk4;
} bench;

static const char *raw_kernels =
    "__kernel void add_f32_chunk(__global const float4 *restrict a,\n"
    "                            __global const float4 *restrict b,\n"
    "                            __global float4 *restrict c, ulong n4, ulong chunk4) {\n"
    "  ulong start = (ulong)get_global_id(0) * chunk4, end = min(start + chunk4, n4);\n"
    "  for (ulong i = start; i < end; i++)\n"
    "    c[i] = a[i] + b[i];\n"
    "}\n"
    "__kernel void add_f32_stride(__global const float4 *restrict a,\n"
    "                             __global const float4 *restrict b,\n"
    "                             __global float4 *restrict c, ulong n4) {\n"
    "  for (ulong i = get_global_id(0); i < n4; i += get_global_size(0))\n"
    "    c[i] = a[i] + b[i];\n"
    "}\n"
    "__kernel void add_f32_one(__global const float *a, __global const float *b,\n"
    "                          __global float *c) {\n"
    "  size_t i = get_global_id(0);\n"
    "  c[i] = a[i] + b[i];\n"
    "}\n"
    "__kernel void sum_f32_partial(__global const float4 *restrict in, ulong n4, ulong chunk4,\n"
    "                              __global float *restrict partial) {\n"
    "  ulong start = (ulong)get_global_id(0) * chunk4, end = min(start + chunk4, n4);\n"
    "  float4 acc = (float4)(0.0f);\n"
    "  for (ulong i = start; i < end; i++)\n"
    "    acc += in[i];\n"
    "  partial[get_global_id(0)] = (acc.x + acc.y) + (acc.z + acc.w);\n"
    "}\n"
    "__kernel void sum_f32_final(__global const float *restrict partial, uint np,\n"
    "                            __global float *restrict out) {\n"
    "  float s = 0.0f;\n"
    "  for (uint i = 0; i < np; i++)\n"
    "    s += partial[i];\n"
    "  out[0] = s;\n"
    "}\n";

static void release_result(void *p) {
  bench *b = p;
  clt_tensor_release(b->result);
  b->result = NULL;
}

/* (a) */
static void run_raw_chunk(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueNDRangeKernel(b->q, b->k_chunk, 1, NULL, &b->chunk_global, NULL, 0, NULL, NULL));
  CL_CHECK(clFinish(b->q));
}
static void run_raw_stride(void *p) {
  bench *b = p;
  CL_CHECK(clEnqueueNDRangeKernel(b->q, b->k_stride, 1, NULL, &b->stride_global, &b->stride_local,
                                  0, NULL, NULL));
  CL_CHECK(clFinish(b->q));
}
static void run_clt_add(void *p) {
  bench *b = p;
  CLT_CHECK(clt_add(b->a, b->b, &b->result));
  CLT_CHECK(clt_device_synchronize(b->dev));
}

/* (b) */
static void run_raw_sum(void *p) {
  bench *b = p;
  size_t one = 1;
  CL_CHECK(
      clEnqueueNDRangeKernel(b->q, b->k_partial, 1, NULL, &b->partial_global, NULL, 0, NULL, NULL));
  CL_CHECK(clEnqueueNDRangeKernel(b->q, b->k_final, 1, NULL, &one, NULL, 0, NULL, NULL));
  CL_CHECK(clFinish(b->q));
}
static void run_clt_sum(void *p) {
  bench *b = p;
  CLT_CHECK(clt_sum(b->a, &b->result));
  CLT_CHECK(clt_device_synchronize(b->dev));
}

/* (c) */
static void run_raw_add3(void *p) {
  bench *b = p;
  for (long i = 0; i < b->calls; i++) {
    CL_CHECK(clEnqueueNDRangeKernel(b->q, b->k_add3, 1, NULL, &b->three, NULL, 0, NULL, NULL));
    CL_CHECK(clFinish(b->q));
  }
}
static void run_clt_add3(void *p) {
  bench *b = p;
  for (long i = 0; i < b->calls; i++) {
    clt_tensor *c;
    CLT_CHECK(clt_add(b->a3, b->b3, &c));
    CLT_CHECK(clt_device_synchronize(b->dev));
    clt_tensor_release(c);
  }
}

/* (d) */
static void run_host_add(void *p) {
  bench *b = p;
  CLT_CHECK(clt_add(b->ha, b->hb, &b->result));
  CLT_CHECK(clt_device_synchronize(clt_cpu()));
}
static void run_host_add3(void *p) {
  bench *b = p;
  for (long i = 0; i < b->hcalls; i++) {
    clt_tensor *c;
    CLT_CHECK(clt_add(b->ha3, b->hb3, &c));
    clt_tensor_release(c);
  }
}

/* ---- setup --------------------------------------------------------------------------------- */

static cl_mem raw_buffer(bench *b, size_t elems, float value) {
  cl_int err;
  cl_mem m = clCreateBuffer(b->ctx, CL_MEM_READ_WRITE, elems * sizeof(float), NULL, &err);
  CL_CHECK(err);
  CL_CHECK(
      clEnqueueFillBuffer(b->q, m, &value, sizeof value, 0, elems * sizeof(float), 0, NULL, NULL));
  return m;
}

static void raw_setup(bench *b) {
  raw_open(&b->cl_dev, &b->ctx, &b->q);
  cl_program prog = raw_program(b->ctx, b->cl_dev, raw_kernels, "the raw kernels");
  b->k_chunk = raw_kernel(prog, "add_f32_chunk");
  b->k_stride = raw_kernel(prog, "add_f32_stride");
  b->k_add3 = raw_kernel(prog, "add_f32_one");
  b->k_partial = raw_kernel(prog, "sum_f32_partial");
  b->k_final = raw_kernel(prog, "sum_f32_final");
  clReleaseProgram(prog);

  b->ra = raw_buffer(b, b->n, 1.0f);
  b->rb = raw_buffer(b, b->n, 1.0f);
  b->rc = raw_buffer(b, b->n, 0.0f);
  b->ra3 = raw_buffer(b, 3, 1.0f);
  b->rb3 = raw_buffer(b, 3, 1.0f);
  b->rc3 = raw_buffer(b, 3, 0.0f);
  b->rsum = raw_buffer(b, 1, 0.0f);

  /* The launch shapes clt uses (lib/opencl/opencl.c): on CPU devices 4 contiguous chunks per
   * compute unit, one work-item per work-group; on GPUs 16 work-groups of 256 per compute
   * unit, grid-stride. */
  cl_uint cu = 1;
  size_t max_wg = 1;
  CL_CHECK(clGetDeviceInfo(b->cl_dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
  CL_CHECK(clGetDeviceInfo(b->cl_dev, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof max_wg, &max_wg, NULL));
  if (cu == 0)
    cu = 1;
  cl_ulong n4 = b->n / 4, items = (cl_ulong)cu * 4;
  b->chunk4 = (n4 + items - 1) / items;
  b->chunk_global = (size_t)((n4 + b->chunk4 - 1) / b->chunk4);
  b->stride_local = max_wg >= 256 ? 256 : max_wg;
  b->stride_global = (size_t)cu * 16 * b->stride_local;
  b->partial_global = b->chunk_global;
  b->three = 3;
  b->rpartial = raw_buffer(b, b->partial_global, 0.0f);
  cl_uint npartial = (cl_uint)b->partial_global;

  CL_CHECK(clSetKernelArg(b->k_chunk, 0, sizeof(cl_mem), &b->ra));
  CL_CHECK(clSetKernelArg(b->k_chunk, 1, sizeof(cl_mem), &b->rb));
  CL_CHECK(clSetKernelArg(b->k_chunk, 2, sizeof(cl_mem), &b->rc));
  CL_CHECK(clSetKernelArg(b->k_chunk, 3, sizeof n4, &n4));
  CL_CHECK(clSetKernelArg(b->k_chunk, 4, sizeof b->chunk4, &b->chunk4));
  CL_CHECK(clSetKernelArg(b->k_stride, 0, sizeof(cl_mem), &b->ra));
  CL_CHECK(clSetKernelArg(b->k_stride, 1, sizeof(cl_mem), &b->rb));
  CL_CHECK(clSetKernelArg(b->k_stride, 2, sizeof(cl_mem), &b->rc));
  CL_CHECK(clSetKernelArg(b->k_stride, 3, sizeof n4, &n4));
  CL_CHECK(clSetKernelArg(b->k_add3, 0, sizeof(cl_mem), &b->ra3));
  CL_CHECK(clSetKernelArg(b->k_add3, 1, sizeof(cl_mem), &b->rb3));
  CL_CHECK(clSetKernelArg(b->k_add3, 2, sizeof(cl_mem), &b->rc3));
  CL_CHECK(clSetKernelArg(b->k_partial, 0, sizeof(cl_mem), &b->ra));
  CL_CHECK(clSetKernelArg(b->k_partial, 1, sizeof n4, &n4));
  CL_CHECK(clSetKernelArg(b->k_partial, 2, sizeof b->chunk4, &b->chunk4));
  CL_CHECK(clSetKernelArg(b->k_partial, 3, sizeof(cl_mem), &b->rpartial));
  CL_CHECK(clSetKernelArg(b->k_final, 0, sizeof(cl_mem), &b->rpartial));
  CL_CHECK(clSetKernelArg(b->k_final, 1, sizeof npartial, &npartial));
  CL_CHECK(clSetKernelArg(b->k_final, 2, sizeof(cl_mem), &b->rsum));
  CL_CHECK(clFinish(b->q));
}

static void raw_teardown(bench *b) {
  cl_mem m[] = {b->ra, b->rb, b->rc, b->rpartial, b->rsum, b->ra3, b->rb3, b->rc3};
  for (size_t i = 0; i < sizeof m / sizeof m[0]; i++)
    clReleaseMemObject(m[i]);
  cl_kernel k[] = {b->k_chunk, b->k_stride, b->k_partial, b->k_final, b->k_add3};
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
    clReleaseKernel(k[i]);
  clReleaseCommandQueue(b->q);
  clReleaseContext(b->ctx);
}

/* Checks that the raw results are right: the add gives 2 everywhere, the sum n. */
static void raw_verify(bench *b) {
  float c[3], s = 0, first = 0, last = 0;
  CL_CHECK(clEnqueueReadBuffer(b->q, b->rc3, CL_TRUE, 0, sizeof c, c, 0, NULL, NULL));
  CL_CHECK(clEnqueueReadBuffer(b->q, b->rsum, CL_TRUE, 0, sizeof s, &s, 0, NULL, NULL));
  CL_CHECK(clEnqueueReadBuffer(b->q, b->rc, CL_TRUE, 0, sizeof first, &first, 0, NULL, NULL));
  CL_CHECK(clEnqueueReadBuffer(b->q, b->rc, CL_TRUE, (b->n - 1) * sizeof(float), sizeof last, &last,
                               0, NULL, NULL));
  if (c[0] != 2 || c[2] != 2 || first != 2 || last != 2)
    die("raw add: wrong result");
  if (s != (float)b->n)
    die("raw sum: %g, expected %g", (double)s, (double)b->n);
}

static void clt_verify_sum(clt_tensor *t, double expected, const char *what) {
  clt_tensor *s;
  double v = 0;
  CLT_CHECK(clt_sum(t, &s));
  CLT_CHECK(clt_item(s, &v));
  clt_tensor_release(s);
  if (v != expected)
    die("%s: the sum is %.17g, expected %.17g", what, v, expected);
}

/* ---- report -------------------------------------------------------------------------------- */

static void header(const char *title, const char *c1, const char *c2, const char *c3) {
  printf("\n%s\n  %-52s %9s %8s %8s\n", title, "", c1, c2, c3);
}

static void row(const char *label, double s, double bytes, double ref_s) {
  printf("  %-52s %9.3f %8.2f %8.2f\n", label, s * 1e3, bytes / s / 1e9, ref_s / s);
}

static void row_us(const char *label, double us, double ref_us) {
  printf("  %-52s %9.2f %8s %8.2f\n", label, us, "", us / ref_us);
}

int main(int argc, char **argv) {
  int kv = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--kv") == 0) {
      kv = 1;
    } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = atoi(argv[++i]);
      if (reps < 1 || reps > MAX_REPS)
        die("--reps takes 1 to %d", MAX_REPS);
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("Usage: %s [--reps N] [--kv]\n"
             "Times clt_add and clt_sum on cl:0 and cpu against raw OpenCL kernels.\n"
             "  --reps N  interleaved rounds per section after 2 warm-up rounds (default 9)\n"
             "  --kv      also print \"key value\" lines (for bench/run)\n",
             argv[0]);
      return 0;
    } else {
      fprintf(stderr, "ops: unknown option '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }
  if (clt_device_count() < 1) {
    printf("ops: no OpenCL device, nothing to measure (try POCL_DEVICES=\"pthread pthread\" with "
           "pocl-opencl-icd installed)\n");
    return 0;
  }

  bench b;
  memset(&b, 0, sizeof b);
  b.n = (size_t)16 << 20;
  b.calls = 500;
  b.hcalls = 20000;
  b.dev = clt_device_at(0);
  if (b.dev == NULL)
    die("clt_device_at(0): %s", clt_last_error());
  raw_setup(&b);

  char raw_name[256] = "";
  clGetDeviceInfo(b.cl_dev, CL_DEVICE_NAME, sizeof raw_name - 1, raw_name, NULL);
  clt_device_info info;
  CLT_CHECK(clt_device_info_get(b.dev, &info));
  printf("clt %s bench/ops: medians of %d interleaved rounds after %d warm-up; GB/s = 1e9 B/s\n",
         clt_version(), reps, WARMUP);
  printf("clt cl:0: %s\n", clt_device_description(b.dev));
  printf("raw:      %s (first device of the first platform; own context and queue)\n", raw_name);
  if (info.model != NULL && strcmp(info.model, raw_name) != 0)
    printf("warning: clt's cl:0 is \"%s\", not the raw device: ratios compare different devices\n",
           info.model);

  int64_t shape[1] = {(int64_t)b.n}, shape3[1] = {3};
  CLT_CHECK(clt_ones(CLT_F32, 1, shape, b.dev, &b.a));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape, b.dev, &b.b));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape3, b.dev, &b.a3));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape3, b.dev, &b.b3));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &b.ha));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &b.hb));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape3, clt_cpu(), &b.ha3));
  CLT_CHECK(clt_ones(CLT_F32, 1, shape3, clt_cpu(), &b.hb3));
  CLT_CHECK(clt_device_synchronize(b.dev));
  double n = (double)b.n;
  char label[128];

  /* (a) */
  bench_case add_cases[3] = {
      {run_raw_chunk, NULL}, {run_raw_stride, NULL}, {run_clt_add, release_result}};
  double add[3];
  time_section(add_cases, 3, &b, add);
  header("(a) add, 16M f32 on cl:0 (12 B/element)", "ms", "GB/s", "vs chunk");
  snprintf(label, sizeof label, "raw float4, chunked: %zu work-items x %llu float4", b.chunk_global,
           (unsigned long long)b.chunk4);
  row(label, add[0], 12 * n, add[0]);
  snprintf(label, sizeof label, "raw float4, grid-stride: %zu x %zu work-items", b.stride_global,
           b.stride_local);
  row(label, add[1], 12 * n, add[0]);
  row("clt_add + synchronize (chunked on CPU devices)", add[2], 12 * n, add[0]);

  /* (b) */
  bench_case sum_cases[2] = {{run_raw_sum, NULL}, {run_clt_sum, release_result}};
  double sum[2];
  time_section(sum_cases, 2, &b, sum);
  header("(b) sum, 16M f32 on cl:0 (4 B/element)", "ms", "GB/s", "vs raw");
  snprintf(label, sizeof label, "raw float4 partials (%zu chunks) + final kernel",
           b.partial_global);
  row(label, sum[0], 4 * n, sum[0]);
  row("clt_sum + synchronize", sum[1], 4 * n, sum[0]);

  /* (c) */
  bench_case lat_cases[2] = {{run_raw_add3, NULL}, {run_clt_add3, NULL}};
  double lat[2];
  time_section(lat_cases, 2, &b, lat);
  double per = 1e6 / (double)b.calls;
  snprintf(label, sizeof label, "(c) add, 3 f32 on cl:0, %ld calls per run", b.calls);
  header(label, "us/call", "", "time/raw");
  row_us("raw clEnqueueNDRangeKernel + clFinish", lat[0] * per, lat[0] * per);
  row_us("clt_add + synchronize + release", lat[1] * per, lat[0] * per);

  /* (d) */
  bench_case host_cases[1] = {{run_host_add, release_result}};
  bench_case host3_cases[1] = {{run_host_add3, NULL}};
  double host[1], host3[1];
  time_section(host_cases, 1, &b, host);
  time_section(host3_cases, 1, &b, host3);
  double hper = 1e6 / (double)b.hcalls;
  header("(d) clt_add on cpu (peer: NumPy, bench/peers.py)", "ms", "GB/s", "");
  printf("  %-52s %9.3f %8.2f\n", "16M f32", host[0] * 1e3, 12 * n / host[0] / 1e9);
  printf("  %-52s %9.3f us/call\n", "3 f32, + release", host3[0] * hper);

  /* The results must be right. */
  raw_verify(&b);
  CLT_CHECK(clt_add(b.a, b.b, &b.result));
  clt_verify_sum(b.result, 2 * n, "clt_add on cl:0");
  release_result(&b);
  CLT_CHECK(clt_add(b.ha, b.hb, &b.result));
  clt_verify_sum(b.result, 2 * n, "clt_add on cpu");
  release_result(&b);
  clt_verify_sum(b.a, n, "clt_sum on cl:0");

  printf("\nsummary (clt speed over raw): add %.2fx the chunked raw kernel (grid-stride raw "
         "%.2fx); sum %.2fx; 3-element add latency %.2fx raw\n",
         add[0] / add[2], add[0] / add[1], sum[0] / sum[1], lat[1] / lat[0]);
  if (kv) {
    printf("\nkv add_cl_raw_chunk_ms %.4f\nkv add_cl_raw_stride_ms %.4f\nkv add_cl_clt_ms %.4f\n",
           add[0] * 1e3, add[1] * 1e3, add[2] * 1e3);
    printf("kv sum_cl_raw_ms %.4f\nkv sum_cl_clt_ms %.4f\n", sum[0] * 1e3, sum[1] * 1e3);
    printf("kv add3_cl_raw_us %.3f\nkv add3_cl_clt_us %.3f\n", lat[0] * per, lat[1] * per);
    printf("kv add_cpu_clt_ms %.4f\nkv add3_cpu_clt_us %.4f\n", host[0] * 1e3, host3[0] * hper);
  }

  clt_tensor *t[] = {b.a, b.b, b.a3, b.b3, b.ha, b.hb, b.ha3, b.hb3};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    clt_tensor_release(t[i]);
  raw_teardown(&b);
  return 0;
}
