/* SPDX-License-Identifier: MIT */
/* mpi_linear.c - examples/train_linear, data-parallel over the ranks of an MPI job.
 *
 *   $ POCL_DEVICES="pthread pthread" mpirun -np 2 ./examples/mpi_linear [--weights]
 *
 * Every rank makes the same data as train_linear (examples/linear_data.h, seeded, on the host)
 * and keeps its shard of each batch: rows [r B / P, (r + 1) B / P) of the B = 100 rows, for rank
 * r of P. The model starts at zero on every rank, on the rank's own device (clt_mpi_device:
 * cl:0, cl:1, ... by node-local rank). Each step a rank computes the batch gradient over its
 * rows only, summed, not averaged; clt_mpi_allreduce (CLT_MPI_SUM) adds the shards' sums, which
 * is the whole batch's sum, and every rank scales it by 2 lr / B exactly as train_linear does.
 * (Averaging each rank's mean gradient with CLT_MPI_MEAN would be right only for equal shards:
 * with 3 ranks they hold 33, 33 and 34 rows.) Every rank takes the same step, so the models stay
 * identical, and the final weights match train_linear's up to float rounding (the sums run in
 * another order); tests/mpi_linear.sh checks that. The loss comes home once per epoch, summed
 * over the ranks. --weights prints the final weight and bias alone on stdout (rank 0), one
 * number a line (%.9g), the rest going to stderr.
 */
#include <clt_mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linear_data.h"

static int rank = 0;

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "mpi_linear: rank %d: %s failed: %s\n  %s\n", rank, what, clt_status_name(s),
            clt_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
}

/* Rows [lo, hi) of the host tensor t (rows x cols f32) as a new host tensor. */
static clt_tensor *rows_of(clt_tensor *t, int64_t lo, int64_t hi) {
  int64_t cols = clt_tensor_shape(t)[1], shape[2] = {hi - lo, cols};
  const float *p = clt_tensor_data(t);
  clt_tensor *out;
  if (!p)
    check(clt_last_status(), "clt_tensor_data");
  check(clt_from_host(p + lo * cols, CLT_F32, 2, shape, clt_cpu(), &out), "clt_from_host(shard)");
  return out;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  int weights_only = argc == 2 && strcmp(argv[1], "--weights") == 0;
  if ((argc > 1 && !weights_only) || nranks > BATCH) {
    if (rank == 0)
      fprintf(stderr, "usage: mpirun -np P %s [--weights], P at most %d\n", argv[0], BATCH);
    MPI_Finalize();
    return 2;
  }
  FILE *out = weights_only ? stderr : stdout; /* --weights: stdout gets the weights alone */

  clt_device *dev;
  check(clt_mpi_device(MPI_COMM_WORLD, &dev), "clt_mpi_device");
  for (int r = 0; r < nranks; r++) { /* one line per rank, in rank order */
    if (r == rank)
      fprintf(out, "rank %d: training on %s (%s)\n", rank, clt_device_name(dev),
              clt_mpi_device_reason());
    fflush(out);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  /* The whole data set, the same on every rank; each keeps its rows of every batch. */
  const int64_t lo = (int64_t)rank * BATCH / nranks, hi = (int64_t)(rank + 1) * BATCH / nranks;
  clt_tensor *xs[BATCHES], *ys[BATCHES];
  check(linear_data(xs, ys), "linear_data");
  for (int i = 0; i < BATCHES; i++) {
    clt_tensor *x = rows_of(xs[i], lo, hi), *y = rows_of(ys[i], lo, hi);
    clt_tensor_release(xs[i]);
    clt_tensor_release(ys[i]);
    xs[i] = x;
    ys[i] = y;
  }

  /* The model: zeros, on this rank's device, the same on every rank. */
  int64_t sw[2] = {1, 2}, sb[1] = {1};
  clt_tensor *w, *b;
  check(clt_zeros(CLT_F32, 2, sw, dev, &w), "clt_zeros(weight)");
  check(clt_zeros(CLT_F32, 1, sb, dev, &b), "clt_zeros(bias)");

  const double lr = LR;
  for (int epoch = 0; epoch < EPOCHS; epoch++) {
    clt_tensor *loss_sum; /* this rank's share of the epoch's summed batch losses */
    check(clt_zeros(CLT_F32, 0, NULL, dev, &loss_sum), "clt_zeros(loss)");
    for (int i = 0; i < BATCHES; i++) {
      clt_tensor *x, *y, *pred, *err, *sq, *sse, *share, *errt, *gw, *gb, *step;
      check(clt_to(xs[i], dev, &x), "clt_to(x)"); /* the shard goes to the device */
      check(clt_to(ys[i], dev, &y), "clt_to(y)");
      check(clt_linear(x, w, b, &pred), "clt_linear");
      check(clt_sub(pred, y, &err), "clt_sub"); /* (rows, 1) */
      check(clt_mul(err, err, &sq), "clt_mul");
      check(clt_sum(sq, &sse), "clt_sum"); /* this shard's squared errors */
      check(clt_mul_scalar(sse, 1.0 / BATCH, &share), "clt_mul_scalar(loss)"); /* of the mean */
      check(clt_add_(loss_sum, share), "clt_add_(loss)");
      /* The shard's sums of err^T x and err; their sums over the ranks are the batch's. */
      check(clt_transpose(err, 0, 1, &errt), "clt_transpose");
      check(clt_matmul(errt, x, &gw), "clt_matmul");     /* (1, 2) */
      check(clt_sum_dim(err, 0, 0, &gb), "clt_sum_dim"); /* (1,) */
      check(clt_mpi_allreduce(gw, CLT_MPI_SUM, MPI_COMM_WORLD), "clt_mpi_allreduce(gw)");
      check(clt_mpi_allreduce(gb, CLT_MPI_SUM, MPI_COMM_WORLD), "clt_mpi_allreduce(gb)");
      /* d loss / d w = 2/B err^T x; d loss / d b = 2/B sum(err), as in train_linear */
      check(clt_mul_scalar(gw, lr * 2.0 / BATCH, &step), "clt_mul_scalar(w)");
      check(clt_sub_(w, step), "clt_sub_(w)");
      clt_tensor_release(step);
      check(clt_mul_scalar(gb, lr * 2.0 / BATCH, &step), "clt_mul_scalar(b)");
      check(clt_sub_(b, step), "clt_sub_(b)");
      clt_tensor *objs[] = {x, y, pred, err, sq, sse, share, errt, gw, gb, step};
      for (size_t k = 0; k < sizeof objs / sizeof objs[0]; k++)
        clt_tensor_release(objs[k]);
    }
    check(clt_mpi_allreduce(loss_sum, CLT_MPI_SUM, MPI_COMM_WORLD), "clt_mpi_allreduce(loss)");
    double total;
    check(clt_item(loss_sum, &total), "clt_item"); /* one number home per epoch */
    if (rank == 0)
      fprintf(out, "epoch %d: loss %.6f\n", epoch + 1, total / BATCHES);
    clt_tensor_release(loss_sum);
  }

  float wv[2], bv[1];
  check(clt_tensor_read(w, wv, sizeof wv), "clt_tensor_read(w)");
  check(clt_tensor_read(b, bv, sizeof bv), "clt_tensor_read(b)");
  if (rank == 0) {
    fprintf(out, "weight: [%.4f, %.4f] (true [%.1f, %.1f])\n", wv[0], wv[1], W_TRUE0, W_TRUE1);
    fprintf(out, "bias:   %.4f (true %.1f)\n", bv[0], B_TRUE);
    if (weights_only)
      printf("%.9g\n%.9g\n%.9g\n", wv[0], wv[1], bv[0]);
  }
  /* Every rank took the same steps: check that the models agree exactly. */
  float mine[3] = {wv[0], wv[1], bv[0]}, lowest[3], highest[3];
  MPI_Allreduce(mine, lowest, 3, MPI_FLOAT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(mine, highest, 3, MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
  int same = memcmp(lowest, highest, sizeof lowest) == 0;
  if (!same && rank == 0)
    fprintf(stderr, "mpi_linear: the ranks' models differ\n");
  int ok = same && wv[0] > 1.95f && wv[0] < 2.05f && wv[1] > -3.45f && wv[1] < -3.35f &&
           bv[0] > 4.15f && bv[0] < 4.25f;

  for (int i = 0; i < BATCHES; i++) {
    clt_tensor_release(xs[i]);
    clt_tensor_release(ys[i]);
  }
  clt_tensor_release(w);
  clt_tensor_release(b);
  MPI_Finalize();
  return ok ? 0 : 1;
}
