/* SPDX-License-Identifier: MIT */
/* safetensors.c - checkpoints: clt_save and clt_load in the safetensors format
 * (docs/architecture.md rule 7).
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 *   {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
 *    "__metadata__": {"clt.device.w": "cl:1", ...}}
 * (padded with spaces), then the tensors' raw little-endian bytes; data_offsets are relative to
 * the start of the data section and tile it exactly. clt records each tensor's device in
 * __metadata__ under "clt.device.<name>"; other readers ignore it.
 *
 * The loader trusts nothing: the header length is capped and checked against the file size, the
 * JSON is parsed by the small parser below that accepts exactly this shape, and every tensor's
 * dtype, shape, byte count and offsets are checked before any tensor is allocated. */
#define _GNU_SOURCE /* memmem */

#include "backend.h" /* the device backends' copy, for uploads through staging buffers */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_CAP ((uint64_t)100 << 20) /* 100 MiB, as the reference implementation */

static const struct {
  const char *name;
  clt_dtype dt;
} st_dtypes[] = {{"F32", CLT_F32}, {"F64", CLT_F64},   {"I32", CLT_I32}, {"I64", CLT_I64},
                 {"U8", CLT_U8},   {"BOOL", CLT_BOOL}, {"F16", CLT_F16}, {"BF16", CLT_BF16}};

/* safetensors dtypes that clt has no tensor type for. */
static const char *const st_unsupported[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                             "F6_E3M2", "F4",      "I8",      "I16",
                                             "U16",     "U32",     "U64",     "C64"};

static const char *st_dtype_name(clt_dtype dt) {
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (st_dtypes[i].dt == dt)
      return st_dtypes[i].name;
  return NULL;
}

static bool host_big_endian(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 0;
}

/* The file format is little-endian; on a big-endian host each element is reversed. */
static void to_little_endian(void *p, size_t nbytes, size_t elem) {
  if (elem < 2 || !host_big_endian())
    return;
  unsigned char *b = p;
  for (size_t i = 0; i + elem <= nbytes; i += elem)
    for (size_t k = 0; k < elem / 2; k++) {
      unsigned char c = b[i + k];
      b[i + k] = b[i + elem - 1 - k];
      b[i + elem - 1 - k] = c;
    }
}

/* ---- writing ------------------------------------------------------------------------------ */

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
      to_little_endian(data, t->nbytes, clt_dtype_size(t->dtype));
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
    puts_(&h, st_dtype_name(t->dtype));
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

/* ---- the header parser -------------------------------------------------------------------- */

typedef struct tinfo {
  char *name;
  clt_dtype dt;
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
  uint64_t begin, end;
  const char *device; /* from __metadata__, or NULL */
} tinfo;

typedef struct meta {
  char *key, *value;
} meta;

typedef struct parser {
  const unsigned char *s;
  size_t n, pos;
  const char *path;
  tinfo *t;
  size_t nt, tcap;
  meta *m;
  size_t nm, mcap;
  bool have_meta;
} parser;

static clt_status fmt_error(const parser *p, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static clt_status fmt_error(const parser *p, const char *tensor, const char *fmt, ...) {
  char why[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof why, fmt, ap);
  va_end(ap);
  if (tensor)
    return clt__error(CLT_ERR_FORMAT, "clt_load", "%s: tensor '%.200s': %s", p->path, tensor, why);
  return clt__error(CLT_ERR_FORMAT, "clt_load", "%s: %s", p->path, why);
}

static clt_status oom(const parser *p) {
  return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "%s: out of host memory", p->path);
}

static clt_status syntax(const parser *p, const char *what) {
  return fmt_error(p, NULL, "bad JSON in the header at byte %zu: %s", p->pos, what);
}

static void ws(parser *p) {
  while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                           p->s[p->pos] == '\r'))
    p->pos++;
}

/* Skips whitespace and consumes c. */
static bool eat(parser *p, char c) {
  ws(p);
  if (p->pos < p->n && p->s[p->pos] == (unsigned char)c) {
    p->pos++;
    return true;
  }
  return false;
}

static int hex4(const unsigned char *s) {
  int v = 0;
  for (int i = 0; i < 4; i++) {
    int c = s[i], d;
    if (c >= '0' && c <= '9')
      d = c - '0';
    else if (c >= 'a' && c <= 'f')
      d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
      d = c - 'A' + 10;
    else
      return -1;
    v = v * 16 + d;
  }
  return v;
}

static size_t utf8_put(unsigned char *o, uint32_t cp) {
  if (cp < 0x80) {
    o[0] = (unsigned char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (unsigned char)(0xc0 | (cp >> 6));
    o[1] = (unsigned char)(0x80 | (cp & 0x3f));
    return 2;
  }
  if (cp < 0x10000) {
    o[0] = (unsigned char)(0xe0 | (cp >> 12));
    o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    o[2] = (unsigned char)(0x80 | (cp & 0x3f));
    return 3;
  }
  o[0] = (unsigned char)(0xf0 | (cp >> 18));
  o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
  o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
  o[3] = (unsigned char)(0x80 | (cp & 0x3f));
  return 4;
}

/* A JSON string, decoded into a new NUL-terminated buffer; valid UTF-8 without NUL. */
static clt_status parse_string(parser *p, const char *what, char **out) {
  if (!eat(p, '"'))
    return syntax(p, what);
  size_t start = p->pos, end = start;
  while (end < p->n && p->s[end] != '"')
    end += p->s[end] == '\\' ? 2 : 1;
  if (end >= p->n)
    return syntax(p, "a string runs past the end of the header");
  unsigned char *o = malloc(end - start + 1); /* decoding never lengthens */
  if (!o)
    return oom(p);
  size_t k = 0;
  const unsigned char *s = p->s;
  for (size_t i = start; i < end;) {
    unsigned char c = s[i];
    if (c < 0x20) {
      free(o);
      p->pos = i;
      return syntax(p, "a control character inside a string");
    }
    if (c != '\\') {
      o[k++] = c;
      i++;
      continue;
    }
    unsigned char e = s[i + 1];
    i += 2;
    const char *plain = strchr("\"\\/bfnrt", e);
    if (e && plain) {
      static const char map[] = "\"\\/\b\f\n\r\t";
      o[k++] = (unsigned char)map[plain - "\"\\/bfnrt"];
      continue;
    }
    int u1 = e == 'u' && end - i >= 4 ? hex4(s + i) : -1;
    if (u1 < 0) {
      free(o);
      p->pos = i;
      return syntax(p, "a bad escape sequence in a string");
    }
    i += 4;
    uint32_t cp = (uint32_t)u1;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      int u2 = end - i >= 6 && s[i] == '\\' && s[i + 1] == 'u' ? hex4(s + i + 2) : -1;
      if (u2 < 0xdc00 || u2 > 0xdfff) {
        free(o);
        p->pos = i;
        return syntax(p, "an unpaired surrogate escape in a string");
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + ((uint32_t)u2 - 0xdc00);
      i += 6;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      free(o);
      p->pos = i;
      return syntax(p, "an unpaired surrogate escape in a string");
    }
    if (cp == 0) {
      free(o);
      p->pos = i;
      return fmt_error(p, NULL, "a string in the header contains a NUL character (\\u0000)");
    }
    k += utf8_put(o + k, cp);
  }
  p->pos = end + 1;
  o[k] = '\0';
  if (!clt__utf8_valid(o, k)) {
    free(o);
    return fmt_error(p, NULL, "a string in the header ending at byte %zu is not valid UTF-8", end);
  }
  *out = (char *)o;
  return CLT_OK;
}

/* A non-negative JSON integer that fits in int64_t. */
static clt_status parse_uint(parser *p, const char *tensor, const char *what, uint64_t *out) {
  ws(p);
  const unsigned char *s = p->s;
  if (p->pos < p->n && s[p->pos] == '-')
    return fmt_error(p, tensor, "%s has a negative entry", what);
  if (p->pos >= p->n || s[p->pos] < '0' || s[p->pos] > '9')
    return fmt_error(p, tensor, "%s must hold integers (bad JSON at byte %zu)", what, p->pos);
  uint64_t v = 0;
  size_t start = p->pos;
  while (p->pos < p->n && s[p->pos] >= '0' && s[p->pos] <= '9') {
    if (v > (uint64_t)INT64_MAX / 10 || v * 10 + (uint64_t)(s[p->pos] - '0') > (uint64_t)INT64_MAX)
      return fmt_error(p, tensor, "%s has an entry above 2^63 - 1", what);
    v = v * 10 + (uint64_t)(s[p->pos] - '0');
    p->pos++;
  }
  if (s[start] == '0' && p->pos - start > 1)
    return fmt_error(p, tensor, "%s has a number with a leading zero", what);
  if (p->pos < p->n && (s[p->pos] == '.' || s[p->pos] == 'e' || s[p->pos] == 'E'))
    return fmt_error(p, tensor, "%s must hold integers, not fractions or exponents", what);
  *out = v;
  return CLT_OK;
}

static clt_status parse_dtype(parser *p, tinfo *t) {
  char *name;
  clt_status s = parse_string(p, "expected the dtype as a string", &name);
  if (s != CLT_OK)
    return s;
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (strcmp(name, st_dtypes[i].name) == 0) {
      t->dt = st_dtypes[i].dt;
      free(name);
      return CLT_OK;
    }
  for (size_t i = 0; i < sizeof st_unsupported / sizeof st_unsupported[0]; i++)
    if (strcmp(name, st_unsupported[i]) == 0) {
      s = clt__error(CLT_ERR_UNSUPPORTED, "clt_load",
                     "%s: tensor '%.200s': dtype %s has no clt equivalent (clt has F32, F64, I32, "
                     "I64, U8 and BOOL); convert it before saving",
                     p->path, t->name, name);
      free(name);
      return s;
    }
  s = fmt_error(p, t->name, "unknown dtype \"%.40s\" (expected F32, F64, I32, I64, U8 or BOOL)",
                name);
  free(name);
  return s;
}

static clt_status parse_shape(parser *p, tinfo *t) {
  clt_status s;
  if (!eat(p, '['))
    return fmt_error(p, t->name, "shape must be an array (bad JSON at byte %zu)", p->pos);
  t->ndim = 0;
  if (eat(p, ']'))
    return CLT_OK;
  do {
    if (t->ndim == CLT_MAX_DIMS)
      return fmt_error(p, t->name, "shape has more than %d dimensions", CLT_MAX_DIMS);
    uint64_t v;
    if ((s = parse_uint(p, t->name, "shape", &v)) != CLT_OK)
      return s;
    t->shape[t->ndim++] = (int64_t)v;
  } while (eat(p, ','));
  if (!eat(p, ']'))
    return syntax(p, "expected ',' or ']' in shape");
  return CLT_OK;
}

static clt_status parse_offsets(parser *p, tinfo *t) {
  clt_status s;
  if (!eat(p, '['))
    return fmt_error(p, t->name, "data_offsets must be an array (bad JSON at byte %zu)", p->pos);
  if ((s = parse_uint(p, t->name, "data_offsets", &t->begin)) != CLT_OK)
    return s;
  if (!eat(p, ','))
    return fmt_error(p, t->name, "data_offsets must hold two integers [begin, end]");
  if ((s = parse_uint(p, t->name, "data_offsets", &t->end)) != CLT_OK)
    return s;
  if (!eat(p, ']'))
    return fmt_error(p, t->name, "data_offsets must hold two integers [begin, end]");
  return CLT_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each key once, no others. */
static clt_status parse_tensor(parser *p, tinfo *t) {
  clt_status s;
  if (!eat(p, '{'))
    return fmt_error(p, t->name, "expected an object with dtype, shape and data_offsets");
  bool seen[3] = {false, false, false};
  static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
  if (!eat(p, '}')) {
    do {
      char *key;
      if ((s = parse_string(p, "expected a key", &key)) != CLT_OK)
        return s;
      int k = 0;
      while (k < 3 && strcmp(key, keys[k]) != 0)
        k++;
      if (k == 3) {
        s = fmt_error(p, t->name, "unknown field \"%.40s\"", key);
        free(key);
        return s;
      }
      free(key);
      if (seen[k])
        return fmt_error(p, t->name, "field %s appears twice", keys[k]);
      seen[k] = true;
      if (!eat(p, ':'))
        return syntax(p, "expected ':'");
      s = k == 0 ? parse_dtype(p, t) : k == 1 ? parse_shape(p, t) : parse_offsets(p, t);
      if (s != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, '}'))
      return syntax(p, "expected ',' or '}'");
  }
  for (int k = 0; k < 3; k++)
    if (!seen[k])
      return fmt_error(p, t->name, "field %s is missing", keys[k]);
  return CLT_OK;
}

static clt_status parse_metadata(parser *p) {
  clt_status s;
  if (p->have_meta)
    return fmt_error(p, NULL, "__metadata__ appears twice");
  p->have_meta = true;
  if (!eat(p, '{'))
    return fmt_error(p, NULL, "__metadata__ must be an object of strings");
  if (eat(p, '}'))
    return CLT_OK;
  do {
    if (p->nm == p->mcap) {
      size_t cap = p->mcap ? 2 * p->mcap : 16;
      meta *m = realloc(p->m, cap * sizeof *m);
      if (!m)
        return oom(p);
      p->m = m;
      p->mcap = cap;
    }
    meta *m = &p->m[p->nm];
    if ((s = parse_string(p, "expected a __metadata__ key", &m->key)) != CLT_OK)
      return s;
    if (!eat(p, ':')) {
      free(m->key);
      return syntax(p, "expected ':'");
    }
    ws(p);
    if (p->pos >= p->n || p->s[p->pos] != '"') {
      free(m->key);
      return fmt_error(p, NULL, "__metadata__ values must be strings (byte %zu)", p->pos);
    }
    if ((s = parse_string(p, "expected a string", &m->value)) != CLT_OK) {
      free(m->key);
      return s;
    }
    p->nm++;
  } while (eat(p, ','));
  if (!eat(p, '}'))
    return syntax(p, "expected ',' or '}' in __metadata__");
  return CLT_OK;
}

static clt_status parse_header(parser *p) {
  clt_status s;
  if (!eat(p, '{'))
    return fmt_error(p, NULL, "the header is not a JSON object");
  if (!eat(p, '}')) {
    do {
      char *key;
      if ((s = parse_string(p, "expected a tensor name", &key)) != CLT_OK)
        return s;
      if (!eat(p, ':')) {
        free(key);
        return syntax(p, "expected ':'");
      }
      if (strcmp(key, "__metadata__") == 0) {
        free(key);
        if ((s = parse_metadata(p)) != CLT_OK)
          return s;
        continue;
      }
      if (p->nt == p->tcap) {
        size_t cap = p->tcap ? 2 * p->tcap : 16;
        tinfo *t = realloc(p->t, cap * sizeof *t);
        if (!t) {
          free(key);
          return oom(p);
        }
        p->t = t;
        p->tcap = cap;
      }
      tinfo *t = &p->t[p->nt++];
      memset(t, 0, sizeof *t);
      t->name = key;
      if (!*key)
        return fmt_error(p, NULL, "a tensor has an empty name");
      if ((s = parse_tensor(p, t)) != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, '}'))
      return syntax(p, "expected ',' or '}'");
  }
  ws(p);
  if (p->pos != p->n)
    return syntax(p, "unexpected text after the header's object");
  return CLT_OK;
}

static void parser_free(parser *p) {
  for (size_t i = 0; i < p->nt; i++)
    free(p->t[i].name);
  free(p->t);
  for (size_t i = 0; i < p->nm; i++) {
    free(p->m[i].key);
    free(p->m[i].value);
  }
  free(p->m);
}

/* ---- validation --------------------------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) {
  return strcmp((*(tinfo *const *)a)->name, (*(tinfo *const *)b)->name);
}

static int cmp_offsets(const void *a, const void *b) {
  const tinfo *x = *(tinfo *const *)a, *y = *(tinfo *const *)b;
  if (x->begin != y->begin)
    return x->begin < y->begin ? -1 : 1;
  return x->end < y->end ? -1 : x->end > y->end;
}

static int cmp_meta(const void *a, const void *b) {
  return strcmp(((const meta *)a)->key, ((const meta *)b)->key);
}

/* Pointers to p's tensors sorted by name, malloc'ed (NULL when out of memory). */
static tinfo **by_name(const parser *p) {
  tinfo **v = malloc((p->nt ? p->nt : 1) * sizeof *v);
  if (!v)
    return NULL;
  for (size_t i = 0; i < p->nt; i++)
    v[i] = &p->t[i];
  qsort(v, p->nt, sizeof *v, cmp_name);
  return v;
}

/* Everything about the tensors that can be checked without their data. */
static clt_status validate(parser *p, uint64_t data_size) {
  if (p->nt == 0 && data_size > 0)
    return fmt_error(p, NULL, "the header lists no tensors but %llu bytes of data follow",
                     (unsigned long long)data_size);
  for (size_t i = 0; i < p->nt; i++) {
    tinfo *t = &p->t[i];
    uint64_t numel = 1, bytes;
    bool overflow = false, zero = false;
    for (int d = 0; d < t->ndim; d++) {
      zero |= t->shape[d] == 0;
      overflow |= __builtin_mul_overflow(numel, (uint64_t)t->shape[d], &numel);
    }
    if (zero)
      numel = 0, overflow = false;
    char sh[256];
    clt__format_shape(sh, sizeof sh, t->ndim, t->shape);
    if (overflow || __builtin_mul_overflow(numel, (uint64_t)clt_dtype_size(t->dt), &bytes) ||
        bytes > (uint64_t)INT64_MAX || bytes > SIZE_MAX)
      return fmt_error(p, t->name, "shape %s of %s has too many elements: its size overflows", sh,
                       st_dtype_name(t->dt));
    if (t->end < t->begin)
      return fmt_error(p, t->name, "data_offsets [%llu, %llu] end before they begin",
                       (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end - t->begin != bytes)
      return fmt_error(
          p, t->name, "shape %s of %s needs %llu bytes but data_offsets [%llu, %llu] span %llu", sh,
          st_dtype_name(t->dt), (unsigned long long)bytes, (unsigned long long)t->begin,
          (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
  }
  tinfo **order = by_name(p);
  if (!order)
    return oom(p);
  clt_status s = CLT_OK;
  for (size_t i = 1; i < p->nt && s == CLT_OK; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      s = fmt_error(p, order[i]->name, "the name appears twice in the header");
  /* Sorted by offset, the tensors must tile the data section: no overlap, no hole. */
  qsort(order, p->nt, sizeof *order, cmp_offsets);
  uint64_t at = 0;
  for (size_t i = 0; i < p->nt && s == CLT_OK; i++) {
    tinfo *t = order[i];
    if (t->begin < at)
      s = fmt_error(
          p, t->name, "data_offsets [%llu, %llu] overlap another tensor's (ending at %llu)",
          (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)at);
    else if (t->begin > at)
      s = fmt_error(p, t->name,
                    "data_offsets [%llu, %llu] leave a hole: bytes %llu to %llu belong to no "
                    "tensor",
                    (unsigned long long)t->begin, (unsigned long long)t->end,
                    (unsigned long long)at, (unsigned long long)t->begin);
    else if (t->end > data_size)
      s = fmt_error(p, t->name,
                    "data_offsets [%llu, %llu] run past the end of the data section (%llu "
                    "bytes): the file is truncated",
                    (unsigned long long)t->begin, (unsigned long long)t->end,
                    (unsigned long long)data_size);
    at = t->end;
  }
  free(order);
  if (s == CLT_OK && at != data_size)
    s = fmt_error(p, NULL,
                  "the file is %llu bytes longer than 8 + header + the tensors' data: trailing "
                  "bytes belong to no tensor",
                  (unsigned long long)(data_size - at));
  if (s != CLT_OK)
    return s;
  /* Devices recorded in __metadata__ (duplicate keys refused). */
  if (p->nm > 1) /* p->m is NULL without metadata, and qsort's pointer must not be */
    qsort(p->m, p->nm, sizeof *p->m, cmp_meta);
  for (size_t i = 1; i < p->nm; i++)
    if (strcmp(p->m[i - 1].key, p->m[i].key) == 0)
      return fmt_error(p, NULL, "__metadata__ has the key \"%.200s\" twice", p->m[i].key);
  size_t klen = strlen(CLT__DEVICE_KEY);
  if (p->nm > 0) {
    tinfo **byname = by_name(p);
    if (!byname)
      return oom(p);
    for (size_t i = 0; i < p->nm; i++) {
      if (strncmp(p->m[i].key, CLT__DEVICE_KEY, klen) != 0)
        continue;
      tinfo key = {.name = p->m[i].key + klen}, *kp = &key;
      tinfo **hit = bsearch(&kp, byname, p->nt, sizeof *byname, cmp_name);
      if (hit)
        (*hit)->device = p->m[i].value;
    }
    free(byname);
  }
  return CLT_OK;
}

/* ---- loading ------------------------------------------------------------------------------ */

/* Where clt_load reads from: an open file, or bytes in memory (clt__load_mem). */
typedef struct st_source {
  int fd;                   /* -1 for memory */
  const unsigned char *mem; /* the bytes, when fd is -1 */
  uint64_t size;            /* of the file or the bytes */
  const char *path;         /* the file's path, or a name for the bytes; for messages */
} st_source;

/* Reads n bytes at off; errors name the source and, when given, the tensor being read. */
static clt_status read_at(const st_source *src, void *dst, size_t n, uint64_t off,
                          const char *tensor) {
  const char *path = src->path;
  char who[256] = "";
  if (tensor)
    snprintf(who, sizeof who, " (tensor '%.200s')", tensor);
  if (src->fd < 0) {
    if (off > src->size || n > src->size - off)
      return clt__error(CLT_ERR_IO, "clt_load", "%s: unexpected end of data%s", path, who);
    memcpy(dst, src->mem + off, n);
    return CLT_OK;
  }
  char *d = dst;
  while (n > 0) {
    ssize_t r = pread(src->fd, d, n, (off_t)off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return clt__error(CLT_ERR_IO, "clt_load", "reading %s failed%s: %s", path, who,
                        strerror(errno));
    if (r == 0)
      return clt__error(CLT_ERR_IO, "clt_load", "%s: unexpected end of file%s (did it shrink?)",
                        path, who);
    d += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return CLT_OK;
}

/* ---- files that are not safetensors ------------------------------------------------------- */

static bool ends_with(const char *s, size_t n, const char *tail) {
  size_t k = strlen(tail);
  return n >= k && memcmp(s + n - k, tail, k) == 0;
}

/* Tells what src is when it is not a safetensors file, from its first bytes: a PyTorch or NumPy
 * zip archive, a .npy file, a pickle, GGUF, HDF5 or JSON. Returns CLT_ERR_FORMAT with a message
 * naming the kind and the fix, or CLT_OK when the bytes look like none of them (the caller then
 * reports what is wrong with the safetensors header). *json is set for JSON (which may be a
 * sharded checkpoint's index, the caller's business): nothing is reported then. */
static clt_status sniff(const st_source *src, bool *json) {
  static const char fn[] = "clt_load";
  const char *path = src->path;
  unsigned char b[64];
  size_t n = src->size < sizeof b ? (size_t)src->size : sizeof b;
  *json = false;
  if (n == 0 || read_at(src, b, n, 0, NULL) != CLT_OK)
    return CLT_OK;
  if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0 && n >= 30) {
    /* A zip archive: its first entry's name tells PyTorch ("archive/data.pkl") from NumPy
     * ("x.npy"). */
    size_t len = (size_t)b[26] | (size_t)b[27] << 8;
    char name[256];
    if (len > sizeof name - 1)
      len = sizeof name - 1;
    if (30 + len > src->size || read_at(src, name, len, 30, NULL) != CLT_OK)
      len = 0;
    name[len] = '\0';
    if (ends_with(name, len, ".npy"))
      return clt__error(CLT_ERR_FORMAT, fn,
                        "%s is a NumPy .npz archive (a zip of .npy files, the first '%s'), not "
                        "safetensors; read each array with clt_load_npy after unzipping it, or "
                        "convert it in Python: safetensors.numpy.save_file(dict(numpy.load(path)), "
                        "\"model.safetensors\")",
                        path, name);
    if (ends_with(name, len, "data.pkl") || strstr(name, "/data/") ||
        ends_with(name, len, "/version") || ends_with(name, len, "/byteorder") ||
        ends_with(name, len, "/.format_version"))
      return clt__error(CLT_ERR_FORMAT, fn,
                        "%s is a PyTorch checkpoint (torch.save's zip archive, .pt/.bin), not "
                        "safetensors; clt never unpickles (a pickle can run code): convert it in "
                        "Python with safetensors.torch.save_file(torch.load(path), "
                        "\"model.safetensors\")",
                        path);
  }
  if (n >= 4 && (memcmp(b, "PK\x03\x04", 4) == 0 || memcmp(b, "PK\x05\x06", 4) == 0))
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s is a zip archive (PyTorch .pt or NumPy .npz), not safetensors; convert "
                      "it in Python with safetensors.torch.save_file or "
                      "safetensors.numpy.save_file",
                      path);
  if (n >= 6 && memcmp(b, "\x93NUMPY", 6) == 0)
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s is a NumPy .npy file (one array), not safetensors; read it with "
                      "clt_load_npy",
                      path);
  if (n >= 2 && b[0] == 0x80 && b[1] >= 2 && b[1] <= 5)
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s is a Python pickle (protocol %d; PyTorch's legacy .pt/.bin format), not "
                      "safetensors; clt never unpickles (a pickle can run code): convert it in "
                      "Python with safetensors.torch.save_file(torch.load(path), "
                      "\"model.safetensors\")",
                      path, b[1]);
  if (n >= 4 && memcmp(b, "GGUF", 4) == 0)
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s is a GGUF file (llama.cpp), not safetensors; use the model's "
                      "safetensors files",
                      path);
  if (n >= 8 && memcmp(b, "\x89HDF\r\n\x1a\n", 8) == 0)
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s is an HDF5 file (Keras .h5?), not safetensors; convert it in Python "
                      "with safetensors.numpy.save_file",
                      path);
  /* JSON: '{' after blanks (and a UTF-8 byte order mark), the first 8 bytes text (a header
   * length of 123 is '{' too, followed by zeros). */
  size_t i = n >= 3 && memcmp(b, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
  bool text = true;
  for (size_t k = i; k < n && k < 8; k++)
    text &= b[k] >= 0x20 || b[k] == '\t' || b[k] == '\n' || b[k] == '\r';
  while (i < n && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r'))
    i++;
  if (text && i < n && b[i] == '{')
    *json = true;
  return CLT_OK;
}

/* The error for a JSON file that clt_load cannot take. */
static clt_status json_error(const char *path, bool is_index) {
  if (is_index)
    return clt__error(CLT_ERR_FORMAT, "clt_load",
                      "%s is a sharded checkpoint's index (model.safetensors.index.json), not "
                      "safetensors; pass the index's path to clt_load, which loads every shard",
                      path);
  return clt__error(CLT_ERR_FORMAT, "clt_load",
                    "%s is a JSON file without a \"weight_map\", neither safetensors (which starts "
                    "with an 8-byte header length) nor a sharded checkpoint's index",
                    path);
}

/* ---- one file's header -------------------------------------------------------------------- */

/* One safetensors file of a load (the file, or one shard of an index). */
typedef struct st_file {
  st_source src;
  char *path; /* owned: a shard's path (src.path points to it) */
  parser p;
  unsigned char *header;
  uint64_t data_start;
} st_file;

static void file_close(st_file *f) {
  if (f->path && f->src.fd >= 0)
    close(f->src.fd);
  free(f->path);
  free(f->header);
  parser_free(&f->p);
}

/* Reads and validates f's header. A file that is not safetensors is named in the error; with
 * json non-NULL, a JSON file sets *json instead and returns CLT_OK unparsed. */
static clt_status read_header(st_file *f, bool *json) {
  const st_source *src = &f->src;
  clt_status s;
  unsigned char len8[8];
  uint64_t hlen = 0, size = src->size;
  f->p.path = src->path;
  bool is_json;
  if (size >= 8) {
    if ((s = read_at(src, len8, 8, 0, NULL)) != CLT_OK)
      return s;
    for (int i = 7; i >= 0; i--)
      hlen = (hlen << 8) | len8[i];
  }
  /* A safetensors header is a JSON object: its first byte is '{'. */
  unsigned char first = 0;
  bool plausible = size >= 8 && hlen <= HEADER_CAP && hlen <= size - 8 &&
                   (hlen == 0 || (read_at(src, &first, 1, 8, NULL) == CLT_OK && first == '{'));
  if (!plausible) {
    if ((s = sniff(src, &is_json)) != CLT_OK)
      return s;
    if (is_json) {
      if (json) {
        *json = true;
        return CLT_OK;
      }
      return json_error(src->path, false);
    }
  }
  if (size < 8)
    return fmt_error(&f->p, NULL,
                     "the file is %llu bytes long, too short for the 8-byte header length",
                     (unsigned long long)size);
  if (hlen > HEADER_CAP)
    return fmt_error(&f->p, NULL,
                     "the header length %llu exceeds the limit of %llu bytes: not a safetensors "
                     "file",
                     (unsigned long long)hlen, (unsigned long long)HEADER_CAP);
  if (hlen > size - 8)
    return fmt_error(&f->p, NULL,
                     "the header length %llu runs past the end of the file (%llu bytes): the file "
                     "is truncated or not safetensors",
                     (unsigned long long)hlen, (unsigned long long)size);
  f->header = malloc(hlen ? (size_t)hlen : 1);
  if (!f->header)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "no host memory for the header of %s",
                      src->path);
  if ((s = read_at(src, f->header, (size_t)hlen, 8, NULL)) != CLT_OK)
    return s;
  f->p.s = f->header;
  f->p.n = (size_t)hlen;
  f->data_start = 8 + hlen;
  if ((s = parse_header(&f->p)) != CLT_OK || (s = validate(&f->p, size - 8 - hlen)) != CLT_OK)
    return s;
  return CLT_OK;
}

/* ---- tensors: devices, allocation, reading ------------------------------------------------ */

static void device_list(char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "cpu");
  for (int i = 0; i < clt_device_count() && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, ", cl:%d", i);
}

/* One tensor of a load. */
typedef struct slot {
  tinfo *t;
  st_file *f;
  clt_device *dev;
  clt_tensor *ten;
} slot;

/* Where the tensor goes; resolved for every tensor before anything is allocated. */
static clt_status resolve_device(slot *sl, clt_device *map) {
  tinfo *t = sl->t;
  clt_device *d = map;
  if (!d) {
    const char *name = t->device ? t->device : "cpu";
    if (clt_device_get(name, &d) != CLT_OK) {
      char list[512];
      device_list(list, sizeof list);
      return clt__error(CLT_ERR_DEVICE_NOT_FOUND, "clt_load",
                        "%s: checkpoint tensor '%.200s' was saved on %.64s, which this machine "
                        "does not have (devices: %s); pass a map_location such as clt_cpu()",
                        sl->f->src.path, t->name, name, list);
    }
  }
  if (t->dt == CLT_F64 && !clt_device_has_fp64(d))
    return clt__error(CLT_ERR_UNSUPPORTED, "clt_load",
                      "%s: tensor '%.200s' is F64 but %s has no fp64; pass another "
                      "map_location (clt_cpu())",
                      sl->f->src.path, t->name, d->name);
  sl->dev = d;
  return CLT_OK;
}

/* Allocates the tensor on its device; the error names the file and the tensor, then says why. */
static clt_status allocate(slot *sl) {
  static const char fn[] = "clt_load";
  tinfo *t = sl->t;
  clt_status s = clt__tensor_new(t->dt, t->ndim, t->shape, sl->dev, fn, &sl->ten);
  if (s == CLT_OK)
    return s;
  char why[1024], sh[256];
  const char *e = clt_last_error();
  if (strncmp(e, "clt_load: ", 10) == 0)
    e += 10;
  snprintf(why, sizeof why, "%s", e);
  clt__format_shape(sh, sizeof sh, t->ndim, t->shape);
  return clt__error(s, fn,
                    "%s: tensor '%.200s' (%s %s, %llu bytes) on %s, allocated before any "
                    "tensor is read: %s",
                    sl->f->src.path, t->name, st_dtype_name(t->dt), sh,
                    (unsigned long long)(t->end - t->begin), sl->dev->name, why);
}

/* Checks bool bytes and puts the elements in the host's byte order. */
static clt_status fix_bytes(slot *sl, unsigned char *b, size_t n, uint64_t at) {
  tinfo *t = sl->t;
  if (t->dt == CLT_BOOL)
    for (size_t k = 0; k < n; k++)
      if (b[k] > 1)
        return fmt_error(&sl->f->p, t->name, "BOOL element %llu is %u, not 0 or 1",
                         (unsigned long long)(at + k), b[k]);
  to_little_endian(b, n, clt_dtype_size(t->dt));
  return CLT_OK;
}

/* Host buffers through which device tensors are uploaded, chunk by chunk, two in turn: the file
 * is read into one while the other's copy to the device runs. They are plain host memory of
 * their own, not pinned (clt__storage_alloc_pinned) nor from the allocator's cache: a pinned
 * buffer freed while the device fails its commands cannot be unmapped and leaks (the fault
 * tests' sticky enqueue failures show it), and a cached block may carry other contexts' events,
 * whose bridging makes the OpenCL calls of a load vary from run to run. */
#define STAGE_CHUNK ((size_t)16 << 20)

typedef struct stager {
  clt_storage *buf[2];
  size_t chunk;
  int next;
} stager;

static void stager_free(stager *g) {
  for (int k = 0; k < 2; k++)
    clt__storage_release(g->buf[k]); /* pending copies keep their buffer alive */
}

static clt_status stager_alloc(stager *g, const char *fn) {
  clt_status s;
  for (int k = 0; k < 2; k++) {
    if (g->buf[k])
      continue;
    size_t bytes = (g->chunk + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, bytes);
    if (!p)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn,
                        "no host memory for a staging buffer of %zu "
                        "bytes",
                        bytes);
    if ((s = clt__storage_wrap_foreign(clt_cpu(), p, NULL, bytes, free, p, fn, &g->buf[k])) !=
        CLT_OK) {
      free(p);
      return s;
    }
  }
  return CLT_OK;
}

/* Makes the last error (status s) name the file and the tensor where it does not yet. */
static clt_status about(clt_status s, const slot *sl) {
  const char *e = clt_last_error(), *path = sl->f->src.path;
  if (strstr(e, path) && strstr(e, sl->t->name))
    return s;
  char why[1024];
  if (strncmp(e, "clt_load: ", 10) == 0)
    e += 10;
  snprintf(why, sizeof why, "%s", e);
  return clt__error(s, "clt_load", "%s: tensor '%.200s': %s", path, sl->t->name, why);
}

/* Reads a device tensor's bytes into the staging buffers and enqueues their copies. */
static clt_status upload(slot *sl, stager *g) {
  static const char fn[] = "clt_load";
  tinfo *t = sl->t;
  clt_status s;
  uint64_t n = t->end - t->begin;
  if ((s = stager_alloc(g, fn)) != CLT_OK)
    return s;
  for (uint64_t off = 0; off < n; off += g->chunk) {
    size_t len = (size_t)(n - off < g->chunk ? n - off : g->chunk);
    clt_storage *b = g->buf[g->next];
    g->next ^= 1;
    if ((s = clt__storage_host_wait(b, true, fn)) != CLT_OK || /* its last copy is done */
        (s = read_at(&sl->f->src, b->host, len, sl->f->data_start + t->begin + off, t->name)) !=
            CLT_OK ||
        (s = fix_bytes(sl, b->host, len, off)) != CLT_OK)
      return s;
    clt_tensor *from, *to;
    int64_t shape[1] = {(int64_t)len};
    if ((s = clt__tensor_wrap(CLT_U8, 1, shape, b, fn, &from)) != CLT_OK)
      return s;
    if ((s = clt__tensor_wrap(CLT_U8, 1, shape, sl->ten->storage, fn, &to)) != CLT_OK) {
      clt_tensor_release(from);
      return s;
    }
    to->offset = sl->ten->offset + (size_t)off;
    s = sl->dev->backend->copy(sl->dev, to, from, fn);
    clt_tensor_release(from);
    clt_tensor_release(to);
    if (s != CLT_OK)
      return s;
  }
  clt__count_h2d(sl->dev, (size_t)n);
  return CLT_OK;
}

static int cmp_slot_offset(const void *a, const void *b) {
  const slot *x = *(slot *const *)a, *y = *(slot *const *)b;
  if (x->f != y->f)
    return x->f < y->f ? -1 : 1;
  return x->t->begin < y->t->begin ? -1 : x->t->begin > y->t->begin;
}

static int cmp_slot_name(const void *a, const void *b) {
  return strcmp((*(slot *const *)a)->t->name, (*(slot *const *)b)->t->name);
}

/* The tensors of nf validated files into a new set: every device resolved and every tensor
 * allocated before any byte is read, then each tensor read once, in file order, straight into
 * its host memory or through the staging buffers onto its device. */
static clt_status load_files(st_file *files, size_t nf, clt_device *map, clt_params **out) {
  static const char fn[] = "clt_load";
  clt_status s = CLT_OK;
  size_t n = 0;
  for (size_t i = 0; i < nf; i++)
    n += files[i].p.nt;
  slot *slots = calloc(n ? n : 1, sizeof *slots);
  slot **order = malloc((n ? n : 1) * sizeof *order);
  clt_params *params = NULL;
  stager g = {{NULL, NULL}, 0, 0};
  if (!slots || !order) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", files[0].src.path);
    goto done;
  }
  n = 0;
  for (size_t i = 0; i < nf; i++)
    for (size_t k = 0; k < files[i].p.nt; k++) {
      slots[n] = (slot){&files[i].p.t[k], &files[i], NULL, NULL};
      order[n] = &slots[n];
      n++;
    }
  if (nf > 1) { /* a name in two shards (validate refused it twice within one) */
    qsort(order, n, sizeof *order, cmp_slot_name);
    for (size_t i = 1; i < n; i++)
      if (strcmp(order[i - 1]->t->name, order[i]->t->name) == 0) {
        s = clt__error(CLT_ERR_FORMAT, fn,
                       "tensor '%.200s' is in two shards, %s and %s; a sharded checkpoint holds "
                       "each tensor once: re-save it",
                       order[i]->t->name, order[i - 1]->f->src.path, order[i]->f->src.path);
        goto done;
      }
  }
  for (size_t i = 0; i < n && s == CLT_OK; i++)
    s = resolve_device(&slots[i], map);
  for (size_t i = 0; i < n && s == CLT_OK; i++)
    s = allocate(&slots[i]);
  if (s != CLT_OK)
    goto done;
  /* Read in file order; device tensors through staging buffers of up to STAGE_CHUNK bytes. */
  for (size_t i = 0; i < n; i++) {
    uint64_t b = slots[i].t->end - slots[i].t->begin;
    if (slots[i].dev->kind != CLT_DEVICE_HOST && b > g.chunk)
      g.chunk = b < STAGE_CHUNK ? (size_t)(b + 7) / 8 * 8 : STAGE_CHUNK;
  }
  slot **seq = malloc((n ? n : 1) * sizeof *seq);
  if (!seq) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", files[0].src.path);
    goto done;
  }
  for (size_t i = 0; i < n; i++)
    seq[i] = &slots[i];
  qsort(seq, n, sizeof *seq, cmp_slot_offset);
  for (size_t i = 0; i < n && s == CLT_OK; i++) {
    slot *sl = seq[i];
    size_t nb = (size_t)(sl->t->end - sl->t->begin);
    if (nb == 0)
      continue;
    if (sl->dev->kind != CLT_DEVICE_HOST) {
      s = upload(sl, &g);
    } else {
      unsigned char *dst = clt__host_ptr(sl->ten);
      s = read_at(&sl->f->src, dst, nb, sl->f->data_start + sl->t->begin, sl->t->name);
      if (s == CLT_OK)
        s = fix_bytes(sl, dst, nb, 0);
    }
    if (s != CLT_OK)
      s = about(s, sl);
  }
  free(seq);
  if (s != CLT_OK)
    goto done;
  /* The set, in file and header order, with the files' metadata (the first file's value of a
   * key wins) less clt's device entries, which belong to the tensors. */
  if ((s = clt_params_create(&params)) != CLT_OK)
    goto done;
  for (size_t i = 0; i < n && s == CLT_OK; i++)
    if ((s = clt__params_add_unique(params, slots[i].t->name, slots[i].ten, fn)) != CLT_OK)
      s = about(s, &slots[i]);
  size_t klen = strlen(CLT__DEVICE_KEY);
  for (size_t i = 0; i < nf && s == CLT_OK; i++)
    for (size_t k = 0; k < files[i].p.nm && s == CLT_OK; k++) {
      const meta *m = &files[i].p.m[k];
      if (strncmp(m->key, CLT__DEVICE_KEY, klen) != 0 && !clt_params_metadata(params, m->key) &&
          clt__params_set_metadata(params, m->key, m->value, fn) != CLT_OK)
        s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory for the metadata",
                       files[i].src.path);
    }
  if (s != CLT_OK)
    goto done;
  *out = params;
  params = NULL;
done:
  stager_free(&g);
  clt_params_release(params);
  if (slots) /* the set holds its own references */
    for (size_t i = 0; i < n; i++)
      clt_tensor_release(slots[i].ten);
  free(slots);
  free(order);
  return s;
}

/* ---- sharded checkpoints: model.safetensors.index.json ------------------------------------ */

/* Skips one JSON value of any kind (the index's "metadata" and keys clt does not use). */
static clt_status skip_value(parser *p, int depth) {
  clt_status s;
  ws(p);
  if (depth > 64)
    return fmt_error(p, NULL, "the JSON nests deeper than 64 levels");
  if (p->pos >= p->n)
    return syntax(p, "expected a value");
  unsigned char c = p->s[p->pos];
  if (c == '"') {
    char *str;
    if ((s = parse_string(p, "expected a string", &str)) != CLT_OK)
      return s;
    free(str);
    return CLT_OK;
  }
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    p->pos++;
    if (eat(p, close))
      return CLT_OK;
    do {
      if (c == '{') {
        char *key;
        if ((s = parse_string(p, "expected a key", &key)) != CLT_OK)
          return s;
        free(key);
        if (!eat(p, ':'))
          return syntax(p, "expected ':'");
      }
      if ((s = skip_value(p, depth + 1)) != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, close))
      return syntax(p, c == '{' ? "expected ',' or '}'" : "expected ',' or ']'");
    return CLT_OK;
  }
  static const char *const words[] = {"true", "false", "null"};
  for (int i = 0; i < 3; i++) {
    size_t k = strlen(words[i]);
    if (p->n - p->pos >= k && memcmp(p->s + p->pos, words[i], k) == 0) {
      p->pos += k;
      return CLT_OK;
    }
  }
  size_t start = p->pos;
  while (p->pos < p->n && p->s[p->pos] && strchr("0123456789+-.eE", p->s[p->pos]))
    p->pos++;
  return p->pos > start ? CLT_OK : syntax(p, "expected a value");
}

/* {"metadata": ..., "weight_map": {"tensor": "shard file", ...}, ...}: the weight map into p->m
 * (key the tensor, value the shard), p->have_meta set when there is one. */
static clt_status parse_index(parser *p) {
  clt_status s;
  if (p->n >= 3 && memcmp(p->s, "\xef\xbb\xbf", 3) == 0)
    p->pos = 3;
  if (!eat(p, '{'))
    return fmt_error(p, NULL, "the index is not a JSON object");
  if (!eat(p, '}')) {
    do {
      char *key;
      if ((s = parse_string(p, "expected a key", &key)) != CLT_OK)
        return s;
      bool map = strcmp(key, "weight_map") == 0;
      free(key);
      if (!eat(p, ':'))
        return syntax(p, "expected ':'");
      if (!map) {
        if ((s = skip_value(p, 0)) != CLT_OK)
          return s;
        continue;
      }
      if (p->have_meta)
        return fmt_error(p, NULL, "the index has \"weight_map\" twice");
      /* the same shape as __metadata__: an object of strings */
      if ((s = parse_metadata(p)) != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, '}'))
      return syntax(p, "expected ',' or '}'");
  }
  ws(p);
  if (p->pos != p->n)
    return syntax(p, "unexpected text after the index's object");
  return CLT_OK;
}

typedef struct name_at {
  const char *name;
  size_t file;
} name_at;

static int cmp_name_at(const void *a, const void *b) {
  return strcmp(((const name_at *)a)->name, ((const name_at *)b)->name);
}

/* Loads every shard that the index at path (src, already open) names, as one set. */
static clt_status load_index(const st_source *src, clt_device *map, clt_params **out) {
  static const char fn[] = "clt_load";
  const char *path = src->path;
  clt_status s;
  parser ip = {.path = path};
  unsigned char *text = NULL;
  const char **shard = NULL;
  st_file *files = NULL;
  name_at *names = NULL;
  size_t nshards = 0;
  if (src->size > HEADER_CAP)
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s is a JSON file of %llu bytes, larger than an "
                      "index can be (%llu); it is not safetensors",
                      path, (unsigned long long)src->size, (unsigned long long)HEADER_CAP);
  if (!(text = malloc(src->size ? (size_t)src->size : 1)))
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for %s", path);
  if ((s = read_at(src, text, (size_t)src->size, 0, NULL)) != CLT_OK)
    goto done;
  ip.s = text;
  ip.n = (size_t)src->size;
  if ((s = parse_index(&ip)) != CLT_OK)
    goto done;
  if (!ip.have_meta) {
    s = json_error(path, false);
    goto done;
  }
  if (ip.nm == 0) {
    s = clt__error(CLT_ERR_FORMAT, fn,
                   "%s: the index's \"weight_map\" is empty: it names no "
                   "tensor and no shard",
                   path);
    goto done;
  }
  /* The shards, in order of first mention; names relative to the index's directory. */
  if (!(shard = malloc(ip.nm * sizeof *shard))) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", path);
    goto done;
  }
  for (size_t i = 0; i < ip.nm; i++) {
    const char *v = ip.m[i].value;
    size_t k = 0;
    while (k < nshards && strcmp(shard[k], v) != 0)
      k++;
    if (k < nshards)
      continue;
    bool up = strcmp(v, "..") == 0 || strncmp(v, "../", 3) == 0 || strstr(v, "/../") ||
              ends_with(v, strlen(v), "/..");
    if (!*v || v[0] == '/' || up) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: tensor '%.200s' is in shard \"%.200s\": a shard "
                     "must be a file name relative to the index's directory, without '..'",
                     path, ip.m[i].key, v);
      goto done;
    }
    shard[nshards++] = v;
  }
  const char *slash = strrchr(path, '/');
  size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
  if (!(files = calloc(nshards, sizeof *files))) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", path);
    goto done;
  }
  for (size_t k = 0; k < nshards; k++)
    files[k].src.fd = -1;
  size_t total = 0;
  for (size_t k = 0; k < nshards; k++) {
    st_file *f = &files[k];
    size_t len = strlen(shard[k]);
    if (!(f->path = malloc(dirlen + len + 1))) {
      s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", path);
      goto done;
    }
    memcpy(f->path, path, dirlen);
    memcpy(f->path + dirlen, shard[k], len + 1);
    f->src.path = f->path;
    if ((f->src.fd = open(f->path, O_RDONLY)) < 0) {
      s = clt__error(CLT_ERR_IO, fn,
                     "%s: cannot open the shard %s: %s; every file that the "
                     "index's weight_map names must be in the index's directory",
                     path, f->path, strerror(errno));
      goto done;
    }
    struct stat st;
    if (fstat(f->src.fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      s = clt__error(CLT_ERR_IO, fn, "%s: the shard %s is not a regular file", path, f->path);
      goto done;
    }
    f->src.size = (uint64_t)st.st_size;
    if ((s = read_header(f, NULL)) != CLT_OK)
      goto done;
    total += f->p.nt;
  }
  /* The weight map against the shards: no tensor twice, each where the index says. */
  if (!(names = malloc((total ? total : 1) * sizeof *names))) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", path);
    goto done;
  }
  size_t n = 0;
  for (size_t k = 0; k < nshards; k++)
    for (size_t i = 0; i < files[k].p.nt; i++)
      names[n++] = (name_at){files[k].p.t[i].name, k};
  qsort(names, n, sizeof *names, cmp_name_at);
  for (size_t i = 1; i < n; i++)
    if (strcmp(names[i - 1].name, names[i].name) == 0) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: tensor '%.200s' is in two shards, %s and %s; a "
                     "sharded checkpoint holds each tensor once: re-save it",
                     path, names[i].name, files[names[i - 1].file].path, files[names[i].file].path);
      goto done;
    }
  if (ip.nm > 1)
    qsort(ip.m, ip.nm, sizeof *ip.m, cmp_meta);
  for (size_t i = 0; i < ip.nm; i++) {
    if (i > 0 && strcmp(ip.m[i - 1].key, ip.m[i].key) == 0) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: the weight_map lists tensor '%.200s' twice (in "
                     "\"%.200s\" and \"%.200s\"); each tensor belongs to one shard",
                     path, ip.m[i].key, ip.m[i - 1].value, ip.m[i].value);
      goto done;
    }
    name_at key = {ip.m[i].key, 0}, *hit = bsearch(&key, names, n, sizeof *names, cmp_name_at);
    size_t k = 0;
    while (k < nshards && strcmp(shard[k], ip.m[i].value) != 0)
      k++;
    if (!hit) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: the weight_map puts tensor '%.200s' in %s, which "
                     "does not hold it (nor does any other shard); the index and the shards do "
                     "not match: download them again",
                     path, ip.m[i].key, files[k].path);
      goto done;
    }
    if (hit->file != k) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: the weight_map puts tensor '%.200s' in %s, but it "
                     "is in %s; the index and the shards do not match: download them again",
                     path, ip.m[i].key, files[k].path, files[hit->file].path);
      goto done;
    }
  }
  s = load_files(files, nshards, map, out);
done:
  if (files)
    for (size_t k = 0; k < nshards; k++)
      file_close(&files[k]);
  free(files);
  free(names);
  free(shard);
  free(text);
  parser_free(&ip);
  return s;
}

/* ---- the entry points --------------------------------------------------------------------- */

clt_status clt_load(const char *path, clt_device *map_location, clt_params **out) {
  static const char fn[] = "clt_load";
  clt_status s;
  if (!path || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", path ? "out" : "path");
  if (map_location && (s = clt__check_device(map_location, fn, "map_location")) != CLT_OK)
    return s;
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return clt__error(CLT_ERR_IO, fn, "cannot open %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fd, &st) != 0)
    s = clt__error(CLT_ERR_IO, fn, "cannot stat %s: %s", path, strerror(errno));
  else if (!S_ISREG(st.st_mode))
    s = clt__error(CLT_ERR_IO, fn, "%s is not a regular file", path);
  else {
    st_file f = {.src = {.fd = fd, .size = (uint64_t)st.st_size, .path = path}};
    bool json = false;
    if ((s = read_header(&f, &json)) == CLT_OK)
      s = json ? load_index(&f.src, map_location, out) : load_files(&f, 1, map_location, out);
    file_close(&f);
  }
  close(fd);
  return s;
}

clt_status clt__load_mem(const void *data, size_t size, const char *name, clt_device *map_location,
                         clt_params **out) {
  static const char fn[] = "clt_load";
  clt_status s;
  if (!data && size > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "data is NULL but size is %zu", size);
  if (!name || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", name ? "out" : "name");
  if (map_location && (s = clt__check_device(map_location, fn, "map_location")) != CLT_OK)
    return s;
  st_file f = {.src = {.fd = -1, .mem = data, .size = size, .path = name}};
  bool json = false;
  if ((s = read_header(&f, &json)) == CLT_OK) {
    if (json) /* an index names files: only clt_load, given its path, can follow them */
      s = json_error(name, memmem(data, size, "\"weight_map\"", 12) != NULL);
    else
      s = load_files(&f, 1, map_location, out);
  }
  file_close(&f);
  return s;
}
