/* SPDX-License-Identifier: MIT */
/* fusion.c - what lazy fusion gains: the same elementwise chains deferred (clt_set_lazy(1)) and
 * eager (clt_set_lazy(0)), in one run.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/fusion [--reps N] [--n ELEMENTS] [--kv]
 *
 * Cases, each timed from the first op to the end of clt_device_synchronize, results released
 * outside the timed region; the deferred and eager runs of a case alternate within each round
 * (which goes first rotates), medians over N rounds (default 9) after 2 warm-up rounds:
 *   (a) o = a * b + c, 16M f32 (--n), on cl:0 and on cpu (issue 15: >= 1.4x on cl:0, >= 1.3x
 *       on cpu);
 *   (b) a chain of 8 ops, o = relu(exp(-(a * b + c) * 0.5) - a) * c, on cl:0 (>= 3x) and cpu;
 *   (c) a 3-element a * b + c, and a 3-element add, each with a synchronize, on cl:0 (no slower
 *       than eager); a sample is the mean of 200 of them, since one takes tens of microseconds
 *       and its wake-up of PoCL's threads varies as much;
 *   (d) the first evaluation in this process of a chain never run before in it, for five chains
 *       of different ops, run first: their programs come from the disk cache when an earlier run
 *       left them there (issue 15: <= 3 ms); the median of the five, the first of which also
 *       pays for the process's first kernel launch.
 *   (e) one training step of examples/train_linear (its batch of 100 already on cl:0), the mean
 *       of 20 steps per round (issue 15: faster than eager);
 *   (f) view(a * 2, [4096, 4096]) + 1 on cl:0: a chain goes on through a contiguous view of a
 *       deferred result, one kernel (issue 32: >= 1.4x);
 *   (g) with --first-use MODE, only: a 40-op chain in a fresh process (first_use_chain); MODE
 *       lazy-opsran and eager-opsran run the same ops eagerly first (untimed), so that the chain
 *       is new but its ops' own kernels are built: deferred, it runs op by op while its fused
 *       kernel builds in the background.
 * Every result is checked once against values computed here. --kv adds "kv key value" lines
 * (milliseconds) for bench/run.
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <math.h>
#include <stdbool.h>

#define BENCH_NAME "fusion"
#include "bench.h"

static double now_ms(void) { return 1e3 * now_s(); }

typedef clt_tensor *(*chain_fn)(clt_tensor *a, clt_tensor *b, clt_tensor *c);

static clt_tensor *fma_chain(clt_tensor *a, clt_tensor *b, clt_tensor *c) {
  clt_tensor *t, *o;
  CLT_CHECK(clt_mul(a, b, &t));
  CLT_CHECK(clt_add(t, c, &o));
  clt_tensor_release(t);
  return o;
}

static clt_tensor *eight_chain(clt_tensor *a, clt_tensor *b, clt_tensor *c) {
  clt_tensor *t[8];
  CLT_CHECK(clt_mul(a, b, &t[0]));
  CLT_CHECK(clt_add(t[0], c, &t[1]));
  CLT_CHECK(clt_neg(t[1], &t[2]));
  CLT_CHECK(clt_mul_scalar(t[2], 0.5, &t[3]));
  CLT_CHECK(clt_exp(t[3], &t[4]));
  CLT_CHECK(clt_sub(t[4], a, &t[5]));
  CLT_CHECK(clt_relu(t[5], &t[6]));
  CLT_CHECK(clt_mul(t[6], c, &t[7]));
  for (int i = 0; i < 7; i++)
    clt_tensor_release(t[i]);
  return t[7];
}

static clt_tensor *one_add(clt_tensor *a, clt_tensor *b, clt_tensor *c) {
  (void)c;
  clt_tensor *o;
  CLT_CHECK(clt_add(a, b, &o));
  return o;
}

/* a * 2 seen as a matrix (view: a contiguous reshape of the deferred result), plus 1: the chain
 * goes on through the view (issue 32), one kernel. */
static clt_tensor *view_chain(clt_tensor *a, clt_tensor *b, clt_tensor *c) {
  (void)b;
  (void)c;
  int64_t n = clt_tensor_numel(a), rows = 1;
  while (rows * rows < n && n % (rows * 2) == 0)
    rows *= 2;
  clt_tensor *t, *v, *o;
  CLT_CHECK(clt_mul_scalar(a, 2, &t));
  CLT_CHECK(clt_view(t, 2, (int64_t[]){rows, n / rows}, &v));
  CLT_CHECK(clt_add_scalar(v, 1, &o));
  clt_tensor_release(t);
  clt_tensor_release(v);
  return o;
}

static float eight_ref(float a, float b, float c) {
  float t = a * b;
  t = t + c;
  t = -t;
  t = t * 0.5f;
  t = expf(t);
  t = t - a;
  t = t < 0 ? 0 : t;
  return t * c;
}

static clt_tensor *ramp(clt_device *d, int64_t n, float scale, float shift) {
  float *v = malloc(sizeof(float) * (size_t)n);
  if (!v)
    die("out of host memory");
  for (int64_t i = 0; i < n; i++)
    v[i] = scale * (float)((i * 7919) % 1000) / 1000.0f + shift;
  clt_tensor *t;
  CLT_CHECK(clt_from_host(v, CLT_F32, 1, &n, d, &t));
  free(v);
  return t;
}

/* Times iters runs of f with deferring on or off, each to the end of its synchronize (results
 * released between runs, outside the time); the mean of a run. */
static double run(chain_fn f, clt_tensor *a, clt_tensor *b, clt_tensor *c, int lazy, int iters,
                  clt_tensor **keep) {
  clt_device *d = clt_tensor_device(a);
  CLT_CHECK(clt_device_synchronize(d));
  clt_set_lazy(lazy);
  double ms = 0;
  for (int i = 0; i < iters; i++) {
    double t0 = now_ms();
    clt_tensor *o = f(a, b, c);
    CLT_CHECK(clt_device_synchronize(d));
    ms += now_ms() - t0;
    if (keep && i == iters - 1)
      *keep = o;
    else
      clt_tensor_release(o);
  }
  clt_set_lazy(1);
  return ms / iters;
}

static void verify(clt_tensor *o, clt_tensor *a, clt_tensor *b, clt_tensor *c, int eight,
                   const char *what) {
  int64_t n = clt_tensor_numel(o);
  float *ov = malloc(sizeof(float) * (size_t)n), *av = malloc(sizeof(float) * (size_t)n),
        *bv = malloc(sizeof(float) * (size_t)n), *cv = malloc(sizeof(float) * (size_t)n);
  CLT_CHECK(clt_tensor_read(o, ov, sizeof(float) * (size_t)n));
  CLT_CHECK(clt_tensor_read(a, av, sizeof(float) * (size_t)n));
  CLT_CHECK(clt_tensor_read(b, bv, sizeof(float) * (size_t)n));
  CLT_CHECK(clt_tensor_read(c, cv, sizeof(float) * (size_t)n));
  for (int64_t i = 0; i < n; i += n / 97 + 1) {
    float want = eight == 1   ? eight_ref(av[i], bv[i], cv[i])
                 : eight == 2 ? av[i] + bv[i]
                 : eight == 3 ? av[i] * 2 + 1
                              : av[i] * bv[i] + cv[i];
    if (fabsf(ov[i] - want) > 1e-5f * (1 + fabsf(want))) {
      die("%s: element %lld is %g, expected %g", what, (long long)i, ov[i], want);
    }
  }
  free(ov);
  free(av);
  free(bv);
  free(cv);
}

typedef struct result {
  const char *name;
  double lazy, eager;
} result;

static result measure(const char *name, chain_fn f, clt_device *d, int64_t n, int eight, int reps,
                      int iters) {
  clt_tensor *a = ramp(d, n, 1, -0.5f), *b = ramp(d, n, 2, 0.25f), *c = ramp(d, n, 1, 0.1f);
  double *tl = malloc(sizeof(double) * (size_t)reps), *te = malloc(sizeof(double) * (size_t)reps);
  clt_tensor *o;
  run(f, a, b, c, 1, 1, &o);
  verify(o, a, b, c, eight, name);
  clt_tensor_release(o);
  run(f, a, b, c, 0, 1, &o);
  verify(o, a, b, c, eight, name);
  clt_tensor_release(o);
  for (int r = -2; r < reps; r++) {
    double l, e;
    if (r & 1) {
      l = run(f, a, b, c, 1, iters, NULL);
      e = run(f, a, b, c, 0, iters, NULL);
    } else {
      e = run(f, a, b, c, 0, iters, NULL);
      l = run(f, a, b, c, 1, iters, NULL);
    }
    if (r >= 0) {
      tl[r] = l;
      te[r] = e;
    }
  }
  result res = {name, median(tl, reps), median(te, reps)};
  free(tl);
  free(te);
  clt_tensor_release(a);
  clt_tensor_release(b);
  clt_tensor_release(c);
  return res;
}

/* (d) five chains of ops that nothing else here uses, each of a different structure: the first
 * use of each in this process finds no kernel in memory (its program comes from the disk cache
 * when an earlier run left it there). want() is the value computed here. */
enum { NFIRST = 5 };
/* A 3-element op takes tens of microseconds: each of its samples is the mean of this many. */
enum { SMALL_ITERS = 200 };
static clt_tensor *first_chain(int k, clt_tensor *a, clt_tensor *b, clt_tensor *c) {
  clt_tensor *t, *u, *o;
  switch (k) {
  case 0: /* expm1(atan2(a, b) * c) */
    CLT_CHECK(clt_atan2(a, b, &t));
    CLT_CHECK(clt_mul(t, c, &u));
    CLT_CHECK(clt_expm1(u, &o));
    break;
  case 1: /* log1p(|a - b|) / c */
    CLT_CHECK(clt_sub(a, b, &t));
    CLT_CHECK(clt_abs(t, &u));
    clt_tensor_release(t);
    CLT_CHECK(clt_log1p(u, &t));
    CLT_CHECK(clt_div(t, c, &o));
    break;
  case 2: /* tanh(sin(a) * cos(b)) + c */
    CLT_CHECK(clt_sin(a, &t));
    CLT_CHECK(clt_cos(b, &u));
    CLT_CHECK(clt_mul(t, u, &o));
    clt_tensor_release(t);
    clt_tensor_release(u);
    CLT_CHECK(clt_tanh(o, &t));
    clt_tensor_release(o);
    CLT_CHECK(clt_add(t, c, &o));
    u = NULL;
    break;
  case 3: /* sqrt(maximum(a, b)) * erf(c) */
    CLT_CHECK(clt_maximum(a, b, &t));
    CLT_CHECK(clt_sqrt(t, &u));
    clt_tensor_release(t);
    CLT_CHECK(clt_erf(c, &t));
    CLT_CHECK(clt_mul(u, t, &o));
    break;
  default: /* rsqrt(b) * atan(a) - c */
    CLT_CHECK(clt_rsqrt(b, &t));
    CLT_CHECK(clt_atan(a, &u));
    CLT_CHECK(clt_mul(t, u, &o));
    clt_tensor_release(t);
    clt_tensor_release(u);
    CLT_CHECK(clt_sub(o, c, &t));
    clt_tensor_release(o);
    o = t;
    t = u = NULL;
    break;
  }
  clt_tensor_release(t);
  clt_tensor_release(u);
  return o;
}

static float first_want(int k, float a, float b, float c) {
  switch (k) {
  case 0: return expm1f(atan2f(a, b) * c);
  case 1: return log1pf(fabsf(a - b)) / c;
  case 2: return tanhf(sinf(a) * cosf(b)) + c;
  case 3: return sqrtf(fmaxf(a, b)) * erff(c);
  default: return 1.0f / sqrtf(b) * atanf(a) - c;
  }
}

/* The milliseconds from the first op of chain k to the end of the synchronize, checked. */
static double first_use(clt_device *d, int k) {
  const int64_t n = 1024;
  clt_tensor *a = ramp(d, n, 1, 0.1f), *b = ramp(d, n, 1, 0.2f), *c = ramp(d, n, 1, 0.5f);
  CLT_CHECK(clt_device_synchronize(d));
  double t0 = now_ms();
  clt_tensor *o = first_chain(k, a, b, c);
  CLT_CHECK(clt_eval(o));
  CLT_CHECK(clt_device_synchronize(d));
  double ms = now_ms() - t0;
  float av[1024], bv[1024], cv[1024], ov[1024];
  CLT_CHECK(clt_tensor_read(a, av, sizeof av));
  CLT_CHECK(clt_tensor_read(b, bv, sizeof bv));
  CLT_CHECK(clt_tensor_read(c, cv, sizeof cv));
  CLT_CHECK(clt_tensor_read(o, ov, sizeof ov));
  for (int64_t i = 0; i < n; i++) {
    float want = first_want(k, av[i], bv[i], cv[i]);
    if (!(fabsf(ov[i] - want) <= 1e-4f * (1 + fabsf(want))))
      die("new chain %d: element %lld is %g, expected %g", k, (long long)i, ov[i], want);
  }
  clt_tensor *objs[] = {a, b, c, o};
  for (size_t i = 0; i < sizeof objs / sizeof objs[0]; i++)
    clt_tensor_release(objs[i]);
  return ms;
}

/* (e) one step of examples/train_linear on device-resident data (the batch already there):
 * forward, loss, gradients and the two in-place updates, then a synchronize. */
static double train_step(clt_tensor *x, clt_tensor *y, clt_tensor *w, clt_tensor *b,
                         clt_tensor *loss_sum, int lazy) {
  clt_device *d = clt_tensor_device(x);
  CLT_CHECK(clt_device_synchronize(d));
  clt_set_lazy(lazy);
  double t0 = now_ms();
  clt_tensor *pred, *err, *sq, *loss, *errt, *gw, *gb, *step;
  CLT_CHECK(clt_linear(x, w, b, &pred));
  CLT_CHECK(clt_sub(pred, y, &err));
  CLT_CHECK(clt_mul(err, err, &sq));
  CLT_CHECK(clt_mean(sq, &loss));
  CLT_CHECK(clt_add_(loss_sum, loss));
  CLT_CHECK(clt_transpose(err, 0, 1, &errt));
  CLT_CHECK(clt_matmul(errt, x, &gw));
  CLT_CHECK(clt_mul_scalar(gw, 0.1 * 2.0 / 100, &step));
  CLT_CHECK(clt_sub_(w, step));
  clt_tensor_release(step);
  CLT_CHECK(clt_sum_dim(err, 0, 0, &gb));
  CLT_CHECK(clt_mul_scalar(gb, 0.1 * 2.0 / 100, &step));
  CLT_CHECK(clt_sub_(b, step));
  CLT_CHECK(clt_device_synchronize(d));
  double ms = now_ms() - t0;
  clt_set_lazy(1);
  clt_tensor *objs[] = {pred, err, sq, loss, errt, gw, gb, step};
  for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
    clt_tensor_release(objs[k]);
  return ms;
}

static result measure_train(clt_device *d, int reps) {
  clt_tensor *x = ramp(d, 200, 2, -1), *y = ramp(d, 100, 3, 1), *w, *b, *loss, *xv, *yv;
  int64_t sx[2] = {100, 2}, sy[2] = {100, 1}, sw[2] = {1, 2}, sb[1] = {1};
  CLT_CHECK(clt_view(x, 2, sx, &xv));
  CLT_CHECK(clt_view(y, 2, sy, &yv));
  CLT_CHECK(clt_zeros(CLT_F32, 2, sw, d, &w));
  CLT_CHECK(clt_zeros(CLT_F32, 1, sb, d, &b));
  CLT_CHECK(clt_zeros(CLT_F32, 0, NULL, d, &loss));
  int steps = 20;
  double *tl = malloc(sizeof(double) * (size_t)reps), *te = malloc(sizeof(double) * (size_t)reps);
  if (!tl || !te)
    die("out of host memory");
  for (int r = -2; r < reps; r++) {
    double l = 0, e = 0;
    for (int k = 0; k < steps; k++) { /* alternating, so both see the same weights' history */
      l += train_step(xv, yv, w, b, loss, 1);
      e += train_step(xv, yv, w, b, loss, 0);
    }
    if (r >= 0) {
      tl[r] = l / steps;
      te[r] = e / steps;
    }
  }
  result res = {"train step cl:0", median(tl, reps), median(te, reps)};
  free(tl);
  free(te);
  clt_tensor *objs[] = {x, y, xv, yv, w, b, loss};
  for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
    clt_tensor_release(objs[k]);
  return res;
}

/* --first-use MODE: one 40-op chain (adds of x, halvings and subtractions of 0.25, 1M f32) on
 * cl:0 in this fresh process, deferred (MODE lazy) or eager (MODE eager): the milliseconds until
 * the chain is enqueued (the last op's return, then clt_eval's) and until the synchronize
 * returns. bench/run runs it in fresh processes with empty and with warm disk caches (issue 25:
 * a first-use chain enqueues in <= 2x the eager time, and is done no later than 1.1x). */
static void chain40(clt_tensor *x, clt_tensor **y) {
  for (int i = 0; i < 40; i++) {
    clt_tensor *z;
    if (i % 3 == 0)
      CLT_CHECK(clt_add(*y, x, &z));
    else if (i % 3 == 1)
      CLT_CHECK(clt_mul_scalar(*y, 0.5, &z));
    else
      CLT_CHECK(clt_sub_scalar(*y, 0.25, &z));
    clt_tensor_release(*y);
    *y = z;
  }
}

static int first_use_chain(clt_device *d, bool lazy, bool ops_ran) {
  const int64_t n = (int64_t)1 << 20;
  clt_tensor *x = ramp(d, n, 1, 0.1f), *y = ramp(d, n, 2, -0.5f);
  if (ops_ran) { /* the chain's ops ran eagerly before: their own kernels are built */
    clt_set_lazy(0);
    clt_tensor *w = ramp(d, n, 2, -0.5f);
    chain40(x, &w);
    CLT_CHECK(clt_device_synchronize(d));
    clt_tensor_release(w);
  }
  clt_set_lazy(lazy);
  CLT_CHECK(clt_device_synchronize(d));
  double t0 = now_ms();
  chain40(x, &y);
  CLT_CHECK(clt_eval(y));
  double t1 = now_ms();
  CLT_CHECK(clt_device_synchronize(d));
  double t2 = now_ms();
  float *xv = malloc(sizeof(float) * (size_t)n), *yv = malloc(sizeof(float) * (size_t)n);
  clt_tensor *y0 = ramp(d, n, 2, -0.5f);
  if (!xv || !yv)
    die("out of memory");
  CLT_CHECK(clt_tensor_read(x, xv, sizeof(float) * (size_t)n));
  float *y0v = malloc(sizeof(float) * (size_t)n);
  if (!y0v)
    die("out of memory");
  CLT_CHECK(clt_tensor_read(y0, y0v, sizeof(float) * (size_t)n));
  CLT_CHECK(clt_tensor_read(y, yv, sizeof(float) * (size_t)n));
  for (int64_t j = 0; j < n; j += 997) {
    float w = y0v[j];
    for (int i = 0; i < 40; i++)
      w = i % 3 == 0 ? w + xv[j] : i % 3 == 1 ? w * 0.5f : w - 0.25f;
    if (yv[j] != w)
      die("first-use chain: element %lld is %g, expected %g", (long long)j, yv[j], w);
  }
  const char *m = lazy ? (ops_ran ? "lazy_opsran" : "lazy") : (ops_ran ? "eager_opsran" : "eager");
  printf("kv first_use_%s_enqueue %.4f\nkv first_use_%s_total %.4f\n", m, t1 - t0, m, t2 - t0);
  free(xv);
  free(yv);
  free(y0v);
  clt_tensor_release(x);
  clt_tensor_release(y);
  clt_tensor_release(y0);
  return 0;
}

int main(int argc, char **argv) {
  int reps = 9, kv = 0;
  const char *first_mode = NULL;
  int64_t n = (int64_t)1 << 24;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--n") == 0 && i + 1 < argc)
      n = atoll(argv[++i]);
    else if (strcmp(argv[i], "--kv") == 0)
      kv = 1;
    else if (strcmp(argv[i], "--first-use") == 0 && i + 1 < argc &&
             (strcmp(argv[i + 1], "lazy") == 0 || strcmp(argv[i + 1], "eager") == 0 ||
              strcmp(argv[i + 1], "lazy-opsran") == 0 || strcmp(argv[i + 1], "eager-opsran") == 0))
      first_mode = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--reps N] [--n ELEMENTS] [--kv] [--first-use lazy|eager|lazy-opsran|eager-opsran]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 1)
    reps = 1;
  clt_device *d;
  if (clt_device_get("cl:0", &d) != CLT_OK) {
    printf("fusion: no OpenCL device, nothing to measure\n");
    return 0;
  }
  if (first_mode)
    return first_use_chain(d, strncmp(first_mode, "lazy", 4) == 0, strchr(first_mode, '-') != NULL);
  /* (d) first, before anything of their shapes ran in this process */
  double first[NFIRST], first_sorted[NFIRST];
  for (int k = 0; k < NFIRST; k++)
    first[k] = first_sorted[k] = first_use(d, k);
  double first_med = median(first_sorted, NFIRST);

  result rs[8];
  rs[0] = measure("a*b+c cl:0", fma_chain, d, n, 0, reps, 1);
  rs[1] = measure("a*b+c cpu", fma_chain, clt_cpu(), n, 0, reps, 1);
  rs[2] = measure("8-op chain cl:0", eight_chain, d, n, 1, reps, 1);
  rs[3] = measure("3-element a*b+c cl:0", fma_chain, d, 3, 0, reps, SMALL_ITERS);
  rs[4] = measure("3-element add cl:0", one_add, d, 3, 2, reps, SMALL_ITERS);
  rs[5] = measure_train(d, reps);
  rs[6] = measure("8-op chain cpu", eight_chain, clt_cpu(), n, 1, reps, 1);
  rs[7] = measure("view(a*2)+1 cl:0", view_chain, d, n, 3, reps, 1);
  printf("lazy fusion, %lld f32 elements, medians of %d rounds (ms)\n", (long long)n, reps);
  printf("%-22s %10s %10s %8s\n", "case", "deferred", "eager", "speedup");
  for (int i = 0; i < 8; i++)
    printf("%-22s %10.3f %10.3f %7.2fx\n", rs[i].name, rs[i].lazy, rs[i].eager,
           rs[i].eager / rs[i].lazy);
  printf("first use of a new chain in this process (%d chains; the first pays for the process's "
         "first kernel):",
         NFIRST);
  for (int k = 0; k < NFIRST; k++)
    printf(" %.2f", first[k]);
  printf(" ms, median %.2f ms\n", first_med);
  if (kv) {
    printf("kv fusion_fma_cl0_lazy %.4f\nkv fusion_fma_cl0_eager %.4f\n", rs[0].lazy, rs[0].eager);
    printf("kv fusion_chain8_cl0_lazy %.4f\nkv fusion_chain8_cl0_eager %.4f\n", rs[2].lazy,
           rs[2].eager);
    printf("kv fusion_small_cl0_lazy %.4f\nkv fusion_small_cl0_eager %.4f\n", rs[3].lazy,
           rs[3].eager);
    printf("kv fusion_add3_cl0_lazy %.4f\nkv fusion_add3_cl0_eager %.4f\n", rs[4].lazy,
           rs[4].eager);
    printf("kv fusion_train_step_cl0_lazy %.4f\nkv fusion_train_step_cl0_eager %.4f\n", rs[5].lazy,
           rs[5].eager);
    printf("kv fusion_fma_cpu_lazy %.4f\nkv fusion_fma_cpu_eager %.4f\n", rs[1].lazy, rs[1].eager);
    printf("kv fusion_chain8_cpu_lazy %.4f\nkv fusion_chain8_cpu_eager %.4f\n", rs[6].lazy,
           rs[6].eager);
    printf("kv fusion_view_cl0_lazy %.4f\nkv fusion_view_cl0_eager %.4f\n", rs[7].lazy,
           rs[7].eager);
    printf("kv fusion_first_chain %.4f\n", first_med);
  }
  return 0;
}
