/* elementwise.cl - binary elementwise operations.
 *
 * Defines, set by lib/opencl/elementwise.c: NAME (kernel name, add_f32), TA and TB (operand
 * types), TO (result type), TC (type the expression is computed in: TO for floats, the unsigned
 * twin for integers so that overflow wraps), OP(a,b) (the expression).
 */

/* Same shapes, no broadcasting: the fast path. */
__kernel void NAME(__global TO *restrict out, __global const TA *restrict a,
                   __global const TB *restrict b, ulong n, ulong step) {
  CLT_FOR_EACH(i, n, step) {
    TC x = (TC)(TO)a[i];
    TC y = (TC)(TO)b[i];
    out[i] = (TO)(OP(x, y));
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
      long c = (long)(rem % (ulong)bc.shape[d]);
      rem /= (ulong)bc.shape[d];
      ia += c * bc.sa[d];
      ib += c * bc.sb[d];
    }
    TC x = (TC)(TO)a[ia];
    TC y = (TC)(TO)b[ib];
    out[i] = (TO)(OP(x, y));
  }
}
