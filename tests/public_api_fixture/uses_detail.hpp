// SPDX-License-Identifier: MIT
// A fixture of the public_api_only test: it must fail on this file (tests/CMakeLists.txt, WILL_FAIL).
#pragma once
#include <compact/api/checked_size.hpp>
inline std::uint64_t twice(std::uint64_t a) { return compact::detail::checked_add_u64("twice", "a + a", a, a); }
