/* SPDX-License-Identifier: MIT */
/* heat_stencil.c - a kernel of your own on clt tensors: the 2-D heat equation, iterated with the
 * 5-point stencil of examples/heat_stencil.cl, which the program loads from that file
 * (clt_kernel_create_file). Two tensors take turns as input and output (double buffering); every
 * step is an asynchronous launch that clt orders after the previous one by the tensors' events,
 * so the loop never waits. Then clt's own operations run on the result (clt_mean, clt_max), and
 * the grid is checked against the same steps computed here on the host.
 *
 *   $ ./examples/heat_stencil                                  # the source tree's .cl file
 *   $ ./examples/heat_stencil path/to/heat_stencil.cl 128 100  # file, grid size, steps
 *   $ CLT_DEVICE=cl:1 ./examples/heat_stencil                  # any OpenCL device by name
 *
 * A kernel runs on an OpenCL device: when the default device is the host (no GPU), the first
 * OpenCL device is used. docs/interop.md explains the calls.
 */
#include <clt.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef HEAT_STENCIL_CL /* the build defines it as the source tree's copy */
#define HEAT_STENCIL_CL "examples/heat_stencil.cl"
#endif

static void check(clt_status s, const char *what) {
  if (s != CLT_OK) {
    fprintf(stderr, "heat_stencil: %s failed: %s\n  %s\n", what, clt_status_name(s),
            clt_last_error());
    exit(1);
  }
}

/* The initial temperature: a hot square in the middle, a warm top edge, cold elsewhere. */
static void initial(float *u, int nx, int ny) {
  for (int y = 0; y < ny; y++)
    for (int x = 0; x < nx; x++) {
      float t = 0.0f;
      if (y == 0)
        t = 0.5f;
      if (x > nx / 3 && x < 2 * nx / 3 && y > ny / 3 && y < 2 * ny / 3)
        t = 1.0f;
      u[y * nx + x] = t;
    }
}

/* One step on the host, the same arithmetic as the kernel. */
static void host_step(const float *u, float *v, int nx, int ny, float alpha) {
  for (int y = 0; y < ny; y++)
    for (int x = 0; x < nx; x++) {
      int k = y * nx + x;
      if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
        v[k] = u[k];
        continue;
      }
      float lap = (u[k - 1] + u[k + 1]) + (u[k - nx] + u[k + nx]) - 4.0f * u[k];
      v[k] = u[k] + alpha * lap;
    }
}

int main(int argc, char **argv) {
  const char *path = argc > 1 ? argv[1] : HEAT_STENCIL_CL;
  int n = argc > 2 ? atoi(argv[2]) : 64, steps = argc > 3 ? atoi(argv[3]) : 50;
  if (n < 3 || n > 8192 || steps < 1) {
    fprintf(stderr, "usage: heat_stencil [kernel.cl [grid size >= 3 [steps >= 1]]]\n");
    return 2;
  }
  clt_device *dev = clt_device_default(); /* $CLT_DEVICE, else the first GPU, else cpu */
  if (clt_device_is_host(dev)) {
    if (clt_device_count() == 0) {
      printf("heat_stencil: no OpenCL device, and a kernel runs on one: nothing to do\n");
      return 0;
    }
    dev = clt_device_at(0);
  }
  int nx = n, ny = n;
  float alpha = 0.2f; /* stable for alpha <= 0.25 */
  size_t cells = (size_t)nx * (size_t)ny;
  float *h0 = malloc(cells * sizeof *h0), *h1 = malloc(cells * sizeof *h1);
  if (!h0 || !h1) {
    fprintf(stderr, "heat_stencil: out of memory\n");
    return 1;
  }
  initial(h0, nx, ny);

  /* The two buffers on the device: u holds the current step, v receives the next. */
  const int64_t shape[2] = {ny, nx};
  clt_tensor *u, *v;
  check(clt_from_host(h0, CLT_F32, 2, shape, dev, &u), "clt_from_host");
  check(clt_empty(CLT_F32, 2, shape, dev, &v), "clt_empty");

  clt_kernel *k;
  check(clt_kernel_create_file(path, "heat_step", "-cl-std=CL1.2", &k), "clt_kernel_create_file");
  check(clt_kernel_set_scalar(k, 2, &nx, sizeof nx), "clt_kernel_set_scalar(nx)");
  check(clt_kernel_set_scalar(k, 3, &ny, sizeof ny), "clt_kernel_set_scalar(ny)");
  check(clt_kernel_set_scalar(k, 4, &alpha, sizeof alpha), "clt_kernel_set_scalar(alpha)");
  size_t local[2] = {8, 8};
  size_t global[2] = {((size_t)nx + 7) / 8 * 8, ((size_t)ny + 7) / 8 * 8};
  for (int s = 0; s < steps; s++) {
    check(clt_kernel_set_tensor(k, 0, u, CLT_READ), "clt_kernel_set_tensor(u)");
    check(clt_kernel_set_tensor(k, 1, v, CLT_WRITE), "clt_kernel_set_tensor(v)");
    check(clt_kernel_launch(k, 2, global, local), "clt_kernel_launch"); /* does not wait */
    clt_tensor *t = u; /* swap: the output is the next step's input */
    u = v;
    v = t;
  }
  clt_kernel_release(k); /* the launches keep running; k's references to u and v go */

  /* clt's own operations on the kernel's result: ordered after the last step, no sync. */
  clt_tensor *mean, *max;
  check(clt_mean(u, &mean), "clt_mean");
  check(clt_max(u, &max), "clt_max");
  double m, mx;
  check(clt_item(mean, &m), "clt_item");
  check(clt_item(max, &mx), "clt_item");

  /* The same steps on the host. */
  for (int s = 0; s < steps; s++) {
    host_step(h0, h1, nx, ny, alpha);
    float *t = h0;
    h0 = h1;
    h1 = t;
  }
  check(clt_tensor_read(u, h1, cells * sizeof *h1), "clt_tensor_read");
  double err = 0, hmean = 0;
  for (size_t i = 0; i < cells; i++) {
    err = fmax(err, fabs((double)h1[i] - (double)h0[i]));
    hmean += h0[i];
  }
  hmean /= (double)cells;

  printf("heat_stencil: %d x %d grid, %d steps of %s's heat_step on %s\n", nx, ny, steps, path,
         clt_device_name(dev));
  printf("  mean temperature %.6f (host %.6f), max %.6f, centre %.6f\n", m, hmean, mx,
         h1[(size_t)(ny / 2) * (size_t)nx + (size_t)(nx / 2)]);
  printf("  largest difference from the host computation: %.3g\n", err);
  bool ok = err <= 1e-4 && fabs(m - hmean) <= 1e-4;
  printf("  %s\n", ok ? "ok" : "MISMATCH");

  clt_tensor_release(mean);
  clt_tensor_release(max);
  clt_tensor_release(u);
  clt_tensor_release(v);
  free(h0);
  free(h1);
  return ok ? 0 : 1;
}
