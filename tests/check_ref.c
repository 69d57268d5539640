/* SPDX-License-Identifier: MIT */
/* check_ref.c - the reference backend (lib/ref/): off unless CLT_REF_DEVICES asks for it, named
 * ref:N after every OpenCL device, not host memory, mixed with other devices only through
 * clt_to, and computing what the host computes, bit for bit. Every other suite runs on ref:0 too
 * when CLT_REF_DEVICES=1 is set (.ci/run does it); this one sets the variable itself, in each
 * test's own process, before the registry is read. */
#define _POSIX_C_SOURCE 200809L

#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_util.h"
#ifdef HAVE_DLPACK
#include "clt_dlpack.h"
#endif

/* Sets CLT_REF_DEVICES=value (NULL: unsets it) for this test's process; 0 (and a SKIP line)
 * where tests share one process, whose registry was read already. */
static int ref_env(const char *test, const char *value) {
  if (!cu_forked) {
    cu_skip(test, "needs a fresh process per test (CK_FORK=no): CLT_REF_DEVICES is read once");
    return 0;
  }
  if (value)
    setenv("CLT_REF_DEVICES", value, 1);
  else
    unsetenv("CLT_REF_DEVICES");
  return 1;
}

static clt_device *ref_dev(int i) {
  char name[16];
  snprintf(name, sizeof name, "ref:%d", i);
  clt_device *d = NULL;
  CU_OK(clt_device_get(name, &d));
  return d;
}

/* Off by default: no ref device, and the registry is the OpenCL devices alone. */
START_TEST(test_ref_off) {
  if (!ref_env("test_ref_off", NULL))
    return;
  clt_device *d = CU_SENTINEL;
  CU_FAILS(clt_device_get("ref:0", &d), CLT_ERR_DEVICE_NOT_FOUND, "clt_device_get");
  ck_assert_ptr_eq(d, CU_SENTINEL);
  ck_assert_int_eq(cu_cl_count(), clt_device_count());
}
END_TEST

/* A value that is not a count lists none, as 0 does, with a warning on stderr that says what
 * to set. */
START_TEST(test_ref_bad_env) {
  if (!ref_env("test_ref_bad_env", "lots"))
    return;
  cu_stderr cap;
  cu_stderr_begin(&cap);
  int count = clt_device_count(); /* the registry is read here */
  char text[1024] = "";
  cu_stderr_end(&cap, text, sizeof text);
  ck_assert_int_eq(cu_cl_count(), count);
  ck_assert_msg(strstr(text, "CLT_REF_DEVICES='lots'") && strstr(text, "set it to 1 for ref:0"),
                "no warning naming CLT_REF_DEVICES='lots' and the fix on stderr (got \"%s\")",
                text);
}
END_TEST

/* CLT_REF_DEVICES=2: ref:0 and ref:1 after every OpenCL device (whose cl:N keep their
 * indices), not the host, not a GPU, never the default, one context of their own. */
START_TEST(test_ref_devices) {
  if (!ref_env("test_ref_devices", "2"))
    return;
  int ncl = cu_cl_count();
  ck_assert_int_eq(clt_device_count(), ncl + 2);
  for (int i = 0; i < ncl; i++) {
    char want[16];
    snprintf(want, sizeof want, "cl:%d", i);
    ck_assert_str_eq(clt_device_name(clt_device_at(i)), want);
  }
  clt_device *r0 = ref_dev(0), *r1 = ref_dev(1);
  ck_assert_ptr_eq(clt_device_at(ncl), r0);
  ck_assert_ptr_eq(clt_device_at(ncl + 1), r1);
  ck_assert_ptr_ne(clt_device_default(), r0);
  ck_assert_ptr_ne(clt_device_default(), r1);
  clt_device_info i0, i1;
  CU_OK(clt_device_info_get(r0, &i0));
  CU_OK(clt_device_info_get(r1, &i1));
  ck_assert_str_eq(i0.name, "ref:0");
  ck_assert_int_eq(i0.kind, CLT_DEVICE_CL_OTHER);
  ck_assert_str_eq(i0.kind_name, "other");
  ck_assert_int_eq(clt_device_is_host(r0), 0);
  ck_assert_int_eq(clt_device_is_gpu(r0), 0);
  ck_assert_int_eq(i0.fp64, 1);
  ck_assert_msg(i0.memory_bytes > 0 && i0.max_alloc_bytes > 0 &&
                    i0.max_alloc_bytes <= i0.memory_bytes,
                "ref:0 memory %llu, max alloc %llu", (unsigned long long)i0.memory_bytes,
                (unsigned long long)i0.max_alloc_bytes);
  ck_assert_msg(strlen(clt_device_description(r0)) > 0, "ref:0 has no description");
  ck_assert_int_eq(i0.platform_index, -1);
  /* equal context_index means direct copies: the two ref devices, and no OpenCL device */
  ck_assert_int_eq(i0.context_index, i1.context_index);
  ck_assert_int_ge(i0.context_index, 0);
  for (int i = 0; i < ncl; i++) {
    clt_device_info c;
    CU_OK(clt_device_info_get(clt_device_at(i), &c));
    ck_assert_msg(c.context_index != i0.context_index, "cl:%d and ref:0 share context_index %d", i,
                  c.context_index);
  }
  CU_OK(clt_device_synchronize(r0));
  CU_OK(clt_device_synchronize(NULL));
}
END_TEST

/* Same device or a loud error, naming both devices, with ref:0 against cpu and against cl:0. */
START_TEST(test_ref_mismatch) {
  if (!ref_env("test_ref_mismatch", "1"))
    return;
  clt_device *r = ref_dev(0);
  int64_t shape[1] = {5};
  clt_tensor *a, *h, *out = CU_SENTINEL;
  CU_OK(clt_ones(CLT_F32, 1, shape, r, &a));
  CU_OK(clt_ones(CLT_F32, 1, shape, clt_cpu(), &h));
  CU_FAILS(clt_add(a, h, &out), CLT_ERR_DEVICE_MISMATCH, "clt_add");
  ck_assert_str_eq(clt_last_error(),
                   "clt_add: expected all tensors on the same device, but found ref:0 (argument "
                   "1) and cpu (argument 2); copy one with clt_to()");
  ck_assert_ptr_eq(out, CU_SENTINEL);
  if (cu_cl_count() > 0) {
    clt_tensor *c;
    CU_OK(clt_ones(CLT_F32, 1, shape, clt_device_at(0), &c));
    CU_FAILS(clt_mul(c, a, &out), CLT_ERR_DEVICE_MISMATCH, "clt_mul");
    ck_assert_str_eq(clt_last_error(),
                     "clt_mul: expected all tensors on the same device, but found cl:0 (argument "
                     "1) and ref:0 (argument 2); copy one with clt_to()");
    CU_FAILS(clt_matmul(a, c, &out), CLT_ERR_DEVICE_MISMATCH, "clt_matmul");
    ck_assert_ptr_eq(out, CU_SENTINEL);
    clt_tensor_release(c);
  }
  clt_tensor_release(a);
  clt_tensor_release(h);
}
END_TEST

/* Its memory is not the host's: clt_tensor_data refuses it, and so do the OpenCL handles and
 * DLPack, each naming the fix. */
START_TEST(test_ref_not_host) {
  if (!ref_env("test_ref_not_host", "1"))
    return;
  int64_t shape[1] = {4};
  clt_tensor *t;
  CU_OK(clt_ones(CLT_F32, 1, shape, ref_dev(0), &t));
  clt_clear_error();
  ck_assert_ptr_null(clt_tensor_data(t));
  ck_assert_int_eq(clt_last_status(), CLT_ERR_NOT_ON_HOST);
  ck_assert_msg(strstr(clt_last_error(), "tensor is on ref:0; copy it to cpu first with "
                                         "clt_to(t, clt_cpu(), &host)") != NULL,
                "%s", clt_last_error());
  ck_assert_int_eq(clt_device_cl(ref_dev(0), NULL, NULL, NULL, NULL), CLT_ERR_UNSUPPORTED);
  ck_assert_int_eq(clt_tensor_cl_mem(t, &(struct _cl_mem *){NULL}, NULL), CLT_ERR_UNSUPPORTED);
  clt_tensor *p = CU_SENTINEL;
  CU_OK(clt_empty_pinned(CLT_F32, 1, shape, ref_dev(0), &p)); /* plain memory near ref:0 */
  ck_assert_int_eq(clt_tensor_is_pinned(p), 1);
  ck_assert_ptr_nonnull(clt_tensor_data(p));
  clt_tensor_release(p);
#ifdef HAVE_DLPACK
  DLManagedTensor *m = CU_SENTINEL;
  CU_FAILS(clt_to_dlpack(t, &m), CLT_ERR_UNSUPPORTED, "clt_to_dlpack");
  ck_assert_ptr_eq(m, CU_SENTINEL);
  ck_assert_msg(strstr(clt_last_error(), "ref:0") && strstr(clt_last_error(), "clt_to(t, "), "%s",
                clt_last_error());
#endif
  clt_tensor_release(t);
}
END_TEST

static void assert_same_bytes(const clt_tensor *t, const void *want, size_t n, const char *what) {
  void *got = cu_read(t);
  ck_assert_msg(memcmp(got, want, n) == 0, "%s: the bytes differ", what);
  free(got);
}

/* clt_to between cpu, ref:0, ref:1 and the OpenCL devices gives the same bytes back, through
 * every pair (direct within the reference backend, staged through host memory with OpenCL),
 * from views too; clt_copy into an existing tensor across backends; the counters count. */
START_TEST(test_ref_round_trip) {
  if (!ref_env("test_ref_round_trip", "2"))
    return;
  enum { N = 1003 };
  int64_t shape[1] = {N};
  double v[N];
  cu_rng r;
  cu_rng_seed(&r, 17);
  cu_fill(v, CLT_F64, N, &r, -1e6, 1e6, 0);
  clt_device *path[CU_MAX_DEVICES + 2];
  int np = 0;
  path[np++] = ref_dev(0);
  path[np++] = ref_dev(1);
  for (int i = 0; i < cu_cl_count() && np < CU_MAX_DEVICES; i++) {
    path[np++] = clt_device_at(i);
    path[np++] = ref_dev(i % 2); /* OpenCL to ref and back again */
  }
  path[np++] = clt_cpu();
  CU_OK(clt_transfer_stats_reset(NULL));
  clt_tensor *t = cu_tensor(v, CLT_F64, 1, shape, clt_cpu());
  for (int k = 0; k < np; k++) {
    clt_tensor *u = NULL;
    CU_OK(clt_to(t, path[k], &u));
    ck_assert_ptr_eq(clt_tensor_device(u), path[k]);
    char what[64];
    snprintf(what, sizeof what, "step %d, on %s", k, cu_dev_name(path[k]));
    assert_same_bytes(u, v, sizeof v, what);
    clt_tensor_release(t);
    t = u;
  }
  clt_transfer_stats st;
  CU_OK(clt_transfer_stats_get(ref_dev(0), &st));
  ck_assert_msg(st.h2d_count >= 1 && st.d2d_out_count >= 1,
                "ref:0 counters: h2d %llu, d2d out %llu", (unsigned long long)st.h2d_count,
                (unsigned long long)st.d2d_out_count);

  /* a transposed view on ref:0 to every device; clt_copy from it into a tensor elsewhere */
  int64_t sh2[2] = {17, 59}; /* 1003 elements */
  clt_tensor *m = NULL, *tr = NULL, *want = NULL, *h = NULL;
  CU_OK(clt_reshape(t, 2, sh2, &m));
  CU_OK(clt_to(m, ref_dev(0), &h));
  CU_OK(clt_transpose(h, 0, 1, &tr));
  CU_OK(clt_transpose(m, 0, 1, &want));
  double *wv = cu_read(want);
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int i = 0; i < nd; i++) {
    clt_tensor *u = NULL, *dst = NULL;
    CU_OK(clt_to(tr, devs[i], &u));
    assert_same_bytes(u, wv, sizeof v, cu_dev_name(devs[i]));
    CU_OK(clt_zeros(CLT_F64, 2, clt_tensor_shape(tr), devs[i], &dst));
    CU_OK(clt_copy(dst, tr));
    assert_same_bytes(dst, wv, sizeof v, cu_dev_name(devs[i]));
    clt_tensor_release(u);
    clt_tensor_release(dst);
  }
  free(wv);
  clt_tensor_release(want);
  clt_tensor_release(tr);
  clt_tensor_release(h);
  clt_tensor_release(m);
  clt_tensor_release(t);
}
END_TEST

/* Compares a result on ref:0 with the same call's on cpu, byte for byte. */
static void same(clt_tensor *on_ref, clt_tensor *on_cpu, const char *what) {
  ck_assert_int_eq(clt_tensor_dtype(on_ref), clt_tensor_dtype(on_cpu));
  ck_assert_int_eq(clt_tensor_numel(on_ref), clt_tensor_numel(on_cpu));
  void *a = cu_read(on_ref), *b = cu_read(on_cpu);
  ck_assert_msg(memcmp(a, b, clt_tensor_nbytes(on_cpu)) == 0, "%s: ref:0 differs from cpu", what);
  free(a);
  free(b);
  clt_tensor_release(on_ref);
  clt_tensor_release(on_cpu);
}

/* Runs call on the ref:0 operands and on the cpu ones and compares. */
#define SAME(what, call_ref, call_cpu)                                                             \
  do {                                                                                             \
    clt_tensor *r_ = NULL, *c_ = NULL;                                                             \
    CU_OK(call_ref);                                                                               \
    CU_OK(call_cpu);                                                                               \
    ck_assert_ptr_eq(clt_tensor_device(r_), rd);                                                   \
    same(r_, c_, what);                                                                            \
  } while (0)

/* Every kind of operation on ref:0, on random data with NaN-free but non-trivial values
 * (negative, fractional, large), matches the host bit for bit: it is the host's code, reached
 * through the backend table and the reference device's memory. Lazy mode on: ref:0 has no fused
 * member, so its ops run at once. */
START_TEST(test_ref_matches_host) {
  if (!ref_env("test_ref_matches_host", "1"))
    return;
  clt_device *rd = ref_dev(0);
  clt_set_lazy(1);
  const clt_dtype dts[] = {CLT_F32, CLT_F64, CLT_I32, CLT_F16};
  enum { R = 37, C = 53 };
  int64_t shape[2] = {R, C}, col[2] = {R, 1}, sq[2] = {C, R};
  for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
    clt_dtype dt = dts[k];
    size_t es = clt_dtype_size(dt);
    void *av = cu_malloc(R * C * es), *bv = cu_malloc(R * C * es), *cv = cu_malloc(R * es);
    cu_rng r;
    cu_rng_seed(&r, 100 + k);
    cu_fill(av, dt, R * C, &r, -50, 50, 0);
    cu_fill(bv, dt, R * C, &r, 0.25, 9, CU_NONZERO);
    cu_fill(cv, dt, R, &r, -3, 3, 0);
    clt_tensor *ah = cu_tensor(av, dt, 2, shape, clt_cpu()),
               *bh = cu_tensor(bv, dt, 2, shape, clt_cpu());
    clt_tensor *ch = cu_tensor(cv, dt, 2, col, clt_cpu());
    clt_tensor *a, *b, *c;
    CU_OK(clt_to(ah, rd, &a));
    CU_OK(clt_to(bh, rd, &b));
    CU_OK(clt_to(ch, rd, &c));
    char what[64];
#define W(s) (snprintf(what, sizeof what, "%s %s", s, cu_dt_name(dt)), what)
    SAME(W("add"), clt_add(a, b, &r_), clt_add(ah, bh, &c_));
    SAME(W("mul broadcast"), clt_mul(a, c, &r_), clt_mul(ah, ch, &c_));
    SAME(W("div"), clt_div(a, b, &r_), clt_div(ah, bh, &c_));
    SAME(W("sub_scalar"), clt_sub_scalar(a, 2.5, &r_), clt_sub_scalar(ah, 2.5, &c_));
    SAME(W("exp"), clt_exp(b, &r_), clt_exp(bh, &c_));
    SAME(W("sqrt"), clt_sqrt(b, &r_), clt_sqrt(bh, &c_));
    SAME(W("sum"), clt_sum(a, &r_), clt_sum(ah, &c_));
    SAME(W("sum_dim"), clt_sum_dim(a, 1, 0, &r_), clt_sum_dim(ah, 1, 0, &c_));
    if (dt != CLT_I32) /* mean takes floats */
      SAME(W("mean_dim"), clt_mean_dim(b, 0, 1, &r_), clt_mean_dim(bh, 0, 1, &c_));
    SAME(W("max_dim"), clt_max_dim(a, 1, 0, &r_), clt_max_dim(ah, 1, 0, &c_));
    SAME(W("argmax_dim"), clt_argmax_dim(a, 0, 0, &r_), clt_argmax_dim(ah, 0, 0, &c_));
    SAME(W("cast"), clt_cast(a, CLT_I64, &r_), clt_cast(ah, CLT_I64, &c_));
    /* views: a transpose made contiguous, and an op on a narrowed, strided operand */
    clt_tensor *at, *aht, *an, *ahn;
    CU_OK(clt_transpose(a, 0, 1, &at));
    CU_OK(clt_transpose(ah, 0, 1, &aht));
    CU_OK(clt_narrow(at, 0, 3, 20, &an));
    CU_OK(clt_narrow(aht, 0, 3, 20, &ahn));
    SAME(W("contiguous"), clt_contiguous(at, &r_), clt_contiguous(aht, &c_));
    SAME(W("abs of a view"), clt_abs(an, &r_), clt_abs(ahn, &c_));
    SAME(W("sum of a view"), clt_sum_dim(an, 1, 0, &r_), clt_sum_dim(ahn, 1, 0, &c_));
    if (dt != CLT_I32) { /* matmul takes floats */
      clt_tensor *bt, *bht;
      CU_OK(clt_reshape(b, 2, sq, &bt));
      CU_OK(clt_reshape(bh, 2, sq, &bht));
      SAME(W("matmul"), clt_matmul(a, bt, &r_), clt_matmul(ah, bht, &c_));
      SAME(W("matmul of a transpose"), clt_matmul(at, a, &r_), clt_matmul(aht, ah, &c_));
      clt_tensor_release(bt);
      clt_tensor_release(bht);
    }
    int64_t idx[5] = {36, 0, 5, 5, 17}, n5 = 5;
    clt_tensor *ih = cu_tensor(idx, CLT_I64, 1, &n5, clt_cpu()), *ir;
    CU_OK(clt_to(ih, rd, &ir));
    SAME(W("index_select"), clt_index_select(a, 0, ir, &r_), clt_index_select(ah, 0, ih, &c_));
    clt_tensor_release(ir);
    clt_tensor_release(ih);
#undef W
    clt_tensor_release(an);
    clt_tensor_release(ahn);
    clt_tensor_release(at);
    clt_tensor_release(aht);
    clt_tensor_release(a);
    clt_tensor_release(b);
    clt_tensor_release(c);
    clt_tensor_release(ah);
    clt_tensor_release(bh);
    clt_tensor_release(ch);
    free(av);
    free(bv);
    free(cv);
  }
  /* the same seed, the same bits */
  SAME("rand", (clt_manual_seed(9), clt_rand(CLT_F32, 2, shape, rd, &r_)),
       (clt_manual_seed(9), clt_rand(CLT_F32, 2, shape, clt_cpu(), &c_)));
  SAME("randn", (clt_manual_seed(9), clt_randn(CLT_F64, 2, shape, rd, &r_)),
       (clt_manual_seed(9), clt_randn(CLT_F64, 2, shape, clt_cpu(), &c_)));
  clt_set_lazy(0);
}
END_TEST

/* Timing events and timers on ref:0: the work before an event is done when it is recorded. */
START_TEST(test_ref_events) {
  if (!ref_env("test_ref_events", "1"))
    return;
  clt_device *rd = ref_dev(0);
  clt_event *e0, *e1;
  int64_t shape[1] = {100000};
  clt_tensor *t;
  CU_OK(clt_event_record(rd, &e0));
  CU_OK(clt_ones(CLT_F32, 1, shape, rd, &t));
  CU_OK(clt_event_record(rd, &e1));
  CU_OK(clt_event_wait(e1));
  double ms = -1;
  CU_OK(clt_event_elapsed_ms(e0, e1, &ms));
  ck_assert_msg(ms >= 0, "elapsed %g ms", ms);
  clt_event_release(e0);
  clt_event_release(e1);
  clt_tensor_release(t);
}
END_TEST

Suite *ref_suite(void) {
  Suite *s = suite_create("ref");
  TCase *tc = cu_tcase("ref");
  tcase_add_test(tc, test_ref_off);
  tcase_add_test(tc, test_ref_bad_env);
  tcase_add_test(tc, test_ref_devices);
  tcase_add_test(tc, test_ref_mismatch);
  tcase_add_test(tc, test_ref_not_host);
  tcase_add_test(tc, test_ref_round_trip);
  tcase_add_test(tc, test_ref_matches_host);
  tcase_add_test(tc, test_ref_events);
  suite_add_tcase(s, tc);
  return s;
}
