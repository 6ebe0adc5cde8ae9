// SPDX-License-Identifier: MIT
#pragma once
/// The argument checks of the 8-bit AdamW step on every backend (spec/moment8.hpp): a count >= 0, non-null pointers
/// when count > 0, exactly one of param and out, no output aliasing an input or another output, finite
/// hyperparameters. Run before anything is written.

#include <cstdint>

#include "compact/config.hpp"
#include "compact/spec/moment8.hpp"
#include "compact/api/sr8_checks.hpp"
#include "compact/api/view.hpp"

namespace compact {
namespace detail {

/// step(grad[count]; m_q[count], m_scales[blocks], v_q[count], v_scales[blocks] in place; param[count] in place or
/// out[count]).
template <class G, class P>
void check_adamw8_args(const char* fn, const Adamw8Consts& c, const G* grad, index_t count, const std::int8_t* m_q,
                       const float* m_scales, const std::uint8_t* v_q, const float* v_scales, const P* param,
                       const float* out) {
  COMPACT_REQUIRE(count >= 0, fn << ": argument count = " << count << " must be >= 0");
  COMPACT_REQUIRE(count == 0 || (param == nullptr) != (out == nullptr),
                  fn << ": exactly one of the arguments param and out must be given (param "
                     << (param == nullptr ? "null" : "given") << ", out " << (out == nullptr ? "null" : "given")
                     << ")");
  check_sr8_pointer(fn, "grad", grad, count);
  check_sr8_pointer(fn, "m_q", m_q, count);
  check_sr8_pointer(fn, "m_scales", m_scales, count);
  check_sr8_pointer(fn, "v_q", v_q, count);
  check_sr8_pointer(fn, "v_scales", v_scales, count);
  const float consts[] = {c.b1, c.c1, c.b2, c.c2, c.bc1, c.bc2, c.eps, c.decay, c.neg_step, c.sqrt_bc2};
  const char* names[] = {"b1", "1 - b1", "b2", "1 - b2", "bc1", "bc2", "eps", "decay", "neg_step", "sqrt_bc2"};
  for (int k = 0; k < 10; ++k) {
    COMPACT_REQUIRE(consts[k] - consts[k] == 0.0f, fn << ": constant " << names[k] << " = " << consts[k]
                                                      << " must be finite (lr, betas, eps, weight_decay, step)");
  }
  COMPACT_REQUIRE(c.bc1 > 0.0f && c.bc2 > 0.0f, fn << ": bias corrections bc1 = " << c.bc1 << ", bc2 = " << c.bc2
                                                   << " must be > 0 (step >= 1, betas in [0, 1))");
  const index_t blocks = moment8_scale_count(count);
  const auto g = flat_view(grad, count);
  const auto mq = flat_view(m_q, count);
  const auto ms = flat_view(m_scales, blocks);
  const auto vq = flat_view(v_q, count);
  const auto vs = flat_view(v_scales, blocks);
  check_view(fn, "grad", g, -1, "", -1, "");
  check_view(fn, "m_q", mq, -1, "", -1, "");
  check_view(fn, "m_scales", ms, -1, "", -1, "");
  check_view(fn, "v_q", vq, -1, "", -1, "");
  check_view(fn, "v_scales", vs, -1, "", -1, "");
  // Every written buffer against every other buffer.
  check_no_alias(fn, "grad", g, "m_q", mq);
  check_no_alias(fn, "grad", g, "m_scales", ms);
  check_no_alias(fn, "grad", g, "v_q", vq);
  check_no_alias(fn, "grad", g, "v_scales", vs);
  check_no_alias(fn, "m_q", mq, "m_scales", ms);
  check_no_alias(fn, "m_q", mq, "v_q", vq);
  check_no_alias(fn, "m_q", mq, "v_scales", vs);
  check_no_alias(fn, "m_scales", ms, "v_q", vq);
  check_no_alias(fn, "m_scales", ms, "v_scales", vs);
  check_no_alias(fn, "v_q", vq, "v_scales", vs);
  const char* target = param != nullptr ? "param" : "out";
  if (param != nullptr) {
    check_view(fn, "param", flat_view(param, count), -1, "", -1, "");
  } else {
    check_view(fn, "out", flat_view(out, count), -1, "", -1, "");
  }
  const auto check_target = [&](const auto& t) {
    check_no_alias(fn, "grad", g, target, t);
    check_no_alias(fn, "m_q", mq, target, t);
    check_no_alias(fn, "m_scales", ms, target, t);
    check_no_alias(fn, "v_q", vq, target, t);
    check_no_alias(fn, "v_scales", vs, target, t);
  };
  if (param != nullptr) {
    check_target(flat_view(param, count));
  } else {
    check_target(flat_view(out, count));
  }
}

}  // namespace detail
}  // namespace compact
