/* SPDX-License-Identifier: MIT */
/* random.cl - Philox4x32-10 random numbers (docs/architecture.md rule 9: same seed, same bits
 * everywhere).
 *
 * This one text is compiled twice: as OpenCL C 1.2 after common.cl (the kernels at the end), and
 * as C11 by lib/host/random.c, which includes it with __OPENCL_VERSION__ undefined. So the host
 * and the devices run the same statements, and must round them the same way. The shared part
 * therefore uses only integer operations, exact conversions (integers below 2^24 to float, below
 * 2^53 to double), comparisons, and the IEEE-754 operations + - *, which OpenCL C rounds
 * correctly (0 ulp, OpenCL 1.2 section 7.4) as C does. It avoids division, sqrt, log, sin and cos,
 * whose OpenCL versions are not correctly rounded and differ from glibc's: log, the reciprocal,
 * the square root and sincos are built here from + - * (range reduction, Newton steps,
 * polynomials). Two more things would change bits: contracting a*b+c into an fma (turned off by
 * the FP_CONTRACT pragmas below, and -ffp-contract=off from configure.ac for gcc, which
 * ignores the pragma and contracts by default in its GNU dialects), and excess precision
 * (x87: FLT_EVAL_METHOD must be 0, which it is on x86-64 and AArch64; checked on the host).
 * Flushing f32 subnormals to zero, which OpenCL 1.2 allows, changes no result
 * (tests/check_random.c runs every input of the f32 steps with flushing on and off); f64 keeps
 * subnormals on every OpenCL 1.2 device. Not covered: CLT_BUILD_OPTIONS that allow inexact
 * arithmetic (-cl-mad-enable, -cl-unsafe-math-optimizations, -cl-fast-relaxed-math).
 *
 * The generator. Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3",
 * SC11) maps a 128-bit counter and a 64-bit key to 128 random bits. The key is the seed (word 0
 * its low 32 bits, word 1 the high ones); the counter is offset + c as a 64-bit number in words 0
 * (low) and 1 (high), words 2 and 3 zero. Counter c gives elements:
 *   f32 uniform   4c .. 4c+3: word j gives (w >> 8) * 2^-24, in [0, 1) exactly
 *   f64 uniform   2c, 2c+1:   words (0,1), (2,3) give 53 bits ((w0 << 32 | w1) >> 11) * 2^-53
 *   f32 normal    4c .. 4c+3: Box-Muller on the pairs of words (0,1) and (2,3): r cos, r sin
 *   f64 normal    2c, 2c+1:   Box-Muller on the pair of 53-bit numbers: r cos, r sin
 * Box-Muller: r = sqrt(-2 ln u1) with u1 = (m + 1) 2^-b in (0, 1], and the angle 2 pi u2.
 */
#ifdef __OPENCL_VERSION__
#pragma OPENCL FP_CONTRACT OFF
typedef uint rng_u32;
typedef ulong rng_u64;
typedef int rng_i32;
typedef long rng_i64;
#define RNG_FN static inline
#define rng_f32_bits(x) as_uint(x)
#define rng_bits_f32(x) as_float(x)
#define rng_f64_bits(x) as_ulong(x)
#define rng_bits_f64(x) as_double(x)
#if defined(CLT_FP64)
#define RNG_HAVE_F64 1
#endif
#else
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif
/* lib/host/random.c defines rng_u32, rng_u64, rng_i32, rng_i64, RNG_FN, the rng_*_bits
 * reinterpretations and RNG_HAVE_F64 before including this file. */
#endif

/* Elements per counter (each counter gives 128 bits). */
#define RNG_PER_F32 4
#define RNG_PER_F64 2

/* ---- Philox4x32-10 ---------------------------------------------------------------------- */

/* c (4 words) becomes Philox4x32-10(c, key k0 k1). */
RNG_FN void rng_philox4x32_10(rng_u32 *c, rng_u32 k0, rng_u32 k1) {
  for (int round = 0; round < 10; round++) {
    if (round > 0) { /* the key schedule: Weyl sequence of the golden ratio and sqrt(3) - 1 */
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    rng_u64 p0 = (rng_u64)0xD2511F53u * c[0];
    rng_u64 p1 = (rng_u64)0xCD9E8D57u * c[2];
    rng_u32 x0 = (rng_u32)(p1 >> 32) ^ c[1] ^ k0;
    rng_u32 x2 = (rng_u32)(p0 >> 32) ^ c[3] ^ k1;
    c[1] = (rng_u32)p1;
    c[3] = (rng_u32)p0;
    c[0] = x0;
    c[2] = x2;
  }
}

/* The 4 words of counter ctr under seed. */
RNG_FN void rng_block(rng_u64 seed, rng_u64 ctr, rng_u32 *w) {
  w[0] = (rng_u32)ctr;
  w[1] = (rng_u32)(ctr >> 32);
  w[2] = 0;
  w[3] = 0;
  rng_philox4x32_10(w, (rng_u32)seed, (rng_u32)(seed >> 32));
}

/* ---- f32 -------------------------------------------------------------------------------- */

/* 1/d for d in [1.7, 2.5]: a chord through the ends (4% off at most), then three Newton steps
 * y (2 - d y), each squaring the relative error. */
RNG_FN float rng_rcp_f32(float d) {
  float y = 0x1.f9f9fap-1f - 0x1.e1e1e2p-3f * d;
  for (int i = 0; i < 3; i++)
    y = y * (2.0f - d * y);
  return y;
}

/* sqrt(w) for w = 0 or w in [2^-24, 64]: the inverse square root from the exponent bits (the
 * 0x5f3759df estimate, 0.2% off), three Newton steps, then w y with one correction step. */
RNG_FN float rng_sqrt_f32(float w) {
  if (w == 0.0f)
    return 0.0f;
  float h = 0.5f * w;
  float y = rng_bits_f32(0x5f3759dfu - (rng_f32_bits(w) >> 1));
  for (int i = 0; i < 3; i++)
    y = y * (1.5f - (h * y) * y);
  float r = w * y;
  return r + (0.5f * y) * (w - r * r);
}

/* -2 ln(m 2^-24) for an integer m in [1, 2^24]. m = 2^e f with f in [sqrt(1/2), sqrt(2)); then
 * ln f = 2 atanh(s) = 2 (s + s^3/3 + ...) with s = (f - 1) / (f + 1), |s| < 0.172. */
RNG_FN float rng_m2log_f32(rng_u32 m) {
  rng_u32 b = rng_f32_bits((float)m);
  rng_i32 e = (rng_i32)(b >> 23) - 127 - 24;
  float f = rng_bits_f32((b & 0x7fffffu) | 0x3f800000u);
  if (f > 0x1.6a09e6p+0f) {
    f = 0.5f * f;
    e += 1;
  }
  float t = f - 1.0f; /* exact (Sterbenz) */
  float s = t * rng_rcp_f32(2.0f + t);
  float z = s * s;
  float p =
      z * (0x1.555556p-2f +
           z * (0x1.99999ap-3f + z * (0x1.24924ap-3f + z * (0x1.c71c72p-4f + z * 0x1.745d18p-4f))));
  float s2 = 2.0f * s;
  float lnf = s2 + s2 * p;
  float fe = (float)e;
  /* ln 2 = 0x1.62e3p-1 (17 bits, so fe times it is exact) + 0x1.2fefa2p-17 */
  float ln = fe * 0x1.62e3p-1f + (fe * 0x1.2fefa2p-17f + lnf);
  return -2.0f * ln;
}

/* (cs, sn) = (c, s) turned by k quarter turns: (c, s), (-s, c), (-c, -s), (s, -c) for k mod 4
 * = 0, 1, 2, 3. Written with integer masks, not as a switch on k & 3: clang shrinks that switch
 * to one on the 2-bit integer trunc(k), which Oclgrind 21.10 evaluates without dropping the
 * high bits, so k = 4, 5, ... took the default case (tests/oclgrind/switch_trunc.c). Negating
 * by flipping the sign bit is exactly what -x does. */
RNG_FN void rng_rotate_f32(rng_u32 k, float c, float s, float *cs, float *sn) {
  rng_u32 cb = rng_f32_bits(c), sb = rng_f32_bits(s);
  rng_u32 swap = 0u - (k & 1u);              /* all ones for odd k */
  rng_u32 ncs = ((k ^ (k >> 1)) & 1u) << 31; /* cs negative for k mod 4 = 1, 2 */
  rng_u32 nsn = ((k >> 1) & 1u) << 31;       /* sn negative for k mod 4 = 2, 3 */
  *cs = rng_bits_f32((cb ^ ((cb ^ sb) & swap)) ^ ncs);
  *sn = rng_bits_f32((sb ^ ((cb ^ sb) & swap)) ^ nsn);
}

/* cos and sin of 2 pi n 2^-24 for an integer n in [0, 2^24): the nearest quarter turn k is
 * taken off exactly in integers, leaving |a| <= pi/4 for Taylor polynomials, and k rotates the
 * result. */
RNG_FN void rng_sincos_turns_f32(rng_u32 n, float *cs, float *sn) {
  rng_u32 k = (n + 0x200000u) >> 22;
  float a = (float)((rng_i32)n - (rng_i32)(k << 22)) * 0x1.921fb6p-22f;
  float a2 = a * a;
  float s = a + a * a2 *
                    (-0x1.555556p-3f +
                     a2 * (0x1.111112p-7f + a2 * (-0x1.a01a02p-13f + a2 * 0x1.71de3ap-19f)));
  float c =
      1.0f +
      a2 * (-0.5f + a2 * (0x1.555556p-5f + a2 * (-0x1.6c16c2p-10f +
                                                 a2 * (0x1.a01a02p-16f + a2 * -0x1.27e4fcp-22f))));
  rng_rotate_f32(k, c, s, cs, sn);
}

/* Elements 4c .. 4c+3 of a uniform f32 tensor. */
RNG_FN void rng_rand_f32(rng_u64 seed, rng_u64 ctr, float *out) {
  rng_u32 w[4];
  rng_block(seed, ctr, w);
  for (int j = 0; j < 4; j++)
    out[j] = (float)(w[j] >> 8) * 0x1p-24f;
}

/* Elements 4c .. 4c+3 of a standard normal f32 tensor. */
RNG_FN void rng_randn_f32(rng_u64 seed, rng_u64 ctr, float *out) {
  rng_u32 w[4];
  rng_block(seed, ctr, w);
  for (int j = 0; j < 4; j += 2) {
    float r = rng_sqrt_f32(rng_m2log_f32((w[j] >> 8) + 1u));
    float c, s;
    rng_sincos_turns_f32(w[j + 1] >> 8, &c, &s);
    out[j] = r * c;
    out[j + 1] = r * s;
  }
}

/* ---- f64: the same steps, with more Newton steps and longer polynomials ------------------ */
#ifdef RNG_HAVE_F64

RNG_FN double rng_rcp_f64(double d) {
  double y = 0x1.f9f9f9f9f9fap-1 - 0x1.e1e1e1e1e1e1ep-3 * d;
  for (int i = 0; i < 4; i++)
    y = y * (2.0 - d * y);
  return y;
}

/* sqrt(w) for w = 0 or w in [2^-53, 128]. */
RNG_FN double rng_sqrt_f64(double w) {
  if (w == 0.0)
    return 0.0;
  double h = 0.5 * w;
  double y = rng_bits_f64(0x5fe6eb50c7b537a9ul - (rng_f64_bits(w) >> 1));
  for (int i = 0; i < 4; i++)
    y = y * (1.5 - (h * y) * y);
  double r = w * y;
  return r + (0.5 * y) * (w - r * r);
}

/* -2 ln(m 2^-53) for an integer m in [1, 2^53]. */
RNG_FN double rng_m2log_f64(rng_u64 m) {
  rng_u64 b = rng_f64_bits((double)m);
  rng_i32 e = (rng_i32)(b >> 52) - 1023 - 53;
  double f = rng_bits_f64((b & 0xffffffffffffful) | 0x3ff0000000000000ul);
  if (f > 0x1.6a09e667f3bcdp+0) {
    f = 0.5 * f;
    e += 1;
  }
  double t = f - 1.0;
  double s = t * rng_rcp_f64(2.0 + t);
  double z = s * s;
  double p = z * (0x1.5555555555555p-2 +
                  z * (0x1.999999999999ap-3 +
                       z * (0x1.2492492492492p-3 +
                            z * (0x1.c71c71c71c71cp-4 +
                                 z * (0x1.745d1745d1746p-4 +
                                      z * (0x1.3b13b13b13b14p-4 +
                                           z * (0x1.1111111111111p-4 +
                                                z * (0x1.e1e1e1e1e1e1ep-5 +
                                                     z * (0x1.af286bca1af28p-5 +
                                                          z * (0x1.8618618618618p-5 +
                                                               z * 0x1.642c8590b2164p-5))))))))));
  double s2 = 2.0 * s;
  double lnf = s2 + s2 * p;
  double fe = (double)e;
  /* ln 2 = 0x1.62e42feep-1 (32 bits) + 0x1.a39ef35793c76p-33 */
  double ln = fe * 0x1.62e42feep-1 + (fe * 0x1.a39ef35793c76p-33 + lnf);
  return -2.0 * ln;
}

/* rng_rotate_f32 for f64. */
RNG_FN void rng_rotate_f64(rng_u32 k, double c, double s, double *cs, double *sn) {
  rng_u64 cb = rng_f64_bits(c), sb = rng_f64_bits(s);
  rng_u64 swap = (rng_u64)0 - (k & 1u);
  rng_u64 ncs = (rng_u64)((k ^ (k >> 1)) & 1u) << 63;
  rng_u64 nsn = (rng_u64)((k >> 1) & 1u) << 63;
  *cs = rng_bits_f64((cb ^ ((cb ^ sb) & swap)) ^ ncs);
  *sn = rng_bits_f64((sb ^ ((cb ^ sb) & swap)) ^ nsn);
}

/* cos and sin of 2 pi n 2^-53 for an integer n in [0, 2^53). */
RNG_FN void rng_sincos_turns_f64(rng_u64 n, double *cs, double *sn) {
  rng_u64 k = (n + ((rng_u64)1 << 50)) >> 51;
  double a = (double)((rng_i64)n - (rng_i64)(k << 51)) * 0x1.921fb54442d18p-51;
  double a2 = a * a;
  double s = a + a * a2 *
                     (-0x1.5555555555555p-3 +
                      a2 * (0x1.1111111111111p-7 +
                            a2 * (-0x1.a01a01a01a01ap-13 +
                                  a2 * (0x1.71de3a556c734p-19 +
                                        a2 * (-0x1.ae64567f544e4p-26 +
                                              a2 * (0x1.6124613a86d09p-33 +
                                                    a2 * (-0x1.ae7f3e733b81fp-41 +
                                                          a2 * 0x1.952c77030ad4ap-49)))))));
  double c =
      1.0 +
      a2 * (-0.5 + a2 * (0x1.5555555555555p-5 +
                         a2 * (-0x1.6c16c16c16c17p-10 +
                               a2 * (0x1.a01a01a01a01ap-16 +
                                     a2 * (-0x1.27e4fb7789f5cp-22 +
                                           a2 * (0x1.1eed8eff8d898p-29 +
                                                 a2 * (-0x1.93974a8c07c9dp-37 +
                                                       a2 * (0x1.ae7f3e733b81fp-45 +
                                                             a2 * -0x1.6827863b97d97p-53))))))));
  rng_rotate_f64((rng_u32)k, c, s, cs, sn);
}

/* The 53-bit number of words hi, lo. */
RNG_FN rng_u64 rng_bits53(rng_u32 hi, rng_u32 lo) { return ((rng_u64)hi << 21) | (lo >> 11); }

/* Elements 2c, 2c+1 of a uniform f64 tensor. */
RNG_FN void rng_rand_f64(rng_u64 seed, rng_u64 ctr, double *out) {
  rng_u32 w[4];
  rng_block(seed, ctr, w);
  out[0] = (double)rng_bits53(w[0], w[1]) * 0x1p-53;
  out[1] = (double)rng_bits53(w[2], w[3]) * 0x1p-53;
}

/* Elements 2c, 2c+1 of a standard normal f64 tensor. */
RNG_FN void rng_randn_f64(rng_u64 seed, rng_u64 ctr, double *out) {
  rng_u32 w[4];
  rng_block(seed, ctr, w);
  double r = rng_sqrt_f64(rng_m2log_f64(rng_bits53(w[0], w[1]) + 1u));
  double c, s;
  rng_sincos_turns_f64(rng_bits53(w[2], w[3]), &c, &s);
  out[0] = r * c;
  out[1] = r * s;
}

#endif /* RNG_HAVE_F64 */

/* ---- kernels ---------------------------------------------------------------------------- */
#ifdef __OPENCL_VERSION__

/* out[0 .. n) from the counters offset + c, c in [0, ceil(n / PER)); `step` as in
 * CLT_FOR_EACH, counted in counters. */
#define RNG_KERNEL(NAME, T, PER, BLOCK)                                                            \
  __kernel void NAME(__global T *restrict out, ulong n, ulong step, ulong seed, ulong offset) {    \
    ulong ncounters = (n + (PER - 1)) / PER;                                                       \
    CLT_FOR_EACH(c, ncounters, step) {                                                             \
      T v[PER];                                                                                    \
      BLOCK(seed, offset + c, v);                                                                  \
      ulong base = c * PER;                                                                        \
      if (base + PER <= n) { /* all but the last counter: no bounds check */                       \
        for (int j = 0; j < PER; j++)                                                              \
          out[base + j] = v[j];                                                                    \
      } else {                                                                                     \
        for (int j = 0; j < PER; j++)                                                              \
          if (base + j < n)                                                                        \
            out[base + j] = v[j];                                                                  \
      }                                                                                            \
    }                                                                                              \
  }

RNG_KERNEL(rand_f32, float, RNG_PER_F32, rng_rand_f32)
RNG_KERNEL(randn_f32, float, RNG_PER_F32, rng_randn_f32)
#ifdef RNG_HAVE_F64
RNG_KERNEL(rand_f64, double, RNG_PER_F64, rng_rand_f64)
RNG_KERNEL(randn_f64, double, RNG_PER_F64, rng_randn_f64)
#endif

#endif /* __OPENCL_VERSION__ */
