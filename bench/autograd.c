/* SPDX-License-Identifier: MIT */
/* autograd.c - what training costs (issue 26, "Autograd and training"): one training step of a
 * 784-256-10 perceptron on cpu and cl:0, the overhead autograd adds per operation, and the
 * memory a step takes.
 *
 *   $ POCL_DEVICES="pthread pthread" ./bench/autograd [--reps N] [--kv]
 *
 * (a) MLP step: x [256, 784] f32 (N(0, 1)), targets [256] i64 in [0, 10), W1 [256, 784] and
 *     W2 [10, 256] N(0, 1) / sqrt(fan-in), b1 and b2 zeros, the four in a clt_params set and
 *     requiring grad, AdamW(lr 1e-3, betas 0.9 0.999, eps 1e-8, weight decay 0.01). One step:
 *     logits = linear(relu(linear(x, W1, b1)), W2, b2), loss = cross_entropy(logits, target),
 *     clt_optim_zero_grad, clt_backward(loss), clt_optim_step, clt_device_synchronize. The cpu and
 *     cl:0 steps alternate within each round (which goes first rotates), the step's temporaries
 *     released outside the timed region; medians of N rounds (default 21) after 3 warm-up rounds.
 *     Then the same step timed in parts, each ended by a synchronize (so the parts do not overlap
 *     and lazy chains do not cross them): forward to the logits, cross_entropy, zero_grad +
 *     backward, optimizer step; medians of N rounds each.
 * (b) Autograd overhead: a 20-op elementwise chain on a 1000-element f32 cpu tensor x,
 *     y = x; 5 times: y = y * x; y = tanh(y); y = y + x; y = exp(y); then s = sum(y), each
 *     sample the mean of 200 runs, medians of N samples (interleaved):
 *       fwd   the chain and the sum, x not requiring grad, values done (synchronize);
 *       rec   the same with x requiring grad (the graph recorded, no backward);
 *       bwd   the same, then clt_backward(s) and the gradient done, then x.grad = None.
 *     Per op: (bwd - fwd) / 20 is what autograd adds to the forward (recording and the backward),
 *     bwd / 20 is the forward and backward per op, (rec - fwd) / 20 the recording alone. In lazy
 *     mode (the default), again eager (clt_set_lazy(0)), and lazy on 4 elements (_tiny): there
 *     the arithmetic is nearly free and what is left is the cost per op of dispatch and autograd.
 * (c) Memory: clt_device_memory_stats of each device after its warm-up steps, before anything
 *     else ran on it: the peak clt's tensors held (the library keeps a lifetime peak and has no
 *     reset, so the cpu is measured before cl:0's model is made through it), and what is held
 *     between steps (parameters, their gradients, AdamW's state, the batch).
 * Each MLP step's loss is checked to be finite and to fall over the steps; the chain's gradient
 * is checked once against a derivative computed here. --kv adds "kv key value" lines
 * (milliseconds, microseconds (_us) or bytes) for bench/run.
 */
#define _POSIX_C_SOURCE 200809L
#include <clt.h>

#include <math.h>
#include <stdbool.h>
#include <stdint.h>

#define BENCH_NAME "autograd"
#include "bench.h"

enum { BATCH = 256, IN = 784, HID = 256, OUT = 10, WARM = 3, CHAIN = 20, CHAIN_N = 1000 };
enum { CHAIN_TINY = 4 }; /* the chain again on 4 elements: what is left is the per-op cost */
enum { CHAIN_ITERS = 200 };

static double now_ms(void) { return 1e3 * now_s(); }

/* ---- (a) the MLP ------------------------------------------------------------------------- */

typedef struct mlp {
  clt_device *dev;
  clt_params *params;
  clt_optim *opt;
  clt_tensor *w1, *b1, *w2, *b2; /* borrowed from params */
  clt_tensor *x, *y;             /* the batch, on dev */
  double first_loss, last_loss;
} mlp;

/* A parameter born on the host: N(0, 1) * scale (scale 0: zeros), requiring grad, added to p. */
static void add_param(clt_params *p, const char *name, int ndim, const int64_t *shape,
                      double scale) {
  clt_tensor *r, *t;
  if (scale != 0) {
    CLT_CHECK(clt_randn(CLT_F32, ndim, shape, clt_cpu(), &r));
    CLT_CHECK(clt_mul_scalar(r, scale, &t));
    clt_tensor_release(r);
  } else {
    CLT_CHECK(clt_zeros(CLT_F32, ndim, shape, clt_cpu(), &t));
  }
  CLT_CHECK(clt_requires_grad_(t, 1));
  CLT_CHECK(clt_params_add(p, name, t));
  clt_tensor_release(t);
}

/* The model, its optimizer and one batch, on dev (made on the host, moved once). */
static void mlp_make(mlp *m, clt_device *dev, uint64_t seed) {
  memset(m, 0, sizeof *m);
  m->dev = dev;
  CLT_CHECK(clt_manual_seed(seed));
  CLT_CHECK(clt_params_create(&m->params));
  add_param(m->params, "fc1.weight", 2, (int64_t[]){HID, IN}, 1.0 / sqrt((double)IN));
  add_param(m->params, "fc1.bias", 1, (int64_t[]){HID}, 0);
  add_param(m->params, "fc2.weight", 2, (int64_t[]){OUT, HID}, 1.0 / sqrt((double)HID));
  add_param(m->params, "fc2.bias", 1, (int64_t[]){OUT}, 0);
  CLT_CHECK(clt_params_to(m->params, dev)); /* in place: the handles stay */
  m->w1 = clt_params_get(m->params, "fc1.weight");
  m->b1 = clt_params_get(m->params, "fc1.bias");
  m->w2 = clt_params_get(m->params, "fc2.weight");
  m->b2 = clt_params_get(m->params, "fc2.bias");
  CLT_CHECK(clt_optim_adamw(m->params, 1e-3, 0.9, 0.999, 1e-8, 0.01, &m->opt));

  clt_tensor *xh, *yh;
  CLT_CHECK(clt_randn(CLT_F32, 2, (int64_t[]){BATCH, IN}, clt_cpu(), &xh));
  int64_t target[BATCH];
  uint64_t state = seed * 6364136223846793005u + 1442695040888963407u;
  for (int i = 0; i < BATCH; i++) {
    state = state * 6364136223846793005u + 1442695040888963407u;
    target[i] = (int64_t)((state >> 33) % OUT);
  }
  CLT_CHECK(clt_from_host(target, CLT_I64, 1, (int64_t[]){BATCH}, clt_cpu(), &yh));
  CLT_CHECK(clt_to(xh, dev, &m->x));
  CLT_CHECK(clt_to(yh, dev, &m->y));
  clt_tensor_release(xh);
  clt_tensor_release(yh);
  CLT_CHECK(clt_device_synchronize(dev));
}

static void mlp_free(mlp *m) {
  clt_optim_release(m->opt);
  clt_params_release(m->params);
  clt_tensor_release(m->x);
  clt_tensor_release(m->y);
}

/* The step's temporaries, released after the clock stops. */
typedef struct step_tmp {
  clt_tensor *h, *a, *logits, *loss;
} step_tmp;

static void tmp_release(step_tmp *t, mlp *m) {
  double l;
  CLT_CHECK(clt_item(t->loss, &l)); /* outside the time */
  if (!isfinite(l))
    die("the MLP loss on %s is %g", clt_device_name(m->dev), l);
  if (m->first_loss == 0)
    m->first_loss = l;
  m->last_loss = l;
  clt_tensor_release(t->h);
  clt_tensor_release(t->a);
  clt_tensor_release(t->logits);
  clt_tensor_release(t->loss);
}

/* One training step, timed to the end of its synchronize (ms). */
static double mlp_step(mlp *m) {
  step_tmp t;
  CLT_CHECK(clt_device_synchronize(m->dev));
  double t0 = now_ms();
  CLT_CHECK(clt_linear(m->x, m->w1, m->b1, &t.h));
  CLT_CHECK(clt_relu(t.h, &t.a));
  CLT_CHECK(clt_linear(t.a, m->w2, m->b2, &t.logits));
  CLT_CHECK(clt_cross_entropy(t.logits, m->y, &t.loss));
  CLT_CHECK(clt_optim_zero_grad(m->opt));
  CLT_CHECK(clt_backward(t.loss, NULL));
  CLT_CHECK(clt_optim_step(m->opt));
  CLT_CHECK(clt_device_synchronize(m->dev));
  double ms = now_ms() - t0;
  tmp_release(&t, m);
  return ms;
}

enum { PART_FWD, PART_CE, PART_BWD, PART_OPT, NPARTS };
static const char *const part_name[NPARTS] = {"fwd", "ce", "bwd", "opt"};

/* The same step, each part ended by a synchronize; its parts' ms into part[]. */
static void mlp_step_parts(mlp *m, double *part) {
  step_tmp t;
  CLT_CHECK(clt_device_synchronize(m->dev));
  double t0 = now_ms();
  CLT_CHECK(clt_linear(m->x, m->w1, m->b1, &t.h));
  CLT_CHECK(clt_relu(t.h, &t.a));
  CLT_CHECK(clt_linear(t.a, m->w2, m->b2, &t.logits));
  CLT_CHECK(clt_device_synchronize(m->dev));
  double t1 = now_ms();
  CLT_CHECK(clt_cross_entropy(t.logits, m->y, &t.loss));
  CLT_CHECK(clt_device_synchronize(m->dev));
  double t2 = now_ms();
  CLT_CHECK(clt_optim_zero_grad(m->opt));
  CLT_CHECK(clt_backward(t.loss, NULL));
  CLT_CHECK(clt_device_synchronize(m->dev));
  double t3 = now_ms();
  CLT_CHECK(clt_optim_step(m->opt));
  CLT_CHECK(clt_device_synchronize(m->dev));
  double t4 = now_ms();
  part[PART_FWD] = t1 - t0;
  part[PART_CE] = t2 - t1;
  part[PART_BWD] = t3 - t2;
  part[PART_OPT] = t4 - t3;
  tmp_release(&t, m);
}

/* ---- (b) autograd overhead --------------------------------------------------------------- */

/* s = sum of the 20-op chain of x (which it does not release). */
static clt_tensor *chain(clt_tensor *x) {
  clt_tensor *y = x, *z;
  for (int i = 0; i < CHAIN; i++) {
    switch (i % 4) {
    case 0:
      CLT_CHECK(clt_mul(y, x, &z));
      break;
    case 1:
      CLT_CHECK(clt_tanh(y, &z));
      break;
    case 2:
      CLT_CHECK(clt_add(y, x, &z));
      break;
    default:
      CLT_CHECK(clt_exp(y, &z));
      break;
    }
    if (y != x)
      clt_tensor_release(y);
    y = z;
  }
  clt_tensor *s;
  CLT_CHECK(clt_sum(y, &s));
  clt_tensor_release(y);
  return s;
}

/* The chain and its derivative at one point, in double (the check of (b)). */
static double chain_ref(double x, double *dydx) {
  double y = x, d = 1;
  for (int i = 0; i < CHAIN; i++) {
    switch (i % 4) {
    case 0:
      d = d * x + y;
      y = y * x;
      break;
    case 1:
      y = tanh(y);
      d = d * (1 - y * y);
      break;
    case 2:
      y = y + x;
      d = d + 1;
      break;
    default:
      y = exp(y);
      d = d * y;
      break;
    }
  }
  *dydx = d;
  return y;
}

enum { OVH_FWD, OVH_REC, OVH_BWD, NOVH };
static const char *const ovh_name[NOVH] = {"fwd", "rec", "bwd"};

/* The mean us of CHAIN_ITERS runs of case k (x_plain does not require grad, x_grad does). */
static double ovh_sample(int k, clt_tensor *x_plain, clt_tensor *x_grad) {
  clt_device *cpu = clt_cpu();
  CLT_CHECK(clt_device_synchronize(cpu));
  double t0 = now_s();
  for (int it = 0; it < CHAIN_ITERS; it++) {
    clt_tensor *s = chain(k == OVH_FWD ? x_plain : x_grad);
    if (k == OVH_BWD)
      CLT_CHECK(clt_backward(s, NULL));
    CLT_CHECK(clt_device_synchronize(cpu));
    clt_tensor_release(s);
    if (k == OVH_BWD)
      CLT_CHECK(clt_zero_grad(x_grad)); /* x.grad = None, as torch's loop does */
  }
  return 1e6 * (now_s() - t0) / CHAIN_ITERS;
}

/* Medians (us) of the three cases on n elements, interleaved round after round, rotating the
 * first. */
static void measure_overhead(int reps, int64_t n, double *med) {
  float v[CHAIN_N];
  for (int i = 0; i < CHAIN_N; i++)
    v[i] = (float)((i * 7919) % 1000) / 1000.0f * 1.6f - 0.8f; /* in [-0.8, 0.8) */
  clt_tensor *xp, *xg;
  CLT_CHECK(clt_from_host(v, CLT_F32, 1, &n, clt_cpu(), &xp));
  CLT_CHECK(clt_from_host(v, CLT_F32, 1, &n, clt_cpu(), &xg));
  CLT_CHECK(clt_requires_grad_(xg, 1));

  /* check the gradient once */
  clt_tensor *s = chain(xg);
  CLT_CHECK(clt_backward(s, NULL));
  clt_tensor_release(s);
  float g[CHAIN_N];
  CLT_CHECK(clt_tensor_read(clt_tensor_grad(xg), g, sizeof(float) * (size_t)n));
  for (int i = 0; i < n; i += 37) {
    double d;
    chain_ref(v[i], &d);
    if (fabs(g[i] - d) > 1e-3 * (1 + fabs(d)))
      die("the chain's gradient at x = %g is %g, expected %g", v[i], g[i], d);
  }
  CLT_CHECK(clt_zero_grad(xg));

  double *t[NOVH];
  for (int k = 0; k < NOVH; k++)
    if (!(t[k] = malloc(sizeof(double) * (size_t)reps)))
      die("out of host memory");
  for (int r = -2; r < reps; r++)
    for (int j = 0; j < NOVH; j++) {
      int k = (j + (r + 2)) % NOVH;
      double us = ovh_sample(k, xp, xg);
      if (r >= 0)
        t[k][r] = us;
    }
  for (int k = 0; k < NOVH; k++) {
    med[k] = median(t[k], reps);
    free(t[k]);
  }
  clt_tensor_release(xp);
  clt_tensor_release(xg);
}

/* ---- main -------------------------------------------------------------------------------- */

static void print_mem(const char *key, const char *label, clt_device *d, int kv) {
  clt_memory_stats s;
  CLT_CHECK(clt_device_memory_stats(d, &s));
  printf("memory %-5s peak %8.3f MiB, held between steps %8.3f MiB (%llu allocations, %llu from "
         "the cache)\n",
         label, s.peak_allocated_bytes / 1048576.0, s.allocated_bytes / 1048576.0,
         (unsigned long long)s.allocations, (unsigned long long)s.cache_hits);
  if (kv)
    printf("kv autograd_mem_%s_peak_bytes %llu\nkv autograd_mem_%s_held_bytes %llu\n", key,
           (unsigned long long)s.peak_allocated_bytes, key, (unsigned long long)s.allocated_bytes);
}

int main(int argc, char **argv) {
  int reps = 21, kv = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
      reps = atoi(argv[++i]);
    else if (strcmp(argv[i], "--kv") == 0)
      kv = 1;
    else {
      fprintf(stderr, "usage: %s [--reps N] [--kv]\n", argv[0]);
      return 2;
    }
  }
  if (reps < 1)
    reps = 1;
  clt_device *cl = NULL;
  if (clt_device_get("cl:0", &cl) != CLT_OK) {
    printf("autograd: no OpenCL device: cpu only\n");
    cl = NULL;
  }
  int lazy_was = clt_set_lazy(1);
  clt_set_lazy(lazy_was);
  printf("clt %s, %d-%d-%d MLP, batch %d, f32, AdamW; lazy mode %s\n", clt_version(), IN, HID, OUT,
         BATCH, lazy_was ? "on" : "off");
  if (cl)
    printf("clt cl:0: %s\n", clt_device_name(cl));

  /* (a) and (c): the cpu model first, its memory measured before cl:0's model is made through
   * the host */
  int ndev = cl ? 2 : 1;
  mlp m[2];
  const char *key[2] = {"cpu", "cl0"};
  mlp_make(&m[0], clt_cpu(), 1);
  for (int w = 0; w < WARM; w++)
    mlp_step(&m[0]);
  print_mem("cpu", "cpu", clt_cpu(), kv);
  if (cl) {
    mlp_make(&m[1], cl, 1);
    for (int w = 0; w < WARM; w++)
      mlp_step(&m[1]);
    print_mem("cl0", "cl:0", cl, kv);
  }

  double *st[2], *pt[2][NPARTS];
  for (int d = 0; d < 2; d++) {
    st[d] = malloc(sizeof(double) * (size_t)reps);
    for (int p = 0; p < NPARTS; p++)
      pt[d][p] = malloc(sizeof(double) * (size_t)reps);
  }
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < ndev; j++) {
      int d = (j + r) % ndev;
      st[d][r] = mlp_step(&m[d]);
    }
  for (int r = 0; r < reps; r++)
    for (int j = 0; j < ndev; j++) {
      int d = (j + r) % ndev;
      double part[NPARTS];
      mlp_step_parts(&m[d], part);
      for (int p = 0; p < NPARTS; p++)
        pt[d][p][r] = part[p];
    }
  printf("MLP training step, medians of %d steps after %d warm-up steps (ms)\n", reps, WARM);
  printf("%-6s %9s   %9s %9s %9s %9s %9s   %s\n", "device", "step", "forward", "cross_ent",
         "backward", "optimizer", "sum", "loss first -> last");
  double step_ms[2] = {0, 0};
  for (int d = 0; d < ndev; d++) {
    double pm[NPARTS], sum = 0;
    step_ms[d] = median(st[d], reps);
    for (int p = 0; p < NPARTS; p++)
      sum += pm[p] = median(pt[d][p], reps);
    printf("%-6s %9.3f   %9.3f %9.3f %9.3f %9.3f %9.3f   %.4f -> %.4f\n", clt_device_name(m[d].dev),
           step_ms[d], pm[0], pm[1], pm[2], pm[3], sum, m[d].first_loss, m[d].last_loss);
    if (!(m[d].last_loss < m[d].first_loss))
      die("the MLP loss on %s did not fall: %g -> %g", clt_device_name(m[d].dev), m[d].first_loss,
          m[d].last_loss);
    if (kv) {
      printf("kv autograd_mlp_%s_ms %.4f\n", key[d], step_ms[d]);
      for (int p = 0; p < NPARTS; p++)
        printf("kv autograd_mlp_%s_%s_ms %.4f\n", key[d], part_name[p], pm[p]);
    }
  }
  if (cl)
    printf("cl:0 / cpu step time: %.2fx\n", step_ms[1] / step_ms[0]);
  for (int d = 0; d < 2; d++) {
    free(st[d]);
    for (int p = 0; p < NPARTS; p++)
      free(pt[d][p]);
  }
  for (int d = 0; d < ndev; d++)
    mlp_free(&m[d]);

  /* (b) */
  printf("autograd overhead, %d-op elementwise chain + sum of %d f32 on cpu, medians of %d "
         "samples of %d runs (us per run)\n",
         CHAIN, CHAIN_N, reps, CHAIN_ITERS);
  printf("%-16s %9s %9s %9s   %14s %14s %14s\n", "mode", "fwd", "fwd+rec", "fwd+bwd",
         "(bwd-fwd)/op", "bwd/op", "(rec-fwd)/op");
  for (int lazy = 1; lazy >= -1; lazy--) {
    clt_set_lazy(lazy != 0);
    double med[NOVH];
    measure_overhead(reps, lazy >= 0 ? CHAIN_N : CHAIN_TINY, med);
    const char *mode = lazy > 0 ? "lazy" : lazy == 0 ? "eager" : "lazy, 4 elements";
    const char *sfx = lazy > 0 ? "" : lazy == 0 ? "_eager" : "_tiny";
    printf("%-16s %9.2f %9.2f %9.2f   %14.3f %14.3f %14.3f\n", mode, med[OVH_FWD], med[OVH_REC],
           med[OVH_BWD], (med[OVH_BWD] - med[OVH_FWD]) / CHAIN, med[OVH_BWD] / CHAIN,
           (med[OVH_REC] - med[OVH_FWD]) / CHAIN);
    if (kv) {
      for (int k = 0; k < NOVH; k++)
        printf("kv autograd_chain_%s%s_us %.4f\n", ovh_name[k], sfx, med[k]);
      printf("kv autograd_overhead_per_op%s_us %.4f\n", sfx, (med[OVH_BWD] - med[OVH_FWD]) / CHAIN);
      printf("kv autograd_fwdbwd_per_op%s_us %.4f\n", sfx, med[OVH_BWD] / CHAIN);
      printf("kv autograd_record_per_op%s_us %.4f\n", sfx, (med[OVH_REC] - med[OVH_FWD]) / CHAIN);
    }
  }
  clt_set_lazy(lazy_was);
  return 0;
}
