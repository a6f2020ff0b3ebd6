#pragma once
/// \file
/// Checkpoints: a network's tensors under their PyTorch state_dict names, optionally the
/// optimiser's state and the trainer's position, in one safetensors file written atomically.
/// Example (compiled: tests/docs/headers.cpp, "train/checkpoint"):
///
///     cohort::save_weights("model.safetensors", net.parameters());          // loadable by torch
///     cohort::load_weights("model.safetensors", net.parameters());          // strict, by name
///     cohort::save_checkpoint("ckpt.safetensors", net.parameters(), opt, state);
///     TrainerState resumed = cohort::load_checkpoint("ckpt.safetensors", net.parameters(), opt);
///
/// Keys: "0.weight", "1.running_mean", ... exactly as torch.nn.Sequential's state_dict, so
/// `model.load_state_dict(safetensors.torch.load_file(path))` works on a weights file; optimiser
/// state is stored as "optimizer.<slot>.<name>" ("optimizer.exp_avg.0.weight"); counters and the
/// trainer's position are metadata ("cohort.*"). A load reads and checks the whole file — format,
/// checksums (io/safetensors.hpp: a flipped bit is a ChecksumError), every expected tensor's
/// presence, dtype and shape, unexpected tensors, optimiser type and state — and reports every
/// mismatch by name in one CheckpointError before changing anything. Both loaders also take a
/// SafetensorsFile already parsed (from memory, say): `load_weights(SafetensorsFile::parse(...), p)`.

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cohort/core/error.hpp"
#include "cohort/io/safetensors.hpp"
#include "cohort/network/parameters.hpp"
#include "cohort/optim/weight_average.hpp"
#include "cohort/precision/half.hpp"
#include "cohort/train/error_feedback_state.hpp"
#include "cohort/train/weight_names.hpp"

namespace cohort {

/// Where training stands: enough to continue exactly where a run stopped.
struct TrainerState {
  std::uint64_t step = 0;           // optimiser steps taken
  std::uint64_t epoch = 0;          // epochs completed
  std::uint64_t batch_in_epoch = 0; // batches of the current epoch already trained
  std::uint64_t batch_size = 0;
  std::uint64_t seed = 0;           // initialisation, dropout and shuffling seed
  std::uint64_t forward_passes = 0; // training forward passes (selects dropout masks)
  std::uint64_t world_size = 1;     // processes the batches were split between (ProcessGroupDDP)
  bool shuffle = true;
  /// fp16 loss scaling (0: none): scale, clean steps since the last change, skipped steps in
  /// all and in a row.
  double loss_scale = 0;
  std::uint64_t scale_growth_tracker = 0, skipped_steps = 0, consecutive_skips = 0;
  /// The class list of the data trained on, when the dataset names its classes (ImageFolder):
  /// its count and fingerprint (class_list_fingerprint), so a resume on folders whose classes
  /// differ or are ordered otherwise is refused. 0, 0: not recorded. (The names themselves are
  /// in the checkpoint's metadata; the state stays trivially copyable for the ranks' broadcast.)
  std::uint64_t class_count = 0, class_fingerprint = 0;
};

/// FNV-1a over the class names, each followed by a '/' (no class name, being a directory name,
/// contains one).
inline std::uint64_t class_list_fingerprint(std::span<const std::string> names) noexcept {
  std::uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&h](unsigned char c) { h = (h ^ c) * 0x100000001b3ull; };
  for (const auto& n : names) {
    for (const char c : n) add(static_cast<unsigned char>(c));
    add('/');
  }
  return h;
}

/// The class names a checkpoint records ("cohort.data.classes", joined by '/'); empty if none.
inline std::vector<std::string> checkpoint_class_names(const SafetensorsFile& f) {
  std::vector<std::string> names;
  const auto it = f.metadata().find("cohort.data.classes");
  if (it == f.metadata().end()) return names;
  std::string_view rest = it->second;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    names.emplace_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return names;
}

namespace detail {

/// A weight-average tensor's name in a checkpoint.
inline std::string ema_key(const std::string& name) { return "ema." + name; }
/// A double in 17 significant digits: it reads back as the same value.
inline std::string exact_decimal(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

inline std::string shape_str(const std::vector<std::size_t>& s) {
  if (s.empty()) return "scalar";
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (i) out += 'x';
    out += std::to_string(s[i]);
  }
  return out;
}

/// Adds every tensor of `p` to `w` under its state_dict name.
template <class Params>
void add_model_tensors(SafetensorsWriter& w, Params& p, const std::vector<RenameRule>& rename = {}) {
  for (const TensorRef& t : p.state_dict()) w.add(renamed(rename, t.name), t.dtype, t.shape, t.data, t.bytes());
}

/// Checks that `f` holds every tensor of `p` with the right dtype and shape; appends problems.
template <class Params>
void check_model_tensors(const SafetensorsFile& f, Params& p, std::vector<std::string>& problems) {
  for (const TensorRef& t : p.state_dict()) {
    const SafetensorsEntry* e = f.find(t.name);
    if (!e) {
      problems.push_back(t.name + ": missing");
      continue;
    }
    if (e->dtype != t.dtype)
      problems.push_back(
          concat(t.name, ": dtype ", dtype_name(e->dtype), " in the file, ", dtype_name(t.dtype), " in the network"));
    if (e->shape != t.shape)
      problems.push_back(
          concat(t.name, ": shape ", shape_str(e->shape), " in the file, ", shape_str(t.shape), " in the network"));
  }
}

/// Checks that `f` holds `key` with `t`'s dtype and shape (an optimiser slot, a weight-average
/// tensor); appends the problem.
inline void check_stored_tensor(const SafetensorsFile& f, const std::string& key, const TensorRef& t,
                                std::vector<std::string>& problems) {
  const SafetensorsEntry* e = f.find(key);
  if (!e)
    problems.push_back(key + ": missing");
  else if (e->dtype != t.dtype || e->shape != t.shape)
    problems.push_back(concat(key, ": ", dtype_name(e->dtype), " ", shape_str(e->shape), " in the file, ",
                              dtype_name(t.dtype), " ", shape_str(t.shape), " expected"));
}

template <class Params>
void copy_model_tensors(const SafetensorsFile& f, Params& p) {
  for (const TensorRef& t : p.state_dict()) {
    const auto bytes = f.bytes(f.at(t.name));
    std::memcpy(t.data, bytes.data(), bytes.size());
  }
}

inline bool is_model_key(const std::string& name, const std::vector<TensorRef>& refs) {
  for (const auto& r : refs)
    if (r.name == name) return true;
  return false;
}

/// Throws one CheckpointError listing every problem: a file from another model yields hundreds,
/// and the one a user needs (a renamed layer, a changed head) must not be cut off. More than a
/// dozen come one per line.
[[noreturn]] inline void fail_checkpoint(const std::filesystem::path& path, const std::vector<std::string>& problems) {
  const bool long_list = problems.size() > 12;
  std::string msg =
      concat(path.string(), ": does not fit (", problems.size(), problems.size() == 1 ? " problem" : " problems",
             "; nothing was loaded):", long_list ? "" : " ");
  for (std::size_t i = 0; i < problems.size(); ++i) msg += (long_list ? "\n  " : i ? "; " : "") + problems[i];
  throw CheckpointError(msg);
}

inline std::uint64_t metadata_u64(const SafetensorsFile& f, const std::string& key,
                                  std::vector<std::string>& problems) {
  const auto it = f.metadata().find(key);
  if (it == f.metadata().end()) {
    problems.push_back("metadata " + key + ": missing");
    return 0;
  }
  std::uint64_t v = 0;
  const auto& s = it->second;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size())
    problems.push_back("metadata " + key + ": " + in_quotes(s) + " is not a non-negative integer");
  return v;
}

/// "optimizer.<slot>.<tensor name>": the slice of flat optimiser state that shadows a parameter.
template <class Params, class Slot, class Fn>
void each_optimizer_tensor(Params& p, Slot& slot, Fn&& fn) {
  using T = typename Params::value_type;
  for (const TensorRef& t : p.state_dict()) {
    if (t.kind != TensorKind::parameter) continue;
    const std::size_t offset = std::size_t(static_cast<T*>(t.data) - p.values.data());
    fn("optimizer." + slot.name + "." + t.name, t, slot.values.data() + offset);
  }
}

} // namespace detail

/// Writes the network's tensors (state_dict names) atomically: a file PyTorch loads directly.
/// `rename`: rules from the network's names to the file's (inverted(models::torchvision_names<Net>())
/// writes torchvision's names); two tensors renamed to one name are refused before writing.
template <class Params>
void save_weights(const std::filesystem::path& path, Params& p, const std::vector<RenameRule>& rename = {}) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("cohort.network", Params::net_type::signature());
  if (!rename.empty()) {
    std::map<std::string, std::string> seen;
    for (const TensorRef& t : p.state_dict())
      if (const auto [it, fresh] = seen.emplace(detail::renamed(rename, t.name), t.name); !fresh)
        throw ValueError(detail::concat("save_weights: ", t.name, " and ", it->second, " would both be written as ",
                                        it->first, " (", path.string(), ")"));
  }
  detail::add_model_tensors(w, p, rename);
  w.write(path);
}

/// Loads the network's tensors from a weights file, a checkpoint or another program's state_dict
/// (as torch's load_state_dict): strict by default, every tensor there with its shape and dtype
/// (F16/BF16 into float converts exactly) and no tensor of the file left over ("optimizer.*"
/// state and cohort's own "cohort.*" tensors excepted); `o.rename` maps the file's names onto
/// the network's, `o.strict = false` reports missing and unexpected tensors instead
/// (train/weight_names.hpp). Everything is validated first: a CheckpointError lists every
/// problem and nothing is loaded.
template <class Params>
LoadReport load_weights(const SafetensorsFile& f, Params& p, const LoadOptions& o = {}) {
  std::vector<std::string> problems;
  LoadReport report;
  const auto refs = p.state_dict();
  std::map<std::string, const SafetensorsEntry*> by_name; // the network's name -> the file's tensor
  for (const auto& e : f.entries()) {
    if (e.name.rfind("optimizer.", 0) == 0 || e.name.rfind("cohort.", 0) == 0) continue;
    const std::string name = detail::renamed(o.rename, e.name);
    if (!detail::is_model_key(name, refs)) {
      if (o.strict)
        problems.push_back(detail::escaped(e.name) +
                           (name != e.name ? " (renamed " + detail::escaped(name) + ")" : std::string()) +
                           ": unexpected (this network has no such tensor)");
      report.unexpected.push_back(e.name);
      continue;
    }
    const auto [it, fresh] = by_name.emplace(name, &e);
    if (!fresh)
      problems.push_back(detail::concat(name, ": two tensors of the file map to it, ",
                                        detail::escaped(it->second->name), " and ", detail::escaped(e.name)));
  }
  for (const TensorRef& t : refs) {
    const auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      if (o.strict) problems.push_back(t.name + ": missing");
      report.missing.push_back(t.name);
      continue;
    }
    const SafetensorsEntry& e = *it->second;
    const std::string own = e.name == t.name ? std::string() : " (the file's " + detail::escaped(e.name) + ")";
    const bool widens = t.dtype == DType::f32 && (e.dtype == DType::f16 || e.dtype == DType::bf16);
    if (e.dtype != t.dtype && !widens)
      problems.push_back(detail::concat(t.name, own, ": dtype ", dtype_name(e.dtype), " in the file, ",
                                        dtype_name(t.dtype), " in the network"));
    if (e.shape != t.shape)
      problems.push_back(detail::concat(t.name, own, ": shape ", detail::shape_str(e.shape), " in the file, ",
                                        detail::shape_str(t.shape), " in the network"));
  }
  if (!problems.empty()) detail::fail_checkpoint(f.path(), problems);
  for (const TensorRef& t : refs) {
    const auto it = by_name.find(t.name);
    if (it == by_name.end()) continue;
    const SafetensorsEntry& e = *it->second;
    const auto bytes = f.bytes(e);
    if (e.dtype == t.dtype) {
      std::memcpy(t.data, bytes.data(), bytes.size());
    } else { // F16 or BF16 into F32: exact
      auto* dst = static_cast<float*>(t.data);
      for (std::size_t i = 0; i < bytes.size() / 2; ++i) {
        std::uint16_t b;
        std::memcpy(&b, bytes.data() + 2 * i, 2); // safetensors is little-endian, as cohort's targets
        dst[i] = e.dtype == DType::f16 ? detail::half_bits_to_float(b) : detail::bfloat16_bits_to_float(b);
      }
      report.converted.push_back(t.name);
    }
    ++report.loaded;
  }
  return report;
}
template <class Params>
LoadReport load_weights(const std::filesystem::path& path, Params& p, const LoadOptions& o = {}) {
  return load_weights(SafetensorsFile::read(path), p, o);
}

/// Writes weights, optimiser state and the trainer's position atomically; with `ef`, error
/// feedback's residuals too (train/error_feedback_state.hpp); with `ema`, the weight average
/// (its tensors as "ema." + name, its settings and count in the metadata).
template <class Params, class Opt>
void save_checkpoint(const std::filesystem::path& path, Params& p, Opt& opt, const TrainerState& s,
                     const ErrorFeedbackState* ef = nullptr, std::span<const std::string> class_names = {},
                     WeightAverage<typename Params::net_type>* ema = nullptr) {
  SafetensorsWriter w;
  w.set_metadata("format", "pt");
  w.set_metadata("cohort.network", Params::net_type::signature());
  w.set_metadata("cohort.optimizer", std::string(optimizer_name(opt)));
  w.set_metadata("cohort.optimizer.steps", std::to_string(opt.steps()));
  w.set_metadata("cohort.trainer.step", std::to_string(s.step));
  w.set_metadata("cohort.trainer.epoch", std::to_string(s.epoch));
  w.set_metadata("cohort.trainer.batch_in_epoch", std::to_string(s.batch_in_epoch));
  w.set_metadata("cohort.trainer.batch_size", std::to_string(s.batch_size));
  w.set_metadata("cohort.trainer.seed", std::to_string(s.seed));
  w.set_metadata("cohort.trainer.forward_passes", std::to_string(s.forward_passes));
  w.set_metadata("cohort.trainer.shuffle", s.shuffle ? "1" : "0");
  w.set_metadata("cohort.trainer.world_size", std::to_string(s.world_size));
  if (s.loss_scale > 0) { // fp16 runs only: fp32 checkpoints keep their exact format
    char scale[64];
    std::snprintf(scale, sizeof scale, "%.9g", s.loss_scale); // a float's exact value
    w.set_metadata("cohort.scaler.scale", scale);
    w.set_metadata("cohort.scaler.growth_tracker", std::to_string(s.scale_growth_tracker));
    w.set_metadata("cohort.scaler.skipped_steps", std::to_string(s.skipped_steps));
    w.set_metadata("cohort.scaler.consecutive_skips", std::to_string(s.consecutive_skips));
  }
  if (s.class_count) {
    w.set_metadata("cohort.data.class_count", std::to_string(s.class_count));
    w.set_metadata("cohort.data.class_fingerprint", std::to_string(s.class_fingerprint));
    std::string joined;
    for (const auto& n : class_names) joined += (joined.empty() ? "" : "/") + n;
    if (!class_names.empty()) w.set_metadata("cohort.data.classes", joined);
  }
  detail::add_model_tensors(w, p);
  for (auto& slot : opt.slots(p.values.size()))
    detail::each_optimizer_tensor(p, slot, [&](const std::string& key, const TensorRef& t, auto* data) {
      w.add(key, t.dtype, t.shape, data, t.bytes());
    });
  if (ef && !ef->empty())
    w.add(std::string(ef->tensor_name()), DType::f32, {ef->rows, ef->row_size}, ef->values.data(),
          ef->values.size() * sizeof(float));
  if (ema) {
    w.set_metadata("cohort.ema.decay", detail::exact_decimal(ema->options().decay));
    w.set_metadata("cohort.ema.every", std::to_string(ema->options().every));
    w.set_metadata("cohort.ema.n_averaged", std::to_string(ema->n_averaged()));
    for (const TensorRef& t : ema->parameters().state_dict())
      w.add(detail::ema_key(t.name), t.dtype, t.shape, t.data, t.bytes());
  }
  w.write(path);
}

/// Loads a checkpoint written by save_checkpoint into `p` and `opt` and returns the trainer's
/// position; error feedback's residuals, if the file has them, into `ef` (if given; ignored
/// otherwise); the weight average into `ema` (a file with one and a trainer without, or the
/// other way round, or other settings, is a mismatch: the run would not continue exactly).
/// Throws CheckpointError listing every mismatch (nothing is changed then).
template <class Params, class Opt>
TrainerState load_checkpoint(const SafetensorsFile& f, Params& p, Opt& opt, ErrorFeedbackState* ef = nullptr,
                             WeightAverage<typename Params::net_type>* ema = nullptr) {
  const std::filesystem::path& path = f.path();
  std::vector<std::string> problems;
  detail::check_model_tensors(f, p, problems);
  const auto opt_it = f.metadata().find("cohort.optimizer");
  const bool same_optimizer = opt_it != f.metadata().end() && opt_it->second == optimizer_name(opt);
  if (opt_it == f.metadata().end())
    problems.push_back("metadata cohort.optimizer: missing (a weights-only file? use load_weights / --init-from)");
  else if (!same_optimizer)
    problems.push_back(detail::concat("optimizer: the file was written by ", detail::escaped(opt_it->second),
                                      ", this run uses ", optimizer_name(opt)));
  TrainerState s;
  const std::uint64_t opt_steps = detail::metadata_u64(f, "cohort.optimizer.steps", problems);
  s.step = detail::metadata_u64(f, "cohort.trainer.step", problems);
  s.epoch = detail::metadata_u64(f, "cohort.trainer.epoch", problems);
  s.batch_in_epoch = detail::metadata_u64(f, "cohort.trainer.batch_in_epoch", problems);
  s.batch_size = detail::metadata_u64(f, "cohort.trainer.batch_size", problems);
  s.seed = detail::metadata_u64(f, "cohort.trainer.seed", problems);
  s.forward_passes = detail::metadata_u64(f, "cohort.trainer.forward_passes", problems);
  s.shuffle = detail::metadata_u64(f, "cohort.trainer.shuffle", problems) != 0;
  if (const auto it = f.metadata().find("cohort.scaler.scale"); it != f.metadata().end()) {
    char* end = nullptr;
    s.loss_scale = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || end != it->second.c_str() + it->second.size() || !(s.loss_scale > 0) ||
        !std::isfinite(s.loss_scale))
      problems.push_back("metadata cohort.scaler.scale: " + detail::in_quotes(it->second) +
                         " is not a positive finite number");
    s.scale_growth_tracker = detail::metadata_u64(f, "cohort.scaler.growth_tracker", problems);
    s.skipped_steps = detail::metadata_u64(f, "cohort.scaler.skipped_steps", problems);
    s.consecutive_skips = detail::metadata_u64(f, "cohort.scaler.consecutive_skips", problems);
  }
  if (f.metadata().count("cohort.data.class_count")) { // written when the data named its classes
    s.class_count = detail::metadata_u64(f, "cohort.data.class_count", problems);
    s.class_fingerprint = detail::metadata_u64(f, "cohort.data.class_fingerprint", problems);
  }
  // Written since the process-group issue; older checkpoints come from one process.
  s.world_size = f.metadata().count("cohort.trainer.world_size")
                     ? detail::metadata_u64(f, "cohort.trainer.world_size", problems)
                     : 1;

  // The optimiser's slots, and nothing unexpected.
  auto slots = opt.slots(p.values.size());
  std::vector<std::string> known;
  for (const auto& t : p.state_dict()) known.push_back(t.name);
  for (auto& slot : slots)
    detail::each_optimizer_tensor(p, slot, [&](const std::string& key, const TensorRef& t, auto*) {
      known.push_back(key);
      if (same_optimizer) detail::check_stored_tensor(f, key, t, problems); // else reported once, not per tensor
    });
  const SafetensorsEntry* residuals = nullptr;
  for (const auto name : {ErrorFeedbackState::per_rank_tensor, ErrorFeedbackState::per_chunk_tensor})
    if (const SafetensorsEntry* e = f.find(name)) {
      known.emplace_back(name);
      residuals = e;
      if (e->dtype != DType::f32 || e->shape.size() != 2)
        problems.push_back(detail::concat(name, ": ", dtype_name(e->dtype), " ", detail::shape_str(e->shape),
                                          " in the file, F32 (rows, values) expected"));
    }
  const bool file_has_ema = f.metadata().count("cohort.ema.n_averaged") != 0;
  std::uint64_t ema_count = 0;
  if (file_has_ema && !ema)
    problems.push_back("the checkpoint holds a weight average (TrainerOptions::ema) and this trainer keeps none");
  if (!file_has_ema && ema)
    problems.push_back("this trainer keeps a weight average (TrainerOptions::ema) and the checkpoint has none: the run "
                       "would not continue exactly");
  if (file_has_ema && ema) {
    ema_count = detail::metadata_u64(f, "cohort.ema.n_averaged", problems);
    const std::uint64_t every = detail::metadata_u64(f, "cohort.ema.every", problems);
    const auto decay = f.metadata().find("cohort.ema.decay");
    if (decay == f.metadata().end() || decay->second != detail::exact_decimal(ema->options().decay) ||
        every != ema->options().every)
      problems.push_back(detail::concat("weight average: the checkpoint's decay ",
                                        decay == f.metadata().end() ? "(missing)" : decay->second, ", every ", every,
                                        "; this trainer's decay ", detail::exact_decimal(ema->options().decay),
                                        ", every ", ema->options().every));
    for (const TensorRef& t : ema->parameters().state_dict()) {
      known.push_back(detail::ema_key(t.name));
      detail::check_stored_tensor(f, known.back(), t, problems);
    }
  }
  for (const auto& e : f.entries())
    if (std::find(known.begin(), known.end(), e.name) == known.end() &&
        (same_optimizer || e.name.rfind("optimizer.", 0) != 0))
      problems.push_back(detail::escaped(e.name) + ": unexpected (not a tensor of this network or optimiser)");
  if (!problems.empty()) detail::fail_checkpoint(path, problems);

  detail::copy_model_tensors(f, p);
  for (auto& slot : slots)
    detail::each_optimizer_tensor(p, slot, [&](const std::string& key, const TensorRef&, auto* data) {
      const auto bytes = f.bytes(f.at(key));
      std::memcpy(data, bytes.data(), bytes.size());
    });
  opt.set_steps(opt_steps);
  if (ema && file_has_ema) {
    for (const TensorRef& t : ema->parameters().state_dict()) {
      const auto bytes = f.bytes(f.at(detail::ema_key(t.name)));
      std::memcpy(t.data, bytes.data(), bytes.size());
    }
    ema->set_n_averaged(ema_count);
  }
  if (ef && residuals) {
    ef->layout = residuals->name == ErrorFeedbackState::per_chunk_tensor ? ErrorFeedbackState::Layout::per_chunk
                                                                         : ErrorFeedbackState::Layout::per_rank;
    ef->rows = residuals->shape[0], ef->row_size = residuals->shape[1];
    ef->values = f.values<float>(residuals->name);
  }
  return s;
}
template <class Params, class Opt>
TrainerState load_checkpoint(const std::filesystem::path& path, Params& p, Opt& opt, ErrorFeedbackState* ef = nullptr,
                             WeightAverage<typename Params::net_type>* ema = nullptr) {
  return load_checkpoint(SafetensorsFile::read(path), p, opt, ef, ema);
}

} // namespace cohort
