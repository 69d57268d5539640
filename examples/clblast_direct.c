/* SPDX-License-Identifier: MIT */
/* clblast_direct.c - your own CLBlast call on clt tensors, ordered with clt's operations before
 * and after it without a synchronize. clt computes an input (A = 0.5 * A0, still running when
 * CLBlast is called), CLBlastSgemm computes C = A B on a command queue of this program's own,
 * and clt adds a bias to C. The raw handles come from clt_device_cl and clt_tensor_cl_mem;
 * clt_tensor_cl_acquire gives the events the sgemm must wait for (a barrier on our queue holds it
 * back, since CLBlast takes no wait list), and clt_tensor_cl_release_to hands clt the sgemm's
 * event, which the clt_add then waits for on the device. The result is checked against the same
 * product computed here on the host.
 *
 *   $ ./examples/clblast_direct                 # the first GPU, else the first OpenCL device
 *   $ CLT_DEVICE=cl:1 ./examples/clblast_direct
 *
 * Built only when configure found CLBlast. docs/interop.md explains the calls.
 */
#include <clt.h>

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <clblast_c.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

enum { M = 48, N = 40, K = 24 };

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "clblast_direct: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

static void check_cl(cl_int err, const char *what) {
  if (err != CL_SUCCESS) {
    fprintf(stderr, "clblast_direct: %s failed: OpenCL error %d\n", what, (int)err);
    exit(1);
  }
}

int main(void) {
  clt_device *dev = clt_device_default();
  if (clt_device_is_host(dev)) {
    if (clt_device_count() == 0) {
      printf("clblast_direct: no OpenCL device, and CLBlast runs on one: nothing to do\n");
      return 0;
    }
    dev = clt_device_at(0);
  }
  static float a0[M * K], b[K * N], bias[N], want[M * N];
  for (int i = 0; i < M * K; i++)
    a0[i] = (float)((i * 37) % 23 - 11) / 8.0f;
  for (int i = 0; i < K * N; i++)
    b[i] = (float)((i * 53) % 19 - 9) / 4.0f;
  for (int j = 0; j < N; j++)
    bias[j] = (float)j - 20.0f;
  /* The host's answer: (0.5 A0) B + bias, every product exact in float (multiples of 1/64). */
  for (int i = 0; i < M; i++)
    for (int j = 0; j < N; j++) {
      double s = 0;
      for (int p = 0; p < K; p++)
        s += (double)(0.5f * a0[i * K + p]) * (double)b[p * N + j];
      want[i * N + j] = (float)(s + bias[j]);
    }

  /* clt's side: the inputs, one of them computed by a clt op that is still pending. */
  clt_tensor *ta0, *ta, *tb, *tc, *tbias, *td;
  check(clt_from_host(a0, CLT_F32, 2, (const int64_t[]){M, K}, dev, &ta0), "clt_from_host");
  check(clt_from_host(b, CLT_F32, 2, (const int64_t[]){K, N}, dev, &tb), "clt_from_host");
  check(clt_from_host(bias, CLT_F32, 1, (const int64_t[]){N}, dev, &tbias), "clt_from_host");
  check(clt_mul_scalar(ta0, 0.5, &ta), "clt_mul_scalar"); /* A = 0.5 A0: enqueued */
  check(clt_empty(CLT_F32, 2, (const int64_t[]){M, N}, dev, &tc), "clt_empty");

  /* The raw handles, and a queue of our own in clt's context. */
  cl_context ctx;
  cl_device_id id;
  check(clt_device_cl(dev, NULL, &id, &ctx, NULL), "clt_device_cl");
  cl_int err;
  cl_command_queue q = clCreateCommandQueue(ctx, id, 0, &err);
  check_cl(err, "clCreateCommandQueue");
  cl_mem ma, mb, mc;
  size_t oa, ob, oc; /* byte offsets: 0 here, but a view would have one */
  check(clt_tensor_cl_mem(ta, &ma, &oa), "clt_tensor_cl_mem(A)");
  check(clt_tensor_cl_mem(tb, &mb, &ob), "clt_tensor_cl_mem(B)");
  check(clt_tensor_cl_mem(tc, &mc, &oc), "clt_tensor_cl_mem(C)");

  /* Before: wait for clt's work on A and B (their writes) and C (its reads and writes). */
  cl_event before[3];
  check(clt_tensor_cl_acquire(ta, CLT_READ, &before[0]), "clt_tensor_cl_acquire(A)");
  check(clt_tensor_cl_acquire(tb, CLT_READ, &before[1]), "clt_tensor_cl_acquire(B)");
  check(clt_tensor_cl_acquire(tc, CLT_WRITE, &before[2]), "clt_tensor_cl_acquire(C)");
  check_cl(clEnqueueBarrierWithWaitList(q, 3, before, NULL), "clEnqueueBarrierWithWaitList");
  for (int i = 0; i < 3; i++)
    clReleaseEvent(before[i]);

  cl_event done = NULL;
  CLBlastStatusCode bs = CLBlastSgemm(
      CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeNo, M, N, K, 1.0f, ma,
      oa / sizeof(float), K, mb, ob / sizeof(float), N, 0.0f, mc, oc / sizeof(float), N, &q, &done);
  if (bs != CLBlastSuccess) {
    fprintf(stderr, "clblast_direct: CLBlastSgemm failed: status %d\n", (int)bs);
    return 1;
  }

  /* After: clt's later work on A, B (writes) and C (anything) waits for the sgemm. */
  check(clt_tensor_cl_release_to(ta, CLT_READ, done), "clt_tensor_cl_release_to(A)");
  check(clt_tensor_cl_release_to(tb, CLT_READ, done), "clt_tensor_cl_release_to(B)");
  check(clt_tensor_cl_release_to(tc, CLT_WRITE, done), "clt_tensor_cl_release_to(C)");
  clReleaseEvent(done); /* clt holds its own reference */

  check(clt_add(tc, tbias, &td), "clt_add"); /* D = C + bias, broadcast over rows: enqueued */

  static float got[M * N];
  check(clt_tensor_read(td, got, sizeof got), "clt_tensor_read"); /* the one wait */
  double maxerr = 0;
  for (int i = 0; i < M * N; i++)
    maxerr = fmax(maxerr, fabs((double)got[i] - (double)want[i]));
  printf("clblast_direct: C = (0.5 A0) B by CLBlastSgemm on %s between clt_mul_scalar and "
         "clt_add, %d x %d x %d\n",
         clt_device_name(dev), M, K, N);
  printf("  D[0][0] = %g, D[%d][%d] = %g; largest difference from the host: %.3g\n", got[0], M - 1,
         N - 1, got[M * N - 1], maxerr);
  int ok = maxerr <= 1e-3;
  printf("  %s\n", ok ? "ok" : "MISMATCH");

  clt_tensor_release(ta0);
  clt_tensor_release(ta);
  clt_tensor_release(tb);
  clt_tensor_release(tc);
  clt_tensor_release(tbias);
  clt_tensor_release(td);
  clReleaseCommandQueue(q);
  return ok ? 0 : 1;
}
