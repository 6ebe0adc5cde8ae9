// SPDX-License-Identifier: MIT
/// Compiled with -ffast-math by the `fast_math_refused` ctest entry, which expects compact's #error.
#include <compact/compact.hpp>

int main() { return 0; }
