/* SPDX-License-Identifier: MIT */
/* index.cl - index kernels: with ARANGE defined, clt_arange's values; otherwise the gather along
 * one dimension.
 *
 * arange (lib/opencl/index.c): NAME (arange_i64, ...), T the element type (long, int, uchar):
 * out[i] = (T)(start + (long)i * step), exact (start and step are integers for these dtypes, and
 * every value fits: clt_arange checked). Float dtypes are made on the host, whose rounding of
 * start + i * step a device cannot be held to: PoCL contracts it into an fma despite
 * FP_CONTRACT OFF.
 *
 * index_select: out, (outer, k, inner), takes in,
 * (outer, size, inner), at the indices idx[0 .. k) of its middle dimension. Elements move as words
 * of their size, whatever the dtype.
 *
 * Defines, set by lib/opencl/index.c: NAME (index_select_x32_i64), T (uchar, ushort, uint or
 * ulong), TI (int or long). The indices were checked to lie in [0, size) before the launch; both
 * tensors are contiguous. Remainders are written as x - (x / n) * n: for x / n next to x % n,
 * clang emits an LLVM `freeze`, which Oclgrind's uninitialized-value checker cannot run
 * ("Unsupported instruction: freeze"); the division is the same either way.
 */
#ifdef ARANGE
__kernel void NAME(__global T *restrict out, ulong numel, ulong step, long start, long stride) {
  CLT_FOR_EACH(i, numel, step) { out[i] = (T)(start + (long)i * stride); }
}
#else
__kernel void NAME(__global T *restrict out, __global const T *restrict in,
                   __global const TI *restrict idx, ulong numel, ulong step, ulong k, ulong size,
                   ulong inner) {
  CLT_FOR_EACH(i, numel, step) {
    ulong r = i / inner, c = i - r * inner;
    ulong o = r / k, j = r - o * k;
    out[i] = in[(o * size + (ulong)idx[j]) * inner + c];
  }
}
#endif
