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
#include "compact/core/checked_size.hpp"
#include "compact/core/grid.hpp"
#include "compact/core/optimizer_fwd.hpp"
#include "compact/core/optimizer_math.hpp"
#include "compact/core/optimizer_record.hpp"
#include "compact/core/panel_schedule.hpp"
#include "compact/core/projector_fwd.hpp"
#include "compact/core/state.hpp"
#include "compact/core/view.hpp"
#include "compact/core/workspace.hpp"
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

/// The fused AdamW step (core/optimizer_math.hpp's adamw_step_body): Ĝ read and zeroed, M and V updated, the update
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

/// What both CUDA optimizers share: shapes, schedule and stream, the fp32 Ĝ and moments on the device, the update
/// buffer N (W's type), the two projector slots (the current window's P and, at a window change, the next one's),
/// the window policy and the checkpoint record (the CPU optimizers' format, moments as fp32).
///
/// Device memory: state_bytes(m, r, moments) owned by the optimizer (one cudaMalloc at construction, zeroed on the
/// backend's stream), the projectors' workspace (the caller's, or workspace_bytes(n, r) allocated at construction
/// when none is given) and, with kTransferFirst, kTransferRows x n floats of transfer scratch (allocated when the
/// policy is chosen). step() and accumulate_grad() allocate nothing and never synchronize.
///
/// Class invariant: 1 <= r <= n, m >= 1; Ĝ and every moment are m x r fp32, contiguous; `projector_` is P of step
/// `step_` in workspace slot `slot_`; updates_[k] <= step_ < 2^64 - 1; a moment whose counter is 0 is zero.
template <class Dist, class Scalar>
class CudaOptimizerBase : public OptimizerCore<Dist, float> {
  static_assert(is_cuda_scalar<Scalar>,
                "compact compressed optimizers (Cuda): Scalar (W's type) must be float, __half or __nv_bfloat16");
  using Core = OptimizerCore<Dist, float>;

 public:
  using ProjectorType = Projector<Cuda, Dist, Scalar>;
  /// Rows of M per kTransferFirst panel.
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
    return backend.overlap.enabled() && !std::is_same_v<Dist, Srht> ? PanelSchedule::kOverlap : PanelSchedule::kSerial;
  }
  /// Device memory the optimizer allocates for its state: Ĝ and `moments` moments (m x r fp32 each) and the update
  /// N (m x r of Scalar), each part 256-byte aligned. Needs no device.
  static std::size_t state_bytes(index_t m, index_t r, int moments) {
    const index_t entries = checked_mul("CompressedOptimizer<Cuda>::state_bytes", "m * r", m, r);
    const std::size_t f32 =
        align_workspace(checked_bytes<float>("CompressedOptimizer<Cuda>::state_bytes", "m * r", entries));
    return f32 * std::size_t(1 + moments) + align_workspace(std::size_t(entries) * sizeof(Scalar));
  }

  /// P of the coming step, in the optimizer's workspace.
  const ProjectorType& projector() const { return *projector_; }
  /// The backend given at construction (default stream, cuBLAS handle) and the device the optimizer lives on.
  const Cuda& backend() const { return backend_; }
  int device() const { return device_; }

  /// Ĝ (m x r fp32, device memory): accumulate_grad adds to it, step() reads and zeroes it.
  MatrixView<float> grad() { return MatrixView<float>(grad_ptr(), m_, r_, r_); }
  MatrixView<const float> grad() const { return MatrixView<const float>(grad_ptr(), m_, r_, r_); }
  /// The update N of the last step (m x r of W's type, device memory): AdamW's N, SGD's B rounded to Scalar.
  MatrixView<const Scalar> update() const { return MatrixView<const Scalar>(update_ptr(), m_, r_, r_); }

  /// Zeroes Ĝ on `stream` (default: backend().stream).
  void zero_grad() { zero_grad(backend_.stream); }
  void zero_grad(cudaStream_t stream) {
    const DeviceGuard guard(device_, "zero_grad: cudaSetDevice");
    check_cuda(cudaMemsetAsync(grad_ptr(), 0, std::size_t(m_ * r_) * sizeof(float), stream),
               "zero_grad: cudaMemsetAsync");
  }

  /// Ĝ += dyᵀ z for one micro-batch, in fp32 whatever Act is (float, __half or __nv_bfloat16: compressed_grad into
  /// the fp32 Ĝ, one cublasGemmEx with fp32 compute). dy is B x m, z is B x r (= x P of state()), device memory of
  /// device(). On `stream` (default: backend().stream), asynchronous.
  template <class Act>
  void accumulate_grad(MatrixView<const Act> dy, MatrixView<const Act> z) {
    accumulate_grad(dy, z, backend_.stream);
  }
  template <class Act>
  void accumulate_grad(MatrixView<const Act> dy, MatrixView<const Act> z, cudaStream_t stream) {
    static_assert(is_cuda_scalar<Act>, "accumulate_grad: the activations must be float, __half or __nv_bfloat16");
    constexpr const char* fn = "accumulate_grad";
    check_view(fn, "dy", dy, -1, "", m_, "m");
    check_view(fn, "z", z, dy.rows, "dy.rows", r_, "r");
    check_device_pointer(fn, "dy", dy.data, device_);
    check_device_pointer(fn, "z", z.data, device_);
    const DeviceGuard guard(device_, "accumulate_grad: cudaSetDevice");
    compressed_grad<Act, float>(backend_.on(stream), dy, z, grad(), 1.0f);
  }

 protected:
  CudaOptimizerBase(const char* fn, index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t stream,
                    Cuda backend, Workspace workspace, std::uint32_t kind, int moments, MomentInfo first,
                    MomentInfo second)
      : Core(fn, m, n, r, schedule, stream, kind, moments, first, second), backend_(backend) {
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

  /// One projector slot for schedule s: the minimum or the recommended size.
  static std::size_t projector_bytes(index_t n, index_t r, PanelSchedule s, bool recommended) {
    if constexpr (std::is_same_v<Dist, Srht>) {
      (void)s;
      return recommended ? ProjectorType::workspace_bytes(n, r) : ProjectorType::min_workspace_bytes(n, r);
    } else {
      return recommended ? ProjectorType::workspace_bytes(n, r, s) : ProjectorType::min_workspace_bytes(n, r, s);
    }
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

  /// Checks the weight argument of step() before anything is written.
  void check_weight(const char* fn, const MatrixView<Scalar>& w) const {
    check_view(fn, "w", w, m_, "m", n_, "n");
    check_device_pointer(fn, "w", w.data, device_);
    check_no_overlap(fn, "the optimizer state",
                     MatrixView<const unsigned char>(state_.data(), 1, state_.bytes(), index_t(state_.bytes())), "w",
                     w);
    this->check_step_count(fn);
  }

  /// The projector of the next step, when the window changes: built in the other slot before anything changes (an
  /// SRHT projector enqueues its setup there on `stream`, ordered before the next step's sketches).
  std::optional<ProjectorType> next_projector(cudaStream_t stream) const {
    const SketchState next = schedule_.at(stream_, step_ + 1);
    std::optional<ProjectorType> p;
    if (next != this->state()) p.emplace(make_projector(1 - slot_, next, backend_.on(stream)));
    return p;
  }

  /// W <- (1 - lr·weight_decay) W + gemm_alpha·N Pᵀ through unsketch_grad straight into W (no m x n temporary), with
  /// gemm_alpha = float(-lr·alpha) (AdamW; SGD: sgd_update_scales); beta is computed in double and rounded once to
  /// float, whatever W's type.
  void apply_update(MatrixView<Scalar> w, float gemm_alpha, double lr, double weight_decay, cudaStream_t stream) const {
    projector_->unsketch_grad(update(), w, gemm_alpha, static_cast<float>(1.0 - lr * weight_decay), stream);
  }

  /// Ends a step: counts it and, when the window changes, moves to `next` and applies `policy` to the moments.
  void finish_step(std::optional<ProjectorType>* next, WindowPolicy policy, bool reset_second, cudaStream_t stream) {
    ++step_;
    if (!*next) return;
    next->swap(projector_);  // projector_ is now P of the new window, *next P of the old one
    slot_ = 1 - slot_;
    switch (policy) {
      case WindowPolicy::kKeep:
        break;
      case WindowPolicy::kReset:
        for (int k = 0; k < moments_; ++k) reset_moment(k, stream);
        break;
      case WindowPolicy::kTransferFirst:
        transfer(**next, *projector_, moment_ptr(0), stream);
        if (moments_ > 1 && reset_second) reset_moment(1, stream);
        break;
    }
  }

  void reset_moment(int k, cudaStream_t stream) {
    check_cuda(cudaMemsetAsync(moment_ptr(k), 0, std::size_t(m_ * r_) * sizeof(float), stream),
               "CompressedOptimizer: cudaMemsetAsync (reset moment)");
    updates_[k] = 0;
  }

  /// M <- M P_oldᵀ P_new in row panels of kTransferRows (each unsketched to kTransferRows x n in the transfer
  /// scratch and sketched back), so the scratch is never m x n. Scalar = float only (prepare_policy).
  void transfer(const ProjectorType& p_old, const ProjectorType& p_new, float* moment, cudaStream_t stream) const {
    if constexpr (std::is_same_v<Scalar, float>) {
      float* wide = reinterpret_cast<float*>(transfer_.data());
      for (index_t i0 = 0; i0 < m_; i0 += kTransferRows) {
        const index_t h = std::min(kTransferRows, m_ - i0);
        const MatrixView<float> rows_view(moment + i0 * r_, h, r_, r_);
        const MatrixView<float> wide_view(wide, h, n_, n_);
        p_old.unsketch_grad(MatrixView<const float>(rows_view), wide_view, 1.0f, 0.0f, stream);
        p_new.sketch(MatrixView<const float>(wide_view), rows_view, stream);
      }
    } else {
      (void)p_old;
      (void)p_new;
      (void)moment;
      (void)stream;
    }
  }

  /// The checkpoint record: header, then the fp32 moments copied from the device on `stream`, which this call
  /// synchronizes (the record is complete when it returns).
  std::vector<std::uint8_t> save_record(const char* fn, cudaStream_t stream) const {
    const OptimizerIdentity id = this->identity();
    std::vector<std::uint8_t> out = this->new_record(fn);
    const DeviceGuard guard(device_, "save_state: cudaSetDevice");
    std::vector<float> values = allocating(fn, "the host copy of one moment", id.moment_entries() * sizeof(float),
                                           [&] { return std::vector<float>(id.moment_entries()); });
    for (int k = 0; k < moments_; ++k) {
      check_cuda(
          cudaMemcpyAsync(values.data(), moment_ptr(k), values.size() * sizeof(float), cudaMemcpyDeviceToHost, stream),
          "save_state: cudaMemcpyAsync");
      check_cuda(cudaStreamSynchronize(stream), "save_state: cudaStreamSynchronize");
      std::uint8_t* p = out.data() + kOptimizerHeaderBytes + std::size_t(k) * values.size() * sizeof(float);
      for (std::size_t i = 0; i < values.size(); ++i) put_scalar(p + 4 * i, values[i]);
    }
    return out;
  }

  /// Restores a record of the same identity (from a CUDA optimizer of any W type, or a CPU float optimizer).
  /// Validates every header field and moment value on the host first, then builds the restored step's projector in
  /// the free slot; only then zeroes Ĝ and copies the moments to the device on `stream`, and synchronizes it (all of
  /// these writes are complete when it returns).
  void load_record(const char* fn, const std::uint8_t* bytes, std::size_t size, cudaStream_t stream) {
    const OptimizerIdentity id = this->identity();
    const OptimizerCounters counters = validate_optimizer_record<float>(fn, bytes, size, id);
    std::vector<float> values = allocating(fn, "the host copy of one moment", id.moment_entries() * sizeof(float),
                                           [&] { return std::vector<float>(id.moment_entries()); });
    const DeviceGuard guard(device_, "load_state: cudaSetDevice");
    std::optional<ProjectorType> projector;
    projector.emplace(make_projector(1 - slot_, schedule_.at(stream_, counters.step), backend_.on(stream)));
    // Ĝ is zeroed first, so that the synchronization after the last moment's copy covers it too: when load_state
    // returns, every write it made to the device is complete, as documented.
    check_cuda(cudaMemsetAsync(grad_ptr(), 0, std::size_t(m_ * r_) * sizeof(float), stream),
               "load_state: cudaMemsetAsync");
    for (int k = 0; k < moments_; ++k) {
      const std::uint8_t* p = optimizer_moment_bytes(id, bytes, k);
      for (std::size_t i = 0; i < values.size(); ++i) values[i] = get_scalar<float>(p + 4 * i);
      check_cuda(
          cudaMemcpyAsync(moment_ptr(k), values.data(), values.size() * sizeof(float), cudaMemcpyHostToDevice, stream),
          "load_state: cudaMemcpyAsync");
      check_cuda(cudaStreamSynchronize(stream), "load_state: cudaStreamSynchronize");
    }
    this->restore_counters(counters);
    projector_.swap(projector);
    slot_ = 1 - slot_;
  }

  using Core::m_;
  using Core::moments_;
  using Core::n_;
  using Core::r_;
  using Core::schedule_;
  using Core::step_;
  using Core::stream_;
  using Core::updates_;
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
/// bias corrections, N written in Scalar: core/optimizer_math.hpp, the CPU optimizer's per-element math) and one
/// unsketch_grad that applies W <- (1 - lr·wd) W - lr·alpha·N Pᵀ in place (no m x n temporary). The checkpoint record
/// is the CPU optimizers' (format v2, moments as fp32): a CPU CompressedAdamW<Cpu, Dist, float> and this optimizer
/// read each other's records.
///
/// Per step: sketch each micro-batch's input with projector() (or a projector of the activations' type built from
/// state()), accumulate_grad(dy, z) (fp32 accumulation even for bf16 activations), then step(w). Everything runs on
/// the given stream (default backend().stream), asynchronously; save_state/load_state synchronize their stream.
template <class Dist, class Scalar>
class CompressedAdamW<Cuda, Dist, Scalar> : public detail::CudaOptimizerBase<Dist, Scalar> {
  using Base = detail::CudaOptimizerBase<Dist, Scalar>;

 public:
  /// An optimizer for a weight of m x n compressed to rank r, P at step t from schedule.at(stream, t), on the
  /// current device. `workspace` is the projectors' (at least min_workspace_bytes(n, r), 256-byte aligned, used by
  /// this optimizer only); left empty, workspace_bytes(n, r) is allocated. Allocates state_bytes(m, r, 2) and zeroes
  /// it on backend.stream. Bad shapes or options throw compact::error before any CUDA call.
  CompressedAdamW(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t stream, Cuda backend,
                  AdamWOptions options = {}, Workspace workspace = {})
      : Base((check_options(options), "CompressedAdamW"), m, n, r, schedule, stream, backend, workspace,
             detail::kOptimizerKindAdamW, 2, {"first moment M", false}, {"second moment V", true}),
        options_(options) {
    this->prepare_policy("CompressedAdamW", options_.window_policy);
  }

  const AdamWOptions& options() const { return options_; }
  /// Changes the hyperparameters; validated like the constructor's (kTransferFirst allocates its scratch here).
  void set_options(const AdamWOptions& options) {
    check_options(options);
    this->prepare_policy("CompressedAdamW::set_options", options.window_policy);
    options_ = options;
  }
  void set_lr(double lr) {
    AdamWOptions o = options_;
    o.lr = lr;
    set_options(o);
  }

  /// M and V (m x r fp32, device memory).
  MatrixView<const float> first_moment() const {
    return MatrixView<const float>(this->moment_ptr(0), this->m_, this->r_, this->r_);
  }
  MatrixView<const float> second_moment() const {
    return MatrixView<const float>(this->moment_ptr(1), this->m_, this->r_, this->r_);
  }

  /// One AdamW step on w (m x n of Scalar, device memory of device(), any row stride) from Ĝ, on `stream` (default
  /// backend().stream): the fused kernel, then unsketch_grad into w; then the step is counted and, at a window
  /// change, the policy applied. Every argument is checked and the next window's projector built before any work is
  /// enqueued: a bad argument throws compact::error and changes nothing.
  void step(MatrixView<Scalar> w) { step(w, this->backend_.stream); }
  void step(MatrixView<Scalar> w, cudaStream_t stream) {
    constexpr const char* fn = "CompressedAdamW::step";
    this->check_weight(fn, w);
    const AdamWOptions& o = options_;
    const detail::DeviceGuard guard(this->device_, "CompressedAdamW::step: cudaSetDevice");
    std::optional<typename Base::ProjectorType> next = this->next_projector(stream);
    const std::uint64_t updates[2] = {this->updates_[0] + 1, this->updates_[1] + 1};
    const detail::AdamWStepScalars<float> s = detail::adamw_step_scalars<float>(o, updates[0], updates[1]);
    const index_t count = this->m_ * this->r_;
    const detail::Launch1d launch = detail::optimizer_step_launch(count);
    detail::launch_kernel("adamw_step_kernel", [&] {
      detail::adamw_step_kernel<Scalar>
          <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, stream>>>(
              this->grad_ptr(), this->moment_ptr(0), this->moment_ptr(1), this->update_ptr(), count, s);
    });
    this->updates_[0] = updates[0];
    this->updates_[1] = updates[1];
    this->apply_update(w, static_cast<float>(-o.lr * o.alpha), o.lr, o.weight_decay, stream);
    this->finish_step(&next, o.window_policy, o.reset_second_moment, stream);
  }

  /// The checkpoint record (see CompressedAdamW<Cpu, ...>::save_state), moments as fp32; synchronizes `stream`.
  std::vector<std::uint8_t> save_state() const { return save_state(this->backend_.stream); }
  std::vector<std::uint8_t> save_state(cudaStream_t stream) const {
    return this->save_record("CompressedAdamW::save_state", stream);
  }
  /// Restores a record of the same identity (CUDA, any W type, or CPU float); zeroes Ĝ. A bad record throws
  /// compact::error naming the field before any device memory changes. Synchronizes `stream`.
  void load_state(const std::uint8_t* bytes, std::size_t size) { load_state(bytes, size, this->backend_.stream); }
  void load_state(const std::uint8_t* bytes, std::size_t size, cudaStream_t stream) {
    this->load_record("CompressedAdamW::load_state", bytes, size, stream);
  }
  void load_state(const std::vector<std::uint8_t>& bytes) { load_state(bytes.data(), bytes.size()); }

 private:
  static void check_options(const AdamWOptions& o) {
    constexpr const char* fn = "CompressedAdamW";
    detail::check_update_scales<float>(fn, o.lr, o.alpha, o.weight_decay);
    Base::check_policy(fn, o.window_policy);
    detail::check_adamw_moment_options<float>(fn, o);
  }

  AdamWOptions options_;
};

/// SGD with momentum on the GPU: the momentum buffer B is m x r fp32 on the device; one fused kernel updates it
/// from Ĝ and writes it in W's type, and unsketch_grad applies it to W. See SgdOptions and CompressedAdamW<Cuda>.
template <class Dist, class Scalar>
class CompressedSgd<Cuda, Dist, Scalar> : public detail::CudaOptimizerBase<Dist, Scalar> {
  using Base = detail::CudaOptimizerBase<Dist, Scalar>;

 public:
  CompressedSgd(index_t m, index_t n, index_t r, Schedule schedule, std::uint64_t stream, Cuda backend,
                SgdOptions options = {}, Workspace workspace = {})
      : Base((check_options(options), "CompressedSgd"), m, n, r, schedule, stream, backend, workspace,
             detail::kOptimizerKindSgd, 1, {"momentum buffer B", false}, {"(unused)", false}),
        options_(options) {
    this->prepare_policy("CompressedSgd", options_.window_policy);
  }

  const SgdOptions& options() const { return options_; }
  void set_options(const SgdOptions& options) {
    check_options(options);
    this->prepare_policy("CompressedSgd::set_options", options.window_policy);
    options_ = options;
  }
  void set_lr(double lr) {
    SgdOptions o = options_;
    o.lr = lr;
    set_options(o);
  }

  /// Momentum buffer B (m x r fp32, device memory).
  MatrixView<const float> momentum_buffer() const {
    return MatrixView<const float>(this->moment_ptr(0), this->m_, this->r_, this->r_);
  }

  void step(MatrixView<Scalar> w) { step(w, this->backend_.stream); }
  void step(MatrixView<Scalar> w, cudaStream_t stream) {
    constexpr const char* fn = "CompressedSgd::step";
    this->check_weight(fn, w);
    const detail::DeviceGuard guard(this->device_, "CompressedSgd::step: cudaSetDevice");
    std::optional<typename Base::ProjectorType> next = this->next_projector(stream);
    const bool first = this->updates_[0] == 0;
    const index_t count = this->m_ * this->r_;
    const detail::Launch1d launch = detail::optimizer_step_launch(count);
    const detail::SgdUpdateScales scales =
        detail::sgd_update_scales(std::is_same_v<Scalar, __half>, options_.lr, options_.alpha);
    detail::launch_kernel("sgd_step_kernel", [&] {
      detail::sgd_step_kernel<Scalar>
          <<<static_cast<unsigned>(launch.blocks), static_cast<unsigned>(launch.threads), 0, stream>>>(
              this->grad_ptr(), this->moment_ptr(0), this->update_ptr(), count, static_cast<float>(options_.momentum),
              first, scales.store_scale);
    });
    ++this->updates_[0];
    this->apply_update(w, scales.gemm_alpha, options_.lr, options_.weight_decay, stream);
    this->finish_step(&next, options_.window_policy, false, stream);
  }

  std::vector<std::uint8_t> save_state() const { return save_state(this->backend_.stream); }
  std::vector<std::uint8_t> save_state(cudaStream_t stream) const {
    return this->save_record("CompressedSgd::save_state", stream);
  }
  void load_state(const std::uint8_t* bytes, std::size_t size) { load_state(bytes, size, this->backend_.stream); }
  void load_state(const std::uint8_t* bytes, std::size_t size, cudaStream_t stream) {
    this->load_record("CompressedSgd::load_state", bytes, size, stream);
  }
  void load_state(const std::vector<std::uint8_t>& bytes) { load_state(bytes.data(), bytes.size()); }

 private:
  static void check_options(const SgdOptions& o) {
    constexpr const char* fn = "CompressedSgd";
    detail::check_update_scales<float>(fn, o.lr, o.alpha, o.weight_decay);
    Base::check_policy(fn, o.window_policy);
    detail::check_sgd_momentum(fn, o);
  }

  SgdOptions options_;
};

}  // namespace compact
