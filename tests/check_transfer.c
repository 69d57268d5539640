/* SPDX-License-Identifier: MIT */
/* check_transfer.c - clt_to, clt_copy_to, clt_move, clt_copy between every pair of devices. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_util.h"

/* A random tensor of dtype dt on dev (shape {3, 50}); its bytes in *bytes (malloc'ed). */
static clt_tensor *random_tensor(clt_dtype dt, clt_device *dev, cu_rng *r, int ndim,
                                 const int64_t *shape, void **bytes) {
  int64_t n = cu_numel(ndim, shape);
  void *buf = cu_malloc((size_t)n * clt_dtype_size(dt));
  cu_fill(buf, dt, n, r, -1000, 1000, 0);
  clt_tensor *t = cu_tensor(buf, dt, ndim, shape, dev);
  *bytes = buf;
  return t;
}

static void assert_bytes(const clt_tensor *t, const void *want, const char *what) {
  size_t nb = clt_tensor_nbytes(t);
  void *got = cu_read(t);
  ck_assert_msg(memcmp(got, want, nb) == 0, "%s: contents differ", what);
  free(got);
}

START_TEST(test_to) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {3, 50};
  cu_rng r;
  cu_rng_seed(&r, 101);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (int a = 0; a < ndev; a++) {
      for (int b = 0; b < ndev; b++) {
        if (!cu_dtype_ok("test_to", devs[a], (clt_dtype)dt) ||
            !cu_dtype_ok("test_to", devs[b], (clt_dtype)dt))
          continue;
        char what[96];
        snprintf(what, sizeof what, "clt_to %s %s -> %s", cu_dt_name((clt_dtype)dt),
                 cu_dev_name(devs[a]), cu_dev_name(devs[b]));
        void *want;
        clt_tensor *src = random_tensor((clt_dtype)dt, devs[a], &r, 2, shape, &want);
        clt_tensor *out = NULL;
        CU_OK(clt_to(src, devs[b], &out));
        if (a == b)
          ck_assert_msg(out == src, "%s: not the same handle", what);
        else
          ck_assert_msg(out != src, "%s: the same handle", what);
        cu_assert_meta(out, (clt_dtype)dt, devs[b], 2, shape, what);
        assert_bytes(out, want, what);
        clt_tensor_release(out);
        assert_bytes(src, want, what); /* src still valid (same device: one reference left) */
        clt_tensor_release(src);
        free(want);
      }
    }
  }
}
END_TEST

START_TEST(test_copy_to) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[1] = {777};
  cu_rng r;
  cu_rng_seed(&r, 202);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (int a = 0; a < ndev; a++) {
      for (int b = 0; b < ndev; b++) {
        if (!cu_dtype_ok("test_copy_to", devs[a], (clt_dtype)dt) ||
            !cu_dtype_ok("test_copy_to", devs[b], (clt_dtype)dt))
          continue;
        char what[96];
        snprintf(what, sizeof what, "clt_copy_to %s %s -> %s", cu_dt_name((clt_dtype)dt),
                 cu_dev_name(devs[a]), cu_dev_name(devs[b]));
        void *want, *other_bytes, *third_bytes;
        clt_tensor *src = random_tensor((clt_dtype)dt, devs[a], &r, 1, shape, &want);
        clt_tensor *other = random_tensor((clt_dtype)dt, devs[b], &r, 1, shape, &other_bytes);
        clt_tensor *third = random_tensor((clt_dtype)dt, devs[a], &r, 1, shape, &third_bytes);
        clt_tensor *out = NULL;
        CU_OK(clt_copy_to(src, devs[b], &out));
        ck_assert_msg(out != src, "%s: the same handle", what);
        cu_assert_meta(out, (clt_dtype)dt, devs[b], 1, shape, what);
        /* Overwrite the source right away (no synchronization): the copy must already have its
         * own contents. */
        CU_OK(clt_copy(src, third));
        assert_bytes(out, want, what);
        assert_bytes(src, third_bytes, what);
        /* Writing the copy leaves the source alone. */
        CU_OK(clt_copy(out, other));
        assert_bytes(out, other_bytes, what);
        assert_bytes(src, third_bytes, what);
        /* Host tensors: writing through the data pointer. */
        if (clt_device_is_host(devs[b])) {
          memset(clt_tensor_data(out), 0, clt_tensor_nbytes(out));
          assert_bytes(src, third_bytes, what);
        }
        if (clt_device_is_host(devs[a])) {
          clt_tensor *again = NULL;
          CU_OK(clt_copy_to(src, devs[b], &again));
          /* clt_tensor_data waits for the copy out of src before we write it. */
          memset(clt_tensor_data(src), 0, clt_tensor_nbytes(src));
          assert_bytes(again, third_bytes, what);
          clt_tensor_release(again);
        }
        clt_tensor_release(out);
        clt_tensor_release(src);
        clt_tensor_release(other);
        clt_tensor_release(third);
        free(want);
        free(other_bytes);
        free(third_bytes);
      }
    }
  }
}
END_TEST

START_TEST(test_move) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[3] = {2, 3, 5};
  cu_rng r;
  cu_rng_seed(&r, 303);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (int a = 0; a < ndev; a++) {
      for (int b = 0; b < ndev; b++) {
        if (!cu_dtype_ok("test_move", devs[a], (clt_dtype)dt) ||
            !cu_dtype_ok("test_move", devs[b], (clt_dtype)dt))
          continue;
        char what[96];
        snprintf(what, sizeof what, "clt_move %s %s -> %s", cu_dt_name((clt_dtype)dt),
                 cu_dev_name(devs[a]), cu_dev_name(devs[b]));
        void *want;
        clt_tensor *t = random_tensor((clt_dtype)dt, devs[a], &r, 3, shape, &want);
        clt_tensor *old = clt_tensor_retain(t); /* our own reference to the old handle */
        CU_OK(clt_move(&t, devs[b]));
        if (a == b)
          ck_assert_msg(t == old, "%s: handle replaced although already there", what);
        else
          ck_assert_msg(t != old, "%s: handle not replaced", what);
        cu_assert_meta(t, (clt_dtype)dt, devs[b], 3, shape, what);
        assert_bytes(t, want, what);
        /* The old handle is still valid through our reference. */
        cu_assert_meta(old, (clt_dtype)dt, devs[a], 3, shape, what);
        assert_bytes(old, want, what);
        clt_tensor_release(old);
        /* Failure leaves *t alone. */
        clt_tensor *keep = t;
        CU_FAILS(clt_move(&t, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_move");
        ck_assert_ptr_eq(t, keep);
        clt_tensor_release(t);
        free(want);
      }
    }
  }
  CU_FAILS(clt_move(NULL, clt_cpu()), CLT_ERR_INVALID_ARGUMENT, "clt_move");
  clt_tensor *null_t = NULL;
  CU_FAILS(clt_move(&null_t, clt_cpu()), CLT_ERR_INVALID_ARGUMENT, "clt_move");
  ck_assert_ptr_null(null_t);
}
END_TEST

START_TEST(test_copy) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t shape[2] = {17, 9}, other_shape[2] = {9, 17}, flat[1] = {153};
  cu_rng r;
  cu_rng_seed(&r, 404);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (int a = 0; a < ndev; a++) {
      for (int b = 0; b < ndev; b++) {
        if (!cu_dtype_ok("test_copy", devs[a], (clt_dtype)dt) ||
            !cu_dtype_ok("test_copy", devs[b], (clt_dtype)dt))
          continue;
        char what[96];
        snprintf(what, sizeof what, "clt_copy %s %s -> %s", cu_dt_name((clt_dtype)dt),
                 cu_dev_name(devs[a]), cu_dev_name(devs[b]));
        void *want;
        clt_tensor *src = random_tensor((clt_dtype)dt, devs[a], &r, 2, shape, &want);
        clt_tensor *dst = NULL;
        CU_OK(clt_zeros((clt_dtype)dt, 2, shape, devs[b], &dst));
        CU_OK(clt_copy(dst, src));
        cu_assert_meta(dst, (clt_dtype)dt, devs[b], 2, shape, what);
        assert_bytes(dst, want, what);
        assert_bytes(src, want, what);

        clt_tensor *bad = NULL;
        CU_OK(clt_zeros((clt_dtype)dt, 2, other_shape, devs[b], &bad));
        CU_FAILS(clt_copy(bad, src), CLT_ERR_SHAPE_MISMATCH, "clt_copy");
        clt_tensor_release(bad);
        CU_OK(clt_zeros((clt_dtype)dt, 1, flat, devs[b], &bad));
        CU_FAILS(clt_copy(bad, src), CLT_ERR_SHAPE_MISMATCH, "clt_copy");
        clt_tensor_release(bad);
        clt_dtype other = dt == CLT_F32 ? CLT_I32 : CLT_F32;
        CU_OK(clt_zeros(other, 2, shape, devs[b], &bad));
        /* another dtype: converted as clt_cast converts (on src's device) */
        clt_tensor *cast = NULL;
        CU_OK(clt_copy(bad, src));
        CU_OK(clt_cast(src, other, &cast));
        double *z = cu_read_double(bad), *zc = cu_read_double(cast);
        for (int i = 0; i < 153; i++)
          ck_assert_msg(z[i] == zc[i] || (z[i] != z[i] && zc[i] != zc[i]),
                        "%s: converted element %d is %g, clt_cast gives %g", what, i, z[i], zc[i]);
        free(z);
        free(zc);
        clt_tensor_release(cast);
        clt_tensor_release(bad);
        clt_tensor_release(dst);
        clt_tensor_release(src);
        free(want);
      }
    }
  }
  clt_tensor *t = NULL;
  CU_OK(clt_zeros(CLT_F32, 2, shape, clt_cpu(), &t));
  CU_FAILS(clt_copy(NULL, t), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
  CU_FAILS(clt_copy(t, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_copy");
  clt_tensor_release(t);
}
END_TEST

START_TEST(test_arg_errors) {
  int64_t shape[1] = {4};
  clt_tensor *t = NULL, *out = CU_SENTINEL;
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &t));
  CU_FAILS(clt_to(NULL, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT, "clt_to");
  CU_FAILS(clt_to(t, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_to");
  CU_FAILS(clt_to(t, clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_to");
  CU_FAILS(clt_copy_to(NULL, clt_cpu(), &out), CLT_ERR_INVALID_ARGUMENT, "clt_copy_to");
  CU_FAILS(clt_copy_to(t, NULL, &out), CLT_ERR_INVALID_ARGUMENT, "clt_copy_to");
  CU_FAILS(clt_copy_to(t, clt_cpu(), NULL), CLT_ERR_INVALID_ARGUMENT, "clt_copy_to");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  clt_tensor_release(t);
}
END_TEST

/* Zero-size and 0-d tensors travel too. */
START_TEST(test_small_shapes) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  int64_t empty[2] = {0, 3};
  for (int a = 0; a < ndev; a++) {
    for (int b = 0; b < ndev; b++) {
      char what[96];
      snprintf(what, sizeof what, "small shapes %s -> %s", cu_dev_name(devs[a]),
               cu_dev_name(devs[b]));
      clt_tensor *e = NULL, *out = NULL, *out2 = NULL;
      CU_OK(clt_zeros(CLT_I32, 2, empty, devs[a], &e));
      CU_OK(clt_to(e, devs[b], &out));
      cu_assert_meta(out, CLT_I32, devs[b], 2, empty, what);
      CU_OK(clt_copy_to(e, devs[b], &out2));
      cu_assert_meta(out2, CLT_I32, devs[b], 2, empty, what);
      CU_OK(clt_copy(out2, e));
      clt_tensor_release(out);
      clt_tensor_release(out2);
      clt_tensor_release(e);

      double x = -1.25;
      clt_tensor *s = cu_tensor(&x, CLT_F64, 0, NULL, devs[a]);
      CU_OK(clt_copy_to(s, devs[b], &out));
      cu_assert_meta(out, CLT_F64, devs[b], 0, NULL, what);
      double v = 0;
      CU_OK(clt_item(out, &v));
      ck_assert_msg(v == -1.25, "%s: 0-d copy gave %g", what, v);
      clt_tensor_release(out);
      clt_tensor_release(s);
    }
  }
}
END_TEST

/* A 4M-element f32 tensor whose element i is i (exact in f32). */
#define BIG_N (INT64_C(4) << 20)

static void assert_iota(const clt_tensor *t, const char *what) {
  ck_assert_msg(clt_tensor_numel(t) == BIG_N, "%s: numel %lld", what,
                (long long)clt_tensor_numel(t));
  float *v = cu_read(t);
  for (int64_t i = 0; i < BIG_N; i++)
    if (v[i] != (float)i)
      ck_abort_msg("%s: element %lld is %g", what, (long long)i, (double)v[i]);
  free(v);
}

START_TEST(test_release_in_flight) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  if (ndev < 2) {
    cu_skip("test_release_in_flight", "needs an OpenCL device");
    return;
  }
  for (int a = 0; a < ndev; a++) {
    for (int b = 0; b < ndev; b++) {
      if (a == b)
        continue;
      char what[96];
      clt_tensor *src = NULL, *out = NULL, *out2 = NULL;
      /* clt_to, then release the source at once. */
      CU_OK(clt_arange(0, (double)BIG_N, 1, CLT_F32, devs[a], &src));
      CU_OK(clt_to(src, devs[b], &out));
      clt_tensor_release(src);
      snprintf(what, sizeof what, "clt_to %s -> %s, source released", cu_dev_name(devs[a]),
               cu_dev_name(devs[b]));
      /* Some unrelated allocations that could reuse the freed buffer. */
      clt_tensor *junk[2];
      int64_t n[1] = {BIG_N};
      CU_OK(clt_full(CLT_F32, 1, n, -1.0, devs[a], &junk[0]));
      CU_OK(clt_full(CLT_F32, 1, n, -2.0, devs[b], &junk[1]));
      assert_iota(out, what);
      clt_tensor_release(out);

      /* clt_copy_to the same way. */
      CU_OK(clt_arange(0, (double)BIG_N, 1, CLT_F32, devs[a], &src));
      CU_OK(clt_copy_to(src, devs[b], &out2));
      clt_tensor_release(src);
      snprintf(what, sizeof what, "clt_copy_to %s -> %s, source released", cu_dev_name(devs[a]),
               cu_dev_name(devs[b]));
      assert_iota(out2, what);
      clt_tensor_release(out2);

      /* clt_move releases the old handle itself. */
      CU_OK(clt_arange(0, (double)BIG_N, 1, CLT_F32, devs[a], &src));
      CU_OK(clt_move(&src, devs[b]));
      snprintf(what, sizeof what, "clt_move %s -> %s", cu_dev_name(devs[a]), cu_dev_name(devs[b]));
      ck_assert_msg(clt_tensor_device(src) == devs[b], "%s: wrong device", what);
      assert_iota(src, what);
      clt_tensor_release(src);
      clt_tensor_release(junk[0]);
      clt_tensor_release(junk[1]);
    }
  }
}
END_TEST

/* Pinned memory allocated near one device, filled by it, copied to another and released at
 * once, while the first device goes on working: the copy's completion frees the pinned buffer
 * (and the first device's events on it) from whatever thread the second device's runtime calls
 * back on. With Oclgrind as cl:0 (the 60-gpu lane) that thread entering Oclgrind crashed or lost
 * a reference count; every round checks the copy and the work. */
START_TEST(test_pinned_release_in_flight) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = 0;
  for (int i = 0; i < clt_device_count() && ndev < CU_MAX_DEVICES; i++)
    if (cu_is_cl(clt_device_at(i))) /* pinned memory is OpenCL's */
      devs[ndev++] = clt_device_at(i);
  if (ndev < 2) {
    cu_skip("test_pinned_release_in_flight", "needs two OpenCL devices");
    return;
  }
  enum { N = 96, ROUNDS = 150 };
  int64_t n[1] = {N};
  for (int a = 0; a < ndev; a++)
    for (int b = 0; b < ndev; b++) {
      if (a == b)
        continue;
      clt_device *da = devs[a], *db = devs[b];
      clt_tensor *x = NULL, *busy = NULL;
      CU_OK(clt_arange(0, N, 1, CLT_F32, da, &x));
      CU_OK(clt_zeros(CLT_F32, 1, n, da, &busy));
      for (int round = 0; round < ROUNDS; round++) {
        clt_tensor *pin = NULL, *out = NULL, *sum = NULL;
        CU_OK(clt_empty_pinned(CLT_F32, 1, n, da, &pin));
        CU_OK(clt_copy(pin, x));      /* da writes it */
        CU_OK(clt_to(pin, db, &out)); /* db reads it */
        clt_tensor_release(pin);
        /* da works while db's copy may still be running */
        CU_OK(clt_add(busy, x, &sum));
        clt_tensor_release(busy);
        busy = sum;
        if (round % 50 == 49 || round == ROUNDS - 1) {
          float *v = cu_read(out);
          for (int i = 0; i < N; i++)
            ck_assert_msg(v[i] == (float)i,
                          "pinned near %s, copied to %s, round %d: element %d is %g",
                          cu_dev_name(da), cu_dev_name(db), round, i, (double)v[i]);
          free(v);
        }
        clt_tensor_release(out);
      }
      float *v = cu_read(busy);
      for (int i = 0; i < N; i++)
        ck_assert_msg(v[i] == (float)(ROUNDS * i), "%s's work next to the copies: element %d is %g",
                      cu_dev_name(da), i, (double)v[i]);
      free(v);
      clt_tensor_release(x);
      clt_tensor_release(busy);
    }
}
END_TEST

/* A copy out of a tensor is still reading it (on another queue) when the tensor is overwritten
 * from each device: the overwrite must wait for the read. */
START_TEST(test_write_after_read) {
  clt_device *devs[CU_MAX_DEVICES];
  int ndev = cu_devices(devs);
  if (ndev < 2) {
    cu_skip("test_write_after_read", "needs an OpenCL device");
    return;
  }
  int64_t n[1] = {BIG_N};
  for (int a = 0; a < ndev; a++) {
    for (int b = 0; b < ndev; b++) {
      if (a == b)
        continue;
      for (int w = 0; w < ndev; w++) {
        clt_tensor *src = NULL, *out = NULL, *other = NULL;
        CU_OK(clt_arange(0, (double)BIG_N, 1, CLT_F32, devs[a], &src));
        CU_OK(clt_full(CLT_F32, 1, n, -3.0, devs[w], &other));
        CU_OK(clt_device_synchronize(NULL));
        CU_OK(clt_copy_to(src, devs[b], &out)); /* reads src */
        CU_OK(clt_copy(src, other));            /* writes src right away */
        char what[128];
        snprintf(what, sizeof what, "copy %s -> %s, then src overwritten from %s",
                 cu_dev_name(devs[a]), cu_dev_name(devs[b]), cu_dev_name(devs[w]));
        assert_iota(out, what);
        float *v = cu_read(src);
        ck_assert_msg(v[0] == -3.0f && v[BIG_N - 1] == -3.0f, "%s: src is %g", what, (double)v[0]);
        free(v);
        clt_tensor_release(src);
        clt_tensor_release(out);
        clt_tensor_release(other);
      }
    }
  }
}
END_TEST

START_TEST(test_chain) {
  if (!cu_need_cl("test_chain", 2))
    return;
  clt_device *cl0 = clt_device_at(0), *cl1 = clt_device_at(1), *cpu = clt_cpu();
  clt_device *routes[2][4] = {{cpu, cl0, cl1, cpu}, {cpu, cl1, cl0, cpu}};
  int64_t shape[2] = {123, 457};
  cu_rng r;
  cu_rng_seed(&r, 505);
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (int k = 0; k < 2; k++) {
      void *want;
      clt_tensor *t = random_tensor((clt_dtype)dt, cpu, &r, 2, shape, &want);
      for (int hop = 1; hop < 4; hop++) {
        if (!cu_dtype_ok("test_chain", routes[k][hop], (clt_dtype)dt))
          break;
        clt_tensor *next = NULL;
        CU_OK(clt_to(t, routes[k][hop], &next));
        clt_tensor_release(t); /* no synchronization anywhere */
        t = next;
      }
      char what[96];
      snprintf(what, sizeof what, "chain %s cpu -> %s -> %s -> cpu", cu_dt_name((clt_dtype)dt),
               cu_dev_name(routes[k][1]), cu_dev_name(routes[k][2]));
      assert_bytes(t, want, what);
      clt_tensor_release(t);
      free(want);
    }
  }
}
END_TEST

START_TEST(test_cross_context) {
  if (!cu_forked) {
    cu_skip("test_cross_context", "needs a fresh process per test (CK_FORK=no)");
    return;
  }
  setenv("CLT_CONTEXT_PER_DEVICE", "1", 1); /* before the first clt call */
  if (!cu_need_cl("test_cross_context", 2))
    return;
  clt_device *cl0 = clt_device_at(0), *cl1 = clt_device_at(1), *cpu = clt_cpu();
  clt_device_info i0, i1;
  CU_OK(clt_device_info_get(cl0, &i0));
  CU_OK(clt_device_info_get(cl1, &i1));
  ck_assert_msg(i0.context_index != i1.context_index,
                "with CLT_CONTEXT_PER_DEVICE=1 cl:0 and cl:1 share context %d", i0.context_index);

  int64_t shape[2] = {31, 33};
  cu_rng r;
  cu_rng_seed(&r, 606);
  clt_device *pair[2][2] = {{cl0, cl1}, {cl1, cl0}};
  for (int dt = 0; dt < CLT_DTYPE_COUNT; dt++) {
    for (int k = 0; k < 2; k++) {
      clt_device *a = pair[k][0], *b = pair[k][1];
      if (!cu_dtype_ok("test_cross_context", a, (clt_dtype)dt) ||
          !cu_dtype_ok("test_cross_context", b, (clt_dtype)dt))
        continue;
      char what[96];
      snprintf(what, sizeof what, "cross-context %s %s -> %s", cu_dt_name((clt_dtype)dt),
               cu_dev_name(a), cu_dev_name(b));
      void *want;
      clt_tensor *src = random_tensor((clt_dtype)dt, a, &r, 2, shape, &want);
      clt_tensor *out = NULL, *out2 = NULL, *dst = NULL;
      CU_OK(clt_to(src, b, &out));
      cu_assert_meta(out, (clt_dtype)dt, b, 2, shape, what);
      CU_OK(clt_copy_to(src, b, &out2));
      CU_OK(clt_zeros((clt_dtype)dt, 2, shape, b, &dst));
      CU_OK(clt_copy(dst, src));
      clt_tensor_release(src);
      assert_bytes(out, want, what);
      assert_bytes(out2, want, what);
      assert_bytes(dst, want, what);
      /* And onwards to the host and back. */
      CU_OK(clt_move(&out, cpu));
      CU_OK(clt_move(&out, a));
      assert_bytes(out, want, what);
      clt_tensor_release(out);
      clt_tensor_release(out2);
      clt_tensor_release(dst);
      free(want);
    }
  }
  /* A large copy with the source released at once, both ways. */
  for (int k = 0; k < 2; k++) {
    clt_tensor *src = NULL, *out = NULL;
    CU_OK(clt_arange(0, (double)BIG_N, 1, CLT_F32, pair[k][0], &src));
    CU_OK(clt_to(src, pair[k][1], &out));
    clt_tensor_release(src);
    char what[96];
    snprintf(what, sizeof what, "cross-context 4M f32 %s -> %s, source released",
             cu_dev_name(pair[k][0]), cu_dev_name(pair[k][1]));
    assert_iota(out, what);
    clt_tensor_release(out);
  }
  /* Work on the destination device uses the copy. */
  clt_tensor *x = NULL, *y = NULL, *z = NULL;
  CU_OK(clt_arange(0, 1000, 1, CLT_F32, cl0, &x));
  CU_OK(clt_move(&x, cl1));
  CU_OK(clt_ones(CLT_F32, 1, (int64_t[]){1000}, cl1, &y));
  CU_OK(clt_add(x, y, &z));
  float *v = cu_read(z);
  for (int i = 0; i < 1000; i++)
    ck_assert_msg(v[i] == (float)(i + 1), "cross-context add: element %d is %g", i, (double)v[i]);
  free(v);
  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(z);
}
END_TEST

/* Transfer counters: each explicit copy counted once on the device side, printing counted as
 * implicit, no-ops not at all. */
START_TEST(test_transfer_counters) {
  if (!cu_need_cl("test_transfer_counters", 2))
    return;
  clt_device *cpu = clt_cpu(), *d0 = clt_device_at(0), *d1 = clt_device_at(1);
  CU_OK(clt_transfer_stats_reset(NULL));
  int64_t n = 1000;
  size_t bytes = 4000;
  clt_tensor *h, *a, *same, *b, *back, *s;
  CU_OK(clt_ones(CLT_F32, 1, &n, cpu, &h));
  CU_OK(clt_to(h, d0, &a));     /* h2d on cl:0 */
  CU_OK(clt_to(a, d0, &same));  /* no-op: not counted */
  CU_OK(clt_to(a, d1, &b));     /* d2d: out of cl:0, into cl:1 */
  CU_OK(clt_to(b, cpu, &back)); /* d2h on cl:1 */
  CU_OK(clt_sum(a, &s));
  double v;
  CU_OK(clt_item(s, &v)); /* d2h of 4 bytes on cl:0 */
  char buf[256];
  CU_OK(clt_format(s, buf, sizeof buf, NULL)); /* implicit, 4 bytes on cl:0 */
  clt_transfer_stats x0, x1, xh;
  CU_OK(clt_transfer_stats_get(d0, &x0));
  CU_OK(clt_transfer_stats_get(d1, &x1));
  CU_OK(clt_transfer_stats_get(cpu, &xh));
  ck_assert_msg(x0.h2d_count == 1 && x0.h2d_bytes == bytes, "cl:0 h2d %llu/%llu",
                (unsigned long long)x0.h2d_count, (unsigned long long)x0.h2d_bytes);
  ck_assert(x0.d2d_out_count == 1 && x0.d2d_out_bytes == bytes);
  ck_assert(x1.d2d_in_count == 1 && x1.d2d_in_bytes == bytes);
  ck_assert(x1.d2h_count == 1 && x1.d2h_bytes == bytes);
  ck_assert_msg(x0.d2h_count == 1 && x0.d2h_bytes == 4, "cl:0 d2h %llu/%llu",
                (unsigned long long)x0.d2h_count, (unsigned long long)x0.d2h_bytes);
  ck_assert(x0.implicit_count == 1 && x0.implicit_bytes == 4);
  ck_assert(x1.h2d_count == 0 && x1.implicit_count == 0);
  ck_assert(xh.h2d_count == 0 && xh.d2h_count == 0);
  clt_tensor *fh;
  float vals[3] = {1, 2, 3};
  CU_OK(clt_from_host(vals, CLT_F32, 1, (int64_t[]){3}, d1, &fh));
  CU_OK(clt_transfer_stats_get(d1, &x1));
  ck_assert(x1.h2d_count == 1 && x1.h2d_bytes == 12);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  CU_OK(clt_transfer_stats_print(f));
  fclose(f);
  ck_assert_msg(strstr(text, "cl:0: host->device 1 (4000 B)") != NULL, "%s", text);
  free(text);
  CU_OK(clt_transfer_stats_reset(d0));
  CU_OK(clt_transfer_stats_get(d0, &x0));
  ck_assert(x0.h2d_count == 0 && x0.implicit_count == 0);
  CU_OK(clt_transfer_stats_get(d1, &x1));
  ck_assert(x1.h2d_count == 1); /* only cl:0 was reset */
  clt_tensor *ts[] = {h, a, same, b, back, s, fh};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
    clt_tensor_release(ts[i]);
}
END_TEST

/* The guard refuses (or logs) printing's implicit copy; explicit copies are never affected. */
START_TEST(test_transfer_guard) {
  if (!cu_forked) {
    cu_skip("test_transfer_guard", "needs CK_FORK (sets CLT_TRANSFER_GUARD)");
    return;
  }
  setenv("CLT_TRANSFER_GUARD", "disallow", 1);
  ck_assert_int_eq(clt_transfer_guard_get(), CLT_GUARD_DISALLOW);
  if (!cu_need_cl("test_transfer_guard", 1))
    return;
  int64_t n = 3;
  clt_tensor *d, *h;
  CU_OK(clt_ones(CLT_F32, 1, &n, clt_device_at(0), &d));
  char buf[128] = "untouched";
  size_t len = 77;
  CU_FAILS(clt_format(d, buf, sizeof buf, &len), CLT_ERR_TRANSFER_GUARD, "clt_format");
  ck_assert_msg(strstr(clt_last_error(), "cl:0") && strstr(clt_last_error(), "clt_to"), "%s",
                clt_last_error());
  ck_assert_int_eq(len, 77);
  CU_OK(clt_to(d, clt_cpu(), &h)); /* explicit: allowed */
  CU_OK(clt_format(h, buf, sizeof buf, NULL));
  ck_assert_str_eq(buf, "tensor([1., 1., 1.])");
  ck_assert_int_eq(clt_transfer_guard_set(CLT_GUARD_ALLOW), CLT_GUARD_DISALLOW);
  CU_OK(clt_format(d, buf, sizeof buf, NULL));
  ck_assert_str_eq(buf, "tensor([1., 1., 1.], device='cl:0')");
  ck_assert_int_eq(clt_transfer_guard_set((clt_transfer_guard)9), -1);
  ck_assert_int_eq(clt_last_status(), CLT_ERR_INVALID_ARGUMENT);
  ck_assert_int_eq(clt_transfer_guard_get(), CLT_GUARD_ALLOW);
  clt_tensor_release(d);
  clt_tensor_release(h);
}
END_TEST

Suite *transfer_suite(void) {
  Suite *s = suite_create("transfer");
  TCase *tc = cu_tcase("matrix");
  tcase_add_test(tc, test_to);
  tcase_add_test(tc, test_copy_to);
  tcase_add_test(tc, test_move);
  tcase_add_test(tc, test_copy);
  tcase_add_test(tc, test_arg_errors);
  tcase_add_test(tc, test_small_shapes);
  suite_add_tcase(s, tc);
  tc = cu_tcase("async");
  tcase_add_test(tc, test_release_in_flight);
  tcase_add_test(tc, test_pinned_release_in_flight);
  tcase_add_test(tc, test_write_after_read);
  tcase_add_test(tc, test_chain);
  tcase_add_test(tc, test_cross_context);
  suite_add_tcase(s, tc);
  tc = cu_tcase("accounting");
  tcase_add_test(tc, test_transfer_counters);
  tcase_add_test(tc, test_transfer_guard);
  suite_add_tcase(s, tc);
  return s;
}
