/* SPDX-License-Identifier: MIT */
/* npy.c - NumPy's .npy format for one tensor: clt_save_npy and clt_load_npy.
 *
 * The format (numpy/lib/format.py): the magic "\x93NUMPY", a major and a minor version byte, the
 * header length (2 bytes little-endian in version 1.0, 4 bytes in 2.0 and 3.0), the header (a
 * Python dict literal such as "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
 * padded with spaces and ended by a newline), then the raw elements. The loader treats the file
 * as hostile: the header is parsed here by a small recursive-descent reader (no dependency),
 * and everything (header length, dict keys, dtype, shape, data size) is checked before any
 * memory is allocated for the data, which is then at most the file's size. */
#define _POSIX_C_SOURCE 200809L
#include "clt-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NPY_ALIGN 64
#define NPY_MAX_HEADER 100000 /* NumPy's own limit (max_header_size) is 10000 */

static const char npy_magic[6] = {'\x93', 'N', 'U', 'M', 'P', 'Y'};

static bool host_is_little(void) {
  const uint16_t one = 1;
  return *(const uint8_t *)&one == 1;
}

/* The descr NumPy writes for each dtype, without the byte-order character. */
static const char *const npy_type[CLT_DTYPE_COUNT] = {
    [CLT_F32] = "f4", [CLT_F64] = "f8",  [CLT_I32] = "i4", [CLT_I64] = "i8",
    [CLT_U8] = "u1",  [CLT_BOOL] = "b1", [CLT_F16] = "f2", /* bf16 has no NumPy type code: NULL,
                                                              refused */
};

/* Reverses the bytes of each of n elements of size bytes. */
static void byteswap(void *buf, size_t n, size_t size) {
  uint8_t *p = buf;
  if (size < 2)
    return;
  for (size_t i = 0; i < n; i++, p += size)
    for (size_t a = 0, b = size - 1; a < b; a++, b--) {
      uint8_t t = p[a];
      p[a] = p[b];
      p[b] = t;
    }
}

/* ---- saving ------------------------------------------------------------------------------- */

clt_status clt_save_npy(const char *path, const clt_tensor *t) {
  static const char fn[] = "clt_save_npy";
  clt_status st;
  if (!path)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "path is NULL");
  if ((st = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return st;
  if (!npy_type[t->dtype])
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s: bf16 has no .npy type code (NumPy has no bfloat16; ml_dtypes' 'V2' "
                      "reads back as raw bytes): save it as safetensors with clt_save, or cast "
                      "it to f32 (exact) with clt_cast first",
                      path);

  /* The header: version 1.0, padded so the data starts at a multiple of 64 bytes. */
  char header[512];
  size_t size = clt_dtype_size(t->dtype);
  int len = snprintf(header, sizeof header, "{'descr': '%c%s', 'fortran_order': False, 'shape': (",
                     size == 1 ? '|' : '<', npy_type[t->dtype]);
  for (int i = 0; i < t->ndim; i++)
    len += snprintf(header + len, sizeof header - (size_t)len, "%s%lld", i ? ", " : "",
                    (long long)t->shape[i]);
  len += snprintf(header + len, sizeof header - (size_t)len, "%s), }", t->ndim == 1 ? "," : "");
  size_t total = 10 + (size_t)len + 1; /* the prefix, the dict, the newline */
  size_t padded = (total + NPY_ALIGN - 1) / NPY_ALIGN * NPY_ALIGN;
  memset(header + len, ' ', padded - total);
  header[padded - 10 - 1] = '\n';
  uint16_t hlen = (uint16_t)(padded - 10);
  uint8_t prefix[10];
  memcpy(prefix, npy_magic, 6);
  prefix[6] = 1;
  prefix[7] = 0;
  prefix[8] = (uint8_t)(hlen & 0xff);
  prefix[9] = (uint8_t)(hlen >> 8);

  /* The elements, read back explicitly from wherever the tensor lives. */
  void *data = NULL;
  if (t->nbytes > 0) {
    if (!(data = malloc(t->nbytes)))
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "cannot allocate %zu bytes to stage %s",
                        t->nbytes, path);
    if ((st = clt_tensor_read(t, data, t->nbytes)) != CLT_OK) {
      free(data);
      return st;
    }
    if (!host_is_little())
      byteswap(data, (size_t)t->numel, size);
  }

  /* Atomically: a temp file in the same directory, fsync, rename (io/atomic_file.c). */
  clt__afile f;
  if ((st = clt__afile_open(&f, path, fn)) == CLT_OK) {
    if ((st = clt__afile_write(&f, prefix, sizeof prefix, fn)) == CLT_OK &&
        (st = clt__afile_write(&f, header, padded - 10, fn)) == CLT_OK &&
        (t->nbytes == 0 || (st = clt__afile_write(&f, data, t->nbytes, fn)) == CLT_OK))
      st = clt__afile_commit(&f, fn);
    else
      clt__afile_abort(&f);
  }
  free(data);
  return st;
}

/* ---- the header parser -------------------------------------------------------------------- */

typedef struct hdr_parser {
  const char *p, *end;
  const char *error; /* the first problem found, static */
} hdr_parser;

static void skip_ws(hdr_parser *h) {
  while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r'))
    h->p++;
}

static bool expect(hdr_parser *h, char c, const char *error) {
  skip_ws(h);
  if (h->p < h->end && *h->p == c) {
    h->p++;
    return true;
  }
  if (!h->error)
    h->error = error;
  return false;
}

/* A quoted string without escapes (all NumPy writes); copied into buf (NUL-terminated). */
static bool parse_string(hdr_parser *h, char *buf, size_t size) {
  skip_ws(h);
  if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) {
    h->error = "a quoted string was expected";
    return false;
  }
  char q = *h->p++;
  size_t n = 0;
  while (h->p < h->end && *h->p != q) {
    if (*h->p == '\\' || *h->p == '\n' || (unsigned char)*h->p < 0x20 ||
        (unsigned char)*h->p > 0x7e) {
      h->error = "a string holds an escape or a non-ASCII character";
      return false;
    }
    if (n + 1 >= size) {
      h->error = "a string is too long";
      return false;
    }
    buf[n++] = *h->p++;
  }
  if (h->p >= h->end) {
    h->error = "a string is not terminated";
    return false;
  }
  h->p++;
  buf[n] = '\0';
  return true;
}

static bool parse_word(hdr_parser *h, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(h->end - h->p) >= n && memcmp(h->p, word, n) == 0 &&
      ((size_t)(h->end - h->p) == n ||
       !(h->p[n] == '_' || (h->p[n] >= 'a' && h->p[n] <= 'z') ||
         (h->p[n] >= 'A' && h->p[n] <= 'Z') || (h->p[n] >= '0' && h->p[n] <= '9')))) {
    h->p += n;
    return true;
  }
  return false;
}

static bool parse_bool(hdr_parser *h, bool *out) {
  skip_ws(h);
  if (parse_word(h, "True"))
    *out = true;
  else if (parse_word(h, "False"))
    *out = false;
  else {
    h->error = "'fortran_order' is not True or False";
    return false;
  }
  return true;
}

/* A Python tuple of integers: "()", "(3,)", "(2, 3)", "(2, 3,)"; negative entries and more than
 * CLT_MAX_DIMS entries are refused. */
static bool parse_shape(hdr_parser *h, int64_t *shape, int *ndim) {
  if (!expect(h, '(', "'shape' is not a tuple"))
    return false;
  int n = 0;
  bool comma = false; /* a comma followed the last entry */
  for (;;) {
    skip_ws(h);
    if (h->p < h->end && *h->p == ')') {
      h->p++;
      break;
    }
    if (n > 0 && !comma) {
      h->error = "'shape' entries are not separated by commas";
      return false;
    }
    bool negative = false;
    if (h->p < h->end && *h->p == '-') {
      negative = true;
      h->p++;
    }
    if (h->p >= h->end || *h->p < '0' || *h->p > '9') {
      h->error = "'shape' holds something other than integers";
      return false;
    }
    uint64_t v = 0;
    bool big = false;
    while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
      if (v > ((uint64_t)INT64_MAX - (uint64_t)(*h->p - '0')) / 10)
        big = true;
      else
        v = v * 10 + (uint64_t)(*h->p - '0');
      h->p++;
    }
    if (h->p < h->end && (*h->p == 'L' || *h->p == 'l'))
      h->p++; /* Python 2 longs, as old NumPy wrote them */
    if (negative && v != 0) {
      h->error = "'shape' has a negative dimension";
      return false;
    }
    if (big) {
      h->error = "'shape' has a dimension larger than 2^63 - 1";
      return false;
    }
    if (n >= CLT_MAX_DIMS) {
      h->error = "'shape' has more than 8 dimensions (clt's limit)";
      return false;
    }
    shape[n++] = (int64_t)v;
    skip_ws(h);
    comma = h->p < h->end && *h->p == ',';
    if (comma)
      h->p++;
  }
  if (n == 1 && !comma) {
    h->error = "'shape' is a parenthesized integer, not a tuple (write (n,))";
    return false;
  }
  *ndim = n;
  return true;
}

typedef struct npy_header {
  char descr[64];
  bool structured; /* descr was a list: a record dtype */
  bool fortran;
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
} npy_header;

/* The dict: exactly the keys descr, fortran_order and shape, in any order, each once; then only
 * whitespace. */
static bool parse_header(hdr_parser *h, npy_header *out) {
  bool seen[3] = {false, false, false};
  if (!expect(h, '{', "the header is not a Python dict (no '{')"))
    return false;
  for (;;) {
    skip_ws(h);
    if (h->p < h->end && *h->p == '}') {
      h->p++;
      break;
    }
    char key[32];
    if (!parse_string(h, key, sizeof key)) {
      h->error = "a dict key is not a short quoted string";
      return false;
    }
    if (!expect(h, ':', "a ':' is missing after a dict key"))
      return false;
    int k = !strcmp(key, "descr")           ? 0
            : !strcmp(key, "fortran_order") ? 1
            : !strcmp(key, "shape")         ? 2
                                            : -1;
    if (k < 0) {
      h->error = "the dict has a key other than 'descr', 'fortran_order' and 'shape'";
      return false;
    }
    if (seen[k]) {
      h->error = "the dict has a key twice";
      return false;
    }
    seen[k] = true;
    bool ok;
    skip_ws(h);
    if (k == 0 && h->p < h->end && *h->p == '[') {
      out->structured = true; /* a record dtype: refused as CLT_ERR_DTYPE by the caller */
      return true;
    }
    if (k == 0) {
      ok = parse_string(h, out->descr, sizeof out->descr);
      if (!ok)
        h->error = "'descr' is not a short quoted string";
    } else if (k == 1) {
      ok = parse_bool(h, &out->fortran);
    } else {
      ok = parse_shape(h, out->shape, &out->ndim);
    }
    if (!ok)
      return false;
    skip_ws(h);
    if (h->p < h->end && *h->p == ',') {
      h->p++;
      continue;
    }
    if (!expect(h, '}', "dict entries are not separated by commas"))
      return false;
    break;
  }
  if (!seen[0] || !seen[1] || !seen[2]) {
    h->error = !seen[0]   ? "the dict has no 'descr'"
               : !seen[1] ? "the dict has no 'fortran_order'"
                          : "the dict has no 'shape'";
    return false;
  }
  skip_ws(h);
  if (h->p != h->end) {
    h->error = "the dict is followed by something other than whitespace";
    return false;
  }
  return true;
}

/* descr to dtype; *swap tells whether the file's byte order differs from the host's. */
static bool descr_dtype(const char *descr, clt_dtype *dt, bool *swap) {
  char order = descr[0];
  if (order != '<' && order != '>' && order != '|' && order != '=')
    return false;
  for (int i = 0; i < CLT_DTYPE_COUNT; i++)
    if (npy_type[i] && !strcmp(descr + 1, npy_type[i])) {
      size_t size = clt_dtype_size((clt_dtype)i);
      if (order == '|' && size > 1)
        return false;
      *dt = (clt_dtype)i;
      *swap = size > 1 && order != '=' && (order == '<') != host_is_little();
      return true;
    }
  return false;
}

/* Reorders a Fortran-ordered array (column-major) of the given shape into C order. */
static void fortran_to_c(const uint8_t *src, uint8_t *dst, int ndim, const int64_t *shape,
                         int64_t numel, size_t size) {
  int64_t fstride[CLT_MAX_DIMS], idx[CLT_MAX_DIMS] = {0};
  int64_t s = 1;
  for (int k = 0; k < ndim; k++) {
    fstride[k] = s;
    s *= shape[k];
  }
  int64_t off = 0; /* the Fortran offset of the C index idx */
  for (int64_t i = 0; i < numel; i++) {
    memcpy(dst + (size_t)i * size, src + (size_t)off * size, size);
    for (int k = ndim - 1; k >= 0; k--) {
      if (++idx[k] < shape[k]) {
        off += fstride[k];
        break;
      }
      off -= fstride[k] * (shape[k] - 1);
      idx[k] = 0;
    }
  }
}

/* ---- loading ------------------------------------------------------------------------------ */

/* Where the loader reads from: a file, or bytes in memory (clt__load_npy_mem). */
typedef struct npy_source {
  FILE *f;            /* NULL for memory */
  const uint8_t *mem; /* the bytes, when f is NULL */
  uint64_t size, pos; /* of the file or the bytes; the next byte to read from memory */
  const char *path;   /* the file's path, or a name for the bytes; for messages */
} npy_source;

static bool read_all(npy_source *src, void *buf, size_t n) {
  if (n == 0)
    return true;
  if (src->f)
    return fread(buf, 1, n, src->f) == n;
  if (src->pos > src->size || n > src->size - src->pos)
    return false;
  memcpy(buf, src->mem + src->pos, n);
  src->pos += n;
  return true;
}

static clt_status io_error(const npy_source *src, const char *fn) {
  if (src->f && ferror(src->f))
    return clt__error(CLT_ERR_IO, fn, "%s: read error: %s", src->path, strerror(errno));
  return clt__error(CLT_ERR_IO, fn, "%s: the file shrank while being read", src->path);
}

static clt_status load(npy_source *src, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_load_npy";
#define BAD(...) clt__error(CLT_ERR_FORMAT, fn, __VA_ARGS__)
  const char *path = src->path;
  uint64_t file_size = src->size;

  uint8_t prefix[12];
  if (file_size < 10)
    return BAD("%s is not a .npy file: %llu bytes, too short for the 10-byte preamble", path,
               (unsigned long long)file_size);
  if (!read_all(src, prefix, 10))
    return io_error(src, fn);
  if (memcmp(prefix, npy_magic, 6) != 0)
    return BAD("%s is not a .npy file: it does not start with \"\\x93NUMPY\"", path);
  int major = prefix[6], minor = prefix[7];
  uint64_t header_len, start;
  if (major == 1 && minor == 0) {
    header_len = (uint64_t)prefix[8] | (uint64_t)prefix[9] << 8;
    start = 10;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (file_size < 12)
      return BAD("%s: truncated in the version %d.0 preamble", path, major);
    if (!read_all(src, prefix + 10, 2))
      return io_error(src, fn);
    header_len = (uint64_t)prefix[8] | (uint64_t)prefix[9] << 8 | (uint64_t)prefix[10] << 16 |
                 (uint64_t)prefix[11] << 24;
    start = 12;
  } else {
    return BAD("%s: unknown .npy format version %d.%d (1.0, 2.0 and 3.0 are read)", path, major,
               minor);
  }
  if (header_len > NPY_MAX_HEADER)
    return BAD("%s: the header length %llu exceeds the limit of %d bytes", path,
               (unsigned long long)header_len, NPY_MAX_HEADER);
  if (header_len > file_size - start)
    return BAD("%s: the header length %llu runs past the end of the file (%llu bytes)", path,
               (unsigned long long)header_len, (unsigned long long)file_size);
  char *text = malloc(header_len ? header_len : 1);
  if (!text)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if (!read_all(src, text, header_len)) {
    free(text);
    return io_error(src, fn);
  }
  npy_header h;
  memset(&h, 0, sizeof h);
  hdr_parser p = {text, text + header_len, NULL};
  bool ok = parse_header(&p, &h);
  free(text);
  if (!ok)
    return BAD("%s: bad header: %s", path, p.error ? p.error : "malformed");
  if (h.structured)
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s: structured (record) dtypes are not supported; clt reads '<f2', '<f4', "
                      "'<f8', '<i4', '<i8', '|u1' and '|b1' (either byte order)",
                      path);
  clt_dtype dt;
  bool swap;
  if (!descr_dtype(h.descr, &dt, &swap))
    return clt__error(CLT_ERR_DTYPE, fn,
                      "%s: dtype '%s' is not supported; clt reads '<f2', '<f4', '<f8', '<i4', "
                      "'<i8', '|u1' and '|b1' (either byte order); convert it in NumPy with "
                      "a.astype(...) first",
                      path, h.descr);

  /* numel x itemsize must equal what follows the header, without overflow. */
  size_t size = clt_dtype_size(dt);
  uint64_t numel = 1, bytes;
  bool overflow = false, zero = false;
  for (int i = 0; i < h.ndim; i++) {
    zero |= h.shape[i] == 0;
    if (!overflow && __builtin_mul_overflow(numel, (uint64_t)h.shape[i], &numel))
      overflow = true;
  }
  if (zero) {
    numel = 0;
    overflow = false;
  }
  char shape_text[256];
  clt__format_shape(shape_text, sizeof shape_text, h.ndim, h.shape);
  if (overflow || __builtin_mul_overflow(numel, (uint64_t)size, &bytes) || bytes > INT64_MAX)
    return BAD("%s: shape %s of '%s' is too large: its size in bytes overflows", path, shape_text,
               h.descr);
  uint64_t data_size = file_size - start - header_len;
  if (bytes != data_size)
    return BAD("%s: shape %s of '%s' needs %llu bytes of data but the file holds %llu "
               "(%s)",
               path, shape_text, h.descr, (unsigned long long)bytes, (unsigned long long)data_size,
               bytes > data_size ? "truncated" : "trailing bytes");
#undef BAD
  if (dt == CLT_F64 && !dev->fp64)
    return clt__error(CLT_ERR_UNSUPPORTED, fn,
                      "%s holds f64 but %s (%s) does not support f64 (no cl_khr_fp64); load it "
                      "on cpu and cast it",
                      path, dev->name, dev->model);

  /* Validated: the allocation is at most the file's size. */
  clt_status st;
  uint8_t *buf = NULL, *tmp = NULL;
  clt_tensor *t = NULL;
  bool on_host = dev->kind == CLT_DEVICE_HOST;
  if (on_host) {
    if ((st = clt__tensor_new(dt, h.ndim, h.shape, dev, fn, &t)) != CLT_OK)
      return st;
    buf = clt__host_ptr(t);
  } else if (bytes > 0 && !(buf = malloc(bytes))) {
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "cannot allocate %llu bytes to stage %s",
                      (unsigned long long)bytes, path);
  }
  bool fortran = h.fortran && h.ndim > 1 && bytes > 0;
  if (fortran && !(tmp = malloc(bytes))) {
    st = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "cannot allocate %llu bytes to reorder %s",
                    (unsigned long long)bytes, path);
    goto fail;
  }
  if (!read_all(src, fortran ? tmp : buf, bytes)) {
    st = io_error(src, fn);
    goto fail;
  }
  if (fortran)
    fortran_to_c(tmp, buf, h.ndim, h.shape, (int64_t)numel, size);
  if (swap)
    byteswap(buf, numel, size);
  if (dt == CLT_BOOL)
    for (uint64_t i = 0; i < numel; i++)
      if (buf[i] > 1) {
        st = clt__error(CLT_ERR_FORMAT, fn, "%s: element %llu of a bool array is %u, not 0 or 1",
                        path, (unsigned long long)i, (unsigned)buf[i]);
        goto fail;
      }
  if (!on_host && (st = clt_from_host(buf, dt, h.ndim, h.shape, dev, &t)) != CLT_OK) {
    t = NULL;
    goto fail;
  }
  free(tmp);
  if (!on_host)
    free(buf);
  *out = t;
  return CLT_OK;
fail:
  free(tmp);
  if (!on_host)
    free(buf);
  clt_tensor_release(t);
  return st;
}

clt_status clt_load_npy(const char *path, clt_device *dev, clt_tensor **out) {
  static const char fn[] = "clt_load_npy";
  clt_status st;
  if (!path)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "path is NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((st = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return st;
  FILE *f = fopen(path, "rb");
  if (!f)
    return clt__error(CLT_ERR_IO, fn, "cannot open %s: %s", path, strerror(errno));
  struct stat sb;
  if (fstat(fileno(f), &sb) != 0)
    st = clt__error(CLT_ERR_IO, fn, "%s: %s", path, strerror(errno));
  else if (!S_ISREG(sb.st_mode))
    st = clt__error(CLT_ERR_IO, fn, "%s is not a regular file", path);
  else
    st = load(&(npy_source){.f = f, .size = (uint64_t)sb.st_size, .path = path}, dev, out);
  fclose(f);
  return st;
}

clt_status clt__load_npy_mem(const void *data, size_t size, const char *name, clt_device *dev,
                             clt_tensor **out) {
  static const char fn[] = "clt_load_npy";
  clt_status st;
  if (!data && size > 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "data is NULL but size is %zu", size);
  if (!name)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "name is NULL");
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  if ((st = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return st;
  return load(&(npy_source){.mem = data, .size = size, .path = name}, dev, out);
}
