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
#define _POSIX_C_SOURCE 200809L

#include "clt-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER_CAP ((uint64_t)100 << 20) /* 100 MiB, as the reference implementation */
#define DEVICE_KEY "clt.device."

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

static clt_status write_file(clt__afile *f, const clt_params *p, const sbuf *hdr) {
  static const char fn[] = "clt_save";
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)((uint64_t)hdr->n >> (8 * i));
  clt_status s;
  if ((s = clt__afile_write(f, len, 8, fn)) != CLT_OK ||
      (s = clt__afile_write(f, hdr->p, hdr->n, fn)) != CLT_OK)
    return s;
  for (size_t i = 0; i < clt_params_count(p); i++) {
    clt_tensor *t = clt_params_tensor_at(p, i);
    if (t->nbytes == 0)
      continue;
    void *data = malloc(t->nbytes);
    if (!data)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the %zu bytes of '%s'",
                        t->nbytes, clt_params_name_at(p, i));
    if ((s = clt_tensor_read(t, data, t->nbytes)) == CLT_OK) {
      to_little_endian(data, t->nbytes, clt_dtype_size(t->dtype));
      s = clt__afile_write(f, data, t->nbytes, fn);
    }
    free(data);
    if (s != CLT_OK)
      return s;
  }
  return CLT_OK;
}

clt_status clt_save(const char *path, const clt_params *p) {
  static const char fn[] = "clt_save";
  if (!path || !*path)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "path is NULL or empty");
  if (!p)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "p is NULL");
  size_t n = clt_params_count(p);

  /* The header, in the set's order, offsets back to back. */
  sbuf h = {0};
  uint64_t off = 0;
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
    put_u64(&h, off);
    put(&h, ",", 1);
    off += t->nbytes;
    put_u64(&h, off);
    puts_(&h, "]},");
  }
  if (n > 0) {
    puts_(&h, "\"__metadata__\":{");
    for (size_t i = 0; i < n; i++) {
      if (i)
        put(&h, ",", 1);
      put_json_string(&h, DEVICE_KEY, clt_params_name_at(p, i));
      put(&h, ":", 1);
      put_json_string(&h, "", clt_tensor_device(clt_params_tensor_at(p, i))->name);
    }
    puts_(&h, "}");
  }
  put(&h, "}", 1);
  while (!h.oom && h.n % 8 != 0)
    put(&h, " ", 1);
  if (h.oom) {
    free(h.p);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the header of %s", path);
  }

  /* Written beside the target, then renamed over it: a failure or a crash leaves the old file
   * whole (io/atomic_file.c). */
  clt__afile f;
  clt_status s = clt__afile_open(&f, path, fn);
  if (s == CLT_OK) {
    if ((s = write_file(&f, p, &h)) == CLT_OK)
      s = clt__afile_commit(&f, fn);
    else
      clt__afile_abort(&f);
  }
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
    return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "out of host memory");
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
        return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "out of host memory");
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
          return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "out of host memory");
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
  tinfo **order = malloc((p->nt ? p->nt : 1) * sizeof *order);
  if (!order)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "out of host memory");
  for (size_t i = 0; i < p->nt; i++)
    order[i] = &p->t[i];
  clt_status s = CLT_OK;
  qsort(order, p->nt, sizeof *order, cmp_name);
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
  size_t klen = strlen(DEVICE_KEY);
  if (p->nm > 0) {
    tinfo **byname = malloc((p->nt ? p->nt : 1) * sizeof *byname);
    if (!byname)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "out of host memory");
    for (size_t i = 0; i < p->nt; i++)
      byname[i] = &p->t[i];
    qsort(byname, p->nt, sizeof *byname, cmp_name);
    for (size_t i = 0; i < p->nm; i++) {
      if (strncmp(p->m[i].key, DEVICE_KEY, klen) != 0)
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

static clt_status read_at(const st_source *src, void *dst, size_t n, uint64_t off) {
  const char *path = src->path;
  if (src->fd < 0) {
    if (off > src->size || n > src->size - off)
      return clt__error(CLT_ERR_IO, "clt_load", "%s: unexpected end of data", path);
    memcpy(dst, src->mem + off, n);
    return CLT_OK;
  }
  char *d = dst;
  while (n > 0) {
    ssize_t r = pread(src->fd, d, n, (off_t)off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0)
      return clt__error(CLT_ERR_IO, "clt_load", "reading %s failed: %s", path, strerror(errno));
    if (r == 0)
      return clt__error(CLT_ERR_IO, "clt_load", "%s: unexpected end of file (did it shrink?)",
                        path);
    d += r;
    n -= (size_t)r;
    off += (uint64_t)r;
  }
  return CLT_OK;
}

static void device_list(char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "cpu");
  for (int i = 0; i < clt_device_count() && used < size; i++)
    used += (size_t)snprintf(buf + used, size - used, ", cl:%d", i);
}

/* Where each tensor goes; all resolved before anything is allocated. */
static clt_status resolve_devices(parser *p, clt_device *map, clt_device **where) {
  for (size_t i = 0; i < p->nt; i++) {
    tinfo *t = &p->t[i];
    clt_device *d = map;
    if (!d) {
      const char *name = t->device ? t->device : "cpu";
      if (clt_device_get(name, &d) != CLT_OK) {
        char list[512];
        device_list(list, sizeof list);
        return clt__error(CLT_ERR_DEVICE_NOT_FOUND, "clt_load",
                          "%s: checkpoint tensor '%.200s' was saved on %.64s, which this machine "
                          "does not have (devices: %s); pass a map_location such as clt_cpu()",
                          p->path, t->name, name, list);
      }
    }
    if (t->dt == CLT_F64 && !clt_device_has_fp64(d))
      return clt__error(CLT_ERR_UNSUPPORTED, "clt_load",
                        "%s: tensor '%.200s' is F64 but %s has no fp64; pass another "
                        "map_location (clt_cpu())",
                        p->path, t->name, d->name);
    where[i] = d;
  }
  return CLT_OK;
}

static clt_status load_tensors(parser *p, const st_source *src, uint64_t data_start,
                               clt_device **where, clt_params *out) {
  clt_status s;
  for (size_t i = 0; i < p->nt; i++) {
    tinfo *t = &p->t[i];
    size_t nbytes = (size_t)(t->end - t->begin);
    void *buf = malloc(nbytes ? nbytes : 1);
    if (!buf)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load",
                        "%s: no host memory for the %zu bytes of tensor '%.200s'", p->path, nbytes,
                        t->name);
    s = read_at(src, buf, nbytes, data_start + t->begin);
    if (s == CLT_OK && t->dt == CLT_BOOL)
      for (size_t k = 0; k < nbytes && s == CLT_OK; k++)
        if (((unsigned char *)buf)[k] > 1)
          s = fmt_error(p, t->name, "BOOL element %zu is %u, not 0 or 1", k,
                        ((unsigned char *)buf)[k]);
    clt_tensor *ten = NULL;
    if (s == CLT_OK) {
      to_little_endian(buf, nbytes, clt_dtype_size(t->dt));
      s = clt_from_host(buf, t->dt, t->ndim, t->shape, where[i], &ten);
    }
    free(buf);
    if (s == CLT_OK)
      s = clt__params_add_unique(out, t->name, ten, "clt_load"); /* validate() checked names */
    clt_tensor_release(ten);
    if (s != CLT_OK)
      return s;
  }
  return CLT_OK;
}

/* Everything clt_load does once the file is open: src is validated whole (header length, the
 * header, the tensors' layout, their devices) before anything is allocated for the tensors. */
static clt_status load_source(const st_source *src, clt_device *map_location, clt_params **out) {
  static const char fn[] = "clt_load";
  clt_status s;
  parser p = {.path = src->path};
  unsigned char *header = NULL;
  clt_device **where = NULL;
  clt_params *params = NULL;
  unsigned char len8[8];
  uint64_t hlen = 0, size = src->size;
  if (size < 8) {
    s = fmt_error(&p, NULL, "the file is %llu bytes long, too short for the 8-byte header length",
                  (unsigned long long)size);
    goto done;
  }
  if ((s = read_at(src, len8, 8, 0)) != CLT_OK)
    goto done;
  for (int i = 7; i >= 0; i--)
    hlen = (hlen << 8) | len8[i];
  if (hlen > HEADER_CAP) {
    s = fmt_error(&p, NULL, "the header length %llu exceeds the limit of %llu bytes",
                  (unsigned long long)hlen, (unsigned long long)HEADER_CAP);
    goto done;
  }
  if (hlen > size - 8) {
    s = fmt_error(&p, NULL,
                  "the header length %llu runs past the end of the file (%llu bytes): the file "
                  "is truncated or not safetensors",
                  (unsigned long long)hlen, (unsigned long long)size);
    goto done;
  }
  header = malloc(hlen ? (size_t)hlen : 1);
  if (!header) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the header of %s", src->path);
    goto done;
  }
  if ((s = read_at(src, header, (size_t)hlen, 8)) != CLT_OK)
    goto done;
  p.s = header;
  p.n = (size_t)hlen;
  if ((s = parse_header(&p)) != CLT_OK || (s = validate(&p, size - 8 - hlen)) != CLT_OK)
    goto done;
  where = calloc(p.nt ? p.nt : 1, sizeof *where);
  if (!where) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    goto done;
  }
  if ((s = resolve_devices(&p, map_location, where)) != CLT_OK)
    goto done;
  if ((s = clt_params_create(&params)) != CLT_OK)
    goto done;
  if ((s = load_tensors(&p, src, 8 + hlen, where, params)) != CLT_OK)
    goto done;
  *out = params;
  params = NULL;
done:
  clt_params_release(params);
  free(where);
  free(header);
  parser_free(&p);
  return s;
}

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
  else
    s = load_source(&(st_source){.fd = fd, .size = (uint64_t)st.st_size, .path = path},
                    map_location, out);
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
  return load_source(&(st_source){.fd = -1, .mem = data, .size = size, .path = name}, map_location,
                     out);
}
