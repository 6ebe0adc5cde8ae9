// SPDX-License-Identifier: MIT
#pragma once
/// Compressed-space optimizers on the GPU: CompressedAdamW<Cuda, ...> and CompressedSgd<Cuda, ...> keep Ĝ and the
/// m x r moments in fp32 on the device, update them with one fused kernel and apply W through unsketch_grad.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include <cuda_runtime.h>

#include "compact/config.hpp"
#include "compact/spec/state.hpp"
#include "compact/api/checked_size.hpp"
#include "compact/api/optimizer_bases.hpp"
#include "compact/api/optimizer_core.hpp"
#include "compact/api/optimizer_fwd.hpp"
#include "compact/api/optimizer_options.hpp"
#include "compact/api/optimizer_record.hpp"
#include "compact/api/projector_fwd.hpp"
#include "compact/api/view.hpp"
#include "compact/api/workspace.hpp"
#include "compact/kernels/grid.hpp"
#include "compact/kernels/optimizer_step.hpp"
#include "compact/kernels/panel_schedule.hpp"
#include "compact/cuda/backend.cuh"
#include "compact/cuda/block.cuh"
#include "compact/cuda/check.cuh"
#include "compact/cuda/compressed_grad.cuh"
#include "compact/cuda/dense_projector.cuh"
#include "compact/cuda/device.cuh"
#include "compact/cuda/scalar.cuh"
#include "compact/cuda/srht_projector.cuh"

namespace compact {
namespace detail {

/// The fused AdamW step (kernels/optimizer_step.hpp's adamw_step_body): Ĝ read and zeroed, M and V updated, the update
/// N written in W's type.
template <class Out>
__global__ void __launch_bounds__(kOptimizerThreads)
    adamw_step_kernel(float* grad, float* m, float* v, Out* update, index_t count, AdamWStepScalars<float> s) {
  adamw_step_body(this_thread_1d(), grad, m, v, update, count, s, FromFloat<Out>{});
}

/// The fused SGD step (sgd_step_body): Ĝ read and zeroed, B updated, store_scale · B written in W's type
/// (sgd_update_scales).
template <class Out>
__global__ void __launch_bounds__(kOptimizerThreads)
    sgd_step_kernel(float* grad, float* b, Out* update, index_t count, float momentum, bool first, float store_scale) {
  sgd_step_body(this_thread_1d(), grad, b, update, count, momentum, first,
                ScaledEncode<FromFloat<Out>>{store_scale, FromFloat<Out>{}});
}

/// Device memory owned by an optimizer: one cudaMalloc at construction, cudaFree at destruction. Move-only.
class DeviceAllocation {
 public:
  DeviceAllocation() = default;
  DeviceAllocation(const char* fn, const char* what, std::size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    const cudaError_t status = cudaMalloc(&data_, bytes);
    if (status != cudaSuccess) cudaGetLastError();  // an allocation failure is not sticky: clear it
    COMPACT_REQUIRE(status == cudaSuccess, fn << ": cudaMalloc of " << bytes << " bytes for " << what << ": "
                                              << cudaGetErrorName(status) << " (" << cudaGetErrorString(status) << ")");
  }
  DeviceAllocation(DeviceAllocation&& o) noexcept : data_(std::exchange(o.data_, nullptr)), bytes_(o.bytes_) {}
  DeviceAllocation& operator=(DeviceAllocation&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;
  ~DeviceAllocation() {
    if (data_ != nullptr) cudaFree(data_);
  }
  unsigned char* data() const { return static_cast<unsigned char*>(data_); }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// Refuses a pointer that is not device (or managed) memory of `device`: a host pointer or another GPU's memory
/// would fault asynchronously, far from the call.
inline void check_device_pointer(const char* fn, const char* name, const void* p, int device) {
  if (p == nullptr) return;  // check_view has refused a null view that holds elements
  cudaPointerAttributes a{};
  const cudaError_t status = cudaPointerGetAttributes(&a, p);
  if (status != cudaSuccess) cudaGetLastError();
  COMPACT_REQUIRE(status == cudaSuccess && (a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged),
                  fn << ": argument " << name << " at " << p << " is not device memory (cudaPointerGetAttributes: "
                     << (status == cudaSuccess ? (a.type == cudaMemoryTypeHost ? "pinned host memory" : "host memory")
                                               : cudaGetErrorName(status))
                     << ")");
  COMPACT_REQUIRE(a.type == cudaMemoryTypeManaged || a.device == device,
                  fn << ": argument " << name << " is memory of device " << a.device
                     << ", this optimizer runs on device " << device);
}

/// The GPU's storage of a compressed optimizer (the hooks api/optimizer_storage.hpp lists and checks): Ĝ, the moments
/// (fp32 whatever W's type) and the update N (W's type) in one device allocation; the projectors' workspace in two
/// slots (the current window's P and, at a window change, the next one's); Context = the cudaStream_t a call runs on.
///
/// Device memory: state_bytes(m, r, moments) owned by the optimizer (one cudaMalloc at construction, zeroed on the
/// backend's stream), the projectors' workspace (the caller's, or workspace_bytes(n, r) allocated at construction
/// when none is given) and, with kTransferFirst, kTransferRows x n floats of transfer scratch (allocated when the
/// policy is chosen). step() and accumulate_grad() allocate nothing and never synchronize.
///
/// Class invariant: 1 <= r <= n, m >= 1; Ĝ and every moment are m x r fp32, contiguous; `projector_` is P of step
/// `step_` in workspace slot `slot_`.
template <class Dist, class Scalar>
class OptimizerStorage<Cuda, Dist, Scalar> : public OptimizerCore<Dist, float> {
  static_assert(is_cuda_scalar<Scalar>,
                "compact compressed optimizers (Cuda): Scalar (W's type) must be float, __half or __nv_bfloat16");
  using Core = OptimizerCore<Dist, float>;

 public:
  using ProjectorType = Projector<Cuda, Dist, Scalar>;
  using Moment = float;
  /// What a call of the optimizer runs on: a CUDA stream (of the backend's device).
  using Context = cudaStream_t;
  static constexpr bool kContextIsStream = true;
  /// Rows of M per kTransferFirst panel (CompressedOptimizerBase::kTransferRows).
  static constexpr index_t kTransferRows = 64;

  /// Smallest projector workspace for the panel schedule s of the backend the optimizer is given (kOverlap when
  /// Cuda::overlap is set; the SRHT has no panels and ignores s): two slots (current and next window) of
  /// ProjectorType::min_workspace_bytes(n, r[, s]). Needs no device.
  static std::size_t min_workspace_bytes(index_t n, index_t r, PanelSchedule s = PanelSchedule::kSerial) {
    return 2 * align_workspace(projector_bytes(n, r, s, false));
  }
  /// Recommended projector workspace for schedule s: two slots of ProjectorType::workspace_bytes(n, r[, s]). Needs no
  /// device.
  static std::size_t workspace_bytes(index_t n, index_t r, PanelSchedule s = PanelSchedule::kSerial) {
    return 2 * align_workspace(projector_bytes(n, r, s, true));
  }
  /// Bytes of each of the two projector slots in a workspace of `bytes` (half of it, rounded down to the workspace
  /// alignment): at least ProjectorType::min_workspace_bytes(n, r[, s]) when bytes >= min_workspace_bytes(n, r, s).
  static std::size_t slot_bytes(std::size_t bytes) { return bytes / 2 / kWorkspaceAlign * kWorkspaceAlign; }
  /// The panel schedule projectors on `backend` run: kOverlap when it lends an overlap (dense projectors only).
  static PanelSchedule schedule_of(const Cuda& backend) {
    return backend.overlap.enabled() && is_dense_v<Dist> ? PanelSchedule::kOverlap : PanelSchedule::kSerial;
  }
  /// Device memory the optimizer allocates for its state: Ĝ and `moments` moments (m x r fp32 each) and the update
  /// N (m x r of Scalar), each part 256-byte aligned. Needs no device.
  static std::size_t state_bytes(index_t m, index_t r, int moments) {
    const index_t entries = checked_mul("CompressedOptimizer<Cuda>::state_bytes", "m * r", m, r);
    const std::size_t f32 =
        align_workspace(checked_bytes<float>("CompressedOptimizer<Cuda>::state_bytes", "m * r", entries));
    return f32 * std::size_t(1 + moments) + align_workspace(std::size_t(entries) * sizeof(Scalar));
  }

  /// The backend given at construction (default stream, cuBLAS handle) and the device the optimizer lives on.
  const Cuda& backend() const { return backend_; }
  int device() const { return device_; }

  /// Zeroes Ĝ on `cuda_stream` (default: backend().stream).
  void zero_grad() { zero_grad(backend_.stream); }
  void zero_grad(cudaStream_t cuda_stream) { zero_grad_on(cuda_stream); }

  /// Ĝ += dyᵀ z for one micro-batch, in fp32 whatever Act is (float, __half or __nv_bfloat16: compressed_grad into
  /// the fp32 Ĝ, one cublasGemmEx with fp32 compute). dy is B x m, z is B x r (= x P of state()), device memory of
  /// device(). On `cuda_stream` (default: backend().stream), asynchronous.
  template <class Act>
  void accumulate_grad(MatrixView<const Act> dy, MatrixView<const Act> z) {
    accumulate_grad(dy, z, backend_.stream);
  }
  template <class Act>
  void accumulate_grad(MatrixView<const Act> dy, MatrixView<const Act> z, cudaStream_t cuda_stream) {
    static_assert(is_cuda_scalar<Act>, "accumulate_grad: the activations must be float, __half or __nv_bfloat16");
    constexpr const char* fn = "accumulate_grad";
    check_view(fn, "dy", dy, -1, "", m_, "m");
    check_view(fn, "z", z, dy.rows, "dy.rows", r_, "r");
    check_device_pointer(fn, "dy", dy.data, device_);
    check_device_pointer(fn, "z", z.data, device_);
    const DeviceGuard guard(device_, "accumulate_grad: cudaSetDevice");
    compressed_grad<Act, float>(backend_.on(cuda_stream), dy, z, grad_view(), 1.0f);
  }

 protected:
  OptimizerStorage(const char* fn, index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream,
                   std::uint32_t kind, int moments, MomentInfo first, MomentInfo second, Cuda backend,
                   Workspace workspace)
      : Core(fn, m, n, r, schedule, sketch_stream, kind, moments, first, second), backend_(backend) {
    const bool own_workspace = workspace.data == nullptr && workspace.bytes == 0;
    // The projectors run the backend's schedule (two panel buffers with an overlap): the slots are sized for it.
    // Both sizes check the projector's dimensions (n up to kMaxDim, the SRHT's n'), before any CUDA call.
    const PanelSchedule s = schedule_of(backend);
    const std::size_t owned_bytes = own_workspace ? workspace_bytes(n, r, s) : 0;
    if (!own_workspace) {
      check_workspace(fn, "workspace", workspace.data, workspace.bytes, min_workspace_bytes(n, r, s),
                      s == PanelSchedule::kOverlap
                          ? "CompressedAdamW/CompressedSgd<Cuda>::min_workspace_bytes(n, r, PanelSchedule::kOverlap)"
                          : "CompressedAdamW/CompressedSgd<Cuda>::min_workspace_bytes(n, r)");
    }
    // Arguments checked: from here on CUDA is called.
    device_ = current_device(fn);
    state_ = DeviceAllocation(fn, "the optimizer state (Ĝ, moments, update)", state_bytes(m, r, moments));
    if (own_workspace) {
      owned_workspace_ = DeviceAllocation(fn, "the projector workspace", owned_bytes);
      workspace = Workspace{owned_workspace_.data(), owned_workspace_.bytes()};
    }
    slot_bytes_ = slot_bytes(workspace.bytes);
    workspace_ = static_cast<unsigned char*>(workspace.data);
    check_cuda(cudaMemsetAsync(state_.data(), 0, std::size_t(1 + moments) * f32_part(), backend_.stream),
               "CompressedOptimizer: cudaMemsetAsync (zero state)");
    projector_.emplace(make_projector(0, this->state(), backend_));
  }

  // The hooks of api/optimizer_storage.hpp.
  Context default_context() const { return backend_.stream; }
  MatrixView<float> grad_view() const { return MatrixView<float>(grad_ptr(), m_, r_, r_); }
  MatrixView<float> moment_view(int k) const { return MatrixView<float>(moment_ptr(k), m_, r_, r_); }
  MatrixView<const Scalar> update_view() const { return MatrixView<const Scalar>(update_ptr(), m_, r_, r_); }
  /// P of `s` in the slot projector_ does not use (an SRHT projector enqueues its setup there on `cuda_stream`).
  ProjectorType build_projector(SketchState s, Context cuda_stream) const {
    const DeviceGuard guard(device_, "CompressedOptimizer: cudaSetDevice");
    return make_projector(1 - slot_, s, backend_.on(cuda_stream));
  }
  void projector_swapped() { slot_ = 1 - slot_; }
  void zero_grad_on(Context cuda_stream) {
    const DeviceGuard guard(device_, "CompressedOptimizer: cudaSetDevice");
    check_cuda(cudaMemsetAsync(grad_ptr(), 0, std::size_t(m_ * r_) * sizeof(float), cuda_stream),
               "CompressedOptimizer: cudaMemsetAsync (zero Ĝ)");
  }
  void zero_moment(int k, Context cuda_stream) {
    const DeviceGuard guard(device_, "CompressedOptimizer: cudaSetDevice");
    check_cuda(cudaMemsetAsync(moment_ptr(k), 0, std::size_t(m_ * r_) * sizeof(float), cuda_stream),
               "CompressedOptimizer: cudaMemsetAsync (reset moment)");
  }
  /// A host buffer of one moment (m·r floats), through which the record's moments are copied.
  std::vector<float> host_staging(const char* fn) const {
    const std::size_t entries = std::size_t(m_ * r_);
    return allocating(fn, "the host copy of one moment", entries * sizeof(float),
                      [&] { return std::vector<float>(entries); });
  }
  /// Moment k copied to the host buffer on `cuda_stream`, which this call synchronizes.
  const float* moment_on_host(int k, std::vector<float>* staging, Context cuda_stream) const {
    const DeviceGuard guard(device_, "save_state: cudaSetDevice");
    check_cuda(cudaMemcpyAsync(staging->data(), moment_ptr(k), staging->size() * sizeof(float), cudaMemcpyDeviceToHost,
                               cuda_stream),
               "save_state: cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(cuda_stream), "save_state: cudaStreamSynchronize");
    return staging->data();
  }
  float* moment_host_target(int, std::vector<float>* staging) { return staging->data(); }
  /// Copies the host buffer into moment k on `cuda_stream`, which this call synchronizes.
  void commit_moment(int k, const std::vector<float>& staging, Context cuda_stream) {
    const DeviceGuard guard(device_, "load_state: cudaSetDevice");
    check_cuda(cudaMemcpyAsync(moment_ptr(k), staging.data(), staging.size() * sizeof(float), cudaMemcpyHostToDevice,
                               cuda_stream),
               "load_state: cudaMemcpyAsync");
    check_cuda(cudaStreamSynchronize(cuda_stream), "load_state: cudaStreamSynchronize");
  }

  /// Refuses kTransferFirst when W is 16-bit: the transfer runs the fp32 M through P in fp32, with the projectors
  /// of Scalar = float. Needs no device.
  static void check_policy(const char* fn, WindowPolicy policy) {
    COMPACT_REQUIRE(policy != WindowPolicy::kTransferFirst || (std::is_same_v<Scalar, float>),
                    fn << ": options.window_policy = kTransferFirst needs W in fp32 on the GPU (Scalar = float; this "
                          "optimizer has "
                       << CudaScalar<Scalar>::kName
                       << "): the transfer M P_old^T P_new runs the fp32 M through P in fp32. Use kKeep or kReset");
  }

  /// Allocates the transfer scratch (kTransferRows x n floats) when `policy` needs it and it is not there yet.
  void prepare_policy(const char* fn, WindowPolicy policy) {
    if (policy != WindowPolicy::kTransferFirst || transfer_.bytes() != 0) return;
    const DeviceGuard guard(device_, fn);
    transfer_ = DeviceAllocation(fn, "the kTransferFirst scratch (64 x n floats)",
                                 std::size_t(std::min(kTransferRows, m_) * n_) * sizeof(float));
  }

  /// The transfer scratch (kTransferRows x n floats; empty until kTransferFirst is chosen).
  MatrixView<float> transfer_view() const {
    return MatrixView<float>(reinterpret_cast<float*>(transfer_.data()),
                             transfer_.bytes() == 0 ? 0 : std::min(kTransferRows, m_), n_, n_);
  }

  /// What one step holds while it runs: the device made current (restored when the step returns), the CUDA stream it
  /// runs on (its context) and the transfer scratch.
  struct StepResources {
    DeviceGuard guard;
    cudaStream_t stream;
    MatrixView<float> transfer;
    cudaStream_t context() const { return stream; }
    MatrixView<float> wide() const { return transfer; }
  };
  StepResources step_resources(const char*, WindowPolicy, Context cuda_stream) const {
    return StepResources{DeviceGuard(device_, "step: cudaSetDevice"), cuda_stream, transfer_view()};
  }

  /// Checks the weight argument of step() before anything is written.
  void check_weight(const char* fn, const MatrixView<Scalar>& w) const {
    check_view(fn, "w", w, m_, "m", n_, "n");
    check_device_pointer(fn, "w", w.data, device_);
    check_no_alias(fn, "the optimizer state",
                   MatrixView<const unsigned char>(state_.data(), 1, state_.bytes(), index_t(state_.bytes())), "w", w);
    this->check_step_count(fn);
  }

  /// One projector slot for schedule s: the minimum or the recommended size.
  static std::size_t projector_bytes(index_t n, index_t r, PanelSchedule s, bool recommended) {
    return recommended ? ProjectorType::workspace_bytes(n, r, s) : ProjectorType::min_workspace_bytes(n, r, s);
  }

  /// fp32 parts of the state allocation: Ĝ, then the moments, each aligned.
  std::size_t f32_part() const { return align_workspace(std::size_t(m_ * r_) * sizeof(float)); }
  float* grad_ptr() const { return reinterpret_cast<float*>(state_.data()); }
  float* moment_ptr(int k) const { return reinterpret_cast<float*>(state_.data() + std::size_t(1 + k) * f32_part()); }
  Scalar* update_ptr() const {
    return reinterpret_cast<Scalar*>(state_.data() + std::size_t(1 + moments_) * f32_part());
  }

  ProjectorType make_projector(int slot, SketchState s, const Cuda& backend) const {
    return ProjectorType(n_, r_, s, backend, Workspace{workspace_ + std::size_t(slot) * slot_bytes_, slot_bytes_});
  }

  using Core::m_;
  using Core::moments_;
  using Core::n_;
  using Core::r_;
  using Core::step_;
  Cuda backend_;
  int device_ = -1;
  DeviceAllocation state_;
  DeviceAllocation owned_workspace_;
  DeviceAllocation transfer_;
  unsigned char* workspace_ = nullptr;
  std::size_t slot_bytes_ = 0;
  int slot_ = 0;
  std::optional<ProjectorType> projector_;
};

}  // namespace detail

/// AdamW on the GPU with its moments in the compressed space: Ĝ, M and V are m x r fp32 device buffers whatever W's
/// type Scalar (float, __half, __nv_bfloat16). One step is one fused kernel (Ĝ read and zeroed, M and V updated,
/// bias corrections, N written in Scalar: kernels/optimizer_step.hpp, the CPU optimizer's per-element math) and one
/// unsketch_grad that applies W <- (1 - lr·wd) W - lr·alpha·N Pᵀ in place (no m x n temporary). Options, moments and
/// the checkpoint record are the CPU optimizer's (detail::AdamWBase, written once): a CPU CompressedAdamW<Cpu, Dist,
/// float> and this optimizer read each other's records.
///
/// Per step: sketch each micro-batch's input with projector() (or a projector of the activations' type built from
/// state()), accumulate_grad(dy, z) (fp32 accumulation even for bf16 activations), then step(w). Everything runs on
/// the given CUDA stream (default backend().stream), asynchronously; save_state/load_state synchronize it.
template <class Dist, class Scalar>
class CompressedAdamW<Cuda, Dist, Scalar> : public detail::AdamWBase<Cuda, Dist, Scalar> {
  using Base = detail::AdamWBase<Cuda, Dist, Scalar>;

 public:
  /// An optimizer for a weight of m x n compressed to rank r, P at step t from schedule.at(sketch_stream, t), on the
  /// current device. `workspace` is the projectors' (at least min_workspace_bytes(n, r), 256-byte aligned, used by
  /// this optimizer only); left empty, workspace_bytes(n, r) is allocated. Allocates state_bytes(m, r, 2) and zeroes
  /// it on backend.stream. Bad shapes or options throw compact::error before any CUDA call.
  CompressedAdamW(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream, Cuda backend,
                  AdamWOptions options = {}, Workspace workspace = {})
      : Base(m, n, r, schedule, sketch_stream, options, backend, workspace) {}

  /// One AdamW step on w (m x n of Scalar, device memory of device(), any row stride) from Ĝ, on `cuda_stream`
  /// (default backend().stream): the fused kernel, then unsketch_grad into w; then the step is counted and, at a
  /// window change, the policy applied. Every argument is checked and the next window's projector built before any
  /// work is enqueued: a bad argument throws compact::error and changes nothing.
  void step(MatrixView<Scalar> w) { step(w, this->backend_.stream); }
  void step(MatrixView<Scalar> w, cudaStream_t cuda_stream) {
    const AdamWOptions& o = this->options_;
    this->run_step("CompressedAdamW::step", w, cuda_stream, o.reset_second_moment, static_cast<float>(-o.lr * o.alpha),
                   [this](cudaStream_t stream) {
                     const detail::AdamWStepScalars<float> s = this->step_scalars();
                     const index_t count = this->m_ * this->r_;
                     const detail::Launch1d launch = detail::optimizer_step_launch(count);
                     detail::launch_kernel("adamw_step_kernel", [&] {
                       detail::adamw_step_kernel<Scalar>
                           <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, stream>>>(
                               this->grad_ptr(), this->moment_ptr(0), this->moment_ptr(1), this->update_ptr(), count,
                               s);
                     });
                     this->count_update();
                   });
  }
};

/// SGD with momentum on the GPU: the momentum buffer B is m x r fp32 on the device; one fused kernel updates it
/// from Ĝ and writes it in W's type, and unsketch_grad applies it to W. See SgdOptions and CompressedAdamW<Cuda>.
template <class Dist, class Scalar>
class CompressedSgd<Cuda, Dist, Scalar> : public detail::SgdBase<Cuda, Dist, Scalar> {
  using Base = detail::SgdBase<Cuda, Dist, Scalar>;

 public:
  CompressedSgd(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t sketch_stream, Cuda backend,
                SgdOptions options = {}, Workspace workspace = {})
      : Base(m, n, r, schedule, sketch_stream, options, backend, workspace) {}

  void step(MatrixView<Scalar> w) { step(w, this->backend_.stream); }
  void step(MatrixView<Scalar> w, cudaStream_t cuda_stream) {
    const SgdOptions& o = this->options_;
    const detail::SgdUpdateScales scales = detail::sgd_update_scales(std::is_same_v<Scalar, __half>, o.lr, o.alpha);
    this->run_step("CompressedSgd::step", w, cuda_stream, false, scales.gemm_alpha,
                   [this, &o, scales](cudaStream_t stream) {
                     const bool first = this->updates_[0] == 0;
                     const index_t count = this->m_ * this->r_;
                     const detail::Launch1d launch = detail::optimizer_step_launch(count);
                     detail::launch_kernel("sgd_step_kernel", [&] {
                       detail::sgd_step_kernel<Scalar>
                           <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, stream>>>(
                               this->grad_ptr(), this->moment_ptr(0), this->update_ptr(), count,
                               static_cast<float>(o.momentum), first, scales.store_scale);
                     });
                     ++this->updates_[0];
                   });
  }
};

}  // namespace compact
