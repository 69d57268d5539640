/* SPDX-License-Identifier: MIT */
/* train_linear.c - linear regression by gradient descent: autograd and clt_optim_sgd.
 *
 *   $ POCL_DEVICES="pthread pthread" CLT_DEVICE=cl:0 ./examples/train_linear [--weights]
 *
 * The data are born on the host (examples/linear_data.h): 10 batches of 100 points
 * x ~ N(0, 1)^2 and labels y = x w^T + b + noise with w = [2, -3.4], b = 4.2. The model (a
 * clt_params holding "weight" and "bias") is moved to the default device once, with
 * clt_params_to; each batch is moved in the loop with clt_to (an explicit copy per step, as a
 * data loader would). Each step is PyTorch's: the mean squared error (clt_mse_loss), the
 * optimizer's zero_grad, clt_backward, an SGD step (clt_optim_sgd, lr 0.1). The loss is summed on
 * the device into a 0-d tensor and one number per epoch comes home, with clt_item. --weights prints the final weight and bias alone on stdout,
 * one number a line (%.9g), the rest going to stderr, for comparing with examples/mpi_linear.
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linear_data.h"

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "train_linear: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

int main(int argc, char **argv) {
  int weights_only = argc == 2 && strcmp(argv[1], "--weights") == 0;
  if (argc > 1 && !weights_only) {
    fprintf(stderr, "usage: %s [--weights]\n", argv[0]);
    return 2;
  }
  FILE *out = weights_only ? stderr : stdout; /* --weights: stdout gets the weights alone */
  clt_device *dev = clt_device_default();
  fprintf(out, "training on %s\n", clt_device_name(dev));

  /* The data, on the host, from known weights. */
  const float w_true[2] = {W_TRUE0, W_TRUE1}, b_true[1] = {B_TRUE};
  int64_t sw[2] = {1, 2}, sb[1] = {1};
  clt_tensor *xs[BATCHES], *ys[BATCHES];
  check(linear_data(xs, ys), "linear_data");

  /* The model, born on the host with zeros, requiring grad, moved once: in place, the same
   * handle (and still leaves that require grad). */
  clt_params *model;
  clt_tensor *w0, *b0;
  check(clt_params_create(&model), "clt_params_create");
  check(clt_zeros(CLT_F32, 2, sw, clt_cpu(), &w0), "clt_zeros(weight)");
  check(clt_zeros(CLT_F32, 1, sb, clt_cpu(), &b0), "clt_zeros(bias)");
  check(clt_requires_grad_(w0, 1), "clt_requires_grad_(weight)");
  check(clt_requires_grad_(b0, 1), "clt_requires_grad_(bias)");
  check(clt_params_add(model, "weight", w0), "clt_params_add(weight)");
  check(clt_params_add(model, "bias", b0), "clt_params_add(bias)");
  clt_tensor_release(w0);
  clt_tensor_release(b0);
  check(clt_params_to(model, dev), "clt_params_to");
  clt_optim *opt;
  check(clt_optim_sgd(model, LR, 0.0, 0.0, &opt), "clt_optim_sgd"); /* lr, momentum, decay */
  check(clt_transfer_stats_reset(NULL), "clt_transfer_stats_reset"); /* count the loop only */
  clt_tensor *w = clt_params_get(model, "weight"), *b = clt_params_get(model, "bias");

  for (int epoch = 0; epoch < EPOCHS; epoch++) {
    clt_tensor *loss_sum; /* lives on the device; the loss never leaves it inside the loop */
    check(clt_zeros(CLT_F32, 0, NULL, dev, &loss_sum), "clt_zeros(loss)");
    for (int i = 0; i < BATCHES; i++) {
      clt_tensor *x, *y, *pred, *loss, *value;
      check(clt_to(xs[i], dev, &x), "clt_to(x)"); /* the batch goes to the device */
      check(clt_to(ys[i], dev, &y), "clt_to(y)");
      check(clt_linear(x, w, b, &pred), "clt_linear"); /* (B, 1), recorded for backward */
      check(clt_mse_loss(pred, y, &loss), "clt_mse_loss"); /* 0-d, on the device */
      check(clt_optim_zero_grad(opt), "clt_optim_zero_grad");
      check(clt_backward(loss, NULL), "clt_backward"); /* d loss / d w and d b, on the device */
      check(clt_optim_step(opt), "clt_optim_step");    /* w -= lr * w.grad, b likewise */
      check(clt_detach(loss, &value), "clt_detach");
      check(clt_add_(loss_sum, value), "clt_add_(loss)");
      clt_tensor *objs[] = {x, y, pred, loss, value};
      for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
        clt_tensor_release(objs[k]);
    }
    double total;
    check(clt_item(loss_sum, &total), "clt_item"); /* the one device-to-host copy per epoch */
    fprintf(out, "epoch %d: loss %.6f\n", epoch + 1, total / BATCHES);
    clt_tensor_release(loss_sum);
  }

  /* The counters show what crossed between host and device in the loop: the batches going in,
   * and one number per epoch coming home. */
  fprintf(out, "transfers in the loop: ");
  check(clt_transfer_stats_print(out), "clt_transfer_stats_print");

  float wv[2], bv[1];
  check(clt_tensor_read(w, wv, sizeof wv), "clt_tensor_read(w)");
  check(clt_tensor_read(b, bv, sizeof bv), "clt_tensor_read(b)");
  fprintf(out, "weight: [%.4f, %.4f] (true [%.1f, %.1f])\n", wv[0], wv[1], w_true[0], w_true[1]);
  fprintf(out, "bias:   %.4f (true %.1f)\n", bv[0], b_true[0]);
  if (weights_only)
    printf("%.9g\n%.9g\n%.9g\n", wv[0], wv[1], bv[0]);
  int ok = wv[0] > 1.95f && wv[0] < 2.05f && wv[1] > -3.45f && wv[1] < -3.35f && bv[0] > 4.15f &&
           bv[0] < 4.25f;

  for (int i = 0; i < BATCHES; i++) {
    clt_tensor_release(xs[i]);
    clt_tensor_release(ys[i]);
  }
  clt_optim_release(opt);
  clt_params_release(model);
  return ok ? 0 : 1;
}
