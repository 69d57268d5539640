/* SPDX-License-Identifier: MIT */
/* safetensors_write.c - clt_save: a parameter set to a safetensors file (the format is described
 * in safetensors.c), written atomically (io/atomic_file.c); clt_save_sharded: the set as the
 * shards and the model.safetensors.index.json of a sharded checkpoint, as transformers writes
 * them. */
#define _POSIX_C_SOURCE 200809L

#include "safetensors-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/* One safetensors file of a save: the tensors at positions first .. first + n - 1 of the set
 * (all of them for clt_save, a run of them for a shard), its header, and the order of their
 * bytes in the data section. */
typedef struct st_plan {
  size_t first, n;
  size_t *order; /* positions in the set */
  sbuf h;
} st_plan;

static void plan_free(st_plan *pl) {
  free(pl->order);
  free(pl->h.p);
}

/* The order of the tensors' bytes in the data section: larger elements first (stable), as
 * Python's safetensors writes them, so that after the 8-aligned start of the data section every
 * tensor starts at a multiple of its element size (8 for f64 and i64). The header keeps the
 * set's order. */
static size_t *data_order(const clt_params *p, size_t first, size_t n) {
  size_t *order = malloc((n ? n : 1) * sizeof *order), k = 0;
  if (!order)
    return NULL;
  for (size_t esize = 8; esize >= 1; esize /= 2)
    for (size_t i = first; i < first + n; i++)
      if (clt_dtype_size(clt_params_tensor_at(p, i)->dtype) == esize)
        order[k++] = i;
  return order;
}

/* The header of the file of tensors first .. first + n - 1 of p into pl (pl->order too); errors
 * name fn and path. On failure pl holds nothing. */
static clt_status plan_file(const clt_params *p, size_t first, size_t n, const char *fn,
                            const char *path, st_plan *pl) {
  *pl = (st_plan){.first = first, .n = n};
  pl->order = data_order(p, first, n);
  uint64_t *begin = malloc((n ? n : 1) * sizeof *begin);
  if (!pl->order || !begin) {
    free(begin);
    plan_free(pl);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the header of %s", path);
  }
  uint64_t off = 0;
  for (size_t k = 0; k < n; k++) {
    begin[pl->order[k] - first] = off;
    off += clt_params_tensor_at(p, pl->order[k])->nbytes;
  }

  /* The header, in the set's order. */
  sbuf *h = &pl->h;
  put(h, "{", 1);
  for (size_t i = first; i < first + n; i++) {
    clt_tensor *t = clt_params_tensor_at(p, i);
    put_json_string(h, "", clt_params_name_at(p, i));
    puts_(h, ":{\"dtype\":\"");
    puts_(h, clt__st_dtype_name(t->dtype));
    puts_(h, "\",\"shape\":[");
    for (int d = 0; d < t->ndim; d++) {
      if (d)
        put(h, ",", 1);
      put_u64(h, (uint64_t)t->shape[d]);
    }
    puts_(h, "],\"data_offsets\":[");
    put_u64(h, begin[i - first]);
    put(h, ",", 1);
    put_u64(h, begin[i - first] + t->nbytes);
    puts_(h, "]},");
  }
  /* __metadata__: the set's own entries, "format": "pt" unless the set names a format
   * (transformers refuses a file without one), then each tensor's device. */
  puts_(h, "\"__metadata__\":{");
  size_t nm = clt_params_metadata_count(p);
  for (size_t i = 0; i < nm; i++) {
    const char *key = clt_params_metadata_key_at(p, i);
    if (i)
      put(h, ",", 1);
    put_json_string(h, "", key);
    put(h, ":", 1);
    put_json_string(h, "", clt_params_metadata(p, key));
  }
  if (!clt_params_metadata(p, "format"))
    puts_(h, nm ? ",\"format\":\"pt\"" : "\"format\":\"pt\"");
  for (size_t i = first; i < first + n; i++) {
    put(h, ",", 1);
    put_json_string(h, CLT__DEVICE_KEY, clt_params_name_at(p, i));
    put(h, ":", 1);
    put_json_string(h, "", clt_tensor_device(clt_params_tensor_at(p, i))->name);
  }
  puts_(h, "}}");
  /* Spaces, as the format allows, so that the data section starts at a multiple of 8. */
  while (!h->oom && h->n % 8 != 0)
    put(h, " ", 1);
  free(begin);
  if (h->oom) {
    plan_free(pl);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the header of %s", path);
  }
  return CLT_OK;
}

/* Writes pl's file to f: the header's length, the header, then each tensor's bytes (device
 * tensors read back with a blocking clt_tensor_read). */
static clt_status write_file(clt__afile *f, const clt_params *p, const st_plan *pl,
                             const char *fn) {
  unsigned char len[8];
  for (int i = 0; i < 8; i++)
    len[i] = (unsigned char)((uint64_t)pl->h.n >> (8 * i));
  clt_status s;
  if ((s = clt__afile_write(f, len, 8, fn)) != CLT_OK ||
      (s = clt__afile_write(f, pl->h.p, pl->h.n, fn)) != CLT_OK)
    return s;
  size_t most = 0;
  for (size_t i = pl->first; i < pl->first + pl->n; i++)
    if (clt_params_tensor_at(p, i)->nbytes > most)
      most = clt_params_tensor_at(p, i)->nbytes;
  if (most == 0)
    return CLT_OK;
  void *data = malloc(most); /* one buffer, reused */
  if (!data)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the %zu bytes of a tensor",
                      most);
  for (size_t k = 0; k < pl->n && s == CLT_OK; k++) {
    clt_tensor *t = clt_params_tensor_at(p, pl->order[k]);
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
  st_plan pl;
  clt_status s = plan_file(p, 0, clt_params_count(p), fn, path, &pl);
  if (s != CLT_OK)
    return s;
  /* Written beside the target, then renamed over it: a failure or a crash leaves the old file
   * whole (io/atomic_file.c). */
  clt__afile f;
  if ((s = clt__afile_open(&f, path, fn)) == CLT_OK) {
    if ((s = write_file(&f, p, &pl, fn)) == CLT_OK)
      s = clt__afile_commit(&f, fn);
    else
      clt__afile_abort(&f);
  }
  plan_free(&pl);
  return s;
}

/* ---- sharded checkpoints ------------------------------------------------------------------ */

/* dir + "/" + name, malloc'ed (NULL when out of memory); no second slash after one of dir's. */
static char *join(const char *dir, const char *name) {
  size_t d = strlen(dir), n = strlen(name);
  bool slash = d > 0 && dir[d - 1] == '/';
  char *p = malloc(d + !slash + n + 1);
  if (!p)
    return NULL;
  memcpy(p, dir, d);
  if (!slash)
    p[d++] = '/';
  memcpy(p + d, name, n + 1);
  return p;
}

/* The index, as transformers writes it: {"metadata": {"total_size": <bytes of tensor data>},
 * "weight_map": {"<tensor>": "<shard>", ...}}, the tensors in the set's order. */
static void put_index(sbuf *b, const clt_params *p, const size_t *shard_of, char **names) {
  uint64_t total = 0;
  size_t n = clt_params_count(p);
  for (size_t i = 0; i < n; i++)
    total += clt_params_tensor_at(p, i)->nbytes;
  puts_(b, "{\n  \"metadata\": {\n    \"total_size\": ");
  put_u64(b, total);
  puts_(b, "\n  },\n  \"weight_map\": {");
  for (size_t i = 0; i < n; i++) {
    puts_(b, i ? ",\n    " : "\n    ");
    put_json_string(b, "", clt_params_name_at(p, i));
    puts_(b, ": ");
    put_json_string(b, "", names[shard_of[i]]);
  }
  puts_(b, "\n  }\n}\n");
}

/* The last error (status s) with what was replaced before the failing rename said after it. */
static clt_status partly_replaced(clt_status s, const char *fn, size_t renamed, size_t nfiles) {
  char why[1024];
  const char *e = clt_last_error();
  size_t skip = strlen(fn) + 2; /* "clt_save_sharded: " */
  snprintf(why, sizeof why, "%s", strncmp(e, fn, skip - 2) == 0 ? e + skip : e);
  return clt__error(s, fn,
                    "%s; %zu of the %zu files had been renamed into place already (the index is "
                    "renamed last, so it still names the previous save's shards): save again",
                    why, renamed, nfiles);
}

clt_status clt_save_sharded(const char *dir, const clt_params *p, size_t max_shard_bytes) {
  static const char fn[] = "clt_save_sharded";
  if (!dir || !*dir)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "dir is NULL or empty");
  if (!p)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "p is NULL");
  if (max_shard_bytes == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "max_shard_bytes is 0; give the most bytes of tensor data a shard may hold "
                      "(transformers' default max_shard_size is 5 GB: 5000000000)");
  size_t n = clt_params_count(p);
  if (n == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "p holds no tensors, and a sharded checkpoint's weight_map names at least "
                      "one; save an empty set with clt_save");
  struct stat st;
  if (stat(dir, &st) != 0)
    return clt__error(CLT_ERR_IO, fn, "cannot save into the directory %s: %s; create it first", dir,
                      strerror(errno));
  if (!S_ISDIR(st.st_mode))
    return clt__error(CLT_ERR_IO, fn,
                      "%s is not a directory; clt_save_sharded writes its shards and "
                      "model.safetensors.index.json into an existing directory",
                      dir);

  /* The shards: runs of the set in its order, each of at most max_shard_bytes of tensor data,
   * except that a tensor larger than that is a shard of its own. */
  size_t *shard_of = malloc(n * sizeof *shard_of), nshards = 0;
  if (!shard_of)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  size_t used = 0;
  bool alone = false;
  for (size_t i = 0; i < n; i++) {
    size_t b = clt_params_tensor_at(p, i)->nbytes;
    if (nshards == 0 || alone || b > max_shard_bytes - used) {
      nshards++;
      used = 0;
    }
    shard_of[i] = nshards - 1;
    used += b;
    alone = b > max_shard_bytes;
  }

  /* Every file is written and flushed under a temporary name before any is renamed into place,
   * the index last: a failure while writing (a full disk, a device read) leaves the previous
   * checkpoint in dir as it was. */
  size_t nfiles = nshards + 1;
  char **names = calloc(nfiles, sizeof *names), **paths = calloc(nfiles, sizeof *paths);
  clt__afile *files = calloc(nfiles, sizeof *files);
  clt_status s = CLT_OK;
  if (!names || !paths || !files) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    goto done;
  }
  for (size_t k = 0; k < nfiles; k++) {
    char name[64];
    if (k < nshards)
      snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, nshards);
    else
      snprintf(name, sizeof name, "model.safetensors.index.json");
    if (!(names[k] = clt__strdup(name)) || !(paths[k] = join(dir, name))) {
      s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
      goto done;
    }
  }
  for (size_t i = 0, k = 0; k < nshards && s == CLT_OK; k++) {
    size_t first = i;
    while (i < n && shard_of[i] == k)
      i++;
    st_plan pl;
    if ((s = plan_file(p, first, i - first, fn, paths[k], &pl)) != CLT_OK)
      break;
    if ((s = clt__afile_open(&files[k], paths[k], fn)) == CLT_OK) {
      if ((s = write_file(&files[k], p, &pl, fn)) == CLT_OK)
        s = clt__afile_close(&files[k], fn);
    }
    plan_free(&pl);
  }
  if (s == CLT_OK) {
    sbuf idx = {0};
    put_index(&idx, p, shard_of, names);
    if (idx.oom)
      s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "no host memory for the index %s", paths[nshards]);
    else if ((s = clt__afile_open(&files[nshards], paths[nshards], fn)) == CLT_OK) {
      if ((s = clt__afile_write(&files[nshards], idx.p, idx.n, fn)) == CLT_OK)
        s = clt__afile_close(&files[nshards], fn);
    }
    free(idx.p);
  }
  /* Then the renames, shards first, each file replaced whole, and one flush of the directory. */
  for (size_t k = 0; k < nfiles && s == CLT_OK; k++)
    if ((s = clt__afile_rename(&files[k], fn)) != CLT_OK && k > 0)
      s = partly_replaced(s, fn, k, nfiles);
  if (s == CLT_OK)
    s = clt__afile_sync_dir(paths[nshards], fn);
done:
  for (size_t k = 0; files && k < nfiles; k++)
    if (files[k].tmp) /* opened, not renamed: removed */
      clt__afile_abort(&files[k]);
  for (size_t k = 0; names && k < nfiles; k++)
    free(names[k]);
  for (size_t k = 0; paths && k < nfiles; k++)
    free(paths[k]);
  free(names);
  free(paths);
  free(files);
  free(shard_of);
  return s;
}
