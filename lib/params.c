/* SPDX-License-Identifier: MIT */
/* params.c - parameter sets: named tensors in insertion order that move in place
 * (docs/architecture.md rule 6), and the string metadata a checkpoint carries with them
 * (safetensors' __metadata__: "format": "pt" and whatever the file's writer put there). */
#include "clt-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
  char *name;
  clt_tensor *t;
} entry;

typedef struct meta_entry {
  char *key, *value;
} meta_entry;

struct clt_params {
  entry *e;
  size_t n, cap;
  meta_entry *m; /* metadata, in the order set */
  size_t nm, mcap;
  /* clt_params_release drops the caller's reference; an optimizer holds one more (its set must
   * outlive it whatever order the caller releases them in). */
  int refs;
  /* Sets that clt_params_to moves together with this one (an optimizer's state, lib/optim.c),
   * borrowed: their owner detaches them before releasing them. */
  clt_params *follow[4];
  int nfollow;
};

clt_status clt_params_create(clt_params **out) {
  static const char fn[] = "clt_params_create";
  if (!out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "out is NULL");
  clt_params *p = calloc(1, sizeof *p);
  if (!p)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  p->refs = 1;
  *out = p;
  return CLT_OK;
}

clt_params *clt__params_retain(clt_params *p) {
  p->refs++;
  return p;
}

void clt_params_release(clt_params *p) {
  if (!p || --p->refs > 0)
    return;
  for (size_t i = 0; i < p->n; i++) {
    free(p->e[i].name);
    clt_tensor_release(p->e[i].t);
  }
  free(p->e);
  for (size_t i = 0; i < p->nm; i++) {
    free(p->m[i].key);
    free(p->m[i].value);
  }
  free(p->m);
  free(p);
}

bool clt__utf8_valid(const unsigned char *s, size_t n) {
  size_t i = 0;
  while (i < n) {
    unsigned c = s[i];
    size_t len;
    uint32_t cp, min;
    if (c < 0x80) {
      i++;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f, min = 0x80;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f, min = 0x800;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return false;
    }
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; k++) {
      if ((s[i + k] & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (s[i + k] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

static entry *find(const clt_params *p, const char *name) {
  for (size_t i = 0; i < p->n; i++)
    if (strcmp(p->e[i].name, name) == 0)
      return &p->e[i];
  return NULL;
}

/* Adds (name, t) at the end of p, retaining t; name is not checked. */
static clt_status append(clt_params *p, const char *name, size_t len, clt_tensor *t,
                         const char *fn) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 8;
    entry *e = realloc(p->e, cap * sizeof *e);
    if (!e)
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    p->e = e;
    p->cap = cap;
  }
  char *copy = malloc(len + 1);
  if (!copy)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  memcpy(copy, name, len + 1);
  p->e[p->n].name = copy;
  p->e[p->n].t = clt_tensor_retain(t);
  p->n++;
  return CLT_OK;
}

clt_status clt_params_add(clt_params *p, const char *name, clt_tensor *t) {
  static const char fn[] = "clt_params_add";
  clt_status s;
  if (!p)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "p is NULL");
  if (!name || !*name)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "name is NULL or empty");
  if ((s = clt__check_tensor(t, fn, "t")) != CLT_OK)
    return s;
  size_t len = strlen(name);
  if (!clt__utf8_valid((const unsigned char *)name, len))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "name is not valid UTF-8 (checkpoints store names as JSON strings)");
  if (strcmp(name, "__metadata__") == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the name '__metadata__' is reserved by the safetensors format");
  if (find(p, name))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the set already holds a tensor named '%s'; names are unique", name);
  return append(p, name, len, t, fn);
}

clt_status clt__params_add_unique(clt_params *p, const char *name, clt_tensor *t, const char *fn) {
  return append(p, name, strlen(name), t, fn);
}

clt_tensor *clt_params_get(const clt_params *p, const char *name) {
  static const char fn[] = "clt_params_get";
  if (!p || !name) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", p ? "name" : "p");
    return NULL;
  }
  entry *e = find(p, name);
  if (!e) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "no tensor named '%s' in the set (%zu tensors)", name,
               p->n);
    return NULL;
  }
  return e->t;
}

size_t clt_params_count(const clt_params *p) { return p ? p->n : 0; }

const char *clt_params_name_at(const clt_params *p, size_t i) {
  if (!p || i >= p->n) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_params_name_at", "index %zu is out of range (%zu)", i,
               p ? p->n : 0);
    return NULL;
  }
  return p->e[i].name;
}

clt_tensor *clt_params_tensor_at(const clt_params *p, size_t i) {
  if (!p || i >= p->n) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_params_tensor_at", "index %zu is out of range (%zu)",
               i, p ? p->n : 0);
    return NULL;
  }
  return p->e[i].t;
}

/* A parameter that is a leaf requiring grad stays one where it moves (as module.to(dev) keeps
 * its parameters leaves), its gradient moving with it. */
static clt_status keep_leaf(clt_tensor *old, clt_tensor *moved, clt_device *dev) {
  if (moved == old || !old->ag || !old->ag->requires_grad || old->ag->fn)
    return CLT_OK;
  clt_grad_meta *m = clt__grad_meta(moved);
  if (!m)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, "clt_params_to", "out of host memory");
  m->requires_grad = true;
  return old->ag->grad ? clt_to(old->ag->grad, dev, &m->grad) : CLT_OK;
}

/* The copies of p's tensors on dev, in *out (NULL for an empty set); nothing is kept on failure. */
static clt_status copies_on(clt_params *p, clt_device *dev, clt_tensor ***out) {
  static const char fn[] = "clt_params_to";
  clt_status s;
  *out = NULL;
  if (p->n == 0)
    return CLT_OK;
  clt_tensor **moved = calloc(p->n, sizeof *moved);
  if (!moved)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  for (size_t i = 0; i < p->n; i++) {
    if ((s = clt_to(p->e[i].t, dev, &moved[i])) != CLT_OK ||
        (s = keep_leaf(p->e[i].t, moved[i], dev)) != CLT_OK) {
      char why[1024];
      snprintf(why, sizeof why, "%s", clt_last_error());
      for (size_t k = 0; k <= i; k++) /* moved[i] is NULL unless clt_to gave it */
        clt_tensor_release(moved[k]);
      free(moved);
      return clt__error(s, fn, "moving '%s' to %s failed (the set is unchanged): %s", p->e[i].name,
                        dev->name, why);
    }
  }
  *out = moved;
  return CLT_OK;
}

static void drop_copies(clt_params *p, clt_tensor **moved) {
  for (size_t i = 0; moved && i < p->n; i++)
    clt_tensor_release(moved[i]);
  free(moved);
}

static void swap_in(clt_params *p, clt_tensor **moved) {
  for (size_t i = 0; moved && i < p->n; i++) {
    clt_tensor_release(p->e[i].t);
    p->e[i].t = moved[i];
  }
  free(moved);
}

clt_status clt_params_to(clt_params *p, clt_device *dev) {
  static const char fn[] = "clt_params_to";
  clt_status s;
  if (!p)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "p is NULL");
  if ((s = clt__check_device(dev, fn, "dev")) != CLT_OK)
    return s;
  /* All copies first (the set's, then those of the sets that follow it), then the swap: on
   * failure every set is unchanged. */
  clt_tensor **moved[1 + sizeof p->follow / sizeof p->follow[0]] = {NULL};
  clt_params *sets[1 + sizeof p->follow / sizeof p->follow[0]] = {p};
  int n = 1;
  for (int k = 0; k < p->nfollow; k++)
    sets[n++] = p->follow[k];
  for (int k = 0; k < n; k++)
    if ((s = copies_on(sets[k], dev, &moved[k])) != CLT_OK) {
      for (int j = 0; j < k; j++)
        drop_copies(sets[j], moved[j]);
      return s;
    }
  for (int k = 0; k < n; k++)
    swap_in(sets[k], moved[k]);
  return CLT_OK;
}

clt_status clt__params_follow(clt_params *p, clt_params *f, const char *fn) {
  if (p->nfollow == (int)(sizeof p->follow / sizeof p->follow[0]))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the parameter set already has %d optimizers; release one first",
                      p->nfollow);
  p->follow[p->nfollow++] = f;
  return CLT_OK;
}

void clt__params_unfollow(clt_params *p, clt_params *f) {
  for (int k = 0; k < p->nfollow; k++)
    if (p->follow[k] == f) {
      p->follow[k] = p->follow[--p->nfollow];
      return;
    }
}

clt_tensor *clt__params_find(const clt_params *p, const char *name) {
  entry *e = find(p, name);
  return e ? e->t : NULL;
}

clt_status clt_params_device(const clt_params *p, clt_device **out) {
  static const char fn[] = "clt_params_device";
  if (!p || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", p ? "out" : "p");
  if (p->n == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "the set is empty, so it has no device");
  clt_device *d = p->e[0].t->storage->dev;
  size_t other = 0;
  for (size_t i = 1; i < p->n && !other; i++)
    if (p->e[i].t->storage->dev != d)
      other = i;
  if (!other) {
    *out = d;
    return CLT_OK;
  }
  /* Name every device, with the first tensor found on it. */
  char list[1024];
  size_t used = 0;
  for (size_t i = 0; i < p->n && used < sizeof list; i++) {
    clt_device *di = p->e[i].t->storage->dev;
    bool seen = false;
    for (size_t k = 0; k < i && !seen; k++)
      seen = p->e[k].t->storage->dev == di;
    if (!seen)
      used += (size_t)snprintf(list + used, sizeof list - used, "%s%s ('%s')", used ? ", " : "",
                               di->name, p->e[i].name);
  }
  return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                    "the set's tensors are spread over several devices: %s; gather them with "
                    "clt_params_to(p, dev)",
                    list);
}

/* ---- metadata ------------------------------------------------------------------------------ */

static meta_entry *find_meta(const clt_params *p, const char *key) {
  for (size_t i = 0; i < p->nm; i++)
    if (strcmp(p->m[i].key, key) == 0)
      return &p->m[i];
  return NULL;
}


/* Sets (value non-NULL) or removes key; key and value are not checked. */
static clt_status set_meta(clt_params *p, const char *key, const char *value, const char *fn) {
  meta_entry *e = find_meta(p, key);
  if (!value) {
    if (e) {
      free(e->key);
      free(e->value);
      memmove(e, e + 1, (size_t)(p->m + p->nm - (e + 1)) * sizeof *e);
      p->nm--;
    }
    return CLT_OK;
  }
  char *v = clt__strdup(value);
  if (!v)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  if (e) {
    free(e->value);
    e->value = v;
    return CLT_OK;
  }
  if (p->nm == p->mcap) {
    size_t cap = p->mcap ? 2 * p->mcap : 4;
    meta_entry *m = realloc(p->m, cap * sizeof *m);
    if (!m) {
      free(v);
      return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
    }
    p->m = m;
    p->mcap = cap;
  }
  char *k = clt__strdup(key);
  if (!k) {
    free(v);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  p->m[p->nm++] = (meta_entry){k, v};
  return CLT_OK;
}

clt_status clt_params_set_metadata(clt_params *p, const char *key, const char *value) {
  static const char fn[] = "clt_params_set_metadata";
  if (!p || !key)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", p ? "key" : "p");
  if (!*key)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "key is empty");
  if (!clt__utf8_valid((const unsigned char *)key, strlen(key)))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "key is not valid UTF-8 (checkpoints store metadata as JSON strings)");
  if (value && !clt__utf8_valid((const unsigned char *)value, strlen(value)))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the value of '%.200s' is not valid UTF-8 (checkpoints store metadata as "
                      "JSON strings)",
                      key);
  if (strncmp(key, CLT__DEVICE_KEY, strlen(CLT__DEVICE_KEY)) == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "keys starting with \"" CLT__DEVICE_KEY "\" are clt's own (clt_save records "
                      "each tensor's device there); move the tensor with clt_to instead");
  return set_meta(p, key, value, fn);
}

clt_status clt__params_set_metadata(clt_params *p, const char *key, const char *value,
                                    const char *fn) {
  return set_meta(p, key, value, fn);
}

const char *clt_params_metadata(const clt_params *p, const char *key) {
  if (!p || !key)
    return NULL;
  meta_entry *e = find_meta(p, key);
  return e ? e->value : NULL;
}

size_t clt_params_metadata_count(const clt_params *p) { return p ? p->nm : 0; }

const char *clt_params_metadata_key_at(const clt_params *p, size_t i) {
  if (!p || i >= p->nm) {
    clt__error(CLT_ERR_INVALID_ARGUMENT, "clt_params_metadata_key_at",
               "index %zu is out of range (%zu)", i, p ? p->nm : 0);
    return NULL;
  }
  return p->m[i].key;
}
