/* SPDX-License-Identifier: MIT */
/* reduce.cl - reductions: sum, mean, max, min, argmax.
 *
 * Whole tensor: two passes, per-work-group partials then one group combining them, in tree
 * order. Along a dimension (the input seen as (outer, r, inner)): one work-item per result
 * element. Every run of additions a work-item makes is pairwise (clt_sum_run), so the rounding
 * error of a sum grows with log n, as with NumPy's pairwise summation.
 *
 * Defines, set by lib/opencl/reduce.c: NAME (sum_f32), T (input type), ACC (accumulator: T,
 * or ulong for integer sums so that overflow wraps), TO (result type), RED_KIND (0 sum, 1 mean,
 * 2 max, 3 min, 4 argmax), CLT_FLOAT (T is a float type), RED_INIT (the identity as ACC).
 * The whole-tensor kernels need a power-of-two local size.
 */
#define CLT_BLOCK 128

#if RED_KIND <= 1
#define RED_STEP(acc, ai, x, i) acc += (ACC)(x)
#define RED_MERGE(acc, ai, b, bi) acc += (b)

/* The sum of p[i], p[i + stride], ... below end, pairwise: blocks of CLT_BLOCK elements, each
 * added in eight independent lanes (a fixed tree that lets the loop vectorize), then the block
 * sums merged like a binary counter, so that block k is added to a partner of its own size when
 * bit 0 of k is set, the pair to the previous pair when bit 1 is, and so on. The error of the
 * result grows with log2 of the number of blocks, not with the number itself as a chain of
 * additions would; the counter costs one addition per block. stack[t] holds a sum of 2^t
 * blocks (2^57 blocks of 128 exceed any tensor). S is the element type, SPACE its address
 * space. */
#define CLT_SUM_RUN(name, S, SPACE)                                                                \
  ACC name(SPACE const S *restrict p, ulong i, ulong end, ulong stride) {                          \
    ACC stack[64];                                                                                 \
    uint top = 0;                                                                                  \
    for (ulong k = 0; i < end; k++) {                                                              \
      ulong e = min(i + CLT_BLOCK * stride, end);                                                  \
      ACC s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;                          \
      for (; i + 7 * stride < e; i += 8 * stride) {                                                \
        s0 += (ACC)p[i];                                                                           \
        s1 += (ACC)p[i + stride];                                                                  \
        s2 += (ACC)p[i + 2 * stride];                                                              \
        s3 += (ACC)p[i + 3 * stride];                                                              \
        s4 += (ACC)p[i + 4 * stride];                                                              \
        s5 += (ACC)p[i + 5 * stride];                                                              \
        s6 += (ACC)p[i + 6 * stride];                                                              \
        s7 += (ACC)p[i + 7 * stride];                                                              \
      }                                                                                            \
      ACC s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7));                                   \
      for (; i < e; i += stride)                                                                   \
        s += (ACC)p[i];                                                                            \
      for (ulong m = k; m & 1; m >>= 1)                                                            \
        s = stack[--top] + s;                                                                      \
      stack[top++] = s;                                                                            \
    }                                                                                              \
    ACC s = 0;                                                                                     \
    while (top > 0)                                                                                \
      s = stack[--top] + s;                                                                        \
    return s;                                                                                      \
  }
CLT_SUM_RUN(clt_sum_run, T, __global)
CLT_SUM_RUN(clt_sum_run_acc, ACC, __global)
#else
#if RED_KIND == 3
#define RED_WINS(x, y) ((x) < (y))
#else
#define RED_WINS(x, y) ((x) > (y))
#endif
#if CLT_FLOAT
/* NaN beats everything; among equals (NaN included) the first index wins. */
#define RED_BETTER(x, xi, y, yi)                                                                   \
  (RED_WINS(x, y) || (isnan(x) && !isnan(y)) || (((x) == (y) || (isnan(x) && isnan(y))) && (xi) < (yi)))
#else
#define RED_BETTER(x, xi, y, yi) (RED_WINS(x, y) || ((x) == (y) && (xi) < (yi)))
#endif
#define RED_STEP(acc, ai, x, i)                                                                    \
  if (RED_BETTER((ACC)(x), (long)(i), acc, ai)) {                                                  \
    acc = (ACC)(x);                                                                                \
    ai = (long)(i);                                                                                \
  }
#define RED_MERGE(acc, ai, b, bi)                                                                  \
  if (RED_BETTER(b, bi, acc, ai)) {                                                                \
    acc = (b);                                                                                     \
    ai = (bi);                                                                                     \
  }
#endif

/* The result from the accumulator, its index and the reduced count. */
#if RED_KIND == 1
#define RED_RESULT(acc, ai, count) ((TO)((acc) / (ACC)(count)))
#elif RED_KIND == 4
#define RED_RESULT(acc, ai, count) ((TO)(ai))
#else
#define RED_RESULT(acc, ai, count) ((TO)(acc))
#endif

/* Indices start past every real one, so that a real element always beats the identity. */
#define RED_NO_INDEX ((long)0x7fffffffffffffffL)

/* Combines a work-group's (value, index) pairs in local memory; the result lands in slot 0. */
void clt_reduce_group(__local ACC *sv, __local long *si) {
  size_t lid = get_local_id(0);
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s >>= 1) {
    if (lid < s) {
      ACC acc = sv[lid];
      long ai = si[lid];
      RED_MERGE(acc, ai, sv[lid + s], si[lid + s]);
      sv[lid] = acc;
      si[lid] = ai;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
}

__kernel void CLT_CAT(NAME, _partial)(__global const T *restrict in, ulong n, ulong step,
                                      __global ACC *restrict pv, __global long *restrict pi,
                                      __local ACC *sv, __local long *si) {
  ACC acc = RED_INIT;
  long ai = RED_NO_INDEX;
#if CLT_CHUNKED
  ulong start = (ulong)get_global_id(0) * step, end = min(start + step, n);
#if RED_KIND <= 1
  acc = clt_sum_run(in, start, end, 1);
#else
  for (ulong i = start; i < end; i++) {
    RED_STEP(acc, ai, in[i], i);
  }
#endif
#elif RED_KIND <= 1
  acc = clt_sum_run(in, get_global_id(0), n, step);
#else
  CLT_FOR_EACH(i, n, step) { RED_STEP(acc, ai, in[i], i); }
#endif
  size_t lid = get_local_id(0);
  sv[lid] = acc;
  si[lid] = ai;
  clt_reduce_group(sv, si);
  if (lid == 0) {
    pv[get_group_id(0)] = sv[0];
    pi[get_group_id(0)] = si[0];
  }
}

__kernel void CLT_CAT(NAME, _final)(__global const ACC *restrict pv, __global const long *restrict pi,
                                    uint np, ulong count, __global TO *restrict out,
                                    __local ACC *sv, __local long *si) {
  size_t lid = get_local_id(0), lsz = get_local_size(0);
  ACC acc = RED_INIT;
  long ai = RED_NO_INDEX;
#if RED_KIND <= 1
  acc = clt_sum_run_acc(pv, lid, np, lsz);
#else
  for (uint i = lid; i < np; i += lsz) {
    RED_MERGE(acc, ai, pv[i], pi[i]);
  }
#endif
  sv[lid] = acc;
  si[lid] = ai;
  clt_reduce_group(sv, si);
  if (lid == 0)
    out[0] = RED_RESULT(sv[0], si[0], count);
}

/* Along a dimension: result element g = (o, j) reduces in[o][0..r)[j]. */
__kernel void CLT_CAT(NAME, _axis)(__global const T *restrict in, __global TO *restrict out,
                                   ulong outer, ulong r, ulong inner) {
  ulong g = get_global_id(0);
  if (g >= outer * inner)
    return;
  /* j = g - o * inner rather than g % inner: the same instructions, since compilers turn a
   * division and a remainder by the same divisor into this; written out, LLVM emits no `freeze`,
   * which Oclgrind 21.10 cannot run with OCLGRIND_UNINITIALIZED (tests/oclgrind/uninit_freeze.c). */
  ulong o = g / inner, j = g - o * inner;
  __global const T *p = in + o * r * inner + j;
  ACC acc = RED_INIT;
  long ai = RED_NO_INDEX;
#if RED_KIND <= 1
  acc = clt_sum_run(p, 0, r * inner, inner);
#else
  for (ulong k = 0; k < r; k++) {
    RED_STEP(acc, ai, p[k * inner], k);
  }
#endif
  out[g] = RED_RESULT(acc, ai, r);
}
