#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""numpy_check.py DIR [--ops include/clt_ops.h] [--verbose] - the NumPy lane of the differential
tester (issue 32, part 3).

DIR holds what `tests/difftest --seeds A:B --numpy DIR` wrote: each program, run eagerly on the
host, step by step, with each step's status and the tensor it made or wrote. This replays every
step in NumPy from clt's own operands (each step's result is taken from clt afterwards, so one
difference does not spread) and compares statuses (a clt error against a NumPy exception or
refusal), dtypes and values: bit for bit where the operation is exact (NaN equal to NaN), within
a bound from the op table's ulps where not.

Where NumPy and clt differ by design, docs/operations.md says so; each such difference is a rule
below (a function named after it whose docstring cites the row), applied to a model of clt
written over NumPy. A step agrees when clt gives NumPy's answer; it is excused when it gives the
model's answer and names the rules the model used; anything else fails, printed with its seed,
step and both values. The summary says how many comparisons each rule excused, then
`numpy lane: N programs, C comparisons, F failures` and `N passed, F failed`.

bf16: NumPy has none. It is emulated: held as float32, every bf16 result rounded to bf16 (round
to nearest even), so its values are checked but its dtypes follow clt's table (rule bf16_emulated).
"""
import glob
import json
import math
import os
import re
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
np.seterr(all="ignore")

NPT = {"bool": np.bool_, "u8": np.uint8, "i32": np.int32, "i64": np.int64, "f16": np.float16,
       "bf16": np.float32, "f32": np.float32, "f64": np.float64}
FROM_NP = {np.dtype(np.bool_): "bool", np.dtype(np.uint8): "u8", np.dtype(np.int32): "i32",
           np.dtype(np.int64): "i64", np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
           np.dtype(np.float64): "f64"}
FLOATS = ("f16", "bf16", "f32", "f64")
INTS = ("u8", "i32", "i64")
EPS = {"f16": 2.0**-10, "bf16": 2.0**-7, "f32": 2.0**-23, "f64": 2.0**-52}
TINY = {"f16": 2.0**-14, "bf16": 2.0**-126, "f32": 2.0**-126, "f64": 2.0**-1022}
ORDER = ["bool", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"]


class Refused(Exception):
    """clt's model refuses the step (an error status)."""


# ---- rules: the documented differences --------------------------------------------------------

RULES = {}


def rule(fn):
    RULES[fn.__name__] = fn
    return fn


@rule
def promotion_table(ctx):
    """docs/operations.md "dtype promotion" and the row "promotion": binary operations promote
    with PyTorch's table (a float with an integer gives the float dtype, f16 with bf16 gives
    f32), where NumPy widens (i32 + f16 is f64 in NumPy, f16 in clt)."""


@rule
def scalar_no_widen(ctx):
    """docs/operations.md row "scalar operand" (include/clt.h on the _scalar forms; lib/dispatch.c
    scalar_tensor): a number operand does not widen the tensor's dtype (f16 + 2.5 is f16, u8 + 3
    is u8, bool + 1 is i64). With an integer or bool tensor, a number that is not an integer in
    [-9.2e18, 9.2e18] (2.5, 1e30, inf, NaN) is a float scalar and gives f32, as a Python float
    does in PyTorch (its default float dtype); an integer the tensor's dtype cannot hold is
    refused. Each scalar is judged against the tensor's dtype alone, so clamp_scalar(u8, 0.5,
    300) is refused though 0.5 alone would make the result f32. NumPy 1.24's value-based
    casting widens instead (u8 + 300 is u16, i32 + 2.5 and i64 + 1e30 are f64)."""


@rule
def integer_true_division_f32(ctx):
    """docs/operations.md "dtype promotion": div and the math functions (rule FLOAT) give f32
    for integer or bool operands; NumPy gives f64 (f16 for u8 and bool)."""


@rule
def narrow_f32_once(ctx):
    """docs/operations.md row "f16/bf16 op with an integer tensor operand", and clt.h: f16 and
    bf16 compute in f32 and round once, each operand first a value of the result's dtype."""


@rule
def bf16_emulated(ctx):
    """NumPy has no bf16 (docs/operations.md, the NumPy column says "(no bf16)"): emulated as
    f32 rounded to bf16 after every operation; its dtypes are clt's table's."""


@rule
def cast_saturates(ctx):
    """docs/operations.md "Values C leaves undefined": float to integer truncates and saturates,
    NaN gives 0; NumPy's conversion is undefined there (INT_MIN on x86) or raises (NaN into an
    integer fill)."""


@rule
def int_pow_negative(ctx):
    """docs/operations.md "Values C leaves undefined": integer pow with a negative exponent gives
    0 (1 or -1 for the bases 1 and -1); NumPy raises ValueError."""


@rule
def signed_zero_order(ctx):
    """docs/operations.md "Values C leaves undefined": maximum, minimum and clamp order -0 below
    +0; NumPy's may return either zero."""


@rule
def rounding_keeps_integers(ctx):
    """docs/operations.md "The elementwise operations": floor, ceil, round and trunc leave
    integer dtypes unchanged; NumPy gives a float dtype."""


@rule
def bool_as_pytorch(ctx):
    """docs/operations.md "bool" and the op table's "takes" column: sub, pow, neg, abs, relu,
    floor, ceil, round, trunc and clamp refuse bool (CLT_ERR_DTYPE), sign of bool is itself;
    NumPy computes some of these and refuses sign."""


@rule
def sum_integers_to_i64(ctx):
    """clt.h "Reductions": integers and bool sum to i64; NumPy sums u8 to u64."""


@rule
def mean_floats_only(ctx):
    """clt.h "Reductions": mean of integers or bool is CLT_ERR_DTYPE; NumPy gives f64."""


@rule
def matmul_one_float_dtype(ctx):
    """clt.h clt_matmul: both operands of one float dtype, else CLT_ERR_DTYPE; NumPy promotes
    and multiplies integers."""


@rule
def out_exact_dtype(ctx):
    """clt.h "Elementwise operations": an _out or in-place form writes a result of exactly the
    output's dtype (f32 += f64 is CLT_ERR_DTYPE); NumPy casts (same_kind)."""


@rule
def expanded_views_writable(ctx):
    """docs/operations.md row "a write into a view of an expanded tensor": clt refuses to write
    an expanded tensor only where its elements repeat (clt.h clt_expand), as PyTorch: an empty
    one, one row of one and clt_copy(t, t) are written (t into itself: nothing to do). NumPy's
    broadcast_to arrays and every view of them are read-only."""


@rule
def partial_overlap_refused(ctx):
    """docs/operations.md row "a write whose operand shares some of its elements" (clt.h
    clt_copy, lib/dispatch.c overlaps): an in-place, _out or clt_copy write from an operand that
    shares elements with the destination other than at the same index (a -= a[0]) is
    CLT_ERR_INVALID_ARGUMENT, as PyTorch; NumPy computes as if the operand were copied first."""


@rule
def where_bool_condition(ctx):
    """docs/operations.md row "clt_where with a condition that is not bool" (clt.h clt_where):
    refused (CLT_ERR_DTYPE), as PyTorch; NumPy takes non-zero as true."""


@rule
def arange_no_bool(ctx):
    """docs/operations.md row "clt_arange of bool" (clt.h clt_arange): refused, as PyTorch;
    NumPy makes one (an empty range, or [False, True])."""


@rule
def full_integer_exact(ctx):
    """docs/operations.md row "clt_full, clt_fill_ of a value an integer dtype cannot hold"
    (clt.h clt_full): refused (u8 -2, i64 0.5, NaN), as PyTorch; NumPy converts (wraps,
    truncates)."""


@rule
def zero_d_tensors_promote(ctx):
    """docs/operations.md row "a 0-d tensor operand": a 0-d tensor promotes as any tensor does
    (i32 with a 0-d i64 gives i64, f32 with a 0-d f64 gives f64); PyTorch and NumPy 1.24 let a
    0-d tensor widen a tensor only to another category (integer to float)."""


@rule
def reduction_first_zero(ctx):
    """docs/operations.md row "clt_max, clt_min of -0.0 and +0.0": of equal zeros the first (in
    the reduced order) is the result, on every device; NumPy's may be either."""


@rule
def arange_refused(ctx):
    """docs/operations.md rows "clt_arange(0, 1, 0.25, CLT_I32)" and "clt_arange(-3, 4, 2,
    CLT_U8)": a range an integer dtype cannot hold is refused."""


@rule
def index_select_refusals(ctx):
    """docs/operations.md row "clt_index_select of a 0-d tensor", and clt.h: index values must
    lie in 0..size-1 (NumPy's take wraps -1)."""


@rule
def squeeze_keeps_other_sizes(ctx):
    """clt.h clt_squeeze (torch.squeeze): a dimension of size other than 1 is kept, where
    NumPy's squeeze raises."""


@rule
def zero_d_dims(ctx):
    """clt.h clt_transpose: a 0-d tensor accepts the dims 0 and -1 (as PyTorch); NumPy has no
    axis to swap."""


@rule
def sum_overflow_order(ctx):
    """docs/operations.md row "clt_sum or clt_mean whose partial sums overflow with both
    signs": which infinity comes out, or NaN, depends on the order of the additions (pairwise
    on the host, a tree on devices; NumPy's own order); allowed only where NumPy gives NaN and
    the reduced elements hold no NaN and no infinities of both signs."""


@rule
def blas_fma_overflow(ctx):
    """docs/operations.md row "clt_matmul whose products overflow with both signs": the host's
    matmul is the BLAS's (clt_matmul_path "blas"), whose kernels (OpenBLAS on a CPU with FMA)
    add each exact product to the running sum, a[i,l] * b[l,j] + acc rounded once, so the first
    sum to overflow stays: [2, 2] x [-3e38, 3e38] is -inf in f32 ([inf, 2] x [1, -3e38] is inf),
    where NumPy rounds each product first and gets -inf + inf = NaN. Which infinity a sum
    reaches first depends on the kernel's order (a longer k may be split over accumulators that
    meet as NaN), so: only where NumPy's element is NaN, no product of that element is NaN (no
    NaN operand, no 0 * inf), clt may give either infinity."""


# ---- values -----------------------------------------------------------------------------------

def to_bf16(x):
    """float32 array rounded to bf16 (nearest even), kept as float32."""
    shape = np.shape(x)
    x = np.array(x, dtype=np.float32, copy=True).reshape(-1)
    u = x.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16
    r = np.where(np.isnan(x), (u | 0x400000) & 0xFFFF0000, r)
    return r.astype(np.uint32).view(np.float32).reshape(shape)


def expanded(x):
    """clt__has_internal_overlap: whether x repeats memory (a stride 0 along a dimension of size
    > 1; an empty x repeats nothing, though NumPy gives it strides 0): clt refuses to write it."""
    return x.size > 0 and any(st == 0 and n > 1 for st, n in zip(x.strides, x.shape))


def same_view(x, y):
    """Whether x and y are one view of one memory (clt_copy of a tensor into itself does
    nothing, as torch's copy_)."""
    return (x.__array_interface__["data"][0] == y.__array_interface__["data"][0]
            and x.shape == y.shape and x.strides == y.strides and x.dtype == y.dtype)


def writable(x):
    """x itself, or where NumPy marks it read-only (a view of a broadcast_to array), the same
    view of the same memory made writable: clt writes a view of an expanded tensor whose
    elements do not repeat, and the write must reach every view sharing that memory."""
    if x.flags.writeable:
        return x
    o = x
    while True:  # to the array owning the memory (as_strided's views hold it in a DummyArray)
        if isinstance(o.base, np.ndarray):
            o = o.base
        elif isinstance(getattr(o.base, "base", None), np.ndarray):
            o = o.base.base
        else:
            break
    off = x.__array_interface__["data"][0] - o.__array_interface__["data"][0]
    return np.ndarray(x.shape, x.dtype, buffer=o, offset=off, strides=x.strides)


def clt_contiguous(x):
    """clt__strides_contiguous: C order ignoring dimensions of size 1; an empty x is."""
    if x.size == 0:
        return True
    want = x.itemsize
    for n, st in zip(reversed(x.shape), reversed(x.strides)):
        if n == 1:
            continue
        if st != want:
            return False
        want *= n
    return True


def clt_view_strides(x, dims):
    """lib/view.c view_strides (PyTorch's computeStride): x's elements as shape dims (no -1)
    without a copy, as NumPy byte strides, or None where clt_reshape copies (and clt_view refuses)."""
    dims = [int(n) for n in dims]
    out = [0] * len(dims)
    if clt_contiguous(x):
        st = 1
        for i in range(len(dims) - 1, -1, -1):
            out[i] = st * x.itemsize
            st *= max(dims[i], 1)
        return tuple(out)
    sh = x.shape
    es = [st // x.itemsize for st in x.strides]
    v = len(dims) - 1
    base, tn, vn = es[-1], 1, 1
    for d in range(x.ndim - 1, -1, -1):
        tn *= sh[d]
        if d == 0 or (sh[d - 1] != 1 and es[d - 1] != tn * base):
            while v >= 0 and (vn < tn or dims[v] == 1):
                out[v] = vn * base * x.itemsize
                vn *= dims[v]
                v -= 1
            if vn != tn:
                return None
            if d > 0:
                base = es[d - 1]
                tn = vn = 1
    return tuple(out) if v == -1 else None


def load(blob, d):
    dt = d["dtype"]
    raw = blob[d["offset"]:d["offset"] + d["nbytes"]]
    if dt == "bf16":
        a = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
    else:
        a = np.frombuffer(raw, NPT[dt])
    return a.reshape(d["shape"]).copy(), dt


def round_to(x, dt):
    """x (any numeric array) converted to clt dtype dt as clt does (saturating casts)."""
    x = np.asarray(x)
    if dt == "bf16":
        return to_bf16(x.astype(np.float32))
    if dt == "bool":
        return x != 0
    if dt in INTS and x.dtype.kind == "f":
        info = np.iinfo(NPT[dt])
        t = np.trunc(x.astype(np.float64))
        t = np.where(np.isnan(t), 0, np.clip(t, info.min, info.max))
        out = np.empty(x.shape, NPT[dt])
        big = t >= 2.0**63
        out[...] = np.where(big, 0, t).astype(NPT[dt])
        if dt == "i64":
            out[big] = info.max
        return out
    if dt == "f16" and x.dtype == np.float64:
        return x.astype(np.float32).astype(np.float16)  # through f32, as clt_cast
    return x.astype(NPT[dt])


def plain_cast(x, dt):
    """NumPy's own astype (bf16: through f32)."""
    x = np.asarray(x)
    if dt == "bf16":
        return to_bf16(x.astype(np.float32))
    return x.astype(NPT[dt])


def compare(got, gdt, want, wdt, exact, rel=0.0, absol=0.0):
    """None if got agrees with want, else why."""
    got, want = np.asarray(got), np.asarray(want)
    if gdt != wdt:
        return "dtype %s, NumPy %s" % (gdt, wdt)
    if got.shape != want.shape:
        return "shape %s, NumPy %s" % (got.shape, want.shape)
    if gdt not in FLOATS:
        bad = got.astype(np.int64) != want.astype(np.int64) if gdt != "u8" else got != want
        if gdt == "i64":
            bad = got.view(np.int64) != want.astype(np.int64)
    else:
        g = got.astype(np.float64)
        w = want.astype(np.float64)
        nan = np.isnan(g) & np.isnan(w)
        if exact:
            same = (g == w) & (np.signbit(g) == np.signbit(w))
        else:
            lim = {"f16": 65504.0, "bf16": 3.3895e38, "f32": 3.4028235e38, "f64": 1.79e308}[gdt]
            gc = np.where(np.isinf(g), np.copysign(lim, g), g)
            wc = np.where(np.isinf(w), np.copysign(lim, w), w)
            with np.errstate(all="ignore"):
                d = np.abs(gc - wc)
                same = (g == w) | (d <= 8 * (rel * np.maximum(np.abs(gc), np.abs(wc)) + absol)
                                   + 4 * TINY[gdt])
        bad = ~(same | nan)
    if not np.any(bad):
        return None
    i = int(np.flatnonzero(np.asarray(bad).reshape(-1))[0])
    gv, wv = got.reshape(-1)[i], want.reshape(-1)[i]
    return "%s element %d of %d: clt %r, NumPy %r%s" % (
        gdt, i, got.size, gv.item(), wv.item(), "" if exact or gdt not in FLOATS
        else " (within %.3g + %.3g |x|)" % (8 * absol, 8 * rel))


# ---- the op table -----------------------------------------------------------------------------

def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    out.append(cur.strip())
    return out


def read_ops(path):
    text = open(path).read().replace("\\\n", " ")
    ops = {}
    for m in re.finditer(r"\bX\((\w+), ([123]), (\w+), (\w+), (.*?)\"([^\"]*)\"\)", text):
        args = split_args(m.group(5))
        name = m.group(1)
        ops[name] = {"arity": int(m.group(2)), "rule": m.group(3), "form": m.group(4),
                     "na": [a == "CLT_NA" for a in args[:3]], "ulps": int(args[3])}
    return ops


# ---- the elementwise ops in NumPy ---------------------------------------------------------------

def recip(x):
    x = np.asarray(x)
    return np.asarray(np.reciprocal(x) if x.dtype.kind == "f" else 1 / x)


def sigmoid(a):
    e = np.asarray(np.exp(np.negative(a)))
    return recip(np.add(e, e.dtype.type(1), dtype=e.dtype))


def erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64)).astype(x.dtype)


NPF = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "pow": np.power, "maximum": np.maximum, "minimum": np.minimum, "atan2": np.arctan2,
    "eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
    "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and,
    "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "logical_not": np.logical_not, "neg": np.negative, "abs": np.absolute, "sign": np.sign,
    "relu": lambda a: np.maximum(a, np.zeros((), a.dtype if hasattr(a, "dtype") else None)),
    "floor": np.floor, "ceil": np.ceil, "round": np.rint, "trunc": np.trunc, "exp": np.exp,
    "expm1": np.expm1, "log": np.log, "log1p": np.log1p, "sqrt": np.sqrt,
    "rsqrt": lambda a: recip(np.sqrt(a)), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "atan": np.arctan, "tanh": np.tanh, "sigmoid": lambda a: sigmoid(a),
    "erf": lambda a: erf(np.asarray(a)) if np.asarray(a).dtype.kind == "f"
    else erf(np.asarray(a, np.float64)),
    "where": np.where, "clamp": np.clip,
}


def promote(a, b):
    """PyTorch's table (docs/operations.md)."""
    if a == b:
        return a
    if "bool" in (a, b):
        return b if a == "bool" else a
    fa, fb = a in FLOATS, b in FLOATS
    if fa and fb:
        if {a, b} == {"f16", "bf16"}:
            return "f32"
        return max(a, b, key=ORDER.index)
    if fa or fb:
        return a if fa else b
    return max(a, b, key=ORDER.index)


def scalar_dtype(tdt, x):
    """The dtype a scalar x takes next to a tensor of dtype tdt (clt.h: it does not widen; an
    integer is a number in [-9.2e18, 9.2e18] with no fraction, lib/dispatch.c scalar_tensor)."""
    integral = math.isfinite(x) and float(x).is_integer() and -9.2e18 <= x <= 9.2e18
    if tdt in FLOATS:
        return tdt
    if not integral:
        return "f32"
    if tdt == "bool":
        return "i64"
    return tdt


def ipow(a, b):
    """CLT_IPOW: power by squaring, wrapping; negative exponents give 0 except bases 1, -1."""
    a, b = np.broadcast_arrays(a, b)
    ut = {np.dtype(np.int32): np.uint32, np.dtype(np.int64): np.uint64,
          np.dtype(np.uint8): np.uint8}[a.dtype]
    base, e = a.astype(ut), b.astype(np.int64).copy()
    r = np.ones(a.shape, ut)
    neg = e < 0
    e[neg] = 0
    while np.any(e > 0):
        odd = (e & 1) == 1
        r = np.where(odd, r * base, r)
        base = base * base
        e >>= 1
    r = r.astype(a.dtype)
    sa = a.astype(np.int64)
    r = np.where(neg, np.where(sa == 1, 1, np.where(sa == -1, np.where(b % 2 == 0, 1, -1), 0)), r)
    return r.astype(a.dtype)


def fmax0(x, y, mx):
    """maximum/minimum with -0 below +0 and NaN propagating."""
    r = np.maximum(x, y) if mx else np.minimum(x, y)
    z = (x == 0) & (y == 0)
    if np.any(z):
        sx, sy = np.signbit(x), np.signbit(y)
        pick = (sx & sy) if mx else (sx | sy)
        r = np.where(z, np.where(pick, -0.0, 0.0).astype(r.dtype), r)
    return r


def int_exact(m, dt, v):
    """clt_full and clt_fill_ refuse a value an integer dtype cannot hold (rule
    full_integer_exact); a float dtype converts it (f16 through f32: rule cast_saturates)."""
    if dt in INTS:
        info = np.iinfo(NPT[dt])
        if not (math.isfinite(v) and float(v).is_integer() and info.min <= v <= info.max
                and v < 2.0**63):
            m.fire("full_integer_exact")
            raise Refused("value")
    elif dt == "f16":
        m.fire("cast_saturates")


def partial_overlap(m, dst, srcs):
    """lib/dispatch.c overlaps: refused where an operand shares an element of dst that is not
    at the same index of the (broadcast) result (rule partial_overlap_refused)."""
    if dst.size == 0:
        return
    for x in srcs:
        if np.ndim(x) > dst.ndim or x.size == 0 or not np.shares_memory(dst, x, max_work=None):
            continue
        b = np.broadcast_to(x, dst.shape)
        same = b.__array_interface__["data"][0] == dst.__array_interface__["data"][0] and all(
            n <= 1 or sb == sd for n, sb, sd in zip(dst.shape, b.strides, dst.strides))
        if not same:
            m.fire("partial_overlap_refused")
            raise Refused("partial overlap")


def fma_overflow(m, a, b, r, got):
    """Rule blas_fma_overflow: where NumPy's matmul r is NaN although no product of that dot
    product is NaN (no NaN operand, no 0 * inf), every product is an infinity or a finite
    number that may overflow: the BLAS's FMA kernels add exact products, so which infinity the
    sum reaches first, or whether both meet, depends on the kernel's order. clt's value there
    (got, its result in the accumulation dtype) may be either infinity or NaN."""
    r = np.array(r, copy=True)
    if got is None or got.shape != r.shape or np.all(np.isfinite(r)):
        return r
    A, B = np.broadcast_arrays(a[..., :, :, None], b[..., None, :, :])  # (..., m, k, n)
    g = np.asarray(got)
    # NumPy NaN where clt has an infinity, or NumPy an infinity where clt has NaN or the other
    # one (seed 9298, f64): both only where products of both signs can overflow
    differ = ~np.isfinite(r) & ~np.isfinite(g) & ~(r == g)
    for idx in zip(*np.nonzero(differ)):
        row = A[idx[:-2] + (idx[-2], slice(None), idx[-1])]
        col = B[idx[:-2] + (idx[-2], slice(None), idx[-1])]
        if np.any(np.isnan(row)) or np.any(np.isnan(col)) or \
                np.any((np.isinf(row) & (col == 0)) | ((row == 0) & np.isinf(col))):
            continue
        with np.errstate(over="ignore", invalid="ignore"):
            p = row.astype(np.float64) * col.astype(np.float64)
        big = np.finfo(row.dtype).max / max(len(p), 1)
        if not (np.any(p >= big) and np.any(p <= -big)):
            continue
        m.fire("blas_fma_overflow")
        r[idx] = got[idx]
    return r


def overflow_order(m, x, r, axis, kd, got):
    """Rule sum_overflow_order: where NumPy's sum (or mean) r is NaN although the reduced
    elements hold no NaN and no infinities of both signs, finite partial sums overflowed with
    both signs: which infinity a sum reaches first, or whether both meet as NaN, depends on the
    order of the additions (clt's is pairwise on the host, a tree on devices; NumPy's its own).
    clt's value there may be either infinity or NaN."""
    r = np.array(r, copy=True)
    if got is None or np.shape(got) != r.shape or not np.any(np.isnan(r)):
        return r
    xs = np.asarray(x, dtype=np.float64)
    bad = np.isnan(xs)
    pos, neg = np.isposinf(xs), np.isneginf(xs)
    bad_r = np.any(bad, axis=axis, keepdims=kd) | (np.any(pos, axis=axis, keepdims=kd) &
                                                   np.any(neg, axis=axis, keepdims=kd))
    bad_r = np.broadcast_to(bad_r, r.shape)
    g = np.asarray(got)
    ok = np.isnan(r) & ~bad_r & (np.isinf(g) | np.isnan(g))
    if np.any(ok):
        m.fire("sum_overflow_order")
        r[ok] = g[ok]
    return r


def first_zero(m, x, r, axis, kd):
    """clt's max/min of zeros of both signs: the first zero in the reduced order (rule
    reduction_first_zero); r is NumPy's result."""
    r = np.asarray(r)
    if x.dtype.kind != "f" or x.size == 0 or not np.any(r == 0):
        return r
    z = x == 0
    if axis is None:
        first = x.reshape(-1)[np.argmax(z.reshape(-1))]
        want = np.full(r.shape, first, r.dtype)
    else:
        idx = np.expand_dims(np.argmax(z, axis=axis), axis)
        want = np.take_along_axis(x, idx, axis=axis)
        want = want if kd else np.squeeze(want, axis=axis)
    want = np.where(r == 0, want, r).astype(r.dtype)
    if np.any(np.signbit(want) != np.signbit(r)):
        m.fire("reduction_first_zero")
    return want


class Model:
    def __init__(self):
        self.fired = set()

    def fire(self, name):
        assert name in RULES
        self.fired.add(name)

    def ew(self, opname, op, form, ins):
        """clt's result (dtype, array) of an elementwise op, or Refused; ins: (array, dtype)
        pairs or floats (scalars)."""
        tds = [d for v in ins if isinstance(v, tuple) for d in [v[1]]]
        if any(d == "bf16" for d in tds):
            self.fire("bf16_emulated")
        cond = None
        if opname == "where":
            cond, ins = ins[0], ins[1:]
            if cond[1] != "bool":
                self.fire("where_bool_condition")
                raise Refused("cond not bool")
        p = None
        for v in ins:
            if isinstance(v, tuple):
                p = v[1] if p is None else promote(p, v[1])
        npres = [NPT[d] for d in tds if d != "bf16"]
        if len(set(npres)) > 1 and FROM_NP.get(np.result_type(*npres)) != p:
            self.fire("promotion_table")
        arrs = [v[0] for v in ins if isinstance(v, tuple) and v[1] != "bf16"]
        if len(arrs) > 1 and any(np.ndim(x) == 0 for x in arrs) and \
                np.result_type(*arrs) != np.result_type(*[x.dtype for x in arrs]):
            self.fire("zero_d_tensors_promote")
        t0 = p  # each scalar is judged against the tensor's dtype alone (scalar_no_widen)
        for v in ins:
            if not isinstance(v, tuple):
                sd = scalar_dtype(t0, v)
                self.fire("scalar_no_widen")
                if sd in INTS and t0 in INTS:
                    info = np.iinfo(NPT[t0])
                    if not (info.min <= v <= info.max):
                        raise Refused("scalar out of range")
                p = promote(p, sd) if sd != p else p
        kind = 0 if p in FLOATS else 1 if p in INTS else 2
        rule_ = op["rule"]
        if rule_ == "FLOAT" and kind != 0:
            self.fire("integer_true_division_f32")
            p, kind = "f32", 0
        if op["na"][kind]:
            if kind == 2:
                self.fire("bool_as_pytorch")
            raise Refused("dtype")
        res = "bool" if rule_ == "BOOL" else p
        narrow = p in ("f16", "bf16")
        if narrow:
            self.fire("narrow_f32_once")
        vals = []
        for v in ins:
            if isinstance(v, tuple):
                x = round_to(v[0], p) if v[1] != p else v[0]
            else:
                x = np.array(v).astype(np.float64)
                sd = scalar_dtype(t0, v)
                if sd in INTS:  # the scalar is first a value of its dtype (-0.0 as i64 is 0)
                    x = round_to(x, sd)
                x = round_to(x, p) if p != "f64" else x
            if narrow:
                x = np.asarray(x).astype(np.float32)
            vals.append(np.asarray(x))
        f = NPF[opname]
        if opname == "pow" and kind == 1:
            if np.any(vals[1] < 0):
                self.fire("int_pow_negative")
            r = ipow(vals[0], vals[1])
        elif opname in ("maximum", "minimum") and kind == 0:
            if np.any(vals[0] == 0) and np.any(vals[1] == 0):
                self.fire("signed_zero_order")
            r = fmax0(vals[0], vals[1], opname == "maximum")
        elif opname == "clamp" and kind == 0:
            self.fire("signed_zero_order")
            lo, hi = vals[1], vals[2]
            r = fmax0(fmax0(vals[0], lo, True), hi, False)
            anynan = np.isnan(vals[0]) | np.isnan(lo) | np.isnan(hi)
            r = np.where(anynan, np.nan, r).astype(r.dtype)
        elif opname == "clamp":
            r = np.minimum(np.maximum(vals[0], vals[1]), vals[2])
        elif opname in ("floor", "ceil", "round", "trunc") and kind == 1:
            self.fire("rounding_keeps_integers")
            r = vals[0]
        elif opname == "sign" and kind == 2:
            self.fire("bool_as_pytorch")
            r = vals[0]
        elif opname == "where":
            r = np.where(cond[0], vals[0], vals[1])
        elif opname == "relu":  # maximum(a, 0): -0 gives +0, NaN stays (operations.md)
            v = vals[0]
            keep = (v > 0) | np.isnan(v) if v.dtype.kind == "f" else v >= 0
            r = np.where(keep, v, np.zeros((), v.dtype))
        elif kind == 2 and opname in ("add", "mul", "maximum", "minimum"):
            r = (np.logical_or if opname in ("add", "maximum") else np.logical_and)(*vals)
        else:
            r = f(*vals)
        if res == "bool":
            return "bool", np.asarray(r, bool)
        if narrow:
            return res, round_to(np.asarray(r, np.float32), res)
        return res, np.asarray(r).astype(NPT[res])


def plain_ew(opname, ins):
    """NumPy's own answer: (dtype, array) or raises."""
    vals = []
    for v in ins:
        vals.append(v[0] if isinstance(v, tuple) else float(v))
    f = NPF[opname]
    if opname in ("maximum", "minimum", "add", "sub", "mul", "pow") and all(
            isinstance(v, tuple) and v[1] == "bool" for v in ins) and opname in ("sub", "pow"):
        pass
    r = np.asarray(f(*vals))
    dt = FROM_NP.get(r.dtype)
    if dt is None:
        raise TypeError("NumPy dtype %s" % r.dtype)
    if any(isinstance(v, tuple) and v[1] == "bf16" for v in ins) and dt in ("f32",):
        pass
    return dt, r


# ---- replaying a program ------------------------------------------------------------------------

GRAD_KINDS = ("requires_grad", "grad_mode", "backward", "grad")

VIEWS = ("view", "reshape", "narrow", "select", "slice", "transpose", "permute", "expand",
         "unsqueeze", "squeeze", "contiguous", "diagonal")


def diagonal_view(x, off, d1, d2):
    """clt_diagonal (torch.diagonal) as a writable view of x: the elements (i, i + off) of axes
    d1 and d2, as a last axis after the others (NumPy's own diagonal is read-only)."""
    nd = x.ndim
    if nd < 2 or not (-nd <= d1 < nd and -nd <= d2 < nd):
        raise IndexError("diagonal dims")
    d1, d2 = d1 % nd, d2 % nd
    if d1 == d2:
        raise ValueError("diagonal: one dimension twice")
    n1, n2 = x.shape[d1], x.shape[d2]
    ln = max(0, min(n1, n2 - off)) if off >= 0 else max(0, min(n1 + off, n2))
    other = [i for i in range(nd) if i not in (d1, d2)]
    shape = [x.shape[i] for i in other] + [ln]
    strides = [x.strides[i] for i in other] + [x.strides[d1] + x.strides[d2]]
    sub = x
    if ln > 0:
        idx = [slice(None)] * nd
        idx[d1] = slice(max(0, -off), None)
        idx[d2] = slice(max(0, off), None)
        sub = x[tuple(idx)]
    return np.lib.stride_tricks.as_strided(sub, shape, strides)


class Lane:
    def __init__(self, ops, verbose):
        self.ops, self.verbose = ops, verbose
        self.excused = {n: 0 for n in RULES}
        self.comparisons = 0
        self.failures = []

    def judge(self, seed, s, got, plain, model, exact=True, rel=0.0, absol=0.0):
        """got: (dtype, array) or None (clt refused); plain, model: (dtype, array), an exception,
        or None; model's rules in model_rules. Returns True when it agrees or is excused."""
        self.comparisons += 1
        fired, mres = model

        def agree(want):
            if isinstance(want, BaseException) or want is None:
                return got is None, "NumPy refuses (%s)" % want if got is not None else ""
            if got is None:
                return False, "clt refuses (%s), NumPy gives %s" % (
                    s.get("error", s["status"]), want[0])
            why = compare(got[1], got[0], want[1], want[0], exact, rel, absol)
            return why is None, why
        ok, why = agree(plain)
        if ok:
            return True
        mok, mwhy = agree(mres)
        if mok and fired:
            for n in fired:
                self.excused[n] += 1
            return True
        desc = "%s%s" % (s["kind"], " " + s["op"] if "op" in s else "")
        if "form" in s:
            desc += " (%s)" % s["form"]
        self.failures.append("seed %d step %d %s: %s; model [%s]: %s" % (
            seed, s["i"], desc, why, ", ".join(sorted(fired)) or "no rule", mwhy or "agrees"))
        return False

    def run(self, path):
        prog = json.load(open(path))
        blob = open(path[:-5] + ".bin", "rb").read()
        seed = prog["seed"]
        slots = [None] * 8
        # Slots that hold a leaf's .grad (or a view of one): a later backward adds into that
        # tensor in place (as PyTorch's accumulation does), which NumPy does not see, so after a
        # backward they are stale, and so are the results computed from them: taken as given.
        grads, stale = set(), set()
        ok = True
        for s in prog["steps"]:
            if s["status"] == "SKIP":
                continue
            got = load(blob, s["result"]) if "result" in s else None
            clt_ok = s["status"] == "OK"
            if s["kind"] in GRAD_KINDS or (not clt_ok and "grad mode" in s.get("error", "")):
                # autograd's steps, and the writes its guards refuse: NumPy has no model of them;
                # a gradient's values are taken as given (the tester compares them across runs)
                if s["kind"] == "grad" and clt_ok and got is not None:
                    slots[s["dst"]] = got
                    grads.add(s["dst"])
                    stale.discard(s["dst"])
                if s["kind"] == "backward" and clt_ok:
                    stale |= grads
                continue
            srcs = [i for i in s.get("src", []) if i >= 0]
            writes = s["kind"] in ("copy", "fill") or (s["kind"] == "ew" and s.get("form") in (
                "out", "inplace"))
            target = s["src"][0] if s["kind"] == "ew" and s.get("form") == "inplace" else s["dst"]
            if writes and target in grads:
                # a write into a gradient: every slot that holds one may be the same tensor (two
                # reads of one leaf's .grad), which NumPy holds as separate arrays
                stale |= grads
            if any(i in stale for i in srcs) or (writes and target in stale):
                # computed from (or written into) a gradient NumPy cannot know: as given
                k = s["dst"] if s["kind"] != "read" else -1
                if s["kind"] == "ew" and s.get("form") == "inplace":
                    k = s["src"][0]
                if s["kind"] == "release":
                    slots[s["dst"]] = None
                    grads.discard(s["dst"])
                    stale.discard(s["dst"])
                elif k >= 0 and clt_ok:
                    if got is not None:
                        slots[k] = got
                    stale.add(k)
                    if s["kind"] in VIEWS and any(i in grads for i in srcs):
                        grads.add(k)
                continue
            if not clt_ok:
                pass  # a failed step leaves its slot as it was
            elif s["kind"] in VIEWS and any(i in grads for i in srcs) and s["dst"] >= 0:
                grads.add(s["dst"])  # a view of a gradient: the next backward writes it too
            elif s["kind"] not in ("read", "print", "eval", "sync") and s.get("dst", -1) >= 0 and \
                    not (s["kind"] == "ew" and s.get("form") in ("out", "inplace")) and \
                    s["kind"] not in ("copy", "fill"):
                grads.discard(s["dst"])
                stale.discard(s["dst"])
            if s["kind"] == "release":
                grads.discard(s["dst"])
                stale.discard(s["dst"])
            try:
                res = (got[1], got[0]) if clt_ok and got is not None else None
                ok = self.step(seed, s, slots, res, blob) and ok
            except Exception as e:  # a bug of the checker is a failure too
                self.failures.append("seed %d step %d %s: checker error %r" % (
                    seed, s["i"], s["kind"], e))
                ok = False
            k = s["dst"] if s["kind"] not in ("read",) else -1
            if s["kind"] == "ew" and s["form"] == "inplace":
                k = s["src"][0]
            if s["kind"] == "release":
                slots[s["dst"]] = None
            elif clt_ok and got is not None and k >= 0:
                if s["kind"] in ("copy", "fill") or (s["kind"] == "ew" and s["form"] in (
                        "out", "inplace")):
                    if slots[k] is not None:
                        # through NumPy's view, so every view sharing the memory sees it
                        writable(slots[k][0])[...] = got[0]
                elif s["kind"] in VIEWS and self.view_result is not None:
                    slots[k] = self.view_result  # NumPy's view shares memory as clt's does
                else:
                    slots[k] = got
        return ok

    def step(self, seed, s, slots, got, blob):
        kind = s["kind"]
        src = [slots[i] if i >= 0 else None for i in s["src"]]
        sc = s["s"]
        dt = s["dtype"]
        shape = tuple(s["shape"])
        if kind in ("print", "eval", "sync", "release"):
            return True
        if kind == "from_host":
            want = load(blob, s["input"])[::-1]
            return self.judge(seed, s, got, want, (set(), want))
        if kind == "read":
            return True  # the step that wrote the slot compared it
        m = Model()
        plain = mres = None
        exact, rel, absol = True, 0.0, 0.0
        try:
            plain = self.plain(kind, s, src, slots, sc, dt, shape, blob)
        except Exception as e:
            plain = e
        try:
            # read only by blas_fma_overflow and sum_overflow_order, where clt may pick its value
            self.got = got[1] if got is not None else None
            mres = self.model(m, kind, s, src, slots, sc, dt, shape, blob)
        except Exception as e:
            mres = e
        if kind == "ew":
            op = self.ops[s["op"]]
            if op["ulps"] and got is not None and got[0] in FLOATS:
                exact = False
                comp = "f64" if got[0] == "f64" else "f32"
                rel = (op["ulps"] + 1) * EPS[comp] + (EPS[got[0]] if got[0] != comp else 0)
                if s["op"] == "pow":
                    rel *= 64  # an error in a's last place grows by b
        if kind == "reduce" and got is not None and got[0] in FLOATS and s["op"] in ("sum", "mean"):
            exact = False
            a = src[0][0].astype(np.float64)
            n = max(a.size, 1)
            fin = np.abs(a[np.isfinite(a)])
            mx = float(fin.max()) if fin.size else 0.0
            acc = "f64" if got[0] == "f64" else "f32"
            absol = (math.log2(n) + 2) * EPS[acc] * n * mx
            rel = EPS[got[0]] + EPS[acc]
        if kind == "matmul" and got is not None and got[0] in FLOATS:
            exact = False
            a, b = src[0][0].astype(np.float64), src[1][0].astype(np.float64)
            k = a.shape[-1]
            fa, fb = np.abs(a[np.isfinite(a)]), np.abs(b[np.isfinite(b)])
            ma = float(fa.max()) if fa.size else 0.0
            mb = float(fb.max()) if fb.size else 0.0
            acc = "f64" if got[0] == "f64" else "f32"
            absol = (math.log2(max(k, 1)) + 2) * EPS[acc] * k * ma * mb
            rel = 2 * EPS[got[0]]
        self.view_result = None
        if kind in VIEWS and isinstance(mres, tuple):
            self.view_result = (mres[1], mres[0])
        if isinstance(mres, Refused):
            mres = None
        return self.judge(seed, s, got, plain, (m.fired, mres), exact, rel, absol)

    # NumPy's own answer to each kind of step.
    def plain(self, kind, s, src, slots, sc, dt, shape, blob):
        a = src[0]
        if kind == "ew":
            ins = self.operands(s, src, sc)
            if s["form"] == "out":
                dst = slots[s["dst"]]
                if not dst[0].flags.writeable:
                    raise ValueError("read-only")
                out = dst[0].copy()
                NPF[s["op"]](*[v[0] if isinstance(v, tuple) else v for v in ins], out=out)
                return dst[1], out
            if s["form"] == "inplace":
                if not a[0].flags.writeable:
                    raise ValueError("read-only")
                out = a[0].copy()
                NPF[s["op"]](a[0], ins[1][0], out=out)
                return a[1], out
            return plain_ew(s["op"], ins)
        if kind == "full":
            v = [0.0, 1.0, sc[0]][s["sub"]]
            if dt == "bf16":
                return dt, to_bf16(np.full(shape, v, np.float32))
            return dt, np.full(shape, v, NPT[dt])
        if kind == "arange":
            r = np.arange(sc[0], sc[1], sc[2], dtype=NPT[dt])
            return dt, r
        if kind == "cast":
            return dt, plain_cast(a[0], dt)
        if kind == "fill":
            d = slots[s["dst"]]
            if not d[0].flags.writeable:
                raise ValueError("read-only")
            out = d[0].copy()
            out[...] = sc[0]
            return d[1], (to_bf16(out) if d[1] == "bf16" else out)
        if kind == "copy":
            d = slots[s["dst"]]
            if not d[0].flags.writeable:
                raise ValueError("read-only")
            out = d[0].copy()
            out[...] = np.broadcast_to(a[0], out.shape).astype(out.dtype) if d[1] != "bf16" \
                else to_bf16(np.broadcast_to(a[0], out.shape).astype(np.float32))
            return d[1], out
        return self.shared(kind, s, src, sc, dt, shape, blob, plain=True)

    def operands(self, s, src, sc):
        ar = self.ops[s["op"]]["arity"]
        if s["form"] == "scalar":
            return [src[0]] + list(sc[:ar - 1])
        return src[:ar]

    # clt's documented answer, over NumPy, with the rules it used.
    def model(self, m, kind, s, src, slots, sc, dt, shape, blob):
        a = src[0]
        if kind == "ew":
            op = self.ops[s["op"]]
            ins = self.operands(s, src, sc)
            if s["form"] in ("out", "inplace"):
                d = slots[s["dst"]] if s["form"] == "out" else a
                rdt, r = m.ew(s["op"], op, s["form"], ins)
                if rdt != d[1] or np.broadcast_shapes(r.shape, d[0].shape) != d[0].shape \
                        or (s["form"] == "out" and r.shape != d[0].shape):
                    m.fire("out_exact_dtype")
                    raise Refused("out dtype")
                if expanded(d[0]):
                    raise Refused("expanded")
                if not d[0].flags.writeable:
                    m.fire("expanded_views_writable")
                partial_overlap(m, d[0], [v[0] for v in ins if isinstance(v, tuple)])
                m.fire("out_exact_dtype")
                return rdt, np.broadcast_to(r, d[0].shape).copy()
            return m.ew(s["op"], op, s["form"], ins)
        if kind == "full":
            v = [0.0, 1.0, sc[0]][s["sub"]]
            int_exact(m, dt, v)
            return dt, round_to(np.full(shape, v, np.float64), dt)
        if kind == "arange":
            if dt == "bool":
                m.fire("arange_no_bool")
                raise Refused("arange bool")
            m.fire("arange_refused")
            r = np.arange(sc[0], sc[1], sc[2], dtype=np.float64)
            if dt in INTS or dt == "bool":
                if np.any(r != np.trunc(r)) or (r.size and (r.min() < np.iinfo(NPT[dt]).min
                                                            if dt != "bool" else True)):
                    raise Refused("arange")
            return dt, round_to(r, dt)
        if kind == "cast":
            if a[1] in FLOATS and dt in INTS:
                m.fire("cast_saturates")
            if a[1] == "f64" and dt == "f16":
                m.fire("cast_saturates")
            return dt, round_to(a[0], dt)
        if kind == "fill":
            d = slots[s["dst"]]
            if expanded(d[0]):
                raise Refused("expanded")
            if not d[0].flags.writeable:
                m.fire("expanded_views_writable")
            int_exact(m, d[1], sc[0])
            return d[1], round_to(np.full(d[0].shape, sc[0], np.float64), d[1])
        if kind == "copy":
            d = slots[s["dst"]]
            if same_view(d[0], a[0]):
                if not d[0].flags.writeable:
                    m.fire("expanded_views_writable")
                return d[1], d[0].copy()  # a tensor into itself: nothing to do
            if expanded(d[0]):
                raise Refused("expanded")
            if not d[0].flags.writeable:
                m.fire("expanded_views_writable")
            partial_overlap(m, d[0], [a[0]])
            m.fire("cast_saturates")
            return d[1], round_to(np.broadcast_to(a[0], d[0].shape), d[1])
        return self.shared(kind, s, src, sc, dt, shape, blob, plain=False, m=m)

    def shared(self, kind, s, src, sc, dt, shape, blob, plain, m=None):
        """Steps whose NumPy spelling and clt model differ only by the rules named."""
        a = src[0]
        fire = (lambda n: None) if plain else m.fire
        x = a[0] if a else None
        nd = x.ndim if x is not None else 0
        d = s["dim"]
        if kind == "clone":
            return a[1], x.copy()
        if kind == "contiguous":
            if plain:
                return a[1], x if x.flags.c_contiguous else x.copy()
            return a[1], x if clt_contiguous(x) else x.copy()  # the view clt's result shares
        if kind in ("view", "reshape"):
            if kind == "reshape":
                r = np.reshape(x, shape)
            else:
                r = x.view()
                r.shape = shape
            if plain:
                return a[1], r
            st = clt_view_strides(x, r.shape)  # whether clt's result is a view, as NumPy's
            if st is None:
                if kind == "view":
                    raise Refused("view needs a copy")
                return a[1], x.copy().reshape(r.shape)
            return a[1], np.lib.stride_tricks.as_strided(x, r.shape, st)
        if kind == "narrow":
            size = x.shape[d]
            st = s["start"] + (size if s["start"] < 0 else 0)
            if not (0 <= st <= size and 0 <= s["stop"] and st + s["stop"] <= size):
                raise IndexError("narrow")
            idx = [slice(None)] * nd
            idx[d] = slice(st, st + s["stop"])
            return a[1], x[tuple(idx)]
        if kind == "select":
            idx = [slice(None)] * nd
            if d < -nd or d >= nd:
                raise IndexError("dim")
            idx[d] = s["start"]
            return a[1], x[tuple(idx) + (Ellipsis,)]
        if kind == "slice":
            if d < -nd or d >= nd:
                raise IndexError("dim")
            idx = [slice(None)] * nd
            idx[d] = slice(s["start"], None if s["slice_end"] else s["stop"], s["step"])
            return a[1], x[tuple(idx)]
        if kind == "transpose":
            if nd == 0 and not plain and s["dim"] in (0, -1) and s["dim2"] in (0, -1):
                fire("zero_d_dims")
                return a[1], x
            return a[1], np.swapaxes(x, s["dim"], s["dim2"])
        if kind == "permute":
            return a[1], np.transpose(x, [int(p) for p in shape])
        if kind == "expand":
            k = len(shape) - nd
            if k < 0:
                raise ValueError("expand")
            full = [x.shape[i - k] if shape[i] == -1 and i >= k else shape[i]
                    for i in range(len(shape))]
            return a[1], np.broadcast_to(x, full)
        if kind == "unsqueeze":
            return a[1], np.expand_dims(x, d)
        if kind == "squeeze":
            if nd == 0:
                if not plain and d in (0, -1):
                    fire("zero_d_dims")
                    return a[1], x
            if not plain and -nd <= d < nd and x.shape[d] != 1:
                fire("squeeze_keeps_other_sizes")
                return a[1], x
            return a[1], np.squeeze(x, axis=d)
        if kind == "diagonal":
            return a[1], diagonal_view(x, s["start"], s["dim"], s["dim2"])
        if kind == "tril":
            if nd < 2:
                raise ValueError("tril of fewer than 2 dimensions")
            return a[1], (np.triu if s["sub"] else np.tril)(x, s["start"])
        if kind == "reduce":
            op = s["op"]
            axis = None if s["whole"] else d
            kd = bool(s["keepdim"]) and not s["whole"]
            if nd == 0 and not s["whole"] and d not in (0, -1):
                raise IndexError("dim")
            if nd == 0 and not s["whole"]:
                axis = None
            xx = x.astype(np.float32) if a[1] in ("f16", "bf16") and not plain else x
            if op == "sum":
                if not plain and a[1] in INTS + ("bool",):
                    if a[1] == "u8":
                        fire("sum_integers_to_i64")
                    return "i64", np.sum(x.astype(np.int64), axis=axis, keepdims=kd)
                r = np.sum(xx, axis=axis, keepdims=kd)
                if not plain:
                    r = overflow_order(m, xx, r, axis, kd, self.got)
            elif op == "mean":
                if not plain and a[1] not in FLOATS:
                    fire("mean_floats_only")
                    raise Refused("mean")
                r = np.mean(xx, axis=axis, keepdims=kd)
                if not plain:
                    r = overflow_order(m, xx, r, axis, kd, self.got)
            elif op in ("max", "min"):
                r = (np.max if op == "max" else np.min)(xx, axis=axis, keepdims=kd)
                if not plain:
                    r = first_zero(m, xx, r, axis, kd)
            else:
                r = np.argmax(x, axis=axis, keepdims=kd)
            r = np.asarray(r)
            if plain:
                if a[1] == "bf16" and op != "argmax":
                    return "bf16", to_bf16(r.astype(np.float32))
                return FROM_NP[r.dtype], r
            if a[1] in ("f16", "bf16") and op != "argmax":
                fire("narrow_f32_once")
                return a[1], round_to(r.astype(np.float32), a[1])
            return FROM_NP[r.dtype], r
        if kind == "matmul":
            b = src[1]
            if not plain:
                if a[1] != b[1] or a[1] not in FLOATS:
                    fire("matmul_one_float_dtype")
                    raise Refused("matmul dtype")
                if x.ndim == 0 or b[0].ndim == 0:
                    raise Refused("matmul ndim")
                acc = np.float64 if a[1] == "f64" else np.float32
                if a[1] in ("f16", "bf16"):
                    fire("narrow_f32_once")
                # torch.matmul's (and NumPy's) 1-D operands: a row on the left, a column on the
                # right, their dimension dropped from the result (a ValueError below where the
                # shapes do not fit is clt's CLT_ERR_SHAPE_MISMATCH)
                xa = x if x.ndim > 1 else x[None, :]
                xb = b[0] if b[0].ndim > 1 else b[0][:, None]
                r = np.matmul(xa.astype(acc), xb.astype(acc))
                got = self.got
                if got is not None and np.size(got) == r.size:
                    got = np.reshape(got, r.shape)
                r = fma_overflow(m, xa.astype(acc), xb.astype(acc), r, got)
                if b[0].ndim == 1:
                    r = r[..., 0]
                if x.ndim == 1:
                    r = r[..., 0, :] if b[0].ndim > 1 else r[..., 0]
                return a[1], round_to(r, a[1])
            r = np.matmul(x, b[0])
            if a[1] == "bf16" or b[1] == "bf16":
                return "bf16", to_bf16(r.astype(np.float32))
            return FROM_NP[r.dtype], r
        if kind in ("cat", "stack"):
            ins = src[:s["n"]]
            rdt = ins[0][1]
            for v in ins[1:]:
                rdt = promote(rdt, v[1])
            if plain:
                r = (np.concatenate if kind == "cat" else np.stack)([v[0] for v in ins], axis=d)
                if rdt == "bf16":
                    return "bf16", to_bf16(r.astype(np.float32))
                return FROM_NP[r.dtype], r
            if len(set(v[1] for v in ins)) > 1:
                fire("promotion_table")
            if kind == "cat" and any(v[0].ndim == 0 for v in ins):
                raise Refused("cat 0-d")
            vals = [round_to(v[0], rdt) if v[1] != rdt else v[0] for v in ins]
            return rdt, (np.concatenate if kind == "cat" else np.stack)(vals, axis=d)
        if kind == "index_select":
            if "index" in s:
                idx = load(blob, s["index"])
            else:
                idx = src[1]
            if idx[1] not in ("i32", "i64"):
                raise TypeError("index dtype")
            if not plain:
                fire("index_select_refusals")
                if nd == 0:
                    raise Refused("0-d")
                if idx[0].ndim > 1:
                    raise Refused("index ndim")
                size = x.shape[d]
                if np.any(idx[0] < 0) or np.any(idx[0] >= size):
                    raise Refused("index range")
            return a[1], np.take(x, idx[0], axis=d)
        raise NotImplementedError(kind)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    verbose = "--verbose" in sys.argv
    here = os.path.dirname(os.path.abspath(__file__))
    opsp = os.path.join(here, "..", "..", "include", "clt_ops.h")
    for i, a in enumerate(sys.argv):
        if a == "--ops" and i + 1 < len(sys.argv):
            opsp = sys.argv[i + 1]
            args.remove(opsp)
    if len(args) != 1:
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    lane = Lane(read_ops(opsp), verbose)
    paths = sorted(glob.glob(os.path.join(args[0], "seed-*.json")),
                   key=lambda p: int(re.findall(r"seed-(\d+)", p)[-1]))
    passed = failed = 0
    for p in paths:
        before = len(lane.failures)
        lane.run(p)
        if len(lane.failures) > before:
            failed += 1
            for f in lane.failures[before:before + (len(lane.failures) if verbose else 3)]:
                print("numpy lane: FAILED " + f)
        else:
            passed += 1
    print("numpy lane: comparisons excused by each documented difference "
          "(docs/operations.md):")
    for n in RULES:
        print("  %-28s %d" % (n, lane.excused[n]))
    print("numpy lane: %d programs, %d comparisons, %d failures" % (
        len(paths), lane.comparisons, len(lane.failures)))
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed or not paths else 0


if __name__ == "__main__":
    sys.exit(main())
