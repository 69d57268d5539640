/* SPDX-License-Identifier: MIT */
/* random.c - random tensors: generators (seed, offset), the default generator, argument checks,
 * then the device's backend. The numbers themselves are defined in kernels/random.cl. */
#include "backend.h"

#include <stdlib.h>

/* PyTorch's default seed, so that a program that never seeds is reproducible too. */
#define DEFAULT_SEED UINT64_C(67280421310721)

struct clt_generator {
  pthread_mutex_t lock; /* guards offset and seed */
  uint64_t seed;
  uint64_t offset; /* the next unused Philox counter */
};

static struct clt_generator default_generator = {PTHREAD_MUTEX_INITIALIZER, DEFAULT_SEED, 0};

clt_status clt_manual_seed(uint64_t seed) {
  pthread_mutex_lock(&default_generator.lock);
  default_generator.seed = seed;
  default_generator.offset = 0;
  pthread_mutex_unlock(&default_generator.lock);
  return CLT_OK;
}

clt_status clt_generator_create(uint64_t seed, clt_generator **out) {
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_generator_create", "out is NULL");
  clt_generator *g = malloc(sizeof *g);
  if (!g)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_generator_create", "out of host memory");
  pthread_mutex_init(&g->lock, NULL);
  g->seed = seed;
  g->offset = 0;
  *out = g;
  return CLT_OK;
}

void clt_generator_release(clt_generator *g) {
  if (!g)
    return;
  pthread_mutex_destroy(&g->lock);
  free(g);
}

static clt_status generate(clt_generator *g, bool normal, clt_dtype dtype, int ndim,
                           const int64_t *shape, clt_device *dev, const char *fn,
                           clt_tensor **out) {
  clt_status s;
  if (!g)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "g is NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((s = clt__check_dtype(dtype, fn, "dtype")) != CLT_OK)
    return s;
  if (dtype != CLT_F32 && dtype != CLT_F64)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "dtype %s is not supported: random tensors are f32 or f64 (draw f32 and "
                      "convert with clt_cast%s)",
                      clt_dtype_name(dtype),
                      clt__dtype_is_half(dtype)
                          ? "; note that rounding to f16 or bf16 can turn uniform values just "
                            "below 1 into 1"
                          : "");
  clt_tensor *r;
  if ((s = clt__tensor_new(dtype, ndim, shape, dev, fn, &r)) != CLT_OK)
    return s;
  if (r->numel > 0) {
    /* Reserve this call's counters first, so that concurrent calls draw disjoint ones. */
    uint64_t used = clt__random_counters(dtype, r->numel);
    pthread_mutex_lock(&g->lock);
    uint64_t seed = g->seed, offset = g->offset;
    g->offset += used;
    pthread_mutex_unlock(&g->lock);
    if ((s = dev->backend->compute.fill_random(r, seed, offset, normal, fn)) != CLT_OK) {
      clt_tensor_release(r);
      return s;
    }
  }
  *out = r;
  return CLT_OK;
}

clt_status clt_rand(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                    clt_tensor **out) {
  return generate(&default_generator, false, dtype, ndim, shape, dev, "clt_rand", out);
}

clt_status clt_randn(clt_dtype dtype, int ndim, const int64_t *shape, clt_device *dev,
                     clt_tensor **out) {
  return generate(&default_generator, true, dtype, ndim, shape, dev, "clt_randn", out);
}

clt_status clt_generator_rand(clt_generator *g, clt_dtype dtype, int ndim, const int64_t *shape,
                              clt_device *dev, clt_tensor **out) {
  return generate(g, false, dtype, ndim, shape, dev, "clt_generator_rand", out);
}

clt_status clt_generator_randn(clt_generator *g, clt_dtype dtype, int ndim, const int64_t *shape,
                               clt_device *dev, clt_tensor **out) {
  return generate(g, true, dtype, ndim, shape, dev, "clt_generator_randn", out);
}
