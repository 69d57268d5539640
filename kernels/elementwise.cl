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
 */

/* f16 and bf16 without cl_khr_fp16: half is only ever a pointer's target, read and written by
 * the core vload_half / vstore_half_rte; bf16 is a ushort, the top half of a float. These are
 * the host's clt__f32_to_bf16 and friends (lib/tensor.c), bit for bit. */
float clt_bf16_to_f32(ushort b) { return as_float((uint)b << 16); }
ushort clt_f32_to_bf16(float f) {
  uint x = as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return (ushort)0x7fc0u; /* the one quiet NaN, never rounded into inf */
  return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
/* vstore_half_rte, with NaN stored as the one quiet NaN as the host does (the payload and sign
 * vstore_half keeps differ between devices). */
void clt_store_f16(__global half *p, ulong i, float x) {
  if (isnan(x))
    ((__global ushort *)p)[i] = (ushort)0x7e00u;
  else
    vstore_half_rte(x, i, p);
}
float clt_round_f16(float x) {
  ushort h;
  vstore_half_rte(x, 0, (half *)&h);
  return vload_half(0, (const half *)&h);
}
float clt_round_bf16(float x) { return clt_bf16_to_f32(clt_f32_to_bf16(x)); }
#if !CLT_FLOAT
/* Integer power by squaring in unsigned arithmetic (wraps); negative exponents give 0 unless
 * the base is 1 or -1, as integer division would. */
TC clt_ipow(TC a, TC b) {
  if (b < 0)
    return a == (TC)1 ? (TC)1 : a == (TC)-1 ? (((b & 1) != 0) ? (TC)-1 : (TC)1) : (TC)0;
  UTC r = 1, x = (UTC)a;
  while (b > 0) {
    if (b & 1)
      r *= x;
    x *= x;
    b >>= 1;
  }
  return (TC)r;
}
#define CLT_IPOW(a, b) clt_ipow(a, b)
/* The built-in abs (unsigned result; |INT_MIN| wraps back to INT_MIN as on the host). Not the
 * select (a < 0 ? 0 - a : a): clang turns that into llvm.abs, an intrinsic Oclgrind cannot run. */
#define CLT_IABS(a) ((TC)abs(a))
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
