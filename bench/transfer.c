/* SPDX-License-Identifier: MIT */
/* transfer.c - what clt's transfers and a simple op cost, against raw OpenCL on the same device.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/transfer [--quick]
 *
 * Measures, in one run, medians over repeated runs after warm-up (wall clock, CLOCK_MONOTONIC,
 * every timed region ends only when the work has finished):
 *   (a) a no-op clt_to (the tensor is already on the device), in ns per call, against a
 *       clt_tensor_retain + clt_tensor_release pair;
 *   (b) 64 MiB of f32 cpu -> cl:0 and back with clt_to / clt_copy, against blocking
 *       clEnqueueWriteBuffer / clEnqueueReadBuffer of the same bytes on a context and queue of
 *       our own for the same device (the first device of the first platform), from pageable
 *       and from pinned host memory; and the round trip cpu -> cl:0 -> cpu with two clt_to
 *       into fresh tensors (released after each run, as a user loop would: the caching
 *       allocator serves both from released blocks) against a blocking write and read of raw
 *       OpenCL into existing buffers;
 *   (c) clt_add of 16M f32 on cl:0 against two raw copy kernels built here (out[i] = in[i]):
 *       each work-item copying a contiguous chunk, and one element per work-item.
 * GB/s are 10^9 bytes per second. --quick shrinks sizes and repeats for a smoke test.
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

#define BENCH_NAME "transfer"
#include "bench.h"

static int warmup = 3, reps = 15;

/* One timed case: run() does the work and waits for it; after() (optional) cleans up outside
 * the timed region (releasing the tensor a clt_to returned, for instance). */
typedef struct bench_case {
  void (*run)(void *ctx);
  void (*after)(void *ctx);
  void *ctx;
} bench_case;

/* The median wall time of one run(), in seconds. */
static double time_case(bench_case c) {
  double t[64];
  int n = reps < 64 ? reps : 64;
  for (int i = 0; i < warmup + n; i++) {
    double t0 = now_s();
    c.run(c.ctx);
    double t1 = now_s();
    if (c.after != NULL)
      c.after(c.ctx);
    if (i >= warmup)
      t[i - warmup] = t1 - t0;
  }
  return median(t, n);
}

/* ---- the state shared by the cases ------------------------------------------------------- */

typedef struct bench {
  clt_device *dev; /* cl:0 */
  size_t n;        /* f32 elements per transfer */
  size_t bytes;
  clt_tensor *host_src, *pinned_src, *dev_src; /* sources */
  clt_tensor *host_dst, *pinned_dst, *dev_dst; /* destinations of clt_copy */
  clt_tensor *result;                          /* what the last run produced, released after */
  /* (a) */
  clt_tensor *noop_t;
  long calls;
  /* raw OpenCL on the same device */
  cl_device_id cl_dev;
  cl_context cl_ctx;
  cl_command_queue cl_q;
  cl_mem cl_buf;    /* device buffer of bytes */
  void *raw_host;   /* pageable host memory of bytes */
  cl_mem cl_pinned; /* CL_MEM_ALLOC_HOST_PTR buffer, kept mapped at raw_pinned */
  void *raw_pinned;
  /* (c) */
  size_t add_n;
  clt_tensor *add_a, *add_b;
  cl_mem cl_in, cl_out;
  cl_kernel k_chunk, k_one;
  size_t chunk, chunk_global;
} bench;

static void release_result(void *p) {
  bench *b = p;
  clt_tensor_release(b->result);
  b->result = NULL;
}

/* (a) no-op transfers */
static void run_retain_release(void *p) {
  bench *b = p;
  for (long i = 0; i < b->calls; i++)
    clt_tensor_release(clt_tensor_retain(b->noop_t));
}
static void run_noop_to(void *p) {
  bench *b = p;
  clt_device *d = clt_tensor_device(b->noop_t);
  for (long i = 0; i < b->calls; i++) {
    clt_tensor *o;
    CLT_CHECK(clt_to(b->noop_t, d, &o));
    clt_tensor_release(o);
  }
}

/* (b) host -> device */
static void run_raw_write(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueWriteBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_host, 0, NULL, NULL));
}
static void run_raw_write_pinned(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueWriteBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_pinned, 0, NULL, NULL));
}
static void run_clt_h2d(void *p) {
  bench *b = p;
  CLT_CHECK(clt_to(b->host_src, b->dev, &b->result));
  CLT_CHECK(clt_device_synchronize(b->dev));
}
static void run_clt_h2d_pinned(void *p) {
  bench *b = p;
  CLT_CHECK(clt_to(b->pinned_src, b->dev, &b->result));
  CLT_CHECK(clt_device_synchronize(b->dev));
}

static void run_clt_h2d_copy(void *p) {
  bench *b = p;
  CLT_CHECK(clt_copy(b->dev_dst, b->host_src));
  CLT_CHECK(clt_device_synchronize(b->dev));
}
static void run_clt_h2d_copy_pinned(void *p) {
  bench *b = p;
  CLT_CHECK(clt_copy(b->dev_dst, b->pinned_src));
  CLT_CHECK(clt_device_synchronize(b->dev));
}

/* (b) device -> host */
static void run_raw_read(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueReadBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_host, 0, NULL, NULL));
}
static void run_raw_read_pinned(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueReadBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_pinned, 0, NULL, NULL));
}
static void wait_host(clt_tensor *t) {
  if (clt_tensor_data(t) == NULL) /* waits for the pending copy into t */
    die("clt_tensor_data failed: %s", clt_last_error());
}
static void run_clt_d2h_to(void *p) {
  bench *b = p;
  CLT_CHECK(clt_to(b->dev_src, clt_cpu(), &b->result));
  CLT_CHECK(clt_device_synchronize(b->dev));
  wait_host(b->result);
}
static void run_clt_d2h_copy(void *p) {
  bench *b = p;
  CLT_CHECK(clt_copy(b->host_dst, b->dev_src));
  CLT_CHECK(clt_device_synchronize(b->dev));
  wait_host(b->host_dst);
}
static void run_clt_d2h_copy_pinned(void *p) {
  bench *b = p;
  CLT_CHECK(clt_copy(b->pinned_dst, b->dev_src));
  CLT_CHECK(clt_device_synchronize(b->dev));
  wait_host(b->pinned_dst);
}

/* (b) the round trip */
static void run_raw_round_trip(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueWriteBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_host, 0, NULL, NULL));
  CL_CHECK(
      clEnqueueReadBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_host, 0, NULL, NULL));
}
static void run_clt_round_trip(void *p) {
  bench *b = p;
  clt_tensor *d;
  CLT_CHECK(clt_to(b->host_src, b->dev, &d));
  CLT_CHECK(clt_to(d, clt_cpu(), &b->result));
  clt_tensor_release(d);
  wait_host(b->result);
}

/* (c) clt_add against raw copy kernels */
static void run_clt_add(void *p) {
  bench *b = p;
  CLT_CHECK(clt_add(b->add_a, b->add_b, &b->result));
  CLT_CHECK(clt_device_synchronize(b->dev));
}
static void run_raw_copy_chunk(void *p) {
  bench *b = p;
  CL_CHECK(
      clEnqueueNDRangeKernel(b->cl_q, b->k_chunk, 1, NULL, &b->chunk_global, NULL, 0, NULL, NULL));
  CL_CHECK(clFinish(b->cl_q));
}
static void run_raw_copy_one(void *p) {
  bench *b = p;
  CL_CHECK(clEnqueueNDRangeKernel(b->cl_q, b->k_one, 1, NULL, &b->add_n, NULL, 0, NULL, NULL));
  CL_CHECK(clFinish(b->cl_q));
}

static const char *copy_kernels =
    "__kernel void copy_chunk(__global const float *in, __global float *out, ulong n,\n"
    "                         ulong chunk) {\n"
    "  ulong start = (ulong)get_global_id(0) * chunk;\n"
    "  ulong end = start + chunk < n ? start + chunk : n;\n"
    "  for (ulong i = start; i < end; i++)\n"
    "    out[i] = in[i];\n"
    "}\n"
    "__kernel void copy_one(__global const float *in, __global float *out) {\n"
    "  size_t i = get_global_id(0);\n"
    "  out[i] = in[i];\n"
    "}\n";

/* ---- setup --------------------------------------------------------------------------------- */

static void raw_setup(bench *b) {
  raw_open(&b->cl_dev, &b->cl_ctx, &b->cl_q);
  cl_int err;
  b->cl_buf = clCreateBuffer(b->cl_ctx, CL_MEM_READ_WRITE, b->bytes, NULL, &err);
  CL_CHECK(err);
  b->raw_host = malloc(b->bytes);
  if (b->raw_host == NULL)
    die("out of host memory");
  memset(b->raw_host, 1, b->bytes);
  b->cl_pinned =
      clCreateBuffer(b->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, b->bytes, NULL, &err);
  CL_CHECK(err);
  b->raw_pinned = clEnqueueMapBuffer(b->cl_q, b->cl_pinned, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                     b->bytes, 0, NULL, NULL, &err);
  CL_CHECK(err);
  memset(b->raw_pinned, 1, b->bytes);
  /* Touch the device buffer once so that no case pays for its first use. */
  CL_CHECK(
      clEnqueueWriteBuffer(b->cl_q, b->cl_buf, CL_TRUE, 0, b->bytes, b->raw_host, 0, NULL, NULL));

  /* (c): the copy kernels and their buffers */
  cl_program prog = raw_program(b->cl_ctx, b->cl_dev, copy_kernels, "the copy kernels");
  b->k_chunk = raw_kernel(prog, "copy_chunk");
  b->k_one = raw_kernel(prog, "copy_one");
  clReleaseProgram(prog);

  size_t add_bytes = b->add_n * sizeof(float);
  b->cl_in = clCreateBuffer(b->cl_ctx, CL_MEM_READ_ONLY, add_bytes, NULL, &err);
  CL_CHECK(err);
  b->cl_out = clCreateBuffer(b->cl_ctx, CL_MEM_WRITE_ONLY, add_bytes, NULL, &err);
  CL_CHECK(err);
  float one = 1.0f, zero = 0.0f;
  CL_CHECK(clEnqueueFillBuffer(b->cl_q, b->cl_in, &one, sizeof one, 0, add_bytes, 0, NULL, NULL));
  CL_CHECK(
      clEnqueueFillBuffer(b->cl_q, b->cl_out, &zero, sizeof zero, 0, add_bytes, 0, NULL, NULL));
  CL_CHECK(clFinish(b->cl_q));

  cl_uint cu = 1;
  CL_CHECK(clGetDeviceInfo(b->cl_dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
  b->chunk = b->add_n / ((size_t)(cu ? cu : 1) * 8);
  if (b->chunk == 0)
    b->chunk = 1;
  b->chunk_global = (b->add_n + b->chunk - 1) / b->chunk;
  cl_ulong n64 = b->add_n, chunk64 = b->chunk;
  CL_CHECK(clSetKernelArg(b->k_chunk, 0, sizeof(cl_mem), &b->cl_in));
  CL_CHECK(clSetKernelArg(b->k_chunk, 1, sizeof(cl_mem), &b->cl_out));
  CL_CHECK(clSetKernelArg(b->k_chunk, 2, sizeof n64, &n64));
  CL_CHECK(clSetKernelArg(b->k_chunk, 3, sizeof chunk64, &chunk64));
  CL_CHECK(clSetKernelArg(b->k_one, 0, sizeof(cl_mem), &b->cl_in));
  CL_CHECK(clSetKernelArg(b->k_one, 1, sizeof(cl_mem), &b->cl_out));
}

static void raw_teardown(bench *b) {
  CL_CHECK(clEnqueueUnmapMemObject(b->cl_q, b->cl_pinned, b->raw_pinned, 0, NULL, NULL));
  CL_CHECK(clFinish(b->cl_q));
  clReleaseMemObject(b->cl_pinned);
  clReleaseMemObject(b->cl_buf);
  clReleaseMemObject(b->cl_in);
  clReleaseMemObject(b->cl_out);
  clReleaseKernel(b->k_chunk);
  clReleaseKernel(b->k_one);
  clReleaseCommandQueue(b->cl_q);
  clReleaseContext(b->cl_ctx);
  free(b->raw_host);
}

/* Fills a host tensor with a pattern that a transfer must preserve. */
static void fill_pattern(clt_tensor *t) {
  float *p = clt_tensor_data(t);
  if (p == NULL)
    die("clt_tensor_data failed: %s", clt_last_error());
  for (int64_t i = 0; i < clt_tensor_numel(t); i++)
    p[i] = (float)(i % 1021);
}

static void expect_pattern(clt_tensor *t, const char *what) {
  const float *p = clt_tensor_data(t);
  if (p == NULL)
    die("clt_tensor_data failed: %s", clt_last_error());
  for (int64_t i = 0; i < clt_tensor_numel(t); i++)
    if (p[i] != (float)(i % 1021))
      die("%s: element %lld is %g, expected %g", what, (long long)i, p[i], (double)(i % 1021));
}

/* ---- report -------------------------------------------------------------------------------- */

static void header(const char *label, const char *c1, const char *c2, const char *c3) {
  printf("  %-44s %9s %8s %8s\n", label, c1, c2, c3);
}

static void row_ms(const char *label, double s, double bytes, double ref_gbs) {
  double gbs = bytes / s / 1e9;
  if (ref_gbs > 0)
    printf("  %-44s %9.3f %8.2f %8.2f\n", label, s * 1e3, gbs, gbs / ref_gbs);
  else
    printf("  %-44s %9.3f %8.2f %8s\n", label, s * 1e3, gbs, "-");
}

int main(int argc, char **argv) {
  int quick = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) {
      quick = 1;
    } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      printf("Usage: %s [--quick]\n"
             "Times clt transfers and clt_add on cl:0 against raw OpenCL on the same device.\n"
             "  --quick   small sizes and few repeats (a smoke test, not a measurement)\n",
             argv[0]);
      return 0;
    } else {
      fprintf(stderr, "transfer: unknown option '%s' (try --help)\n", argv[i]);
      return 2;
    }
  }

  bench b;
  memset(&b, 0, sizeof b);
  b.n = quick ? (size_t)1 << 20 : (size_t)16 << 20; /* 4 MiB or 64 MiB of f32 */
  b.bytes = b.n * sizeof(float);
  b.add_n = quick ? (size_t)1 << 20 : (size_t)16 << 20;
  b.calls = quick ? 10000 : 200000;
  if (quick) {
    warmup = 1;
    reps = 5;
  }

  if (clt_device_count() < 1) {
    printf("transfer: no OpenCL device, nothing to measure (try POCL_DEVICES=\"pthread pthread\" "
           "with pocl-opencl-icd installed)\n");
    return 0;
  }
  b.dev = clt_device_at(0);
  if (b.dev == NULL)
    die("clt_device_at(0): %s", clt_last_error());
  raw_setup(&b);

  char raw_name[256] = "";
  clGetDeviceInfo(b.cl_dev, CL_DEVICE_NAME, sizeof raw_name - 1, raw_name, NULL);
  clt_device_info info;
  CLT_CHECK(clt_device_info_get(b.dev, &info));
  printf("clt %s bench/transfer%s: %d runs after %d warm-up, medians; GB/s = 1e9 B/s\n",
         clt_version(), quick ? " --quick" : "", reps, warmup);
  printf("clt cl:0: %s\n", clt_device_description(b.dev));
  printf("raw:      %s (first device of the first platform; own context and queue)\n", raw_name);
  if (info.model != NULL && strcmp(info.model, raw_name) != 0)
    printf("warning: clt's cl:0 is \"%s\", not the raw device: ratios compare different devices\n",
           info.model);

  /* ---- (a) no-op clt_to ---- */
  int64_t small_shape[1] = {4};
  CLT_CHECK(clt_zeros(CLT_F32, 1, small_shape, b.dev, &b.noop_t));
  CLT_CHECK(clt_device_synchronize(b.dev));
  double t_rr = time_case((bench_case){run_retain_release, NULL, &b});
  double t_dev = time_case((bench_case){run_noop_to, NULL, &b});
  clt_tensor_release(b.noop_t);
  CLT_CHECK(clt_zeros(CLT_F32, 1, small_shape, clt_cpu(), &b.noop_t));
  double t_cpu = time_case((bench_case){run_noop_to, NULL, &b});
  clt_tensor_release(b.noop_t);
  double per = 1e9 / (double)b.calls;
  printf("\n(a) no-op transfer: the tensor is already there (%ld calls per run)\n", b.calls);
  header("", "ns/call", "", "vs ref");
  printf("  %-44s %9.1f %8s %8.2f\n", "clt_tensor_retain + release (ref)", t_rr * per, "", 1.0);
  printf("  %-44s %9.1f %8s %8.2f\n", "clt_to(t on cl:0, cl:0)", t_dev * per, "", t_dev / t_rr);
  printf("  %-44s %9.1f %8s %8.2f\n", "clt_to(t on cpu, cpu)", t_cpu * per, "", t_cpu / t_rr);

  /* ---- (b) host <-> device ---- */
  int64_t shape[1] = {(int64_t)b.n};
  CLT_CHECK(clt_empty(CLT_F32, 1, shape, clt_cpu(), &b.host_src));
  CLT_CHECK(clt_empty_pinned(CLT_F32, 1, shape, b.dev, &b.pinned_src));
  CLT_CHECK(clt_empty(CLT_F32, 1, shape, clt_cpu(), &b.host_dst));
  CLT_CHECK(clt_empty_pinned(CLT_F32, 1, shape, b.dev, &b.pinned_dst));
  CLT_CHECK(clt_zeros(CLT_F32, 1, shape, b.dev, &b.dev_dst));
  fill_pattern(b.host_src);
  fill_pattern(b.pinned_src);
  memset(clt_tensor_data(b.host_dst), 0, b.bytes);
  memset(clt_tensor_data(b.pinned_dst), 0, b.bytes);
  CLT_CHECK(clt_to(b.host_src, b.dev, &b.dev_src));
  CLT_CHECK(clt_device_synchronize(b.dev));

  double mib = (double)b.bytes / (1024.0 * 1024.0), by = (double)b.bytes;
  bench_case raw_w = {run_raw_write, NULL, &b}, raw_wp = {run_raw_write_pinned, NULL, &b};
  bench_case clt_w = {run_clt_h2d, release_result, &b};
  bench_case clt_wp = {run_clt_h2d_pinned, release_result, &b};
  bench_case clt_wc = {run_clt_h2d_copy, NULL, &b};
  bench_case clt_wcp = {run_clt_h2d_copy_pinned, NULL, &b};
  bench_case raw_r = {run_raw_read, NULL, &b}, raw_rp = {run_raw_read_pinned, NULL, &b};
  bench_case clt_r = {run_clt_d2h_to, release_result, &b};
  bench_case clt_rc = {run_clt_d2h_copy, NULL, &b};
  bench_case clt_rcp = {run_clt_d2h_copy_pinned, NULL, &b};
  bench_case raw_rt = {run_raw_round_trip, NULL, &b};
  bench_case clt_rt = {run_clt_round_trip, release_result, &b};

  double s_raw_w = time_case(raw_w), s_raw_wp = time_case(raw_wp);
  double s_clt_w = time_case(clt_w), s_clt_wp = time_case(clt_wp);
  double s_clt_wc = time_case(clt_wc), s_clt_wcp = time_case(clt_wcp);
  double s_raw_r = time_case(raw_r), s_raw_rp = time_case(raw_rp);
  double s_clt_r = time_case(clt_r), s_clt_rc = time_case(clt_rc), s_clt_rcp = time_case(clt_rcp);
  /* Interleaved, so that the ratio compares runs of the same moments on a noisy machine. */
  double s_raw_rt = 0, s_clt_rt = 0;
  {
    double tr[64], tc[64];
    int n = reps < 32 ? 2 * reps : 64;
    for (int i = 0; i < warmup; i++) {
      run_raw_round_trip(&b);
      run_clt_round_trip(&b);
      release_result(&b);
    }
    for (int i = 0; i < n; i++) {
      double t0 = now_s();
      raw_rt.run(raw_rt.ctx);
      double t1 = now_s();
      clt_rt.run(clt_rt.ctx);
      double t2 = now_s();
      clt_rt.after(clt_rt.ctx);
      tr[i] = t1 - t0;
      tc[i] = t2 - t1;
    }
    s_raw_rt = median(tr, n);
    s_clt_rt = median(tc, n);
  }

  double g_raw_w = by / s_raw_w / 1e9, g_raw_wp = by / s_raw_wp / 1e9;
  double g_raw_r = by / s_raw_r / 1e9, g_raw_rp = by / s_raw_rp / 1e9;
  printf("\n(b) %.0f MiB f32 between cpu and cl:0; clt rows include synchronize and wait\n", mib);
  header("cpu -> cl:0", "ms", "GB/s", "vs raw");
  row_ms("raw clEnqueueWriteBuffer, pageable (ref)", s_raw_w, by, g_raw_w);
  row_ms("raw clEnqueueWriteBuffer, pinned (ref)", s_raw_wp, by, g_raw_wp);
  row_ms("clt_to, pageable source", s_clt_w, by, g_raw_w);
  row_ms("clt_to, pinned source (clt_empty_pinned)", s_clt_wp, by, g_raw_wp);
  row_ms("clt_copy into a cl:0 tensor, pageable source", s_clt_wc, by, g_raw_w);
  row_ms("clt_copy into a cl:0 tensor, pinned source", s_clt_wcp, by, g_raw_wp);
  printf("  cl:0 -> cpu\n");
  row_ms("raw clEnqueueReadBuffer, pageable (ref)", s_raw_r, by, g_raw_r);
  row_ms("raw clEnqueueReadBuffer, pinned (ref)", s_raw_rp, by, g_raw_rp);
  row_ms("clt_to, new host tensor", s_clt_r, by, g_raw_r);
  row_ms("clt_copy into a pageable host tensor", s_clt_rc, by, g_raw_r);
  row_ms("clt_copy into a pinned host tensor", s_clt_rcp, by, g_raw_rp);
  printf("  cpu -> cl:0 -> cpu (GB/s of the bytes moved both ways)\n");
  row_ms("raw write + read, existing buffers (ref)", s_raw_rt, 2 * by, 2 * by / s_raw_rt / 1e9);
  row_ms("clt_to + clt_to, fresh tensors released", s_clt_rt, 2 * by, 2 * by / s_raw_rt / 1e9);

  /* The round trips must preserve the data. */
  run_clt_round_trip(&b);
  expect_pattern(b.result, "cpu -> clt_to -> cl:0 -> clt_to -> cpu");
  release_result(&b);
  expect_pattern(b.host_dst, "clt_copy(host, cl:0)");
  expect_pattern(b.pinned_dst, "clt_copy(pinned, cl:0)");
  memset(clt_tensor_data(b.host_dst), 0, b.bytes);
  CLT_CHECK(clt_copy(b.host_dst, b.dev_dst));
  expect_pattern(b.host_dst, "pinned -> clt_copy -> cl:0 -> host");
  memset(clt_tensor_data(b.host_dst), 0, b.bytes);
  CLT_CHECK(clt_to(b.pinned_src, b.dev, &b.result));
  CLT_CHECK(clt_copy(b.host_dst, b.result));
  release_result(&b);
  expect_pattern(b.host_dst, "pinned -> cl:0 -> host");

  clt_tensor_release(b.host_src);
  clt_tensor_release(b.pinned_src);
  clt_tensor_release(b.host_dst);
  clt_tensor_release(b.pinned_dst);
  clt_tensor_release(b.dev_src);
  clt_tensor_release(b.dev_dst);

  /* ---- (c) clt_add against raw copy kernels ---- */
  int64_t add_shape[1] = {(int64_t)b.add_n};
  CLT_CHECK(clt_ones(CLT_F32, 1, add_shape, b.dev, &b.add_a));
  CLT_CHECK(clt_ones(CLT_F32, 1, add_shape, b.dev, &b.add_b));
  CLT_CHECK(clt_device_synchronize(b.dev));
  double s_chunk = time_case((bench_case){run_raw_copy_chunk, NULL, &b});
  double s_one = time_case((bench_case){run_raw_copy_one, NULL, &b});
  double s_add = time_case((bench_case){run_clt_add, release_result, &b});
  double n = (double)b.add_n;
  double g_chunk = 8 * n / s_chunk / 1e9, g_one = 8 * n / s_one / 1e9;
  double g_best = g_chunk > g_one ? g_chunk : g_one;
  char label[96];
  printf("\n(c) %.0fM f32 on cl:0: copy moves 8 B/element, add 12 B/element\n", n / (1 << 20));
  header("", "ms", "GB/s", "vs best");
  snprintf(label, sizeof label, "raw copy, %zu elems per work-item", b.chunk);
  row_ms(label, s_chunk, 8 * n, g_best);
  row_ms("raw copy, 1 elem per work-item", s_one, 8 * n, g_best);
  row_ms("clt_add + synchronize", s_add, 12 * n, g_best);

  /* The add must be right: 1 + 1 everywhere. */
  CLT_CHECK(clt_add(b.add_a, b.add_b, &b.result));
  clt_tensor *sum;
  double total = 0;
  CLT_CHECK(clt_sum(b.result, &sum));
  CLT_CHECK(clt_item(sum, &total));
  clt_tensor_release(sum);
  release_result(&b);
  if (total != 2.0 * n)
    die("clt_add: the sum of the result is %.17g, expected %.17g", total, 2.0 * n);

  printf("\nsummary (clt GB/s over raw GB/s): clt_to no-op %.0f ns; H2D clt_to %.2fx "
         "(pinned %.2fx), clt_copy %.2fx (pinned %.2fx); D2H clt_to %.2fx, clt_copy %.2fx "
         "(pinned %.2fx); round trip clt_to %.2fx; add %.2fx the best raw copy\n",
         t_dev * per, s_raw_w / s_clt_w, s_raw_wp / s_clt_wp, s_raw_w / s_clt_wc,
         s_raw_wp / s_clt_wcp, s_raw_r / s_clt_r, s_raw_r / s_clt_rc, s_raw_rp / s_clt_rcp,
         s_raw_rt / s_clt_rt, 12 * n / s_add / 1e9 / g_best);

  clt_tensor_release(b.add_a);
  clt_tensor_release(b.add_b);
  raw_teardown(&b);
  return 0;
}
