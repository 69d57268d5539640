/* SPDX-License-Identifier: MIT */
/* optim.c - optimizers over parameter sets (torch.optim.SGD and AdamW): their checks, their state
 * (a parameter set of their own that follows the parameters through clt_params_to) and the step,
 * which hands each parameter to its backend's optim_step (one kernel or loop) or, where the
 * backend has none or the parameter is a view it cannot take, composes it from the public
 * operations. io/optim.c saves and loads the state. */
#include "backend.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sgd_keys[] = {"momentum_buffer", NULL};
static const char *const adamw_keys[] = {"exp_avg", "exp_avg_sq", NULL};

const char *const *clt__optim_keys(const clt_optim *o) {
  return o->kind == CLT__OPTIM_SGD ? sgd_keys : adamw_keys;
}

static const char *kind_name(clt__optim_kind k) { return k == CLT__OPTIM_SGD ? "sgd" : "adamw"; }

/* Refuses a hyperparameter that is not finite or below lo (or, with hi_open, at or above hi). */
static clt_status check_range(const char *fn, const char *arg, double v, double lo, bool lo_open,
                              double hi, bool has_hi) {
  if (!isfinite(v) || (lo_open ? v <= lo : v < lo) || (has_hi && v >= hi)) {
    if (has_hi)
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is %g; it must lie in [%g, %g)", arg, v,
                        lo, hi);
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is %g; it must be a finite number %s %g",
                      arg, v, lo_open ? ">" : ">=", lo);
  }
  return CLT_OK;
}

static clt_status set_number(clt_params *st, const char *key, double v, const char *fn) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", v);
  return clt__params_set_metadata(st, key, buf, fn);
}

clt_status clt__optim_describe(const clt_optim *o, clt_params *st, const char *fn) {
  clt_status s;
  if ((s = clt__params_set_metadata(st, "optimizer", kind_name(o->kind), fn)) != CLT_OK ||
      (s = set_number(st, "lr", o->lr, fn)) != CLT_OK ||
      (s = set_number(st, "weight_decay", o->weight_decay, fn)) != CLT_OK)
    return s;
  if (o->kind == CLT__OPTIM_SGD)
    return set_number(st, "momentum", o->momentum, fn);
  if ((s = set_number(st, "beta1", o->beta1, fn)) != CLT_OK ||
      (s = set_number(st, "beta2", o->beta2, fn)) != CLT_OK)
    return s;
  return set_number(st, "eps", o->eps, fn);
}

static clt_status create(clt_optim *tmpl, const char *fn, clt_optim **out) {
  clt_status s;
  clt_params *p = tmpl->params;
  size_t n = clt_params_count(p);
  if (n == 0)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                      "the parameter set is empty: an optimizer needs parameters to update");
  for (size_t i = 0; i < n; i++) {
    clt_tensor *t = clt_params_tensor_at(p, i);
    if (!clt__dtype_is_float(t->dtype))
      return clt__error(CLT_ERR_INVALID_ARGUMENT, fn,
                        "parameter '%s' is %s; optimizers update float parameters only (f16, "
                        "bf16, f32, f64)",
                        clt_params_name_at(p, i), clt_dtype_name(t->dtype));
  }
  clt_optim *o = malloc(sizeof *o);
  if (!o)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  *o = *tmpl;
  if ((s = clt_params_create(&o->state)) != CLT_OK) {
    free(o);
    return s;
  }
  if ((s = clt__optim_describe(o, o->state, fn)) != CLT_OK ||
      (s = clt__params_follow(p, o->state, fn)) != CLT_OK) {
    clt_params_release(o->state);
    free(o);
    return s;
  }
  o->params = clt__params_retain(p);
  *out = o;
  return CLT_OK;
}

clt_status clt_optim_sgd(clt_params *params, double lr, double momentum, double weight_decay,
                         clt_optim **out) {
  static const char fn[] = "clt_optim_sgd";
  clt_status s;
  if (!params || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", params ? "out" : "params");
  if ((s = check_range(fn, "lr", lr, 0, false, 0, false)) != CLT_OK ||
      (s = check_range(fn, "momentum", momentum, 0, false, 0, false)) != CLT_OK ||
      (s = check_range(fn, "weight_decay", weight_decay, 0, false, 0, false)) != CLT_OK)
    return s;
  clt_optim t = {.kind = CLT__OPTIM_SGD,
                 .lr = lr,
                 .momentum = momentum,
                 .weight_decay = weight_decay,
                 .params = params};
  return create(&t, fn, out);
}

clt_status clt_optim_adamw(clt_params *params, double lr, double beta1, double beta2, double eps,
                           double weight_decay, clt_optim **out) {
  static const char fn[] = "clt_optim_adamw";
  clt_status s;
  if (!params || !out)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "%s is NULL", params ? "out" : "params");
  if ((s = check_range(fn, "lr", lr, 0, false, 0, false)) != CLT_OK ||
      (s = check_range(fn, "beta1", beta1, 0, false, 1, true)) != CLT_OK ||
      (s = check_range(fn, "beta2", beta2, 0, false, 1, true)) != CLT_OK ||
      (s = check_range(fn, "eps", eps, 0, true, 0, false)) != CLT_OK ||
      (s = check_range(fn, "weight_decay", weight_decay, 0, false, 0, false)) != CLT_OK)
    return s;
  clt_optim t = {.kind = CLT__OPTIM_ADAMW,
                 .lr = lr,
                 .beta1 = beta1,
                 .beta2 = beta2,
                 .eps = eps,
                 .weight_decay = weight_decay,
                 .params = params};
  return create(&t, fn, out);
}

void clt_optim_release(clt_optim *opt) {
  if (!opt)
    return;
  clt__params_unfollow(opt->params, opt->state);
  clt_params_release(opt->state);
  clt_params_release(opt->params);
  free(opt);
}

clt_status clt_optim_zero_grad(clt_optim *opt) {
  static const char fn[] = "clt_optim_zero_grad";
  if (!opt)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "opt is NULL");
  for (size_t i = 0, n = clt_params_count(opt->params); i < n; i++) {
    clt_status s = clt_zero_grad(clt_params_tensor_at(opt->params, i));
    if (s != CLT_OK)
      return s;
  }
  return CLT_OK;
}

/* ---- the step ------------------------------------------------------------------------------ */

/* "<name>.<key>" into buf; false if it does not fit. */
static bool state_name(char *buf, size_t size, const char *name, const char *key) {
  return (size_t)snprintf(buf, size, "%s.%s", name, key) < size;
}

/* Checks that t (the gradient or a state tensor of parameter `name`, `what`) matches p. */
static clt_status check_match(const clt_tensor *p, const clt_tensor *t, const char *name,
                              const char *what, const char *fn) {
  if (t->storage->dev != p->storage->dev)
    return clt__error(CLT_ERR_DEVICE_MISMATCH, fn,
                      "parameter '%s' is on %s but its %s is on %s; nothing is copied behind "
                      "your back: move both with clt_params_to (which moves the optimizer's "
                      "state too)",
                      name, p->storage->dev->name, what, t->storage->dev->name);
  if (t->dtype != p->dtype)
    return clt__error(CLT_ERR_DTYPE, fn, "parameter '%s' is %s but its %s is %s", name,
                      clt_dtype_name(p->dtype), what, clt_dtype_name(t->dtype));
  if (t->ndim != p->ndim || memcmp(t->shape, p->shape, (size_t)p->ndim * sizeof *p->shape)) {
    char a[128], b[128];
    clt__format_shape(a, sizeof a, p->ndim, p->shape);
    clt__format_shape(b, sizeof b, t->ndim, t->shape);
    return clt__error(CLT_ERR_SHAPE_MISMATCH, fn, "parameter '%s' has shape %s but its %s has %s",
                      name, a, what, b);
  }
  return CLT_OK;
}

/* The step composed from the public operations (grad mode is off): the reference backend's, and
 * any parameter that is a view the backend's member cannot take. Same formulas, one operation at
 * a time. */
#define TRY(call)                                                                                  \
  do {                                                                                             \
    if ((s = (call)) != CLT_OK)                                                                    \
      goto done;                                                                                   \
  } while (0)

static clt_status compose(const clt_optim_desc *o, clt_tensor *p, clt_tensor *g, clt_tensor *s1,
                          clt_tensor *s2) {
  clt_status s = CLT_OK;
  clt_tensor *t[8] = {NULL};
  if (o->kind == CLT__OPTIM_SGD) {
    clt_tensor *d = g;
    if (o->weight_decay != 0) {
      TRY(clt_mul_scalar(p, o->weight_decay, &t[0]));
      TRY(clt_add(g, t[0], &t[1]));
      d = t[1];
    }
    if (s1) {
      if (o->first) {
        TRY(clt_copy(s1, d));
      } else {
        TRY(clt_mul_scalar(s1, o->momentum, &t[2]));
        TRY(clt_add_out(t[2], d, s1));
      }
      d = s1;
    }
    TRY(clt_mul_scalar(d, o->lr, &t[3]));
    TRY(clt_sub_(p, t[3]));
  } else {
    if (o->decay != 1) {
      TRY(clt_mul_scalar(p, o->decay, &t[0]));
      TRY(clt_copy(p, t[0]));
    }
    clt_tensor_release(t[0]);
    t[0] = NULL;
    TRY(clt_mul_scalar(s1, o->beta1, &t[0]));
    TRY(clt_mul_scalar(g, 1 - o->beta1, &t[1]));
    TRY(clt_add_out(t[0], t[1], s1));
    clt_tensor_release(t[0]);
    clt_tensor_release(t[1]);
    t[0] = t[1] = NULL;
    TRY(clt_mul_scalar(s2, o->beta2, &t[0]));
    TRY(clt_mul(g, g, &t[1]));
    TRY(clt_mul_scalar(t[1], 1 - o->beta2, &t[2]));
    TRY(clt_add_out(t[0], t[2], s2));
    TRY(clt_sqrt(s2, &t[3]));
    TRY(clt_div_scalar(t[3], o->bc2_sqrt, &t[4]));
    TRY(clt_add_scalar(t[4], o->eps, &t[5]));
    TRY(clt_div(s1, t[5], &t[6]));
    TRY(clt_mul_scalar(t[6], o->step_size, &t[7]));
    TRY(clt_sub_(p, t[7]));
  }
done:
  for (int k = 0; k < 8; k++)
    clt_tensor_release(t[k]);
  return s;
}

/* The state tensor "<name>.<key>" of parameter p: found in the state set (and checked), or, at
 * the parameter's first step, a new zeroed one added to it (*fresh set). */
static clt_status state_of(clt_optim *opt, const char *name, const char *key, clt_tensor *p,
                           const char *fn, clt_tensor **out, bool *fresh) {
  char full[1024];
  if (!state_name(full, sizeof full, name, key))
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "parameter name '%.200s...' is too long", name);
  clt_tensor *t = clt__params_find(opt->state, full);
  if (t) {
    *out = t;
    *fresh = false;
    return check_match(p, t, name, key, fn);
  }
  clt_status s = clt_zeros(p->dtype, p->ndim, p->shape, p->storage->dev, &t);
  if (s != CLT_OK)
    return s;
  s = clt__params_add_unique(opt->state, full, t, fn);
  clt_tensor_release(t); /* the set holds it */
  if (s != CLT_OK)
    return s;
  *out = t;
  *fresh = true;
  return CLT_OK;
}

/* The AdamW step count of name, from the state's metadata (0 if none). */
static int64_t steps_of(const clt_optim *opt, const char *name) {
  char key[1024];
  if (!state_name(key, sizeof key, name, "step"))
    return 0;
  const char *v = clt_params_metadata(opt->state, key);
  return v ? strtoll(v, NULL, 10) : 0;
}

static clt_status step_one(clt_optim *opt, size_t i, const char *fn) {
  clt_status s;
  const char *name = clt_params_name_at(opt->params, i);
  clt_tensor *p = clt_params_tensor_at(opt->params, i);
  clt_tensor *g = clt_tensor_grad(p);
  if (!g || p->numel == 0)
    return CLT_OK;
  if ((s = check_match(p, g, name, "gradient", fn)) != CLT_OK)
    return s;
  clt_optim_desc d = {.kind = opt->kind, .lr = opt->lr, .weight_decay = opt->weight_decay};
  clt_tensor *s1 = NULL, *s2 = NULL;
  bool fresh = false, fresh2 = false;
  int64_t t = 0;
  if (opt->kind == CLT__OPTIM_SGD) {
    d.momentum = opt->momentum;
    if (opt->momentum != 0) {
      if ((s = state_of(opt, name, "momentum_buffer", p, fn, &s1, &fresh)) != CLT_OK)
        return s;
      d.first = fresh;
    }
  } else {
    if ((s = state_of(opt, name, "exp_avg", p, fn, &s1, &fresh)) != CLT_OK ||
        (s = state_of(opt, name, "exp_avg_sq", p, fn, &s2, &fresh2)) != CLT_OK)
      return s;
    t = steps_of(opt, name) + 1;
    d.beta1 = opt->beta1;
    d.beta2 = opt->beta2;
    d.eps = opt->eps;
    d.decay = 1 - opt->lr * opt->weight_decay;
    d.step_size = opt->lr / (1 - pow(opt->beta1, (double)t));
    d.bc2_sqrt = sqrt(1 - pow(opt->beta2, (double)t));
  }
  /* Everything read is computed, everything written waits for its readers; then the version of
   * each written storage goes up (grad mode is off, so the write check only counts). */
  clt_tensor *dg = NULL;
  if ((s = g->storage == p->storage ? clt_clone(g, &dg) : clt__dense(g, fn, &dg)) != CLT_OK)
    return s; /* the backends read the gradient while they write the parameter: never one memory */
  clt_tensor *w[3] = {p, s1, s2};
  for (int k = 0; k < 3; k++)
    if (w[k] && (s = clt__write_check(w[k], NULL, 0, fn)) != CLT_OK)
      goto out;
  const struct clt_backend *b = p->storage->dev->backend;
  if (b->compute.optim_step && clt__is_dense(p)) {
    if ((s = clt__lazy_ready(&dg, 1, p, fn)) != CLT_OK ||
        (s1 && (s = clt__lazy_ready(NULL, 0, s1, fn)) != CLT_OK) ||
        (s2 && (s = clt__lazy_ready(NULL, 0, s2, fn)) != CLT_OK))
      goto out;
    s = b->compute.optim_step(&d, p, dg, s1, s2, fn);
  } else {
    s = compose(&d, p, dg, s1, s2);
  }
  if (s == CLT_OK && opt->kind == CLT__OPTIM_ADAMW) {
    char key[1024], v[32];
    state_name(key, sizeof key, name, "step");
    snprintf(v, sizeof v, "%" PRId64, t);
    s = clt__params_set_metadata(opt->state, key, v, fn);
  }
out:
  clt_tensor_release(dg);
  (void)fresh2;
  return s;
}

clt_status clt_optim_step(clt_optim *opt) {
  static const char fn[] = "clt_optim_step";
  if (!opt)
    return clt__error(CLT_ERR_INVALID_ARGUMENT, fn, "opt is NULL");
  bool was = clt__grad_mode_set(false);
  clt_status s = CLT_OK;
  for (size_t i = 0, n = clt_params_count(opt->params); i < n && s == CLT_OK; i++)
    s = step_one(opt, i, fn);
  clt__grad_mode_set(was);
  return s;
}
