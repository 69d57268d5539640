/* SPDX-License-Identifier: MIT */
/**
 * @file clt.hpp
 * @brief clt for C++17: tensors with operators and exceptions, header-only over the C API.
 *
 * @code
 *   #include <clt.hpp>
 *   clt::Device dev = clt::default_device();       // $CLT_DEVICE, else first GPU, else cpu
 *   clt::Tensor x = clt::ones({3});                 // born on the host (f32)
 *   x.move_to(dev);                                 // x = x.to(dev): explicit, a copy
 *   clt::Tensor y = clt::ones({3}, dev);            // or created on the device directly
 *   clt::Tensor z = x + y;                          // operands on one device, or clt::Error
 *   std::cout << z << "\n";                         // tensor([2., 2., 2.], device='cl:0')
 *   std::vector<float> v = z.to_vector<float>();    // the explicit return trip
 * @endcode
 *
 * Everything here is inline over clt.h: libclt exports no C++ symbol, so one library serves C and
 * C++, and clt.hpp works with any C++17 compiler whatever compiler built libclt.
 *
 * Handles. clt::Tensor holds one reference to a clt_tensor: copying a Tensor gives another handle
 * to the same tensor (as in PyTorch), moving transfers it, and the destructor releases it and
 * never throws. t.get() lends the C handle; clt::Tensor::adopt(p) takes over a reference a C
 * function gave you, clt::Tensor::borrow(p) adds one. clt::Params and clt::Event own their C
 * object alone: they move and do not copy.
 *
 * Errors. A failing clt call throws clt::Error (a std::runtime_error) whose what() is clt's own
 * message, naming the function, the argument, the devices and the fix, and whose status() is the
 * clt_status. Compiled with CLT_NO_EXCEPTIONS defined, nothing throws: a failing call returns an
 * undefined Tensor (or a zero value) and records the first failure of the thread, which
 * clt::status() gives and clt::clear_status() forgets. In both modes clt::attempt(f) runs f and
 * returns a clt::Result holding its value or the failure.
 *
 * Views. t.narrow, t.select, t.slice, t.permute, t.transpose, t.expand, t.unsqueeze, t.squeeze,
 * t.view (and t.reshape where the strides allow), t[i] and t.index({clt::slice(1, 3), clt::all,
 * 2}) give Tensors that share t's memory (clt.h, "Views"). Writing into one writes into t:
 * t[i] = 5 and t.index({...}) = x fill or copy into the view, as libtorch's assignment to an
 * rvalue Tensor does; t.index_put_({...}, x) says the same in so many words. Assigning to a named
 * Tensor (an lvalue) rebinds the handle, as ever. Differences from libtorch: docs/cpp.md.
 */
#ifndef CLT_HPP
#define CLT_HPP

#include <clt.h>

#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace clt {

/** The element types (clt_dtype): f32, f64, i32, i64, u8, boolean (bool), f16, bf16. */
enum class dtype : int {
  f32 = CLT_F32,
  f64 = CLT_F64,
  i32 = CLT_I32,
  i64 = CLT_I64,
  u8 = CLT_U8,
  boolean = CLT_BOOL,
  f16 = CLT_F16,
  bf16 = CLT_BF16
};

/** "f32", "f64", ... as clt_dtype_name gives them. */
inline const char *name(dtype dt) { return clt_dtype_name(static_cast<clt_dtype>(dt)); }

/** A tensor's shape: sizes, outermost first. */
using Shape = std::vector<int64_t>;

/** A failure: its clt_status (code) and clt's message; ok() when code is CLT_OK. */
struct Status {
  clt_status code = CLT_OK;
  std::string message;
  bool ok() const noexcept { return code == CLT_OK; }
  explicit operator bool() const noexcept { return ok(); }
};

#ifndef CLT_NO_EXCEPTIONS
/** What every failing call throws: clt's status and message (clt_last_error() at the failure). */
class Error : public std::runtime_error {
public:
  Error(clt_status status, const std::string &message)
      : std::runtime_error(message), status_(status) {}
  clt_status status() const noexcept { return status_; }

private:
  clt_status status_;
};
#endif

namespace detail {
#ifdef CLT_NO_EXCEPTIONS
inline Status &first_failure() {
  static thread_local Status s;
  return s;
}
#endif

/* true for CLT_OK; otherwise throws clt::Error or, with CLT_NO_EXCEPTIONS, records the failure
 * (the first one since clt::clear_status) and gives false. */
inline bool check(clt_status s) {
  if (s == CLT_OK)
    return true;
#ifdef CLT_NO_EXCEPTIONS
  Status &f = first_failure();
  if (f.ok())
    f = Status{s, clt_last_error()};
  return false;
#else
  throw Error(s, clt_last_error());
#endif
}
} // namespace detail

/** For C calls in C++ code: nothing for CLT_OK, else what a failing clt.hpp call does (throws
 *  clt::Error; with CLT_NO_EXCEPTIONS records the failure and gives false). */
inline bool check(clt_status s) { return detail::check(s); }

#ifdef CLT_NO_EXCEPTIONS
/** The first failure on this thread since clear_status() (ok() if none). */
inline Status status() { return detail::first_failure(); }
/** Forgets the recorded failure. */
inline void clear_status() { detail::first_failure() = Status{}; }
#endif

/** A device: the host ("cpu") or an OpenCL device ("cl:0", ...). Owned by clt and valid until
 *  the process exits, so a Device is a plain value. */
class Device {
public:
  Device() noexcept = default; /* no device: "where it was saved" for Params::load */
  explicit Device(clt_device *d) noexcept : d_(d) {}
  clt_device *get() const noexcept { return d_; }
  std::string name() const { return d_ ? clt_device_name(d_) : ""; }
  std::string description() const { return d_ ? clt_device_description(d_) : ""; }
  bool is_gpu() const { return clt_device_is_gpu(d_) != 0; }
  bool is_host() const { return clt_device_is_host(d_) != 0; }
  bool has_fp64() const { return clt_device_has_fp64(d_) != 0; }
  /** Waits for everything enqueued on the device. */
  void synchronize() const { detail::check(clt_device_synchronize(d_)); }
  friend bool operator==(Device a, Device b) noexcept { return a.d_ == b.d_; }
  friend bool operator!=(Device a, Device b) noexcept { return a.d_ != b.d_; }
  friend std::ostream &operator<<(std::ostream &os, Device d) { return os << d.name(); }

private:
  clt_device *d_ = nullptr;
};

/** The host. */
inline Device cpu() { return Device(clt_cpu()); }
/** The device of this name ("cpu", "cl:0", ...); CLT_ERR_DEVICE_NOT_FOUND if there is none. */
inline Device device(const std::string &name) {
  clt_device *d = nullptr;
  detail::check(clt_device_get(name.c_str(), &d));
  return Device(d);
}
/** $CLT_DEVICE, else the first GPU, else cpu. */
inline Device default_device() { return Device(clt_device_default()); }
/** The i-th GPU, else cpu. */
inline Device try_gpu(int i = 0) { return Device(clt_try_gpu(i)); }
/** How many devices there are, cpu included. */
inline int device_count() { return clt_device_count(); }

/** Where a new tensor goes and its dtype: cpu and f32 unless given. Converts from a Device, a
 *  dtype or both, so that clt::ones({3}, dev), clt::ones({3}, clt::dtype::f64) and
 *  clt::ones({3}, {dev, clt::dtype::f64}) all read naturally. */
struct Options {
  Options() : device(cpu()) {}
  Options(Device d) : device(d) {}
  Options(clt::dtype t) : device(cpu()), type(t) {}
  Options(Device d, clt::dtype t) : device(d), type(t) {}
  Device device;
  clt::dtype type = clt::dtype::f32;
};

/** The slice start:stop:step of one dimension in Tensor::index, with Python's rules (negative
 *  start and stop count from the end, both are clamped, step >= 1); stop CLT_SLICE_END is "to
 *  the end". libtorch's torch::indexing::Slice, with numbers where it has None. */
struct Slice {
  int64_t start = 0;
  int64_t stop = CLT_SLICE_END;
  int64_t step = 1;
};
/** clt::slice(1, 3) is 1:3, clt::slice(2) is 2:, clt::slice(0, CLT_SLICE_END, 2) is ::2. */
constexpr Slice slice(int64_t start = 0, int64_t stop = CLT_SLICE_END, int64_t step = 1) {
  return Slice{start, stop, step};
}
/** The whole dimension, ":" (libtorch: Slice()). */
inline constexpr Slice all{};
/** "...": as many whole dimensions as the other indices leave (at most one per index). */
inline constexpr struct Ellipsis {
} ellipsis{};
/** A new dimension of size 1 here (Python's None or np.newaxis; libtorch: None). */
inline constexpr struct NewAxis {
} newaxis{};

/** One entry of an index expression, t.index({...}): an integer selects (the dimension goes), a
 *  Slice slices (clt::all keeps the dimension whole), clt::ellipsis or "..." stands for the
 *  dimensions not named, clt::newaxis inserts one of size 1. Dimensions after the last entry
 *  are kept whole. Boolean and tensor indices (libtorch's masks and gathers) are not here: a
 *  bool does not compile, rather than pass for 0 or 1. */
class Index {
public:
  enum class Kind { integer, slice, ellipsis, newaxis, invalid };
  template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
  constexpr Index(I i) : kind_(Kind::integer), i_(static_cast<int64_t>(i)) {}
  Index(bool) = delete;
  constexpr Index(Slice s) : kind_(Kind::slice), s_(s) {}
  constexpr Index(Ellipsis) : kind_(Kind::ellipsis) {}
  constexpr Index(NewAxis) : kind_(Kind::newaxis) {}
  /** "..." as libtorch spells it; any other string is refused when the index is used. */
  Index(const char *s)
      : kind_(s && s[0] == '.' && s[1] == '.' && s[2] == '.' && !s[3] ? Kind::ellipsis
                                                                      : Kind::invalid) {}
  constexpr Kind kind() const noexcept { return kind_; }
  constexpr int64_t integer() const noexcept { return i_; }
  constexpr Slice slice() const noexcept { return s_; }

private:
  Kind kind_;
  int64_t i_ = 0;
  Slice s_{};
};

class Tensor;
namespace detail {
template <class F> Tensor make(F &&f);
template <class T> struct dtype_of; /* the clt dtype of a C++ element type */
template <> struct dtype_of<float> : std::integral_constant<dtype, dtype::f32> {};
template <> struct dtype_of<double> : std::integral_constant<dtype, dtype::f64> {};
template <> struct dtype_of<int32_t> : std::integral_constant<dtype, dtype::i32> {};
template <> struct dtype_of<int64_t> : std::integral_constant<dtype, dtype::i64> {};
template <> struct dtype_of<uint8_t> : std::integral_constant<dtype, dtype::u8> {};
template <> struct dtype_of<bool> : std::integral_constant<dtype, dtype::boolean> {};
} // namespace detail

/* The methods of one row of CLT_ELEMENTWISE_OPS (clt_ops.h), by arity and form: t.exp(),
 * a.add(b), a.add(2.0), t.clamp(lo, hi); a.add_(b) and a.add_(2.0) in place where the C API has
 * clt_add_. where is clt::where(cond, a, b) only (libtorch's member where reads differently). */
#define CLT_HPP_METHOD_1_(name)                                                                    \
  Tensor name() const {                                                                            \
    return detail::make([&](clt_tensor **o) { return clt_##name(t_, o); });                        \
  }
#define CLT_HPP_METHOD_2_(name)                                                                    \
  Tensor name(const Tensor &b) const {                                                             \
    return detail::make([&](clt_tensor **o) { return clt_##name(t_, b.t_, o); });                  \
  }                                                                                                \
  Tensor name(double b) const {                                                                    \
    return detail::make([&](clt_tensor **o) { return clt_##name##_scalar(t_, b, o); });            \
  }
#define CLT_HPP_METHOD_3_(name)
#define CLT_HPP_METHOD_PLAIN_3_(name)                                                              \
  Tensor name(const Tensor &b, const Tensor &c) const {                                            \
    return detail::make([&](clt_tensor **o) { return clt_##name(t_, b.t_, c.t_, o); });            \
  }                                                                                                \
  Tensor name(double b, double c) const {                                                          \
    return detail::make([&](clt_tensor **o) { return clt_##name##_scalar(t_, b, c, o); });         \
  }
#define CLT_HPP_METHOD_INPLACE_2_(name)                                                            \
  Tensor &name##_(const Tensor &b) {                                                               \
    detail::check(clt_##name##_(t_, b.t_));                                                        \
    return *this;                                                                                  \
  }                                                                                                \
  Tensor &name##_(double b);
#define CLT_HPP_METHOD_WRAP_INPLACE_2_(name) CLT_HPP_METHOD_INPLACE_2_(name)
#define CLT_HPP_METHOD_PLAIN_1_(name)
#define CLT_HPP_METHOD_PLAIN_2_(name)
#define CLT_HPP_METHOD_WRAP_1_(name)
#define CLT_HPP_METHOD_COND_3_(name)
#define CLT_HPP_METHOD_(name, arity, rule, form, f, i, b, ulps, doc)                               \
  CLT_HPP_METHOD_##arity##_(name) CLT_HPP_METHOD_##form##_##arity##_(name)

/* The reductions: t.sum() over everything (0-d), t.sum(dim, keepdim) along one dimension. */
#define CLT_HPP_REDUCTIONS(X) X(sum) X(mean) X(max) X(min) X(argmax)
#define CLT_HPP_REDUCTION_(name)                                                                   \
  Tensor name() const {                                                                            \
    return detail::make([&](clt_tensor **o) { return clt_##name(t_, o); });                        \
  }                                                                                                \
  Tensor name(int dim, bool keepdim = false) const {                                               \
    return detail::make([&](clt_tensor **o) { return clt_##name##_dim(t_, dim, keepdim, o); });    \
  }

/** A tensor handle: one reference to a clt_tensor (or none: an undefined Tensor). */
class Tensor {
public:
  Tensor() noexcept = default;
  Tensor(const Tensor &o) noexcept : t_(o.t_ ? clt_tensor_retain(o.t_) : nullptr) {}
  Tensor(Tensor &&o) noexcept : t_(std::exchange(o.t_, nullptr)) {}
  /** Rebinds this handle to o's tensor (a named Tensor; see operator= && below for views). */
  Tensor &operator=(Tensor o) &noexcept {
    std::swap(t_, o.t_);
    return *this;
  }
  ~Tensor() { clt_tensor_release(t_); }

  /** Takes over the reference p carries (a C function's out-parameter). */
  static Tensor adopt(clt_tensor *p) noexcept {
    Tensor t;
    t.t_ = p;
    return t;
  }
  /** Adds a reference to p, which the caller keeps (a borrowed handle such as clt_params_get's). */
  static Tensor borrow(clt_tensor *p) noexcept { return adopt(p ? clt_tensor_retain(p) : nullptr); }
  /** The C handle, borrowed: valid while this Tensor holds it. */
  clt_tensor *get() const noexcept { return t_; }
  /** Gives up the reference to the caller, who releases it; the Tensor becomes undefined. */
  clt_tensor *release() noexcept { return std::exchange(t_, nullptr); }
  bool defined() const noexcept { return t_ != nullptr; }

  int dim() const { return clt_tensor_ndim(t_); }
  Shape shape() const {
    const int64_t *s = clt_tensor_shape(t_);
    return s ? Shape(s, s + dim()) : Shape();
  }
  int64_t size(int d) const { return shape().at(static_cast<size_t>(d < 0 ? d + dim() : d)); }
  int64_t numel() const { return clt_tensor_numel(t_); }
  /** The strides in elements (0 along an expanded dimension). */
  Shape strides() const {
    const int64_t *s = clt_tensor_strides(t_);
    return s ? Shape(s, s + dim()) : Shape();
  }
  int64_t stride(int d) const { return strides().at(static_cast<size_t>(d < 0 ? d + dim() : d)); }
  /** Where the first element lies in the memory, in elements (libtorch: storage_offset()). */
  int64_t offset() const { return clt_tensor_offset(t_); }
  int64_t storage_offset() const { return offset(); }
  /** Whether the elements lie one after another in C order. */
  bool is_contiguous() const { return clt_is_contiguous(t_) != 0; }
  clt::dtype dtype() const { return static_cast<clt::dtype>(clt_tensor_dtype(t_)); }
  Device device() const { return Device(clt_tensor_device(t_)); }

  /** This tensor on dev: the same tensor (another handle) when it is already there. */
  Tensor to(Device dev) const {
    return detail::make([&](clt_tensor **o) { return clt_to(t_, dev.get(), o); });
  }
  /** Converted to dtype t: always a new tensor (clt_cast). */
  Tensor to(clt::dtype t) const {
    return detail::make([&](clt_tensor **o) { return clt_cast(t_, static_cast<clt_dtype>(t), o); });
  }
  /** A new tensor on dev, even when this one is already there. */
  Tensor copy_to(Device dev) const {
    return detail::make([&](clt_tensor **o) { return clt_copy_to(t_, dev.get(), o); });
  }
  /** x.move_to(dev) is x = x.to(dev): this handle now refers to the copy on dev (other handles
   *  to the old tensor keep it). */
  Tensor &move_to(Device dev) {
    detail::check(clt_move(&t_, dev.get()));
    return *this;
  }
  /** Copies src's elements into this tensor, which may be any view (not an expanded one): src
   *  is broadcast to its shape, converted to its dtype, and brought from its device (clt_copy). */
  Tensor &copy_(const Tensor &src) {
    detail::check(clt_copy(t_, src.t_));
    return *this;
  }
  /** Sets every element (of any view) to v, converted to the dtype (clt_fill_). */
  Tensor &fill_(double v) {
    detail::check(clt_fill_(t_, v));
    return *this;
  }
  /** t[i] = x and t.index({...}) = x write into the view on the left, as in libtorch: these
   *  apply to an rvalue Tensor only (a view just made) and copy (with broadcasting) or fill.
   *  A named Tensor, an lvalue, is rebound by the first operator= instead. */
  Tensor &operator=(const Tensor &src) && { return copy_(src); }
  Tensor &operator=(double v) && { return fill_(v); }

  /** The elements as T (float, double, int32_t, int64_t, uint8_t or bool), read explicitly and
   *  blocking from any device; a tensor of another dtype is converted first (clt_cast). */
  template <class T> std::vector<T> to_vector() const {
    constexpr clt::dtype want = detail::dtype_of<T>::value;
    Tensor src = !t_ || dtype() == want ? *this : to(want);
    using E = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    std::vector<E> v(static_cast<size_t>(src.t_ ? src.numel() : 0));
    if (!detail::check(clt_tensor_read(src.t_, v.data(), v.size() * sizeof(E))))
      return {};
    if constexpr (std::is_same_v<T, bool>)
      return std::vector<bool>(v.begin(), v.end());
    else
      return v;
  }
  /** The one element of a one-element tensor (clt_item, or clt_item_i64 for integer T). */
  template <class T> T item() const {
    if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      detail::check(clt_item(t_, &v));
      return static_cast<T>(v);
    } else {
      int64_t v = 0;
      detail::check(clt_item_i64(t_, &v));
      return static_cast<T>(v);
    }
  }
  double item() const { return item<double>(); }

  CLT_ELEMENTWISE_OPS(CLT_HPP_METHOD_)
  CLT_HPP_REDUCTIONS(CLT_HPP_REDUCTION_)

  Tensor matmul(const Tensor &b) const {
    return detail::make([&](clt_tensor **o) { return clt_matmul(t_, b.t_, o); });
  }
  /** A view where the strides allow one (then writes reach this tensor), else a copy. */
  Tensor reshape(const Shape &s) const {
    return detail::make(
        [&](clt_tensor **o) { return clt_reshape(t_, static_cast<int>(s.size()), s.data(), o); });
  }

  /* ---- views: each shares this tensor's memory; writes through one are seen by the other ---- */
  /** The dimensions dim0 and dim1 swapped (a view). */
  Tensor transpose(int dim0, int dim1) const {
    return detail::make([&](clt_tensor **o) { return clt_transpose(t_, dim0, dim1, o); });
  }
  /** Elements start .. start + length - 1 along dim. */
  Tensor narrow(int dim, int64_t start, int64_t length) const {
    return detail::make([&](clt_tensor **o) { return clt_narrow(t_, dim, start, length, o); });
  }
  /** Element index along dim, which goes. */
  Tensor select(int dim, int64_t index) const {
    return detail::make([&](clt_tensor **o) { return clt_select(t_, dim, index, o); });
  }
  /** start:stop:step along dim, with Python's rules (CLT_SLICE_END: to the end). */
  Tensor slice(int dim = 0, int64_t start = 0, int64_t stop = CLT_SLICE_END,
               int64_t step = 1) const {
    return detail::make([&](clt_tensor **o) { return clt_slice(t_, dim, start, stop, step, o); });
  }
  /** Dimension i of the result is dimension dims[i] of this one. */
  Tensor permute(const std::vector<int64_t> &dims) const {
    std::vector<int> d;
    for (int64_t x : dims) /* out of int's range: a value clt_permute refuses, not a wrapped one */
      d.push_back(x < INT_MIN || x > INT_MAX ? INT_MAX : static_cast<int>(x));
    return detail::make(
        [&](clt_tensor **o) { return clt_permute(t_, static_cast<int>(d.size()), d.data(), o); });
  }
  /** Broadcast to shape (-1 keeps a size): a read-only view, stride 0 where it grew. */
  Tensor expand(const Shape &shape) const {
    return detail::make([&](clt_tensor **o) {
      return clt_expand(t_, static_cast<int>(shape.size()), shape.data(), o);
    });
  }
  /** A dimension of size 1 inserted at dim. */
  Tensor unsqueeze(int dim) const {
    return detail::make([&](clt_tensor **o) { return clt_unsqueeze(t_, dim, o); });
  }
  /** Without dimension dim if its size is 1, else the same tensor. */
  Tensor squeeze(int dim) const {
    return detail::make([&](clt_tensor **o) { return clt_squeeze(t_, dim, o); });
  }
  /** Without every dimension of size 1. */
  Tensor squeeze() const {
    Tensor r = *this;
    for (int d = dim() - 1; d >= 0 && r.defined(); d--)
      r = r.squeeze(d);
    return r;
  }
  /** Another shape, same elements, same memory: fails where the strides do not allow it
   *  (reshape copies then). One size may be -1. */
  Tensor view(const Shape &shape) const {
    return detail::make([&](clt_tensor **o) {
      return clt_view(t_, static_cast<int>(shape.size()), shape.data(), o);
    });
  }
  /** This tensor if contiguous, else a contiguous copy. */
  Tensor contiguous() const {
    return detail::make([&](clt_tensor **o) { return clt_contiguous(t_, o); });
  }
  /** Always a new contiguous copy. */
  Tensor clone() const {
    return detail::make([&](clt_tensor **o) { return clt_clone(t_, o); });
  }
  /** t[i] is t.select(0, i); t[i] = x writes into it. */
  Tensor operator[](int64_t i) const { return select(0, i); }
  /** The view an index expression names: t.index({clt::slice(1, 3), clt::all, 2}) is Python's
   *  t[1:3, :, 2]. See clt::Index. */
  Tensor index(const std::vector<Index> &indices) const;
  /** Writes v into t.index(indices), broadcast and converted: Python's t[...] = v. */
  Tensor &index_put_(const std::vector<Index> &indices, const Tensor &v) {
    index(indices).copy_(v);
    return *this;
  }
  Tensor &index_put_(const std::vector<Index> &indices, double v) {
    index(indices).fill_(v);
    return *this;
  }

  /** Autograd (docs/autograd.md): marks this tensor as a leaf that requires grad (float dtypes
   *  only), as t.requires_grad_(on); returns *this. */
  Tensor &requires_grad_(bool on = true) {
    detail::check(clt_requires_grad_(t_, on ? 1 : 0));
    return *this;
  }
  bool requires_grad() const noexcept { return clt_tensor_requires_grad(t_) != 0; }
  /** Backward from this tensor: grad undefined only for a one-element tensor; retain_graph keeps
   *  the graph for another backward (clt_backward_retain). */
  void backward(const Tensor &grad, bool retain_graph = false) const {
    detail::check(retain_graph ? clt_backward_retain(t_, grad.get()) : clt_backward(t_, grad.get()));
  }
  /** Backward from a one-element tensor (the gradient 1). */
  void backward() const { detail::check(clt_backward(t_, nullptr)); }
  /** The accumulated gradient (another handle to it); undefined before any backward reached
   *  this tensor, as t.grad is None. */
  Tensor grad() const { return borrow(clt_tensor_grad(t_)); }
  /** Drops the gradient: t.grad = None. */
  Tensor &zero_grad() {
    detail::check(clt_zero_grad(t_));
    return *this;
  }
  /** The same memory without history (t.detach()). */
  Tensor detach() const {
    return detail::make([&](clt_tensor **o) { return clt_detach(t_, o); });
  }
  /** Keeps this non-leaf's gradient in grad() during backward passes (t.retain_grad()). */
  Tensor &retain_grad() {
    detail::check(clt_retain_grad(t_));
    return *this;
  }

  Tensor operator-() const { return neg(); }
  Tensor &operator+=(const Tensor &b) { return add_(b); }
  Tensor &operator-=(const Tensor &b) { return sub_(b); }
  Tensor &operator*=(const Tensor &b) { return mul_(b); }
  Tensor &operator/=(const Tensor &b) { return div_(b); }
  Tensor &operator+=(double b) { return add_(b); }
  Tensor &operator-=(double b) { return sub_(b); }
  Tensor &operator*=(double b) { return mul_(b); }
  Tensor &operator/=(double b) { return div_(b); }

private:
  clt_tensor *t_ = nullptr;
};

namespace detail {
/* A tensor from a C function with an out-parameter: undefined on failure (CLT_NO_EXCEPTIONS). */
template <class F> Tensor make(F &&f) {
  clt_tensor *out = nullptr;
  if (!check(f(&out)))
    return Tensor();
  return Tensor::adopt(out);
}

/* The 0-d operand a number becomes beside t, by the rule of clt's _scalar forms (lib/dispatch.c,
 * scalar_tensor): t's dtype, except that a fractional number makes integers and bool f32, and an
 * integral one makes bool i64. For the forms the C API has no function for: 2 - t, 2 / t. */
inline Tensor scalar_like(const Tensor &t, double v) {
  clt_dtype dt = t.defined() ? static_cast<clt_dtype>(t.dtype()) : CLT_F32;
  bool is_float = dt == CLT_F32 || dt == CLT_F64 || dt == CLT_F16 || dt == CLT_BF16;
  bool integral = v == std::floor(v) && v >= -9.2e18 && v <= 9.2e18;
  if (!is_float && !integral)
    dt = CLT_F32;
  else if (dt == CLT_BOOL)
    dt = CLT_I64;
  clt_device *dev = t.defined() ? t.device().get() : clt_cpu();
  return make([&](clt_tensor **o) { return clt_full(dt, 0, nullptr, v, dev, o); });
}
} // namespace detail

inline Tensor Tensor::index(const std::vector<Index> &indices) const {
  static const char fn[] = "clt::Tensor::index";
  int named = 0, ellipses = 0; /* the dimensions the entries use up, and the "..." */
  for (const Index &i : indices) {
    if (i.kind() == Index::Kind::invalid) {
      detail::check(clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                                  "a string index must be \"...\" (clt::ellipsis)"));
      return Tensor();
    }
    named += i.kind() == Index::Kind::integer || i.kind() == Index::Kind::slice;
    ellipses += i.kind() == Index::Kind::ellipsis;
  }
  if (ellipses > 1) {
    detail::check(clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                                "an index may hold one \"...\", this one holds %d", ellipses));
    return Tensor();
  }
  if (t_ && named > dim()) { /* (an undefined tensor: clt_select or clt_slice says so) */
    detail::check(clt_set_error(CLT_ERR_INVALID_ARGUMENT, fn,
                                "%d indices (integers and slices) for a tensor of %d dimensions",
                                named, dim()));
    return Tensor();
  }
  Tensor r = *this;
  int d = 0; /* the dimension of r the next entry applies to */
  for (const Index &i : indices) {
    switch (i.kind()) {
    case Index::Kind::integer:
      r = r.select(d, i.integer());
      break;
    case Index::Kind::slice:
      r = r.slice(d++, i.slice().start, i.slice().stop, i.slice().step);
      break;
    case Index::Kind::ellipsis:
      d += dim() - named;
      break;
    case Index::Kind::newaxis:
      r = r.unsqueeze(d++);
      break;
    case Index::Kind::invalid:
      break;
    }
    if (!r.defined()) /* failed (CLT_NO_EXCEPTIONS): the first failure is the one to keep */
      break;
  }
  return r;
}

namespace detail {
inline std::vector<clt_tensor *> handles(const std::vector<Tensor> &ts) {
  std::vector<clt_tensor *> h;
  for (const Tensor &t : ts)
    h.push_back(t.get());
  return h;
}
} // namespace detail

/** The tensors joined along their existing dimension dim (torch::cat): a new tensor. */
inline Tensor cat(const std::vector<Tensor> &tensors, int dim = 0) {
  std::vector<clt_tensor *> h = detail::handles(tensors);
  return detail::make(
      [&](clt_tensor **o) { return clt_cat(static_cast<int>(h.size()), h.data(), dim, o); });
}
/** The tensors, of one shape, joined along a new dimension dim (torch::stack): a new tensor. */
inline Tensor stack(const std::vector<Tensor> &tensors, int dim = 0) {
  std::vector<clt_tensor *> h = detail::handles(tensors);
  return detail::make(
      [&](clt_tensor **o) { return clt_stack(static_cast<int>(h.size()), h.data(), dim, o); });
}

#define CLT_HPP_SCALAR_INPLACE_2_(name)                                                            \
  inline Tensor &Tensor::name##_(double b) { return name##_(detail::scalar_like(*this, b)); }
#define CLT_HPP_SCALAR_WRAP_INPLACE_2_(name) CLT_HPP_SCALAR_INPLACE_2_(name)
#define CLT_HPP_SCALAR_(name, arity, rule, form, f, i, b, ulps, doc)                               \
  CLT_HPP_SCALAR_##form##_##arity##_(name)
#define CLT_HPP_SCALAR_PLAIN_1_(name)
#define CLT_HPP_SCALAR_PLAIN_2_(name)
#define CLT_HPP_SCALAR_PLAIN_3_(name)
#define CLT_HPP_SCALAR_WRAP_1_(name)
#define CLT_HPP_SCALAR_COND_3_(name)
CLT_ELEMENTWISE_OPS(CLT_HPP_SCALAR_)

/* Free functions for every row: clt::exp(t), clt::add(a, b), clt::add(a, 2.0), clt::clamp(t,
 * lo, hi), clt::where(cond, a, b). */
#define CLT_HPP_FREE_1_(name)                                                                      \
  inline Tensor name(const Tensor &t) { return t.name(); }
#define CLT_HPP_FREE_2_(name)                                                                      \
  inline Tensor name(const Tensor &a, const Tensor &b) { return a.name(b); }                       \
  inline Tensor name(const Tensor &a, double b) { return a.name(b); }
#define CLT_HPP_FREE_3_(name)
#define CLT_HPP_FREE_PLAIN_3_(name)                                                                \
  inline Tensor name(const Tensor &t, const Tensor &lo, const Tensor &hi) {                        \
    return t.name(lo, hi);                                                                         \
  }                                                                                                \
  inline Tensor name(const Tensor &t, double lo, double hi) { return t.name(lo, hi); }
#define CLT_HPP_FREE_COND_3_(name)                                                                 \
  inline Tensor name(const Tensor &cond, const Tensor &a, const Tensor &b) {                       \
    return detail::make(                                                                           \
        [&](clt_tensor **o) { return clt_##name(cond.get(), a.get(), b.get(), o); });              \
  }
#define CLT_HPP_FREE_(name, arity, rule, form, f, i, b, ulps, doc)                                 \
  CLT_HPP_FREE_##arity##_(name) CLT_HPP_FREE_##form##_##arity##_(name)
#define CLT_HPP_FREE_PLAIN_1_(name)
#define CLT_HPP_FREE_PLAIN_2_(name)
#define CLT_HPP_FREE_WRAP_1_(name)
#define CLT_HPP_FREE_INPLACE_2_(name)
#define CLT_HPP_FREE_WRAP_INPLACE_2_(name)
CLT_ELEMENTWISE_OPS(CLT_HPP_FREE_)

inline Tensor matmul(const Tensor &a, const Tensor &b) { return a.matmul(b); }
/** torch.dot, torch.mv, torch.outer and torch.addmm (clt_dot, clt_mv, clt_outer, clt_addmm). */
inline Tensor dot(const Tensor &a, const Tensor &b) {
  return detail::make([&](clt_tensor **o) { return clt_dot(a.get(), b.get(), o); });
}
inline Tensor mv(const Tensor &a, const Tensor &x) {
  return detail::make([&](clt_tensor **o) { return clt_mv(a.get(), x.get(), o); });
}
inline Tensor outer(const Tensor &a, const Tensor &b) {
  return detail::make([&](clt_tensor **o) { return clt_outer(a.get(), b.get(), o); });
}
/** torch.tril, torch.triu, torch.diag, torch.diagonal, torch.trace (eye and linspace: below). */
inline Tensor tril(const Tensor &t, int64_t k = 0) {
  return detail::make([&](clt_tensor **o) { return clt_tril(t.get(), k, o); });
}
inline Tensor triu(const Tensor &t, int64_t k = 0) {
  return detail::make([&](clt_tensor **o) { return clt_triu(t.get(), k, o); });
}
inline Tensor diag(const Tensor &t, int64_t k = 0) {
  return detail::make([&](clt_tensor **o) { return clt_diag(t.get(), k, o); });
}
inline Tensor diagonal(const Tensor &t, int64_t offset = 0, int dim1 = 0, int dim2 = 1) {
  return detail::make([&](clt_tensor **o) { return clt_diagonal(t.get(), offset, dim1, dim2, o); });
}
inline Tensor trace(const Tensor &t) {
  return detail::make([&](clt_tensor **o) { return clt_trace(t.get(), o); });
}
inline Tensor addmm(const Tensor &c, const Tensor &a, const Tensor &b, double beta = 1.0,
                    double alpha = 1.0) {
  return detail::make(
      [&](clt_tensor **o) { return clt_addmm(c.get(), a.get(), b.get(), beta, alpha, o); });
}
/** Factorizations and solvers, as torch.linalg (clt_linalg_* in clt.h; docs/linalg.md): batched
 *  over leading dimensions, f32 and f64, results on the operands' device; several results come
 *  as a std::tuple (auto [Q, R] = clt::linalg::qr(A)). A failure throws clt::Error with its
 *  status (CLT_ERR_LINALG for a singular or indefinite matrix); with CLT_NO_EXCEPTIONS every
 *  result is undefined. */
namespace linalg {
namespace detail {
inline std::tuple<Tensor, Tensor> take(clt_status s, clt_tensor *a, clt_tensor *b) {
  if (!clt::detail::check(s))
    return {Tensor(), Tensor()};
  return {Tensor::adopt(a), Tensor::adopt(b)};
}
} // namespace detail
inline Tensor solve(const Tensor &A, const Tensor &B) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_solve(A.get(), B.get(), o); });
}
inline Tensor solve_triangular(const Tensor &A, const Tensor &B, bool upper, bool left = true,
                               bool unitriangular = false) {
  return clt::detail::make([&](clt_tensor **o) {
    return clt_linalg_solve_triangular(A.get(), B.get(), upper, left, unitriangular, o);
  });
}
inline Tensor cholesky(const Tensor &A, bool upper = false) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_cholesky(A.get(), upper, o); });
}
/** (LU, pivots) */
inline std::tuple<Tensor, Tensor> lu_factor(const Tensor &A) {
  clt_tensor *a = nullptr, *b = nullptr;
  clt_status s = clt_linalg_lu_factor(A.get(), &a, &b);
  return detail::take(s, a, b);
}
inline Tensor lu_solve(const Tensor &LU, const Tensor &pivots, const Tensor &B) {
  return clt::detail::make(
      [&](clt_tensor **o) { return clt_linalg_lu_solve(LU.get(), pivots.get(), B.get(), o); });
}
/** (Q, R), reduced */
inline std::tuple<Tensor, Tensor> qr(const Tensor &A) {
  clt_tensor *a = nullptr, *b = nullptr;
  clt_status s = clt_linalg_qr(A.get(), &a, &b);
  return detail::take(s, a, b);
}
/** The solution of torch.linalg.lstsq (driver gelsy). */
inline Tensor lstsq(const Tensor &A, const Tensor &B) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_lstsq(A.get(), B.get(), o); });
}
/** (eigenvalues ascending, eigenvectors as columns) */
inline std::tuple<Tensor, Tensor> eigh(const Tensor &A) {
  clt_tensor *a = nullptr, *b = nullptr;
  clt_status s = clt_linalg_eigh(A.get(), &a, &b);
  return detail::take(s, a, b);
}
inline Tensor eigvalsh(const Tensor &A) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_eigh(A.get(), o, nullptr); });
}
/** (U, S descending, Vh); full_matrices true by default, as torch */
inline std::tuple<Tensor, Tensor, Tensor> svd(const Tensor &A, bool full_matrices = true) {
  clt_tensor *u = nullptr, *s = nullptr, *v = nullptr;
  if (!clt::detail::check(clt_linalg_svd(A.get(), full_matrices, &u, &s, &v)))
    return {Tensor(), Tensor(), Tensor()};
  return {Tensor::adopt(u), Tensor::adopt(s), Tensor::adopt(v)};
}
inline Tensor svdvals(const Tensor &A) {
  return clt::detail::make(
      [&](clt_tensor **o) { return clt_linalg_svd(A.get(), 0, nullptr, o, nullptr); });
}
inline Tensor inv(const Tensor &A) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_inv(A.get(), o); });
}
inline Tensor det(const Tensor &A) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_det(A.get(), o); });
}
/** (sign, logabsdet) */
inline std::tuple<Tensor, Tensor> slogdet(const Tensor &A) {
  clt_tensor *a = nullptr, *b = nullptr;
  clt_status s = clt_linalg_slogdet(A.get(), &a, &b);
  return detail::take(s, a, b);
}
/** ord: "fro", "nuc", "1", "2", "inf", or nullptr (the 2-norm of all elements) */
inline Tensor norm(const Tensor &A, const char *ord = nullptr) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_norm(A.get(), ord, o); });
}
inline Tensor cond(const Tensor &A) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_cond(A.get(), o); });
}
inline Tensor matrix_rank(const Tensor &A) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_matrix_rank(A.get(), o); });
}
inline Tensor pinv(const Tensor &A) {
  return clt::detail::make([&](clt_tensor **o) { return clt_linalg_pinv(A.get(), o); });
}
} // namespace linalg
inline Tensor transpose(const Tensor &t, int dim0, int dim1) { return t.transpose(dim0, dim1); }
inline Tensor reshape(const Tensor &t, const Shape &s) { return t.reshape(s); }
/** x W^T + b (clt_linear); bias may be an undefined Tensor. */
inline Tensor linear(const Tensor &x, const Tensor &weight, const Tensor &bias = Tensor()) {
  return detail::make(
      [&](clt_tensor **o) { return clt_linear(x.get(), weight.get(), bias.get(), o); });
}
/** Softmax along dim (clt_softmax). */
inline Tensor softmax(const Tensor &t, int dim) {
  return detail::make([&](clt_tensor **o) { return clt_softmax(t.get(), dim, o); });
}
/** Log of the softmax along dim, computed stably (clt_log_softmax). */
inline Tensor log_softmax(const Tensor &t, int dim) {
  return detail::make([&](clt_tensor **o) { return clt_log_softmax(t.get(), dim, o); });
}
/** log(sum(exp(t), dim)), computed stably (clt_logsumexp). */
inline Tensor logsumexp(const Tensor &t, int dim, bool keepdim = false) {
  return detail::make([&](clt_tensor **o) { return clt_logsumexp(t.get(), dim, keepdim, o); });
}
/** Mean of the squared differences, a 0-d tensor (clt_mse_loss). */
inline Tensor mse_loss(const Tensor &pred, const Tensor &target) {
  return detail::make([&](clt_tensor **o) { return clt_mse_loss(pred.get(), target.get(), o); });
}
/** Mean cross entropy of logits [N, C] against i64 classes [N] (clt_cross_entropy; waits for the
 *  device to check the targets). */
inline Tensor cross_entropy(const Tensor &logits, const Tensor &target) {
  return detail::make(
      [&](clt_tensor **o) { return clt_cross_entropy(logits.get(), target.get(), o); });
}

/* Operators: tensor and number in both orders; comparisons give bool tensors. */
#define CLT_HPP_OPERATOR_(op, name, reversed)                                                      \
  inline Tensor operator op(const Tensor &a, const Tensor &b) { return a.name(b); }                \
  inline Tensor operator op(const Tensor &a, double b) { return a.name(b); }                       \
  inline Tensor operator op(double a, const Tensor &b) { return reversed; }
CLT_HPP_OPERATOR_(+, add, b.add(a))
CLT_HPP_OPERATOR_(*, mul, b.mul(a))
CLT_HPP_OPERATOR_(-, sub, detail::scalar_like(b, a).sub(b))
CLT_HPP_OPERATOR_(/, div, detail::scalar_like(b, a).div(b))
CLT_HPP_OPERATOR_(==, eq, b.eq(a))
CLT_HPP_OPERATOR_(!=, ne, b.ne(a))
CLT_HPP_OPERATOR_(<, lt, b.gt(a))
CLT_HPP_OPERATOR_(<=, le, b.ge(a))
CLT_HPP_OPERATOR_(>, gt, b.lt(a))
CLT_HPP_OPERATOR_(>=, ge, b.le(a))
#undef CLT_HPP_OPERATOR_

/** What clt_print prints, without its newline (clt_format). */
inline std::ostream &operator<<(std::ostream &os, const Tensor &t) {
  size_t len = 0;
  if (!detail::check(clt_format(t.get(), nullptr, 0, &len)))
    return os;
  std::string s(len + 1, '\0');
  if (detail::check(clt_format(t.get(), &s[0], s.size(), nullptr)))
    os << s.c_str();
  return os;
}

/* ---- creation: on opts.device (cpu unless given), of opts.type (f32 unless given) ---------- */
#define CLT_HPP_CREATE_(name)                                                                      \
  inline Tensor name(const Shape &shape, Options opts = {}) {                                      \
    return detail::make([&](clt_tensor **o) {                                                      \
      return clt_##name(static_cast<clt_dtype>(opts.type), static_cast<int>(shape.size()),         \
                        shape.data(), opts.device.get(), o);                                       \
    });                                                                                            \
  }
CLT_HPP_CREATE_(empty)
CLT_HPP_CREATE_(zeros)
CLT_HPP_CREATE_(ones)
CLT_HPP_CREATE_(rand)
CLT_HPP_CREATE_(randn)
#undef CLT_HPP_CREATE_

inline Tensor full(const Shape &shape, double value, Options opts = {}) {
  return detail::make([&](clt_tensor **o) {
    return clt_full(static_cast<clt_dtype>(opts.type), static_cast<int>(shape.size()), shape.data(),
                    value, opts.device.get(), o);
  });
}
/** start, start + step, ... below end. */
inline Tensor arange(double start, double end, double step, Options opts = {}) {
  return detail::make([&](clt_tensor **o) {
    return clt_arange(start, end, step, static_cast<clt_dtype>(opts.type), opts.device.get(), o);
  });
}
inline Tensor arange(double start, double end, Options opts = {}) {
  return arange(start, end, 1, opts);
}
inline Tensor arange(double end, Options opts = {}) { return arange(0, end, 1, opts); }
/** torch.eye (m < 0: n x n) and torch.linspace (clt_eye, clt_linspace). */
inline Tensor eye(int64_t n, int64_t m = -1, Options opts = {}) {
  return detail::make([&](clt_tensor **o) {
    return clt_eye(n, m, static_cast<clt_dtype>(opts.type), opts.device.get(), o);
  });
}
inline Tensor linspace(double start, double end, int64_t steps, Options opts = {}) {
  return detail::make([&](clt_tensor **o) {
    return clt_linspace(start, end, steps, static_cast<clt_dtype>(opts.type), opts.device.get(),
                        o);
  });
}

/** A tensor of v's elements (float, double, int32_t, int64_t, uint8_t or bool) with this shape
 *  (its product must be v.size()), on dev. */
template <class T> Tensor from_vector(const std::vector<T> &v, const Shape &shape, Device dev) {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  if (n != static_cast<int64_t>(v.size())) {
    detail::check(clt_set_error(CLT_ERR_SHAPE_MISMATCH, "clt::from_vector",
                                "the vector has %zu elements, the shape %lld", v.size(),
                                static_cast<long long>(n)));
    return Tensor();
  }
  using E = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
  std::vector<E> copy;
  const void *src = nullptr;
  if constexpr (std::is_same_v<T, bool>) { /* std::vector<bool> is packed bits */
    copy.assign(v.begin(), v.end());
    src = copy.data();
  } else {
    src = v.data();
  }
  return detail::make([&](clt_tensor **o) {
    return clt_from_host(src, static_cast<clt_dtype>(detail::dtype_of<T>::value),
                         static_cast<int>(shape.size()), shape.data(), dev.get(), o);
  });
}
template <class T> Tensor from_vector(const std::vector<T> &v, const Shape &shape) {
  return from_vector(v, shape, cpu());
}
/** One dimension of v.size() elements. */
template <class T> Tensor from_vector(const std::vector<T> &v, Device dev = cpu()) {
  return from_vector(v, Shape{static_cast<int64_t>(v.size())}, dev);
}

/** Seeds the default generator of clt_rand and clt_randn. */
inline void manual_seed(uint64_t seed) { detail::check(clt_manual_seed(seed)); }

/** Sets grad mode for the calling thread (torch.set_grad_enabled); returns the previous one. */
inline bool set_grad_enabled(bool on) { return clt_set_grad_enabled(on ? 1 : 0) != 0; }
/** Grad mode off for the calling thread while it lives, as torch.no_grad():
 *  { clt::NoGradGuard g; w -= lr * w.grad(); } */
class NoGradGuard {
public:
  NoGradGuard() noexcept : prev_(clt_set_grad_enabled(0)) {}
  NoGradGuard(const NoGradGuard &) = delete;
  NoGradGuard &operator=(const NoGradGuard &) = delete;
  ~NoGradGuard() { clt_set_grad_enabled(prev_); }

private:
  int prev_;
};

namespace detail {
/* Sole ownership of a C object that has no retain: moves, does not copy. */
template <class T, void (*Release)(T *)> class Unique {
public:
  Unique() noexcept = default;
  explicit Unique(T *p) noexcept : p_(p) {}
  Unique(Unique &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Unique &operator=(Unique &&o) noexcept {
    if (this != &o) {
      Release(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Unique(const Unique &) = delete;
  Unique &operator=(const Unique &) = delete;
  ~Unique() { Release(p_); }
  /** The C handle, borrowed. */
  T *get() const noexcept { return p_; }
  /** Gives up the object to the caller, who releases it. */
  T *release() noexcept { return std::exchange(p_, nullptr); }

protected:
  T *p_ = nullptr;
};
} // namespace detail

/** Named tensors in the order added (a model's weights): clt_params. */
class Params : public detail::Unique<clt_params, clt_params_release> {
public:
  /** An empty set. */
  Params() {
    clt_params *p = nullptr;
    if (detail::check(clt_params_create(&p)))
      p_ = p;
  }
  /** Takes over p. */
  static Params adopt(clt_params *p) noexcept { return Params(p); }
  /** Adds t (another handle to it) under name. */
  Params &add(const std::string &name, const Tensor &t) {
    detail::check(clt_params_add(p_, name.c_str(), t.get()));
    return *this;
  }
  bool contains(const std::string &name) const {
    return clt_params_get(p_, name.c_str()) != nullptr;
  }
  /** The tensor of that name (a new handle); CLT_ERR_INVALID_ARGUMENT if there is none. */
  Tensor operator[](const std::string &name) const {
    clt_tensor *t = clt_params_get(p_, name.c_str());
    if (!t)
      detail::check(clt_set_error(CLT_ERR_INVALID_ARGUMENT, "clt::Params::operator[]",
                                  "no tensor named '%s'", name.c_str()));
    return Tensor::borrow(t);
  }
  size_t size() const { return clt_params_count(p_); }
  std::string name_at(size_t i) const {
    const char *n = clt_params_name_at(p_, i);
    return n ? n : "";
  }
  Tensor tensor_at(size_t i) const { return Tensor::borrow(clt_params_tensor_at(p_, i)); }
  /** Moves every tensor to dev IN PLACE (PyTorch's model.to): handles taken earlier with
   *  operator[] still refer to the old copies. */
  Params &to(Device dev) {
    detail::check(clt_params_to(p_, dev.get()));
    return *this;
  }
  Device device() const {
    clt_device *d = nullptr;
    detail::check(clt_params_device(p_, &d));
    return Device(d);
  }
  /** Writes a safetensors checkpoint that remembers each tensor's device. */
  void save(const std::string &path) const { detail::check(clt_save(path.c_str(), p_)); }
  /** Writes a sharded checkpoint into the existing directory dir: shards of at most
   *  max_shard_bytes of tensor data and model.safetensors.index.json (clt_save_sharded). */
  void save_sharded(const std::string &dir, size_t max_shard_bytes) const {
    detail::check(clt_save_sharded(dir.c_str(), p_, max_shard_bytes));
  }
  /** Reads one back: onto the devices saved, or all onto map_location when it is given. */
  static Params load(const std::string &path, Device map_location = Device()) {
    clt_params *p = nullptr;
    detail::check(clt_load(path.c_str(), map_location.get(), &p));
    return Params(p);
  }

private:
  explicit Params(clt_params *p) noexcept : Unique(p) {}
};

/** A point in a device's queue, for waiting and timing: clt_event. */
/** Optimizers over a Params set (clt_optim_*, docs/autograd.md "Optimizers"), as torch.optim:
 *    clt::optim::AdamW opt(model, 1e-3);
 *    opt.zero_grad(); loss.backward(); opt.step(); */
namespace optim {
/** An optimizer: step(), zero_grad(), save(path), load(path[, map_location]). */
class Optimizer : public detail::Unique<clt_optim, clt_optim_release> {
public:
  /** Updates every parameter that has a gradient, in place (optimizer.step()). */
  void step() { detail::check(clt_optim_step(p_)); }
  /** Sets every parameter's gradient to none (optimizer.zero_grad()). */
  void zero_grad() { detail::check(clt_optim_zero_grad(p_)); }
  /** Writes the state (momentum buffers, moments, steps) as a safetensors file. */
  void save(const std::string &path) const { detail::check(clt_optim_save(path.c_str(), p_)); }
  /** Replaces the state by the one in path, loaded onto map_location when given. */
  void load(const std::string &path, Device map_location = Device()) {
    detail::check(clt_optim_load(path.c_str(), p_, map_location.get()));
  }

protected:
  Optimizer() noexcept = default;
};
/** torch.optim.SGD(params, lr, momentum, weight_decay=...) (dampening 0, no Nesterov). */
class SGD : public Optimizer {
public:
  SGD(Params &params, double lr, double momentum = 0, double weight_decay = 0) {
    clt_optim *o = nullptr;
    if (detail::check(clt_optim_sgd(params.get(), lr, momentum, weight_decay, &o)))
      p_ = o;
  }
};
/** torch.optim.AdamW(params, lr, (beta1, beta2), eps, weight_decay); weight_decay 0 is Adam. */
class AdamW : public Optimizer {
public:
  AdamW(Params &params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 0.01) {
    clt_optim *o = nullptr;
    if (detail::check(clt_optim_adamw(params.get(), lr, beta1, beta2, eps, weight_decay, &o)))
      p_ = o;
  }
};
} // namespace optim

class Event : public detail::Unique<clt_event, clt_event_release> {
public:
  Event() noexcept = default;
  /** Records the point after everything enqueued on dev so far. */
  static Event record(Device dev) {
    clt_event *e = nullptr;
    detail::check(clt_event_record(dev.get(), &e));
    return Event(e);
  }
  static Event adopt(clt_event *e) noexcept { return Event(e); }
  /** Blocks until the device has reached this point. */
  void wait() const { detail::check(clt_event_wait(p_)); }
  /** Milliseconds from this event to end (waits for both). */
  double elapsed_ms(const Event &end) const {
    double ms = 0;
    detail::check(clt_event_elapsed_ms(p_, end.p_, &ms));
    return ms;
  }

private:
  explicit Event(clt_event *e) noexcept : Unique(e) {}
};

/** f's value, or why it failed: from clt::attempt. */
template <class T> struct Result {
  T value{};
  Status status;
  bool ok() const noexcept { return status.ok(); }
  explicit operator bool() const noexcept { return ok(); }
};

/** Runs f (a callable returning a value) and gives its value, or the clt failure it met instead
 *  of throwing (the first one, with CLT_NO_EXCEPTIONS); other exceptions pass through. */
template <class F> auto attempt(F &&f) -> Result<std::invoke_result_t<F>> {
  using R = Result<std::invoke_result_t<F>>;
#ifdef CLT_NO_EXCEPTIONS
  Status before = status();
  clear_status();
  auto v = f();
  Status failed = status();
  detail::first_failure() = before;
  if (!failed.ok())
    return R{{}, failed};
  return R{std::move(v), {}};
#else
  try {
    return R{f(), {}};
  } catch (const Error &e) {
    return R{{}, Status{e.status(), e.what()}};
  }
#endif
}

} // namespace clt

#undef CLT_HPP_METHOD_1_
#undef CLT_HPP_METHOD_2_
#undef CLT_HPP_METHOD_3_
#undef CLT_HPP_METHOD_PLAIN_3_
#undef CLT_HPP_METHOD_INPLACE_2_
#undef CLT_HPP_METHOD_WRAP_INPLACE_2_
#undef CLT_HPP_METHOD_PLAIN_1_
#undef CLT_HPP_METHOD_PLAIN_2_
#undef CLT_HPP_METHOD_WRAP_1_
#undef CLT_HPP_METHOD_COND_3_
#undef CLT_HPP_METHOD_
#undef CLT_HPP_REDUCTIONS
#undef CLT_HPP_REDUCTION_
#undef CLT_HPP_SCALAR_INPLACE_2_
#undef CLT_HPP_SCALAR_WRAP_INPLACE_2_
#undef CLT_HPP_SCALAR_
#undef CLT_HPP_SCALAR_PLAIN_1_
#undef CLT_HPP_SCALAR_PLAIN_2_
#undef CLT_HPP_SCALAR_PLAIN_3_
#undef CLT_HPP_SCALAR_WRAP_1_
#undef CLT_HPP_SCALAR_COND_3_
#undef CLT_HPP_FREE_1_
#undef CLT_HPP_FREE_2_
#undef CLT_HPP_FREE_3_
#undef CLT_HPP_FREE_PLAIN_3_
#undef CLT_HPP_FREE_COND_3_
#undef CLT_HPP_FREE_
#undef CLT_HPP_FREE_PLAIN_1_
#undef CLT_HPP_FREE_PLAIN_2_
#undef CLT_HPP_FREE_WRAP_1_
#undef CLT_HPP_FREE_INPLACE_2_
#undef CLT_HPP_FREE_WRAP_INPLACE_2_


/* ---- your own kernels (issue 14; docs/interop.md) ------------------------------------------ */
#include <initializer_list>
#include <utility>

namespace clt {

/** A user's OpenCL kernel (clt_kernel, include/clt.h): a refcounted handle, copied by reference
 *  like Tensor. Errors throw clt::Error (with CLT_NO_EXCEPTIONS: recorded, see status()).
 *
 *    clt::Kernel k(src, "axpy");
 *    k.arg(0, y, CLT_READ | CLT_WRITE).arg(1, x, CLT_READ).arg(2, 2.0f).launch({n});
 */
class Kernel {
public:
  Kernel() noexcept = default;
  /** clt_kernel_create: source text, kernel name, build options. */
  Kernel(const std::string &source, const std::string &name, const std::string &options = "") {
    clt_kernel *k = nullptr;
    if (detail::check(clt_kernel_create(source.c_str(), name.c_str(), options.c_str(), &k)))
      k_ = k;
  }
  /** clt_kernel_create_file: the source read from path. */
  static Kernel from_file(const std::string &path, const std::string &name,
                          const std::string &options = "") {
    Kernel r;
    clt_kernel *k = nullptr;
    if (detail::check(clt_kernel_create_file(path.c_str(), name.c_str(), options.c_str(), &k)))
      r.k_ = k;
    return r;
  }
  Kernel(const Kernel &o) noexcept : k_(clt_kernel_retain(o.k_)) {}
  Kernel(Kernel &&o) noexcept : k_(o.k_) { o.k_ = nullptr; }
  Kernel &operator=(Kernel o) noexcept {
    std::swap(k_, o.k_);
    return *this;
  }
  ~Kernel() { clt_kernel_release(k_); }
  /** The C handle, still owned by this object. */
  clt_kernel *get() const noexcept { return k_; }
  explicit operator bool() const noexcept { return k_ != nullptr; }
  std::string name() const { return k_ ? clt_kernel_name(k_) : ""; }

  /** clt_kernel_set_tensor: t's buffer, used as access says (CLT_READ, CLT_WRITE, CLT_OFFSET). */
  Kernel &arg(int index, const Tensor &t, int access) {
    detail::check(clt_kernel_set_tensor(k_, index, t.get(), access));
    return *this;
  }
  /** clt_kernel_set_scalar with the bytes of v (an int, float, double, cl_ulong, a struct...). */
  template <class T, std::enable_if_t<std::is_trivially_copyable_v<T> &&
                                          !std::is_pointer_v<T> && !std::is_same_v<T, Tensor>,
                                      int> = 0>
  Kernel &arg(int index, const T &v) {
    detail::check(clt_kernel_set_scalar(k_, index, &v, sizeof v));
    return *this;
  }
  /** clt_kernel_set_local: bytes of __local memory. */
  Kernel &local(int index, size_t bytes) {
    detail::check(clt_kernel_set_local(k_, index, bytes));
    return *this;
  }
  /** clt_kernel_launch over global (1 to 3 sizes) in groups of local (empty: the driver's). */
  void launch(std::initializer_list<size_t> global, std::initializer_list<size_t> local = {}) {
    if (global.size() < 1 || global.size() > 3 || (local.size() && local.size() != global.size())) {
      detail::check(clt_set_error(CLT_ERR_INVALID_ARGUMENT, "clt::Kernel::launch",
                                  "give 1 to 3 global sizes, and as many local sizes or none"));
      return;
    }
    detail::check(clt_kernel_launch(k_, (int)global.size(), global.begin(),
                                    local.size() ? local.begin() : nullptr));
  }

private:
  clt_kernel *k_ = nullptr;
};

} // namespace clt

#endif /* CLT_HPP */
