/* SPDX-License-Identifier: MIT */
/* memory.c - storage: host memory, pinned host memory and device buffers, refcounted, with a
 * caching allocator per device.
 *
 * Released memory goes to its device's cache together with the events of the last commands
 * that wrote and read it. A tensor that reuses it inherits those events, so its first command
 * waits for them through the usual wait lists: reuse is never ahead of pending device work,
 * on any queue, and nothing blocks on the host. Freshly allocated memory costs page faults on
 * CPU devices and driver allocations on GPUs; reuse avoids both (bench/transfer shows the
 * difference). On an allocation failure the cache is emptied and the allocation retried.
 *
 * Host blocks (the memory of cpu tensors) take the same path as device buffers: the same size
 * classes, the same best fit, the same statistics and clt_device_empty_cache(clt_cpu()). Blocks
 * of 2 MiB and more are 2 MiB-aligned and advised onto transparent huge pages (MADV_HUGEPAGE;
 * harmless where the kernel has none), so that their first touch takes one fault per 2 MiB
 * instead of one per 4 KiB. A cached host block is marked unaddressable for AddressSanitizer and
 * valgrind while it waits in the cache, and undefined (valgrind) when handed out again, so the
 * sanitizer lanes find a use after release or a read of stale contents with the cache on. */
#define _DEFAULT_SOURCE /* madvise */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#include <sys/sysinfo.h>
#endif
#ifdef __GLIBC__
#include <malloc.h> /* malloc_trim */
#endif

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLT_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(CLT_ASAN)
#define CLT_ASAN 1
#endif
#ifdef CLT_ASAN
#include <sanitizer/asan_interface.h>
#endif
#if defined(__has_include)
#if __has_include(<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#define CLT_VALGRIND 1
#endif
#endif

#define HOST_ALIGN 64
#define HUGE_PAGE ((size_t)2 << 20) /* x86-64 and arm64 transparent huge pages */

/* A host block enters the cache: no access until it leaves. */
static void host_block_cached(void *p, size_t bytes) {
#ifdef CLT_ASAN
  ASAN_POISON_MEMORY_REGION(p, bytes);
#endif
#ifdef CLT_VALGRIND
  VALGRIND_MAKE_MEM_NOACCESS(p, bytes);
#endif
  (void)p;
  (void)bytes;
}

/* A host block leaves the cache (reused or freed): addressable, contents undefined. */
static void host_block_reused(void *p, size_t bytes) {
#ifdef CLT_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, bytes);
#endif
#ifdef CLT_VALGRIND
  VALGRIND_MAKE_MEM_UNDEFINED(p, bytes);
#endif
  (void)p;
  (void)bytes;
}

/* Host memory of bytes (a multiple of HOST_ALIGN): 2 MiB-aligned and advised onto huge pages
 * from 2 MiB up, 64-byte aligned below. Freed with free(). */
static void *host_alloc(size_t bytes) {
  if (bytes < HUGE_PAGE)
    return aligned_alloc(HOST_ALIGN, bytes ? bytes : HOST_ALIGN);
  void *p = aligned_alloc(HUGE_PAGE, (bytes + HUGE_PAGE - 1) / HUGE_PAGE * HUGE_PAGE);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (p)
    madvise(p, bytes / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE); /* advice: failure is harmless */
#endif
  return p;
}

/* Sizes are rounded so that blocks recur: to 512 bytes below 1 MiB, to 64 KiB above. */
static size_t round_size(size_t bytes) {
  size_t g = bytes < ((size_t)1 << 20) ? 512 : ((size_t)64 << 10);
  return (bytes + g - 1) / g * g;
}

static void stats_add(clt_device *dev, size_t bytes, bool hit) {
  clt_memory_stats *m = &dev->mem;
  m->allocated_bytes += bytes;
  if (m->allocated_bytes > m->peak_allocated_bytes)
    m->peak_allocated_bytes = m->allocated_bytes;
  m->allocations++;
  if (hit) {
    m->cache_hits++;
    m->cached_bytes -= bytes;
    m->cached_blocks--;
  }
  m->reserved_bytes = m->allocated_bytes + m->cached_bytes;
}

/* Best fit among cached blocks no more than a quarter larger than asked. */
static clt_storage *cache_take(clt_device *dev, size_t bytes) {
  clt_storage **best = NULL;
  size_t limit = bytes + bytes / 4;
  pthread_mutex_lock(&dev->cache_lock);
  for (clt_storage **p = &dev->cache; *p; p = &(*p)->next_free)
    if ((*p)->bytes >= bytes && (*p)->bytes <= limit && (!best || (*p)->bytes < (*best)->bytes))
      best = p;
  clt_storage *s = NULL;
  if (best) {
    s = *best;
    *best = s->next_free;
    s->next_free = NULL;
    stats_add(dev, s->bytes, true);
  }
  pthread_mutex_unlock(&dev->cache_lock);
  if (s && dev->kind == CLT_DEVICE_HOST)
    host_block_reused(s->host, s->bytes);
  return s;
}

static _Atomic(const clt_storage_hooks *) hooks;

void clt__storage_set_hooks(const clt_storage_hooks *h) {
  atomic_store_explicit(&hooks, h, memory_order_release);
}

clt_status clt__storage_touch(clt_storage *s, bool writing, const char *fn) {
  const clt_storage_hooks *h = atomic_load_explicit(&hooks, memory_order_acquire);
  return h ? h->touch(s, writing, fn) : CLT_OK;
}

/* Frees what deferred chains of dev hold; false where there were none. */
static bool free_deferred(clt_device *dev, const char *fn) {
  const clt_storage_hooks *h = atomic_load_explicit(&hooks, memory_order_acquire);
  return h && h->free_memory(dev, fn);
}

/* The events on a storage belong to the backend that noted them (s->order): a storage that
 * never had a command noted has none, and its host access takes no lock. Once set, s->order stays,
 * so a command noted concurrently with this load is one the caller did not order against anyway. */
clt_status clt__storage_host_wait(clt_storage *s, bool writing, const char *fn) {
  clt_status st = clt__storage_touch(s, writing, fn); /* a deferred result is computed first */
  if (st != CLT_OK)
    return st;
  const struct clt_backend *b = atomic_load_explicit(&s->order, memory_order_acquire);
  return b ? b->memory.storage_wait(s, writing, fn) : CLT_OK;
}

void clt__storage_events_drop(clt_storage *s, bool wait) {
  const struct clt_backend *b = atomic_load_explicit(&s->order, memory_order_acquire);
  if (b)
    b->memory.storage_drop(s, wait);
}

static void destroy(clt_storage *s) {
  /* The owner of foreign memory may reuse its buffer as soon as it hears back: finish our
   * commands first. */
  clt__storage_events_drop(s, s->release && s->buf);
  if (s->release) {
    /* Host memory has no commands pending here (clt__keep_alive holds a reference). */
    if (s->buf)
      s->dev->backend->memory.buffer_free(s);
    s->release(s->release_ctx);
  } else if (s->pin_dev) {
    s->pin_dev->backend->memory.buffer_free(s);
  } else if (s->buf) {
    s->dev->backend->memory.buffer_free(s);
  } else {
    free(s->host);
  }
  pthread_mutex_destroy(&s->lock);
  free(s);
}

static void cache_clear(clt_device *dev) {
  pthread_mutex_lock(&dev->cache_lock);
  clt_storage *s = dev->cache;
  dev->cache = NULL;
  dev->mem.cached_bytes = 0;
  dev->mem.cached_blocks = 0;
  dev->mem.reserved_bytes = dev->mem.allocated_bytes;
  pthread_mutex_unlock(&dev->cache_lock);
  bool freed = s != NULL;
  while (s) {
    clt_storage *next = s->next_free;
    if (dev->kind == CLT_DEVICE_HOST)
      host_block_reused(s->host, s->bytes);
    destroy(s);
    s = next;
  }
#ifdef __GLIBC__
  /* Blocks below malloc's mmap threshold went back to its heap: hand that to the system too. */
  if (freed && dev->kind == CLT_DEVICE_HOST)
    malloc_trim(0);
#else
  (void)freed;
#endif
}

static clt_storage *storage_new(clt_device *dev, size_t bytes) {
  clt_storage *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  atomic_init(&s->refs, 1);
  atomic_init(&s->order, NULL);
  atomic_init(&s->version, 0);
  s->dev = dev;
  s->bytes = bytes;
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

/* Allocates the memory itself; returns 0, the device backend's error code, or -1 when host
 * memory could not be had. */
static int raw_alloc(clt_storage *s) {
  clt_device *dev = s->dev;
  if (dev->kind == CLT_DEVICE_HOST) {
    s->host = host_alloc(s->bytes);
    return s->host ? 0 : -1;
  }
  if (s->bytes == 0)
    return 0;
  return dev->backend->memory.buffer_alloc(s);
}

/* ---- out of memory ---------------------------------------------------------------------------
 * What a device has is known before asking it: one buffer may not exceed its
 * CL_DEVICE_MAX_MEM_ALLOC_SIZE, and clt keeps the bytes it holds there (tensors and cache) within
 * CL_DEVICE_GLOBAL_MEM_SIZE, emptying the cache first when that is what stands in the way. So
 * "more than the device has" is refused before any driver call, the same way on every driver,
 * including those that accept any buffer and only fail at its first use, or never (PoCL
 * allocates lazily). When the driver or malloc refuses all the same, the cache is emptied and the
 * allocation tried once more. Each refusal is CLT_ERR_OUT_OF_MEMORY with what was asked, what
 * the device has and what to try. */

/* bytes as "1.5 GiB (1610612736 bytes)", or "100 bytes". */
static const char *fmt_bytes(char *buf, size_t size, uint64_t bytes) {
  static const char *units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) {
    snprintf(buf, size, "%llu bytes", (unsigned long long)bytes);
    return buf;
  }
  double v = (double)bytes / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    u++;
  }
  snprintf(buf, size, "%.*f %s (%llu bytes)", v < 10 ? 2 : 1, v, units[u],
           (unsigned long long)bytes);
  return buf;
}

/* The host's memory, RAM and swap together (RAM alone where swap is unknown); 0 if unknown. */
static uint64_t host_memory(const clt_device *host) {
#ifdef __linux__
  struct sysinfo si;
  if (sysinfo(&si) == 0 && si.mem_unit > 0)
    return ((uint64_t)si.totalram + (uint64_t)si.totalswap) * si.mem_unit;
#endif
  return host->global_mem;
}

/* A device buffer of bytes larger than dev allows. */
static clt_status too_large(clt_device *dev, uint64_t bytes, const char *what, const char *fn) {
  char a[64], m[64], g[64];
  return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                    "cannot allocate %s of %s on %s: one buffer can be at most %s there "
                    "(CL_DEVICE_MAX_MEM_ALLOC_SIZE; the device has %s in all); use smaller "
                    "tensors, e.g. split this one along its first dimension",
                    fmt_bytes(a, sizeof a, bytes), what, dev->name,
                    fmt_bytes(m, sizeof m, dev->max_alloc),
                    fmt_bytes(g, sizeof g, dev->global_mem));
}

/* True if holding size more bytes on dev would take clt past the device's memory. */
static bool over_budget(clt_device *dev, size_t size) {
  if (dev->kind == CLT_DEVICE_HOST || dev->global_mem == 0)
    return false;
  pthread_mutex_lock(&dev->cache_lock);
  uint64_t held = dev->mem.allocated_bytes + dev->mem.cached_bytes;
  pthread_mutex_unlock(&dev->cache_lock);
  return held > dev->global_mem || (uint64_t)size > dev->global_mem - held;
}

/* The error for an allocation of bytes on dev that failed with err (the backend's code; 0:
 * refused by clt's own count), after the cache was emptied. */
static clt_status out_of_memory(clt_device *dev, size_t bytes, int err, const char *fn) {
  clt_memory_stats st;
  clt_device_memory_stats(dev, &st);
  char a[64], h[64], g[64], m[64];
  fmt_bytes(a, sizeof a, bytes);
  fmt_bytes(h, sizeof h, st.allocated_bytes);
  if (dev->kind == CLT_DEVICE_HOST)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                      "cannot allocate %s of host memory: malloc failed, also after emptying "
                      "clt's cache of cpu (tensors on cpu hold %s; the host has %s of RAM); "
                      "release tensors you no longer need or use smaller ones; "
                      "clt_device_empty_cache(NULL) frees the blocks cached for OpenCL devices too",
                      a, h, fmt_bytes(g, sizeof g, dev->global_mem));
  fmt_bytes(g, sizeof g, dev->global_mem);
  fmt_bytes(m, sizeof m, dev->max_alloc);
  if (err == 0)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                      "cannot allocate %s on %s: clt's tensors there already hold %s of the %s "
                      "the device has (its cache was emptied first; largest buffer %s); release "
                      "tensors you no longer need or use smaller ones",
                      a, dev->name, h, g, m);
  const struct clt_backend *b = dev->backend;
  return clt__error(b->memory.error_is_oom(err) ? CLT_ERR_OUT_OF_MEMORY : CLT_ERR_OPENCL, fn,
                    "cannot allocate %s on %s: the %s backend's allocation failed with %s (%d), "
                    "also after emptying clt's cache of %s (tensors there hold %s; the device has "
                    "%s, largest buffer %s); release tensors you no longer need or use smaller "
                    "ones; clt_device_empty_cache(NULL) frees the blocks cached for other devices "
                    "too",
                    a, dev->name, b->name, b->memory.error_name(err), err, dev->name, h, g, m);
}

clt_status clt__storage_alloc(clt_device *dev, size_t bytes, const char *fn, clt_storage **out) {
  bool host = dev->kind == CLT_DEVICE_HOST;
  bool caching = clt__env_alloc_cache() && bytes > 0;
  if (!host && (uint64_t)bytes > dev->max_alloc)
    return too_large(dev, bytes, "device memory", fn);
  if (host && (uint64_t)bytes > dev->global_mem) { /* within RAM: no need to ask for swap too */
    uint64_t have = host_memory(dev);
    if (have > 0 && bytes > have) {
      char a[64], g[64];
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                        "cannot allocate %s of host memory: the host has %s (RAM and swap); use "
                        "smaller tensors",
                        fmt_bytes(a, sizeof a, bytes), fmt_bytes(g, sizeof g, have));
    }
  }
  size_t size = caching ? round_size(bytes) : bytes;
  if (host)
    size = (size + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
  if (!host && (uint64_t)size > dev->max_alloc)
    size = bytes;
  clt_storage *s = caching ? cache_take(dev, size) : NULL;
  if (s) {
    atomic_store(&s->refs, 1);
    atomic_store(&s->exposed, false); /* a pointer to its last tensor died with it */
    *out = s;
    return CLT_OK;
  }
  if (over_budget(dev, size)) {
    cache_clear(dev);
    /* deferred chains may hold operands the program released: computing them frees those */
    if (over_budget(dev, size) && free_deferred(dev, fn))
      cache_clear(dev);
    if (over_budget(dev, size))
      return out_of_memory(dev, bytes, 0, fn);
  }
  if (!(s = storage_new(dev, size)))
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  int err = raw_alloc(s);
  if (err != 0) {
    /* Give back the cache and what deferred chains hold, and try once more. */
    free_deferred(dev, fn);
    cache_clear(dev);
    err = raw_alloc(s);
  }
  if (err != 0) {
    pthread_mutex_destroy(&s->lock);
    free(s);
    return out_of_memory(dev, bytes, err, fn);
  }
  pthread_mutex_lock(&dev->cache_lock);
  stats_add(dev, size, false);
  pthread_mutex_unlock(&dev->cache_lock);
  *out = s;
  return CLT_OK;
}

clt_status clt__storage_alloc_pinned(clt_device *near, size_t bytes, const char *fn,
                                     clt_storage **out) {
  size_t alloc = bytes ? bytes : 1;
  if ((uint64_t)alloc > near->max_alloc)
    return too_large(near, alloc, "pinned host memory", fn);
  const struct clt_backend *b = near->backend;
  if (!b->memory.pinned_alloc) /* (optional) */
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "%s has no pinned host memory; use plain host memory (clt_empty on cpu)",
                      near->name);
  clt_storage *s = storage_new(clt_cpu(), bytes);
  if (!s)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  int err = b->memory.pinned_alloc(near, s, alloc);
  if (err != 0 && b->memory.error_is_oom(err)) {
    /* Pinned memory is host memory: give back what the caches hold there, and try again. */
    cache_clear(near);
    cache_clear(clt_cpu());
    err = b->memory.pinned_alloc(near, s, alloc);
  }
  if (err != 0) {
    pthread_mutex_destroy(&s->lock);
    free(s);
    char a[64], m[64];
    return clt__error(b->memory.error_is_oom(err) ? CLT_ERR_OUT_OF_MEMORY : CLT_ERR_OPENCL, fn,
                      "cannot allocate %s of pinned host memory for %s: %s (%d), also after "
                      "emptying clt's caches of %s and cpu (largest buffer %s); use smaller "
                      "tensors or plain host memory (clt_empty on cpu)",
                      fmt_bytes(a, sizeof a, alloc), near->name, b->memory.error_name(err), err,
                      near->name, fmt_bytes(m, sizeof m, near->max_alloc));
  }
  s->pin_dev = near;
  *out = s;
  return CLT_OK;
}

clt_status clt__storage_wrap_foreign(clt_device *dev, void *host, void *buf, size_t bytes,
                                     void (*release)(void *ctx), void *ctx, const char *fn,
                                     clt_storage **out) {
  clt_storage *s = storage_new(dev, bytes);
  if (!s)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if (buf) {
    clt_status st = dev->backend->memory.buffer_retain(dev, buf, fn);
    if (st != CLT_OK) {
      pthread_mutex_destroy(&s->lock);
      free(s);
      return st;
    }
  }
  s->host = host;
  atomic_store(&s->exposed, host != NULL); /* its owner holds the pointer */
  s->buf = buf;
  s->release = release;
  s->release_ctx = ctx;
  *out = s;
  return CLT_OK;
}

clt_storage *clt__storage_retain(clt_storage *s) {
  if (s)
    atomic_fetch_add(&s->refs, 1);
  return s;
}

void clt__storage_release(clt_storage *s) {
  if (!s || atomic_fetch_sub(&s->refs, 1) != 1)
    return;
  const clt_storage_hooks *h = atomic_load_explicit(&hooks, memory_order_acquire);
  if (h) /* a deferred result no one can read any more is not computed */
    h->gone(s);
  /* Commands still using host memory hold a reference (clt__keep_alive), so none is pending
   * here; device buffers go to the cache with the events that order their reuse. */
  clt_device *dev = s->dev;
  if (s->release) { /* foreign memory: neither cached nor counted */
    destroy(s);
    return;
  }
  if (!s->pin_dev && s->bytes > 0 && clt__env_alloc_cache()) {
    pthread_mutex_lock(&dev->cache_lock);
    dev->mem.allocated_bytes -= s->bytes;
    dev->mem.cached_bytes += s->bytes;
    dev->mem.cached_blocks++;
    dev->mem.reserved_bytes = dev->mem.allocated_bytes + dev->mem.cached_bytes;
    s->next_free = dev->cache;
    if (dev->kind == CLT_DEVICE_HOST)
      host_block_cached(s->host, s->bytes); /* before it is visible to other threads */
    dev->cache = s;
    pthread_mutex_unlock(&dev->cache_lock);
    return;
  }
  if (!s->pin_dev && s->bytes > 0) {
    pthread_mutex_lock(&dev->cache_lock);
    dev->mem.allocated_bytes -= s->bytes;
    dev->mem.reserved_bytes = dev->mem.allocated_bytes + dev->mem.cached_bytes;
    pthread_mutex_unlock(&dev->cache_lock);
  }
  destroy(s);
}

clt_status clt_device_memory_stats(clt_device *dev, clt_memory_stats *out) {
  static const char fn[] = "clt_device_memory_stats";
  clt_status s = clt__check_device(dev, fn, "dev");
  if (s != CLT_OK)
    return s;
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  pthread_mutex_lock(&dev->cache_lock);
  *out = dev->mem;
  pthread_mutex_unlock(&dev->cache_lock);
  return CLT_OK;
}

clt_status clt_device_empty_cache(clt_device *dev) {
  static const char fn[] = "clt_device_empty_cache";
  if (dev) {
    clt_status s = clt__check_device(dev, fn, "dev");
    if (s != CLT_OK)
      return s;
    cache_clear(dev);
    return CLT_OK;
  }
  cache_clear(clt_cpu());
  int n;
  clt_device *const *list = clt__device_list(&n);
  for (int i = 0; i < n; i++)
    cache_clear(list[i]);
  return CLT_OK;
}
