/* SPDX-License-Identifier: MIT */
/* lazy.c - lazy fusion: deferred elementwise ops, recorded as a graph of nodes and evaluated as
 * one generated kernel (the backend's `fused`) when something needs their values
 * (docs/performance.md, "Fusion").
 *
 * A deferred op gets its result tensor at once, with its storage allocated (so running out of
 * memory is reported at the call, as eagerly); the storage's `pending` points at the op's node.
 * A node's operands are earlier nodes (a deferred result used whole, at the same shape) or
 * leaves: tensors whose values exist, retained, each counted in its storage's lazy_readers.
 *
 * Evaluation happens in clt__lazy_touch, which every command touching a device storage passes
 * first: a read or write of a deferred storage evaluates its chain; a write to a storage that a
 * deferred chain reads evaluates every deferred chain of that device first (so a chain always
 * sees its leaves as they were when its ops were called). The kernel writes the chain's result
 * and every intermediate whose storage is still alive (held by the user); intermediates the user
 * released are computed in registers only. An evaluated node keeps its value as a tensor and
 * becomes a leaf for the chains that still refer to it.
 *
 * One recursive mutex guards every graph. Commands launched while evaluating touch only leaves
 * and the outputs just taken off their pending state, so they never come back here (a
 * thread-local flag makes sure). */
#define _XOPEN_SOURCE 700 /* PTHREAD_MUTEX_RECURSIVE */
#include "backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct clt_lazy clt_lazy;

typedef struct lazy_arg {
  clt_lazy *node;               /* a deferred operand, or NULL */
  clt_tensor *leaf;             /* else a tensor with values (retained) */
  int64_t s[CLT_MAX_DIMS], off; /* the leaf's strides over the node's shape, and offset */
} lazy_arg;

struct clt_lazy {
  int refs; /* under lazy_lock: the storage it is pending on, and the nodes using it */
  clt_device *dev;
  const clt_op *op; /* NULL: a scalar, konst */
  uint64_t konst;   /* a scalar's value as its dtype's bytes */
  clt_dtype compute, dtype;
  int ndim;
  int64_t shape[CLT_MAX_DIMS], numel;
  int nargs;
  lazy_arg arg[3];
  clt_storage *out; /* the storage it is pending on (not retained); NULL once gone */
  /* An op writing into an existing tensor (clt__lazy_into): run at once, never pending; out is
   * that tensor's storage, out_off its element offset. */
  bool into;
  int64_t out_off;
  clt_tensor *value; /* once evaluated: its result, retained (the arguments are dropped) */
  /* value's storage counts this node in its lazy_readers: nodes still deferred read the value,
   * so a write to it must compute them first */
  bool value_read;
  clt_lazy *prev, *next; /* in the list of pending nodes while out is set */
};

static pthread_mutex_t lazy_lock;
static pthread_once_t lazy_once = PTHREAD_ONCE_INIT;
static atomic_int lazy_enabled; /* 1 on, 0 off */
static int lazy_debug;
/* host ops of fewer elements run at once (CLT_LAZY_HOST_MIN, clt__lazy_host_min) */
static _Atomic int64_t host_min = CLT__HOST_LAZY_MIN;
static clt_lazy *pending_head;
static _Thread_local bool evaluating;
static atomic_long stat_evals, stat_ops, stat_deferred, stat_each;

void clt__lazy_stats(clt_lazy_stats *s) {
  s->deferred = atomic_load(&stat_deferred);
  s->evaluations = atomic_load(&stat_evals);
  s->ops = atomic_load(&stat_ops);
  s->each = atomic_load(&stat_each);
}

static void lazy_init(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&lazy_lock, &a);
  pthread_mutexattr_destroy(&a);
  const char *e = getenv("CLT_LAZY");
  atomic_store(&lazy_enabled, !(e && (strcmp(e, "0") == 0 || strcmp(e, "off") == 0 ||
                                      strcmp(e, "false") == 0 || strcmp(e, "no") == 0)));
  const char *d = getenv("CLT_LAZY_DEBUG");
  lazy_debug = d && *d ? atoi(d) : 0;
  const char *h = getenv("CLT_LAZY_HOST_MIN");
  if (h && *h)
    atomic_store(&host_min, atoll(h) > 0 ? atoll(h) : 1);
}

static void ensure_init(void) { pthread_once(&lazy_once, lazy_init); }

int64_t clt__lazy_host_min(int64_t n) {
  ensure_init();
  return n > 0 ? atomic_exchange(&host_min, n) : atomic_load(&host_min);
}

int clt_set_lazy(int on) {
  ensure_init();
  return atomic_exchange(&lazy_enabled, on ? 1 : 0) != 0;
}

/* Whether elementwise ops on dev are deferred now (clt_set_lazy, CLT_LAZY; never under
 * CLT_SYNC=1, nor on a backend without `fused`). */
static bool lazy_on(const clt_device *dev) {
  ensure_init();
  return atomic_load_explicit(&lazy_enabled, memory_order_relaxed) && dev->backend->compute.fused &&
         !clt__env_sync();
}

static const clt_storage_hooks storage_hooks = {
    .touch = clt__lazy_touch, .free_memory = clt__lazy_free_memory, .gone = clt__lazy_storage_gone};
static pthread_once_t hooks_once = PTHREAD_ONCE_INIT;
static void install_hooks(void) { clt__storage_set_hooks(&storage_hooks); }

bool clt__lazy_defers(const clt_device *dev, int64_t numel) {
  /* every op that is deferred passes here first: the storages learn of lazy evaluation before
   * any of them can be deferred */
  pthread_once(&hooks_once, install_hooks);
  return numel > 0 && lazy_on(dev) &&
         (dev->kind != CLT_DEVICE_HOST ||
          numel >= atomic_load_explicit(&host_min, memory_order_relaxed));
}

/* ---- nodes -------------------------------------------------------------------------------- */

static void list_remove(clt_lazy *n) {
  if (n->prev)
    n->prev->next = n->next;
  else if (pending_head == n)
    pending_head = n->next;
  if (n->next)
    n->next->prev = n->prev;
  n->prev = n->next = NULL;
}

/* node is now what s will hold: s's reference to it, and the list of pending nodes. */
static void make_pending(clt_lazy *node, clt_storage *s) {
  node->out = s;
  atomic_store(&s->pending, node);
  node->next = pending_head;
  if (pending_head)
    pending_head->prev = node;
  pending_head = node;
}

static void drop_leaf(clt_tensor *t) {
  atomic_fetch_sub(&t->storage->lazy_readers, 1);
  clt_tensor_release(t);
}

static void node_release(clt_lazy *n);

static void drop_args(clt_lazy *n) {
  for (int j = 0; j < n->nargs; j++) {
    if (n->arg[j].node)
      node_release(n->arg[j].node);
    else if (n->arg[j].leaf)
      drop_leaf(n->arg[j].leaf);
    n->arg[j].node = NULL;
    n->arg[j].leaf = NULL;
  }
  n->nargs = 0;
}

static void node_release(clt_lazy *n) {
  if (--n->refs > 0)
    return;
  drop_args(n);
  if (n->value_read)
    atomic_fetch_sub(&n->value->storage->lazy_readers, 1);
  clt_tensor_release(n->value);
  free(n);
}

void clt__lazy_storage_gone(clt_storage *s) {
  if (!atomic_load_explicit(&s->pending, memory_order_acquire))
    return;
  pthread_mutex_lock(&lazy_lock);
  clt_lazy *n = atomic_exchange(&s->pending, NULL);
  if (n) {
    n->out = NULL;
    list_remove(n);
    node_release(n);
  }
  pthread_mutex_unlock(&lazy_lock);
}

/* ---- evaluation --------------------------------------------------------------------------- */

typedef struct planner {
  clt_fused f;
  clt_lazy *nodes[CLT__FUSE_MAX_NODES];
  clt_lazy *outs[CLT__FUSE_MAX_OUTS];
} planner;

static int plan_leaf(planner *p, const clt_tensor *t, const int64_t *s, int64_t off) {
  clt_fused *f = &p->f;
  for (int l = 0; l < f->nleaves; l++)
    if (f->leaf[l] == t && f->loff[l] == off &&
        memcmp(f->ls[l], s, sizeof(int64_t) * (size_t)f->ndim) == 0)
      return l;
  if (f->nleaves == CLT__FUSE_MAX_LEAVES)
    return -1;
  int l = f->nleaves++;
  f->leaf[l] = t;
  memcpy(f->ls[l], s, sizeof(int64_t) * (size_t)f->ndim);
  f->loff[l] = off;
  return l;
}

/* The contiguous strides of the plan's shape (an evaluated node's value, read as a leaf). */
static void dense_strides(const clt_fused *f, int64_t *s) {
  int64_t st = 1;
  for (int d = f->ndim - 1; d >= 0; d--) {
    s[d] = st;
    st *= f->shape[d];
  }
}

/* Strides that read, at the plan's shape (fnd, fshape), the elements that strides s read at a
 * node's shape (nd, shape) of as many elements, both walked in C order: a chain continues
 * through a contiguous view of a deferred result (view(x * 2, [4096, 4096]) + 1), which keeps
 * each element's index in C order, so a leaf of the earlier node is read at the same index with
 * strides over the plan's shape. False where no strides do (clt__view_strides: clt_view's
 * rule); the chain is then computed first and read as a leaf of its own. */
static bool restride(int nd, const int64_t *shape, const int64_t *s, int fnd, const int64_t *fshape,
                     int64_t *out) {
  if (nd == fnd && memcmp(shape, fshape, sizeof(int64_t) * (size_t)nd) == 0) {
    memcpy(out, s, sizeof(int64_t) * (size_t)nd);
    return true;
  }
  int64_t n = 1;
  for (int d = 0; d < nd; d++)
    n *= shape[d];
  if (n <= 1) { /* one element (or none): every index reads it */
    for (int d = 0; d < fnd; d++)
      out[d] = 0;
    return n == 1 || nd == 0;
  }
  return clt__view_strides(nd, shape, s, fnd, fshape, out);
}

/* The strides over the plan's shape at which a node's computed value is read: contiguous, as
 * the fused kernel wrote it at its own shape (the same C order index), or one element for all
 * (a scalar operand). */
static void value_strides(const clt_fused *f, const clt_lazy *n, int64_t *s) {
  if (n->numel == 1) {
    for (int d = 0; d < f->ndim; d++)
      s[d] = 0;
  } else {
    dense_strides(f, s);
  }
}

/* Adds n and what it needs to the plan (post-order); returns its index, or INT32_MIN when the
 * plan is full or a leaf cannot be read at the plan's shape (restride; the checks at recording
 * make either an internal error at evaluation). */
static int plan_node(planner *p, clt_lazy *n) {
  clt_fused *f = &p->f;
  for (int i = 0; i < f->nnodes; i++)
    if (p->nodes[i] == n)
      return i;
  clt_fused_node fn = {n->op, n->konst, n->compute, n->dtype, {0, 0, 0}, -1};
  for (int j = 0; j < n->nargs; j++) {
    const lazy_arg *a = &n->arg[j];
    int r;
    if (a->node && a->node->value) {
      int64_t s[CLT_MAX_DIMS];
      value_strides(f, a->node, s);
      int l = plan_leaf(p, a->node->value, s, 0);
      r = l < 0 ? INT32_MIN : -l - 1;
    } else if (a->node) {
      r = plan_node(p, a->node); /* >= 0, or INT32_MIN */
    } else {
      int64_t s[CLT_MAX_DIMS];
      int l = restride(n->ndim, n->shape, a->s, f->ndim, f->shape, s)
                  ? plan_leaf(p, a->leaf, s, a->off)
                  : -1;
      r = l < 0 ? INT32_MIN : -l - 1;
    }
    if (r == INT32_MIN)
      return INT32_MIN;
    fn.arg[j] = r;
  }
  for (int j = n->nargs; j < 3 && n->nargs > 0; j++)
    fn.arg[j] = fn.arg[n->nargs - 1];
  if (f->nnodes == CLT__FUSE_MAX_NODES)
    return INT32_MIN;
  p->nodes[f->nnodes] = n;
  f->node[f->nnodes] = fn;
  return f->nnodes++;
}

/* The ops of f (its scalar operands are nodes too). */
static int count_ops(const clt_fused *f) {
  int n = 0;
  for (int i = 0; i < f->nnodes; i++)
    n += f->node[i].op != NULL;
  return n;
}

static void describe(const planner *p, char *buf, size_t size) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < p->f.nnodes && at + 1 < size; i++)
    if (p->nodes[i]->op)
      at += (size_t)snprintf(buf + at, size - at, "%s%s", at ? " " : "", p->nodes[i]->op->name);
}

static clt_status eval_locked(clt_storage *s, const char *fn);

/* A chain of one op runs the op's own kernel (the backend's elementwise): no program of its
 * own to build, and exactly the eager launch. */
static clt_status run_one(const planner *p, clt_tensor *out) {
  const clt_fused *f = &p->f;
  const clt_fused_node *nd = &f->node[0];
  clt_bcast bc;
  memset(&bc, 0, sizeof bc);
  bc.ndim = f->ndim;
  memcpy(bc.shape, f->shape, sizeof bc.shape);
  memcpy(bc.so, out->strides, sizeof bc.so);
  bc.same = true;
  clt_tensor *in[3] = {NULL, NULL, NULL}, *views[3] = {NULL, NULL, NULL};
  int64_t dense[CLT_MAX_DIMS];
  dense_strides(f, dense);
  clt_status st = CLT_OK;
  for (int k = 0; k < nd->op->arity && st == CLT_OK; k++) {
    int l = -nd->arg[k] - 1; /* the one node's operands are leaves */
    in[k] = (clt_tensor *)f->leaf[l];
    memcpy(bc.s[k], f->ls[l], sizeof bc.s[k]);
    bc.off[k] = f->loff[l];
    /* A leaf of as many elements read in order (an evaluated node's value, kept at that node's
     * shape, or a tensor a chain reached through a view of another shape) is given to the
     * backend as a view at the plan's shape: backends may read an operand through its own
     * geometry where it has the result's element count (the host's copy does), which must then
     * be the geometry the plan reads it with. */
    bool shaped = in[k]->ndim == f->ndim &&
                  memcmp(in[k]->shape, f->shape, sizeof(int64_t) * (size_t)f->ndim) == 0;
    clt_leaf_kind kind = clt__leaf_kind(f->ndim, f->shape, f->ls[l]);
    if (!shaped && in[k]->numel == f->numel &&
        (kind == CLT__LEAF_DENSE || (kind == CLT__LEAF_SCALAR && f->numel == 1))) {
      st = clt__tensor_view(in[k], f->ndim, f->shape, kind == CLT__LEAF_DENSE ? dense : f->ls[l],
                            f->loff[l], f->fn, &views[k]);
      in[k] = views[k];
    }
    bool same = in[k]->ndim == f->ndim && f->loff[l] == clt__elem_offset(in[k]);
    for (int d = 0; d < f->ndim && same; d++)
      same = f->shape[d] == 1 || f->ls[l][d] == dense[d];
    bc.same = bc.same && same;
  }
  if (st == CLT_OK)
    st = out->storage->dev->backend->compute.elementwise(nd->op, out, in, nd->compute, &bc);
  for (int k = 0; k < 3; k++)
    clt_tensor_release(views[k]);
  return st;
}

/* The tensor for node i of a chain run op by op: its output (at the plan's shape, contiguous at
 * its element offset) where it has one, else a new contiguous one on the device; a scalar
 * operand (no op) is a 0-d tensor holding its value, as the eager scalar ops make. */
static clt_status each_tensor(const planner *p, int i, clt_tensor *const *val, const char *fn,
                              clt_tensor **out) {
  const clt_fused *f = &p->f;
  const clt_fused_node *nd = &f->node[i];
  clt_device *dev = p->nodes[0]->dev;
  clt_status st;
  if (!nd->op) {
    if ((st = clt__tensor_new(nd->dtype, 0, NULL, dev, fn, out)) != CLT_OK)
      return st;
    if ((st = dev->backend->compute.fill(*out, &nd->konst, fn)) != CLT_OK) {
      clt_tensor_release(*out);
      *out = NULL;
    }
    return st;
  }
  if (nd->out < 0)
    return clt__tensor_new(nd->dtype, f->ndim, f->shape, dev, fn, out);
  int64_t dense[CLT_MAX_DIMS];
  dense_strides(f, dense);
  clt_tensor *w = val[nd->out];
  if (w) /* the node's value tensor, at the node's own shape: viewed at the plan's */
    return clt__tensor_view(w, f->ndim, f->shape, dense, 0, fn, out);
  if ((st = clt__tensor_wrap(f->out_dtype[nd->out], f->ndim, f->shape, f->out[nd->out], fn, &w)) !=
      CLT_OK)
    return st;
  st = clt__tensor_view(w, f->ndim, f->shape, dense, f->out_off[nd->out], fn, out);
  clt_tensor_release(w);
  return st;
}

/* Runs a planned chain op by op with the backend's own kernels (elementwise), each node's value
 * kept in a tensor of its dtype: what the fused kernel computes, bit for bit (each node is
 * computed as the eager op computes it, then stored in its dtype), while the backend builds the
 * fused kernel in the background. val holds the outputs' value tensors (NULL for one written into
 * a tensor of the caller's: n->into). */
static clt_status run_each(const planner *p, clt_tensor *const *val) {
  const clt_fused *f = &p->f;
  const char *fn = f->fn;
  clt_tensor *t[CLT__FUSE_MAX_NODES] = {NULL};
  int64_t dense[CLT_MAX_DIMS], zero[CLT_MAX_DIMS] = {0};
  dense_strides(f, dense);
  /* each node's last reader, so that its tensor goes back to the pool (for the next node's)
   * right after: a long chain needs two or three buffers, not one per op */
  int last[CLT__FUSE_MAX_NODES];
  for (int i = 0; i < f->nnodes; i++) {
    last[i] = i;
    for (int k = 0; f->node[i].op && k < f->node[i].op->arity; k++)
      if (f->node[i].arg[k] >= 0)
        last[f->node[i].arg[k]] = i;
  }
  clt_status st = CLT_OK;
  for (int i = 0; i < f->nnodes && st == CLT_OK; i++) {
    const clt_fused_node *nd = &f->node[i];
    if ((st = each_tensor(p, i, val, fn, &t[i])) != CLT_OK || !nd->op)
      continue;
    clt_bcast bc;
    memset(&bc, 0, sizeof bc);
    bc.ndim = f->ndim;
    memcpy(bc.shape, f->shape, sizeof bc.shape);
    memcpy(bc.so, dense, sizeof bc.so);
    bc.ooff = clt__elem_offset(t[i]);
    bc.same = true;
    clt_tensor *in[3] = {NULL, NULL, NULL}, *views[3] = {NULL, NULL, NULL};
    for (int k = 0; k < nd->op->arity && st == CLT_OK; k++) {
      int a = nd->arg[k];
      const int64_t *s;
      if (a >= 0) { /* an earlier node's value: contiguous at the plan's shape, or one element */
        in[k] = t[a];
        s = f->node[a].op ? dense : zero;
        bc.off[k] = clt__elem_offset(t[a]);
      } else {
        int l = -a - 1;
        in[k] = (clt_tensor *)f->leaf[l];
        s = f->ls[l];
        bc.off[k] = f->loff[l];
        /* as run_one: a leaf of the result's element count, read in order, goes as a view at
         * the plan's shape, so that a backend reading it through its own geometry reads it as
         * the plan does */
        bool shaped = in[k]->ndim == f->ndim &&
                      memcmp(in[k]->shape, f->shape, sizeof(int64_t) * (size_t)f->ndim) == 0;
        clt_leaf_kind kind = clt__leaf_kind(f->ndim, f->shape, s);
        if (!shaped && in[k]->numel == f->numel &&
            (kind == CLT__LEAF_DENSE || (kind == CLT__LEAF_SCALAR && f->numel == 1))) {
          st = clt__tensor_view(in[k], f->ndim, f->shape, kind == CLT__LEAF_DENSE ? dense : s,
                                f->loff[l], fn, &views[k]);
          in[k] = views[k];
        }
      }
      memcpy(bc.s[k], s, sizeof bc.s[k]);
      bool same = in[k] && in[k]->ndim == f->ndim && bc.off[k] == clt__elem_offset(in[k]);
      for (int d = 0; d < f->ndim && same; d++)
        same = f->shape[d] == 1 || s[d] == dense[d];
      bc.same = bc.same && same;
    }
    if (st == CLT_OK)
      st = t[i]->storage->dev->backend->compute.elementwise(nd->op, t[i], in, nd->compute, &bc);
    for (int k = 0; k < 3; k++)
      clt_tensor_release(views[k]);
    for (int k = 0; k < nd->op->arity; k++) {
      int a = nd->arg[k];
      if (a >= 0 && last[a] == i && t[a]) {
        clt_tensor_release(t[a]);
        t[a] = NULL;
      }
    }
  }
  for (int i = 0; i < f->nnodes; i++)
    clt_tensor_release(t[i]);
  return st;
}

/* Computes the chain of node n, pending on s, into s and into every intermediate still held. */
static clt_status eval_node(clt_lazy *root, const char *fn) {
  for (;;) {
    planner p;
    memset(&p, 0, sizeof p);
    clt_fused *f = &p.f;
    f->ndim = root->ndim;
    memcpy(f->shape, root->shape, sizeof f->shape);
    f->numel = root->numel;
    f->fn = fn;
    if (plan_node(&p, root) == INT32_MIN)
      return clt__error(CLT_ERR_INTERNAL, fn, "a deferred chain outgrew its fused kernel");
    /* the outputs: the root, then the intermediates whose storage someone still holds */
    p.outs[f->nouts++] = root;
    clt_lazy *extra = NULL;
    for (int i = 0; i < f->nnodes; i++) {
      clt_lazy *n = p.nodes[i];
      if (n == root || !n->out || !n->op) /* a scalar held elsewhere is written on its own */
        continue;
      if (f->nouts == CLT__FUSE_MAX_OUTS) {
        extra = n;
        break;
      }
      p.outs[f->nouts++] = n;
    }
    if (extra) {
      /* too many held intermediates for one kernel: compute one of them first (it becomes a
       * leaf), then plan again */
      clt_status st = eval_locked(extra->out, fn);
      if (st != CLT_OK)
        return st;
      continue;
    }
    for (int o = 0; o < f->nouts; o++) {
      clt_lazy *n = p.outs[o];
      for (int i = 0; i < f->nnodes; i++)
        if (p.nodes[i] == n)
          f->node[i].out = o;
      f->out[o] = n->out;
      f->out_off[o] = n->into ? n->out_off : 0;
      f->out_dtype[o] = n->dtype;
    }
    if (lazy_debug && root->op) {
      char ops[512];
      int nops = count_ops(f);
      describe(&p, ops, sizeof ops);
      fprintf(stderr, "clt lazy: %s evaluates %d deferred op%s on %s (%s) into %d tensor%s\n", fn,
              nops, nops == 1 ? "" : "s", root->dev->name, ops, f->nouts, f->nouts == 1 ? "" : "s");
    }
    /* The outputs' tensors, made before the launch so that nothing can fail after it. */
    clt_tensor *val[CLT__FUSE_MAX_OUTS] = {NULL};
    clt_status st = CLT_OK;
    for (int o = 0; o < f->nouts && st == CLT_OK; o++)
      if (!p.outs[o]->into) /* at the node's own shape: the plan's may be a view of it */
        st = clt__tensor_wrap(p.outs[o]->dtype, p.outs[o]->ndim, p.outs[o]->shape, f->out[o], fn,
                              &val[o]);
    if (st != CLT_OK) {
      for (int o = 0; o < f->nouts; o++)
        clt_tensor_release(val[o]);
      return st;
    }
    /* Off their pending state (the storages' references to the nodes are now ours), so the
     * commands of the evaluation pass clt__lazy_touch. */
    for (int o = 0; o < f->nouts; o++)
      if (!p.outs[o]->into)
        atomic_store(&f->out[o]->pending, NULL);
    bool was = evaluating;
    evaluating = true;
    if (!root->op) /* a scalar on its own */
      st = root->dev->backend->compute.fill(val[0], &root->konst, fn);
    else if (f->nnodes == 1 && !root->into)
      st = run_one(&p, val[0]);
    else {
      bool later = false; /* the fused kernel is being built in the background */
      st = root->dev->backend->compute.fused(root->dev, f, &later);
      if (st == CLT_OK && later) {
        st = run_each(&p, val);
        if (st == CLT_OK)
          atomic_fetch_add(&stat_each, 1);
      }
    }
    evaluating = was;
    if (st != CLT_OK) {
      /* still pending: a later use tries again, and reports again */
      for (int o = 0; o < f->nouts; o++)
        if (!p.outs[o]->into)
          atomic_store(&f->out[o]->pending, p.outs[o]);
      for (int o = 0; o < f->nouts; o++)
        clt_tensor_release(val[o]);
      char ops[512];
      describe(&p, ops, sizeof ops);
      return clt__error(st, fn, "evaluating the deferred ops (%s) on %s: %s", ops, root->dev->name,
                        clt_last_error());
    }
    int nops = count_ops(f);
    if (nops > 0) { /* not a scalar's fill */
      atomic_fetch_add(&stat_evals, 1);
      atomic_fetch_add(&stat_ops, nops);
    }
    for (int o = 0; o < f->nouts; o++) {
      clt_lazy *n = p.outs[o];
      if (n->into)
        continue; /* its caller releases it */
      n->value = val[o];
      drop_args(n);
      n->out = NULL;
      list_remove(n);
    }
    for (int o = 0; o < f->nouts; o++) {
      clt_lazy *n = p.outs[o];
      if (n->into)
        continue;
      if (n->refs > 1) { /* deferred chains outside this kernel read it: now from its value */
        n->value_read = true;
        atomic_fetch_add(&n->value->storage->lazy_readers, 1);
      }
      node_release(n); /* the storage's reference */
    }
    return CLT_OK;
  }
}

static clt_status eval_locked(clt_storage *s, const char *fn) {
  clt_lazy *n = atomic_load(&s->pending);
  return n ? eval_node(n, fn) : CLT_OK;
}

static clt_status flush_locked(clt_device *dev, const char *fn) {
  /* each evaluation may evaluate other pending nodes too: walk again from the head each time,
   * skipping nodes that failed */
  clt_status first = CLT_OK;
  clt_lazy *failed[64];
  int nfailed = 0;
  for (;;) {
    clt_lazy *n = pending_head;
    while (n) {
      bool skip = dev && n->dev != dev;
      for (int i = 0; i < nfailed && !skip; i++)
        skip = failed[i] == n;
      if (!skip)
        break;
      n = n->next;
    }
    if (!n)
      return first;
    clt_status st = eval_node(n, fn);
    if (st != CLT_OK) {
      if (first == CLT_OK)
        first = st;
      if (nfailed == 64)
        return first;
      failed[nfailed++] = n;
    }
  }
}

clt_status clt__lazy_flush(clt_device *dev, const char *fn) {
  ensure_init();
  if (evaluating)
    return CLT_OK;
  pthread_mutex_lock(&lazy_lock);
  clt_status st = pending_head ? flush_locked(dev, fn) : CLT_OK;
  pthread_mutex_unlock(&lazy_lock);
  return st;
}

bool clt__lazy_free_memory(clt_device *dev, const char *fn) {
  ensure_init();
  /* a try: the allocation may come from inside a recording or an evaluation of this thread */
  if (evaluating || pthread_mutex_trylock(&lazy_lock) != 0)
    return false;
  bool any = false;
  for (clt_lazy *n = pending_head; n && !any; n = n->next)
    any = n->dev == dev;
  if (any)
    flush_locked(dev, fn); /* a failure stays pending and is reported by the next use */
  pthread_mutex_unlock(&lazy_lock);
  return any;
}

clt_status clt__lazy_touch(clt_storage *s, bool writing, const char *fn) {
  if (evaluating || (!atomic_load_explicit(&s->pending, memory_order_acquire) &&
                     !(writing && atomic_load_explicit(&s->lazy_readers, memory_order_acquire))))
    return CLT_OK;
  pthread_mutex_lock(&lazy_lock);
  clt_status st = eval_locked(s, fn);
  if (st == CLT_OK && writing && atomic_load(&s->lazy_readers) > 0)
    st = flush_locked(s->dev, fn);
  pthread_mutex_unlock(&lazy_lock);
  return st;
}

clt_status clt__lazy_ready(clt_tensor *const *reads, int n, const clt_tensor *write,
                           const char *fn) {
  clt_status st = CLT_OK;
  for (int i = 0; i < n && st == CLT_OK; i++)
    if (reads[i])
      st = clt__lazy_touch(reads[i]->storage, false, fn);
  if (st == CLT_OK && write)
    st = clt__lazy_touch(write->storage, true, fn);
  return st;
}

clt_status clt_eval(clt_tensor *t) {
  static const char fn[] = "clt_eval";
  clt_status s = clt__check_tensor(t, fn, "t");
  if (s != CLT_OK)
    return s;
  return clt__lazy_touch(t->storage, false, fn);
}

/* ---- recording ---------------------------------------------------------------------------- */

/* Whether op (result shape that of `like`) and the chains of its deferred operands (chain[k],
 * else in[k] is a leaf) fit one fused kernel: planned as they would be, counting each node and
 * leaf once. */
static bool fits(const clt_op *op, const clt_tensor *like, clt_lazy *const *chain,
                 clt_tensor *const *in, const clt_bcast *bc) {
  if (!chain[0] && !chain[1] && !chain[2])
    return true; /* one op over at most 3 leaves */
  planner p;
  memset(&p, 0, sizeof p);
  p.f.ndim = like->ndim;
  memcpy(p.f.shape, like->shape, sizeof p.f.shape);
  for (int k = 0; k < op->arity; k++) {
    if (chain[k] && plan_node(&p, chain[k]) == INT32_MIN)
      return false;
    if (!chain[k] && plan_leaf(&p, in[k], bc->s[k], bc->off[k]) < 0)
      return false;
  }
  int strided = 0, ops = count_ops(&p.f);
  for (int l = 0; l < p.f.nleaves; l++)
    strided += clt__leaf_kind(p.f.ndim, p.f.shape, p.f.ls[l]) == CLT__LEAF_STRIDED;
  return ops < CLT__FUSE_MAX_OPS && p.f.nnodes - ops <= CLT__FUSE_MAX_CONSTS &&
         strided <= CLT__FUSE_MAX_STRIDED;
}

/* Whether op over in, computing in `compute`, into a result of dtype `dtype`, can be a node:
 * every computation now. A fused kernel computes each node as that op's own kernel does: in its
 * compute type, integers that wrap in their unsigned twin with the same helpers, f16 and bf16 in
 * float with each value rounded as it would be stored, and converts it as that kernel stores it
 * (lib/opencl/fuse.c). Kept as the one place to refuse a computation fusion cannot copy. */
static bool fusable(const clt_op *op, clt_tensor *const *in, clt_dtype compute, clt_dtype dtype) {
  (void)op;
  (void)in;
  (void)compute;
  (void)dtype;
  return true;
}

/* The deferred chains the operands of an op of result shape `like` continue: chain[k] when
 * in[k] shows a whole deferred result, in C order, at that shape: the result itself or a
 * contiguous view of all of it with another shape (view, reshape, unsqueeze, ...), whose
 * elements keep their index in C order (restride maps the chain's leaves; fits() says whether
 * it can). Anything else that reads a deferred result (a part, a transpose, a broadcast) is a
 * leaf, computed before the op is recorded (make_node). Returns how many. */
static int chains_of(const clt_op *op, clt_tensor *const *in, const clt_tensor *like,
                     clt_lazy **chain) {
  int found = 0;
  chain[0] = chain[1] = chain[2] = NULL; /* fits() looks at all three */
  for (int k = 0; k < op->arity; k++) {
    const clt_tensor *t = in[k];
    clt_lazy *p = atomic_load(&t->storage->pending);
    if (p && !p->op && t->numel == 1 && t->offset == 0) { /* a scalar, for any shape */
      chain[k] = p;
      found++;
    } else if (p && p->op && t->contiguous && t->offset == 0 && t->dtype == p->dtype &&
               t->numel == p->numel && t->ndim == like->ndim &&
               memcmp(t->shape, like->shape, sizeof(int64_t) * (size_t)like->ndim) == 0) {
      chain[k] = p;
      found++;
    }
  }
  return found;
}

/* chains_of, once every operand that is not a chain holds its values: such an operand (a part,
 * transpose or broadcast of a deferred result) is computed first, which may compute other
 * chains too (the one it is a view of, which another operand may continue), so the chains are
 * looked up again afterwards, by storage. No node is held across an evaluation, which may free
 * it (an evaluated node's storage drops its reference: a use after free before issue 32's
 * differential tests, add(select(m, 1, 3), m) with m deferred). Under lazy_lock. */
static clt_status stable_chains(const clt_op *op, clt_tensor *const *in, const clt_tensor *like,
                                clt_lazy **chain) {
  for (int round = 0; round <= op->arity; round++) {
    chains_of(op, in, like, chain);
    bool again = false;
    for (int k = 0; k < op->arity; k++)
      if (!chain[k] && atomic_load(&in[k]->storage->pending)) {
        clt_status st = eval_locked(in[k]->storage, op->fn);
        if (st != CLT_OK)
          return st;
        again = true;
      }
    if (!again)
      return CLT_OK;
  }
  return clt__error(CLT_ERR_INTERNAL, op->fn, "the operands' deferred chains did not settle");
}

/* Computes the deferred chains (not scalars) among the operands' (by storage: see
 * stable_chains), then looks up what is left: scalar operands. */
static clt_status force_chains(const clt_op *op, clt_tensor *const *in, const clt_tensor *like,
                               clt_lazy **chain) {
  bool force[3] = {false, false, false};
  for (int k = 0; k < op->arity; k++)
    force[k] = chain[k] && chain[k]->op;
  for (int k = 0; k < op->arity; k++) {
    clt_status st = force[k] ? eval_locked(in[k]->storage, op->fn) : CLT_OK;
    if (st != CLT_OK)
      return st;
  }
  return stable_chains(op, in, like, chain);
}

/* A node for op (result shape and dtype those of `like`), its operands the chains chain[k] or
 * the leaves in[k] (which hold their values: stable_chains); under lazy_lock. */
static clt_status make_node(const clt_op *op, const clt_tensor *like, clt_dtype dtype,
                            clt_tensor *const *in, clt_lazy *const *chain, clt_dtype compute,
                            const clt_bcast *bc, clt_lazy **out) {
  clt_lazy *node = calloc(1, sizeof *node);
  if (!node)
    return clt__error(CLT_ERR_OUT_OF_MEMORY, op->fn, "out of host memory");
  node->refs = 1;
  node->dev = like->storage->dev;
  node->op = op;
  node->compute = compute;
  node->dtype = dtype;
  node->ndim = like->ndim;
  memcpy(node->shape, like->shape, sizeof node->shape);
  node->numel = like->numel;
  clt_status st = CLT_OK;
  for (int k = 0; k < op->arity && st == CLT_OK; k++) {
    clt_tensor *t = in[k];
    lazy_arg *a = &node->arg[k];
    if (chain[k]) {
      a->node = chain[k];
      chain[k]->refs++;
    } else {
      /* a leaf: stable_chains computed it if it was deferred; no evaluation here, which could
       * free the nodes in chain[] */
      if (atomic_load(&t->storage->pending)) {
        st = clt__error(CLT_ERR_INTERNAL, op->fn, "operand %d is still deferred", k + 1);
        break;
      }
      a->leaf = clt_tensor_retain(t);
      atomic_fetch_add(&t->storage->lazy_readers, 1);
      memcpy(a->s, bc->s[k], sizeof a->s);
      a->off = bc->off[k];
    }
    node->nargs = k + 1;
  }
  if (st != CLT_OK) {
    node_release(node);
    return st;
  }
  *out = node;
  return CLT_OK;
}

/* Whether node reads host memory that the program can reach without clt (storage `exposed`). */
static bool reads_exposed(const clt_lazy *node) {
  for (int k = 0; k < node->nargs; k++)
    if (node->arg[k].leaf &&
        atomic_load_explicit(&node->arg[k].leaf->storage->exposed, memory_order_relaxed))
      return true;
  return false;
}

clt_status clt__lazy_record(const clt_op *op, clt_tensor *out, clt_tensor *const *in,
                            clt_dtype compute, const clt_bcast *bc, bool *deferred) {
  *deferred = false;
  if (!fusable(op, in, compute, out->dtype) || out->numel == 0)
    return CLT_OK;
  pthread_mutex_lock(&lazy_lock);
  clt_status st = CLT_OK;
  clt_lazy *chain[3];
  st = stable_chains(op, in, out, chain);
  if (st == CLT_OK && !fits(op, out, chain, in, bc))
    /* too long a chain for one kernel: its deferred operands are computed now, this op starts
     * a new chain reading them (scalars stay arguments) */
    st = force_chains(op, in, out, chain);
  clt_lazy *node = NULL;
  if (st == CLT_OK)
    st = make_node(op, out, out->dtype, in, chain, compute, bc, &node);
  if (st != CLT_OK) {
    pthread_mutex_unlock(&lazy_lock);
    return st;
  }
  make_pending(node, out->storage);
  atomic_fetch_add(&stat_deferred, 1);
  /* Host memory the program can write behind clt's back is read now, with the deferred chains
   * of the other operands: the op is fused with them but not deferred. */
  if (reads_exposed(node))
    st = eval_node(node, op->fn);
  pthread_mutex_unlock(&lazy_lock);
  if (st == CLT_OK)
    *deferred = true;
  return st;
}

/* Whether node n or a node it reads (not yet computed) is m. */
static bool reaches(const clt_lazy *n, const clt_lazy *m) {
  if (n == m)
    return true;
  for (int j = 0; j < n->nargs; j++)
    if (n->arg[j].node && !n->arg[j].node->value && reaches(n->arg[j].node, m))
      return true;
  return false;
}

/* Whether every element of dst that node's chain reads, it reads at the index it writes (a
 * leaf over dst's storage read contiguously from dst's offset), so that the kernel reads each
 * element before the same work-item writes it. Any other leaf over dst's storage (a transposed,
 * shifted or broadcast view) says no, even where the elements it reads are not dst's. */
static bool reads_dst_in_place(clt_lazy *node, const clt_tensor *dst) {
  planner p;
  memset(&p, 0, sizeof p);
  p.f.ndim = node->ndim;
  memcpy(p.f.shape, node->shape, sizeof p.f.shape);
  if (plan_node(&p, node) == INT32_MIN)
    return false;
  int64_t dense[CLT_MAX_DIMS];
  dense_strides(&p.f, dense);
  for (int l = 0; l < p.f.nleaves; l++) {
    if (p.f.leaf[l]->storage != dst->storage)
      continue;
    clt_leaf_kind k = clt__leaf_kind(p.f.ndim, p.f.shape, p.f.ls[l]);
    if (p.f.loff[l] != node->out_off || p.f.leaf[l]->dtype != dst->dtype ||
        !(k == CLT__LEAF_DENSE || node->numel == 1))
      return false;
  }
  return true;
}

clt_status clt__lazy_into(const clt_op *op, clt_tensor *dst, clt_tensor *const *in,
                          clt_dtype compute, const clt_bcast *bc, bool *done) {
  *done = false;
  if (!fusable(op, in, compute, dst->dtype) || dst->numel == 0 || !dst->contiguous)
    return CLT_OK;
  clt_lazy *chain[3];
  pthread_mutex_lock(&lazy_lock);
  clt_status st = stable_chains(op, in, dst, chain);
  if (st != CLT_OK) {
    pthread_mutex_unlock(&lazy_lock);
    return st;
  }
  if (!(chain[0] || chain[1] || chain[2]) || atomic_load(&dst->storage->pending)) {
    pthread_mutex_unlock(&lazy_lock); /* nothing to fuse with: the op's own kernel */
    return CLT_OK;
  }
  if (!fits(op, dst, chain, in, bc)) {
    pthread_mutex_unlock(&lazy_lock);
    return CLT_OK;
  }
  clt_lazy *node = NULL;
  st = make_node(op, dst, dst->dtype, in, chain, compute, bc, &node);
  if (st != CLT_OK) {
    pthread_mutex_unlock(&lazy_lock);
    return st;
  }
  node->into = true;
  node->out = dst->storage;
  node->out_off = clt__elem_offset(dst);
  if (!reads_dst_in_place(node, dst)) {
    /* some element of dst would be read by one work-item after another wrote it: run the
     * chain first, into its own memory, as eagerly */
    node_release(node);
    pthread_mutex_unlock(&lazy_lock);
    return CLT_OK;
  }
  /* Every other deferred chain reading dst is computed before dst changes; the chains this op
   * reads may read dst too: each element is read before it is written, by the same work-item. */
  if (atomic_load(&dst->storage->lazy_readers) > 0) {
    for (bool again = true; again && st == CLT_OK;) {
      again = false;
      for (clt_lazy *p = pending_head; p; p = p->next)
        if (p->dev == node->dev && !reaches(node, p)) {
          st = eval_node(p, op->fn);
          again = true;
          break;
        }
    }
  }
  if (st == CLT_OK)
    st = eval_node(node, op->fn);
  node_release(node);
  pthread_mutex_unlock(&lazy_lock);
  if (st == CLT_OK)
    *done = true;
  return st;
}

clt_status clt__lazy_scalar(clt_dtype dtype, double v, clt_device *dev, const char *fn,
                            clt_tensor **out) {
  uint64_t konst = 0;
  clt_status st = clt__scalar_bytes(dtype, v, &konst, fn); /* as clt_full stores it */
  if (st != CLT_OK)
    return st;
  clt_tensor *t;
  if ((st = clt__tensor_new(dtype, 0, NULL, dev, fn, &t)) != CLT_OK)
    return st;
  clt_lazy *node = calloc(1, sizeof *node);
  if (!node) {
    clt_tensor_release(t);
    return clt__error(CLT_ERR_OUT_OF_MEMORY, fn, "out of host memory");
  }
  node->refs = 1;
  node->dev = dev;
  node->dtype = dtype;
  node->numel = 1;
  node->konst = konst;
  pthread_mutex_lock(&lazy_lock);
  make_pending(node, t->storage);
  pthread_mutex_unlock(&lazy_lock);
  *out = t;
  return CLT_OK;
}
