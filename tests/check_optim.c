/* SPDX-License-Identifier: MIT */
/* check_optim.c - optimizers (lib/optim.c, lib/io/optim.c, issue 26): SGD and AdamW steps
 * against the formulas computed here in f64, on every device, f32 and f64 (f16 and bf16 more
 * loosely), with and without momentum and weight decay, parameters without a gradient skipped;
 * the state moving with clt_params_to; the state saved and loaded; bad input; and a linear
 * regression trained with clt_backward and SGD. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../examples/linear_data.h"
#include "check_util.h"

Suite *optim_suite(void); /* registered in check_main.c */

#define N 7
#define STEPS 3

/* The gradient of step k (nonzero, signs mixed). */
static double grad_value(int k, int i) { return 0.3 * sin(1.0 + i + 2.5 * k) + 0.05 * (i - 3); }
static double init_value(int i) { return 0.5 - 0.17 * i; }

/* A parameter of N elements of dtype dt on dev, leaf requiring grad, from init_value. */
static clt_tensor *make_param(clt_device *dev, clt_dtype dt) {
  double v[N];
  for (int i = 0; i < N; i++)
    v[i] = init_value(i);
  int64_t shape[1] = {N};
  clt_tensor *h, *t;
  h = cu_tensor(v, CLT_F64, 1, shape, clt_cpu());
  CU_OK(clt_cast(h, dt, &t));
  clt_tensor_release(h);
  CU_OK(clt_move(&t, dev));
  CU_OK(clt_requires_grad_(t, 1));
  return t;
}

/* Gives p (on its device) the gradient of step k through a backward: sum(p * c). */
static void give_grad(clt_tensor *p, int k) {
  double c[N];
  for (int i = 0; i < N; i++)
    c[i] = grad_value(k, i);
  int64_t shape[1] = {N};
  clt_tensor *h = cu_tensor(c, CLT_F64, 1, shape, clt_cpu()), *ct, *y, *l;
  CU_OK(clt_cast(h, clt_tensor_dtype(p), &ct));
  CU_OK(clt_move(&ct, clt_tensor_device(p)));
  CU_OK(clt_mul(p, ct, &y));
  CU_OK(clt_sum(y, &l));
  CU_OK(clt_backward(l, NULL));
  clt_tensor_release(h);
  clt_tensor_release(ct);
  clt_tensor_release(y);
  clt_tensor_release(l);
}

/* The gradient of step k as the tensor holds it (rounded to dt). */
static double grad_in(int k, int i, clt_dtype dt) {
  double g = grad_value(k, i);
  return dt == CLT_F32 ? (double)(float)g : dt == CLT_F64 ? g : cu_round_narrow(g, dt);
}

typedef struct hyper {
  bool adamw;
  double lr, momentum, wd, b1, b2, eps;
} hyper;

/* The reference: STEPS steps of the formulas of torch.optim.SGD / AdamW in f64 on p[N]. */
static void reference(const hyper *h, clt_dtype dt, int steps, double *p) {
  double buf[N], m[N] = {0}, v[N] = {0};
  for (int i = 0; i < N; i++)
    p[i] = dt == CLT_F32   ? (double)(float)init_value(i)
           : dt == CLT_F64 ? init_value(i)
                           : cu_round_narrow(init_value(i), dt);
  for (int k = 0; k < steps; k++) {
    int t = k + 1;
    for (int i = 0; i < N; i++) {
      double g = grad_in(k, i, dt);
      if (!h->adamw) {
        double d = g + h->wd * p[i];
        if (h->momentum != 0) {
          buf[i] = k == 0 ? d : h->momentum * buf[i] + d;
          d = buf[i];
        }
        p[i] -= h->lr * d;
      } else {
        p[i] *= 1 - h->lr * h->wd;
        m[i] = h->b1 * m[i] + (1 - h->b1) * g;
        v[i] = h->b2 * v[i] + (1 - h->b2) * g * g;
        double bc1 = 1 - pow(h->b1, t), bc2 = 1 - pow(h->b2, t);
        p[i] -= h->lr / bc1 * m[i] / (sqrt(v[i]) / sqrt(bc2) + h->eps);
      }
    }
  }
}

static clt_optim *make_opt(const hyper *h, clt_params *ps) {
  clt_optim *o = NULL;
  if (h->adamw)
    CU_OK(clt_optim_adamw(ps, h->lr, h->b1, h->b2, h->eps, h->wd, &o));
  else
    CU_OK(clt_optim_sgd(ps, h->lr, h->momentum, h->wd, &o));
  return o;
}

static void check_close(clt_tensor *t, const double *want, double tol, const char *what) {
  double *got = cu_read_double(t);
  for (int i = 0; i < N; i++)
    ck_assert_msg(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i])),
                  "%s: element %d is %.17g, expected %.17g", what, i, got[i], want[i]);
  free(got);
}

/* Runs STEPS steps of h on every device in dtype dt against the reference; a second parameter
 * without a gradient must stay as it was. */
static void run_values(const hyper *h, clt_dtype dt, double tol) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    clt_device *dev = devs[di];
    if (!cu_dtype_ok("optim values", dev, dt))
      continue;
    clt_params *ps;
    CU_OK(clt_params_create(&ps));
    clt_tensor *w = make_param(dev, dt), *frozen = make_param(dev, dt);
    CU_OK(clt_params_add(ps, "layer.weight", w));
    CU_OK(clt_params_add(ps, "frozen", frozen));
    clt_optim *o = make_opt(h, ps);
    clt_params_release(ps); /* the optimizer keeps the set */
    for (int k = 0; k < STEPS; k++) {
      CU_OK(clt_optim_zero_grad(o));
      ck_assert_ptr_null(clt_tensor_grad(w));
      give_grad(w, k);
      CU_OK(clt_optim_step(o));
    }
    double want[N], init[N];
    reference(h, dt, STEPS, want);
    reference(h, dt, 0, init);
    char what[160];
    snprintf(what, sizeof what, "%s lr %g mom %g wd %g, %s on %s", h->adamw ? "adamw" : "sgd",
             h->lr, h->momentum, h->wd, cu_dt_name(dt), cu_dev_name(dev));
    check_close(w, want, tol, what);
    check_close(frozen, init, 0, what); /* no gradient: skipped */
    ck_assert(clt_tensor_requires_grad(w));
    clt_optim_release(o);
    clt_tensor_release(w);
    clt_tensor_release(frozen);
  }
}

static const hyper sgd_cases[] = {
    {false, 0.1, 0, 0, 0, 0, 0},
    {false, 0.1, 0.9, 0, 0, 0, 0},
    {false, 0.05, 0, 0.1, 0, 0, 0},
    {false, 0.05, 0.8, 0.01, 0, 0, 0},
};
static const hyper adamw_cases[] = {
    {true, 0.01, 0, 0, 0.9, 0.999, 1e-8},
    {true, 0.02, 0, 0.1, 0.8, 0.99, 1e-6},
};

START_TEST(test_sgd_values) {
  for (size_t c = 0; c < sizeof sgd_cases / sizeof sgd_cases[0]; c++) {
    run_values(&sgd_cases[c], CLT_F64, 1e-13);
    run_values(&sgd_cases[c], CLT_F32, 2e-6);
  }
}
END_TEST

START_TEST(test_adamw_values) {
  for (size_t c = 0; c < sizeof adamw_cases / sizeof adamw_cases[0]; c++) {
    run_values(&adamw_cases[c], CLT_F64, 1e-12);
    run_values(&adamw_cases[c], CLT_F32, 2e-6);
  }
}
END_TEST

/* f16 and bf16 parameters compute in f32 and round on store: close to the f64 reference. */
START_TEST(test_half_values) {
  run_values(&sgd_cases[3], CLT_F16, 1e-2);
  run_values(&adamw_cases[1], CLT_F16, 1e-2);
  run_values(&sgd_cases[3], CLT_BF16, 3e-2);
  run_values(&adamw_cases[1], CLT_BF16, 3e-2);
}
END_TEST

/* A parameter that is a view at an offset (which device kernels do not take: the step is composed
 * from operations there) is updated in place, its neighbours untouched. */
START_TEST(test_view_param) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    clt_device *dev = devs[di];
    double v[N + 3];
    for (int i = 0; i < N + 3; i++)
      v[i] = i < 2 || i >= N + 2 ? 100.0 + i : init_value(i - 2);
    int64_t shape[1] = {N + 3};
    clt_tensor *h = cu_tensor(v, CLT_F64, 1, shape, clt_cpu());
    clt_tensor *big, *w;
    CU_OK(clt_cast(h, CLT_F32, &big));
    CU_OK(clt_move(&big, dev));
    CU_OK(clt_narrow(big, 0, 2, N, &w));
    CU_OK(clt_requires_grad_(w, 1));
    clt_params *ps;
    CU_OK(clt_params_create(&ps));
    CU_OK(clt_params_add(ps, "w", w));
    for (size_t c = 0; c < 2; c++) {
      const hyper *hp = c == 0 ? &sgd_cases[3] : &adamw_cases[1];
      /* fresh values for each optimizer */
      clt_tensor *init = make_param(dev, CLT_F32);
      int was = clt_set_grad_enabled(0);
      CU_OK(clt_copy(w, init));
      clt_set_grad_enabled(was);
      clt_tensor_release(init);
      clt_optim *o = make_opt(hp, ps);
      for (int k = 0; k < STEPS; k++) {
        CU_OK(clt_optim_zero_grad(o));
        give_grad(w, k);
        CU_OK(clt_optim_step(o));
      }
      double want[N];
      reference(hp, CLT_F32, STEPS, want);
      char what[96];
      snprintf(what, sizeof what, "%s on a view, on %s", hp->adamw ? "adamw" : "sgd",
               cu_dev_name(dev));
      check_close(w, want, 2e-6, what);
      double *all = cu_read_double(big);
      for (int i = 0; i < N + 3; i++)
        if (i < 2 || i >= N + 2)
          ck_assert_msg(all[i] == 100.0 + i, "%s: element %d of the base changed to %g", what, i,
                        all[i]);
      free(all);
      clt_optim_release(o);
    }
    clt_params_release(ps);
    clt_tensor_release(h);
    clt_tensor_release(big);
    clt_tensor_release(w);
  }
}
END_TEST

/* Steps on `from`, params_to `to`, more steps: the same numbers as all steps on `to`. */
static void moved_run(const hyper *h, clt_device *from, clt_device *to, double *out) {
  clt_params *ps;
  CU_OK(clt_params_create(&ps));
  clt_tensor *w = make_param(from, CLT_F64);
  CU_OK(clt_params_add(ps, "w", w));
  clt_tensor_release(w);
  clt_optim *o = make_opt(h, ps);
  for (int k = 0; k < 2 * STEPS; k++) {
    if (k == STEPS)
      CU_OK(clt_params_to(ps, to)); /* the state and the gradient go too */
    CU_OK(clt_optim_zero_grad(o));
    w = clt_params_get(ps, "w");
    ck_assert_ptr_eq(clt_tensor_device(w), k < STEPS ? from : to);
    give_grad(w, k % STEPS);
    CU_OK(clt_optim_step(o));
  }
  double *got = cu_read_double(clt_params_get(ps, "w"));
  memcpy(out, got, sizeof(double) * N);
  free(got);
  clt_optim_release(o);
  clt_params_release(ps);
}

START_TEST(test_params_to_moves_state) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const hyper *cases[] = {&sgd_cases[3], &adamw_cases[1]};
  for (size_t c = 0; c < 2; c++)
    for (int di = 0; di < nd; di++) {
      clt_device *to = devs[(di + 1) % nd];
      if (!cu_dtype_ok("params_to", devs[di], CLT_F64) || !cu_dtype_ok("params_to", to, CLT_F64))
        continue;
      double moved[N], stayed[N];
      moved_run(cases[c], devs[di], to, moved);
      moved_run(cases[c], to, to, stayed);
      for (int i = 0; i < N; i++)
        ck_assert_msg(fabs(moved[i] - stayed[i]) <= 1e-13,
                      "%s moved %s -> %s: element %d is %.17g, never moved %.17g",
                      cases[c]->adamw ? "adamw" : "sgd", cu_dev_name(devs[di]), cu_dev_name(to), i,
                      moved[i], stayed[i]);
    }
}
END_TEST

/* Two optimizers over one set, and a set released before its optimizer. */
START_TEST(test_two_optimizers) {
  clt_params *ps;
  CU_OK(clt_params_create(&ps));
  clt_tensor *w = make_param(clt_cpu(), CLT_F32);
  CU_OK(clt_params_add(ps, "w", w));
  clt_optim *a = make_opt(&sgd_cases[1], ps), *b = make_opt(&adamw_cases[0], ps);
  give_grad(w, 0);
  CU_OK(clt_optim_step(a));
  CU_OK(clt_optim_step(b));
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  CU_OK(clt_params_to(ps, devs[nd - 1]));
  clt_tensor_release(w);
  w = clt_params_get(ps, "w");
  ck_assert_ptr_nonnull(clt_tensor_grad(w));
  CU_OK(clt_optim_step(a));
  CU_OK(clt_optim_step(b));
  clt_optim_release(a);
  clt_params_release(ps);
  CU_OK(clt_optim_step(b)); /* b still holds the set */
  clt_optim_release(b);
}
END_TEST

static void tmp_path(char *buf, size_t size, const char *what) {
  snprintf(buf, size, "%s/clt-optim-%ld-%s.safetensors",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (long)getpid(), what);
}

/* Saved after STEPS steps and loaded into a fresh optimizer over a fresh copy of the
 * parameters, STEPS more steps give the same bits as the optimizer that never stopped. */
START_TEST(test_save_load) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  const hyper *cases[] = {&sgd_cases[3], &adamw_cases[1], &sgd_cases[0]};
  char ppath[512], opath[512];
  tmp_path(ppath, sizeof ppath, "params");
  tmp_path(opath, sizeof opath, "state");
  for (size_t c = 0; c < 3; c++)
    for (int di = 0; di < nd; di++) {
      clt_device *dev = devs[di];
      clt_params *ps;
      CU_OK(clt_params_create(&ps));
      clt_tensor *w = make_param(dev, CLT_F32);
      CU_OK(clt_params_add(ps, "w", w));
      clt_tensor_release(w);
      clt_optim *o = make_opt(cases[c], ps);
      for (int k = 0; k < STEPS; k++) {
        CU_OK(clt_optim_zero_grad(o));
        give_grad(clt_params_get(ps, "w"), k);
        CU_OK(clt_optim_step(o));
      }
      CU_OK(clt_save(ppath, ps));
      CU_OK(clt_optim_save(opath, o));
      clt_params *ps2;
      CU_OK(clt_load(ppath, NULL, &ps2));
      CU_OK(clt_requires_grad_(clt_params_get(ps2, "w"), 1));
      clt_optim *o2 = make_opt(cases[c], ps2);
      CU_OK(clt_optim_load(opath, o2, NULL));
      if (cases[c]->adamw) {
        clt_params *raw;
        CU_OK(clt_load(opath, clt_cpu(), &raw));
        ck_assert_ptr_nonnull(clt_params_get(raw, "w.exp_avg"));
        ck_assert_ptr_nonnull(clt_params_get(raw, "w.exp_avg_sq"));
        ck_assert_str_eq(clt_params_metadata(raw, "w.step"), "3");
        ck_assert_str_eq(clt_params_metadata(raw, "optimizer"), "adamw");
        clt_params_release(raw);
      }
      for (int k = 0; k < STEPS; k++) {
        clt_optim *os[2] = {o, o2};
        clt_params *pss[2] = {ps, ps2};
        for (int j = 0; j < 2; j++) {
          CU_OK(clt_optim_zero_grad(os[j]));
          give_grad(clt_params_get(pss[j], "w"), (k + 1) % STEPS);
          CU_OK(clt_optim_step(os[j]));
        }
      }
      float *a = cu_read(clt_params_get(ps, "w")), *b = cu_read(clt_params_get(ps2, "w"));
      ck_assert_msg(memcmp(a, b, sizeof(float) * N) == 0,
                    "case %zu on %s: the loaded optimizer went another way", c, cu_dev_name(dev));
      free(a);
      free(b);
      /* A file of the other kind, and state on another device than its parameter. */
      clt_optim *other =
          cases[c]->adamw ? make_opt(&sgd_cases[1], ps2) : make_opt(&adamw_cases[0], ps2);
      CU_FAILS(clt_optim_load(opath, other, NULL), CLT_ERR_FORMAT, "clt_optim_load");
      clt_optim_release(other);
      if (nd > 1 && cases[c] != &sgd_cases[0]) {
        clt_device *elsewhere = devs[(di + 1) % nd];
        CU_FAILS(clt_optim_load(opath, o2, elsewhere), CLT_ERR_DEVICE_MISMATCH, "clt_optim_load");
        ck_assert_msg(strstr(clt_last_error(), cu_dev_name(dev)) &&
                          strstr(clt_last_error(), cu_dev_name(elsewhere)),
                      "the message names both devices: %s", clt_last_error());
        CU_OK(clt_optim_step(o2)); /* unchanged by the failed load */
      }
      clt_optim_release(o);
      clt_optim_release(o2);
      clt_params_release(ps);
      clt_params_release(ps2);
    }
  unlink(ppath);
  unlink(opath);
}
END_TEST

START_TEST(test_bad_input) {
  clt_params *ps;
  CU_OK(clt_params_create(&ps));
  clt_optim *o = CU_SENTINEL;
  CU_FAILS(clt_optim_sgd(ps, 0.1, 0, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  ck_assert_msg(strstr(clt_last_error(), "empty"), "%s", clt_last_error());
  int64_t shape[1] = {3};
  clt_tensor *ti;
  CU_OK(clt_zeros(CLT_I32, 1, shape, clt_cpu(), &ti));
  CU_OK(clt_params_add(ps, "steps", ti));
  clt_tensor_release(ti);
  CU_FAILS(clt_optim_sgd(ps, 0.1, 0, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  ck_assert_msg(strstr(clt_last_error(), "'steps'") && strstr(clt_last_error(), "i32"), "%s",
                clt_last_error());
  CU_FAILS(clt_optim_adamw(ps, 0.1, 0.9, 0.99, 1e-8, 0, &o), CLT_ERR_INVALID_ARGUMENT,
           "clt_optim_adamw");
  clt_params_release(ps);
  CU_OK(clt_params_create(&ps));
  clt_tensor *w = make_param(clt_cpu(), CLT_F32);
  CU_OK(clt_params_add(ps, "w", w));
  struct {
    double lr, b1, b2, eps, wd;
    const char *arg;
  } bad[] = {
      {-1e-3, 0.9, 0.999, 1e-8, 0, "lr"},    {1e-3, -0.1, 0.999, 1e-8, 0, "beta1"},
      {1e-3, 1.0, 0.999, 1e-8, 0, "beta1"},  {1e-3, 0.9, 1.0, 1e-8, 0, "beta2"},
      {1e-3, 0.9, 0.999, 0, 0, "eps"},       {1e-3, 0.9, 0.999, -1e-8, 0, "eps"},
      {1e-3, 0.9, 0.999, NAN, 0, "eps"},     {1e-3, 0.9, 0.999, 1e-8, -0.1, "weight_decay"},
      {INFINITY, 0.9, 0.999, 1e-8, 0, "lr"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CU_FAILS(clt_optim_adamw(ps, bad[i].lr, bad[i].b1, bad[i].b2, bad[i].eps, bad[i].wd, &o),
             CLT_ERR_INVALID_ARGUMENT, "clt_optim_adamw");
    ck_assert_msg(strstr(clt_last_error(), bad[i].arg), "case %zu: %s", i, clt_last_error());
    ck_assert_ptr_eq(o, CU_SENTINEL);
  }
  CU_FAILS(clt_optim_sgd(ps, -0.1, 0, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  CU_FAILS(clt_optim_sgd(ps, 0.1, -0.5, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  CU_FAILS(clt_optim_sgd(ps, 0.1, 0, -0.5, &o), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  CU_FAILS(clt_optim_sgd(NULL, 0.1, 0, 0, &o), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  CU_FAILS(clt_optim_sgd(ps, 0.1, 0, 0, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_sgd");
  ck_assert_ptr_eq(o, CU_SENTINEL);
  CU_FAILS(clt_optim_step(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_step");
  CU_FAILS(clt_optim_zero_grad(NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_zero_grad");
  CU_FAILS(clt_optim_save(NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_save");
  CU_FAILS(clt_optim_load(NULL, NULL, NULL), CLT_ERR_INVALID_ARGUMENT, "clt_optim_load");
  /* A file that is no optimizer's state. */
  char path[512];
  tmp_path(path, sizeof path, "notstate");
  CU_OK(clt_save(path, ps));
  clt_optim *sgd = make_opt(&sgd_cases[1], ps);
  CU_FAILS(clt_optim_load(path, sgd, NULL), CLT_ERR_FORMAT, "clt_optim_load");
  CU_FAILS(clt_optim_load("/nonexistent/clt-optim.safetensors", sgd, NULL), CLT_ERR_IO,
           "clt_optim_load");
  unlink(path);
  clt_optim_release(sgd);
  clt_optim_release(NULL);
  clt_tensor_release(w);
  clt_params_release(ps);
}
END_TEST

/* y = x w^T + b (examples/linear_data.h: w = [2, -3.4], b = 4.2) fitted with clt_backward and SGD
 * on every device, as examples/train_linear does by hand. */
START_TEST(test_train_linear) {
  clt_device *devs[CU_MAX_DEVICES];
  int nd = cu_devices(devs);
  for (int di = 0; di < nd; di++) {
    clt_device *dev = devs[di];
    clt_tensor *xs[BATCHES], *ys[BATCHES];
    CU_OK(linear_data(xs, ys));
    int64_t sw[2] = {1, 2}, sb[1] = {1};
    clt_tensor *w, *b;
    CU_OK(clt_zeros(CLT_F32, 2, sw, clt_cpu(), &w));
    CU_OK(clt_zeros(CLT_F32, 1, sb, clt_cpu(), &b));
    CU_OK(clt_requires_grad_(w, 1));
    CU_OK(clt_requires_grad_(b, 1));
    clt_params *model;
    CU_OK(clt_params_create(&model));
    CU_OK(clt_params_add(model, "weight", w));
    CU_OK(clt_params_add(model, "bias", b));
    clt_tensor_release(w);
    clt_tensor_release(b);
    clt_optim *o;
    CU_OK(clt_optim_sgd(model, LR, 0, 0, &o));
    CU_OK(clt_params_to(model, dev)); /* after the optimizer: it follows */
    for (int epoch = 0; epoch < EPOCHS; epoch++)
      for (int i = 0; i < BATCHES; i++) {
        clt_tensor *x, *y, *pred, *err, *sq, *loss;
        CU_OK(clt_to(xs[i], dev, &x));
        CU_OK(clt_to(ys[i], dev, &y));
        CU_OK(clt_optim_zero_grad(o));
        CU_OK(clt_linear(x, clt_params_get(model, "weight"), clt_params_get(model, "bias"), &pred));
        CU_OK(clt_sub(pred, y, &err));
        CU_OK(clt_mul(err, err, &sq));
        CU_OK(clt_mean(sq, &loss));
        CU_OK(clt_backward(loss, NULL));
        CU_OK(clt_optim_step(o));
        clt_tensor *objs[] = {x, y, pred, err, sq, loss};
        for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
          clt_tensor_release(objs[k]);
      }
    float wv[2], bv[1];
    CU_OK(clt_tensor_read(clt_params_get(model, "weight"), wv, sizeof wv));
    CU_OK(clt_tensor_read(clt_params_get(model, "bias"), bv, sizeof bv));
    ck_assert_msg(fabsf(wv[0] - W_TRUE0) < 0.05f && fabsf(wv[1] - W_TRUE1) < 0.05f &&
                      fabsf(bv[0] - B_TRUE) < 0.05f,
                  "on %s: weight [%g, %g] bias %g", cu_dev_name(dev), wv[0], wv[1], bv[0]);
    for (int i = 0; i < BATCHES; i++) {
      clt_tensor_release(xs[i]);
      clt_tensor_release(ys[i]);
    }
    clt_optim_release(o);
    clt_params_release(model);
  }
}
END_TEST

Suite *optim_suite(void) {
  Suite *s = suite_create("optim");
  TCase *tc = cu_tcase("optim");
  tcase_add_test(tc, test_sgd_values);
  tcase_add_test(tc, test_adamw_values);
  tcase_add_test(tc, test_half_values);
  tcase_add_test(tc, test_view_param);
  tcase_add_test(tc, test_params_to_moves_state);
  tcase_add_test(tc, test_two_optimizers);
  tcase_add_test(tc, test_save_load);
  tcase_add_test(tc, test_bad_input);
  tcase_add_test(tc, test_train_linear);
  suite_add_tcase(s, tc);
  return s;
}
