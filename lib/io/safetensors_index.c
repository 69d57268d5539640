/* SPDX-License-Identifier: MIT */
/* safetensors_index.c - sharded checkpoints: clt_load given a model.safetensors.index.json loads
 * every shard that its weight_map names, as one set, after checking the map against the shards'
 * headers. */
#define _POSIX_C_SOURCE 200809L

#include "safetensors-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* {"metadata": ..., "weight_map": {"tensor": "shard file", ...}, ...}: the weight map into p->m
 * (key the tensor, value the shard), p->have_meta set when there is one. */
static clt_status parse_index(parser *p) {
  clt_status s;
  if (p->n >= 3 && memcmp(p->s, "\xef\xbb\xbf", 3) == 0)
    p->pos = 3;
  if (!eat(p, '{'))
    return clt__st_fmt_error(p, NULL, "the index is not a JSON object");
  if (!eat(p, '}')) {
    do {
      char *key;
      if ((s = clt__st_parse_string(p, "expected a key", &key)) != CLT_OK)
        return s;
      bool map = strcmp(key, "weight_map") == 0;
      free(key);
      if (!eat(p, ':'))
        return clt__st_syntax(p, "expected ':'");
      if (!map) {
        if ((s = clt__st_skip_value(p, 0)) != CLT_OK)
          return s;
        continue;
      }
      if (p->have_meta)
        return clt__st_fmt_error(p, NULL, "the index has \"weight_map\" twice");
      /* the same shape as __metadata__: an object of strings */
      if ((s = clt__st_parse_string_map(p, "\"weight_map\"", true)) != CLT_OK)
        return s;
    } while (eat(p, ','));
    if (!eat(p, '}'))
      return clt__st_syntax(p, "expected ',' or '}'");
  }
  ws(p);
  if (p->pos != p->n)
    return clt__st_syntax(p, "unexpected text after the index's object");
  return CLT_OK;
}

typedef struct name_at {
  const char *name;
  size_t file;
  tinfo *t;
} name_at;

static int cmp_name_at(const void *a, const void *b) {
  return strcmp(((const name_at *)a)->name, ((const name_at *)b)->name);
}

/* Loads every shard that the index at path (src, already open) names, as one set. */
clt_status clt__st_load_index(const st_source *src, clt_device *map, clt_params **out) {
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
  if ((s = clt__st_read_at(src, text, (size_t)src->size, 0, NULL)) != CLT_OK)
    goto done;
  ip.s = text;
  ip.n = (size_t)src->size;
  if ((s = parse_index(&ip)) != CLT_OK)
    goto done;
  if (!ip.have_meta) {
    s = clt__st_json_error(path, false);
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
    if ((s = clt__st_read_header(f, NULL)) != CLT_OK)
      goto done;
    total += f->p.nt;
  }
  /* The weight map against the shards: no tensor twice, each where the index says. A name in
   * two shards is refused even when the map names only one of them: shards of two saves are
   * mixed, and which copy is right is a guess. */
  if (!(names = malloc((total ? total : 1) * sizeof *names))) {
    s = clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "%s: out of host memory", path);
    goto done;
  }
  size_t n = 0;
  for (size_t k = 0; k < nshards; k++)
    for (size_t i = 0; i < files[k].p.nt; i++)
      names[n++] = (name_at){files[k].p.t[i].name, k, &files[k].p.t[i]};
  qsort(names, n, sizeof *names, cmp_name_at);
  for (size_t i = 1; i < n; i++)
    if (strcmp(names[i - 1].name, names[i].name) == 0) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: tensor '%.200s' is in two shards, %s and %s; a "
                     "sharded checkpoint holds each tensor once: re-save it",
                     path, names[i].name, files[names[i - 1].file].path, files[names[i].file].path);
      goto done;
    }
  /* Only what the map names is loaded: a tensor of a shard that it does not name is skipped
   * (its header was validated with the rest of the shard). */
  for (size_t i = 0; i < n; i++)
    names[i].t->skip = true;
  if (ip.nm > 1)
    qsort(ip.m, ip.nm, sizeof *ip.m, clt__st_cmp_meta);
  for (size_t i = 0; i < ip.nm; i++) {
    if (i > 0 && strcmp(ip.m[i - 1].key, ip.m[i].key) == 0) {
      s = clt__error(CLT_ERR_FORMAT, fn,
                     "%s: the weight_map lists tensor '%.200s' twice (in "
                     "\"%.200s\" and \"%.200s\"); each tensor belongs to one shard",
                     path, ip.m[i].key, ip.m[i - 1].value, ip.m[i].value);
      goto done;
    }
    name_at key = {ip.m[i].key, 0, NULL},
            *hit = bsearch(&key, names, n, sizeof *names, cmp_name_at);
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
    hit->t->skip = false;
  }
  s = clt__st_load_files(files, nshards, map, out);
done:
  if (files)
    for (size_t k = 0; k < nshards; k++)
      clt__st_file_close(&files[k]);
  free(files);
  free(names);
  free(shard);
  free(text);
  clt__st_parser_free(&ip);
  return s;
}
