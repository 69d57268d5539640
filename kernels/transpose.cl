/* transpose.cl - materialized transposes: out is in with two dimensions swapped. Elements move
 * as words of their size, whatever the dtype.
 *
 * Defines, set by lib/opencl/transpose.c: NAME (transpose_x32), T (uchar, uint or ulong).
 * in is (outer, n0, mid, n1, inner) and out (outer, n1, mid, n0, inner), both contiguous; each
 * work-item computes its output elements' sources (CLT_FOR_EACH, see common.cl). Remainders are
 * written as x - (x / n) * n: for x / n next to x % n, clang emits an LLVM `freeze`, which
 * Oclgrind's uninitialized-value checker cannot run ("Unsupported instruction: freeze"); the
 * division is the same either way.
 */
__kernel void NAME(__global T *restrict out, __global const T *restrict in, ulong numel,
                   ulong step, ulong n0, ulong mid, ulong n1, ulong inner) {
  CLT_FOR_EACH(i, numel, step) {
    ulong r = i / inner, c = i - r * inner;
    ulong r0 = r / n0, j0 = r - r0 * n0;
    ulong r1 = r0 / mid, md = r0 - r1 * mid;
    ulong o = r1 / n1, j1 = r1 - o * n1;
    out[i] = in[(((o * n0 + j0) * mid + md) * n1 + j1) * inner + c];
  }
}
