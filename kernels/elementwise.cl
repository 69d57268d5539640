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
 */
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
    TC x = (TC)(TP)a[i];
    out[i] = STORE(OP(x, x, x));
  }
}
#endif

#if ARITY == 2
/* Same shapes, no broadcasting: the fast path. */
__kernel void NAME(__global TO *restrict out, __global const TA *restrict a,
                   __global const TB *restrict b, ulong n, ulong step) {
  CLT_FOR_EACH(i, n, step) {
    TC x = (TC)(TP)a[i];
    TC y = (TC)(TP)b[i];
    out[i] = STORE(OP(x, y, y));
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
    TC x = (TC)(TP)a[ia];
    TC y = (TC)(TP)b[ib];
    out[i] = STORE(OP(x, y, y));
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
    TKC x = (TKC)(TKP)k[ik];
    TC y = (TC)(TP)a[ia];
    TC z = (TC)(TP)b[ib];
    out[i] = STORE(OP(x, y, z));
  }
}
#endif
