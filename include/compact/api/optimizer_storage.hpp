// SPDX-License-Identifier: MIT
#pragma once
/// A backend's storage of a compressed optimizer (OptimizerStorage) and the hooks it provides to the bases of
/// api/optimizer_bases.hpp, listed and checked here: a storage that lacks one fails to compile with a message naming
/// it.

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "compact/spec/state.hpp"
#include "compact/api/optimizer_options.hpp"
#include "compact/api/view.hpp"

namespace compact {
namespace detail {

/// A backend's storage of a compressed optimizer: where Ĝ, the moments, the update N and the projectors live, and
/// the few operations that touch that memory. cpu/optimizer.hpp and cuda/optimizer.cuh specialize it. A
/// specialization derives from OptimizerCore<Dist, Moment>, is constructed with OptimizerCore's arguments followed by
/// the backend's own, and provides the hooks OptimizerStorageHooks lists (as protected or public members).
template <class Backend, class Dist, class Scalar>
class OptimizerStorage;

/// The hooks an OptimizerStorage provides to the bases above it, one detector each: has_<hook>() says whether
/// Storage (W's type Scalar) provides it with the signature the bases call. The detectors live in a class derived
/// from Storage, so they see its protected hooks as the bases do; it is never constructed.
///
/// The hooks (Moment is Storage::Moment, Context Storage::Context):
///   ProjectorType; Moment (the moments' scalar: Scalar on the CPU, float on the GPU); Context (what one projector
///   call or copy runs with: the lent Workspace on the CPU, the cudaStream_t on the GPU); kContextIsStream (bool:
///   whether Context is a stream the caller may choose per call, so save_state/load_state take one);
///   default_context() const -> Context;
///   projector_, a std::optional<ProjectorType> (P of step_);
///   grad_view() -> MatrixView<Moment>, and on a const storage -> MatrixView<const Moment>;
///   moment_view(k) -> MatrixView<Moment>, and on a const storage -> MatrixView<const Moment>;
///   update_view() const -> MatrixView<const Scalar>;
///   build_projector(SketchState, Context) const -> ProjectorType (P of the state, in the slot projector_ does not
///   use) and projector_swapped();
///   zero_grad_on(Context), zero_moment(k, Context);
///   host_staging(fn) const -> std::vector<Moment> (a host buffer for one moment: empty on the CPU, whose moments are
///   host memory); moment_on_host(k, staging*, Context) const -> const Moment*; moment_host_target(k, staging*) ->
///   Moment*; commit_moment(k, staging, Context) (the GPU copies through the staging buffer and synchronizes);
///   static check_policy(fn, WindowPolicy) and prepare_policy(fn, WindowPolicy) (a policy's scratch, allocated up
///   front);
///   check_weight(fn, MatrixView<Scalar>) const;
///   step_resources(fn, WindowPolicy, Context) const -> an object with context() -> Context and
///   wide() -> MatrixView<Moment> that holds what one step needs (on the CPU the projectors' workspace and the
///   transfer scratch, on the GPU a device guard).
template <class Storage, class Scalar>
class OptimizerStorageHooks : Storage {
  template <class T, template <class> class Hook, class = void>
  struct Detect : std::false_type {};
  template <class T, template <class> class Hook>
  struct Detect<T, Hook, std::void_t<Hook<T>>> : std::true_type {};
  template <bool B>
  using Require = std::enable_if_t<B>;
  template <class From, class To>
  using Returns = Require<std::is_convertible_v<From, To>>;

  template <class T>
  using ProjectorTypeHook = typename T::ProjectorType;
  template <class T>
  using MomentHook = typename T::Moment;
  template <class T>
  using ContextHook = typename T::Context;
  template <class T>
  using ContextIsStreamHook = Require<std::is_same_v<std::remove_cv_t<decltype(T::kContextIsStream)>, bool>>;
  template <class T>
  using DefaultContextHook = Returns<decltype(std::declval<const T&>().default_context()), typename T::Context>;
  template <class T>
  using ProjectorSlotHook =
      Require<std::is_same_v<decltype(std::declval<T&>().projector_), std::optional<typename T::ProjectorType>>>;
  template <class T>
  using GradViewHook =
      std::void_t<Returns<decltype(std::declval<T&>().grad_view()), MatrixView<typename T::Moment>>,
                  Returns<decltype(std::declval<const T&>().grad_view()), MatrixView<const typename T::Moment>>>;
  template <class T>
  using MomentViewHook =
      std::void_t<Returns<decltype(std::declval<T&>().moment_view(0)), MatrixView<typename T::Moment>>,
                  Returns<decltype(std::declval<const T&>().moment_view(0)), MatrixView<const typename T::Moment>>>;
  template <class T>
  using UpdateViewHook = Returns<decltype(std::declval<const T&>().update_view()), MatrixView<const Scalar>>;
  template <class T>
  using BuildProjectorHook =
      Returns<decltype(std::declval<const T&>().build_projector(SketchState{}, std::declval<typename T::Context>())),
              typename T::ProjectorType>;
  template <class T>
  using ProjectorSwappedHook = decltype(std::declval<T&>().projector_swapped());
  template <class T>
  using ZeroGradOnHook = decltype(std::declval<T&>().zero_grad_on(std::declval<typename T::Context>()));
  template <class T>
  using ZeroMomentHook = decltype(std::declval<T&>().zero_moment(0, std::declval<typename T::Context>()));
  template <class T>
  using HostStagingHook = Returns<decltype(std::declval<const T&>().host_staging("")), std::vector<typename T::Moment>>;
  template <class T>
  using MomentOnHostHook =
      Returns<decltype(std::declval<const T&>().moment_on_host(0, std::declval<std::vector<typename T::Moment>*>(),
                                                               std::declval<typename T::Context>())),
              const typename T::Moment*>;
  template <class T>
  using MomentHostTargetHook =
      Returns<decltype(std::declval<T&>().moment_host_target(0, std::declval<std::vector<typename T::Moment>*>())),
              typename T::Moment*>;
  template <class T>
  using CommitMomentHook = decltype(std::declval<T&>().commit_moment(
      0, std::declval<const std::vector<typename T::Moment>&>(), std::declval<typename T::Context>()));
  template <class T>
  using CheckPolicyHook = decltype(T::check_policy("", WindowPolicy::kKeep));  // static: no object
  template <class T>
  using PreparePolicyHook = decltype(std::declval<T&>().prepare_policy("", WindowPolicy::kKeep));
  template <class T>
  using CheckWeightHook = decltype(std::declval<const T&>().check_weight("", std::declval<MatrixView<Scalar>>()));
  template <class T>
  using StepResourcesHook =
      decltype(std::declval<const T&>().step_resources("", WindowPolicy::kKeep, std::declval<typename T::Context>()));
  template <class T>
  using StepResourcesUseHook =
      std::void_t<Returns<decltype(std::declval<StepResourcesHook<T>&>().context()), typename T::Context>,
                  Returns<decltype(std::declval<StepResourcesHook<T>&>().wide()), MatrixView<typename T::Moment>>>;

  template <template <class> class Hook>
  static constexpr bool has() {
    return Detect<OptimizerStorageHooks, Hook>::value;
  }

 public:
  static constexpr bool has_projector_type() { return has<ProjectorTypeHook>(); }
  static constexpr bool has_moment() { return has<MomentHook>(); }
  static constexpr bool has_context() { return has<ContextHook>(); }
  static constexpr bool has_context_is_stream() { return has<ContextIsStreamHook>(); }
  static constexpr bool has_default_context() { return has<DefaultContextHook>(); }
  static constexpr bool has_projector_slot() { return has<ProjectorSlotHook>(); }
  static constexpr bool has_grad_view() { return has<GradViewHook>(); }
  static constexpr bool has_moment_view() { return has<MomentViewHook>(); }
  static constexpr bool has_update_view() { return has<UpdateViewHook>(); }
  static constexpr bool has_build_projector() { return has<BuildProjectorHook>(); }
  static constexpr bool has_projector_swapped() { return has<ProjectorSwappedHook>(); }
  static constexpr bool has_zero_grad_on() { return has<ZeroGradOnHook>(); }
  static constexpr bool has_zero_moment() { return has<ZeroMomentHook>(); }
  static constexpr bool has_host_staging() { return has<HostStagingHook>(); }
  static constexpr bool has_moment_on_host() { return has<MomentOnHostHook>(); }
  static constexpr bool has_moment_host_target() { return has<MomentHostTargetHook>(); }
  static constexpr bool has_commit_moment() { return has<CommitMomentHook>(); }
  static constexpr bool has_check_policy() { return has<CheckPolicyHook>(); }
  static constexpr bool has_prepare_policy() { return has<PreparePolicyHook>(); }
  static constexpr bool has_check_weight() { return has<CheckWeightHook>(); }
  static constexpr bool has_step_resources() { return has<StepResourcesHook>() && has<StepResourcesUseHook>(); }

  /// Whether Storage provides every hook.
  static constexpr bool all() {
    return has_projector_type() && has_moment() && has_context() && has_context_is_stream() && has_default_context() &&
           has_projector_slot() && has_grad_view() && has_moment_view() && has_update_view() && has_build_projector() &&
           has_projector_swapped() && has_zero_grad_on() && has_zero_moment() && has_host_staging() &&
           has_moment_on_host() && has_moment_host_target() && has_commit_moment() && has_check_policy() &&
           has_prepare_policy() && has_check_weight() && has_step_resources();
  }
};

/// Whether Storage (for W of type Scalar) provides every hook the optimizer bases call.
template <class Storage, class Scalar>
inline constexpr bool is_optimizer_storage_v = OptimizerStorageHooks<Storage, Scalar>::all();

/// Fails to compile, with one message per missing hook, unless Storage provides every hook; true otherwise.
/// CompressedOptimizerBase checks its storage with it before it uses any hook.
template <class Storage, class Scalar>
constexpr bool check_optimizer_storage() {
  using H = OptimizerStorageHooks<Storage, Scalar>;
  static_assert(H::has_projector_type(), "compact optimizer storage: missing hook `using ProjectorType`");
  static_assert(H::has_moment(), "compact optimizer storage: missing hook `using Moment`");
  static_assert(H::has_context(), "compact optimizer storage: missing hook `using Context`");
  static_assert(H::has_context_is_stream(),
                "compact optimizer storage: missing hook `static constexpr bool "
                "kContextIsStream`");
  static_assert(H::has_default_context(), "compact optimizer storage: missing hook `Context default_context() const`");
  static_assert(H::has_projector_slot(),
                "compact optimizer storage: missing hook `std::optional<ProjectorType> "
                "projector_`");
  static_assert(H::has_grad_view(),
                "compact optimizer storage: missing hook `grad_view()` (MatrixView<Moment>; "
                "MatrixView<const Moment> when const)");
  static_assert(H::has_moment_view(),
                "compact optimizer storage: missing hook `moment_view(int k)` "
                "(MatrixView<Moment>; MatrixView<const Moment> when const)");
  static_assert(H::has_update_view(),
                "compact optimizer storage: missing hook `MatrixView<const Scalar> "
                "update_view() const`");
  static_assert(H::has_build_projector(),
                "compact optimizer storage: missing hook `ProjectorType "
                "build_projector(SketchState, Context) const`");
  static_assert(H::has_projector_swapped(), "compact optimizer storage: missing hook `projector_swapped()`");
  static_assert(H::has_zero_grad_on(), "compact optimizer storage: missing hook `zero_grad_on(Context)`");
  static_assert(H::has_zero_moment(), "compact optimizer storage: missing hook `zero_moment(int k, Context)`");
  static_assert(H::has_host_staging(),
                "compact optimizer storage: missing hook `std::vector<Moment> "
                "host_staging(const char* fn) const`");
  static_assert(H::has_moment_on_host(),
                "compact optimizer storage: missing hook `const Moment* moment_on_host(int "
                "k, std::vector<Moment>* staging, Context) const`");
  static_assert(H::has_moment_host_target(),
                "compact optimizer storage: missing hook `Moment* "
                "moment_host_target(int k, std::vector<Moment>* staging)`");
  static_assert(H::has_commit_moment(),
                "compact optimizer storage: missing hook `commit_moment(int k, const "
                "std::vector<Moment>& staging, Context)`");
  static_assert(H::has_check_policy(),
                "compact optimizer storage: missing hook `static check_policy(const char* "
                "fn, WindowPolicy)`");
  static_assert(H::has_prepare_policy(),
                "compact optimizer storage: missing hook `prepare_policy(const char* fn, "
                "WindowPolicy)`");
  static_assert(H::has_check_weight(),
                "compact optimizer storage: missing hook `check_weight(const char* fn, "
                "MatrixView<Scalar> w) const`");
  static_assert(H::has_step_resources(),
                "compact optimizer storage: missing hook `step_resources(const char* fn, "
                "WindowPolicy, Context) const` (returning an object with context() -> "
                "Context and wide() -> MatrixView<Moment>)");
  return H::all();
}

}  // namespace detail
}  // namespace compact
