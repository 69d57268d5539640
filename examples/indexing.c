/* SPDX-License-Identifier: MIT */
/* indexing.c - indexing and slicing, the way section 2.1 ("Data Manipulation") of Dive into Deep
 * Learning walks through them, on the default device: views (X[-1], X[1:3]), writes through
 * views (X[1, 2] = 17, X[0:2, :] = 12), cat, and the in-place forms that keep a tensor's memory
 * (Z[:] = X + Y, X += Y). Each step prints the PyTorch line it stands for, then the tensor.
 *
 *   $ ./examples/indexing                   # the first GPU, else cpu
 *   $ CLT_DEVICE=cl:0 ./examples/indexing   # any device by name
 *
 * Views copy nothing: X[-1] and X[1:3] share X's memory, so a write through one is seen through
 * the other (docs/views.md).
 */
#include <clt.h>

#include <stdio.h>
#include <stdlib.h>

/* Every call is checked: on failure, print what clt says and stop. */
static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "indexing: %s failed: %s\n  %s\n", what, clt_status_name(s), clt_last_error());
    exit(1);
  }
}

/* Prints the Python line, then the tensor. */
static void show(const char *python, const clt_tensor *t) {
  printf(">>> %s\n", python);
  check(clt_print(t), "clt_print");
}

int main(void) {
  clt_device *dev = clt_device_default(); /* $CLT_DEVICE, else the first GPU, else cpu */
  printf("device: %s\n", clt_device_name(dev));

  /* X = torch.arange(12, dtype=torch.float32).reshape((3, 4)) */
  clt_tensor *x12, *X;
  check(clt_arange(0, 12, 1, CLT_F32, dev, &x12), "clt_arange");
  check(clt_reshape(x12, 2, (const int64_t[]){3, 4}, &X), "clt_reshape"); /* a view of x12 */
  clt_tensor_release(x12);                                                /* X keeps it alive */
  show("X = torch.arange(12, dtype=torch.float32).reshape((3, 4))", X);

  /* Y = torch.tensor([[2.0, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]]) */
  static const float y_host[12] = {2, 1, 4, 3, 1, 2, 3, 4, 4, 3, 2, 1};
  clt_tensor *Y;
  check(clt_from_host(y_host, CLT_F32, 2, (const int64_t[]){3, 4}, dev, &Y), "clt_from_host");
  show("Y = torch.tensor([[2.0, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])", Y);

  /* Concatenation along rows and along columns: new tensors. */
  clt_tensor *XY0, *XY1;
  clt_tensor *xy[2] = {X, Y};
  check(clt_cat(2, xy, 0, &XY0), "clt_cat(dim 0)");
  show("torch.cat((X, Y), dim=0)", XY0);
  check(clt_cat(2, xy, 1, &XY1), "clt_cat(dim 1)");
  show("torch.cat((X, Y), dim=1)", XY1);

  /* X[-1]: the last row; X[1:3]: the second and third rows. Both are views of X. */
  clt_tensor *last, *rows;
  check(clt_select(X, 0, -1, &last), "clt_select(X, 0, -1)");
  show("X[-1]", last);
  check(clt_slice(X, 0, 1, 3, 1, &rows), "clt_slice(X, 0, 1, 3, 1)");
  show("X[1:3]", rows);

  /* X[1, 2] = 17: write one element through a 0-d view. */
  clt_tensor *row1, *x12_;
  check(clt_select(X, 0, 1, &row1), "clt_select(X, 0, 1)");
  check(clt_select(row1, 0, 2, &x12_), "clt_select(X[1], 0, 2)");
  check(clt_fill_(x12_, 17), "clt_fill_(X[1, 2], 17)");
  show("X[1, 2] = 17; X", X);

  /* X[0:2, :] = 12: fill the first two rows through a view. */
  clt_tensor *top;
  check(clt_slice(X, 0, 0, 2, 1, &top), "clt_slice(X, 0, 0, 2, 1)");
  check(clt_fill_(top, 12), "clt_fill_(X[0:2, :], 12)");
  show("X[0:2, :] = 12; X", X);
  show("X[1:3]  # the view made earlier sees the writes", rows);

  /* Z = torch.zeros_like(Y); Z[:] = X + Y: Z[:] is a view of all of Z, and clt_copy writes the
   * sum into Z's own memory (the book shows it with id(Z), the same before and after).
   * clt_add_out(X, Y, Z) does the same without the temporary sum. */
  clt_tensor *Z, *Z_all, *sum;
  check(clt_zeros(CLT_F32, 2, (const int64_t[]){3, 4}, dev, &Z), "clt_zeros");
  check(clt_slice(Z, 0, 0, CLT_SLICE_END, 1, &Z_all), "clt_slice(Z, 0, 0, end, 1)");
  check(clt_add(X, Y, &sum), "clt_add(X, Y)");
  check(clt_copy(Z_all, sum), "clt_copy(Z[:], X + Y)");
  show("Z = torch.zeros_like(Y); Z[:] = X + Y; Z", Z);

  /* X += Y: in place, X keeps its memory (and X[1:3] still looks into it). */
  check(clt_add_(X, Y), "clt_add_(X, Y)");
  show("X += Y; X", X);
  show("X[1:3]", rows);

  clt_tensor_release(X);
  clt_tensor_release(Y);
  clt_tensor_release(XY0);
  clt_tensor_release(XY1);
  clt_tensor_release(last);
  clt_tensor_release(rows);
  clt_tensor_release(row1);
  clt_tensor_release(x12_);
  clt_tensor_release(top);
  clt_tensor_release(Z);
  clt_tensor_release(Z_all);
  clt_tensor_release(sum);
  return 0;
}
