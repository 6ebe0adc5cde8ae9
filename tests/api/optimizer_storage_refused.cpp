// SPDX-License-Identifier: MIT
/// Must not compile: the optimizer bases over a storage without zero_moment stop with the message naming that hook
/// (the optimizer_storage_refused test greps for it).
#include <compact/api/optimizer_bases.hpp>

#include "api/optimizer_storage_fakes.hpp"

namespace fake {
struct Backend {};
}  // namespace fake

template <>
class compact::detail::OptimizerStorage<fake::Backend, compact::Gaussian, float> : public fake::WithoutZeroMoment {};

template class compact::detail::CompressedOptimizerBase<fake::Backend, compact::Gaussian, float>;
