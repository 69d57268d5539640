/* SPDX-License-Identifier: MIT */
/* host/random.c - Philox4x32-10 random tensors on the host. The arithmetic is kernels/random.cl
 * itself, included here as C, so that host and devices run the same statements (see that file
 * for why they round the same way). */
#include "backend.h"

#include <float.h>
#include <string.h>

/* Excess precision (x87) would round differently from the devices. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "clt's random numbers need FLT_EVAL_METHOD == 0 (SSE2 on x86) to match the devices"
#endif

typedef uint32_t rng_u32;
typedef uint64_t rng_u64;
typedef int32_t rng_i32;
typedef int64_t rng_i64;
#define RNG_FN static inline
#define RNG_HAVE_F64 1

static inline rng_u32 rng_f32_bits(float x) {
  rng_u32 u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline float rng_bits_f32(rng_u32 u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}
static inline rng_u64 rng_f64_bits(double x) {
  rng_u64 u;
  memcpy(&u, &x, sizeof u);
  return u;
}
static inline double rng_bits_f64(rng_u64 u) {
  double x;
  memcpy(&x, &u, sizeof x);
  return x;
}

#include "../../kernels/random.cl"

void clt__philox4x32_10(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4]) {
  memcpy(out, ctr, 4 * sizeof out[0]);
  rng_philox4x32_10(out, key[0], key[1]);
}

float clt__randn_radius_f32(uint32_t m) { return rng_sqrt_f32(rng_m2log_f32(m)); }

void clt__randn_sincos_f32(uint32_t n, float *c, float *s) { rng_sincos_turns_f32(n, c, s); }

clt_status clt__host_fill_random(clt_tensor *out, uint64_t seed, uint64_t offset, bool normal,
                                 const char *fn) {
  clt_status s = clt__storage_host_wait(out->storage, true, fn);
  if (s != CLT_OK)
    return s;
  uint64_t n = (uint64_t)out->numel;
  if (out->dtype == CLT_F32) {
    float *p = clt__host_ptr(out), v[RNG_PER_F32];
    for (uint64_t c = 0; c * RNG_PER_F32 < n; c++) {
      if (normal)
        rng_randn_f32(seed, offset + c, v);
      else
        rng_rand_f32(seed, offset + c, v);
      for (uint64_t j = 0; j < RNG_PER_F32 && c * RNG_PER_F32 + j < n; j++)
        p[c * RNG_PER_F32 + j] = v[j];
    }
  } else {
    double *p = clt__host_ptr(out), v[RNG_PER_F64];
    for (uint64_t c = 0; c * RNG_PER_F64 < n; c++) {
      if (normal)
        rng_randn_f64(seed, offset + c, v);
      else
        rng_rand_f64(seed, offset + c, v);
      for (uint64_t j = 0; j < RNG_PER_F64 && c * RNG_PER_F64 + j < n; j++)
        p[c * RNG_PER_F64 + j] = v[j];
    }
  }
  return CLT_OK;
}
