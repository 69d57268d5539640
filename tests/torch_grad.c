/* SPDX-License-Identifier: MIT */
/* torch_grad.c - the clt half of the comparison of gradients with PyTorch (issue 26;
 * tests/torch_grad.sh runs it, tests/torch_grad.py is the PyTorch half).
 *
 *   $ tests/torch_grad OUTDIR DEVICE        e.g. tests/torch_grad /tmp/g cl:0
 *
 * Builds a 2-layer perceptron and a batch on the host in f64 from a fixed seed (W1 [H, D],
 * b1 [H], W2 [C, H], b2 [C], x [N, D], target i64 [N]), moves them to DEVICE, makes the four
 * parameters and x require grad there, and runs two losses with clt_backward, each from fresh
 * gradients:
 *
 *   z1 = linear(x, W1, b1), a = relu(z1), logits = linear(a, W2, b2)
 *   ce  = cross_entropy(logits, target)
 *   mix = mse_loss(softmax(logits, 1), onehot(target)) + 0.5 mean(logsumexp(logits, 1))
 *         + 0.01 sum(tanh(narrow(transpose(z1, 0, 1), 0, 3, 6)))
 *         + 0.1 mean(select(log_softmax(logits, 0), 1, 2))
 *
 * Writes to OUTDIR as .npy (clt_save_npy, after a clt_to to cpu): the inputs (x, target, onehot,
 * W1, b1, W2, b2), each loss (loss_ce, loss_mix) and each gradient (grad_ce_<name>,
 * grad_mix_<name> for name in W1 b1 W2 b2 x). Exit status 0 on success, 77 when DEVICE has no
 * fp64 (nothing to compare), 1 on any other failure (with clt's message), 2 on bad usage.
 */
#include <clt.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 32, D = 20, H = 16, C = 10 };
#define SEED 2026

static const char *outdir;

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "torch_grad: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

/* Every tensor made here, released at the end (so that leak checkers see a clean exit). */
static clt_tensor *made[128];
static int nmade;

static clt_tensor *keep(clt_tensor *t) {
  if (nmade == (int)(sizeof made / sizeof made[0])) {
    fprintf(stderr, "torch_grad: more than %d tensors\n", nmade);
    exit(1);
  }
  return made[nmade++] = t;
}

/* A host f64 tensor of N(0, scale^2) values. */
static clt_tensor *normal(int ndim, const int64_t *shape, double scale) {
  clt_tensor *r, *t;
  check(clt_randn(CLT_F64, ndim, shape, clt_cpu(), &r), "clt_randn");
  check(clt_mul_scalar(r, scale, &t), "clt_mul_scalar");
  clt_tensor_release(r);
  return keep(t);
}

/* Writes t to OUTDIR/name.npy through a host copy. */
static void save(const char *name, clt_tensor *t) {
  char path[4096];
  clt_tensor *h;
  if (t == NULL) {
    fprintf(stderr, "torch_grad: %s: no gradient after clt_backward\n", name);
    exit(1);
  }
  snprintf(path, sizeof path, "%s/%s.npy", outdir, name);
  check(clt_to(t, clt_cpu(), &h), "clt_to(cpu)");
  check(clt_save_npy(path, h), path);
  clt_tensor_release(h);
}

/* The first layers, shared by both losses: *z1 (pre-activation) and *logits. */
static void forward(clt_tensor *x, clt_tensor *const *p, clt_tensor **z1, clt_tensor **logits) {
  clt_tensor *a;
  check(clt_linear(x, p[0], p[1], z1), "clt_linear(fc1)");
  check(clt_relu(keep(*z1), &a), "clt_relu");
  check(clt_linear(keep(a), p[2], p[3], logits), "clt_linear(fc2)");
  keep(*logits);
}

static clt_tensor *mix_loss(clt_tensor *z1, clt_tensor *logits, clt_tensor *onehot) {
  /* mse_loss(softmax(logits, 1), onehot) */
  clt_tensor *sm, *mse;
  check(clt_softmax(logits, 1, &sm), "clt_softmax");
  check(clt_mse_loss(keep(sm), onehot, &mse), "clt_mse_loss");
  keep(mse);
  /* 0.5 mean(logsumexp(logits, 1)) */
  clt_tensor *lse, *lsem, *lse5;
  check(clt_logsumexp(logits, 1, 0, &lse), "clt_logsumexp");
  check(clt_mean(keep(lse), &lsem), "clt_mean(lse)");
  check(clt_mul_scalar(keep(lsem), 0.5, &lse5), "clt_mul_scalar");
  keep(lse5);
  /* 0.01 sum(tanh(narrow(transpose(z1, 0, 1), 0, 3, 6))): views of a non-leaf */
  clt_tensor *zt, *zn, *th, *ts, *ts1;
  check(clt_transpose(z1, 0, 1, &zt), "clt_transpose");
  check(clt_narrow(keep(zt), 0, 3, 6, &zn), "clt_narrow");
  check(clt_tanh(keep(zn), &th), "clt_tanh");
  check(clt_sum(keep(th), &ts), "clt_sum");
  check(clt_mul_scalar(keep(ts), 0.01, &ts1), "clt_mul_scalar");
  keep(ts1);
  /* 0.1 mean(select(log_softmax(logits, 0), 1, 2)): log_softmax across the batch */
  clt_tensor *ls, *sel, *selm, *sel1;
  check(clt_log_softmax(logits, 0, &ls), "clt_log_softmax");
  check(clt_select(keep(ls), 1, 2, &sel), "clt_select");
  check(clt_mean(keep(sel), &selm), "clt_mean(select)");
  check(clt_mul_scalar(keep(selm), 0.1, &sel1), "clt_mul_scalar");
  keep(sel1);
  clt_tensor *s1, *s2, *loss;
  check(clt_add(mse, lse5, &s1), "clt_add");
  check(clt_add(keep(s1), ts1, &s2), "clt_add");
  check(clt_add(keep(s2), sel1, &loss), "clt_add");
  return keep(loss);
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s OUTDIR DEVICE\n", argv[0]);
    return 2;
  }
  outdir = argv[1];
  clt_device *dev;
  check(clt_device_get(argv[2], &dev), "clt_device_get");
  if (!clt_device_has_fp64(dev)) {
    printf("torch_grad: SKIP: %s has no fp64\n", clt_device_name(dev));
    return 77;
  }

  /* On the host, f64, from SEED: pre-activations N(0, ~1.1) (about half the units active),
   * biases of both signs, logits of order 1. */
  int64_t sx[2] = {N, D}, sw1[2] = {H, D}, sb1[1] = {H}, sw2[2] = {C, H}, sb2[1] = {C};
  int64_t sy[1] = {N}, soh[2] = {N, C};
  check(clt_manual_seed(SEED), "clt_manual_seed");
  clt_tensor *hx = normal(2, sx, 1.0);
  clt_tensor *hw1 = normal(2, sw1, 1.0 / sqrt((double)D));
  clt_tensor *hb1 = normal(1, sb1, 0.3);
  clt_tensor *hw2 = normal(2, sw2, 2.0 / sqrt((double)H));
  clt_tensor *hb2 = normal(1, sb2, 0.3);
  int64_t y[N];
  double oh[N * C];
  memset(oh, 0, sizeof oh);
  for (int i = 0; i < N; i++) {
    y[i] = (7 * i + 3) % C;
    oh[i * C + y[i]] = 1.0;
  }
  clt_tensor *hy, *hoh;
  check(clt_from_host(y, CLT_I64, 1, sy, clt_cpu(), &hy), "clt_from_host(target)");
  check(clt_from_host(oh, CLT_F64, 2, soh, clt_cpu(), &hoh), "clt_from_host(onehot)");
  keep(hy);
  keep(hoh);
  const char *names[5] = {"W1", "b1", "W2", "b2", "x"};
  clt_tensor *host[5] = {hw1, hb1, hw2, hb2, hx};
  for (int i = 0; i < 5; i++)
    save(names[i], host[i]);
  save("target", hy);
  save("onehot", hoh);

  /* On the device: leaves that require grad, parameters and input alike. */
  clt_tensor *leaf[5], *target, *onehot;
  for (int i = 0; i < 5; i++) {
    check(clt_to(host[i], dev, &leaf[i]), "clt_to(device)");
    check(clt_requires_grad_(keep(leaf[i]), 1), "clt_requires_grad_");
  }
  check(clt_to(hy, dev, &target), "clt_to(target)");
  check(clt_to(hoh, dev, &onehot), "clt_to(onehot)");
  keep(target);
  keep(onehot);

  const char *loss_names[2] = {"ce", "mix"};
  for (int k = 0; k < 2; k++) {
    clt_tensor *z1, *logits, *loss;
    char name[64];
    for (int i = 0; i < 5; i++)
      check(clt_zero_grad(leaf[i]), "clt_zero_grad");
    forward(leaf[4], leaf, &z1, &logits);
    if (k == 0) {
      check(clt_cross_entropy(logits, target, &loss), "clt_cross_entropy");
      keep(loss);
    } else {
      loss = mix_loss(z1, logits, onehot);
    }
    check(clt_backward(loss, NULL), "clt_backward");
    snprintf(name, sizeof name, "loss_%s", loss_names[k]);
    clt_tensor *l;
    check(clt_detach(loss, &l), "clt_detach");
    save(name, keep(l));
    for (int i = 0; i < 5; i++) {
      snprintf(name, sizeof name, "grad_%s_%s", loss_names[k], names[i]);
      save(name, clt_tensor_grad(leaf[i]));
    }
  }
  while (nmade > 0)
    clt_tensor_release(made[--nmade]);
  printf("torch_grad: wrote the inputs, 2 losses and 10 gradients on %s to %s\n", argv[2], outdir);
  return 0;
}
