// SPDX-License-Identifier: MIT
#pragma once
/// The boundary between the extension's two translation units: raw-pointer CUDA entry points (defined in
/// compact_torch_cuda.cu, compiled by nvcc without any torch header) called from compact_torch.cpp.
///
/// Every pointer is device memory; every matrix is row-major with unit column stride and the given row stride;
/// `stream` is a cudaStream_t and `cublas` a cublasHandle_t, both passed as void* so that this header needs neither
/// the CUDA runtime nor torch. Errors throw compact::error.

#include <cstddef>
#include <cstdint>
#include <memory>

#include <compact/spec/state.hpp>

namespace compact_ext {
namespace cuda {

/// Element types the CUDA backend supports (fp32 accumulation for all of them).
enum class Dtype { kFloat, kHalf, kBFloat16 };
/// The distribution of P: its position in compact::Distributions (api/distributions.hpp), the list both sides of
/// the extension dispatch over (compact_torch.cpp's parse_dist gives it).
using DistId = std::size_t;

/// The launch context of one call: a CUDA stream and a cuBLAS handle (the caller's, i.e. torch's current ones).
struct Context {
  void* stream = nullptr;
  void* cublas = nullptr;
};

/// Device workspace bytes the projector for (n, r) needs: all of P for small dense projections (bounded by
/// compact's panel size), the sample, signs and sort scratch for SRHT.
std::size_t workspace_bytes(DistId dist, Dtype dtype, std::int64_t n, std::int64_t r);

/// A projector kept across calls (compact_torch keeps them in a KeptCache, kept_cache.h): built once on the stream of
/// its first call, its device setup (SRHT: the sample S and the signs d) done there once, then used on any stream,
/// each call ordered after the build by an event. It uses the workspace it was built on, which the keeper holds for
/// as long as the projector lives. Defined in compact_torch_cuda.cu.
class KeptProjector {
 public:
  virtual ~KeptProjector() = default;
  /// z (rows x r) = x (rows x n) P on ctx.stream.
  virtual void sketch(const void* x, std::int64_t rows, std::int64_t x_stride, void* z, std::int64_t z_stride,
                      Context ctx) const = 0;
  /// out (m x n) = alpha g (m x r) P^T + beta out on ctx.stream.
  virtual void unsketch_grad(const void* g, std::int64_t m, std::int64_t g_stride, void* out, std::int64_t out_stride,
                             double alpha, double beta, Context ctx) const = 0;
  /// The stream the projector was built on (its workspace's allocation stream).
  virtual void* build_stream() const = 0;
};

/// Whether the projector of `dist` does device work when it is built (Projector::kSetupOnDevice): only those are
/// worth keeping across calls.
bool sets_up_on_device(DistId dist, Dtype dtype);

/// The projector of (dist, dtype, state, n, r) built on ctx.stream over `workspace` (at least workspace_bytes(dist,
/// dtype, n, r) bytes, which the caller keeps alive as long as the projector).
std::shared_ptr<KeptProjector> keep(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n,
                                    std::int64_t r, void* workspace, std::size_t workspace_size, Context ctx);

/// z (rows x r) = x (rows x n) P.
void sketch(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n, std::int64_t r, const void* x,
            std::int64_t rows, std::int64_t x_stride, void* z, std::int64_t z_stride, void* workspace,
            std::size_t workspace_size, Context ctx);

/// out (m x n) = alpha g (m x r) P^T + beta out.
void unsketch_grad(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n, std::int64_t r, const void* g,
                   std::int64_t m, std::int64_t g_stride, void* out, std::int64_t out_stride, double alpha, double beta,
                   void* workspace, std::size_t workspace_size, Context ctx);

/// p (n x r) = P.
void materialize(DistId dist, Dtype dtype, compact::SketchState state, std::int64_t n, std::int64_t r, void* p,
                 std::int64_t p_stride, void* workspace, std::size_t workspace_size, Context ctx);

/// The sr8 codec (compact/cuda/sr8.cuh): q[count] int8 and scales[ceil(count / 64)] fp32 of x[count] (dtype), with
/// the uniforms of `state`; and its decode into out[count] (dtype).
void sr8_encode(Dtype dtype, const void* x, std::int64_t count, compact::SketchState state, void* q, void* scales,
                Context ctx);
void sr8_decode(Dtype dtype, const void* q, const void* scales, std::int64_t count, void* out, Context ctx);

/// The 8-bit AdamW step (compact/cuda/moment8.cuh) over count values: grad (dtype), the codes m_q (int8), v_q (uint8)
/// and scales (fp32, one per 256) updated in place, then either param (dtype, non-null) updated in place or out (fp32)
/// written with N. The constants are compact::adamw8_consts(lr, b1, b2, eps, weight_decay, step).
void adamw8_step(Dtype dtype, double lr, double b1, double b2, double eps, double weight_decay, std::int64_t step,
                 const void* grad, std::int64_t count, void* m_q, void* m_scales, void* v_q, void* v_scales,
                 void* param, void* out, Context ctx);

/// g (m x r) = dy^T (rows x m) z (rows x r) + beta g; g has dy's type, or float32 when float_out (16-bit
/// activations, fp32 gradient; fp32 accumulation either way).
void compressed_grad(Dtype dtype, bool float_out, const void* dy, std::int64_t rows, std::int64_t m,
                     std::int64_t dy_stride, const void* z, std::int64_t r, std::int64_t z_stride, void* g,
                     std::int64_t g_stride, double beta, Context ctx);

}  // namespace cuda
}  // namespace compact_ext
