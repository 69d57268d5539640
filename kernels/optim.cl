/* SPDX-License-Identifier: MIT */
/* optim.cl - one optimizer step on one parameter, in place, as one kernel (clt_optim_step; the
 * formulas are those of struct clt_optim_desc in lib/backend.h, and lib/host/optim.c's loops).
 *
 * Defines, set by lib/opencl/optim.c: NAME (optim_sgd_f32, optim_adamw_bf16, ...), T (the
 * parameter's storage type: float, double, half or ushort for bf16), C (the compute type: double
 * for f64 parameters, else float), LD(p, i) and ST(p, i, x) (element i of p as C, and its store,
 * f16 and bf16 rounded to nearest even), SGD or ADAMW. Every tensor is contiguous from element 0.
 */
#ifdef SGD
/* flags: 1 the momentum buffer is used, 2 this is its first step (it takes d), 4 weight decay */
__kernel void NAME(__global T *restrict p, __global const T *restrict g, __global T *buf,
                   ulong numel, ulong step, C lr, C wd, C mom, int flags) {
  CLT_FOR_EACH(i, numel, step) {
    C pv = LD(p, i), d = LD(g, i);
    if (flags & 4)
      d = d + wd * pv;
    if (flags & 1) {
      if (!(flags & 2))
        d = mom * LD(buf, i) + d;
      ST(buf, i, d);
    }
    ST(p, i, pv - lr * d);
  }
}
#endif

#ifdef ADAMW
__kernel void NAME(__global T *restrict p, __global const T *restrict g, __global T *restrict m,
                   __global T *restrict v, ulong numel, ulong step, C decay, C b1, C b2, C ob1,
                   C ob2, C eps, C ss, C bc2) {
  CLT_FOR_EACH(i, numel, step) {
    C pv = LD(p, i), gv = LD(g, i);
    C mv = b1 * LD(m, i) + ob1 * gv;
    C vv = b2 * LD(v, i) + ob2 * gv * gv;
    ST(m, i, mv);
    ST(v, i, vv);
    pv = pv * decay;
    ST(p, i, pv - ss * mv / (sqrt(vv) / bc2 + eps));
  }
}
#endif
