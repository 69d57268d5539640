/* SPDX-License-Identifier: MIT */
/* matmul.cl - C = A x B for row-major matrices, one product per batch entry (the third
 * dimension of the range), in local-memory tiles (the register-blocked scheme of Cedric
 * Nugteren's "OpenCL SGEMM tuning" tutorial, kernel 3). Used where neither CLBlast nor a host
 * BLAS serves the device (lib/opencl/matmul.c).
 *
 * Defines, set by lib/opencl/matmul.c: NAME (matmul_f32), T (float or double), TS (tile edge),
 * WPT (rows of C per work-item; divides TS). Local size (TS, TS / WPT); global size
 * (n rounded up to TS, m rounded up to TS then divided by WPT, batch).
 */
#define RTS (TS / WPT)

__kernel void CLT_CAT(NAME, _tiled)(__global const T *restrict a, __global const T *restrict b,
                                    __global T *restrict c, int m, int n, int k, long sa,
                                    long sb) {
  const int lc = get_local_id(0), lr = get_local_id(1);
  const int col = get_group_id(0) * TS + lc, row0 = get_group_id(1) * TS + lr;
  const long batch = get_global_id(2);
  a += batch * sa;
  b += batch * sb;
  c += batch * (long)m * n;
  __local T as[TS][TS];
  __local T bs[TS][TS];
  T acc[WPT];
  for (int w = 0; w < WPT; w++)
    acc[w] = 0;
  for (int t = 0; t < k; t += TS) {
    for (int w = 0; w < WPT; w++) {
      int r = lr + w * RTS;
      int arow = get_group_id(1) * TS + r, acol = t + lc, brow = t + r;
      as[r][lc] = (arow < m && acol < k) ? a[(long)arow * k + acol] : (T)0;
      bs[r][lc] = (brow < k && col < n) ? b[(long)brow * n + col] : (T)0;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p = 0; p < TS; p++) {
      T bv = bs[p][lc];
      for (int w = 0; w < WPT; w++)
        acc[w] += as[lr + w * RTS][p] * bv;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int w = 0; w < WPT; w++) {
    int row = row0 + w * RTS;
    if (row < m && col < n)
      c[(long)row * n + col] = acc[w];
  }
}
