// SPDX-License-Identifier: MIT
/// The CUDA half of the compact_torch extension: compact's CUDA projectors and compressed_grad behind the raw-pointer
/// interface of cuda_ops.h. Compiled by nvcc only when torch has CUDA; it includes no torch header (the caller
/// passes torch's current stream, cuBLAS handle and a workspace from torch's caching allocator).

#include <compact/compact.hpp>

#include <memory>
#include <type_traits>

#include "cuda_ops.h"

namespace compact_ext {
namespace cuda {
namespace {

using compact::index_t;

compact::Cuda backend_of(Context ctx) {
  return compact::Cuda{static_cast<cudaStream_t>(ctx.stream), static_cast<cublasHandle_t>(ctx.cublas)};
}

/// Returns f(Dist{}, Scalar{}) for the run-time (dist, dtype); dist is a position in compact::Distributions. f is
/// instantiated for the distributions of compact::CudaDistributions only: one the CUDA backend does not implement
/// (supports_v) is refused with its name.
template <class F>
auto dispatch(DistId dist, Dtype dtype, const F& f) {
  const auto with_scalar = [&](auto dist_tag) {
    using Dist = decltype(dist_tag);
    if constexpr (!compact::supports_v<compact::Cuda, Dist>) {
      COMPACT_REQUIRE(false, "compact_torch (CUDA): distribution " << compact::DistributionTraits<Dist>::kName
                                                                   << " has no CUDA implementation");
      return f(compact::Gaussian{}, float{});  // not reached: gives the lambda f's result type
    } else {
      switch (dtype) {
        case Dtype::kFloat:
          return f(dist_tag, float{});
        case Dtype::kHalf:
          return f(dist_tag, __half{});
        case Dtype::kBFloat16:
          return f(dist_tag, __nv_bfloat16{});
      }
      COMPACT_REQUIRE(false, "compact_torch (CUDA): unknown dtype id " << int(dtype));
      return f(dist_tag, float{});
    }
  };
  using Result = decltype(with_scalar(compact::Gaussian{}));
  if constexpr (std::is_void_v<Result>) {
    compact::visit_distribution_at(dist, with_scalar);
  } else {
    Result result{};
    compact::visit_distribution_at(dist, [&](auto dist_tag) { result = with_scalar(dist_tag); });
    return result;
  }
}

template <class Dist, class Scalar>
std::size_t workspace_of(index_t n, index_t r) {
  return compact::Projector<compact::Cuda, Dist, Scalar>::workspace_bytes(n, r);
}

struct WorkspaceBytes {
  index_t n, r;
  template <class Dist, class Scalar>
  std::size_t operator()(Dist, Scalar) const {
    return workspace_of<Dist, Scalar>(n, r);
  }
};

struct Sketch {
  compact::SketchState state;
  index_t n, r;
  const void* x;
  index_t rows, x_stride;
  void* z;
  index_t z_stride;
  compact::Workspace ws;
  Context ctx;
  template <class Dist, class Scalar>
  int operator()(Dist, Scalar) const {
    const compact::Projector<compact::Cuda, Dist, Scalar> p(n, r, state, backend_of(ctx), ws);
    p.sketch(compact::MatrixView<const Scalar>(static_cast<const Scalar*>(x), rows, n, x_stride),
             compact::MatrixView<Scalar>(static_cast<Scalar*>(z), rows, r, z_stride));
    return 0;
  }
};

struct Unsketch {
  compact::SketchState state;
  index_t n, r;
  const void* g;
  index_t m, g_stride;
  void* out;
  index_t out_stride;
  double alpha, beta;
  compact::Workspace ws;
  Context ctx;
  template <class Dist, class Scalar>
  int operator()(Dist, Scalar) const {
    const compact::Projector<compact::Cuda, Dist, Scalar> p(n, r, state, backend_of(ctx), ws);
    // compact's CUDA API takes alpha and beta in the compute type (fp32 for every element type). torch compiles
    // with __CUDA_NO_HALF_CONVERSIONS__ and friends, so nothing here may lean on an implicit __half <-> float.
    p.unsketch_grad(compact::MatrixView<const Scalar>(static_cast<const Scalar*>(g), m, r, g_stride),
                    compact::MatrixView<Scalar>(static_cast<Scalar*>(out), m, n, out_stride), static_cast<float>(alpha),
                    static_cast<float>(beta));
    return 0;
  }
};

struct Materialize {
  compact::SketchState state;
  index_t n, r;
  void* p;
  index_t p_stride;
  compact::Workspace ws;
  Context ctx;
  template <class Dist, class Scalar>
  int operator()(Dist, Scalar) const {
    const compact::Projector<compact::Cuda, Dist, Scalar> proj(n, r, state, backend_of(ctx), ws);
    proj.materialize(compact::MatrixView<Scalar>(static_cast<Scalar*>(p), n, r, p_stride));
    return 0;
  }
};

struct CompressedGrad {
  bool float_out;
  const void* dy;
  index_t rows, m, dy_stride;
  const void* z;
  index_t r, z_stride;
  void* g;
  index_t g_stride;
  double beta;
  Context ctx;
  template <class Dist, class Scalar>
  int operator()(Dist, Scalar) const {
    const compact::MatrixView<const Scalar> dyv(static_cast<const Scalar*>(dy), rows, m, dy_stride);
    const compact::MatrixView<const Scalar> zv(static_cast<const Scalar*>(z), rows, r, z_stride);
    if (float_out) {
      compact::compressed_grad<Scalar, float>(backend_of(ctx), dyv, zv,
                                              compact::MatrixView<float>(static_cast<float*>(g), m, r, g_stride),
                                              static_cast<float>(beta));
    } else {
      compact::compressed_grad<Scalar, Scalar>(backend_of(ctx), dyv, zv,
                                               compact::MatrixView<Scalar>(static_cast<Scalar*>(g), m, r, g_stride),
                                               static_cast<float>(beta));
    }
    return 0;
  }
};

struct SetsUpOnDevice {
  template <class Dist, class Scalar>
  bool operator()(Dist, Scalar) const {
    return compact::Projector<compact::Cuda, Dist, Scalar>::kSetupOnDevice;
  }
};

/// A kept projector of one (Dist, Scalar): built on the stream of the first call, with an event recorded after its
/// setup; a call on another stream waits for that event on the device (no host wait).
template <class Dist, class Scalar>
class Kept final : public KeptProjector {
 public:
  Kept(compact::SketchState state, index_t n, index_t r, compact::Workspace ws, Context ctx)
      : projector_(n, r, state, backend_of(ctx), ws), stream_(static_cast<cudaStream_t>(ctx.stream)) {
    compact::check_cuda(cudaEventCreateWithFlags(&built_, cudaEventDisableTiming),
                        "compact_torch: keep: cudaEventCreateWithFlags");
    const cudaError_t recorded = cudaEventRecord(built_, stream_);
    if (recorded != cudaSuccess) {
      cudaEventDestroy(built_);
      compact::check_cuda(recorded, "compact_torch: keep: cudaEventRecord");
    }
  }
  ~Kept() override { cudaEventDestroy(built_); }
  Kept(const Kept&) = delete;
  Kept& operator=(const Kept&) = delete;

  void sketch(const void* x, std::int64_t rows, std::int64_t x_stride, void* z, std::int64_t z_stride,
              Context ctx) const override {
    const cudaStream_t stream = after_build(ctx);
    projector_.sketch(
        compact::MatrixView<const Scalar>(static_cast<const Scalar*>(x), rows, projector_.in_dim(), x_stride),
        compact::MatrixView<Scalar>(static_cast<Scalar*>(z), rows, projector_.rank(), z_stride), stream);
  }
  void unsketch_grad(const void* g, std::int64_t m, std::int64_t g_stride, void* out, std::int64_t out_stride,
                     double alpha, double beta, Context ctx) const override {
    const cudaStream_t stream = after_build(ctx);
    projector_.unsketch_grad(
        compact::MatrixView<const Scalar>(static_cast<const Scalar*>(g), m, projector_.rank(), g_stride),
        compact::MatrixView<Scalar>(static_cast<Scalar*>(out), m, projector_.in_dim(), out_stride),
        static_cast<float>(alpha), static_cast<float>(beta), stream);
  }
  void* build_stream() const override { return stream_; }

 private:
  /// The call's stream, ordered after the build when it is another stream than the build's.
  cudaStream_t after_build(Context ctx) const {
    const auto stream = static_cast<cudaStream_t>(ctx.stream);
    if (stream != stream_) {
      compact::check_cuda(cudaStreamWaitEvent(stream, built_, 0), "compact_torch: cudaStreamWaitEvent");
    }
    return stream;
  }

  const compact::Projector<compact::Cuda, Dist, Scalar> projector_;
  const cudaStream_t stream_;
  cudaEvent_t built_ = nullptr;
};

struct Keep {
  compact::SketchState state;
  index_t n, r;
  compact::Workspace ws;
  Context ctx;
  template <class Dist, class Scalar>
  std::shared_ptr<KeptProjector> operator()(Dist, Scalar) const {
    // Only projectors without device setup run GEMMs, which take the cuBLAS handle given at construction: keeping
    // one would use a handle of the thread that built it. None is kept (nothing to save either).
    if constexpr (compact::Projector<compact::Cuda, Dist, Scalar>::kSetupOnDevice) {
      return std::make_shared<Kept<Dist, Scalar>>(state, n, r, ws, ctx);
    } else {
      return nullptr;
    }
  }
};

}  // namespace

bool sets_up_on_device(DistId dist, Dtype dtype) { return dispatch(dist, dtype, SetsUpOnDevice{}); }

std::shared_ptr<KeptProjector> keep(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n,
                                    std::int64_t r, void* workspace, std::size_t workspace_size, Context ctx) {
  return dispatch(dist, dtype, Keep{state, n, r, compact::Workspace{workspace, workspace_size}, ctx});
}

std::size_t workspace_bytes(DistId dist, Dtype dtype, std::int64_t n, std::int64_t r) {
  return dispatch(dist, dtype, WorkspaceBytes{n, r});
}

void sketch(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n, std::int64_t r, const void* x,
            std::int64_t rows, std::int64_t x_stride, void* z, std::int64_t z_stride, void* workspace,
            std::size_t workspace_size, Context ctx) {
  dispatch(dist, dtype,
           Sketch{state, n, r, x, rows, x_stride, z, z_stride, compact::Workspace{workspace, workspace_size}, ctx});
}

void unsketch_grad(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n, std::int64_t r, const void* g,
                   std::int64_t m, std::int64_t g_stride, void* out, std::int64_t out_stride, double alpha, double beta,
                   void* workspace, std::size_t workspace_size, Context ctx) {
  dispatch(dist, dtype,
           Unsketch{state, n, r, g, m, g_stride, out, out_stride, alpha, beta,
                    compact::Workspace{workspace, workspace_size}, ctx});
}

void materialize(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n, std::int64_t r, void* p,
                 std::int64_t p_stride, void* workspace, std::size_t workspace_size, Context ctx) {
  dispatch(dist, dtype, Materialize{state, n, r, p, p_stride, compact::Workspace{workspace, workspace_size}, ctx});
}

void sr8_encode(Dtype dtype, const void* x, std::int64_t count, compact::SketchState state, void* q, void* scales,
                Context ctx) {
  dispatch(0, dtype, [&](auto, auto scalar_tag) {
    using Scalar = decltype(scalar_tag);
    compact::sr8_encode<Scalar>(backend_of(ctx), static_cast<const Scalar*>(x), count, state,
                                static_cast<std::int8_t*>(q), static_cast<float*>(scales),
                                static_cast<cudaStream_t>(ctx.stream));
    return 0;
  });
}

void sr8_decode(Dtype dtype, const void* q, const void* scales, std::int64_t count, void* out, Context ctx) {
  dispatch(0, dtype, [&](auto, auto scalar_tag) {
    using Scalar = decltype(scalar_tag);
    compact::sr8_decode<Scalar>(backend_of(ctx), static_cast<const std::int8_t*>(q), static_cast<const float*>(scales),
                                count, static_cast<Scalar*>(out), static_cast<cudaStream_t>(ctx.stream));
    return 0;
  });
}

void adamw8_step(Dtype dtype, double lr, double b1, double b2, double eps, double weight_decay, std::int64_t step,
                 const void* grad, std::int64_t count, void* m_q, void* m_scales, void* v_q, void* v_scales,
                 void* param, void* out, Context ctx) {
  const compact::Adamw8Consts c = compact::adamw8_consts(lr, b1, b2, eps, weight_decay, step);
  dispatch(0, dtype, [&](auto, auto scalar_tag) {
    using Scalar = decltype(scalar_tag);
    compact::adamw8_step<Scalar>(
        backend_of(ctx), c, static_cast<const Scalar*>(grad), count, static_cast<std::int8_t*>(m_q),
        static_cast<float*>(m_scales), static_cast<std::uint8_t*>(v_q), static_cast<float*>(v_scales),
        static_cast<Scalar*>(param), static_cast<float*>(out), static_cast<cudaStream_t>(ctx.stream));
    return 0;
  });
}

void compressed_grad(Dtype dtype, bool float_out, const void* dy, std::int64_t rows, std::int64_t m,
                     std::int64_t dy_stride, const void* z, std::int64_t r, std::int64_t z_stride, void* g,
                     std::int64_t g_stride, double beta, Context ctx) {
  // The distribution plays no part in compressed_grad; the first one only selects the dispatch's scalar branch.
  dispatch(0, dtype, CompressedGrad{float_out, dy, rows, m, dy_stride, z, r, z_stride, g, g_stride, beta, ctx});
}

}  // namespace cuda
}  // namespace compact_ext
