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
__kernel void NAME(__global TO *restrict out, __global const TA *restrict a, ulong n,
                   ulong step) {
  CLT_FOR_EACH(i, n, step) {
    TC x = (TC)(TP)LOAD_A(a, i);
    STORE_AT(out, i, OP(x, x, x));
  }
}
#endif

#if ARITY == 2
/* Same shapes, no broadcasting: the fast path. */
__kernel void NAME(__global TO *restrict out, __global const TA *restrict a,
                   __global const TB *restrict b, ulong n, ulong step) {
  CLT_FOR_EACH(i, n, step) {
    TC x = (TC)(TP)LOAD_A(a, i);
    TC y = (TC)(TP)LOAD_B(b, i);
    STORE_AT(out, i, OP(x, y, y));
  }
}

/* Broadcasting over up to 8 dimensions. */
__kernel void CLT_CAT(NAME, _bcast)(__global TO *restrict out, __global const TA *restrict a,
                                    __global const TB *restrict b, ulong n, ulong step, int ndim,
                                    clt_bcast_t bc) {
  CLT_FOR_EACH(i, n, step) {
    ulong rem = i;
    long ia = 0, ib = 0;
    for (int d = ndim - 1; d >= 0; d--) {
      ulong q = rem / (ulong)bc.shape[d];
      long c = (long)(rem - q * (ulong)bc.shape[d]); /* not %: see kernels/transpose.cl */
      rem = q;
      ia += c * bc.s0[d];
      ib += c * bc.s1[d];
    }
    TC x = (TC)(TP)LOAD_A(a, ia);
    TC y = (TC)(TP)LOAD_B(b, ib);
    STORE_AT(out, i, OP(x, y, y));
  }
}
#endif

#if ARITY == 3
/* op(k, a, b), broadcasting: where (k is the bool condition) or clamp. */
__kernel void CLT_CAT(NAME, _bcast)(__global TO *restrict out, __global const TK *restrict k,
                                    __global const TA *restrict a, __global const TB *restrict b,
                                    ulong n, ulong step, int ndim, clt_bcast_t bc) {
  CLT_FOR_EACH(i, n, step) {
    ulong rem = i;
    long ik = 0, ia = 0, ib = 0;
    for (int d = ndim - 1; d >= 0; d--) {
      ulong q = rem / (ulong)bc.shape[d];
      long c = (long)(rem - q * (ulong)bc.shape[d]); /* not %: see kernels/transpose.cl */
      rem = q;
      ik += c * bc.s0[d];
      ia += c * bc.s1[d];
      ib += c * bc.s2[d];
    }
    TKC x = (TKC)(TKP)LOAD_K(k, ik);
    TC y = (TC)(TP)LOAD_A(a, ia);
    TC z = (TC)(TP)LOAD_B(b, ib);
    STORE_AT(out, i, OP(x, y, z));
  }
}
#endif
