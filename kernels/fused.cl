/* SPDX-License-Identifier: MIT */
/* fused.cl - the kernel of a fused chain of elementwise ops (lazy fusion), generated per chain
 * structure by lib/opencl/fuse.c, whose defines fill it in:
 *   CLT_FUSED_PARAMS   the outputs o0, o1, ... (contiguous), the leaves l0, l1, ... (the tensors
 *                      read), n, step, each output's element offset oo0, ... and each leaf's
 *                      lo0, lo1, ..., and with
 *                      CLT_FUSED_STRIDED the number of dimensions and their geometry g
 *   CLT_FUSED_BODY     one block per op, in order: v<k> = the op's expression of its operands
 *                      (earlier values v<j>, or leaf elements l<j>[lo<j> + i], l<j>[lo<j>], or
 *                      l<j>[lo<j> + x[k]] for the k-th strided leaf), stored to its output if it
 *                      has one (o<k>[oo<k> + i])
 *   CLT_FUSED_STRIDED  how many leaves are neither contiguous nor one element (at most 4): the
 *                      index x[k] of each comes from element i's coordinates in g.shape
 *   CLT_FUSED_HELPERS  the integer helpers the body calls, one per integer type (empty for
 *                      most chains): CLT_DEFINE_IPOW(clt_ipow_int, int, uint) of common.cl
 * Each op's value is computed as kernels/elementwise.cl computes it; contraction is off so that
 * no multiply and add of two ops become one fma: the result is the eager one, bit for bit. */
#pragma OPENCL FP_CONTRACT OFF

/* Mirrors struct clt_cl_fused_geom in lib/opencl/fuse.c: the shape, and each strided leaf's
 * element strides over it (0 where broadcast). */
typedef struct {
  long shape[8];
  long s[4][8];
} clt_fused_geom_t;

CLT_FUSED_HELPERS

__kernel void fused(CLT_FUSED_PARAMS) {
  CLT_FOR_EACH(i, n, step) {
#if CLT_FUSED_STRIDED
    long x[CLT_FUSED_STRIDED];
    for (int l = 0; l < CLT_FUSED_STRIDED; l++)
      x[l] = 0;
    ulong rem = i;
    for (int d = ndim - 1; d >= 0; d--) {
      ulong q = rem / (ulong)g.shape[d];
      long c = (long)(rem - q * (ulong)g.shape[d]); /* not %: see kernels/index.cl */
      rem = q;
      for (int l = 0; l < CLT_FUSED_STRIDED; l++)
        x[l] += c * g.s[l][d];
    }
#endif
    CLT_FUSED_BODY
  }
}
