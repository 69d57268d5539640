/* memory.c - storage: host memory, pinned host memory and device buffers, refcounted, with a
 * caching allocator per device.
 *
 * Released memory goes to its device's cache together with the events of the last commands
 * that wrote and read it. A tensor that reuses it inherits those events, so its first command
 * waits for them through the usual wait lists: reuse is never ahead of pending device work,
 * on any queue, and nothing blocks on the host. Freshly allocated memory costs page faults on
 * CPU devices and driver allocations on GPUs; reuse avoids both (bench/transfer shows the
 * difference). On an allocation failure the cache is emptied and the allocation retried. */
#include "clt-internal.h"

#include <stdlib.h>
#include <string.h>

#define HOST_ALIGN 64

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
  return s;
}

static void destroy(clt_storage *s) {
  if (s->release && s->mem) {
    /* The owner may reuse its buffer as soon as it hears back: finish our commands first. */
    if (s->write_ev)
      clWaitForEvents(1, &s->write_ev);
    for (int i = 0; i < s->nreads; i++)
      clWaitForEvents(1, &s->read_ev[i]);
  }
  if (s->write_ev)
    clReleaseEvent(s->write_ev);
  for (int i = 0; i < s->nreads; i++)
    clReleaseEvent(s->read_ev[i]);
  if (s->release) {
    /* Host memory has no commands pending here (clt__keep_alive holds a reference). */
    if (s->mem)
      clReleaseMemObject(s->mem);
    s->release(s->release_ctx);
  } else if (s->pin_dev) {
    clEnqueueUnmapMemObject(s->pin_dev->queue, s->mem, s->host, 0, NULL, NULL);
    clReleaseMemObject(s->mem);
  } else if (s->mem) {
    clReleaseMemObject(s->mem); /* OpenCL keeps it until its commands finish */
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
  while (s) {
    clt_storage *next = s->next_free;
    destroy(s);
    s = next;
  }
}

static clt_storage *storage_new(clt_device *dev, size_t bytes) {
  clt_storage *s = calloc(1, sizeof *s);
  if (!s)
    return NULL;
  atomic_init(&s->refs, 1);
  s->dev = dev;
  s->bytes = bytes;
  pthread_mutex_init(&s->lock, NULL);
  return s;
}

/* Allocates the memory itself; returns the OpenCL error (CL_SUCCESS) or
 * CL_OUT_OF_HOST_MEMORY for host memory. */
static cl_int raw_alloc(clt_storage *s) {
  clt_device *dev = s->dev;
  if (dev->kind == CLT_DEVICE_HOST) {
    s->host = aligned_alloc(HOST_ALIGN, s->bytes ? s->bytes : HOST_ALIGN);
    return s->host ? CL_SUCCESS : CL_OUT_OF_HOST_MEMORY;
  }
  if (s->bytes == 0)
    return CL_SUCCESS;
  cl_int err;
  s->mem = clCreateBuffer(dev->context, CL_MEM_READ_WRITE, s->bytes, NULL, &err);
  return err;
}

clt_status clt__storage_alloc(clt_device *dev, size_t bytes, const char *fn, clt_storage **out) {
  bool caching = clt__env_alloc_cache() && bytes > 0;
  size_t size = caching ? round_size(bytes) : bytes;
  if (dev->kind == CLT_DEVICE_HOST)
    size = (size + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
  if (dev->kind != CLT_DEVICE_HOST && (cl_ulong)bytes > dev->max_alloc)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                      "%zu bytes exceed the largest buffer %s allows (%llu bytes)", bytes,
                      dev->name, (unsigned long long)dev->max_alloc);
  if (dev->kind != CLT_DEVICE_HOST && (cl_ulong)size > dev->max_alloc)
    size = bytes;
  clt_storage *s = caching ? cache_take(dev, size) : NULL;
  if (s) {
    atomic_store(&s->refs, 1);
    *out = s;
    return CLT_OK;
  }
  if (!(s = storage_new(dev, size)))
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  cl_int err = raw_alloc(s);
  if (err != CL_SUCCESS) {
    /* Give the cache back and try once more. */
    cache_clear(dev);
    err = raw_alloc(s);
  }
  if (err != CL_SUCCESS) {
    pthread_mutex_destroy(&s->lock);
    free(s);
    clt_memory_stats m;
    clt_device_memory_stats(dev, &m);
    if (dev->kind == CLT_DEVICE_HOST)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                        "cannot allocate %zu bytes of host memory (%llu bytes held by tensors)",
                        size, (unsigned long long)m.allocated_bytes);
    clt_status st = clt__cl_error(err, fn, "clCreateBuffer", dev);
    return clt__error(st, fn,
                      "cannot allocate %zu bytes on %s: %s (%llu bytes held by tensors, cache "
                      "emptied, device memory %llu bytes)",
                      size, dev->name, clt__cl_error_name(err),
                      (unsigned long long)m.allocated_bytes, (unsigned long long)dev->global_mem);
  }
  pthread_mutex_lock(&dev->cache_lock);
  stats_add(dev, size, false);
  pthread_mutex_unlock(&dev->cache_lock);
  *out = s;
  return CLT_OK;
}

clt_status clt__storage_alloc_pinned(clt_device *near, size_t bytes, const char *fn,
                                     clt_storage **out) {
  clt_storage *s = storage_new(clt_cpu(), bytes);
  if (!s)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  size_t alloc = bytes ? bytes : 1;
  cl_int err;
  s->mem =
      clCreateBuffer(near->context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, alloc, NULL, &err);
  if (err == CL_SUCCESS)
    s->host = clEnqueueMapBuffer(near->queue, s->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, alloc,
                                 0, NULL, NULL, &err);
  if (err != CL_SUCCESS) {
    if (s->mem)
      clReleaseMemObject(s->mem);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return clt__cl_error(err, fn, "allocating pinned host memory", near);
  }
  s->pin_dev = near;
  *out = s;
  return CLT_OK;
}

clt_status clt__storage_wrap_foreign(clt_device *dev, void *host, cl_mem mem, size_t bytes,
                                     void (*release)(void *ctx), void *ctx, const char *fn,
                                     clt_storage **out) {
  clt_storage *s = storage_new(dev, bytes);
  if (!s)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if (mem) {
    cl_int err = clRetainMemObject(mem);
    if (err != CL_SUCCESS) {
      pthread_mutex_destroy(&s->lock);
      free(s);
      return clt__cl_error(err, fn, "clRetainMemObject", dev);
    }
  }
  s->host = host;
  s->mem = mem;
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
  clt_device *list = clt__device_list(&n);
  for (int i = 0; i < n; i++)
    cache_clear(&list[i]);
  return CLT_OK;
}
