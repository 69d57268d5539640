/* SPDX-License-Identifier: MIT */
/* elementwise.cl - every elementwise operation: one row of include/clt_ops.h each, whose
 * expression arrives here as OP(a, b, c).
 *
 * Defines, set by lib/opencl/elementwise.c:
 *   NAME       kernel name (add_f32)
 *   ARITY      1, 2 or 3
 *   TA, TB, TK operand types, in order k (ternary only), a, b: add(a, b) reads TA and TB;
 *              where(k, a, b) and clamp(k, a, b) read TK, TA and TB
 *   TP         the promoted dtype the operands are converted to first
 *   TC         the type the expression runs in: TP, or its unsigned twin for integer ops that
 *              wrap around (add, sub, mul, neg)
 *   TKP, TKC   the ternary's first operand is converted to TKP, then TKC for the expression:
 *              uchar and uchar for where's condition, else TP and TC
 *   CLT_FLOAT  1 when TP is a floating type
 *   TO         the result type; STORE(x) converts to it (saturating from float to integer,
 *              x != 0 for bool)
 *   OP(a,b,c)  the expression
 *   LOAD_A(p,i), LOAD_B(p,i), LOAD_K(p,i)  element i of an operand: p[i], or for f16 and bf16
 *              their value as float (the operand types are then half and ushort)
 *   STORE_AT(p,i,x)  stores x as element i of the result: p[i] = STORE(x), or rounded to f16
 *              (clt_store_f16) or bf16
 *   CLT_TILED  1 in the programs of NAME_tiled (below), 0 in the others
 */

/* f16 and bf16: kernels/common.cl's clt_bf16_to_f32, clt_store_f16, clt_round_f16, ... */
#if !CLT_FLOAT
/* The integer helpers, kernels/common.cl's, for this compute type */
CLT_DEFINE_IPOW(clt_ipow, TC, UTC)
#define CLT_IPOW(a, b) clt_ipow(a, b)
#define CLT_IABS(a) CLT_IABS_AS(TC, a)
#endif

#if ARITY == 1
/* Contiguous operand and result (at element offsets oo and oa): the fast path. */
__kernel void NAME(__global TO *restrict out, __global const TA *restrict a, ulong n, ulong step,
                   ulong oo, ulong oa) {
  CLT_FOR_EACH(i, n, step) {
    TC x = (TC)(TP)LOAD_A(a, oa + i);
    STORE_AT(out, oo + i, OP(x, x, x));
  }
}
#endif

#if ARITY == 2
/* Same shapes, no broadcasting, contiguous operands and result (at element offsets): the fast
 * path. */
__kernel void NAME(__global TO *restrict out, __global const TA *restrict a,
                   __global const TB *restrict b, ulong n, ulong step, ulong oo, ulong oa,
                   ulong ob) {
  CLT_FOR_EACH(i, n, step) {
    TC x = (TC)(TP)LOAD_A(a, oa + i);
    TC y = (TC)(TP)LOAD_B(b, ob + i);
    STORE_AT(out, oo + i, OP(x, y, y));
  }
}
#endif

/* One element of the strided kernel: the result's element at io from the operands' at i0, i1,
 * i2 (a ternary's operands are k, a, b; a binary's a, b; a unary's a). */
#if ARITY == 1
#define CLT_STRIDED_ONE(io, i0, i1, i2)                                                            \
  do {                                                                                             \
    TC x = (TC)(TP)LOAD_A(a, i0);                                                                  \
    STORE_AT(out, io, OP(x, x, x));                                                                \
  } while (0)
#elif ARITY == 2
#define CLT_STRIDED_ONE(io, i0, i1, i2)                                                            \
  do {                                                                                             \
    TC x = (TC)(TP)LOAD_A(a, i0);                                                                  \
    TC y = (TC)(TP)LOAD_B(b, i1);                                                                  \
    STORE_AT(out, io, OP(x, y, y));                                                                \
  } while (0)
#else
#define CLT_STRIDED_ONE(io, i0, i1, i2)                                                            \
  do {                                                                                             \
    TKC x = (TKC)(TKP)LOAD_K(k, i0);                                                               \
    TC y = (TC)(TP)LOAD_A(a, i1);                                                                  \
    TC z = (TC)(TP)LOAD_B(b, i2);                                                                  \
    STORE_AT(out, io, OP(x, y, z));                                                                \
  } while (0)
#endif

/* Any strides (views) and broadcasting, over up to 8 dimensions: element i of the result, as a
 * C-order index (c_0, ..., c_ndim-1) of g.shape, is at off + sum c_d * stride_d in the result and
 * in each operand. A ternary's operands are k, a, b (strides s0, s1, s2), a binary's a, b, a
 * unary's a. */
__kernel void CLT_CAT(NAME, _strided)(__global TO *restrict out,
#if ARITY == 3
                                      __global const TK *restrict k,
#endif
                                      __global const TA *restrict a,
#if ARITY >= 2
                                      __global const TB *restrict b,
#endif
                                      ulong n, ulong step, int ndim, clt_strided_t g) {
#if CLT_CHUNKED
  /* CPU devices: this work-item's chunk of the result, in C order, is split into coordinates
   * once, at its first element, and then walked row by row (along the last dimension), the
   * coordinates carried like an odometer between rows. Splitting every element's index (below)
   * costs two 64-bit divisions per element and dimension: 5 times a plain copy (bench/views
   * --why). */
  ulong i = (ulong)get_global_id(0) * step, end = min(i + step, n);
  if (i >= end)
    return;
  long io = g.off[0], i0 = g.off[1], i1 = g.off[2], i2 = g.off[3];
  if (ndim == 0) {
    CLT_STRIDED_ONE(io, i0, i1, i2);
    return;
  }
  long c[8];
  ulong rem = i;
  for (int d = ndim - 1; d >= 0; d--) {
    ulong q = rem / (ulong)g.shape[d];
    c[d] = (long)(rem - q * (ulong)g.shape[d]);
    rem = q;
    io += c[d] * g.so[d];
    i0 += c[d] * g.s0[d];
    i1 += c[d] * g.s1[d];
    i2 += c[d] * g.s2[d];
  }
  const int last = ndim - 1;
  const long len = g.shape[last], so = g.so[last], s0 = g.s0[last], s1 = g.s1[last],
             s2 = g.s2[last];
  for (;;) {
    long m = min((ulong)(len - c[last]), end - i); /* the rest of this row in the chunk */
    for (long j = 0; j < m; j++)
      CLT_STRIDED_ONE(io + j * so, i0 + j * s0, i1 + j * s1, i2 + j * s2);
    i += (ulong)m;
    if (i >= end)
      return;
    /* the next row: the last coordinate back to 0, a carry into the ones before it */
    io -= c[last] * so;
    i0 -= c[last] * s0;
    i1 -= c[last] * s1;
    i2 -= c[last] * s2;
    c[last] = 0;
    for (int d = last - 1; d >= 0; d--) {
      io += g.so[d];
      i0 += g.s0[d];
      i1 += g.s1[d];
      i2 += g.s2[d];
      if (++c[d] < g.shape[d])
        break;
      io -= c[d] * g.so[d];
      i0 -= c[d] * g.s0[d];
      i1 -= c[d] * g.s1[d];
      i2 -= c[d] * g.s2[d];
      c[d] = 0;
    }
  }
#else
  /* GPUs: a grid-stride loop, each element's index split into coordinates */
  CLT_FOR_EACH(i, n, step) {
    ulong rem = i;
    long io = g.off[0], i0 = g.off[1], i1 = g.off[2], i2 = g.off[3];
    for (int d = ndim - 1; d >= 0; d--) {
      ulong q = rem / (ulong)g.shape[d];
      long c = (long)(rem - q * (ulong)g.shape[d]); /* not %: see kernels/index.cl */
      rem = q;
      io += c * g.so[d];
      i0 += c * g.s0[d];
      i1 += c * g.s1[d];
      i2 += c * g.s2[d];
    }
    CLT_STRIDED_ONE(io, i0, i1, i2);
  }
#endif
}

/* ---- tiles, for operands read across their rows (transposed views) -----------------------
 * The dispatcher (lib/opencl/elementwise.c) sorts the dimensions into the result's memory order
 * and merges them, and comes here when, after that, some operand steps through the last
 * dimension by more than through the one before it (a transposed view: element (r, c) at
 * r + c * rows). Read along the result's rows, such an operand moves to another cache line, and
 * often another page, at every element. Here the last two dimensions (rows R = g.shape[ndim-2],
 * columns C = g.shape[ndim-1]) are cut into tiles, so that the lines an across operand's tile
 * reads are all used while they are in the cache; the dimensions before them (a batch) are
 * split per tile. `units` counts the tiles, over the batch too.
 *
 * Work-items and their tiles:
 *   CPU devices (CLT_CHUNKED): each work-item (work-groups of one) takes `step` consecutive
 *     strips of CLT_STRIP_ROWS x CLT_STRIP_COLS elements, as the host does
 *     (lib/host/elementwise.c, over_strips). The staged operands' part of a strip is first
 *     transposed into local memory (on CPUs, plain memory of the work-group's thread), reading
 *     the operand a source line at a time (4 lines at a time, each along the strip's 32 rows;
 *     4 x 4 blocks through vload4 where the operand is stored as it is staged and steps by 1
 *     down a column: CLT_RAW0..2 from the host); then the strip is computed along the result's
 *     rows, CLT_STRIP_COLS long, the staged operands read from local memory. The buffer's rows
 *     are padded by 16 elements (rows a multiple of 4 KiB apart share a set of the L1 cache).
 *     A 4096 x 4096 transposed f32 add on PoCL (2 threads, CPU time): 34 ms against 55 for the
 *     32 x 32 tiles in 256 x 256 blocks before, 15 for the contiguous add; the transposed copy
 *     29 ms against 33 (a copy of contiguous f32 12; the staging alone, in a raw kernel, 15 to
 *     19: prefetch() did not help on PoCL, and no hardware prefetcher follows the 16 KiB
 *     stride). A device whose local memory cannot hold the buffers (up to 3 x 32 x 1040
 *     elements) runs NAME_strided instead (lib/opencl/elementwise.c asks the kernel).
 *   CLT_PREFETCH (PoCL's CPU devices only: lib/opencl/opencl.c, clt__cl_can_prefetch; other
 *     compilers need not know __builtin_prefetch, and PoCL's prefetch() does nothing), for the
 *     operands staged through vload4 and the unstaged ones read along rows (s_c == 1), both
 *     stored as computed (CLT_RAWp): staging prefetches the source lines CLT_PREFETCH_AHEAD
 *     lines ahead (past the strip's last line into the next strip's, never past column C), and
 *     computing prefetches the next row of the strip of each unstaged operand before a row (the
 *     hardware prefetcher starts afresh on every 4 KiB page, here every row of 1024 f32). The
 *     4096 x 4096 transposed f32 add on PoCL (2 threads, a loaded 2-core machine, paired
 *     medians against the contiguous add): 0.43-0.48x without, 0.53-0.58x with both; either
 *     alone gained little (row prefetch alone 0.43x); 16 or 64 lines ahead, 64 x 1024 or
 *     16 x 2048 strips, prefetching the result's rows and non-temporal stores were no better.
 *   GPUs: a work-group of 256 takes one 16 x 16 tile at a time (grid-stride over the tiles,
 *     `step` work-groups). The operands flagged in `stage` (bit p for operand p: k, a, b for a
 *     ternary) are first read into local memory with neighbouring work-items on neighbouring
 *     elements of the operand (coalesced), then every work-item computes one element of the
 *     result, its row along the work-group (coalesced writes), taking the staged operands from
 *     local memory (the rows are padded to 17 against bank conflicts).
 * Built only into the programs that launch it (CLT_TILED 1, a program of its own), so that the
 * programs of contiguous and strided work do not take its build time. */
#if CLT_TILED
#define CLT_STRIP_ROWS 32 /* lib/opencl/elementwise.c counts the strips and tiles with the same */
#define CLT_STRIP_COLS 1024 /* sizes */
#define CLT_STRIP_STRIDE (CLT_STRIP_COLS + 16)
#define CLT_TILE_GPU 16
#ifndef CLT_PREFETCH
#define CLT_PREFETCH 0
#endif
#define CLT_PREFETCH_AHEAD 32 /* source lines */
#ifndef CLT_RAW0
#define CLT_RAW0 0
#endif
#ifndef CLT_RAW1
#define CLT_RAW1 0
#endif
#ifndef CLT_RAW2
#define CLT_RAW2 0
#endif

/* Operand p's value at element index i, converted as the expression takes it, and its type;
 * the expression over the values v0, v1, v2 of the operands. */
#if ARITY == 3
#define CLT_T0 TKC
#define CLT_LOAD0(i) ((TKC)(TKP)LOAD_K(k, i))
#define CLT_LOAD1(i) ((TC)(TP)LOAD_A(a, i))
#define CLT_LOAD2(i) ((TC)(TP)LOAD_B(b, i))
#define CLT_TILED_OP OP(v0, v1, v2)
#elif ARITY == 2
#define CLT_T0 TC
#define CLT_LOAD0(i) ((TC)(TP)LOAD_A(a, i))
#define CLT_LOAD1(i) ((TC)(TP)LOAD_B(b, i))
#define CLT_TILED_OP OP(v0, v1, v1)
#else
#define CLT_T0 TC
#define CLT_LOAD0(i) ((TC)(TP)LOAD_A(a, i))
#define CLT_TILED_OP OP(v0, v0, v0)
#endif
/* Operand p's buffer and stored type (for CLT_RAWp's vload4). */
#if ARITY == 3
#define CLT_P0 k
#define CLT_P1 a
#define CLT_P2 b
#define CLT_TYPE0 TK
#define CLT_TYPE1 TA
#define CLT_TYPE2 TB
#else
#define CLT_P0 a
#define CLT_P1 b
#define CLT_TYPE0 TA
#define CLT_TYPE1 TB
#endif

__kernel void CLT_CAT(NAME, _tiled)(__global TO *restrict out,
#if ARITY == 3
                                    __global const TK *restrict k,
#endif
                                    __global const TA *restrict a,
#if ARITY >= 2
                                    __global const TB *restrict b,
#endif
                                    ulong units, ulong step, int ndim, int stage,
                                    clt_strided_t g) {
  const int L = ndim - 1; /* ndim >= 2 */
  const long R = g.shape[L - 1], C = g.shape[L];
  const long so_r = g.so[L - 1], so_c = g.so[L], s0_r = g.s0[L - 1], s0_c = g.s0[L];
  const long s1_r = g.s1[L - 1], s1_c = g.s1[L], s2_r = g.s2[L - 1], s2_c = g.s2[L];
#if CLT_CHUNKED
  __local CLT_T0 t0[CLT_STRIP_ROWS * CLT_STRIP_STRIDE];
#if ARITY >= 2
  __local TC t1[CLT_STRIP_ROWS * CLT_STRIP_STRIDE];
#endif
#if ARITY == 3
  __local TC t2[CLT_STRIP_ROWS * CLT_STRIP_STRIDE];
#endif
  const ulong nsr = (ulong)((R + CLT_STRIP_ROWS - 1) / CLT_STRIP_ROWS);
  const ulong nsc = (ulong)((C + CLT_STRIP_COLS - 1) / CLT_STRIP_COLS);
  ulong u = (ulong)get_global_id(0) * step, end = min(u + step, units);
  for (; u < end; u++) {
    /* strip u: column strip, row strip, then the batch index over the dimensions before */
    ulong q = u / nsc;
    const long c0 = (long)(u - q * nsc) * CLT_STRIP_COLS;
    ulong rem = q / nsr;
    const long r0 = (long)(q - rem * nsr) * CLT_STRIP_ROWS;
    long bo = g.off[0], b0 = g.off[1], b1 = g.off[2], b2 = g.off[3];
    for (int d = L - 2; d >= 0; d--) {
      ulong qd = rem / (ulong)g.shape[d];
      long cd = (long)(rem - qd * (ulong)g.shape[d]);
      rem = qd;
      bo += cd * g.so[d];
      b0 += cd * g.s0[d];
      b1 += cd * g.s1[d];
      b2 += cd * g.s2[d];
    }
    const long h = min((long)CLT_STRIP_ROWS, R - r0), w = min((long)CLT_STRIP_COLS, C - c0);
    /* staging: element (r, c) of the strip into buf[r * CLT_STRIP_STRIDE + c], a source line
     * (a column of the strip) at a time; from column c4 on element by element */
#define CLT_STAGE_ANY(buf, LOAD, o_, s_r, s_c, c4)                                                 \
  for (long c = (c4); c < w; c++)                                                                  \
    for (long r = 0; r < h; r++)                                                                   \
      buf[r * CLT_STRIP_STRIDE + c] = LOAD(o_ + r * (s_r) + c * (s_c));
#if CLT_PREFETCH
/* Prefetches the source lines c..c+3 of the strip (h elements from element o_ + c * s_c on, each
 * s_c after the one before), a cache line at a time, when they are in the operand's columns. */
#define CLT_PREFETCH_LINES(p, o_, s_c, c)                                                          \
  if (c0 + (c) + 4 <= C)                                                                           \
    for (int k_ = 0; k_ < 4; k_++)                                                                 \
      for (long b_ = 0; b_ < h * (long)sizeof(*(p)); b_ += 64)                                     \
        __builtin_prefetch((const __global char *)((p) + (o_) + ((c) + k_) * (s_c)) + b_);
/* Prefetches w elements of p from element i on, a cache line at a time. */
#define CLT_PREFETCH_ROW(p, i)                                                                     \
  for (long b_ = 0; b_ < w * (long)sizeof(*(p)); b_ += 64)                                         \
    __builtin_prefetch((const __global char *)((p) + (i)) + b_);
#else
#define CLT_PREFETCH_LINES(p, o_, s_c, c)
#endif
#define CLT_STAGE_RAW(buf, V, p, LOAD, o_, s_r, s_c)                                               \
  do {                                                                                             \
    long c4 = 0;                                                                                   \
    if ((s_r) == 1 && (h & 3) == 0) {                                                              \
      c4 = w & ~3L;                                                                                \
      for (long c = 0; c < c4; c += 4) {                                                           \
        CLT_PREFETCH_LINES(p, o_, s_c, c + CLT_PREFETCH_AHEAD)                                     \
        for (long r = 0; r < h; r += 4) {                                                          \
          const long i_ = o_ + r + c * (s_c);                                                      \
          const V a0 = vload4(0, (p) + i_), a1 = vload4(0, (p) + i_ + (s_c));                      \
          const V a2 = vload4(0, (p) + i_ + 2 * (s_c)), a3 = vload4(0, (p) + i_ + 3 * (s_c));      \
          vstore4((V)(a0.x, a1.x, a2.x, a3.x), 0, buf + r * CLT_STRIP_STRIDE + c);                 \
          vstore4((V)(a0.y, a1.y, a2.y, a3.y), 0, buf + (r + 1) * CLT_STRIP_STRIDE + c);           \
          vstore4((V)(a0.z, a1.z, a2.z, a3.z), 0, buf + (r + 2) * CLT_STRIP_STRIDE + c);           \
          vstore4((V)(a0.w, a1.w, a2.w, a3.w), 0, buf + (r + 3) * CLT_STRIP_STRIDE + c);           \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    CLT_STAGE_ANY(buf, LOAD, o_, s_r, s_c, c4)                                                     \
  } while (0)
    if (stage & 1) {
      const long o_ = b0 + r0 * s0_r + c0 * s0_c;
#if CLT_RAW0
      CLT_STAGE_RAW(t0, CLT_CAT(CLT_TYPE0, 4), CLT_P0, CLT_LOAD0, o_, s0_r, s0_c);
#else
      CLT_STAGE_ANY(t0, CLT_LOAD0, o_, s0_r, s0_c, 0)
#endif
    }
#if ARITY >= 2
    if (stage & 2) {
      const long o_ = b1 + r0 * s1_r + c0 * s1_c;
#if CLT_RAW1
      CLT_STAGE_RAW(t1, CLT_CAT(CLT_TYPE1, 4), CLT_P1, CLT_LOAD1, o_, s1_r, s1_c);
#else
      CLT_STAGE_ANY(t1, CLT_LOAD1, o_, s1_r, s1_c, 0)
#endif
    }
#endif
#if ARITY == 3
    if (stage & 4) {
      const long o_ = b2 + r0 * s2_r + c0 * s2_c;
#if CLT_RAW2
      CLT_STAGE_RAW(t2, CLT_CAT(CLT_TYPE2, 4), CLT_P2, CLT_LOAD2, o_, s2_r, s2_c);
#else
      CLT_STAGE_ANY(t2, CLT_LOAD2, o_, s2_r, s2_c, 0)
#endif
    }
#endif
#undef CLT_STAGE_RAW
#undef CLT_STAGE_ANY
    /* computing, along the result's rows; one loop for each staging of a binary op, so that
     * the compiler vectorizes each (a test per element made the transposed add 20% slower) */
#if ARITY == 1
#define CLT_STRIP_ROW(S)                                                                             for (long j = 0; j < w; j++) {                                                                       const long c = c0 + j;                                                                             CLT_T0 v0 = ((S) & 1) ? t0[t + j] : CLT_LOAD0(i0 + c * s0_c);                                      STORE_AT(out, io + c * so_c, CLT_TILED_OP);                                                      }
#elif ARITY == 2
#define CLT_STRIP_ROW(S)                                                                             for (long j = 0; j < w; j++) {                                                                       const long c = c0 + j;                                                                             CLT_T0 v0 = ((S) & 1) ? t0[t + j] : CLT_LOAD0(i0 + c * s0_c);                                      TC v1 = ((S) & 2) ? t1[t + j] : CLT_LOAD1(i1 + c * s1_c);                                          STORE_AT(out, io + c * so_c, CLT_TILED_OP);                                                      }
#else
#define CLT_STRIP_ROW(S)                                                                             for (long j = 0; j < w; j++) {                                                                       const long c = c0 + j;                                                                             CLT_T0 v0 = ((S) & 1) ? t0[t + j] : CLT_LOAD0(i0 + c * s0_c);                                      TC v1 = ((S) & 2) ? t1[t + j] : CLT_LOAD1(i1 + c * s1_c);                                          TC v2 = ((S) & 4) ? t2[t + j] : CLT_LOAD2(i2 + c * s2_c);                                          STORE_AT(out, io + c * so_c, CLT_TILED_OP);                                                      }
#endif
    for (long r = 0; r < h; r++) {
      const long io = bo + (r0 + r) * so_r, i0 = b0 + (r0 + r) * s0_r, i1 = b1 + (r0 + r) * s1_r,
                 i2 = b2 + (r0 + r) * s2_r, t = r * CLT_STRIP_STRIDE;
      (void)i1, (void)i2;
#if CLT_PREFETCH
      if (r + 1 < h) { /* the next row of the unstaged operands read along it */
#if CLT_RAW0
        if (!(stage & 1) && s0_c == 1)
          CLT_PREFETCH_ROW(CLT_P0, i0 + s0_r + c0)
#endif
#if ARITY >= 2 && CLT_RAW1
        if (!(stage & 2) && s1_c == 1)
          CLT_PREFETCH_ROW(CLT_P1, i1 + s1_r + c0)
#endif
#if ARITY == 3 && CLT_RAW2
        if (!(stage & 4) && s2_c == 1)
          CLT_PREFETCH_ROW(CLT_P2, i2 + s2_r + c0)
#endif
      }
#endif
      if (stage == 1)
        CLT_STRIP_ROW(1)
      else if (stage == 2)
        CLT_STRIP_ROW(2)
      else
        CLT_STRIP_ROW(stage)
    }
#undef CLT_STRIP_ROW
#undef CLT_PREFETCH_LINES
#undef CLT_PREFETCH_ROW
  }
#else
  __local CLT_T0 t0[CLT_TILE_GPU][CLT_TILE_GPU + 1];
#if ARITY >= 2
  __local TC t1[CLT_TILE_GPU][CLT_TILE_GPU + 1];
#endif
#if ARITY == 3
  __local TC t2[CLT_TILE_GPU][CLT_TILE_GPU + 1];
#endif
  /* lx = l % 16 written as a mask: a division next to a remainder makes clang emit a `freeze`,
   * which Oclgrind's uninitialized-value checker cannot run (kernels/index.cl) */
  const int l = (int)get_local_id(0), lx = l & (CLT_TILE_GPU - 1), ly = l / CLT_TILE_GPU;
  const ulong ntr = (ulong)((R + CLT_TILE_GPU - 1) / CLT_TILE_GPU);
  const ulong ntc = (ulong)((C + CLT_TILE_GPU - 1) / CLT_TILE_GPU);
  for (ulong u = get_group_id(0); u < units; u += step) { /* the same tiles for the whole group */
    ulong q = u / ntc;
    const long c0 = (long)(u - q * ntc) * CLT_TILE_GPU;
    ulong rem = q / ntr;
    const long r0 = (long)(q - rem * ntr) * CLT_TILE_GPU;
    long bo = g.off[0], b0 = g.off[1], b1 = g.off[2], b2 = g.off[3];
    for (int d = L - 2; d >= 0; d--) {
      ulong qd = rem / (ulong)g.shape[d];
      long cd = (long)(rem - qd * (ulong)g.shape[d]);
      rem = qd;
      bo += cd * g.so[d];
      b0 += cd * g.s0[d];
      b1 += cd * g.s1[d];
      b2 += cd * g.s2[d];
    }
    /* staging: work-item (ly, lx) reads element (r0 + lx, c0 + ly), neighbours down a column */
    const long sr = r0 + lx, sc = c0 + ly;
    if (sr < R && sc < C) {
      if (stage & 1)
        t0[ly][lx] = CLT_LOAD0(b0 + sr * s0_r + sc * s0_c);
#if ARITY >= 2
      if (stage & 2)
        t1[ly][lx] = CLT_LOAD1(b1 + sr * s1_r + sc * s1_c);
#endif
#if ARITY == 3
      if (stage & 4)
        t2[ly][lx] = CLT_LOAD2(b2 + sr * s2_r + sc * s2_c);
#endif
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* computing: work-item (ly, lx) makes element (r0 + ly, c0 + lx), neighbours along a row */
    const long r = r0 + ly, c = c0 + lx;
    if (r < R && c < C) {
      CLT_T0 v0;
      if (stage & 1)
        v0 = t0[lx][ly];
      else
        v0 = CLT_LOAD0(b0 + r * s0_r + c * s0_c);
#if ARITY >= 2
      TC v1;
      if (stage & 2)
        v1 = t1[lx][ly];
      else
        v1 = CLT_LOAD1(b1 + r * s1_r + c * s1_c);
#endif
#if ARITY == 3
      TC v2;
      if (stage & 4)
        v2 = t2[lx][ly];
      else
        v2 = CLT_LOAD2(b2 + r * s2_r + c * s2_c);
#endif
      STORE_AT(out, bo + r * so_r + c * so_c, CLT_TILED_OP);
    }
    barrier(CLK_LOCAL_MEM_FENCE); /* the tiles are read before the next tile overwrites them */
  }
#endif
}
#endif /* CLT_TILED */
