/* SPDX-License-Identifier: MIT */
/**
 * @file clt_ops.h
 * @brief The elementwise operations, as one table.
 *
 * Every elementwise operation of clt is one row of CLT_ELEMENTWISE_OPS below, and everything
 * about it follows from that row: its public functions (declared by clt.h from this table), the
 * dtypes it takes and gives, its OpenCL kernel (the expression becomes a #define of
 * kernels/elementwise.cl), its host loop (the same expression compiled as C11 with <tgmath.h>),
 * the kernels clt_kernel_cache_warm builds, the names in error messages, and the tolerance the
 * backend-ops test (tests/check_backend_ops.c) allows against a float64 reference.
 * Adding an operation is adding a row, plus its own test case with independent values and its
 * derivative (GRAD_<name> in lib/autograd.c, without which the library does not compile).
 *
 * Columns of X(name, arity, rule, form, f, i, b, ulps, doc):
 * - name: the functions are clt_<name>, ... (see form).
 * - arity: 1, 2 or 3 operands.
 * - rule, the result's dtype, from the promoted dtype P of the operands (see clt.h,
 *   "Operations"; for COND, of the second and third):
 *   - PROMOTE: P.
 *   - FLOAT: P if it is a float dtype, else f32 (integer and bool operands compute in f32).
 *   - BOOL: bool, computed in P.
 * - form, the functions generated besides the basic ones:
 *   - arity 1: clt_<name>(t, &out).
 *   - arity 2: clt_<name>(a, b, &out), clt_<name>_out(a, b, out), clt_<name>_scalar(a, x, &out),
 *     and with form INPLACE or WRAP_INPLACE also clt_<name>_(a, b) (a = a op b).
 *   - arity 3: clt_<name>(a, b, c, &out) and clt_<name>_scalar(a, x, y, &out); with form COND,
 *     the first operand is a bool condition that is not promoted with the other two, and there
 *     is no _scalar form.
 *   - WRAP, WRAP_INPLACE: integers compute in their unsigned twin, so that overflow wraps
 *     around (two's complement) instead of being undefined.
 * - f, i, b: the expression computing the result from the operands a, b and c when P is a float
 *   dtype (f32, f64), an integer dtype (i32, i64, u8), or bool; CLT_NA where the operation is not
 *   defined for that kind (CLT_ERR_DTYPE names the cast to make). An expression must mean the
 *   same in OpenCL C 1.2 and in C11 with <tgmath.h>: the operands have the compute type TC (the
 *   C type of P, or its unsigned twin under WRAP), math functions are the type-generic ones both
 *   languages share (exp, rint, isnan, ...), and integer helpers are CLT_IPOW(a, b) (power
 *   by squaring; negative exponents give 0 unless the base is 1 or -1) and CLT_IABS(a); float
 *   CLT_FMAX(a, b) and CLT_FMIN(a, b) order -0 below +0 (fmax and fmin may return either).
 * - ulps: the error allowed, in units in the last place of the result's dtype, against the
 *   exact result of the operands (the OpenCL 1.2 limits for the built-in functions, more for
 *   compositions); 0 means exact.
 * - doc: what it computes, in words, for messages and documentation.
 *
 * Semantics worth knowing, as in PyTorch: maximum, minimum and clamp propagate NaN, and order
 * -0 below +0 (maximum(-0, +0) is +0 and minimum -0, on every device); round
 * rounds half to even (rint); floor, ceil, round and trunc keep integer dtypes unchanged;
 * sign gives -1, 0 or 1 (NaN for NaN); rsqrt(0) is inf; the logical operations treat any
 * nonzero (NaN included) as true and give bool; clamp(t, lo, hi) is minimum(maximum(t, lo), hi),
 * so lo > hi gives hi.
 *
 * The table is part of clt's public headers so that the declarations can be generated; its
 * column layout is not an API (it may grow columns), the functions it declares are.
 */
#ifndef CLT_OPS_H
#define CLT_OPS_H

/* clang-format off */
#define CLT_ELEMENTWISE_OPS(X)                                                                     \
  /* binary arithmetic */                                                                          \
  X(add, 2, PROMOTE, WRAP_INPLACE, (a)+(b), (a)+(b), (a)|(b), 0, "a + b")                          \
  X(sub, 2, PROMOTE, WRAP_INPLACE, (a)-(b), (a)-(b), CLT_NA, 0, "a - b")                           \
  X(mul, 2, PROMOTE, WRAP_INPLACE, (a)*(b), (a)*(b), (a)&(b), 0, "a * b")                          \
  X(div, 2, FLOAT, INPLACE, (a)/(b), CLT_NA, CLT_NA, 3, "a / b (true division)")                   \
  X(pow, 2, PROMOTE, PLAIN, pow(a,b), CLT_IPOW(a,b), CLT_NA, 16, "a to the power b")               \
  X(maximum, 2, PROMOTE, PLAIN, isnan(a)?(a):isnan(b)?(b):CLT_FMAX(a,b), (a)>(b)?(a):(b), (a)|(b), 0,\
    "the larger of a and b")                                                                       \
  X(minimum, 2, PROMOTE, PLAIN, isnan(a)?(a):isnan(b)?(b):CLT_FMIN(a,b), (a)<(b)?(a):(b), (a)&(b), 0,\
    "the smaller of a and b")                                                                      \
  X(atan2, 2, FLOAT, PLAIN, atan2(a,b), CLT_NA, CLT_NA, 6, "the angle of the point (b, a)")        \
  /* comparisons and logic */                                                                      \
  X(eq, 2, BOOL, PLAIN, (a)==(b), (a)==(b), (a)==(b), 0, "a == b")                                 \
  X(ne, 2, BOOL, PLAIN, (a)!=(b), (a)!=(b), (a)!=(b), 0, "a != b")                                 \
  X(lt, 2, BOOL, PLAIN, (a)<(b), (a)<(b), (a)<(b), 0, "a < b")                                     \
  X(le, 2, BOOL, PLAIN, (a)<=(b), (a)<=(b), (a)<=(b), 0, "a <= b")                                 \
  X(gt, 2, BOOL, PLAIN, (a)>(b), (a)>(b), (a)>(b), 0, "a > b")                                     \
  X(ge, 2, BOOL, PLAIN, (a)>=(b), (a)>=(b), (a)>=(b), 0, "a >= b")                                 \
  X(logical_and, 2, BOOL, PLAIN, (a)!=0&&(b)!=0, (a)!=0&&(b)!=0, (a)!=0&&(b)!=0, 0,                \
    "a and b, nonzero being true")                                                                 \
  X(logical_or, 2, BOOL, PLAIN, (a)!=0||(b)!=0, (a)!=0||(b)!=0, (a)!=0||(b)!=0, 0,                 \
    "a or b, nonzero being true")                                                                  \
  X(logical_xor, 2, BOOL, PLAIN, ((a)!=0)!=((b)!=0), ((a)!=0)!=((b)!=0), ((a)!=0)!=((b)!=0), 0,    \
    "a or b but not both, nonzero being true")                                                     \
  X(logical_not, 1, BOOL, PLAIN, (a)==0, (a)==0, (a)==0, 0, "not a, nonzero being true")           \
  /* unary */                                                                                      \
  X(neg, 1, PROMOTE, WRAP, -(a), -(a), CLT_NA, 0, "-a")                                            \
  X(abs, 1, PROMOTE, PLAIN, fabs(a), CLT_IABS(a), CLT_NA, 0, "the absolute value of a")            \
  X(sign, 1, PROMOTE, PLAIN, isnan(a)?(a):(TC)(((a)>0)-((a)<0)), (TC)(((a)>0)-((a)<0)), (a), 0,    \
    "-1, 0 or 1 by the sign of a")                                                                 \
  X(relu, 1, PROMOTE, PLAIN, (a)>0||isnan(a)?(a):(TC)0, (a)<0?(TC)0:(a), CLT_NA, 0, "max(a, 0)")   \
  X(floor, 1, PROMOTE, PLAIN, floor(a), (a), CLT_NA, 0, "a rounded down")                          \
  X(ceil, 1, PROMOTE, PLAIN, ceil(a), (a), CLT_NA, 0, "a rounded up")                              \
  X(round, 1, PROMOTE, PLAIN, rint(a), (a), CLT_NA, 0, "a rounded to nearest, half to even")       \
  X(trunc, 1, PROMOTE, PLAIN, trunc(a), (a), CLT_NA, 0, "a rounded toward zero")                   \
  X(exp, 1, FLOAT, PLAIN, exp(a), CLT_NA, CLT_NA, 3, "e to the power a")                           \
  X(expm1, 1, FLOAT, PLAIN, expm1(a), CLT_NA, CLT_NA, 3, "e to the power a, minus 1")              \
  X(log, 1, FLOAT, PLAIN, log(a), CLT_NA, CLT_NA, 3, "the natural logarithm of a")                 \
  X(log1p, 1, FLOAT, PLAIN, log1p(a), CLT_NA, CLT_NA, 2, "the natural logarithm of 1 + a")         \
  X(sqrt, 1, FLOAT, PLAIN, sqrt(a), CLT_NA, CLT_NA, 3, "the square root of a")                     \
  X(rsqrt, 1, FLOAT, PLAIN, (TC)1/sqrt(a), CLT_NA, CLT_NA, 6, "1 / sqrt(a)")                       \
  X(sin, 1, FLOAT, PLAIN, sin(a), CLT_NA, CLT_NA, 4, "the sine of a")                              \
  X(cos, 1, FLOAT, PLAIN, cos(a), CLT_NA, CLT_NA, 4, "the cosine of a")                            \
  X(tan, 1, FLOAT, PLAIN, tan(a), CLT_NA, CLT_NA, 5, "the tangent of a")                           \
  X(atan, 1, FLOAT, PLAIN, atan(a), CLT_NA, CLT_NA, 5, "the arc tangent of a")                     \
  X(tanh, 1, FLOAT, PLAIN, tanh(a), CLT_NA, CLT_NA, 5, "the hyperbolic tangent of a")              \
  X(sigmoid, 1, FLOAT, PLAIN, (TC)1/((TC)1+exp(-(a))), CLT_NA, CLT_NA, 8, "1 / (1 + e^-a)")        \
  X(erf, 1, FLOAT, PLAIN, erf(a), CLT_NA, CLT_NA, 16, "the error function of a")                   \
  /* ternary */                                                                                    \
  X(where, 3, PROMOTE, COND, (a)?(b):(c), (a)?(b):(c), (a)?(b):(c), 0, "b where a is true, else c")\
  X(clamp, 3, PROMOTE, PLAIN, isnan(a)||isnan(b)||isnan(c)?(a)+(b)+(c):CLT_FMIN(CLT_FMAX(a,b),c),  \
    (a)<(b)?((b)<(c)?(b):(c)):((a)<(c)?(a):(c)), CLT_NA, 0, "a limited to [b, c]")
/* clang-format on */

#endif /* CLT_OPS_H */
