// SPDX-License-Identifier: MIT
/// The one doctest main of the test suite.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
