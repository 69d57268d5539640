/* transpose.cl - materialized transposes: out is in with two dimensions swapped. Elements move
 * as words of their size, whatever the dtype.
 *
 * Defines, set by lib/opencl/transpose.c: NAME (transpose_x32), T (uchar, uint or ulong).
 * in is (outer, n0, mid, n1, inner) and out (outer, n1, mid, n0, inner), both contiguous; each
 * work-item computes its output elements' sources (CLT_FOR_EACH, see common.cl).
 */
__kernel void NAME(__global T *restrict out, __global const T *restrict in, ulong numel,
                   ulong step, ulong n0, ulong mid, ulong n1, ulong inner) {
  CLT_FOR_EACH(i, numel, step) {
    ulong c = i % inner, r = i / inner;
    ulong j0 = r % n0;
    r /= n0;
    ulong md = r % mid;
    r /= mid;
    ulong j1 = r % n1, o = r / n1;
    out[i] = in[(((o * n0 + j0) * mid + md) * n1 + j1) * inner + c];
  }
}
