/* SPDX-License-Identifier: MIT */
/* safetensors_write.c - clt_save: a parameter set to a safetensors file (the format is described
 * in safetensors.c), written atomically (io/atomic_file.c). */
#include "safetensors-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct sbuf {
  char *p;
  size_t n, cap;
  bool oom;
} sbuf;

static void put(sbuf *b, const char *s, size_t n) {
  if (b->oom)
    return;
  if (b->cap - b->n < n + 1) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->n < n + 1) {
      if (cap > SIZE_MAX / 2) {
        b->oom = true;
        return;
      }
      cap *= 2;
    }
    char *p = realloc(b->p, cap);
    if (!p) {
      b->oom = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static void put_u64(sbuf *b, uint64_t v) {
  char tmp[32];
  int n = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
  put(b, tmp, (size_t)n);
}

/* A JSON string: quotes, backslashes and control characters escaped; UTF-8 passes through. */
static void put_json_string(sbuf *b, const char *prefix, const char *s) {
  put(b, "\"", 1);
  puts_(b, prefix);
  for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
    if (*c == '"' || *c == '\\') {
      char e[2] = {'\\', (char)*c};
      put(b, e, 2);
    } else if (*c < 0x20) {
      char e[8];
      snprintf(e, sizeof e, "\\u%04x", *c);
      put(b, e, 6);
    } else {
      put(b, (const char *)c, 1);
    }
  }
  put(b, "\"", 1);
}

/* The order of the tensors' bytes in the data section: larger elements first (stable), as
 * Python's safetensors writes them, so that after the 8-aligned start of the data section every
 * tensor starts at a multiple of its element size (8 for f64 and i64). The header keeps the
 * set's order. */
static size_t *data_order(const clt_params *p) {
  size_t n = clt_params_count(p), *order = malloc((n ? n : 1) * sizeof *order), k = 0;
  if (!order)
    return NULL;
  for (size_t esize = 8; esize >= 1; esize /= 2)
    for (size_t i = 0; i < n; i++)
      if (clt_dtype_size(clt_params_tensor_at(p, i)->dtype) == esize)
        order[k++] = i;
  return order;
}

static clt_status write_file(clt__afile *f, const clt_params *p, const size_t *order,
                             const sbuf *hdr) {
  static const char fn[] = "clt_save";
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)((uint64_t)hdr->n >> (8 * i));
  clt_status s;
  if ((s = clt__afile_write(f, len, 8, fn)) != CLT_OK ||
      (s = clt__afile_write(f, hdr->p, hdr->n, fn)) != CLT_OK)
    return s;
  size_t most = 0, n = clt_params_count(p);
  for (size_t i = 0; i < n; i++)
    if (clt_params_tensor_at(p, i)->nbytes > most)
      most = clt_params_tensor_at(p, i)->nbytes;
  if (most == 0)
    return CLT_OK;
  void *data = malloc(most); /* one buffer, reused */
  if (!data)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the %zu bytes of a tensor",
                      most);
  for (size_t k = 0; k < n && s == CLT_OK; k++) {
    clt_tensor *t = clt_params_tensor_at(p, order[k]);
    if (t->nbytes == 0)
      continue;
    if ((s = clt_tensor_read(t, data, t->nbytes)) == CLT_OK) {
      clt__st_to_little_endian(data, t->nbytes, clt_dtype_size(t->dtype));
      s = clt__afile_write(f, data, t->nbytes, fn);
    }
  }
  free(data);
  return s;
}

clt_status clt_save(const char *path, const clt_params *p) {
  static const char fn[] = "clt_save";
  if (!path || !*path)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "path is NULL or empty");
  if (!p)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "p is NULL");
  size_t n = clt_params_count(p);
  size_t *order = data_order(p);
  uint64_t *begin = malloc((n ? n : 1) * sizeof *begin);
  if (!order || !begin) {
    free(order);
    free(begin);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the header of %s", path);
  }
  uint64_t off = 0;
  for (size_t k = 0; k < n; k++) {
    begin[order[k]] = off;
    off += clt_params_tensor_at(p, order[k])->nbytes;
  }

  /* The header, in the set's order. */
  sbuf h = {0};
  put(&h, "{", 1);
  for (size_t i = 0; i < n; i++) {
    clt_tensor *t = clt_params_tensor_at(p, i);
    put_json_string(&h, "", clt_params_name_at(p, i));
    puts_(&h, ":{\"dtype\":\"");
    puts_(&h, clt__st_dtype_name(t->dtype));
    puts_(&h, "\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
      if (d)
        put(&h, ",", 1);
      put_u64(&h, (uint64_t)t->shape[d]);
    }
    puts_(&h, "],\"data_offsets\":[");
    put_u64(&h, begin[i]);
    put(&h, ",", 1);
    put_u64(&h, begin[i] + t->nbytes);
    puts_(&h, "]},");
  }
  /* __metadata__: the set's own entries, "format": "pt" unless the set names a format
   * (transformers refuses a file without one), then each tensor's device. */
  puts_(&h, "\"__metadata__\":{");
  size_t nm = clt_params_metadata_count(p);
  for (size_t i = 0; i < nm; i++) {
    const char *key = clt_params_metadata_key_at(p, i);
    if (i)
      put(&h, ",", 1);
    put_json_string(&h, "", key);
    put(&h, ":", 1);
    put_json_string(&h, "", clt_params_metadata(p, key));
  }
  if (!clt_params_metadata(p, "format"))
    puts_(&h, nm ? ",\"format\":\"pt\"" : "\"format\":\"pt\"");
  for (size_t i = 0; i < n; i++) {
    put(&h, ",", 1);
    put_json_string(&h, CLT__DEVICE_KEY, clt_params_name_at(p, i));
    put(&h, ":", 1);
    put_json_string(&h, "", clt_tensor_device(clt_params_tensor_at(p, i))->name);
  }
  puts_(&h, "}}");
  /* Spaces, as the format allows, so that the data section starts at a multiple of 8. */
  while (!h.oom && h.n % 8 != 0)
    put(&h, " ", 1);
  free(begin);
  if (h.oom) {
    free(h.p);
    free(order);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the header of %s", path);
  }

  /* Written beside the target, then renamed over it: a failure or a crash leaves the old file
   * whole (io/atomic_file.c). */
  clt__afile f;
  clt_status s = clt__afile_open(&f, path, fn);
  if (s == CLT_OK) {
    if ((s = write_file(&f, p, order, &h)) == CLT_OK)
      s = clt__afile_commit(&f, fn);
    else
      clt__afile_abort(&f);
  }
  free(order);
  free(h.p);
  return s;
}
