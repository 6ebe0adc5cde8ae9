// SPDX-License-Identifier: MIT
/// The optimizer storage's hooks as a checked concept (api/optimizer_storage.hpp): the detectors find each hook of a
/// complete storage, protected as the backends declare them, and miss one that is absent or has another signature.
/// optimizer_storage_refused.cpp shows the bases refuse such a storage with a message naming the hook.
#include <doctest/doctest.h>

#include "api/optimizer_storage_fakes.hpp"

namespace {

using compact::detail::is_optimizer_storage_v;
using compact::detail::OptimizerStorageHooks;

// A complete storage (every hook protected) passes; so does it for no other W type than its update's.
static_assert(is_optimizer_storage_v<fake::Complete, float>);
static_assert(!is_optimizer_storage_v<fake::Complete, double>);
static_assert(OptimizerStorageHooks<fake::Complete, double>::has_grad_view());
static_assert(!OptimizerStorageHooks<fake::Complete, double>::has_update_view());
static_assert(!OptimizerStorageHooks<fake::Complete, double>::has_check_weight());

// A missing hook is found, and only that one.
static_assert(!is_optimizer_storage_v<fake::WithoutZeroMoment, float>);
static_assert(!OptimizerStorageHooks<fake::WithoutZeroMoment, float>::has_zero_moment());
static_assert(OptimizerStorageHooks<fake::WithoutZeroMoment, float>::has_zero_grad_on());
static_assert(OptimizerStorageHooks<fake::WithoutZeroMoment, float>::has_step_resources());

// A hook with another signature counts as missing.
static_assert(!is_optimizer_storage_v<fake::WithMemberCheckPolicy, float>);
static_assert(!OptimizerStorageHooks<fake::WithMemberCheckPolicy, float>::has_check_policy());
static_assert(OptimizerStorageHooks<fake::WithMemberCheckPolicy, float>::has_prepare_policy());
static_assert(!is_optimizer_storage_v<fake::WithPartialResources, float>);
static_assert(!OptimizerStorageHooks<fake::WithPartialResources, float>::has_step_resources());
static_assert(!is_optimizer_storage_v<fake::WithWrongZeroMoment, float>);
static_assert(!OptimizerStorageHooks<fake::WithWrongZeroMoment, float>::has_zero_moment());

}  // namespace

TEST_CASE("optimizer storage hooks: the checks are compile-time (static_assert above)") {
  CHECK(is_optimizer_storage_v<fake::Complete, float>);
  CHECK_FALSE(is_optimizer_storage_v<fake::WithoutZeroMoment, float>);
}
