#pragma once
/// \file
/// What the device engines share: moving parameters and optimiser state between a device and
/// their host copies (what checkpoints read and write), and the precision hooks of full
/// precision.

#include <cstddef>
#include <cstdint>

#include "cohort/backend/ops.hpp"
#include "cohort/train/checkpoint.hpp"

namespace cohort::detail {

/// Device parameters and optimiser state (slots, step count) into the host copies.
template <class Backend, class Ctx, class DevParams, class DevOpt, class HostParams, class HostOpt>
void state_to_host(Ctx& ctx, const DevParams& params, DevOpt& opt, HostParams& host, HostOpt& host_opt) {
  host.copy_from(params);
  auto host_slots = host_opt.slots(host.values.size());
  auto dev_slots = opt.slots(host.values.size());
  for (std::size_t i = 0; i < host_slots.size(); ++i)
    ops::ElementwiseKernels<Backend>::download(ctx, dev_slots[i].values.data(), host_slots[i].values.data(),
                                               host_slots[i].values.size());
  host_opt.set_steps(opt.steps());
}

/// The host copies (just loaded from a checkpoint) onto the device.
template <class Backend, class Ctx, class HostParams, class HostOpt, class DevParams, class DevOpt>
void state_to_device(Ctx& ctx, const HostParams& host, HostOpt& host_opt, DevParams& params, DevOpt& opt) {
  params.copy_from(host);
  auto host_slots = host_opt.slots(host.values.size());
  auto dev_slots = opt.slots(host.values.size());
  for (std::size_t i = 0; i < host_slots.size(); ++i)
    ops::ElementwiseKernels<Backend>::upload(ctx, host_slots[i].values.data(), dev_slots[i].values.data(),
                                             host_slots[i].values.size());
  opt.set_steps(host_opt.steps());
}

/// The Trainer's precision hooks for engines that only run FullPrecision (nothing to convert,
/// scale or save besides the parameters).
struct FullPrecisionHooks {
  void export_state(TrainerState&) {}
  void import_state(const TrainerState&) {}
  std::uint64_t skipped_steps() { return 0; }
  double loss_scale() { return 0; }
};

} // namespace cohort::detail
