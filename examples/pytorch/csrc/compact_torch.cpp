// SPDX-License-Identifier: MIT
/// compact_torch._C: compact's projectors, compressed_grad and a byte-exact CPU allocation tracker for PyTorch.
///
/// One translation unit on purpose (a torch extension TU costs a minute or more to compile). CPU tensors go to
/// compact's Eigen backend (float32, float64); CUDA tensors, when the extension is built with CUDA
/// (COMPACT_TORCH_WITH_CUDA), go through cuda_ops.h to compact's CUDA backend (float32, float16, bfloat16) on torch's
/// current stream and cuBLAS handle, with the projector workspace allocated by torch's caching allocator (so
/// torch.cuda.max_memory_allocated counts it). Every check runs before anything is written; failures raise
/// compact_torch.CompactError (a ValueError) carrying compact's message.

#include <torch/extension.h>
#include <c10/core/CPUAllocator.h>
#include <torch/version.h>

#include <compact/compact.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "cuda_ops.h"

#if defined(COMPACT_TORCH_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace compact_torch {
namespace {

using compact::index_t;
namespace py = pybind11;

// ---------------------------------------------------------------------------------------------------------------
// Arguments

enum class DistId { kGaussian, kRademacher, kSrht };

DistId parse_dist(const std::string& s) {
  if (s == "gaussian") return DistId::kGaussian;
  if (s == "rademacher") return DistId::kRademacher;
  if (s == "srht") return DistId::kSrht;
  COMPACT_REQUIRE(false, "argument dist = '" << s << "' is not one of 'gaussian', 'rademacher', 'srht'");
  return DistId::kGaussian;
}

compact::SketchState make_state(std::uint64_t seed, std::uint64_t stream, std::uint64_t window) {
  compact::SketchState s;
  s.seed = seed;
  s.stream = stream;
  s.window = window;
  return s;
}

std::string dtype_name(const torch::Tensor& t) { return std::string(c10::toString(t.scalar_type())); }

/// A 2-D tensor whose rows compact can read in place (unit column stride); a contiguous copy otherwise.
torch::Tensor readable(const char* fn, const char* name, const torch::Tensor& t) {
  COMPACT_REQUIRE(t.defined(), fn << ": argument " << name << " is undefined");
  COMPACT_REQUIRE(t.dim() == 2, fn << ": argument " << name << " must be 2-D, got " << t.dim() << "-D");
  if (t.size(1) <= 1 || (t.stride(1) == 1 && t.stride(0) >= t.size(1))) return t;
  return t.contiguous();
}

/// Checks that every tensor is on `ref`'s device and has `ref`'s dtype, and that the dtype is supported there.
void check_same(const char* fn, const char* ref_name, const torch::Tensor& ref,
                std::initializer_list<std::pair<const char*, const torch::Tensor*>> others) {
  const bool cuda = ref.is_cuda();
  COMPACT_REQUIRE(cuda || ref.device().is_cpu(), fn << ": argument " << ref_name << " is on device " << ref.device()
                                                    << "; compact supports cpu"
#if defined(COMPACT_TORCH_WITH_CUDA)
                                                    << " and cuda"
#else
                                                    << " (this build of compact_torch has no CUDA backend)"
#endif
  );
#if !defined(COMPACT_TORCH_WITH_CUDA)
  COMPACT_REQUIRE(!cuda, fn << ": argument " << ref_name << " is a CUDA tensor (" << ref.device()
                            << ") but this build of compact_torch has no CUDA backend: it was built against a torch "
                               "without CUDA or on a machine without nvcc (compact_torch.build_info() shows the "
                               "build). To get it, install the CUDA toolkit (nvcc; set CUDA_HOME) next to a CUDA "
                               "torch and reinstall: COMPACT_TORCH_CUDA=1 pip install --no-build-isolation "
                               "--force-reinstall ./examples/pytorch");
#endif
  const auto st = ref.scalar_type();
  if (cuda) {
    COMPACT_REQUIRE(st == torch::kFloat || st == torch::kHalf || st == torch::kBFloat16,
                    fn << ": argument " << ref_name << " has dtype " << dtype_name(ref)
                       << "; the CUDA backend supports float32, float16 and bfloat16");
  } else {
    COMPACT_REQUIRE(st == torch::kFloat || st == torch::kDouble,
                    fn << ": argument " << ref_name << " has dtype " << dtype_name(ref)
                       << "; the CPU backend supports float32 and float64");
  }
  for (const auto& [name, t] : others) {
    COMPACT_REQUIRE(t->device() == ref.device(), fn << ": argument " << name << " is on " << t->device()
                                                    << " but argument " << ref_name << " is on " << ref.device());
    COMPACT_REQUIRE(t->scalar_type() == st, fn << ": argument " << name << " has dtype " << dtype_name(*t)
                                               << " but argument " << ref_name << " has dtype " << dtype_name(ref));
  }
}

/// Row stride of a tensor that passed readable() (a single row may carry any stride(0)).
std::int64_t row_stride(const torch::Tensor& t) { return t.size(0) <= 1 ? t.size(1) : t.stride(0); }

template <class T>
compact::MatrixView<T> view_of(const torch::Tensor& t) {
  using Plain = std::remove_const_t<T>;
  return compact::MatrixView<T>(static_cast<Plain*>(t.data_ptr()), t.size(0), t.size(1), row_stride(t));
}

// ---------------------------------------------------------------------------------------------------------------
// CPU backend

/// Calls f(Dist{}, Scalar{}) for a CPU tensor's dtype (float64 -> double, else float) and the distribution.
template <class F>
void dispatch_cpu(DistId dist, torch::ScalarType st, F&& f) {
  const auto with_dist = [&](auto scalar_tag) {
    switch (dist) {
      case DistId::kGaussian:
        return f(compact::Gaussian{}, scalar_tag);
      case DistId::kRademacher:
        return f(compact::Rademacher{}, scalar_tag);
      case DistId::kSrht:
        return f(compact::Srht{}, scalar_tag);
    }
  };
  if (st == torch::kDouble) {
    with_dist(double{});
  } else {
    with_dist(float{});
  }
}

// ---------------------------------------------------------------------------------------------------------------
// CUDA backend (through cuda_ops.h)

#if defined(COMPACT_TORCH_WITH_CUDA)
cuda::Dtype cuda_dtype(torch::ScalarType st) {
  if (st == torch::kHalf) return cuda::Dtype::kHalf;
  if (st == torch::kBFloat16) return cuda::Dtype::kBFloat16;
  return cuda::Dtype::kFloat;
}

cuda::DistId cuda_dist(DistId d) {
  return d == DistId::kGaussian     ? cuda::DistId::kGaussian
         : d == DistId::kRademacher ? cuda::DistId::kRademacher
                                    : cuda::DistId::kSrht;
}

cuda::Context cuda_context() {
  return cuda::Context{static_cast<void*>(at::cuda::getCurrentCUDAStream().stream()),
                       static_cast<void*>(at::cuda::getCurrentCUDABlasHandle())};
}

/// The projector workspace, from torch's caching allocator (released to the cache when the call's work is queued;
/// the allocator's stream semantics keep it reserved for the work already enqueued on the current stream).
torch::Tensor cuda_workspace(DistId dist, torch::ScalarType st, index_t n, index_t r, const torch::Device& device) {
  const std::size_t bytes = cuda::workspace_bytes(cuda_dist(dist), cuda_dtype(st), n, r);
  return torch::empty({static_cast<std::int64_t>(bytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}
#endif

// ---------------------------------------------------------------------------------------------------------------
// Operations

/// Raises unless a projector (n, r, dist) can be built: compact's own checks and messages (1 <= r <= n, ...).
void check_projector(index_t n, index_t r, const std::string& dist_name) {
  const DistId dist = parse_dist(dist_name);
  dispatch_cpu(dist, torch::kFloat, [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, compact::SketchState{});
    (void)p;
  });
}

torch::Tensor sketch(const torch::Tensor& x_in, index_t r, std::uint64_t seed, std::uint64_t stream,
                     std::uint64_t window, const std::string& dist_name) {
  const DistId dist = parse_dist(dist_name);
  const torch::Tensor x = readable("sketch", "x", x_in);
  check_same("sketch", "x", x, {});
  const index_t n = x.size(1);
  const compact::SketchState state = make_state(seed, stream, window);
  if (x.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor ws = cuda_workspace(dist, x.scalar_type(), n, r, x.device());
    torch::Tensor z = torch::empty({x.size(0), r}, x.options());
    cuda::sketch(cuda_dist(dist), cuda_dtype(x.scalar_type()), state, n, r, x.data_ptr(), x.size(0), row_stride(x),
                 z.data_ptr(), r, ws.data_ptr(), static_cast<std::size_t>(ws.numel()), cuda_context());
    return z;
#endif
  }
  torch::Tensor z;
  dispatch_cpu(dist, x.scalar_type(), [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, state);  // checks 1 <= r <= n first
    z = torch::empty({x.size(0), r}, x.options());
    const py::gil_scoped_release no_gil;
    p.sketch(view_of<const Scalar>(x), view_of<Scalar>(z));
  });
  return z;
}

void unsketch_grad_(torch::Tensor& out, const torch::Tensor& g_in, double alpha, double beta, std::uint64_t seed,
                    std::uint64_t stream, std::uint64_t window, const std::string& dist_name) {
  const DistId dist = parse_dist(dist_name);
  const torch::Tensor g = readable("unsketch_grad_", "g", g_in);
  COMPACT_REQUIRE(out.defined() && out.dim() == 2,
                  "unsketch_grad_: argument out must be a 2-D tensor, got " << (out.defined() ? out.dim() : 0) << "-D");
  COMPACT_REQUIRE(out.size(1) <= 1 || (out.stride(1) == 1 && (out.size(0) <= 1 || out.stride(0) >= out.size(1))),
                  "unsketch_grad_: argument out (written in place) must have unit column stride and row stride >= "
                  "columns, got strides ("
                      << out.stride(0) << ", " << out.stride(1) << ")");
  check_same("unsketch_grad_", "out", out, {{"g", &g}});
  const index_t n = out.size(1), r = g.size(1);
  const compact::SketchState state = make_state(seed, stream, window);
  if (out.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(out.device());
    torch::Tensor ws = cuda_workspace(dist, out.scalar_type(), n, r, out.device());
    cuda::unsketch_grad(cuda_dist(dist), cuda_dtype(out.scalar_type()), state, n, r, g.data_ptr(), g.size(0),
                        row_stride(g), out.data_ptr(), row_stride(out), alpha, beta, ws.data_ptr(),
                        static_cast<std::size_t>(ws.numel()), cuda_context());
    return;
#endif
  }
  dispatch_cpu(dist, out.scalar_type(), [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, state);
    const py::gil_scoped_release no_gil;
    p.unsketch_grad(view_of<const Scalar>(g), view_of<Scalar>(out), static_cast<Scalar>(alpha),
                    static_cast<Scalar>(beta));
  });
}

/// P (n x r) with the dtype and device of `like` (any tensor, e.g. an empty one).
torch::Tensor materialize(index_t n, index_t r, std::uint64_t seed, std::uint64_t stream, std::uint64_t window,
                          const std::string& dist_name, const torch::Tensor& like) {
  const DistId dist = parse_dist(dist_name);
  COMPACT_REQUIRE(like.defined(), "materialize: argument like is undefined");
  check_same("materialize", "like", like, {});
  const compact::SketchState state = make_state(seed, stream, window);
  torch::Tensor p;
  if (like.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(like.device());
    torch::Tensor ws = cuda_workspace(dist, like.scalar_type(), n, r, like.device());
    p = torch::empty({n, r}, like.options());
    cuda::materialize(cuda_dist(dist), cuda_dtype(like.scalar_type()), state, n, r, p.data_ptr(), r, ws.data_ptr(),
                      static_cast<std::size_t>(ws.numel()), cuda_context());
    return p;
#endif
  }
  dispatch_cpu(dist, like.scalar_type(), [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> proj(n, r, state);
    p = torch::empty({n, r}, like.options());
    proj.materialize(view_of<Scalar>(p));
  });
  return p;
}

/// g = dy^T z + beta g; a new m x r tensor (beta ignored) when g is None.
torch::Tensor compressed_grad(const torch::Tensor& dy_in, const torch::Tensor& z_in, c10::optional<torch::Tensor> g_in,
                              double beta) {
  const torch::Tensor dy = readable("compressed_grad", "dy", dy_in);
  const torch::Tensor z = readable("compressed_grad", "z", z_in);
  check_same("compressed_grad", "dy", dy, {{"z", &z}});
  COMPACT_REQUIRE(z.size(0) == dy.size(0),
                  "compressed_grad: argument z has " << z.size(0) << " rows, expected dy.rows = " << dy.size(0));
  torch::Tensor g;
  if (g_in.has_value()) {
    g = *g_in;
    COMPACT_REQUIRE(
        g.dim() == 2 && (g.size(1) <= 1 || (g.stride(1) == 1 && (g.size(0) <= 1 || g.stride(0) >= g.size(1)))),
        "compressed_grad: argument g (written in place) must be 2-D with unit column stride");
    check_same("compressed_grad", "dy", dy, {{"g", &g}});
  } else {
    g = torch::empty({dy.size(1), z.size(1)}, dy.options());
    beta = 0.0;
  }
  if (dy.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(dy.device());
    cuda::compressed_grad(cuda_dtype(dy.scalar_type()), dy.data_ptr(), dy.size(0), dy.size(1), row_stride(dy),
                          z.data_ptr(), z.size(1), row_stride(z), g.data_ptr(), row_stride(g), beta, cuda_context());
    return g;
#endif
  }
  dispatch_cpu(DistId::kGaussian, dy.scalar_type(), [&](auto, auto scalar_tag) {
    using Scalar = decltype(scalar_tag);
    const py::gil_scoped_release no_gil;
    compact::compressed_grad<Scalar>(compact::Cpu{}, view_of<const Scalar>(dy), view_of<const Scalar>(z),
                                     view_of<Scalar>(g), static_cast<Scalar>(beta));
  });
  return g;
}

/// The per-call scratch compact's CPU backend allocates outside torch (freed when the call returns): a P panel for
/// Gaussian/Rademacher, one padded row per thread for SRHT. Bytes, for one sketch or unsketch_grad call.
std::int64_t cpu_scratch_bytes(index_t n, index_t r, const std::string& dist_name, bool is_double, bool unsketch) {
  const DistId dist = parse_dist(dist_name);
  std::int64_t bytes = 0;
  dispatch_cpu(dist, is_double ? torch::kDouble : torch::kFloat, [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, compact::SketchState{});
    if constexpr (std::is_same_v<Dist, compact::Srht>) {
      bytes = static_cast<std::int64_t>(p.scratch_bytes_per_thread()) * compact::detail::max_threads();
    } else {
      bytes = static_cast<std::int64_t>(sizeof(Scalar)) * (unsketch ? p.panel_height() * r : n * p.panel_width());
    }
  });
  return bytes;
}

// ---------------------------------------------------------------------------------------------------------------
// Byte-exact CPU allocation tracker

/// Wraps torch's CPU allocator and logs every allocation and free made through it while recording. This counts
/// exactly the bytes torch tensors hold (c10::GetCPUAllocator() serves every CPU tensor torch creates); memory a
/// library mallocs on its own (e.g. compact's scratch, see cpu_scratch_bytes) is not seen.
class Tracker {
 public:
  struct Record {
    std::uint64_t ptr;
    std::int64_t bytes;
    std::int64_t alloc_seq;
    std::int64_t free_seq;  // -1 while live
  };

  void on_alloc(void* ptr, std::int64_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto stale = live_.find(ptr);
    if (stale != live_.end()) {
      // The address is live in our books, so its memory was released without our deleter (a DataPtr whose context
      // was taken over, e.g. by storage sharing): it was free before this allocation. Close it here.
      const std::int64_t seq = ++seq_;
      live_bytes_ -= stale->second.bytes;
      if (recording_ && stale->second.record >= 0) {
        records_[static_cast<std::size_t>(stale->second.record)].free_seq = seq;
      }
      ++missed_frees_;
      live_.erase(stale);
    }
    const std::int64_t seq = ++seq_;
    live_bytes_ += bytes;
    peak_bytes_ = std::max(peak_bytes_, live_bytes_);
    std::int64_t index = -1;
    if (recording_) {
      index = static_cast<std::int64_t>(records_.size());
      records_.push_back(Record{reinterpret_cast<std::uint64_t>(ptr), bytes, seq, -1});
    }
    live_[ptr] = Live{bytes, seq, index};
  }

  void on_free(void* ptr) {
    const std::lock_guard<std::mutex> lock(mutex_);
    const auto it = live_.find(ptr);
    if (it == live_.end()) return;
    const std::int64_t seq = ++seq_;
    live_bytes_ -= it->second.bytes;
    if (recording_ && it->second.record >= 0) records_[static_cast<std::size_t>(it->second.record)].free_seq = seq;
    live_.erase(it);
  }

  /// Starts a log whose first records are every allocation live now (alloc_seq <= the returned sequence number).
  std::int64_t start() {
    const std::lock_guard<std::mutex> lock(mutex_);
    records_.clear();
    for (auto& [ptr, l] : live_) {
      l.record = static_cast<std::int64_t>(records_.size());
      records_.push_back(Record{reinterpret_cast<std::uint64_t>(ptr), l.bytes, l.seq, -1});
    }
    recording_ = true;
    peak_bytes_ = live_bytes_;
    return seq_;
  }

  /// Stops recording; returns the log and sets *peak to the peak live bytes since start().
  std::vector<Record> stop(std::int64_t* peak) {
    const std::lock_guard<std::mutex> lock(mutex_);
    recording_ = false;
    *peak = peak_bytes_;
    for (auto& [ptr, l] : live_) l.record = -1;
    std::vector<Record> out;
    out.swap(records_);
    return out;
  }

  std::int64_t live_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return live_bytes_;
  }
  std::int64_t peak_bytes() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return peak_bytes_;
  }
  void reset_peak() {
    const std::lock_guard<std::mutex> lock(mutex_);
    peak_bytes_ = live_bytes_;
  }
  /// Allocations whose release bypassed the tracker, detected when their address was handed out again.
  std::int64_t missed_frees() const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return missed_frees_;
  }
  bool is_live(std::uint64_t ptr) const {
    const std::lock_guard<std::mutex> lock(mutex_);
    return live_.count(reinterpret_cast<void*>(ptr)) != 0;
  }

 private:
  struct Live {
    std::int64_t bytes;
    std::int64_t seq;
    std::int64_t record;
  };
  mutable std::mutex mutex_;
  std::unordered_map<void*, Live> live_;
  std::vector<Record> records_;
  std::int64_t seq_ = 0, live_bytes_ = 0, peak_bytes_ = 0, missed_frees_ = 0;
  bool recording_ = false;
};

Tracker& tracker() {
  static Tracker* t = new Tracker();  // never destroyed: tensors may be freed during interpreter shutdown
  return *t;
}

class TrackingAllocator final : public c10::Allocator {
 public:
  explicit TrackingAllocator(c10::Allocator* base) : base_(base) {}

  // torch < 2.3 declares `allocate(size_t) const`, torch >= 2.3 `allocate(size_t)` and a pure `copy_data`: define
  // all three without `override` so that the right ones override on either side.
  c10::DataPtr allocate(size_t n) const { return wrap(base_->allocate(n), n); }
  c10::DataPtr allocate(size_t n) { return wrap(base_->allocate(n), n); }
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }

  c10::Allocator* base() const { return base_; }

 private:
  struct Context {
    c10::DataPtr inner;
  };

  static c10::DataPtr wrap(c10::DataPtr inner, size_t n) {
    if (n == 0 || inner.get() == nullptr) return inner;
    void* data = inner.get();
    const c10::Device device = inner.device();
    tracker().on_alloc(data, static_cast<std::int64_t>(n));
    return c10::DataPtr(data, new Context{std::move(inner)}, &TrackingAllocator::release, device);
  }

  static void release(void* ctx) {
    auto* c = static_cast<Context*>(ctx);
    tracker().on_free(c->inner.get());
    delete c;  // frees the memory through the base allocator's deleter
  }

  c10::Allocator* base_;
};

TrackingAllocator* installed_allocator = nullptr;

/// Routes every later CPU tensor allocation through the tracker (idempotent). Tensors allocated before are not seen.
void tracker_install() {
  if (installed_allocator != nullptr) return;
  installed_allocator = new TrackingAllocator(c10::GetCPUAllocator());
  c10::SetCPUAllocator(installed_allocator, /*priority=*/std::numeric_limits<std::uint8_t>::max());
}

bool tracker_installed() { return installed_allocator != nullptr; }

/// Stops recording: (log as int64 rows (ptr, bytes, alloc_seq, free_seq or -1), peak live bytes since start). The
/// peak is read before the log tensor itself is allocated.
std::tuple<torch::Tensor, std::int64_t> tracker_stop() {
  std::int64_t peak = 0;
  const std::vector<Tracker::Record> records = tracker().stop(&peak);
  torch::Tensor out = torch::empty({static_cast<std::int64_t>(records.size()), 4}, torch::kLong);
  auto a = out.accessor<std::int64_t, 2>();
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto k = static_cast<std::int64_t>(i);
    a[k][0] = static_cast<std::int64_t>(records[i].ptr);
    a[k][1] = records[i].bytes;
    a[k][2] = records[i].alloc_seq;
    a[k][3] = records[i].free_seq;
  }
  return {out, peak};
}

bool has_cuda() {
#if defined(COMPACT_TORCH_WITH_CUDA)
  return true;
#else
  return false;
#endif
}

/// What this extension was compiled with; compact_torch.build_info() adds what setup.py recorded.
py::dict build_info() {
  py::dict info;
  info["compact_version"] = std::to_string(COMPACT_VERSION_MAJOR) + "." + std::to_string(COMPACT_VERSION_MINOR) + "." +
                            std::to_string(COMPACT_VERSION_PATCH);
  info["torch_version"] = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
                          std::to_string(TORCH_VERSION_PATCH);  // from the headers compiled against
  info["cplusplus"] = static_cast<long>(__cplusplus);
  info["cuda"] = has_cuda();
  info["blas"] = compact::gemm_engine_available(compact::GemmEngine::kBlas);
  return info;
}

}  // namespace
}  // namespace compact_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace ct = compact_torch;
  m.doc() = "compact's seeded random projections for PyTorch tensors (see compact_torch for the Python API)";
  pybind11::register_exception<compact::error>(m, "CompactError", PyExc_ValueError);
  m.def("check_projector", &ct::check_projector, "raise unless Projector(n, r) of `dist` can be built",
        pybind11::arg("n"), pybind11::arg("r"), pybind11::arg("dist"));
  m.def("sketch", &ct::sketch, "z = x P (x: B x n) for the state (seed, stream, window)", pybind11::arg("x"),
        pybind11::arg("r"), pybind11::arg("seed"), pybind11::arg("stream"), pybind11::arg("window"),
        pybind11::arg("dist"));
  m.def("unsketch_grad_", &ct::unsketch_grad_, "out = alpha g P^T + beta out, in place (g: m x r, out: m x n)",
        pybind11::arg("out"), pybind11::arg("g"), pybind11::arg("alpha"), pybind11::arg("beta"), pybind11::arg("seed"),
        pybind11::arg("stream"), pybind11::arg("window"), pybind11::arg("dist"));
  m.def("materialize", &ct::materialize, "P itself (n x r), for tests and debugging", pybind11::arg("n"),
        pybind11::arg("r"), pybind11::arg("seed"), pybind11::arg("stream"), pybind11::arg("window"),
        pybind11::arg("dist"), pybind11::arg("like"));
  m.def("compressed_grad", &ct::compressed_grad, "g = dy^T z + beta g (a new m x r tensor when g is None)",
        pybind11::arg("dy"), pybind11::arg("z"), pybind11::arg("g") = pybind11::none(), pybind11::arg("beta") = 0.0);
  m.def("cpu_scratch_bytes", &ct::cpu_scratch_bytes, "bytes compact's CPU backend mallocs for one call",
        pybind11::arg("n"), pybind11::arg("r"), pybind11::arg("dist"), pybind11::arg("is_double"),
        pybind11::arg("unsketch"));
  m.def("has_cuda", &ct::has_cuda, "whether this build has compact's CUDA backend");
  m.def("build_info", &ct::build_info, "what this extension was compiled with (see compact_torch.build_info)");
  m.def("tracker_install", &ct::tracker_install, "route later CPU tensor allocations through the byte tracker");
  m.def("tracker_installed", &ct::tracker_installed);
  m.def(
      "tracker_start", [] { return ct::tracker().start(); },
      "start logging allocations (live ones first); returns the current sequence number");
  m.def("tracker_stop", &ct::tracker_stop,
        "stop logging; (rows (ptr, bytes, alloc_seq, free_seq or -1), peak live bytes since start)");
  m.def("tracker_live_bytes", [] { return ct::tracker().live_bytes(); });
  m.def("tracker_peak_bytes", [] { return ct::tracker().peak_bytes(); });
  m.def("tracker_reset_peak", [] { ct::tracker().reset_peak(); });
  m.def("tracker_is_live", [](std::uint64_t ptr) { return ct::tracker().is_live(ptr); });
  m.def("tracker_missed_frees", [] { return ct::tracker().missed_frees(); });
}
