/* SPDX-License-Identifier: MIT */
/* safetensors.c - checkpoints: clt_load in the safetensors format (docs/architecture.md rule 7),
 * and what the format's files share (its dtype names, its byte order). clt_save is in
 * safetensors_write.c, the JSON parser in safetensors_json.c and sharded checkpoints' indexes in
 * safetensors_index.c; safetensors-internal.h is what they share.
 *
 * The format: an 8-byte little-endian header length N, N bytes of JSON
 *   {"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, ...,
 *    "__metadata__": {"clt.device.w": "cl:1", ...}}
 * (padded with spaces), then the tensors' raw little-endian bytes; data_offsets are relative to
 * the start of the data section and tile it exactly. clt records each tensor's device in
 * __metadata__ under "clt.device.<name>"; other readers ignore it.
 *
 * The loader trusts nothing: the header length is capped and checked against the file size, the
 * JSON is parsed by the small parser of safetensors_json.c, and every tensor's dtype, shape,
 * byte count and offsets are checked before any tensor is allocated. */
#define _GNU_SOURCE /* memmem */

#include "backend.h" /* the device backends' copy, for uploads through staging buffers */
#include "safetensors-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The one table of the dtypes clt reads and writes: every clt dtype, by its safetensors name.
 * Messages list the supported dtypes from it (dtype_list). */
static const struct {
  const char *name;
  clt_dtype dt;
} st_dtypes[] = {{"F32", CLT_F32}, {"F64", CLT_F64},   {"I32", CLT_I32}, {"I64", CLT_I64},
                 {"U8", CLT_U8},   {"BOOL", CLT_BOOL}, {"F16", CLT_F16}, {"BF16", CLT_BF16}};
_Static_assert(sizeof st_dtypes / sizeof st_dtypes[0] == CLT_DTYPE_COUNT,
               "every clt dtype needs its safetensors name in st_dtypes");

/* safetensors dtypes that clt has no tensor type for. */
static const char *const st_unsupported[] = {"F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3",
                                             "F6_E3M2", "F4",      "I8",      "I16",
                                             "U16",     "U32",     "U64",     "C64"};

/* The names of st_dtypes as a list for a message, "F32, F64, ..., F16 or BF16", with last
 * ("or", "and") before the last one. */
static void dtype_list(char *buf, size_t size, const char *last) {
  size_t n = sizeof st_dtypes / sizeof st_dtypes[0], used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && used < size; i++) {
    const char *sep = i == 0 ? "" : i + 1 < n ? ", " : last;
    used += (size_t)snprintf(buf + used, size - used, "%s%s", sep, st_dtypes[i].name);
  }
}

const char *clt__st_dtype_name(clt_dtype dt) {
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
void clt__st_to_little_endian(void *p, size_t nbytes, size_t elem) {
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

/* ---- the header ----------------------------------------------------------------------------- */

static clt_status parse_dtype(parser *p, tinfo *t) {
  char *name;
  clt_status s = clt__st_parse_string(p, "expected the dtype as a string", &name);
  if (s != CLT_OK)
    return s;
  for (size_t i = 0; i < sizeof st_dtypes / sizeof st_dtypes[0]; i++)
    if (strcmp(name, st_dtypes[i].name) == 0) {
      t->dt = st_dtypes[i].dt;
      free(name);
      return CLT_OK;
    }
  char list[128];
  for (size_t i = 0; i < sizeof st_unsupported / sizeof st_unsupported[0]; i++)
    if (strcmp(name, st_unsupported[i]) == 0) {
      dtype_list(list, sizeof list, " and ");
      s = clt__error(CLT_ERR_UNSUPPORTED, "clt_load",
                     "%s: tensor '%.200s': dtype %s has no clt equivalent (clt has %s); convert "
                     "it before saving",
                     p->path, t->name, name, list);
      free(name);
      return s;
    }
  dtype_list(list, sizeof list, " or ");
  s = clt__st_fmt_error(p, t->name, "unknown dtype \"%.40s\" (expected %s)", name, list);
  free(name);
  return s;
}

static clt_status parse_shape(parser *p, tinfo *t) {
  clt_status s;
  if (!eat(p, '['))
    return clt__st_fmt_error(p, t->name, "shape must be an array (bad JSON at byte %zu)", p->pos);
  t->ndim = 0;
  if (eat(p, ']'))
    return CLT_OK;
  do {
    if (t->ndim == CLT_MAX_DIMS)
      return clt__st_fmt_error(p, t->name, "shape has more than %d dimensions", CLT_MAX_DIMS);
    uint64_t v;
    if ((s = clt__st_parse_uint(p, t->name, "shape", &v)) != CLT_OK)
      return s;
    t->shape[t->ndim++] = (int64_t)v;
  } while (eat(p, ','));
  if (!eat(p, ']'))
    return clt__st_syntax(p, "expected ',' or ']' in shape");
  return CLT_OK;
}

static clt_status parse_offsets(parser *p, tinfo *t) {
  clt_status s;
  if (!eat(p, '['))
    return clt__st_fmt_error(p, t->name, "data_offsets must be an array (bad JSON at byte %zu)",
                             p->pos);
  if ((s = clt__st_parse_uint(p, t->name, "data_offsets", &t->begin)) != CLT_OK)
    return s;
  if (!eat(p, ','))
    return clt__st_fmt_error(p, t->name, "data_offsets must hold two integers [begin, end]");
  if ((s = clt__st_parse_uint(p, t->name, "data_offsets", &t->end)) != CLT_OK)
    return s;
  if (!eat(p, ']'))
    return clt__st_fmt_error(p, t->name, "data_offsets must hold two integers [begin, end]");
  return CLT_OK;
}

/* {"dtype": ..., "shape": [...], "data_offsets": [b, e]}, each key once, no others. */
static clt_status parse_tensor(parser *p, tinfo *t) {
  clt_status s;
  if (!eat(p, '{'))
    return clt__st_fmt_error(p, t->name, "expected an object with dtype, shape and data_offsets");
  bool seen[3] = {false, false, false};
  static const char *const keys[3] = {"dtype", "shape", "data_offsets"};
  if (!eat(p, '}')) {
    do {
      char *key;
      if ((s = clt__st_parse_string(p, "expected a key", &key)) != CLT_OK)
        return s;
      int k = 0;
      while (k < 3 && strcmp(key, keys[k]) != 0)
        k++;
      if (k == 3) {
        s = clt__st_fmt_error(p, t->name, "unknown field \"%.40s\"", key);
        free(key);
        return s;
      }
      free(key);
      if (seen[k])
        return clt__st_fmt_error(p, t->name, "field %s appears twice", keys[k]);
      seen[k] = true;
      if (!eat(p, ':'))
        return clt__st_syntax(p, "expected ':'");
      s = k == 0 ? parse_dtype(p, t) : k == 1 ? parse_shape(p, t) : parse_offsets(p, t);
      if (s != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, '}'))
      return clt__st_syntax(p, "expected ',' or '}'");
  }
  for (int k = 0; k < 3; k++)
    if (!seen[k])
      return clt__st_fmt_error(p, t->name, "field %s is missing", keys[k]);
  return CLT_OK;
}

static clt_status parse_header(parser *p) {
  clt_status s;
  if (!eat(p, '{'))
    return clt__st_fmt_error(p, NULL, "the header is not a JSON object");
  if (!eat(p, '}')) {
    do {
      char *key;
      if ((s = clt__st_parse_string(p, "expected a tensor name", &key)) != CLT_OK)
        return s;
      if (!eat(p, ':')) {
        free(key);
        return clt__st_syntax(p, "expected ':'");
      }
      if (strcmp(key, "__metadata__") == 0) {
        free(key);
        if ((s = clt__st_parse_string_map(p, "__metadata__", false)) != CLT_OK)
          return s;
        continue;
      }
      if (p->nt == p->tcap) {
        size_t cap = p->tcap ? 2 * p->tcap : 16;
        tinfo *t = realloc(p->t, cap * sizeof *t);
        if (!t) {
          free(key);
          return clt__st_oom(p);
        }
        p->t = t;
        p->tcap = cap;
      }
      tinfo *t = &p->t[p->nt++];
      memset(t, 0, sizeof *t);
      t->name = key;
      if (!*key)
        return clt__st_fmt_error(p, NULL, "a tensor has an empty name");
      if ((s = parse_tensor(p, t)) != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, '}'))
      return clt__st_syntax(p, "expected ',' or '}'");
  }
  ws(p);
  if (p->pos != p->n)
    return clt__st_syntax(p, "unexpected text after the header's object");
  return CLT_OK;
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
    return clt__st_fmt_error(p, NULL, "the header lists no tensors but %llu bytes of data follow",
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
      return clt__st_fmt_error(p, t->name,
                               "shape %s of %s has too many elements: its size overflows", sh,
                               clt__st_dtype_name(t->dt));
    if (t->end < t->begin)
      return clt__st_fmt_error(p, t->name, "data_offsets [%llu, %llu] end before they begin",
                               (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end - t->begin != bytes)
      return clt__st_fmt_error(
          p, t->name, "shape %s of %s needs %llu bytes but data_offsets [%llu, %llu] span %llu", sh,
          clt__st_dtype_name(t->dt), (unsigned long long)bytes, (unsigned long long)t->begin,
          (unsigned long long)t->end, (unsigned long long)(t->end - t->begin));
  }
  tinfo **order = by_name(p);
  if (!order)
    return clt__st_oom(p);
  clt_status s = CLT_OK;
  for (size_t i = 1; i < p->nt && s == CLT_OK; i++)
    if (strcmp(order[i - 1]->name, order[i]->name) == 0)
      s = clt__st_fmt_error(p, order[i]->name, "the name appears twice in the header");
  /* Sorted by offset, the tensors must tile the data section: no overlap, no hole. */
  qsort(order, p->nt, sizeof *order, cmp_offsets);
  uint64_t at = 0;
  for (size_t i = 0; i < p->nt && s == CLT_OK; i++) {
    tinfo *t = order[i];
    if (t->begin < at)
      s = clt__st_fmt_error(
          p, t->name, "data_offsets [%llu, %llu] overlap another tensor's (ending at %llu)",
          (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)at);
    else if (t->begin > at)
      s = clt__st_fmt_error(
          p, t->name,
          "data_offsets [%llu, %llu] leave a hole: bytes %llu to %llu belong to no "
          "tensor",
          (unsigned long long)t->begin, (unsigned long long)t->end, (unsigned long long)at,
          (unsigned long long)t->begin);
    else if (t->end > data_size)
      s = clt__st_fmt_error(p, t->name,
                            "data_offsets [%llu, %llu] run past the end of the data section (%llu "
                            "bytes): the file is truncated",
                            (unsigned long long)t->begin, (unsigned long long)t->end,
                            (unsigned long long)data_size);
    at = t->end;
  }
  free(order);
  if (s == CLT_OK && at != data_size)
    s = clt__st_fmt_error(
        p, NULL,
        "the file is %llu bytes longer than 8 + header + the tensors' data: trailing "
        "bytes belong to no tensor",
        (unsigned long long)(data_size - at));
  if (s != CLT_OK)
    return s;
  /* Devices recorded in __metadata__ (duplicate keys refused). */
  if (p->nm > 1) /* p->m is NULL without metadata, and qsort's pointer must not be */
    qsort(p->m, p->nm, sizeof *p->m, clt__st_cmp_meta);
  for (size_t i = 1; i < p->nm; i++)
    if (strcmp(p->m[i - 1].key, p->m[i].key) == 0)
      return clt__st_fmt_error(p, NULL, "__metadata__ has the key \"%.200s\" twice", p->m[i].key);
  size_t klen = strlen(CLT__DEVICE_KEY);
  if (p->nm > 0) {
    tinfo **byname = by_name(p);
    if (!byname)
      return clt__st_oom(p);
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

/* Reads n bytes at off; errors name the source and, when given, the tensor being read. */
clt_status clt__st_read_at(const st_source *src, void *dst, size_t n, uint64_t off,
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
  if (n == 0 || clt__st_read_at(src, b, n, 0, NULL) != CLT_OK)
    return CLT_OK;
  if (n >= 4 && memcmp(b, "PK\x03\x04", 4) == 0 && n >= 30) {
    /* A zip archive: its first entry's name tells PyTorch ("archive/data.pkl") from NumPy
     * ("x.npy"). */
    size_t len = (size_t)b[26] | (size_t)b[27] << 8;
    char name[256];
    if (len > sizeof name - 1)
      len = sizeof name - 1;
    if (30 + len > src->size || clt__st_read_at(src, name, len, 30, NULL) != CLT_OK)
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
clt_status clt__st_json_error(const char *path, bool is_index) {
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

void clt__st_file_close(st_file *f) {
  if (f->path && f->src.fd >= 0)
    close(f->src.fd);
  free(f->path);
  free(f->header);
  clt__st_parser_free(&f->p);
}

/* Reads and validates f's header. A file that is not safetensors is named in the error; with
 * json non-NULL, a JSON file sets *json instead and returns CLT_OK unparsed. */
clt_status clt__st_read_header(st_file *f, bool *json) {
  const st_source *src = &f->src;
  clt_status s;
  unsigned char len8[8];
  uint64_t hlen = 0, size = src->size;
  f->p.path = src->path;
  bool is_json;
  if (size >= 8) {
    if ((s = clt__st_read_at(src, len8, 8, 0, NULL)) != CLT_OK)
      return s;
    for (int i = 7; i >= 0; i--)
      hlen = (hlen << 8) | len8[i];
  }
  /* A safetensors header is a JSON object: its first byte is '{'. */
  unsigned char first = 0;
  bool plausible =
      size >= 8 && hlen <= HEADER_CAP && hlen <= size - 8 &&
      (hlen == 0 || (clt__st_read_at(src, &first, 1, 8, NULL) == CLT_OK && first == '{'));
  if (!plausible) {
    if ((s = sniff(src, &is_json)) != CLT_OK)
      return s;
    if (is_json) {
      if (json) {
        *json = true;
        return CLT_OK;
      }
      return clt__st_json_error(src->path, false);
    }
  }
  if (size < 8)
    return clt__st_fmt_error(&f->p, NULL,
                             "the file is %llu bytes long, too short for the 8-byte header length",
                             (unsigned long long)size);
  if (hlen > HEADER_CAP)
    return clt__st_fmt_error(
        &f->p, NULL,
        "the header length %llu exceeds the limit of %llu bytes: not a safetensors "
        "file",
        (unsigned long long)hlen, (unsigned long long)HEADER_CAP);
  if (hlen > size - 8)
    return clt__st_fmt_error(
        &f->p, NULL,
        "the header length %llu runs past the end of the file (%llu bytes): the file "
        "is truncated or not safetensors",
        (unsigned long long)hlen, (unsigned long long)size);
  f->header = malloc(hlen ? (size_t)hlen : 1);
  if (!f->header)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_load", "no host memory for the header of %s",
                      src->path);
  if ((s = clt__st_read_at(src, f->header, (size_t)hlen, 8, NULL)) != CLT_OK)
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
                    sl->f->src.path, t->name, clt__st_dtype_name(t->dt), sh,
                    (unsigned long long)(t->end - t->begin), sl->dev->name, why);
}

/* Checks bool bytes and puts the elements in the host's byte order. */
static clt_status fix_bytes(slot *sl, unsigned char *b, size_t n, uint64_t at) {
  tinfo *t = sl->t;
  if (t->dt == CLT_BOOL)
    for (size_t k = 0; k < n; k++)
      if (b[k] > 1)
        return clt__st_fmt_error(&sl->f->p, t->name, "BOOL element %llu is %u, not 0 or 1",
                                 (unsigned long long)(at + k), b[k]);
  clt__st_to_little_endian(b, n, clt_dtype_size(t->dt));
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
        (s = clt__st_read_at(&sl->f->src, b->host, len, sl->f->data_start + t->begin + off,
                             t->name)) != CLT_OK ||
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
    s = sl->dev->backend->memory.copy(sl->dev, to, from, fn);
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

/* The tensors of nf validated files, less those marked skip, into a new set: every device
 * resolved and every tensor
 * allocated before any byte is read, then each tensor read once, in file order, straight into
 * its host memory or through the staging buffers onto its device. */
clt_status clt__st_load_files(st_file *files, size_t nf, clt_device *map, clt_params **out) {
  static const char fn[] = "clt_load";
  clt_status s = CLT_OK;
  size_t n = 0;
  for (size_t i = 0; i < nf; i++)
    for (size_t k = 0; k < files[i].p.nt; k++)
      n += !files[i].p.t[k].skip;
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
      if (files[i].p.t[k].skip)
        continue;
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
      s = clt__st_read_at(&sl->f->src, dst, nb, sl->f->data_start + sl->t->begin, sl->t->name);
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
    if ((s = clt__st_read_header(&f, &json)) == CLT_OK)
      s = json ? clt__st_load_index(&f.src, map_location, out)
               : clt__st_load_files(&f, 1, map_location, out);
    clt__st_file_close(&f);
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
  if ((s = clt__st_read_header(&f, &json)) == CLT_OK) {
    if (json) /* an index names files: only clt_load, given its path, can follow them */
      s = clt__st_json_error(name, memmem(data, size, "\"weight_map\"", 12) != NULL);
    else
      s = clt__st_load_files(&f, 1, map_location, out);
  }
  clt__st_file_close(&f);
  return s;
}
