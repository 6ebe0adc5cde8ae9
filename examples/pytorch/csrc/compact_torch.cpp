// SPDX-License-Identifier: MIT
/// compact_torch._C: compact's projectors and compressed_grad as PyTorch operators (torch.ops.compact.*).
///
/// One translation unit on purpose (a torch extension TU costs a minute or more to compile). The operators are
/// registered with TORCH_LIBRARY, so autograd Functions, torch.compile (with the fake kernels registered from Python)
/// and the dispatcher see them like torch's own. CPU tensors go to compact's Eigen backend (float32, float64; 16-bit
/// inputs widened to float32); CUDA tensors, when the extension is built with CUDA (COMPACT_TORCH_WITH_CUDA), go
/// through cuda_ops.h to compact's CUDA backend (float32, float16, bfloat16) on torch's current stream and cuBLAS
/// handle, with the projector workspace allocated by torch's caching allocator (so torch.cuda.max_memory_allocated
/// counts it). Every check runs before anything is written; failures raise compact_torch.CompactError (a
/// ValueError) carrying compact's message, through torch.ops as well as through the pybind11 functions.
///
/// The C++ namespace is compact_ext (the Python package is compact_torch, the operators torch.ops.compact.*).
///
/// Nothing here touches torch's allocators: the byte-exact CPU allocation tracker of the memory measurements is a
/// separate module (memtrack.cpp, compact_torch._memtrack) that only measuring scripts load.

#include <torch/extension.h>
#include <torch/library.h>
#include <torch/version.h>

#include <compact/compact.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "cuda_ops.h"
#include "kept_cache.h"

#if defined(COMPACT_TORCH_WITH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#endif

namespace compact_ext {
namespace {

using compact::index_t;
namespace py = pybind11;

// ---------------------------------------------------------------------------------------------------------------
// Arguments

/// A distribution: its position in compact::Distributions, the library's list, which every dispatch below (and the
/// CUDA side's, cuda_ops.h) walks, so a distribution added to the library needs no edit here.
using DistId = std::size_t;

/// The names Python's `dist=` takes: compact::Distributions' names in lower case, in list order (position = DistId).
std::vector<std::string> dist_names() {
  std::vector<std::string> names;
  compact::for_each_distribution([&](auto dist) {
    std::string lower = compact::DistributionTraits<decltype(dist)>::kName;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    names.push_back(lower);
  });
  return names;
}

/// The distribution named `s` (one of dist_names(): "gaussian", "rademacher", "srht").
DistId parse_dist(const std::string& s) {
  const std::vector<std::string> names = dist_names();
  std::string choices;
  for (DistId i = 0; i < names.size(); ++i) {
    if (names[i] == s) return i;
    choices += (i == 0 ? "'" : ", '") + names[i] + "'";
  }
  COMPACT_REQUIRE(false, "argument dist = '" << s << "' is not one of " << choices);
  return names.size();
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

/// Refuses a CUDA tensor when this build has no CUDA backend, saying how to get one (before anything is allocated
/// on its device).
void check_backend([[maybe_unused]] const char* fn, [[maybe_unused]] const char* name,
                   [[maybe_unused]] const torch::Tensor& t) {
#if !defined(COMPACT_TORCH_WITH_CUDA)
  COMPACT_REQUIRE(!t.is_cuda(), fn << ": argument " << name << " is a CUDA tensor (" << t.device()
                                   << ") but this build of compact_torch has no CUDA backend: it was built against a "
                                      "torch without CUDA or on a machine without nvcc (compact_torch.build_info() "
                                      "shows the build). To get it, install the CUDA toolkit (nvcc; set CUDA_HOME) "
                                      "next to a CUDA torch and reinstall: COMPACT_TORCH_CUDA=1 pip install "
                                      "--no-build-isolation --force-reinstall ./examples/pytorch");
#endif
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
  check_backend(fn, ref_name, ref);
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

/// Calls f(Dist{}, Scalar{}) for a CPU tensor's dtype (float64 -> double, else float) and the distribution. f is
/// instantiated for the distributions of compact::CpuDistributions only: one the CPU backend does not implement
/// (supports_v) is refused with its name.
template <class F>
void dispatch_cpu(DistId dist, torch::ScalarType st, F&& f) {
  const auto on_cpu = [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    if constexpr (compact::supports_v<compact::Cpu, Dist>) {
      f(dist_tag, scalar_tag);
    } else {
      COMPACT_REQUIRE(false, "compact_torch: distribution " << compact::DistributionTraits<Dist>::kName
                                                            << " has no CPU implementation");
    }
  };
  const auto with_dist = [&](auto scalar_tag) {
    compact::visit_distribution_at(dist, [&](auto dist_tag) { on_cpu(dist_tag, scalar_tag); });
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

cuda::Context cuda_context() {
  return cuda::Context{static_cast<void*>(at::cuda::getCurrentCUDAStream().stream()),
                       static_cast<void*>(at::cuda::getCurrentCUDABlasHandle())};
}

/// The projector workspace, from torch's caching allocator (released to the cache when the call's work is queued;
/// the allocator's stream semantics keep it reserved for the work already enqueued on the current stream).
torch::Tensor cuda_workspace(DistId dist, torch::ScalarType st, index_t n, index_t r, const torch::Device& device) {
  const std::size_t bytes = cuda::workspace_bytes(dist, cuda_dtype(st), n, r);
  return torch::empty({static_cast<std::int64_t>(bytes)}, torch::TensorOptions().dtype(torch::kUInt8).device(device));
}

/// A projector kept across calls with the workspace it was built on (torch's caching allocator: counted by
/// torch.cuda.memory_allocated while kept).
struct KeptEntry {
  torch::Tensor workspace;
  std::shared_ptr<cuda::KeptProjector> projector;
};
/// (dist, dtype, seed, stream, window, n, r, device): one projector per layer and window.
using KeptKey = std::array<std::uint64_t, 8>;
/// Bounds of the cache: entries (a 7B LLaMA with per-layer sketches has 224 projectors a window), bytes (an SRHT
/// projector with one pass keeps r + n'/8 + a few hundred bytes: 8.5 KiB at n = 4096, r = 1024), and the largest
/// workspace kept (two-pass SRHT workspaces carry 32 MiB of scratch rows and are built per call instead).
constexpr std::size_t kKeptMaxEntries = 1024;
constexpr std::size_t kKeptMaxBytes = std::size_t{64} << 20;
constexpr std::size_t kKeptMaxEntryBytes = std::size_t{4} << 20;

KeptCache<KeptKey, KeptEntry>& kept_cache() {
  static KeptCache<KeptKey, KeptEntry> cache(kKeptMaxEntries, kKeptMaxBytes);
  return cache;
}

/// The kept projector of (dist, dtype, state, n, r) on `device` (built on the current stream on a miss), or null
/// when the projector has no device setup to save (dense: cuda::sets_up_on_device) or its workspace is too large to
/// keep. The caller holds the device guard.
std::shared_ptr<KeptEntry> kept_projector(DistId dist, torch::ScalarType st, const compact::SketchState& state,
                                          index_t n, index_t r, const torch::Device& device) {
  const cuda::Dtype dtype = cuda_dtype(st);
  if (!cuda::sets_up_on_device(dist, dtype)) return nullptr;
  const std::size_t bytes = cuda::workspace_bytes(dist, dtype, n, r);  // compact's shape checks first
  if (bytes > kKeptMaxEntryBytes) return nullptr;
  const KeptKey key{static_cast<std::uint64_t>(dist),
                    static_cast<std::uint64_t>(dtype),
                    state.seed,
                    state.stream,
                    state.window,
                    static_cast<std::uint64_t>(n),
                    static_cast<std::uint64_t>(r),
                    static_cast<std::uint64_t>(device.index())};
  std::shared_ptr<KeptEntry> entry = kept_cache().get(key, [&] {
    auto built = std::make_shared<KeptEntry>();
    built->workspace = cuda_workspace(dist, st, n, r, device);
    built->projector = cuda::keep(dist, dtype, state, n, r, built->workspace.data_ptr(), bytes, cuda_context());
    return std::make_pair(built, bytes);
  });
  // Used on another stream than the build's (autograd's backward stream, a side stream): the allocator must not
  // hand the workspace out again before that stream's work on it is done.
  const c10::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream();
  if (static_cast<void*>(stream.stream()) != entry->projector->build_stream()) {
    c10::cuda::CUDACachingAllocator::recordStream(entry->workspace.storage().data_ptr(), stream);
  }
  return entry;
}
#endif

/// What the kept-projector cache did in this process: {"hits", "builds", "entries", "bytes", "evictions"} (all zero
/// in a build without CUDA).
py::dict projector_cache_info() {
  py::dict info;
#if defined(COMPACT_TORCH_WITH_CUDA)
  const auto s = kept_cache().stats();
  info["hits"] = s.hits;
  info["builds"] = s.builds;
  info["entries"] = s.entries;
  info["bytes"] = s.bytes;
  info["evictions"] = s.evictions;
#else
  for (const char* k : {"hits", "builds", "entries", "bytes", "evictions"}) info[k] = 0;
#endif
  return info;
}

/// Drops every kept projector (their workspaces go back to torch's caching allocator).
void projector_cache_clear() {
#if defined(COMPACT_TORCH_WITH_CUDA)
  kept_cache().clear();
#endif
}

// ---------------------------------------------------------------------------------------------------------------
// Sketch state and errors

/// The sketch state of a layer as the ops take it: a CPU int64 tensor (seed, stream, period, step), read when the op
/// runs, so that a compiled graph takes it as an input instead of baking the step in (no recompilation per step).
/// seed and stream are compact's uint64 values stored bit for bit; window = step / period (0 when period is 0).
compact::SketchState read_state(const char* fn, const torch::Tensor& s) {
  COMPACT_REQUIRE(
      s.defined() && s.device().is_cpu() && s.scalar_type() == torch::kLong && s.dim() == 1 && s.numel() == 4,
      fn << ": argument state must be a CPU int64 tensor of 4 entries (seed, stream, period, step), got "
         << (s.defined() ? std::string(c10::toString(s.scalar_type())) + " of shape " + c10::str(s.sizes()) + " on " +
                               c10::str(s.device())
                         : std::string("an undefined tensor")));
  const torch::Tensor c = s.contiguous();
  const std::int64_t* v = c.data_ptr<std::int64_t>();
  COMPACT_REQUIRE(v[2] >= 0 && v[3] >= 0,
                  fn << ": argument state has period = " << v[2] << " and step = " << v[3] << "; both must be >= 0");
  const std::uint64_t window = v[2] == 0 ? 0 : static_cast<std::uint64_t>(v[3] / v[2]);
  return make_state(static_cast<std::uint64_t>(v[0]), static_cast<std::uint64_t>(v[1]), window);
}

/// compact_torch.CompactError, the Python type every op raises for compact::error (set when the module loads).
PyObject* compact_error_type = nullptr;

/// Carries compact's message through the dispatcher; torch's Python bindings raise it as python_type().
struct CompactPyError : public torch::PyTorchError {
  using torch::PyTorchError::PyTorchError;
  PyObject* python_type() override { return compact_error_type != nullptr ? compact_error_type : PyExc_ValueError; }
};

/// Runs an op body, turning compact::error into CompactPyError (the dispatcher does not know pybind11's
/// translators, so an op called through torch.ops would otherwise raise a RuntimeError).
template <class F>
auto translate_errors(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const compact::error& e) {
    throw CompactPyError(std::string(e.what()));
  }
}

bool is_half(torch::ScalarType st) { return st == torch::kHalf || st == torch::kBFloat16; }

// ---------------------------------------------------------------------------------------------------------------
// Operations (each registered with TORCH_LIBRARY below; fake kernels are registered from Python)

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

/// z = x P (x: B x n). CPU: float32 and float64 natively; float16 and bfloat16 are sketched in float32 and z is
/// rounded once to the input type (fp32 accumulation, as the CUDA backend does for them). CUDA: float32, float16,
/// bfloat16.
torch::Tensor sketch_impl(const torch::Tensor& x_in, index_t r, const compact::SketchState& state, DistId dist) {
  if (!x_in.is_cuda() && is_half(x_in.scalar_type())) {
    return sketch_impl(x_in.to(torch::kFloat), r, state, dist).to(x_in.scalar_type());
  }
  const torch::Tensor x = readable("sketch", "x", x_in);
  check_same("sketch", "x", x, {});
  const index_t n = x.size(1);
  if (x.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor z = torch::empty({x.size(0), r}, x.options());
    if (const auto kept = kept_projector(dist, x.scalar_type(), state, n, r, x.device())) {
      kept->projector->sketch(x.data_ptr(), x.size(0), row_stride(x), z.data_ptr(), r, cuda_context());
      return z;
    }
    torch::Tensor ws = cuda_workspace(dist, x.scalar_type(), n, r, x.device());
    cuda::sketch(dist, cuda_dtype(x.scalar_type()), state, n, r, x.data_ptr(), x.size(0), row_stride(x), z.data_ptr(),
                 r, ws.data_ptr(), static_cast<std::size_t>(ws.numel()), cuda_context());
    return z;
#endif
  }
  torch::Tensor z;
  dispatch_cpu(dist, x.scalar_type(), [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, state);  // checks 1 <= r <= n first
    z = torch::empty({x.size(0), r}, x.options());
    if constexpr (compact::is_dense_v<Dist>) {
      // The dense family's panels: column panels of P (n x w, compact's panel bound) generated by compact, multiplied
      // by torch's GEMM.
      const index_t width = p.panel_width();
      torch::Tensor panel = torch::empty({n, width}, x.options());
      for (index_t j0 = 0; j0 < r; j0 += width) {
        const index_t w = std::min(width, r - j0);
        const torch::Tensor pw = panel.narrow(1, 0, w);
        p.materialize(view_of<Scalar>(pw), 0, j0);
        torch::Tensor zw = z.narrow(1, j0, w);
        torch::mm_out(zw, x, pw);
      }
    } else {
      p.sketch(view_of<const Scalar>(x), view_of<Scalar>(z));  // any other family: the projector's own sketch
    }
  });
  return z;
}

torch::Tensor sketch(const torch::Tensor& x, std::int64_t r, const torch::Tensor& state, c10::string_view dist) {
  return translate_errors(
      [&] { return sketch_impl(x, r, read_state("sketch", state), parse_dist(std::string(dist))); });
}

/// out = alpha g P^T + beta out, in place (g: m x r, out: m x n, one dtype). Bumps out's version counter, so that
/// autograd sees the write (a tensor saved for backward and then updated fails loudly in backward).
void unsketch_grad_(const torch::Tensor& out, const torch::Tensor& g_in, double alpha, double beta,
                    const torch::Tensor& state_t, c10::string_view dist_name) {
  translate_errors([&] {
    const DistId dist = parse_dist(std::string(dist_name));
    const compact::SketchState state = read_state("unsketch_grad_", state_t);
    const torch::Tensor g = readable("unsketch_grad_", "g", g_in);
    COMPACT_REQUIRE(out.defined() && out.dim() == 2, "unsketch_grad_: argument out must be a 2-D tensor, got "
                                                         << (out.defined() ? out.dim() : 0) << "-D");
    COMPACT_REQUIRE(out.size(1) <= 1 || (out.stride(1) == 1 && (out.size(0) <= 1 || out.stride(0) >= out.size(1))),
                    "unsketch_grad_: argument out (written in place) must have unit column stride and row stride >= "
                    "columns, got strides ("
                        << out.stride(0) << ", " << out.stride(1) << ")");
    check_same("unsketch_grad_", "out", out, {{"g", &g}});
    const index_t n = out.size(1), r = g.size(1);
    if (out.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(out.device());
      if (const auto kept = kept_projector(dist, out.scalar_type(), state, n, r, out.device())) {
        kept->projector->unsketch_grad(g.data_ptr(), g.size(0), row_stride(g), out.data_ptr(), row_stride(out), alpha,
                                       beta, cuda_context());
      } else {
        torch::Tensor ws = cuda_workspace(dist, out.scalar_type(), n, r, out.device());
        cuda::unsketch_grad(dist, cuda_dtype(out.scalar_type()), state, n, r, g.data_ptr(), g.size(0), row_stride(g),
                            out.data_ptr(), row_stride(out), alpha, beta, ws.data_ptr(),
                            static_cast<std::size_t>(ws.numel()), cuda_context());
      }
#endif
    } else {
      dispatch_cpu(dist, out.scalar_type(), [&](auto dist_tag, auto scalar_tag) {
        using Dist = decltype(dist_tag);
        using Scalar = decltype(scalar_tag);
        const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, state);
        // compact's own GEMM (not torch's, as the sketch): an update of a row shard of W (FSDP) must give the bits
        // of those rows of the whole update, and torch's CPU GEMM (MKL) does not for every shape.
        p.unsketch_grad(view_of<const Scalar>(g), view_of<Scalar>(out), static_cast<Scalar>(alpha),
                        static_cast<Scalar>(beta));
      });
    }
    if (!out.is_inference()) torch::autograd::impl::bump_version(out);
    return 0;
  });
}

/// P (n x r) with the dtype and device of `like` (any tensor, e.g. an empty one). float16/bfloat16 on the CPU: P in
/// float32 rounded to the type (the entries are fp32 values rounded to nearest even on every backend).
torch::Tensor materialize(std::int64_t n, std::int64_t r, const torch::Tensor& state_t, c10::string_view dist_name,
                          const torch::Tensor& like) {
  return translate_errors([&] {
    const DistId dist = parse_dist(std::string(dist_name));
    const compact::SketchState state = read_state("materialize", state_t);
    COMPACT_REQUIRE(like.defined(), "materialize: argument like is undefined");
    if (!like.is_cuda() && is_half(like.scalar_type())) {
      return materialize(n, r, state_t, dist_name, like.to(torch::kFloat)).to(like.scalar_type());
    }
    check_same("materialize", "like", like, {});
    torch::Tensor p;
    if (like.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(like.device());
      torch::Tensor ws = cuda_workspace(dist, like.scalar_type(), n, r, like.device());
      p = torch::empty({n, r}, like.options());
      cuda::materialize(dist, cuda_dtype(like.scalar_type()), state, n, r, p.data_ptr(), r, ws.data_ptr(),
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
  });
}

/// g = dy^T z + beta g for dy (B x m) and z (B x r) of one dtype, g (m x r) of that dtype or float32 (16-bit
/// activations, fp32 gradient: the products are accumulated in fp32 either way). CPU 16-bit inputs are widened to
/// float32 first.
void compressed_grad_impl(const torch::Tensor& dy_in, const torch::Tensor& z_in, torch::Tensor& g, double beta) {
  const torch::Tensor dy = readable("compressed_grad", "dy", dy_in);
  const torch::Tensor z = readable("compressed_grad", "z", z_in);
  if (!dy.is_cuda() && is_half(dy.scalar_type()) && dy.scalar_type() == z.scalar_type()) {
    COMPACT_REQUIRE(g.scalar_type() == torch::kFloat,
                    "compressed_grad: the gradient of " << dtype_name(dy) << " activations on the CPU must be float32, "
                                                        << "got " << dtype_name(g));
    compressed_grad_impl(dy.to(torch::kFloat), z.to(torch::kFloat), g, beta);
    return;
  }
  check_same("compressed_grad", "dy", dy, {{"z", &z}});
  COMPACT_REQUIRE(z.size(0) == dy.size(0),
                  "compressed_grad: argument z has " << z.size(0) << " rows, expected dy.rows = " << dy.size(0));
  COMPACT_REQUIRE(
      g.dim() == 2 && (g.size(1) <= 1 || (g.stride(1) == 1 && (g.size(0) <= 1 || g.stride(0) >= g.size(1)))),
      "compressed_grad: argument g (written in place) must be 2-D with unit column stride");
  COMPACT_REQUIRE(g.size(0) == dy.size(1) && g.size(1) == z.size(1),
                  "compressed_grad: argument g has shape (" << g.size(0) << ", " << g.size(1) << "), expected (dy.cols"
                                                            << " = " << dy.size(1) << ", z.cols = " << z.size(1)
                                                            << ")");
  COMPACT_REQUIRE(g.device() == dy.device(),
                  "compressed_grad: argument g is on " << g.device() << " but argument dy is on " << dy.device());
  const bool float_out = g.scalar_type() == torch::kFloat && dy.scalar_type() != torch::kFloat;
  COMPACT_REQUIRE(g.scalar_type() == dy.scalar_type() || (float_out && is_half(dy.scalar_type())),
                  "compressed_grad: argument g has dtype " << dtype_name(g) << "; expected " << dtype_name(dy)
                                                           << " (the activations' dtype) or, for 16-bit activations, "
                                                              "Float");
  if (dy.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
    const c10::cuda::CUDAGuard guard(dy.device());
    cuda::compressed_grad(cuda_dtype(dy.scalar_type()), float_out, dy.data_ptr(), dy.size(0), dy.size(1),
                          row_stride(dy), z.data_ptr(), z.size(1), row_stride(z), g.data_ptr(), row_stride(g), beta,
                          cuda_context());
    return;
#endif
  }
  // On the CPU, torch's own GEMM: the engine that forms a full-rank layer's dW (beta = 0: g is not read). compact's
  // argument checks first (the same messages as compact::compressed_grad's; the
  // distribution plays no part, the first one only selects the dispatch's scalar branch).
  dispatch_cpu(0, dy.scalar_type(), [&](auto, auto scalar_tag) {
    using Scalar = decltype(scalar_tag);
    compact::check_compressed_grad_args(view_of<const Scalar>(dy), view_of<const Scalar>(z), view_of<Scalar>(g));
  });
  if (beta == 0.0) {
    torch::mm_out(g, dy.t(), z);
  } else {
    torch::addmm_out(g, g, dy.t(), z, beta, 1.0);
  }
}

/// Ghat = dy^T z, a new m x r tensor of dtype out_dtype (default: dy's).
torch::Tensor compressed_grad(const torch::Tensor& dy, const torch::Tensor& z,
                              c10::optional<c10::ScalarType> out_dtype) {
  return translate_errors([&] {
    COMPACT_REQUIRE(dy.defined() && dy.dim() == 2 && z.defined() && z.dim() == 2,
                    "compressed_grad: arguments dy and z must be 2-D tensors");
    check_backend("compressed_grad", "dy", dy);
    torch::Tensor g = torch::empty({dy.size(1), z.size(1)}, dy.options().dtype(out_dtype.value_or(dy.scalar_type())));
    compressed_grad_impl(dy, z, g, 0.0);
    return g;
  });
}

/// g = dy^T z + beta g, in place.
void compressed_grad_(const torch::Tensor& g_in, const torch::Tensor& dy, const torch::Tensor& z, double beta) {
  translate_errors([&] {
    COMPACT_REQUIRE(g_in.defined(), "compressed_grad_: argument g is undefined");
    torch::Tensor g = g_in;
    compressed_grad_impl(dy, z, g, beta);
    if (!g.is_inference()) torch::autograd::impl::bump_version(g);
    return 0;
  });
}

/// The sr8 codec (docs/spec.md, "The sr8 codec"): (q, scales) of x's values in memory order (x made contiguous),
/// q int8 of x's numel and scales fp32, one per 64 values, on x's device. The uniforms of the stochastic rounding
/// come from (seed, stream, window) as compact's Philox keys them. CPU: float32, and float16 / bfloat16 widened
/// exactly to float32 first; CUDA: float32, float16, bfloat16 natively.
std::tuple<torch::Tensor, torch::Tensor> sr8_encode(const torch::Tensor& x_in, std::int64_t seed, std::int64_t stream,
                                                    std::int64_t window) {
  return translate_errors([&] {
    COMPACT_REQUIRE(x_in.defined(), "sr8_encode: argument x is undefined");
    const auto st = x_in.scalar_type();
    COMPACT_REQUIRE(st == torch::kFloat || st == torch::kHalf || st == torch::kBFloat16,
                    "sr8_encode: argument x must be float32, float16 or bfloat16, got " << c10::toString(st));
    check_backend("sr8_encode", "x", x_in);
    const compact::SketchState state = make_state(static_cast<std::uint64_t>(seed), static_cast<std::uint64_t>(stream),
                                                  static_cast<std::uint64_t>(window));
    const torch::Tensor x = (x_in.is_cuda() ? x_in : x_in.to(torch::kFloat)).contiguous();
    const std::int64_t count = x.numel();
    torch::Tensor q = torch::empty({count}, x.options().dtype(torch::kInt8));
    torch::Tensor scales = torch::empty({compact::sr8_scale_count(count)}, x.options().dtype(torch::kFloat));
    if (x.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(x.device());
      cuda::sr8_encode(cuda_dtype(st), x.data_ptr(), count, state, q.data_ptr(), scales.data_ptr(), cuda_context());
#endif
    } else {
      compact::sr8_encode(compact::Cpu{}, x.data_ptr<float>(), count, state, q.data_ptr<std::int8_t>(),
                          scales.data_ptr<float>());
    }
    return std::make_tuple(q, scales);
  });
}

/// The values of (q, scales) as a 1-D tensor of dtype (default float32) on q's device: q[i] * scales[i / 64].
torch::Tensor sr8_decode(const torch::Tensor& q_in, const torch::Tensor& scales_in,
                         c10::optional<c10::ScalarType> dtype) {
  return translate_errors([&] {
    COMPACT_REQUIRE(q_in.defined() && scales_in.defined(), "sr8_decode: arguments q and scales must be defined");
    COMPACT_REQUIRE(q_in.scalar_type() == torch::kInt8 && scales_in.scalar_type() == torch::kFloat,
                    "sr8_decode: argument q must be int8 and scales float32, got "
                        << c10::toString(q_in.scalar_type()) << " and " << c10::toString(scales_in.scalar_type()));
    COMPACT_REQUIRE(q_in.device() == scales_in.device(), "sr8_decode: arguments q ("
                                                             << q_in.device() << ") and scales (" << scales_in.device()
                                                             << ") must be on one device");
    check_backend("sr8_decode", "q", q_in);
    const torch::Tensor q = q_in.contiguous(), scales = scales_in.contiguous();
    const std::int64_t count = q.numel();
    COMPACT_REQUIRE(scales.numel() == compact::sr8_scale_count(count),
                    "sr8_decode: argument scales has " << scales.numel() << " values; " << count << " values of q need "
                                                       << compact::sr8_scale_count(count));
    const auto out_type = dtype.value_or(torch::kFloat);
    COMPACT_REQUIRE(out_type == torch::kFloat || out_type == torch::kHalf || out_type == torch::kBFloat16,
                    "sr8_decode: argument dtype must be float32, float16 or bfloat16, got " << c10::toString(out_type));
    if (q.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(q.device());
      torch::Tensor out = torch::empty({count}, q.options().dtype(out_type));
      cuda::sr8_decode(cuda_dtype(out_type), q.data_ptr(), scales.data_ptr(), count, out.data_ptr(), cuda_context());
      return out;
#endif
    }
    torch::Tensor out = torch::empty({count}, q.options().dtype(torch::kFloat));
    compact::sr8_decode(compact::Cpu{}, q.data_ptr<std::int8_t>(), scales.data_ptr<float>(), count,
                        out.data_ptr<float>());
    return out_type == torch::kFloat ? out : out.to(out_type);
  });
}

/// One 8-bit AdamW step (docs/spec.md, "The moment8 codec and the 8-bit AdamW step"; compact::adamw8_step): the
/// moments' codes m_q (int8), v_q (uint8) and scales m_scales, v_scales (fp32, one per 256 values) are updated in
/// place from grad; with param given (out None) the dense AdamW update is applied to param in place, with out given
/// (param None) out (fp32) receives N = (m / bc1) / (sqrt(v / bc2) + eps). Every tensor contiguous, on one device.
/// grad: float32, float16 or bfloat16; param has grad's dtype. On the CPU a 16-bit grad with out is widened to fp32
/// (exactly) first. Nothing is written when a check fails.
void adamw8_step(const torch::Tensor& grad, const torch::Tensor& m_q, const torch::Tensor& m_scales,
                 const torch::Tensor& v_q, const torch::Tensor& v_scales, const c10::optional<torch::Tensor>& param_in,
                 const c10::optional<torch::Tensor>& out_in, double lr, double b1, double b2, double eps,
                 double weight_decay, std::int64_t step) {
  translate_errors([&] {
    const char* fn = "adamw8_step";
    const torch::Tensor param = param_in.has_value() ? *param_in : torch::Tensor();
    const torch::Tensor out = out_in.has_value() ? *out_in : torch::Tensor();
    COMPACT_REQUIRE(param.defined() != out.defined(), fn << ": exactly one of the arguments param and out must be "
                                                            "given (param "
                                                         << (param.defined() ? "given" : "None") << ", out "
                                                         << (out.defined() ? "given" : "None") << ")");
    const std::pair<const char*, const torch::Tensor*> all[] = {
        {"grad", &grad},   {"m_q", &m_q}, {"m_scales", &m_scales}, {"v_q", &v_q}, {"v_scales", &v_scales},
        {"param", &param}, {"out", &out}};
    for (const auto& [name, t] : all) {
      if (!t->defined()) continue;
      COMPACT_REQUIRE(t->device() == grad.device(), fn << ": argument " << name << " is on " << t->device()
                                                       << " but argument grad is on " << grad.device());
      COMPACT_REQUIRE(t->is_contiguous(), fn << ": argument " << name << " must be contiguous (strides " << t->strides()
                                             << " for shape " << t->sizes() << ")");
      check_backend(fn, name, *t);
    }
    const auto gt = grad.scalar_type();
    COMPACT_REQUIRE(gt == torch::kFloat || is_half(gt),
                    fn << ": argument grad must be float32, float16 or bfloat16, got " << dtype_name(grad));
    COMPACT_REQUIRE(m_q.scalar_type() == torch::kInt8, fn << ": argument m_q must be int8, got " << dtype_name(m_q));
    COMPACT_REQUIRE(v_q.scalar_type() == torch::kUInt8, fn << ": argument v_q must be uint8, got " << dtype_name(v_q));
    COMPACT_REQUIRE(m_scales.scalar_type() == torch::kFloat,
                    fn << ": argument m_scales must be float32, got " << dtype_name(m_scales));
    COMPACT_REQUIRE(v_scales.scalar_type() == torch::kFloat,
                    fn << ": argument v_scales must be float32, got " << dtype_name(v_scales));
    const std::int64_t count = grad.numel(), blocks = compact::moment8_scale_count(count);
    COMPACT_REQUIRE(m_q.numel() == count && v_q.numel() == count, fn << ": arguments m_q and v_q must have grad's "
                                                                     << count << " values, got " << m_q.numel()
                                                                     << " and " << v_q.numel());
    COMPACT_REQUIRE(m_scales.numel() == blocks && v_scales.numel() == blocks,
                    fn << ": arguments m_scales and v_scales must have ceil(" << count << " / 256) = " << blocks
                       << " values, got " << m_scales.numel() << " and " << v_scales.numel());
    if (param.defined()) {
      COMPACT_REQUIRE(param.scalar_type() == gt, fn << ": argument param has dtype " << dtype_name(param)
                                                    << "; expected grad's " << dtype_name(grad));
      COMPACT_REQUIRE(param.numel() == count,
                      fn << ": argument param has " << param.numel() << " values, grad " << count);
    } else {
      COMPACT_REQUIRE(out.scalar_type() == torch::kFloat,
                      fn << ": argument out must be float32, got " << dtype_name(out));
      COMPACT_REQUIRE(out.numel() == count, fn << ": argument out has " << out.numel() << " values, grad " << count);
    }
    COMPACT_REQUIRE(step >= 1, fn << ": argument step = " << step << " must be >= 1");
    const compact::Adamw8Consts c = compact::adamw8_consts(lr, b1, b2, eps, weight_decay, step);
    void* param_ptr = param.defined() ? param.data_ptr() : nullptr;
    float* out_ptr = out.defined() ? out.data_ptr<float>() : nullptr;
    if (grad.is_cuda()) {
#if defined(COMPACT_TORCH_WITH_CUDA)
      const c10::cuda::CUDAGuard guard(grad.device());
      const torch::Tensor g = (out.defined() && gt != torch::kFloat) ? grad.to(torch::kFloat) : grad;
      cuda::adamw8_step(cuda_dtype(g.scalar_type()), lr, b1, b2, eps, weight_decay, step, g.data_ptr(), count,
                        m_q.data_ptr(), m_scales.data_ptr(), v_q.data_ptr(), v_scales.data_ptr(), param_ptr, out_ptr,
                        cuda_context());
#endif
    } else if (gt == torch::kFloat || out.defined()) {
      const torch::Tensor g = gt == torch::kFloat ? grad : grad.to(torch::kFloat);
      compact::adamw8_step(compact::Cpu{}, c, g.data_ptr<float>(), count, m_q.data_ptr<std::int8_t>(),
                           m_scales.data_ptr<float>(), v_q.data_ptr<std::uint8_t>(), v_scales.data_ptr<float>(),
                           static_cast<float*>(param_ptr), out_ptr);
    } else {
      compact::adamw8_step(compact::Cpu{}, c, gt == torch::kBFloat16 ? compact::Half16::kBf16 : compact::Half16::kFp16,
                           static_cast<const std::uint16_t*>(grad.data_ptr()), count, m_q.data_ptr<std::int8_t>(),
                           m_scales.data_ptr<float>(), v_q.data_ptr<std::uint8_t>(), v_scales.data_ptr<float>(),
                           static_cast<std::uint16_t*>(param_ptr));
    }
    if (param.defined() && !param.is_inference()) torch::autograd::impl::bump_version(param);
    return 0;
  });
}

/// The per-call scratch compact's CPU backend allocates outside torch (freed when the call returns), by family: for
/// the dense family a row panel of P in unsketch_grad and nothing in sketch (its column panels of P are torch tensors,
/// counted by torch's allocator like any temporary); for the transform family (SRHT) one padded row per thread; for
/// another family the projector's workspace_bytes(n, r). Bytes, for one call.
std::int64_t cpu_scratch_bytes(index_t n, index_t r, const std::string& dist_name, bool is_double, bool unsketch) {
  const DistId dist = parse_dist(dist_name);
  std::int64_t bytes = 0;
  dispatch_cpu(dist, is_double ? torch::kDouble : torch::kFloat, [&](auto dist_tag, auto scalar_tag) {
    using Dist = decltype(dist_tag);
    using Scalar = decltype(scalar_tag);
    const compact::Projector<compact::Cpu, Dist, Scalar> p(n, r, compact::SketchState{});
    if constexpr (compact::is_dense_v<Dist>) {
      if (unsketch) bytes = static_cast<std::int64_t>(sizeof(Scalar)) * p.panel_height() * r;  // the family's panel
    } else if constexpr (compact::is_transform_v<Dist>) {
      bytes = static_cast<std::int64_t>(p.scratch_bytes_per_thread()) * compact::cpu_max_threads();
    } else {
      bytes = static_cast<std::int64_t>(p.workspace_bytes(n, r));  // the uniform query: a bound for every call
    }
  });
  return bytes;
}

/// The instruction set of compact's CPU kernels in this process (compact::active_cpu_isa(): "avx512", "avx2",
/// "scalar"; COMPACT_CPU_ISA caps it).
std::string cpu_isa() { return compact::cpu_isa_name(compact::active_cpu_isa()); }

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

/// The kernels of the operators; one function per op serves CPU and (in a CUDA build) CUDA tensors.
void impl_kernels(torch::Library& m) {
  m.impl("sketch", &sketch);
  m.impl("unsketch_grad_", &unsketch_grad_);
  m.impl("materialize", &materialize);
  m.impl("compressed_grad", &compressed_grad);
  m.impl("compressed_grad_", &compressed_grad_);
  m.impl("sr8_encode", &sr8_encode);
  m.impl("sr8_decode", &sr8_decode);
  m.impl("adamw8_step", &adamw8_step);
}

}  // namespace
}  // namespace compact_ext

// The operator library: torch.ops.compact.*. The schemas are what torch.compile traces (with the fake kernels of
// compact_torch/_ext.py); one kernel per op serves CPU and, in a CUDA build, CUDA tensors.
TORCH_LIBRARY(compact, m) {
  m.def("sketch(Tensor x, int rank, Tensor state, str dist) -> Tensor");
  m.def("unsketch_grad_(Tensor(a!) out, Tensor g, float alpha, float beta, Tensor state, str dist) -> ()");
  m.def("materialize(int n, int rank, Tensor state, str dist, Tensor like) -> Tensor");
  m.def("compressed_grad(Tensor dy, Tensor z, ScalarType? out_dtype=None) -> Tensor");
  m.def("compressed_grad_(Tensor(a!) g, Tensor dy, Tensor z, float beta) -> ()");
  m.def("sr8_encode(Tensor x, int seed, int stream, int window) -> (Tensor, Tensor)");
  m.def("sr8_decode(Tensor q, Tensor scales, ScalarType? dtype=None) -> Tensor");
  m.def(
      "adamw8_step(Tensor grad, Tensor(a!) m_q, Tensor(b!) m_scales, Tensor(c!) v_q, Tensor(d!) v_scales, "
      "Tensor(e!)? param, Tensor(f!)? out, float lr, float b1, float b2, float eps, float weight_decay, int step) "
      "-> ()");
}

TORCH_LIBRARY_IMPL(compact, CPU, m) { compact_ext::impl_kernels(m); }

// CUDA tensors reach the same kernels in every build: with the CUDA backend compiled in they run on it; in a CPU-only
// build the kernels' device check raises an error naming the missing backend and how to get it (rather than the
// dispatcher's "could not run 'compact::sketch' with arguments from the 'CUDA' backend").
TORCH_LIBRARY_IMPL(compact, CUDA, m) { compact_ext::impl_kernels(m); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  namespace ext = compact_ext;
  m.doc() =
      "compact's seeded random projections for PyTorch tensors: the ops are torch.ops.compact.* (see "
      "compact_torch for the Python API)";
  static pybind11::exception<compact::error> error_type(m, "CompactError", PyExc_ValueError);
  ext::compact_error_type = error_type.ptr();
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const compact::error& e) {
      PyErr_SetString(ext::compact_error_type, e.what());
    }
  });
  m.def("check_projector", &ext::check_projector, "raise unless Projector(n, r) of `dist` can be built",
        pybind11::arg("n"), pybind11::arg("r"), pybind11::arg("dist"));
  m.def("cpu_scratch_bytes", &ext::cpu_scratch_bytes, "bytes compact's CPU backend mallocs for one call",
        pybind11::arg("n"), pybind11::arg("r"), pybind11::arg("dist"), pybind11::arg("is_double"),
        pybind11::arg("unsketch"));
  m.def("has_cuda", &ext::has_cuda, "whether this build has compact's CUDA backend");
  m.def("distributions", &ext::dist_names,
        "the names `dist` takes: compact::Distributions' names in lower case, in the library's order");
  m.def("build_info", &ext::build_info, "what this extension was compiled with (see compact_torch.build_info)");
  m.def("cpu_isa", &ext::cpu_isa, "the instruction set of compact's CPU kernels: avx512, avx2 or scalar");
  m.def("projector_cache_info", &ext::projector_cache_info,
        "what the cache of CUDA projectors kept across calls did: hits, builds, entries, bytes, evictions");
  m.def("projector_cache_clear", &ext::projector_cache_clear,
        "drop every kept CUDA projector (their workspaces go back to torch's caching allocator)");
}
