// SPDX-License-Identifier: MIT
#pragma once
/// Fake optimizer storages for the hook checks of api/optimizer_storage.hpp: one that provides every hook (protected,
/// as the backends' do) and variants that each lack or misdeclare one.

#include <compact/api/optimizer_options.hpp>
#include <compact/api/optimizer_storage.hpp>
#include <compact/api/view.hpp>
#include <compact/spec/state.hpp>

#include <optional>
#include <vector>

namespace fake {

using compact::MatrixView;
using compact::SketchState;
using compact::WindowPolicy;

struct Projector {};

/// The step resources a storage returns: the context and the transfer scratch.
struct Resources {
  int context() const { return 0; }
  MatrixView<float> wide() const { return {}; }
};
/// Step resources without wide().
struct ResourcesWithoutWide {
  int context() const { return 0; }
};

/// Every hook but the ones the variants below replace, protected as in cpu/optimizer.hpp and cuda/optimizer.cuh.
class Common {
 public:
  using ProjectorType = Projector;
  using Moment = float;
  using Context = int;
  static constexpr bool kContextIsStream = false;

 protected:
  Context default_context() const { return 0; }
  MatrixView<float> grad_view() { return {}; }
  MatrixView<const float> grad_view() const { return {}; }
  MatrixView<float> moment_view(int) { return {}; }
  MatrixView<const float> moment_view(int) const { return {}; }
  MatrixView<const float> update_view() const { return {}; }
  Projector build_projector(SketchState, Context) const { return {}; }
  void projector_swapped() {}
  void zero_grad_on(Context) {}
  std::vector<float> host_staging(const char*) const { return {}; }
  const float* moment_on_host(int, std::vector<float>*, Context) const { return nullptr; }
  float* moment_host_target(int, std::vector<float>*) { return nullptr; }
  void commit_moment(int, const std::vector<float>&, Context) {}
  void prepare_policy(const char*, WindowPolicy) {}
  void check_weight(const char*, const MatrixView<float>&) const {}

  std::optional<Projector> projector_;
};

/// Every hook.
class Complete : public Common {
 protected:
  void zero_moment(int, Context) {}
  static void check_policy(const char*, WindowPolicy) {}
  Resources step_resources(const char*, WindowPolicy, Context) const { return {}; }
};

/// No zero_moment.
class WithoutZeroMoment : public Common {
 protected:
  static void check_policy(const char*, WindowPolicy) {}
  Resources step_resources(const char*, WindowPolicy, Context) const { return {}; }
};

/// check_policy is not static (the bases call it before the storage exists).
class WithMemberCheckPolicy : public Common {
 protected:
  void zero_moment(int, Context) {}
  void check_policy(const char*, WindowPolicy) {}
  Resources step_resources(const char*, WindowPolicy, Context) const { return {}; }
};

/// step_resources returns an object without wide().
class WithPartialResources : public Common {
 protected:
  void zero_moment(int, Context) {}
  static void check_policy(const char*, WindowPolicy) {}
  ResourcesWithoutWide step_resources(const char*, WindowPolicy, Context) const { return {}; }
};

/// zero_moment takes no context.
class WithWrongZeroMoment : public Common {
 protected:
  void zero_moment(int) {}
  static void check_policy(const char*, WindowPolicy) {}
  Resources step_resources(const char*, WindowPolicy, Context) const { return {}; }
};

}  // namespace fake
