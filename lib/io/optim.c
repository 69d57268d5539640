/* SPDX-License-Identifier: MIT */
/* io/optim.c - an optimizer's state in a safetensors file (clt_optim_save, clt_optim_load): the
 * state set of lib/optim.c as clt_save writes it, and back, checked against the optimizer's
 * parameters before it replaces anything. */
#include "clt-internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The error s of a call made for fn (clt_save, clt_load), reported as fn's. */
static clt_status as_own(clt_status s, const char *fn) {
  char why[1024];
  snprintf(why, sizeof why, "%s", clt_last_error());
  return clt__error(s, fn, "%s", why);
}

clt_status clt_optim_save(const char *path, const clt_optim *opt) {
  static const char fn[] = "clt_optim_save";
  if (!path || !opt)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", path ? "opt" : "path");
  clt_status s = clt_save(path, opt->state);
  return s == CLT_OK ? s : as_own(s, fn);
}

/* The parameter of opt that state tensor `name` belongs to ("<param>.<key>" with key one of
 * opt's), or NULL; *key gets the key. */
static clt_tensor *owner(const clt_optim *opt, const char *name, const char **key) {
  for (const char *const *k = clt__optim_keys(opt); *k; k++) {
    size_t n = strlen(name), kl = strlen(*k);
    if (n > kl + 1 && name[n - kl - 1] == '.' && strcmp(name + n - kl, *k) == 0) {
      char base[1024];
      if (n - kl - 1 >= sizeof base)
        return NULL;
      memcpy(base, name, n - kl - 1);
      base[n - kl - 1] = '\0';
      *key = *k;
      return clt__params_find(opt->params, base);
    }
  }
  return NULL;
}

/* Checks the loaded set st against opt; path names the file in messages. */
static clt_status check_state(const clt_optim *opt, const clt_params *st, const char *path,
                              const char *fn) {
  const char *kind = clt_params_metadata(st, "optimizer");
  const char *want = opt->kind == CLT__OPTIM_SGD ? "sgd" : "adamw";
  if (!kind || strcmp(kind, want) != 0)
    return clt__error(CLT_ERR_FORMAT, fn,
                      "%s holds %s%s%s, not the state of an %s optimizer (clt_optim_save writes "
                      "\"optimizer\": \"%s\" into its metadata)",
                      path, kind ? "the state of an optimizer \"" : "no optimizer state",
                      kind ? kind : "", kind ? "\"" : "", want, want);
  for (size_t i = 0, n = clt_params_count(st); i < n; i++) {
    const char *name = clt_params_name_at(st, i), *key = NULL;
    clt_tensor *t = clt_params_tensor_at(st, i);
    clt_tensor *p = owner(opt, name, &key);
    if (!p)
      return clt__error(CLT_ERR_FORMAT, fn,
                        "%s holds '%s', which is the state of no parameter of the optimizer's "
                        "set",
                        path, name);
    if (t->dtype != p->dtype || t->ndim != p->ndim ||
        memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof *p->shape) != 0) {
      char a[128], b[128];
      clt__format_shape(a, sizeof a, p->ndim, p->shape);
      clt__format_shape(b, sizeof b, t->ndim, t->shape);
      return clt__error(CLT_ERR_FORMAT, fn,
                        "%s holds '%s' of dtype %s and shape %s, but its parameter is %s of shape "
                        "%s",
                        path, name, clt_dtype_name(t->dtype), b, clt_dtype_name(p->dtype), a);
    }
    if (t->storage->dev != p->storage->dev)
      return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                        "'%s' from %s is on %s but its parameter is on %s; nothing is copied "
                        "behind your back: pass map_location = the parameters' device",
                        name, path, t->storage->dev->name, p->storage->dev->name);
  }
  /* Each parameter with state has all of it (AdamW: both moments and the step). */
  for (size_t i = 0, n = clt_params_count(opt->params); i < n; i++) {
    const char *pname = clt_params_name_at(opt->params, i);
    char full[1024];
    int have = 0, keys = 0;
    for (const char *const *k = clt__optim_keys(opt); *k; k++, keys++) {
      snprintf(full, sizeof full, "%s.%s", pname, *k);
      have += clt__params_find(st, full) != NULL;
    }
    if (opt->kind == CLT__OPTIM_SGD || have == 0)
      continue;
    snprintf(full, sizeof full, "%s.step", pname);
    const char *v = clt_params_metadata(st, full);
    char *end = NULL;
    long long steps = v ? strtoll(v, &end, 10) : 0;
    if (have != keys || !v || !*v || *end || steps < 1)
      return clt__error(
          CLT_ERR_FORMAT, fn,
          "%s holds incomplete AdamW state for parameter '%s': it needs '%s.exp_avg', "
          "'%s.exp_avg_sq' and a metadata entry '%s.step' of at least 1",
          path, pname, pname, pname, pname);
  }
  return CLT_OK;
}

clt_status clt_optim_load(const char *path, clt_optim *opt, clt_device *map_location) {
  static const char fn[] = "clt_optim_load";
  clt_status s;
  if (!path || !opt)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", path ? "opt" : "path");
  clt_params *st;
  if ((s = clt_load(path, map_location, &st)) != CLT_OK)
    return as_own(s, fn);
  if ((s = check_state(opt, st, path, fn)) != CLT_OK ||
      (s = clt__optim_describe(opt, st, fn)) != CLT_OK) {
    clt_params_release(st);
    return s;
  }
  clt__params_unfollow(opt->params, opt->state);
  s = clt__params_follow(opt->params, st, fn); /* cannot fail: a place was just freed */
  clt_params_release(opt->state);
  opt->state = st;
  return s;
}
