/* SPDX-License-Identifier: MIT */
/* staging.c - libclt's side of the interface with libclt_mpi (lib/clt-internal-mpi.h): each
 * function checks its arguments and carries the call to the staging members of the device's
 * backend (struct clt_backend, lib/backend.h), which do the copies. What every backend would do
 * alike lives here: computing deferred work before the first copy, keeping the last copy's
 * handle, counting the bytes. */
#include "backend.h"

#include <stdlib.h>

#include "clt-internal-mpi.h"

/* The session behind the opaque handle libclt_mpi holds. */
struct clt_internal_stage {
  clt_stage s;
};

int clt_internal_mpi_version(void) { return CLT_INTERNAL_MPI_VERSION; }

void *clt_internal_host_ptr(const clt_tensor *t) { return t ? clt__host_ptr(t) : NULL; }

/* dev's backend, if it can stage; else NULL. */
static const struct clt_backend *stager(const clt_device *dev) {
  const struct clt_backend *b = dev ? dev->backend : NULL;
  return b && b->staging.stage_begin && b->staging.stage_read && b->staging.stage_write &&
                 b->staging.stage_finish && b->staging.stage_keep_alive && b->staging.stage_wait &&
                 b->staging.stage_retain && b->staging.stage_release
             ? b
             : NULL;
}

clt_status clt_internal_stage_begin(const clt_tensor *src, const clt_tensor *dst, const char *fn,
                                    clt_internal_stage **out) {
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  *out = NULL;
  const clt_tensor *t = dst ? dst : src;
  if (!t)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "no tensor to stage");
  clt_device *d = t->storage->dev;
  if (src && dst && src->storage->dev != d)
    return clt__device_mismatch(fn, src->storage->dev, "src", d, "dst");
  if (d->kind == CLT_DEVICE_HOST)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "the tensor is on %s: nothing to stage",
                      d->name);
  if (!stager(d))
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "the tensor is on %s, whose backend (%s) cannot stage it through host "
                      "memory; copy it to cpu with clt_to() first",
                      d->name, d->backend->name);
  /* The copies read src and write dst, like any command: deferred chains computed first. */
  clt_tensor *reads[1] = {(clt_tensor *)src};
  clt_status st = clt__lazy_ready(reads, 1, dst, fn);
  if (st != CLT_OK)
    return st;
  struct clt_internal_stage *is = calloc(1, sizeof *is);
  if (!is)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory for a staging session");
  is->s.dev = d;
  is->s.src = src;
  is->s.dst = dst;
  is->s.fn = fn;
  st = d->backend->staging.stage_begin(&is->s);
  if (st != CLT_OK) {
    free(is);
    return st;
  }
  *out = is;
  return CLT_OK;
}

/* One copy of the session: src's bytes [offset, offset + len) into host, or host into dst's. */
static clt_status copy(clt_internal_stage *is, bool writing, size_t offset, size_t len, void *host,
                       clt_internal_done *after, clt_internal_done **done) {
  const char *fn = is ? is->s.fn : writing ? "clt_internal_stage_write" : "clt_internal_stage_read";
  const clt_tensor *t = is ? (writing ? is->s.dst : is->s.src) : NULL;
  if (!t || !done || !host)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "no session, %s, host memory or handle",
                      writing ? "destination" : "source");
  *done = NULL;
  if (offset > t->nbytes || len > t->nbytes - offset)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "bytes [%zu, %zu) are outside the tensor's %zu bytes", offset, offset + len,
                      t->nbytes);
  clt_stage *s = &is->s;
  const struct clt_backend *b = s->dev->backend;
  void *ev = NULL;
  clt_status st = writing ? b->staging.stage_write(s, offset, len, host, after, &ev)
                          : b->staging.stage_read(s, offset, len, host, after, &ev);
  if (st != CLT_OK)
    return st;
  /* The caller's reference, and the session's own in s->last. */
  b->staging.stage_retain(ev);
  if (s->last)
    b->staging.stage_release(s->last);
  s->last = ev;
  *(writing ? &s->nwritten : &s->nread) += len;
  *done = ev;
  return CLT_OK;
}

clt_status clt_internal_stage_read(clt_internal_stage *is, size_t offset, size_t len, void *host,
                                   clt_internal_done *after, clt_internal_done **done) {
  return copy(is, false, offset, len, host, after, done);
}

/* host is only read: copy() takes it as void * for both directions. */
clt_status clt_internal_stage_write(clt_internal_stage *is, size_t offset, size_t len,
                                    const void *host, clt_internal_done *after,
                                    clt_internal_done **done) {
  return copy(is, true, offset, len, (void *)host, after, done);
}

clt_status clt_internal_stage_map(clt_internal_stage *is, size_t src_off, size_t dst_off,
                                  size_t len, void **src_ptr, void **dst_ptr) {
  const char *fn = is ? is->s.fn : "clt_internal_stage_map";
  if (!is || !src_ptr || !dst_ptr)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "no session or pointer to map into");
  *src_ptr = *dst_ptr = NULL;
  clt_stage *s = &is->s;
  const struct clt_backend *b = s->dev->backend;
  if ((s->src && (src_off > s->src->nbytes || len > s->src->nbytes - src_off)) ||
      (s->dst && (dst_off > s->dst->nbytes || len > s->dst->nbytes - dst_off)))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%zu bytes to map are outside the tensor", len);
  if (!b->staging.stage_map || !b->staging.stage_unmap || !s->dev->unified_memory || s->last ||
      s->nmaps)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "%s cannot map the tensor into host memory here; copy it instead",
                      s->dev->name);
  clt_status st = b->staging.stage_map(s, src_off, dst_off, len, src_ptr, dst_ptr);
  if (st != CLT_OK) {
    *src_ptr = *dst_ptr = NULL;
    return st;
  }
  /* The program's data reaches MPI and comes back as with copies: counted the same. */
  s->nread += s->src ? len : 0;
  s->nwritten += s->dst ? len : 0;
  return CLT_OK;
}

clt_status clt_internal_stage_end(clt_internal_stage *is, const clt_tensor *keep) {
  if (!is)
    return CLT_OK;
  clt_stage *s = &is->s;
  const struct clt_backend *b = s->dev->backend;
  clt_status st = CLT_OK, unmapped = CLT_OK;
  if (s->nmaps) {
    void *ev = NULL;
    unmapped = b->staging.stage_unmap(s, &ev);
    if (ev) { /* the session takes the unmap's reference */
      if (s->last)
        b->staging.stage_release(s->last);
      s->last = ev;
    }
  }
  if (s->last) {
    if (keep)
      b->staging.stage_keep_alive(s->last, keep->storage, s->fn);
    /* Nothing written (a failure before the first write) means the session only read src. If the
     * marker fails nothing is recorded, so wait here instead, that no later command can overtake
     * the copies. */
    st = b->staging.stage_finish(s, s->nwritten > 0);
    if (st != CLT_OK)
      b->staging.stage_wait(s->dev, s->last, s->fn, "staging");
    b->staging.stage_release(s->last);
  }
  for (int i = 0; i < s->nwait; i++)
    b->staging.stage_release(s->wait[i]);
  clt__count_d2h(s->dev, s->nread);
  clt__count_h2d(s->dev, s->nwritten);
  free(is);
  return unmapped != CLT_OK ? unmapped : st;
}

clt_status clt_internal_done_wait(clt_device *dev, clt_internal_done *d, const char *fn,
                                  const char *what) {
  if (!d)
    return CLT_OK;
  const struct clt_backend *b = stager(dev);
  if (!b)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s has no staging handles",
                      dev ? dev->name : "no device");
  return b->staging.stage_wait(dev, d, fn, what);
}

void clt_internal_done_retain(clt_device *dev, clt_internal_done *d) {
  const struct clt_backend *b = stager(dev);
  if (d && b)
    b->staging.stage_retain(d);
}

void clt_internal_done_release(clt_device *dev, clt_internal_done *d) {
  const struct clt_backend *b = stager(dev);
  if (d && b)
    b->staging.stage_release(d);
}
