/* SPDX-License-Identifier: MIT */
/* print.c - PyTorch-style formatting. Formatting a device tensor copies it to the host: the only
 * implicit device-to-host trip (docs/architecture.md rule 4). */
#include "clt-internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_WIDTH 80
#define EDGE_ITEMS 3
#define SUMMARIZE_OVER 1000
#define PRECISION 4

typedef struct sbuf {
  char *p;
  size_t len, cap;
  bool failed;
} sbuf;

static void sb_add(sbuf *b, const char *s, size_t n) {
  if (b->failed)
    return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
      b->failed = true;
      return;
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}
static void sb_str(sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }
static void sb_spaces(sbuf *b, int n) {
  for (int i = 0; i < n; i++)
    sb_add(b, " ", 1);
}

typedef struct printer {
  const clt_tensor *t;
  const void *data;
  bool summarize;
  bool floating, sci, int_mode;
  int width;
} printer;

static double value_f(const printer *p, int64_t i) {
  switch (p->t->dtype) {
  case CLT_F32:
    return ((const float *)p->data)[i];
  case CLT_F16:
    return clt__f16_to_f32(((const uint16_t *)p->data)[i]);
  case CLT_BF16:
    return clt__bf16_to_f32(((const uint16_t *)p->data)[i]);
  default:
    return ((const double *)p->data)[i];
  }
}

static int64_t value_i(const printer *p, int64_t i) {
  switch (p->t->dtype) {
  case CLT_I32:
    return ((const int32_t *)p->data)[i];
  case CLT_I64:
    return ((const int64_t *)p->data)[i];
  default:
    return ((const uint8_t *)p->data)[i];
  }
}

/* The element's text without padding. */
static int raw(const printer *p, int64_t i, char *buf, size_t size) {
  if (p->t->dtype == CLT_BOOL)
    return snprintf(buf, size, "%s", value_i(p, i) ? "True" : "False");
  if (!p->floating)
    return snprintf(buf, size, "%lld", (long long)value_i(p, i));
  double v = value_f(p, i);
  if (isnan(v))
    return snprintf(buf, size, "nan");
  if (isinf(v))
    return snprintf(buf, size, v > 0 ? "inf" : "-inf");
  if (p->sci)
    return snprintf(buf, size, "%.*e", PRECISION, v);
  if (p->int_mode)
    return snprintf(buf, size, "%.0f.", v);
  return snprintf(buf, size, "%.*f", PRECISION, v);
}

static void element(sbuf *b, const printer *p, int64_t i) {
  char buf[64];
  int n = raw(p, i, buf, sizeof buf);
  sb_spaces(b, p->width - n);
  sb_str(b, buf);
}

/* Calls f on the flat index of every element shown (all, or the edges when summarizing);
 * prefix is the flat index over the dimensions before dim. */
static void for_shown(const printer *p, int dim, int64_t prefix,
                      void (*f)(printer *, int64_t, void *), void *ctx) {
  const clt_tensor *t = p->t;
  if (dim == t->ndim) {
    f((printer *)p, prefix, ctx);
    return;
  }
  int64_t n = t->shape[dim];
  for (int64_t i = 0; i < n; i++) {
    if (p->summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS)
      i = n - EDGE_ITEMS;
    for_shown(p, dim + 1, prefix * n + i, f, ctx);
  }
}

typedef struct stats {
  bool any;
  double min_abs, max_abs;
  bool all_int;
} stats;

static void gather(printer *p, int64_t i, void *ctx) {
  stats *s = ctx;
  double v = value_f(p, i);
  if (!isfinite(v) || v == 0)
    return;
  double a = fabs(v);
  if (!s->any || a < s->min_abs)
    s->min_abs = a;
  if (!s->any || a > s->max_abs)
    s->max_abs = a;
  s->any = true;
  if (v != ceil(v))
    s->all_int = false;
}

static void measure(printer *p, int64_t i, void *ctx) {
  (void)ctx;
  if (p->floating) {
    double v = value_f(p, i);
    if (!isfinite(v) || v == 0)
      return; /* the width follows the non-zero finite values, as in PyTorch */
  }
  char buf[64];
  int n = raw(p, i, buf, sizeof buf);
  if (n > p->width)
    p->width = n;
}

/* PyTorch's formatter: integers in float tensors print as "2.", a wide range switches to
 * scientific notation, every element is padded to one width. */
static void setup(printer *p) {
  p->width = 1;
  p->sci = false;
  p->int_mode = true;
  if (p->floating) {
    stats s = {false, 0, 0, true};
    for_shown(p, 0, 0, gather, &s);
    if (!s.any)
      return;
    p->int_mode = s.all_int;
    double ratio = s.max_abs / s.min_abs;
    if (s.all_int)
      p->sci = ratio > 1000.0 || s.max_abs > 1e8;
    else
      p->sci = ratio > 1000.0 || s.max_abs > 1e8 || s.min_abs < 1e-4;
  }
  for_shown(p, 0, 0, measure, NULL);
}

static void vector(sbuf *b, const printer *p, int64_t base, int indent) {
  int64_t n = p->t->shape[p->t->ndim - 1];
  int per_line = (LINE_WIDTH - indent) / (p->width + 2);
  if (per_line < 1)
    per_line = 1;
  sb_str(b, "[");
  int on_line = 0;
  for (int64_t i = 0; i < n; i++) {
    bool ellipsis = p->summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS;
    if (i > 0) {
      if (on_line == per_line) {
        sb_str(b, ",\n");
        sb_spaces(b, indent + 1);
        on_line = 0;
      } else {
        sb_str(b, ", ");
      }
    }
    if (ellipsis) {
      sb_str(b, " ...");
      i = n - EDGE_ITEMS - 1;
    } else {
      element(b, p, base + i);
    }
    on_line++;
  }
  sb_str(b, "]");
}

static void nested(sbuf *b, const printer *p, int dim, int64_t base, int indent) {
  const clt_tensor *t = p->t;
  if (dim == t->ndim - 1) {
    vector(b, p, base, indent);
    return;
  }
  int64_t n = t->shape[dim], inner = 1;
  for (int d = dim + 1; d < t->ndim; d++)
    inner *= t->shape[d];
  int remaining = t->ndim - dim; /* dimensions from here down */
  sb_str(b, "[");
  for (int64_t i = 0; i < n; i++) {
    if (i > 0) {
      sb_str(b, ",");
      for (int k = 0; k < remaining - 1; k++)
        sb_str(b, "\n");
      sb_spaces(b, indent + 1);
    }
    if (p->summarize && n > 2 * EDGE_ITEMS && i == EDGE_ITEMS) {
      sb_str(b, "...");
      i = n - EDGE_ITEMS - 1;
      continue;
    }
    nested(b, p, dim + 1, base + i * inner, indent + 1);
  }
  sb_str(b, "]");
}

static clt_status format_all(const clt_tensor *t, sbuf *b, const char *fn) {
  static const char prefix[] = "tensor(";
  int indent = (int)strlen(prefix);
  void *data = NULL;
  if (t->nbytes > 0) {
    data = malloc(t->nbytes);
    if (!data)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    clt_status s = clt__read_bytes_implicit(t, data, fn); /* the implicit trip home */
    if (s != CLT_OK) {
      free(data);
      return s;
    }
  }
  char suffixes[3][96];
  int ns = 0;
  if (t->storage->dev->kind != CLT_DEVICE_HOST)
    snprintf(suffixes[ns++], sizeof suffixes[0], "device='%s'", t->storage->dev->name);
  sb_str(b, prefix);
  if (t->numel == 0) {
    if (t->ndim != 1) {
      char sh[80] = "size=(";
      for (int d = 0; d < t->ndim; d++)
        snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", d ? ", " : "",
                 (long long)t->shape[d]);
      snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s)", t->ndim == 1 ? "," : "");
      snprintf(suffixes[ns++], sizeof suffixes[0], "%s", sh);
    }
    sb_str(b, "[]");
  } else {
    printer p = {.t = t,
                 .data = data,
                 .summarize = t->numel > SUMMARIZE_OVER,
                 .floating = clt__dtype_is_float(t->dtype)};
    setup(&p);
    if (t->ndim == 0)
      element(b, &p, 0);
    else
      nested(b, &p, 0, 0, indent);
  }
  if (t->dtype != CLT_F32)
    snprintf(suffixes[ns++], sizeof suffixes[0], "dtype=%s", clt_dtype_name(t->dtype));
  free(data);
  /* Suffixes go on the last line unless it would pass the line width. */
  const char *nl = b->p ? strrchr(b->p, '\n') : NULL;
  size_t last = b->p ? (nl ? strlen(nl + 1) + 2 : b->len + 1) : 0;
  for (int i = 0; i < ns; i++) {
    size_t len = strlen(suffixes[i]);
    if (last + len + 2 > LINE_WIDTH) {
      sb_str(b, ",\n");
      sb_spaces(b, indent);
      last = (size_t)indent + len;
    } else {
      sb_str(b, ", ");
      last += len + 2;
    }
    sb_str(b, suffixes[i]);
  }
  sb_str(b, ")");
  if (b->failed)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  return CLT_OK;
}

clt_status clt_format(const clt_tensor *t, char *buf, size_t size, size_t *len) {
  static const char fn[] = "clt_format";
  clt_status s;
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  if (!buf && size > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "buf is NULL but size is %zu", size);
  sbuf b = {0};
  if ((s = format_all(t, &b, fn)) != CLT_OK) {
    free(b.p);
    return s;
  }
  if (size > 0) {
    size_t n = b.len < size - 1 ? b.len : size - 1;
    memcpy(buf, b.p, n);
    buf[n] = '\0';
  }
  if (len)
    *len = b.len;
  free(b.p);
  return CLT_OK;
}

clt_status clt_fprint(FILE *f, const clt_tensor *t) {
  static const char fn[] = "clt_fprint";
  clt_status s;
  if (!f)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "f is NULL");
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  sbuf b = {0};
  if ((s = format_all(t, &b, fn)) == CLT_OK) {
    /* One stdio call for the text and its newline, so that threads printing at once never
     * interleave inside a line (each call locks the stream). */
    sb_str(&b, "\n");
    if (b.failed)
      s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    else
      fputs(b.p, f);
  }
  free(b.p);
  return s;
}

clt_status clt_print(const clt_tensor *t) {
  if (!t)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_print", "t is NULL");
  return clt_fprint(stdout, t);
}
