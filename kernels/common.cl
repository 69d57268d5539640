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
