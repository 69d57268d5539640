/* SPDX-License-Identifier: MIT */
/* check_kernel.c - users' own kernels and raw OpenCL handles (issue 14, items 1 and 2;
 * lib/opencl/kernel.c, lib/opencl/interop.c): results of a user kernel on cl:0 and cl:1 against
 * values computed here, views passed with CLT_OFFSET, ordering against clt's own operations
 * with no synchronize (with and without CLT_SYNC, within a device and across two), the
 * same-device rule and the host refusal, build errors with their log, bad arguments, the disk
 * cache, clt_from_cl_mem, the acquire / release_to pair around work on the user's own queue,
 * and one kernel launched from several threads. Tests are the user's side: they call OpenCL. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include "check_util.h"

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* y = a * x + y over n elements, n given so the range may be rounded up to whole groups. */
static const char axpy_src[] =
    "__kernel void axpy(__global float *y, __global const float *x, float a, int n) {\n"
    "  int i = (int)get_global_id(0);\n"
    "  if (i < n) y[i] = a * x[i] + y[i];\n"
    "}\n";

/* The same with both tensors given as (buffer, element offset) pairs (CLT_OFFSET). */
static const char axpy_off_src[] =
    "__kernel void axpy_off(__global float *y, ulong yoff, __global const float *x, ulong xoff,\n"
    "                       float a, int n) {\n"
    "  int i = (int)get_global_id(0);\n"
    "  if (i < n) y[yoff + i] = a * x[xoff + i] + y[yoff + i];\n"
    "}\n";

static float *host_data(int n, uint64_t seed) {
  cu_rng r;
  cu_rng_seed(&r, seed);
  float *p = cu_malloc((size_t)n * sizeof *p);
  cu_fill(p, CLT_F32, n, &r, -4, 4, CU_NONZERO);
  return p;
}

static int small_n(clt_device *d) { return cu_is_oclgrind(d) ? 256 : 1 << 16; }

/* Asserts the n floats of t equal want[] (within a few ulps: the kernel may fuse a * x + y). */
static void assert_values(const clt_tensor *t, const float *want, int n, const char *what) {
  float *got = cu_read(t);
  for (int i = 0; i < n; i++)
    ck_assert_msg(cu_close(got[i], want[i], 1e-6, 1e-6), "%s: element %d is %g, expected %g", what,
                  i, got[i], want[i]);
  free(got);
}

static void assert_has(const char *what) {
  ck_assert_msg(strstr(clt_last_error(), what) != NULL, "the message lacks \"%s\": %s", what,
                clt_last_error());
}

START_TEST(test_kernel_results) {
  if (!cu_need_cl("test_kernel_results", 1))
    return;
  for (int di = 0; di < cu_cl_count() && di < 2; di++) {
    clt_device *d = clt_device_at(di);
    int n = small_n(d) + 3; /* not a multiple of the work-group */
    int64_t shape[1] = {n};
    float *x = host_data(n, 1), *y = host_data(n, 2), *want = cu_malloc((size_t)n * 4);
    float a = 1.5f;
    for (int i = 0; i < n; i++)
      want[i] = a * x[i] + y[i];
    clt_tensor *tx = cu_tensor(x, CLT_F32, 1, shape, d), *ty = cu_tensor(y, CLT_F32, 1, shape, d);
    clt_kernel *k;
    CU_OK(clt_kernel_create(axpy_src, "axpy", "-cl-mad-enable", &k));
    ck_assert_str_eq(clt_kernel_name(k), "axpy");
    CU_OK(clt_kernel_set_tensor(k, 0, ty, CLT_READ | CLT_WRITE));
    CU_OK(clt_kernel_set_tensor(k, 1, tx, CLT_READ));
    CU_OK(clt_kernel_set_scalar(k, 2, &a, sizeof a));
    CU_OK(clt_kernel_set_scalar(k, 3, &n, sizeof n));
    size_t local = 16, global = ((size_t)n + local - 1) / local * local;
    CU_OK(clt_kernel_launch(k, 1, &global, &local));
    assert_values(ty, want, n, clt_device_name(d));
    /* Again with the driver's work-group size: y += a x once more. */
    for (int i = 0; i < n; i++)
      want[i] += a * x[i];
    size_t exact = (size_t)n;
    CU_OK(clt_kernel_launch(k, 1, &exact, NULL));
    assert_values(ty, want, n, clt_device_name(d));
    int nargs = -1;
    CU_OK(clt_kernel_build(k, d, &nargs));
    ck_assert_int_eq(nargs, 4);
    /* An empty range launches nothing and succeeds. */
    size_t zero = 0;
    CU_OK(clt_kernel_launch(k, 1, &zero, NULL));
    clt_kernel_release(k);
    /* The kernel held the tensors; they are ours again, and still right. */
    assert_values(ty, want, n, "after release");
    clt_tensor_release(tx);
    clt_tensor_release(ty);
    free(x);
    free(y);
    free(want);
  }
}
END_TEST

/* A 2-d range and __local memory: each work-group sums its row block into out. */
START_TEST(test_kernel_2d_local) {
  if (!cu_need_cl("test_kernel_2d_local", 1))
    return;
  static const char src[] =
      "__kernel void rowsum(__global const int *m, __global int *out, __local int *tmp,\n"
      "                     int cols) {\n"
      "  int r = get_global_id(1), c = get_global_id(0), l = get_local_id(0);\n"
      "  tmp[l] = m[r * cols + c];\n"
      "  barrier(CLK_LOCAL_MEM_FENCE);\n"
      "  if (l == 0) { int s = 0; for (int j = 0; j < (int)get_local_size(0); j++) s += tmp[j];\n"
      "    out[r * get_num_groups(0) + get_group_id(0)] = s; }\n"
      "}\n";
  clt_device *d = clt_device_at(0);
  enum { R = 8, C = 32, L = 8 };
  int m[R * C], want[R * (C / L)];
  for (int i = 0; i < R * C; i++)
    m[i] = (i * 7919) % 1000 - 500;
  for (int r = 0; r < R; r++)
    for (int g = 0; g < C / L; g++) {
      int s = 0;
      for (int j = 0; j < L; j++)
        s += m[r * C + g * L + j];
      want[r * (C / L) + g] = s;
    }
  int64_t ms[2] = {R, C}, os[2] = {R, C / L};
  clt_tensor *tm = cu_tensor(m, CLT_I32, 2, ms, d), *to;
  CU_OK(clt_empty(CLT_I32, 2, os, d, &to));
  clt_kernel *k;
  CU_OK(clt_kernel_create(src, "rowsum", NULL, &k));
  int cols = C;
  CU_OK(clt_kernel_set_tensor(k, 0, tm, CLT_READ));
  CU_OK(clt_kernel_set_tensor(k, 1, to, CLT_WRITE));
  CU_OK(clt_kernel_set_local(k, 2, L * sizeof(int)));
  CU_OK(clt_kernel_set_scalar(k, 3, &cols, sizeof cols));
  size_t global[2] = {C, R}, local[2] = {L, 1};
  CU_OK(clt_kernel_launch(k, 2, global, local));
  int *got = cu_read(to);
  for (int i = 0; i < R * (C / L); i++)
    ck_assert_int_eq(got[i], want[i]);
  free(got);
  clt_kernel_release(k);
  clt_tensor_release(tm);
  clt_tensor_release(to);
}
END_TEST

START_TEST(test_kernel_views) {
  if (!cu_need_cl("test_kernel_views", 1))
    return;
  clt_device *d = clt_device_at(cu_cl_count() > 1 ? 1 : 0);
  enum { N = 40, S = 3, M = 20 };
  int64_t shape[1] = {N};
  float *x = host_data(N, 3), *y = host_data(N, 4);
  clt_tensor *tx = cu_tensor(x, CLT_F32, 1, shape, d), *ty = cu_tensor(y, CLT_F32, 1, shape, d);
  clt_tensor *vx, *vy;
  CU_OK(clt_narrow(tx, 0, S, M, &vx));      /* x[3:23] */
  CU_OK(clt_narrow(ty, 0, S + 10, M, &vy)); /* y[13:33] */
  clt_kernel *k;
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &k));
  /* A view with an offset needs CLT_OFFSET, and says so; the argument is left unset. */
  clt_kernel *sentinel = k;
  CU_FAILS(clt_kernel_set_tensor(k, 0, vy, CLT_READ | CLT_WRITE), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  assert_has("CLT_OFFSET");
  assert_has("clt_contiguous");
  ck_assert_ptr_eq(k, sentinel);
  /* A non-contiguous view is refused whatever the flags. */
  int64_t s2[2] = {4, 10};
  clt_tensor *m2, *tr;
  CU_OK(clt_view(tx, 2, s2, &m2));
  CU_OK(clt_transpose(m2, 0, 1, &tr));
  CU_FAILS(clt_kernel_set_tensor(k, 0, tr, CLT_READ | CLT_OFFSET), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  assert_has("clt_contiguous");
  clt_kernel_release(k);

  CU_OK(clt_kernel_create(axpy_off_src, "axpy_off", NULL, &k));
  float a = -0.5f;
  int n = M;
  CU_OK(clt_kernel_set_tensor(k, 0, vy, CLT_READ | CLT_WRITE | CLT_OFFSET));
  CU_OK(clt_kernel_set_tensor(k, 2, vx, CLT_READ | CLT_OFFSET));
  CU_OK(clt_kernel_set_scalar(k, 4, &a, sizeof a));
  CU_OK(clt_kernel_set_scalar(k, 5, &n, sizeof n));
  /* The offset slots are clt's: overwriting one is refused. */
  cl_ulong bogus = 0;
  CU_FAILS(clt_kernel_set_scalar(k, 1, &bogus, sizeof bogus), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_scalar");
  assert_has("CLT_OFFSET");
  size_t global = M;
  CU_OK(clt_kernel_launch(k, 1, &global, NULL));
  float *want = cu_malloc(N * sizeof *want);
  memcpy(want, y, N * sizeof *want);
  for (int i = 0; i < M; i++)
    want[S + 10 + i] = a * x[S + i] + y[S + 10 + i];
  assert_values(ty, want, N, "narrowed views with CLT_OFFSET");
  /* Without CLT_OFFSET again, a contiguous tensor at offset 0 replaces the pair. */
  CU_OK(clt_kernel_set_tensor(k, 0, ty, CLT_READ | CLT_WRITE));
  CU_OK(clt_kernel_set_scalar(k, 1, &bogus, sizeof bogus));
  clt_kernel_release(k);
  free(want);
  free(x);
  free(y);
  clt_tensor_release(m2);
  clt_tensor_release(tr);
  clt_tensor_release(vx);
  clt_tensor_release(vy);
  clt_tensor_release(tx);
  clt_tensor_release(ty);
}
END_TEST

/* A clt op writes a, the user kernel reads a and writes b and a (in place), clt ops read both:
 * no synchronize anywhere, so only the events order them. Then the same across two devices. */
static void ordering(void) {
  static const char src[] = "__kernel void advance(__global float *a, __global float *b) {\n"
                            "  size_t i = get_global_id(0);\n"
                            "  b[i] = a[i] + 1.0f;\n"
                            "  a[i] = 2.0f * a[i];\n"
                            "}\n";
  int nd = cu_cl_count() > 1 ? 2 : 1;
  for (int di = 0; di < nd; di++) {
    clt_device *d = clt_device_at(di);
    int n = small_n(d);
    int64_t shape[1] = {n};
    float *x = host_data(n, 5);
    clt_tensor *tx = cu_tensor(x, CLT_F32, 1, shape, d), *a, *b, *c;
    clt_kernel *k;
    CU_OK(clt_kernel_create(src, "advance", NULL, &k));
    for (int round = 0; round < 3; round++) {
      CU_OK(clt_mul_scalar(tx, 3.0, &a)); /* a = 3x, enqueued */
      CU_OK(clt_empty(CLT_F32, 1, shape, d, &b));
      CU_OK(clt_kernel_set_tensor(k, 0, a, CLT_READ | CLT_WRITE));
      CU_OK(clt_kernel_set_tensor(k, 1, b, CLT_WRITE));
      size_t global = (size_t)n;
      CU_OK(clt_kernel_launch(k, 1, &global, NULL));
      CU_OK(clt_add(a, b, &c)); /* 6x + 3x + 1 */
      float *want = cu_malloc((size_t)n * sizeof *want);
      for (int i = 0; i < n; i++)
        want[i] = 2.0f * (3.0f * x[i]) + (3.0f * x[i] + 1.0f);
      assert_values(c, want, n, "clt op, user kernel, clt op");
      free(want);
      clt_tensor_release(a);
      clt_tensor_release(b);
      clt_tensor_release(c);
    }
    clt_kernel_release(k);
    clt_tensor_release(tx);
    free(x);
  }
  if (nd < 2)
    return;
  /* Across devices: computed on cl:0, copied to cl:1, changed there by the kernel, copied back
   * and used on cl:0. */
  clt_device *d0 = clt_device_at(0), *d1 = clt_device_at(1);
  int n = small_n(d0) < small_n(d1) ? small_n(d0) : small_n(d1);
  int64_t shape[1] = {n};
  float *x = host_data(n, 6);
  clt_tensor *tx = cu_tensor(x, CLT_F32, 1, shape, d0), *a0, *a1, *b1, *b0, *r;
  CU_OK(clt_mul_scalar(tx, -1.0, &a0));
  CU_OK(clt_to(a0, d1, &a1));
  CU_OK(clt_empty(CLT_F32, 1, shape, d1, &b1));
  clt_kernel *k;
  CU_OK(clt_kernel_create(src, "advance", NULL, &k));
  CU_OK(clt_kernel_set_tensor(k, 0, a1, CLT_READ | CLT_WRITE));
  CU_OK(clt_kernel_set_tensor(k, 1, b1, CLT_WRITE));
  size_t global = (size_t)n;
  CU_OK(clt_kernel_launch(k, 1, &global, NULL));
  CU_OK(clt_to(b1, d0, &b0));
  CU_OK(clt_add(b0, a0, &r)); /* (1 - x) + (-x) */
  float *want = cu_malloc((size_t)n * sizeof *want);
  for (int i = 0; i < n; i++)
    want[i] = (-x[i] + 1.0f) + -x[i];
  assert_values(r, want, n, "across devices");
  for (int i = 0; i < n; i++)
    want[i] = -2.0f * x[i];
  assert_values(a1, want, n, "in place on cl:1");
  free(want);
  free(x);
  clt_kernel_release(k);
  clt_tensor_release(tx);
  clt_tensor_release(a0);
  clt_tensor_release(a1);
  clt_tensor_release(b1);
  clt_tensor_release(b0);
  clt_tensor_release(r);
}

START_TEST(test_kernel_ordering) {
  if (!cu_need_cl("test_kernel_ordering", 1))
    return;
  ordering();
}
END_TEST

START_TEST(test_kernel_ordering_sync) {
  if (!cu_forked) {
    cu_skip("test_kernel_ordering_sync", "needs CK_FORK (sets CLT_SYNC before clt starts)");
    return;
  }
  setenv("CLT_SYNC", "1", 1);
  if (!cu_need_cl("test_kernel_ordering_sync", 1))
    return;
  ordering();
}
END_TEST

START_TEST(test_kernel_devices_refused) {
  if (!cu_need_cl("test_kernel_devices_refused", 1))
    return;
  int64_t shape[1] = {8};
  clt_tensor *h, *t0, *t1 = NULL;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &h));
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_device_at(0), &t0));
  clt_kernel *k;
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &k));
  /* A host tensor. The message says where the kernel runs and how to copy the tensor there, as
   * the same-device rule's messages do: with no tensor set and no build yet, the OpenCL devices
   * there are. */
  char want[512], list[256] = "";
  for (int i = 0; i < cu_cl_count(); i++)
    snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
             clt_device_name(clt_device_at(i)));
  snprintf(want, sizeof want,
           "clt_kernel_set_tensor: t (argument 0 of kernel axpy) is on cpu, but a kernel runs on "
           "an OpenCL device (%s); copy t to one first with clt_to(t, clt_device_at(0), &t_dev)",
           list);
  CU_FAILS(clt_kernel_set_tensor(k, 0, h, CLT_READ), CLT_ERR_UNSUPPORTED, "clt_kernel_set_tensor");
  ck_assert_str_eq(clt_last_error(), want);
  /* With a tensor set, the device of that argument. */
  CU_OK(clt_kernel_set_tensor(k, 0, t0, CLT_READ | CLT_WRITE));
  CU_FAILS(clt_kernel_set_tensor(k, 1, h, CLT_READ), CLT_ERR_UNSUPPORTED, "clt_kernel_set_tensor");
  ck_assert_str_eq(
      clt_last_error(),
      "clt_kernel_set_tensor: t (argument 1 of kernel axpy) is on cpu, but kernel axpy "
      "runs on cl:0, where its argument 0 is; copy t there first with "
      "clt_to(t, clt_device_at(0), &t_dev)");
  /* Without tensors, the device the kernel was last built for. */
  clt_kernel *built;
  int last = cu_cl_count() - 1;
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &built));
  CU_OK(clt_kernel_build(built, clt_device_at(last), NULL));
  snprintf(want, sizeof want,
           "clt_kernel_set_tensor: t (argument 2 of kernel axpy) is on cpu, but kernel axpy was "
           "built for cl:%d; copy t there first with clt_to(t, clt_device_at(%d), &t_dev)",
           last, last);
  CU_FAILS(clt_kernel_set_tensor(built, 2, h, CLT_READ), CLT_ERR_UNSUPPORTED,
           "clt_kernel_set_tensor");
  ck_assert_str_eq(clt_last_error(), want);
  clt_kernel_release(built);
  if (cu_cl_count() > 1) {
    CU_OK(clt_ones(CLT_F32, 1, shape, clt_device_at(1), &t1));
    float a = 1;
    int n = 8;
    CU_OK(clt_kernel_set_tensor(k, 0, t0, CLT_READ | CLT_WRITE));
    CU_OK(clt_kernel_set_tensor(k, 1, t1, CLT_READ));
    CU_OK(clt_kernel_set_scalar(k, 2, &a, sizeof a));
    CU_OK(clt_kernel_set_scalar(k, 3, &n, sizeof n));
    size_t global = 8;
    CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_DEVICE_MISMATCH, "clt_kernel_launch");
    assert_has("expected all tensors on the same device");
    assert_has("cl:0 (argument 0 of kernel axpy)");
    assert_has("cl:1 (argument 1)");
    assert_has("clt_to()");
  }
  /* The handles of the host do not exist. */
  cl_context ctx = CU_SENTINEL;
  CU_FAILS(clt_device_cl(clt_cpu(), NULL, NULL, &ctx, NULL), CLT_ERR_UNSUPPORTED, "clt_device_cl");
  ck_assert_ptr_eq(ctx, CU_SENTINEL);
  cl_mem mem = CU_SENTINEL;
  CU_FAILS(clt_tensor_cl_mem(h, &mem, NULL), CLT_ERR_UNSUPPORTED, "clt_tensor_cl_mem");
  ck_assert_ptr_eq(mem, CU_SENTINEL);
  cl_event ev = CU_SENTINEL;
  CU_FAILS(clt_tensor_cl_acquire(h, CLT_READ, &ev), CLT_ERR_UNSUPPORTED, "clt_tensor_cl_acquire");
  ck_assert_ptr_eq(ev, CU_SENTINEL);
  CU_FAILS(clt_tensor_cl_release_to(h, CLT_READ, NULL), CLT_ERR_UNSUPPORTED,
           "clt_tensor_cl_release_to");
  clt_kernel_release(k);
  clt_tensor_release(h);
  clt_tensor_release(t0);
  clt_tensor_release(t1);
}
END_TEST

START_TEST(test_kernel_build_error) {
  if (!cu_need_cl("test_kernel_build_error", 1))
    return;
  clt_device *d = clt_device_at(0);
  static const char bad[] = "__kernel void broken(__global float *y) {\n"
                            "  y[get_global_id(0)] = undeclared_thing;\n"
                            "}\n";
  int64_t shape[1] = {4};
  clt_tensor *t;
  CU_OK(clt_zeros(CLT_F32, 1, shape, d, &t));
  clt_kernel *k;
  CU_OK(clt_kernel_create(bad, "broken", "-DSOMETHING=1", &k));
  CU_OK(clt_kernel_set_tensor(k, 0, t, CLT_WRITE));
  size_t global = 4;
  CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_BUILD, "clt_kernel_launch");
  assert_has(clt_device_name(d));
  assert_has("kernel broken (user source)");
  assert_has("build log");
  assert_has("undeclared_thing");
  assert_has("-DSOMETHING=1");
  /* Again: the failed build is not cached; the same error comes back. */
  int nargs = -7;
  CU_FAILS(clt_kernel_build(k, d, &nargs), CLT_ERR_BUILD, "clt_kernel_build");
  ck_assert_int_eq(nargs, -7);
  assert_has("undeclared_thing");
  clt_kernel_release(k);
  /* A name the source does not define. */
  CU_OK(clt_kernel_create(axpy_src, "no_such_kernel", NULL, &k));
  CU_FAILS(clt_kernel_build(k, d, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_build");
  assert_has("no __kernel function named no_such_kernel");
  CU_FAILS(clt_kernel_build(k, clt_cpu(), NULL), CLT_ERR_UNSUPPORTED, "clt_kernel_build");
  clt_kernel_release(k);
  clt_tensor_release(t);
}
END_TEST

START_TEST(test_kernel_bad_args) {
  if (!cu_need_cl("test_kernel_bad_args", 1))
    return;
  clt_device *d = clt_device_at(0);
  clt_kernel *k = CU_SENTINEL;
  CU_FAILS(clt_kernel_create(NULL, "axpy", NULL, &k), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_create");
  CU_FAILS(clt_kernel_create("", "axpy", NULL, &k), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_create");
  CU_FAILS(clt_kernel_create(axpy_src, NULL, NULL, &k), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_create");
  CU_FAILS(clt_kernel_create(axpy_src, "", NULL, &k), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_create");
  CU_FAILS(clt_kernel_create(axpy_src, "axpy", NULL, NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_create");
  CU_FAILS(clt_kernel_create_file(NULL, "axpy", NULL, &k), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_create_file");
  CU_FAILS(clt_kernel_create_file("/nonexistent/dir/k.cl", "axpy", NULL, &k), CLT_ERR_IO,
           "clt_kernel_create_file");
  assert_has("/nonexistent/dir/k.cl");
  ck_assert_ptr_eq(k, CU_SENTINEL);
  ck_assert_ptr_null(clt_kernel_retain(NULL));
  clt_kernel_release(NULL);
  ck_assert_ptr_null(clt_kernel_name(NULL));

  int64_t shape[1] = {16};
  clt_tensor *t;
  CU_OK(clt_ones(CLT_F32, 1, shape, d, &t));
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &k));
  float a = 2;
  int n = 16;
  size_t global = 16, local = 3;
  CU_FAILS(clt_kernel_set_tensor(NULL, 0, t, CLT_READ), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  CU_FAILS(clt_kernel_set_tensor(k, 0, NULL, CLT_READ), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  CU_FAILS(clt_kernel_set_tensor(k, -1, t, CLT_READ), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  CU_FAILS(clt_kernel_set_tensor(k, 0, t, 0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_tensor");
  CU_FAILS(clt_kernel_set_tensor(k, 0, t, CLT_OFFSET), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  CU_FAILS(clt_kernel_set_tensor(k, 0, t, 64 | CLT_READ), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_tensor");
  CU_FAILS(clt_kernel_set_scalar(k, 2, NULL, 4), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_scalar");
  CU_FAILS(clt_kernel_set_scalar(k, 2, &a, 0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_scalar");
  CU_FAILS(clt_kernel_set_scalar(NULL, 2, &a, 4), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_set_scalar");
  CU_FAILS(clt_kernel_set_local(k, 2, 0), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_local");
  CU_FAILS(clt_kernel_set_local(NULL, 2, 4), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_set_local");

  /* No tensor argument: no device to run on. */
  CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  assert_has("no tensor argument");
  CU_OK(clt_kernel_set_tensor(k, 0, t, CLT_READ | CLT_WRITE));
  /* Arguments 1..3 are missing. */
  CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  assert_has("argument 1 of kernel axpy (of 4) was never set");
  CU_OK(clt_kernel_set_tensor(k, 1, t, CLT_READ));
  CU_OK(clt_kernel_set_scalar(k, 2, &a, sizeof a));
  CU_OK(clt_kernel_set_scalar(k, 3, &n, sizeof n));
  /* One past the last. */
  CU_OK(clt_kernel_set_scalar(k, 6, &n, sizeof n));
  CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  assert_has("argument 6 of kernel axpy is set, but the kernel takes 4 arguments");
  /* Bad launch geometry. */
  CU_FAILS(clt_kernel_launch(NULL, 1, &global, NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_kernel_launch");
  CU_FAILS(clt_kernel_launch(k, 0, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  CU_FAILS(clt_kernel_launch(k, 4, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  CU_FAILS(clt_kernel_launch(k, 1, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  CU_FAILS(clt_kernel_launch(k, 1, &global, &local), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  assert_has("does not divide");
  clt_kernel_release(k);

  /* Arguments of the wrong kind or size, found by OpenCL at the launch. */
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &k));
  CU_OK(clt_kernel_set_tensor(k, 0, t, CLT_READ | CLT_WRITE));
  CU_OK(clt_kernel_set_tensor(k, 1, t, CLT_READ));
  CU_OK(clt_kernel_set_scalar(k, 2, &a, sizeof a));
  double wide = 1;
  CU_OK(clt_kernel_set_scalar(k, 3, &wide, sizeof wide)); /* int n given 8 bytes */
  CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  assert_has("argument 3 of kernel axpy");
  assert_has("CL_INVALID_ARG_SIZE");
  CU_OK(clt_kernel_set_scalar(k, 3, &n, sizeof n));
  CU_OK(clt_kernel_set_tensor(k, 2, t, CLT_READ)); /* float a given a buffer */
  CU_FAILS(clt_kernel_launch(k, 1, &global, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_kernel_launch");
  assert_has("argument 2 of kernel axpy");
  assert_has("a tensor was set");
  CU_OK(clt_kernel_set_scalar(k, 2, &a, sizeof a));
  CU_OK(clt_kernel_launch(k, 1, &global, NULL)); /* and it still works */
  float want[16];
  for (int i = 0; i < 16; i++)
    want[i] = 3;
  assert_values(t, want, 16, "after the refusals");
  clt_kernel_release(k);
  clt_tensor_release(t);
}
END_TEST

START_TEST(test_kernel_disk_cache) {
  if (!cu_forked) {
    cu_skip("test_kernel_disk_cache", "needs CK_FORK (sets CLT_CACHE_DIR)");
    return;
  }
  char dir[256];
  cu_temp_dir(dir, sizeof dir, "kernel-cache");
  setenv("CLT_CACHE_DIR", dir, 1);
  unsetenv("CLT_CACHE");
  if (!cu_need_cl("test_kernel_disk_cache", 1))
    return;
  clt_device *d = clt_device_at(0);
  size_t count = 99;
  CU_OK(clt_kernel_cache_list(NULL, NULL, &count));
  ck_assert_uint_eq(count, 0);
  clt_kernel *k1, *k2, *k3;
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &k1));
  CU_OK(clt_kernel_build(k1, d, NULL));
  CU_OK(clt_kernel_cache_list(NULL, NULL, &count));
  ck_assert_uint_eq(count, 1);
  /* Another kernel of the same source and options: the same program, no new entry. */
  CU_OK(clt_kernel_create(axpy_src, "axpy", NULL, &k2));
  CU_OK(clt_kernel_build(k2, d, NULL));
  CU_OK(clt_kernel_cache_list(NULL, NULL, &count));
  ck_assert_uint_eq(count, 1);
  /* Other options: another program, another entry. */
  CU_OK(clt_kernel_create(axpy_src, "axpy", "-DUNUSED=2", &k3));
  CU_OK(clt_kernel_build(k3, d, NULL));
  CU_OK(clt_kernel_cache_list(NULL, NULL, &count));
  ck_assert_uint_eq(count, 2);
  clt_kernel_release(k1);
  clt_kernel_release(k2);
  clt_kernel_release(k3);
  size_t removed;
  CU_OK(clt_kernel_cache_clear(&removed));
  rmdir(dir);
}
END_TEST

START_TEST(test_kernel_from_file) {
  if (!cu_need_cl("test_kernel_from_file", 1))
    return;
  char dir[256], path[300];
  cu_temp_dir(dir, sizeof dir, "kernel-file");
  snprintf(path, sizeof path, "%s/axpy.cl", dir);
  FILE *f = fopen(path, "w");
  ck_assert_ptr_nonnull(f);
  fputs(axpy_src, f);
  fclose(f);
  clt_kernel *k;
  CU_OK(clt_kernel_create_file(path, "axpy", NULL, &k));
  int nargs = 0;
  CU_OK(clt_kernel_build(k, clt_device_at(0), &nargs));
  ck_assert_int_eq(nargs, 4);
  clt_kernel_release(k);
  /* A build error names the file. */
  f = fopen(path, "w");
  fputs("__kernel void axpy( {", f);
  fclose(f);
  CU_OK(clt_kernel_create_file(path, "axpy", NULL, &k));
  CU_FAILS(clt_kernel_build(k, clt_device_at(0), NULL), CLT_ERR_BUILD, "clt_kernel_build");
  assert_has(path);
  clt_kernel_release(k);
  remove(path);
  rmdir(dir);
}
END_TEST

START_TEST(test_device_cl_handles) {
  if (!cu_need_cl("test_device_cl_handles", 1))
    return;
  for (int i = 0; i < cu_cl_count(); i++) {
    clt_device *d = clt_device_at(i);
    cl_platform_id p = NULL;
    cl_device_id id = NULL;
    cl_context ctx = NULL;
    cl_command_queue q = NULL;
    CU_OK(clt_device_cl(d, &p, &id, &ctx, &q));
    ck_assert(p && id && ctx && q);
    CU_OK(clt_device_cl(d, NULL, NULL, NULL, NULL));
    cl_context qctx = NULL;
    cl_device_id qdev = NULL;
    ck_assert_int_eq(clGetCommandQueueInfo(q, CL_QUEUE_CONTEXT, sizeof qctx, &qctx, NULL),
                     CL_SUCCESS);
    ck_assert_int_eq(clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof qdev, &qdev, NULL),
                     CL_SUCCESS);
    ck_assert_ptr_eq(qctx, ctx);
    ck_assert_ptr_eq(qdev, id);
    /* A tensor's buffer, and a view's byte offset in it. */
    int64_t shape[1] = {10};
    clt_tensor *t, *v;
    CU_OK(clt_arange(0, 10, 1, CLT_F32, d, &t));
    CU_OK(clt_narrow(t, 0, 4, 3, &v));
    cl_mem m1 = NULL, m2 = NULL;
    size_t off = 99;
    CU_OK(clt_tensor_cl_mem(t, &m1, &off));
    ck_assert_uint_eq(off, 0);
    CU_OK(clt_tensor_cl_mem(v, &m2, &off));
    ck_assert_ptr_eq(m1, m2);
    ck_assert_uint_eq(off, 4 * sizeof(float));
    cl_context mctx = NULL;
    ck_assert_int_eq(clGetMemObjectInfo(m1, CL_MEM_CONTEXT, sizeof mctx, &mctx, NULL), CL_SUCCESS);
    ck_assert_ptr_eq(mctx, ctx);
    CU_FAILS(clt_tensor_cl_mem(t, NULL, &off), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_cl_mem");
    CU_FAILS(clt_tensor_cl_mem(NULL, &m1, &off), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_cl_mem");
    (void)shape;
    clt_tensor_release(v);
    clt_tensor_release(t);
  }
  CU_FAILS(clt_device_cl(NULL, NULL, NULL, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_device_cl");
}
END_TEST

START_TEST(test_from_cl_mem) {
  if (!cu_need_cl("test_from_cl_mem", 1))
    return;
  clt_device *d = clt_device_at(0);
  cl_context ctx;
  cl_command_queue q;
  cl_device_id id;
  CU_OK(clt_device_cl(d, NULL, &id, &ctx, &q));
  enum { N = 48 };
  float host[N];
  for (int i = 0; i < N; i++)
    host[i] = (float)(i * 3 - 7) / 4;
  cl_int err;
  cl_mem mem = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof host, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  ck_assert_int_eq(clEnqueueWriteBuffer(q, mem, CL_TRUE, 0, sizeof host, host, 0, NULL, NULL),
                   CL_SUCCESS);
  int64_t shape[2] = {6, 8};
  clt_tensor *t = CU_SENTINEL, *r;
  CU_OK(clt_from_cl_mem(mem, CLT_F32, 2, shape, d, &t));
  cu_assert_meta(t, CLT_F32, d, 2, shape, "clt_from_cl_mem");
  cl_mem back = NULL;
  CU_OK(clt_tensor_cl_mem(t, &back, NULL));
  ck_assert_ptr_eq(back, mem);
  CU_OK(clt_mul_scalar(t, 2.0, &r));
  float want[N];
  for (int i = 0; i < N; i++)
    want[i] = 2 * host[i];
  assert_values(r, want, N, "clt_from_cl_mem then clt_mul_scalar");
  /* Writing through clt changes the user's buffer. */
  CU_OK(clt_fill_(t, 5.0));
  float got[N];
  clt_event *ev;
  CU_OK(clt_event_record(d, &ev)); /* the fill is on clt's queue, which q is */
  CU_OK(clt_event_wait(ev));
  clt_event_release(ev);
  ck_assert_int_eq(clEnqueueReadBuffer(q, mem, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL),
                   CL_SUCCESS);
  for (int i = 0; i < N; i++)
    ck_assert(got[i] == 5.0f);
  clt_tensor_release(r);
  clt_tensor_release(t);
  /* clt dropped its reference; the buffer is still the user's. */
  cl_uint refs = 0;
  ck_assert_int_eq(clGetMemObjectInfo(mem, CL_MEM_REFERENCE_COUNT, sizeof refs, &refs, NULL),
                   CL_SUCCESS);
  ck_assert_uint_eq(refs, 1);

  /* Too small: both sizes in the message, out untouched. */
  int64_t big[2] = {7, 8};
  t = CU_SENTINEL;
  CU_FAILS(clt_from_cl_mem(mem, CLT_F32, 2, big, d, &t), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_cl_mem");
  assert_has("192 bytes");
  assert_has("224");
  ck_assert_ptr_eq(t, CU_SENTINEL);
  CU_FAILS(clt_from_cl_mem(mem, CLT_F32, 2, shape, clt_cpu(), &t), CLT_ERR_UNSUPPORTED,
           "clt_from_cl_mem");
  CU_FAILS(clt_from_cl_mem(NULL, CLT_F32, 2, shape, d, &t), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_cl_mem");
  CU_FAILS(clt_from_cl_mem(mem, CLT_F32, 2, NULL, d, &t), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_cl_mem");
  CU_FAILS(clt_from_cl_mem(mem, (clt_dtype)99, 2, shape, d, &t), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_cl_mem");
  CU_FAILS(clt_from_cl_mem(mem, CLT_F32, 2, shape, d, NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_cl_mem");
  int64_t neg[2] = {-1, 8};
  CU_FAILS(clt_from_cl_mem(mem, CLT_F32, 2, neg, d, &t), CLT_ERR_INVALID_ARGUMENT,
           "clt_from_cl_mem");
  ck_assert_ptr_eq(t, CU_SENTINEL);
  /* A buffer of a context of the user's own. */
  cl_context mine = clCreateContext(NULL, 1, &id, NULL, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_mem other = clCreateBuffer(mine, CL_MEM_READ_WRITE, sizeof host, NULL, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  CU_FAILS(clt_from_cl_mem(other, CLT_F32, 2, shape, d, &t), CLT_ERR_DEVICE_NOT_FOUND,
           "clt_from_cl_mem");
  assert_has("clt_device_cl");
  ck_assert_ptr_eq(t, CU_SENTINEL);
  clReleaseMemObject(other);
  clReleaseContext(mine);
  clReleaseMemObject(mem);
}
END_TEST

/* The user's own queue in clt's context: work there is ordered against clt's by acquire and
 * release_to alone. A user event holds the user's command back, so a clt op enqueued after
 * release_to must wait for it, and would read old values otherwise. */
START_TEST(test_acquire_release) {
  if (!cu_need_cl("test_acquire_release", 1))
    return;
  clt_device *d = clt_device_at(cu_cl_count() > 1 ? 1 : 0);
  cl_context ctx;
  cl_device_id id;
  CU_OK(clt_device_cl(d, NULL, &id, &ctx, NULL));
  cl_int err;
  cl_command_queue mine = clCreateCommandQueue(ctx, id, 0, &err);
  ck_assert_int_eq(err, CL_SUCCESS);
  int n = small_n(d);
  int64_t shape[1] = {n};
  float *x = host_data(n, 7);
  clt_tensor *tx = cu_tensor(x, CLT_F32, 1, shape, d), *a, *r;

  /* 1. The user fills a (which clt wrote just before) on their queue, held back by a user
   *    event; clt then adds 1 to it. */
  CU_OK(clt_mul_scalar(tx, 4.0, &a));
  cl_event ready = NULL, gate = clCreateUserEvent(ctx, &err), done = NULL;
  ck_assert_int_eq(err, CL_SUCCESS);
  cl_event sentinel = CU_SENTINEL, ev = sentinel;
  CU_FAILS(clt_tensor_cl_acquire(a, 0, &ev), CLT_ERR_INVALID_ARGUMENT, "clt_tensor_cl_acquire");
  CU_FAILS(clt_tensor_cl_acquire(a, CLT_READ, NULL), CLT_ERR_INVALID_ARGUMENT,
           "clt_tensor_cl_acquire");
  ck_assert_ptr_eq(ev, sentinel);
  CU_OK(clt_tensor_cl_acquire(a, CLT_WRITE, &ready));
  ck_assert_ptr_nonnull(ready);
  cl_mem mem;
  size_t off;
  CU_OK(clt_tensor_cl_mem(a, &mem, &off));
  float pattern = 7.25f;
  cl_event waits[2] = {ready, gate};
  ck_assert_int_eq(clEnqueueFillBuffer(mine, mem, &pattern, sizeof pattern, off,
                                       (size_t)n * sizeof(float), 2, waits, &done),
                   CL_SUCCESS);
  CU_OK(clt_tensor_cl_release_to(a, CLT_WRITE, done));
  CU_OK(clt_add_scalar(a, 1.0, &r)); /* enqueued; must wait for the fill */
  ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  float *want = cu_malloc((size_t)n * sizeof *want);
  for (int i = 0; i < n; i++)
    want[i] = pattern + 1;
  assert_values(r, want, n, "user fill between clt ops");
  clReleaseEvent(ready);
  clReleaseEvent(gate);
  clReleaseEvent(done);
  clt_tensor_release(r);

  /* 2. The user reads what clt just wrote, without a synchronize: the read waits for the
   *    acquire's event. Then clt overwrites a, which must wait for the user's read, held back
   *    by a gate again. */
  CU_OK(clt_mul_scalar(tx, -3.0, &r));
  CU_OK(clt_tensor_cl_acquire(r, CLT_READ, &ready));
  CU_OK(clt_tensor_cl_mem(r, &mem, &off));
  gate = clCreateUserEvent(ctx, &err);
  float *got = cu_malloc((size_t)n * sizeof *got);
  cl_event rw[2] = {ready, gate};
  ck_assert_int_eq(
      clEnqueueReadBuffer(mine, mem, CL_FALSE, off, (size_t)n * sizeof(float), got, 2, rw, &done),
      CL_SUCCESS);
  CU_OK(clt_tensor_cl_release_to(r, CLT_READ, done));
  CU_OK(clt_fill_(r, 0.0)); /* a write: waits for the user's read */
  ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  ck_assert_int_eq(clWaitForEvents(1, &done), CL_SUCCESS);
  for (int i = 0; i < n; i++)
    ck_assert_msg(got[i] == -3.0f * x[i], "user read: element %d is %g, expected %g", i, got[i],
                  -3.0f * x[i]);
  for (int i = 0; i < n; i++)
    want[i] = 0;
  assert_values(r, want, n, "clt fill after the user's read");
  clReleaseEvent(ready);
  clReleaseEvent(gate);
  clReleaseEvent(done);

  /* 3. A user write whose event is a user event of its own (no queue), and NULL (done). */
  CU_OK(clt_tensor_cl_acquire(r, CLT_READ | CLT_WRITE, &ready));
  ck_assert_int_eq(clWaitForEvents(1, &ready), CL_SUCCESS);
  clReleaseEvent(ready);
  CU_OK(clt_tensor_cl_mem(r, &mem, &off));
  for (int i = 0; i < n; i++)
    want[i] = (float)i;
  ck_assert_int_eq(
      clEnqueueWriteBuffer(mine, mem, CL_TRUE, off, (size_t)n * sizeof(float), want, 0, NULL, NULL),
      CL_SUCCESS);
  CU_OK(clt_tensor_cl_release_to(r, CLT_WRITE, NULL));
  gate = clCreateUserEvent(ctx, &err);
  CU_OK(clt_tensor_cl_release_to(r, CLT_READ, gate));
  CU_FAILS(clt_tensor_cl_release_to(r, 8, gate), CLT_ERR_INVALID_ARGUMENT,
           "clt_tensor_cl_release_to");
  clt_tensor *s;
  CU_OK(clt_mul_scalar(r, 1.0, &s)); /* a read: need not wait for the user's read */
  assert_values(s, want, n, "user write with a blocking call");
  ck_assert_int_eq(clSetUserEventStatus(gate, CL_COMPLETE), CL_SUCCESS);
  clReleaseEvent(gate);
  clt_tensor_release(s);

  free(want);
  free(got);
  free(x);
  clt_tensor_release(a);
  clt_tensor_release(r);
  clt_tensor_release(tx);
  clFinish(mine);
  clReleaseCommandQueue(mine);
}
END_TEST

/* ---- threads ----------------------------------------------------------------------------------
 */

typedef struct shared_launch {
  clt_kernel *k;
  size_t global;
  int launches;
  clt_status st;
} shared_launch;

static void *launch_many(void *arg) {
  shared_launch *s = arg;
  s->st = CLT_OK;
  for (int i = 0; i < s->launches && s->st == CLT_OK; i++)
    s->st = clt_kernel_launch(s->k, 1, &s->global, NULL);
  return NULL;
}

typedef struct own_kernel {
  clt_device *d;
  int n, id;
  int ok;
  char msg[256];
} own_kernel;

/* A kernel of its own per thread (same source: one program), on tensors of its own. */
static void *own_kernel_run(void *arg) {
  own_kernel *o = arg;
  o->ok = 0;
  int64_t shape[1] = {o->n};
  clt_tensor *x = NULL, *y = NULL;
  clt_kernel *k = NULL;
  float a = (float)(o->id + 1);
  size_t global = (size_t)o->n;
  if (clt_full(CLT_F32, 1, shape, 2.0, o->d, &x) != CLT_OK ||
      clt_full(CLT_F32, 1, shape, 1.0, o->d, &y) != CLT_OK ||
      clt_kernel_create(axpy_src, "axpy", NULL, &k) != CLT_OK ||
      clt_kernel_set_tensor(k, 0, y, CLT_READ | CLT_WRITE) != CLT_OK ||
      clt_kernel_set_tensor(k, 1, x, CLT_READ) != CLT_OK ||
      clt_kernel_set_scalar(k, 2, &a, sizeof a) != CLT_OK ||
      clt_kernel_set_scalar(k, 3, &o->n, sizeof o->n) != CLT_OK) {
    snprintf(o->msg, sizeof o->msg, "%s", clt_last_error());
    goto out;
  }
  for (int r = 0; r < 5; r++)
    if (clt_kernel_launch(k, 1, &global, NULL) != CLT_OK) {
      snprintf(o->msg, sizeof o->msg, "%s", clt_last_error());
      goto out;
    }
  double sum = 0;
  clt_tensor *t = NULL;
  if (clt_sum(y, &t) != CLT_OK || clt_item(t, &sum) != CLT_OK) {
    snprintf(o->msg, sizeof o->msg, "%s", clt_last_error());
    clt_tensor_release(t);
    goto out;
  }
  clt_tensor_release(t);
  double want = (double)o->n * (1.0 + 5.0 * 2.0 * a);
  o->ok = sum == want;
  if (!o->ok)
    snprintf(o->msg, sizeof o->msg, "thread %d: sum %g, expected %g", o->id, sum, want);
out:
  clt_kernel_release(k);
  clt_tensor_release(x);
  clt_tensor_release(y);
  return NULL;
}

START_TEST(test_kernel_threads) {
  if (!cu_need_cl("test_kernel_threads", 1))
    return;
  enum { T = 4, LAUNCHES = 10 };
  /* Oclgrind is not thread-safe (tests/oclgrind/threads.c): its devices are left out. */
  clt_device *devs[CU_MAX_DEVICES];
  int nd = 0;
  for (int i = 0; i < cu_cl_count() && nd < CU_MAX_DEVICES; i++)
    if (!cu_is_oclgrind(clt_device_at(i)))
      devs[nd++] = clt_device_at(i);
  if (nd == 0) {
    cu_skip("test_kernel_threads", "only Oclgrind, which is not thread-safe "
                                   "(tests/oclgrind/threads.c)");
    return;
  }
  clt_device *d = devs[0];
  int n = 4096;
  int64_t shape[1] = {n};
  /* One kernel, arguments set once, launched by T threads at once: y = 2 x + 1 each time, so
   * the result is the same whatever the interleaving, and every launch must have run. */
  static const char src[] =
      "__kernel void count(__global const float *x, __global float *y, __global int *hits) {\n"
      "  size_t i = get_global_id(0);\n"
      "  y[i] = 2.0f * x[i] + 1.0f;\n"
      "  if (i == 0) hits[0] += 1;\n"
      "}\n";
  clt_tensor *x, *y, *hits;
  CU_OK(clt_arange(0, n, 1, CLT_F32, d, &x));
  CU_OK(clt_empty(CLT_F32, 1, shape, d, &y));
  int64_t one[1] = {1};
  CU_OK(clt_zeros(CLT_I32, 1, one, d, &hits));
  clt_kernel *k;
  CU_OK(clt_kernel_create(src, "count", NULL, &k));
  CU_OK(clt_kernel_set_tensor(k, 0, x, CLT_READ));
  CU_OK(clt_kernel_set_tensor(k, 1, y, CLT_WRITE));
  CU_OK(clt_kernel_set_tensor(k, 2, hits, CLT_READ | CLT_WRITE));
  pthread_t th[T];
  shared_launch s[T];
  for (int i = 0; i < T; i++) {
    s[i] = (shared_launch){clt_kernel_retain(k), (size_t)n, LAUNCHES, CLT_OK};
    ck_assert_int_eq(pthread_create(&th[i], NULL, launch_many, &s[i]), 0);
  }
  clt_kernel_release(k); /* the threads hold it */
  for (int i = 0; i < T; i++) {
    pthread_join(th[i], NULL);
    ck_assert_msg(s[i].st == CLT_OK, "thread %d: %s", i, clt_status_name(s[i].st));
    clt_kernel_release(s[i].k);
  }
  int *h = cu_read(hits);
  ck_assert_int_eq(h[0], T * LAUNCHES); /* hits is read and written: launches ran one by one */
  free(h);
  float *got = cu_read(y);
  for (int i = 0; i < n; i++)
    ck_assert(got[i] == 2.0f * (float)i + 1.0f);
  free(got);
  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(hits);

  /* A kernel per thread, on both devices when there are two. */
  pthread_t ot[T];
  own_kernel o[T];
  for (int i = 0; i < T; i++) {
    o[i] = (own_kernel){devs[i % (nd > 1 ? 2 : 1)], n, i, 0, ""};
    ck_assert_int_eq(pthread_create(&ot[i], NULL, own_kernel_run, &o[i]), 0);
  }
  for (int i = 0; i < T; i++) {
    pthread_join(ot[i], NULL);
    ck_assert_msg(o[i].ok, "%s", o[i].msg);
  }
}
END_TEST

/* ---- injected faults (configure --enable-fault-injection) --------------------------------- */

#ifdef CLT_FAULT_INJECTION
#include "fault.h"

/* A user kernel built (or found in the cache), launched, its output acquired and released by
 * "user" work, then read by a clt op: under a fault it must fail with a message or give the
 * right values. The kernel, its options and the range are test_kernel_bad_args' last launch on
 * cl:0, so that a sanitizer run finds PoCL's own cache of it warm from a plain run (PoCL's
 * compiler leaks when it compiles, which is not clt's to suppress). */
static clt_status fault_workload(clt_device *d, int run) {
  enum { N = 16 };
  float x[N], want[N], got[N];
  for (int i = 0; i < N; i++) {
    x[i] = (float)i - 10;
    want[i] = 2 * (3 * x[i] + 1);
  }
  int64_t shape[1] = {N};
  clt_tensor *tx = NULL, *ty = NULL, *tz = NULL;
  clt_kernel *k = NULL;
  float a = 3;
  int n = N;
  size_t global = N;
  cl_event ev = NULL;
  clt_status st;
  if ((st = clt_from_host(x, CLT_F32, 1, shape, d, &tx)) != CLT_OK ||
      (st = clt_ones(CLT_F32, 1, shape, d, &ty)) != CLT_OK ||
      (st = clt_kernel_create(axpy_src, "axpy", NULL, &k)) != CLT_OK ||
      (st = clt_kernel_set_tensor(k, 0, ty, CLT_READ | CLT_WRITE)) != CLT_OK ||
      (st = clt_kernel_set_tensor(k, 1, tx, CLT_READ)) != CLT_OK ||
      (st = clt_kernel_set_scalar(k, 2, &a, sizeof a)) != CLT_OK ||
      (st = clt_kernel_set_scalar(k, 3, &n, sizeof n)) != CLT_OK ||
      (st = clt_kernel_launch(k, 1, &global, NULL)) != CLT_OK ||
      (st = clt_tensor_cl_acquire(ty, CLT_READ, &ev)) != CLT_OK ||
      (st = clt_tensor_cl_release_to(ty, CLT_READ, ev)) != CLT_OK ||
      (st = clt_mul_scalar(ty, 2.0, &tz)) != CLT_OK ||
      (st = clt_tensor_read(tz, got, sizeof got)) != CLT_OK)
    goto out;
  for (int i = 0; i < N; i++)
    ck_assert_msg(got[i] == want[i], "run %d: element %d is %g, expected %g", run, i, got[i],
                  want[i]);
out:
  if (ev)
    clReleaseEvent(ev);
  clt_kernel_release(k);
  clt_tensor_release(tx);
  clt_tensor_release(ty);
  clt_tensor_release(tz);
  return st;
}
#endif

START_TEST(test_kernel_faults) {
#ifndef CLT_FAULT_INJECTION
  cu_skip("test_kernel_faults", "needs configure --enable-fault-injection");
#else
  if (!cu_need_cl("test_kernel_faults", 1))
    return;
  clt_device *d = clt_device_at(0);
  static const clt_fault_kind kinds[] = {CLT__FAULT_ENQUEUE, CLT__FAULT_BUILD, CLT__FAULT_ALLOC,
                                         CLT__FAULT_HOST};
  int run = 0;
  long injected_total = 0;
  for (size_t ki = 0; ki < sizeof kinds / sizeof kinds[0]; ki++)
    for (long n = 1;; n++) {
      ck_assert_msg(n < 500, "%s: the workload never ran without a fault",
                    clt__fault_kind_name(kinds[ki]));
      clt__fault_set(kinds[ki], n, CLT__FAULT_THIS_THREAD);
      clt_status st = fault_workload(d, ++run);
      long injected = clt__fault_injected();
      clt__fault_reset();
      injected_total += injected;
      if (injected == 0) {
        ck_assert_msg(st == CLT_OK, "no fault, yet %s: %s", clt_status_name(st), clt_last_error());
        break;
      }
      if (st != CLT_OK)
        ck_assert_msg(strncmp(clt_last_error(), "clt_", 4) == 0,
                      "%s fault %ld: %s without a clt message: %s", clt__fault_kind_name(kinds[ki]),
                      n, clt_status_name(st), clt_last_error());
      /* Whatever happened, the next run without faults works. */
      CU_OK(fault_workload(d, ++run));
    }
  ck_assert_msg(injected_total > 0, "no fault was injected");
  printf("test_kernel_faults: %ld faults injected\n", injected_total);
#endif
}
END_TEST

Suite *kernel_suite(void); /* registered in check_main.c */

Suite *kernel_suite(void) {
  Suite *s = suite_create("kernel");
  TCase *tc = cu_tcase("kernel");
  tcase_add_test(tc, test_kernel_results);
  tcase_add_test(tc, test_kernel_2d_local);
  tcase_add_test(tc, test_kernel_views);
  tcase_add_test(tc, test_kernel_ordering);
  tcase_add_test(tc, test_kernel_ordering_sync);
  tcase_add_test(tc, test_kernel_devices_refused);
  tcase_add_test(tc, test_kernel_build_error);
  tcase_add_test(tc, test_kernel_bad_args);
  tcase_add_test(tc, test_kernel_disk_cache);
  tcase_add_test(tc, test_kernel_from_file);
  tcase_add_test(tc, test_device_cl_handles);
  tcase_add_test(tc, test_from_cl_mem);
  tcase_add_test(tc, test_acquire_release);
  tcase_add_test(tc, test_kernel_threads);
  tcase_add_test(tc, test_kernel_faults);
  suite_add_tcase(s, tc);
  return s;
}
