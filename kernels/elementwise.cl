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
 *   CPU devices (CLT_CHUNKED): each work-item takes `step` consecutive blocks of
 *     CLT_TILE_BLOCK x CLT_TILE_BLOCK elements, walked in tiles of CLT_TILE_CPU x CLT_TILE_CPU,
 *     each along the result's rows. A block's operand rows and pages stay in the L2 cache and
 *     the TLB while its tiles are walked (a 4096 x 4096 transposed f32 read: 2.5 times faster
 *     than plain 64 x 64 tiles on PoCL).
 *   GPUs: a work-group of 256 takes one 16 x 16 tile at a time (grid-stride over the tiles,
 *     `step` work-groups). The operands flagged in `stage` (bit p for operand p: k, a, b for a
 *     ternary) are first read into local memory with neighbouring work-items on neighbouring
 *     elements of the operand (coalesced), then every work-item computes one element of the
 *     result, its row along the work-group (coalesced writes), taking the staged operands from
 *     local memory (the rows are padded to 17 against bank conflicts).
 * Built only into the programs that launch it (CLT_TILED 1, a program of its own), so that the
 * programs of contiguous and strided work do not take its build time. */
#if CLT_TILED
#define CLT_TILE_BLOCK 256 /* lib/opencl/elementwise.c counts the blocks with the same sizes */
#define CLT_TILE_CPU 32
#define CLT_TILE_GPU 16

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
  (void)stage;
  const ulong nbr = (ulong)((R + CLT_TILE_BLOCK - 1) / CLT_TILE_BLOCK);
  const ulong nbc = (ulong)((C + CLT_TILE_BLOCK - 1) / CLT_TILE_BLOCK);
  ulong u = (ulong)get_global_id(0) * step, end = min(u + step, units);
  for (; u < end; u++) {
    /* block u: column block, row block, then the batch index over the dimensions before */
    ulong q = u / nbc;
    const long c0 = (long)(u - q * nbc) * CLT_TILE_BLOCK;
    ulong rem = q / nbr;
    const long r0 = (long)(q - rem * nbr) * CLT_TILE_BLOCK;
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
    const long re = min(r0 + CLT_TILE_BLOCK, R), ce = min(c0 + CLT_TILE_BLOCK, C);
    for (long rt = r0; rt < re; rt += CLT_TILE_CPU) {
      const long rte = min(rt + CLT_TILE_CPU, re);
      for (long ct = c0; ct < ce; ct += CLT_TILE_CPU) {
        const long cte = min(ct + CLT_TILE_CPU, ce);
        for (long r = rt; r < rte; r++) {
          const long io = bo + r * so_r, i0 = b0 + r * s0_r, i1 = b1 + r * s1_r,
                     i2 = b2 + r * s2_r;
          if (so_c == 1) /* the result's rows are contiguous: said, so the loop vectorizes */
            for (long c = ct; c < cte; c++)
              CLT_STRIDED_ONE(io + c, i0 + c * s0_c, i1 + c * s1_c, i2 + c * s2_c);
          else
            for (long c = ct; c < cte; c++)
              CLT_STRIDED_ONE(io + c * so_c, i0 + c * s0_c, i1 + c * s1_c, i2 + c * s2_c);
        }
      }
    }
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
