/* SPDX-License-Identifier: MIT */
/* safetensors-internal.h - what the files of the safetensors format share, for them alone:
 * the dtype names (safetensors.c), the small JSON parser (safetensors_json.c), a file being
 * loaded and the loader's steps (safetensors.c) that the sharded index (safetensors_index.c)
 * runs over its shards. The writer (safetensors_write.c) needs only the dtype names and the byte
 * order. Nothing outside lib/io/safetensors*.c includes it. */
#ifndef CLT_SAFETENSORS_INTERNAL_H
#define CLT_SAFETENSORS_INTERNAL_H

#include "clt-internal.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define HEADER_CAP ((uint64_t)100 << 20) /* 100 MiB, as the reference implementation */

/* ---- the format (safetensors.c) ---------------------------------------------------------- */

/* The safetensors name of dt ("F32", "BF16"), or NULL for a dtype the format lacks. */
const char *clt__st_dtype_name(clt_dtype dt);
/* The file format is little-endian; on a big-endian host each element of elem bytes of the
 * nbytes at p is reversed in place. */
void clt__st_to_little_endian(void *p, size_t nbytes, size_t elem);

/* ---- the JSON parser (safetensors_json.c) ------------------------------------------------ */

/* One tensor of a header. */
typedef struct tinfo {
  char *name;
  clt_dtype dt;
  int ndim;
  int64_t shape[CLT_MAX_DIMS];
  uint64_t begin, end;
  const char *device; /* from __metadata__, or NULL */
  bool skip;          /* not loaded: in a shard, but not named by the index's weight_map */
} tinfo;

/* One entry of an object of strings (__metadata__, an index's weight_map). */
typedef struct meta {
  char *key, *value;
} meta;

/* A JSON text being parsed (a header or an index) and what it has given so far. */
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

/* CLT_ERR_FORMAT for clt_load: "<path>: tensor '<tensor>': <why>", or without the tensor when it
 * is NULL. */
clt_status clt__st_fmt_error(const parser *p, const char *tensor, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* CLT_ERR_OUT_OF_MEMORY for clt_load, naming p's file. */
clt_status clt__st_oom(const parser *p);
/* CLT_ERR_FORMAT for bad JSON at p's position, saying what was expected. */
clt_status clt__st_syntax(const parser *p, const char *what);

/* Skips whitespace. */
static inline void ws(parser *p) {
  while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' || p->s[p->pos] == '\n' ||
                           p->s[p->pos] == '\r'))
    p->pos++;
}

/* Skips whitespace and consumes c. */
static inline bool eat(parser *p, char c) {
  ws(p);
  if (p->pos < p->n && p->s[p->pos] == (unsigned char)c) {
    p->pos++;
    return true;
  }
  return false;
}

/* A JSON string, decoded into a new NUL-terminated buffer (*out, malloc'ed); valid UTF-8
 * without NUL. what says what was expected, for the error. */
clt_status clt__st_parse_string(parser *p, const char *what, char **out);
/* A non-negative JSON integer that fits in int64_t; errors name tensor (or none, NULL) and
 * what holds the number. */
clt_status clt__st_parse_uint(parser *p, const char *tensor, const char *what, uint64_t *out);
/* Skips one JSON value of any kind, nested at most 64 deep below depth. */
clt_status clt__st_skip_value(parser *p, int depth);
/* An object of strings into p->m (p->nm entries), p->have_meta set; refused if p already has
 * one. what names the object in messages ("__metadata__", "\"weight_map\""); with tensor_keys its
 * keys are tensor names (a weight_map), and a value that is not a string is blamed on its
 * tensor. */
clt_status clt__st_parse_string_map(parser *p, const char *what, bool tensor_keys);
/* Frees what p holds: its tensors' names and its entries. */
void clt__st_parser_free(parser *p);
/* Orders meta entries by key (qsort). */
int clt__st_cmp_meta(const void *a, const void *b);

/* ---- loading (safetensors.c) ------------------------------------------------------------- */

/* Where clt_load reads from: an open file, or bytes in memory (clt__load_mem). */
typedef struct st_source {
  int fd;                   /* -1 for memory */
  const unsigned char *mem; /* the bytes, when fd is -1 */
  uint64_t size;            /* of the file or the bytes */
  const char *path;         /* the file's path, or a name for the bytes; for messages */
} st_source;

/* One safetensors file of a load (the file, or one shard of an index). */
typedef struct st_file {
  st_source src;
  char *path; /* owned: a shard's path (src.path points to it) */
  parser p;
  unsigned char *header;
  uint64_t data_start;
} st_file;

static inline bool ends_with(const char *s, size_t n, const char *tail) {
  size_t k = strlen(tail);
  return n >= k && memcmp(s + n - k, tail, k) == 0;
}

/* Reads n bytes at off; errors name the source and, when given, the tensor being read. */
clt_status clt__st_read_at(const st_source *src, void *dst, size_t n, uint64_t off,
                           const char *tensor);
/* The error for a JSON file that clt_load cannot take (is_index: one with a "weight_map"). */
clt_status clt__st_json_error(const char *path, bool is_index);
/* Closes a shard's file (not the caller's), frees what f holds. */
void clt__st_file_close(st_file *f);
/* Reads and validates f's header. A file that is not safetensors is named in the error; with
 * json non-NULL, a JSON file sets *json instead and returns CLT_OK unparsed. */
clt_status clt__st_read_header(st_file *f, bool *json);
/* The tensors of nf validated files into a new set (*out, released by the caller). */
clt_status clt__st_load_files(st_file *files, size_t nf, clt_device *map, clt_params **out);

/* ---- sharded checkpoints (safetensors_index.c) ------------------------------------------- */

/* Loads every shard that the index at src's path (src, already open) names, as one set. */
clt_status clt__st_load_index(const st_source *src, clt_device *map, clt_params **out);

#endif /* CLT_SAFETENSORS_INTERNAL_H */
