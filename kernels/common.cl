/* SPDX-License-Identifier: MIT */
/* common.cl - the prelude of every kernel file (OpenCL C 1.2).
 *
 * Defines every program gets from the host (lib/opencl/opencl.c), ahead of this file:
 *   CLT_FP64          the program uses double (the device has cl_khr_fp64)
 *   CLT_CHUNKED 1     CPU devices: each work-item walks one contiguous chunk of elements, which
 *                     the compiler vectorizes; 0 (GPUs): a grid-stride loop, so neighbouring
 *                     work-items touch neighbouring elements (coalesced).
 */
#ifdef CLT_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#ifndef CLT_CHUNKED
#define CLT_CHUNKED 0
#endif

#define CLT_CAT_(a, b) a##b
#define CLT_CAT(a, b) CLT_CAT_(a, b)

/* for (i over this work-item's elements of [0, n)): `step` is the chunk length when chunked,
 * the grid stride otherwise. */
#if CLT_CHUNKED
#define CLT_FOR_EACH(i, n, step)                                                               \
  for (ulong i = (ulong)get_global_id(0) * (step), i##_end = min(i + (step), (ulong)(n));      \
       i < i##_end; i++)
#else
#define CLT_FOR_EACH(i, n, step) for (ulong i = get_global_id(0); i < (ulong)(n); i += (step))
#endif

/* f16 and bf16 without cl_khr_fp16: half is only ever a pointer's target, read and written by
 * the core vload_half / vstore_half_rte; bf16 is a ushort, the top half of a float. These are
 * the host's clt__f32_to_bf16 and friends (lib/clt-internal.h), bit for bit. */
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
/* What an f16 element stored by clt_store_f16 reads back as (vload_half): x rounded to nearest
 * even, NaN as the one quiet NaN. A fused kernel keeps an f16 result so (kernels/fused.cl); a bf16
 * result is clt_round_bf16, whose NaN is already the one quiet NaN. */
float clt_f16_stored(float x) {
  ushort h = (ushort)0x7e00u;
  if (!isnan(x))
    vstore_half_rte(x, 0, (half *)&h);
  return vload_half(0, (const half *)&h);
}

/* The integer helpers of the op table (include/clt_ops.h), one owner for kernels/elementwise.cl
 * (its compute type) and kernels/fused.cl (each integer type a chain computes in).
 * CLT_DEFINE_IPOW(NAME, TC, UTC) defines TC NAME(TC a, TC b): integer power by squaring in the
 * unsigned type UTC (wraps); negative exponents give 0 unless the base is 1 or -1, as integer
 * division would.
 * CLT_IABS_AS(TC, a) is the built-in abs (unsigned result; |INT_MIN| wraps back to INT_MIN as
 * on the host). Not the select (a < 0 ? 0 - a : a): clang turns that into llvm.abs, an
 * intrinsic Oclgrind cannot run. */
#define CLT_DEFINE_IPOW(NAME, TC, UTC)                                                           \
  TC NAME(TC a, TC b) {                                                                          \
    if (b < 0)                                                                                   \
      return a == (TC)1 ? (TC)1 : a == (TC)-1 ? (((b & 1) != 0) ? (TC)-1 : (TC)1) : (TC)0;       \
    UTC r = 1, x = (UTC)a;                                                                       \
    while (b > 0) {                                                                              \
      if (b & 1)                                                                                 \
        r *= x;                                                                                  \
      x *= x;                                                                                    \
      b >>= 1;                                                                                   \
    }                                                                                            \
    return (TC)r;                                                                                \
  }
#define CLT_IABS_AS(TC, a) ((TC)abs(a))
/* The larger and the smaller of two floats that are not NaN, with -0 below +0 (IEEE 754-2019's
 * maximum and minimum): fmax and fmin may return either zero, and the host's loops, its fused
 * passes and each device did differ there (docs/operations.md, "Values C leaves undefined"). The
 * host defines the same in lib/host/elementwise.c. */
#define CLT_FMAX(a, b) ((a) > (b) || ((a) == (b) && signbit(b)) ? (a) : (b))
#define CLT_FMIN(a, b) ((a) < (b) || ((a) == (b) && signbit(a)) ? (a) : (b))

/* Strided geometry of an elementwise op (views and broadcasting): the result's shape, the
 * element strides of the result (so) and of each operand (s0, s1, s2; 0 on broadcast
 * dimensions), and the element offsets of the result and the operands (off[0], off[1..3]).
 * Mirrors struct clt_cl_strided in lib/opencl/elementwise.c. */
typedef struct {
  long shape[8];
  long so[8];
  long s0[8];
  long s1[8];
  long s2[8];
  long off[4];
} clt_strided_t;
