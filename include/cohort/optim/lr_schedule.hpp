#pragma once
/// \file
/// Learning-rate schedules with torch.optim.lr_scheduler's exact values.
/// Example (compiled: tests/docs/headers.cpp, "optim/lr_schedule"):
///
///     auto sched = cohort::LrSchedule::parse("step,step_size=1,gamma=0.7"); // pytorch/examples' mnist
///     for (std::uint64_t epoch = 0; epoch < 14; ++epoch) {
///       opt.set_lr(sched.lr(1.0, epoch));   // the rate torch uses after `epoch` scheduler.step() calls
///       // ... train one epoch ...
///     }
///
/// A schedule is a pure function of (base rate, number of scheduler steps taken): nothing to
/// save in a checkpoint beyond the step or epoch count it already holds, so a resumed run gets
/// the same rates bit for bit. The values replicate torch's *chainable* formulas (each rate
/// computed from the previous one, in double, in torch's operation order), which is what
/// `scheduler.step()` uses; closed forms differ from them in the last bits.
///
///   step        StepLR(step_size, gamma)
///   multistep   MultiStepLR(milestones, gamma)             milestones=30/60/90
///   constant    ConstantLR(factor, total_iters)            factor=1 is a constant rate
///   cosine      SequentialLR(LinearLR(start_factor, 1, warmup), CosineAnnealingLR(t_max, eta_min),
///               milestones=[warmup]); warmup=0 is CosineAnnealingLR alone
///   onecycle    OneCycleLR(max_lr, total_steps, pct_start, anneal cos|linear, div_factor,
///               final_div_factor, three_phase, cycle_momentum, base_momentum, max_momentum);
///               as torch by default it also cycles the momentum (SGD's and RMSprop's momentum,
///               Adam's and AdamW's beta1) between max_momentum and base_momentum: momentum(t)
///
/// Spec strings name the kind, then key=value pairs: "cosine,warmup=5,start_factor=0.1,t_max=95".

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <numbers>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "cohort/core/error.hpp"

namespace cohort {

struct StepLR {
  std::uint64_t step_size = 1;
  double gamma = 0.1;
};
struct MultiStepLR {
  std::vector<std::uint64_t> milestones;
  double gamma = 0.1;
};
struct ConstantLR {
  double factor = 1.0 / 3.0;
  std::uint64_t total_iters = 5;
};
struct WarmupCosineLR {
  std::uint64_t warmup = 0;
  double start_factor = 1.0 / 3.0;
  std::uint64_t t_max = 1;
  double eta_min = 0.0;
};
struct OneCycleLR {
  double max_lr = 0.1;
  std::uint64_t total_steps = 1;
  double pct_start = 0.3;
  bool cosine = true;
  double div_factor = 25.0;
  double final_div_factor = 1e4;
  bool three_phase = false;
  /// torch's cycle_momentum: the momentum runs max -> base while the rate rises, back after.
  bool cycle_momentum = true;
  double base_momentum = 0.85, max_momentum = 0.95;
};

namespace detail {
/// x rounded to double before it is used: keeps a product out of a fused multiply-add (GCC
/// contracts a*b+c when the target has FMA), since Python rounds every operation.
inline double schedule_rounded(double x) noexcept {
  volatile double v = x;
  return v;
}
} // namespace detail

/// One of the schedules above (or none: the base rate throughout).
class LrSchedule {
 public:
  using Kind = std::variant<std::monostate, StepLR, MultiStepLR, ConstantLR, WarmupCosineLR, OneCycleLR>;

  LrSchedule() = default;
  LrSchedule(Kind k) : kind_(std::move(k)) { validate(); } // NOLINT: implicit from any schedule

  /// The rate in effect after `t` scheduler steps (torch's optimizer.param_groups[0]["lr"] after
  /// constructing the scheduler and calling step() t times), for base rate `base`.
  double lr(double base, std::uint64_t t) const {
    return std::visit([&](const auto& s) { return rate(s, base, t); }, kind_);
  }
  /// The momentum the schedule sets after `t` steps (torch's group["momentum"], or betas[0] for
  /// Adam), if it sets one: OneCycleLR with cycle_momentum.
  std::optional<double> momentum(std::uint64_t t) const {
    if (const auto* s = std::get_if<OneCycleLR>(&kind_); s && s->cycle_momentum)
      return one_cycle(*s, t, s->max_momentum, s->base_momentum, s->max_momentum, s->max_momentum);
    return std::nullopt;
  }
  bool empty() const noexcept { return std::holds_alternative<std::monostate>(kind_); }
  const Kind& kind() const noexcept { return kind_; }

  /// "step,step_size=30,gamma=0.1" and the like (file comment); "none" or "" for no schedule.
  /// Unknown kinds or keys and malformed values are a ValueError naming them.
  static LrSchedule parse(std::string_view spec);

 private:
  Kind kind_;

  void validate() const;

  static double rate(std::monostate, double base, std::uint64_t) { return base; }
  static double rate(const StepLR& s, double base, std::uint64_t t) {
    double lr = base;
    for (std::uint64_t e = 1; e <= t; ++e)
      if (e % s.step_size == 0) lr = lr * s.gamma;
    return lr;
  }
  static double rate(const MultiStepLR& s, double base, std::uint64_t t) {
    double lr = base;
    for (std::uint64_t e = 1; e <= t; ++e) {
      std::uint64_t count = 0; // torch counts repeated milestones (a Counter)
      for (const std::uint64_t m : s.milestones) count += m == e;
      if (count) lr = lr * std::pow(s.gamma, double(count));
    }
    return lr;
  }
  static double rate(const ConstantLR& s, double base, std::uint64_t t) {
    double lr = base * s.factor;
    for (std::uint64_t e = 1; e <= t; ++e)
      if (e == s.total_iters) lr = lr * (1.0 / s.factor);
    return lr;
  }
  static double rate(const WarmupCosineLR& s, double base, std::uint64_t t) {
    constexpr double pi = std::numbers::pi;
    double lr = base;
    // LinearLR(start_factor, end_factor 1, total_iters warmup) for the first `warmup` steps.
    if (s.warmup > 0) {
      const double start = s.start_factor, end = 1.0, total = double(s.warmup);
      lr = base * start;
      for (std::uint64_t e = 1; e <= std::min(t, s.warmup - 1); ++e)
        lr = lr * (1.0 + (end - start) / (detail::schedule_rounded(total * start) +
                                          detail::schedule_rounded(double(e - 1) * (end - start))));
      if (t < s.warmup) return lr;
      // SequentialLR's switch calls step(0): CosineAnnealingLR's closed form at epoch 0.
      lr =
          s.eta_min + detail::schedule_rounded((base - s.eta_min) * (1.0 + std::cos(0.0 * pi / double(s.t_max))) / 2.0);
    }
    const double t_max = double(s.t_max);
    for (std::uint64_t e = 1; e + s.warmup <= t; ++e) {
      if ((std::int64_t(e) - 1 - std::int64_t(s.t_max)) % std::int64_t(2 * s.t_max) == 0)
        lr = lr + detail::schedule_rounded((base - s.eta_min) * (1.0 - std::cos(pi / t_max)) / 2.0);
      else
        lr = detail::schedule_rounded((1.0 + std::cos(pi * double(e) / t_max)) /
                                      (1.0 + std::cos(pi * double(e - 1) / t_max)) * (lr - s.eta_min)) +
             s.eta_min;
    }
    return lr;
  }
  static double rate(const OneCycleLR& s, double, std::uint64_t t) {
    const double initial = s.max_lr / s.div_factor, min_lr = initial / s.final_div_factor;
    return one_cycle(s, t, initial, s.max_lr, initial, min_lr);
  }
  /// OneCycleLR's annealing at step t through its phases' values: `a` -> `b` in phase 1, then
  /// (two phases) `b` -> `d`, or (three) `b` -> `c` -> `d`. The rate runs initial -> max_lr ->
  /// (initial ->) min_lr; the momentum max -> base -> (max ->) max: torch's phase table.
  static double one_cycle(const OneCycleLR& s, std::uint64_t t, double a, double b, double c, double d) {
    constexpr double pi = std::numbers::pi;
    if (t > s.total_steps)
      throw ValueError(detail::concat("OneCycleLR: step ", t, " is past total_steps ", s.total_steps,
                                      " (torch raises here too: the cycle has ended)"));
    const double total = double(s.total_steps);
    struct Phase {
      double end_step, start, end;
    };
    const double end1 = detail::schedule_rounded(s.pct_start * total) - 1.0;
    const Phase two[] = {{end1, a, b}, {total - 1.0, b, d}};
    const Phase three[] = {
        {end1, a, b}, {detail::schedule_rounded(2.0 * s.pct_start * total) - 2.0, b, c}, {total - 1.0, c, d}};
    const Phase* phases = s.three_phase ? three : two;
    const std::size_t count = s.three_phase ? 3 : 2;
    const double step = double(t);
    double start_step = 0.0;
    for (std::size_t i = 0; i < count; ++i) {
      const Phase& p = phases[i];
      if (step <= p.end_step || i + 1 == count) {
        const double pct = (step - start_step) / (p.end_step - start_step);
        if (s.cosine) return p.end + detail::schedule_rounded((p.start - p.end) / 2.0 * (std::cos(pi * pct) + 1.0));
        return detail::schedule_rounded((p.end - p.start) * pct) + p.start;
      }
      start_step = p.end_step;
    }
    return d; // not reached
  }
};

namespace detail {
inline std::vector<std::string_view> schedule_split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (true) {
    const std::size_t next = s.find(sep, at);
    out.push_back(s.substr(at, next == std::string_view::npos ? std::string_view::npos : next - at));
    if (next == std::string_view::npos) return out;
    at = next + 1;
  }
}
inline double schedule_number(std::string_view spec, std::string_view key, std::string_view v) {
  const std::string text(v);
  char* end = nullptr;
  const double d = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(d))
    throw ValueError(concat("learning-rate schedule \"", spec, "\": ", key, "=", v, " is not a finite number"));
  return d;
}
inline std::uint64_t schedule_count(std::string_view spec, std::string_view key, std::string_view v) {
  const std::string text(v);
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || end != text.c_str() + text.size())
    throw ValueError(concat("learning-rate schedule \"", spec, "\": ", key, "=", v, " is not a whole number >= 0"));
  return n;
}
} // namespace detail

inline LrSchedule LrSchedule::parse(std::string_view spec) {
  if (spec.empty() || spec == "none") return {};
  const auto parts = detail::schedule_split(spec, ',');
  const std::string_view name = parts[0];
  Kind kind;
  if (name == "step")
    kind = StepLR{};
  else if (name == "multistep")
    kind = MultiStepLR{};
  else if (name == "constant")
    kind = ConstantLR{};
  else if (name == "cosine")
    kind = WarmupCosineLR{};
  else if (name == "onecycle")
    kind = OneCycleLR{};
  else
    throw ValueError(detail::concat("learning-rate schedule \"", spec, "\": unknown kind \"", name,
                                    "\" (expected step, multistep, constant, cosine, onecycle or none)"));
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::size_t eq = parts[i].find('=');
    if (eq == std::string_view::npos)
      throw ValueError(detail::concat("learning-rate schedule \"", spec, "\": \"", parts[i], "\" is not key=value"));
    const std::string_view key = parts[i].substr(0, eq), v = parts[i].substr(eq + 1);
    const auto num = [&] { return detail::schedule_number(spec, key, v); };
    const auto count = [&] { return detail::schedule_count(spec, key, v); };
    bool known = true;
    std::visit(
        [&](auto& s) {
          using S = std::remove_cvref_t<decltype(s)>;
          if constexpr (std::is_same_v<S, StepLR>) {
            if (key == "step_size")
              s.step_size = count();
            else if (key == "gamma")
              s.gamma = num();
            else
              known = false;
          } else if constexpr (std::is_same_v<S, MultiStepLR>) {
            if (key == "milestones")
              for (const auto m : detail::schedule_split(v, '/'))
                s.milestones.push_back(detail::schedule_count(spec, key, m));
            else if (key == "gamma")
              s.gamma = num();
            else
              known = false;
          } else if constexpr (std::is_same_v<S, ConstantLR>) {
            if (key == "factor")
              s.factor = num();
            else if (key == "total_iters")
              s.total_iters = count();
            else
              known = false;
          } else if constexpr (std::is_same_v<S, WarmupCosineLR>) {
            if (key == "warmup")
              s.warmup = count();
            else if (key == "start_factor")
              s.start_factor = num();
            else if (key == "t_max")
              s.t_max = count();
            else if (key == "eta_min")
              s.eta_min = num();
            else
              known = false;
          } else if constexpr (std::is_same_v<S, OneCycleLR>) {
            if (key == "max_lr")
              s.max_lr = num();
            else if (key == "total_steps")
              s.total_steps = count();
            else if (key == "pct_start")
              s.pct_start = num();
            else if (key == "anneal") {
              if (v != "cos" && v != "linear")
                throw ValueError(
                    detail::concat("learning-rate schedule \"", spec, "\": anneal=", v, " (expected cos or linear)"));
              s.cosine = v == "cos";
            } else if (key == "div_factor")
              s.div_factor = num();
            else if (key == "final_div_factor")
              s.final_div_factor = num();
            else if (key == "three_phase")
              s.three_phase = count() != 0;
            else if (key == "cycle_momentum")
              s.cycle_momentum = count() != 0;
            else if (key == "base_momentum")
              s.base_momentum = num();
            else if (key == "max_momentum")
              s.max_momentum = num();
            else
              known = false;
          }
        },
        kind);
    if (!known)
      throw ValueError(detail::concat("learning-rate schedule \"", spec, "\": unknown key \"", key, "\" for ", name));
  }
  return LrSchedule(std::move(kind));
}

inline void LrSchedule::validate() const {
  const auto fail = [](std::string_view what, auto value, std::string_view expected) {
    throw ValueError(detail::concat("learning-rate schedule: ", what, " is ", value, ", expected ", expected));
  };
  std::visit(
      [&](const auto& s) {
        using S = std::remove_cvref_t<decltype(s)>;
        if constexpr (std::is_same_v<S, StepLR>) {
          if (s.step_size == 0) fail("StepLR step_size", s.step_size, ">= 1");
        } else if constexpr (std::is_same_v<S, ConstantLR>) {
          if (!(s.factor > 0 && s.factor <= 1)) fail("ConstantLR factor", s.factor, "in (0, 1]");
        } else if constexpr (std::is_same_v<S, WarmupCosineLR>) {
          if (s.t_max == 0) fail("cosine t_max", s.t_max, ">= 1");
          if (s.warmup > 0 && !(s.start_factor > 0 && s.start_factor <= 1))
            fail("cosine start_factor", s.start_factor, "in (0, 1]");
        } else if constexpr (std::is_same_v<S, OneCycleLR>) {
          if (s.total_steps == 0) fail("OneCycleLR total_steps", s.total_steps, ">= 1");
          if (!(s.pct_start >= 0 && s.pct_start <= 1)) fail("OneCycleLR pct_start", s.pct_start, "in [0, 1]");
          if (!(s.max_lr > 0)) fail("OneCycleLR max_lr", s.max_lr, "> 0");
        }
      },
      kind_);
}

} // namespace cohort
