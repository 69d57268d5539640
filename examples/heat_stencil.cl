/* SPDX-License-Identifier: MIT */
/* heat_stencil.cl - one explicit Euler step of the 2-D heat equation on an nx x ny grid, the
 * 5-point stencil of examples/heat_stencil.c: v = u + alpha * (the four neighbours - 4 u), with
 * the boundary held fixed (Dirichlet). OpenCL C 1.2; one work-item per grid point, row-major
 * (x is the fast index). The grid may be narrower than the range (whole work-groups): items
 * outside it do nothing. */
__kernel void heat_step(__global const float *u, __global float *v, int nx, int ny,
                        float alpha) {
  int x = (int)get_global_id(0), y = (int)get_global_id(1);
  if (x >= nx || y >= ny)
    return;
  int k = y * nx + x;
  if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) {
    v[k] = u[k];
    return;
  }
  float lap = (u[k - 1] + u[k + 1]) + (u[k - nx] + u[k + nx]) - 4.0f * u[k];
  v[k] = u[k] + alpha * lap;
}
