#pragma once
/// \file
/// The engine of `ThreadedReplicas<N, Cpu>` + `FullPrecision` (see parallel/threaded_replicas.hpp).
///
/// A step splits the batch into N contiguous shards (sizes differ by at most one), runs the
/// replicas on the team's threads, sums their gradients element-wise in replica order (each
/// replica's loss is scaled by its share of the batch, so the sum is the full batch's mean
/// gradient, as DataParallel computes it), and steps the optimiser on the same threads. With
/// class weights (CrossEntropyOptions) every shard is divided by the batch's weight total
/// instead, so the sum is still the full batch's loss (ShardNorm, engine.hpp).
///
/// Deterministic mode cuts the batch into `deterministic_chunks` interleaved chunks instead
/// (chunk j: samples j, j + chunks, ...), computes each chunk's gradient into its own store and
/// sums the chunks in order: the result is the same, bit for bit, for any N that divides the
/// chunk count, and the same as ProcessGroupDDP's deterministic mode at any world size.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "cohort/parallel/threaded_replicas.hpp"
#include "cohort/precision/full_precision.hpp"
#include "cohort/train/engine/engine.hpp"
#include "cohort/train/engine/precision_state.hpp"

namespace cohort::detail {

/// dst[i] = src[0][i] + src[1][i] + ... in that order, split between `pool`'s threads by
/// element (every element is summed in the same order whatever the split).
inline void sum_in_order(ThreadPool& pool, std::span<float* const> src, float* dst, std::size_t n) {
  pool.parallel_for(n, 16 * 1024, [&](std::size_t lo, std::size_t hi) {
    for (std::size_t i = lo; i < hi; ++i) {
      float s = src[0][i];
      for (std::size_t k = 1; k < src.size(); ++k) s += src[k][i];
      dst[i] = s;
    }
  });
}

template <std::size_t N, class Precision, class Net, class Opt>
requires known_precision<Precision>
class TrainEngine<ThreadedReplicas<N, Cpu>, Precision, Net, Opt>
    : public LocalCollectives, public PrecisionHooks<TrainEngine<ThreadedReplicas<N, Cpu>, Precision, Net, Opt>> {
 public:
  using params_type = Parameters<Net, float, Cpu>;
  using compute_type = typename PrecisionState<Precision, Net>::compute_type;
  using grads_type = Gradients<Net, compute_type, Cpu>;
  using replica_type = Replica<Net, compute_type>;
  using input_view = ConstBatchView<typename Net::input_shape, float>;
  static constexpr std::size_t in_size = Net::input_shape::size;

  TrainEngine(Opt opt, const EngineOptions& o)
      : o_(o.parallel), seed_(o.seed), n_(count(o.parallel)), team_(n_),
        params_(initialized_parameters<params_type>(o.seed)), prec_(params_, o.loss_scale), opt_(std::move(opt)) {
    check_chunks(o_, n_, "replica count");
    // 0: not sized by a Trainer (trainer_setup.hpp's checked), one thread each.
    const std::size_t threads = std::max<std::size_t>(o_.threads_per_replica, 1);
    for (std::size_t r = 0; r < n_; ++r) {
      pools_.push_back(std::make_unique<ThreadPool>(threads));
      replicas_.push_back(std::make_unique<replica_type>(*pools_[r], o.loss, o.frozen, o.eval_chunk, o.ignore_index,
                                                         o.regression, o.tta));
    }
    if (o_.deterministic) {
      chunk_grads_.resize(o_.deterministic_chunks);
      for (auto& g : chunk_grads_) g = std::make_unique<grads_type>();
    }
    opt_.set_threads(&team_); // the optimiser's element-wise pass runs on the replicas' threads
  }

  /// `labels`: class labels or masks (int32), or a dense network's float regression targets (one
  /// per output element).
  double step(input_view x, std::span<const std::int32_t> labels, const MicroStep& m) { return step_on(x, labels, m); }
  double step(input_view x, std::span<const float> targets, const MicroStep& m) { return step_on(x, targets, m); }
  template <TargetElement L>
  double step_on(input_view x, std::span<const L> labels, const MicroStep& m) {
    return o_.deterministic ? step_chunks(x, labels, m) : step_shards(x, labels, m);
  }

  /// (correct predictions, summed loss) over the batch, the replicas evaluating shards of it (a
  /// dense network's each into its own copy of `metrics`, merged in replica order).
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const std::int32_t> labels,
                                          SegmentationMetrics* metrics = nullptr) {
    return evaluate_on(x, labels, metrics);
  }
  std::pair<std::size_t, double> evaluate(input_view x, std::span<const float> targets) {
    return evaluate_on(x, targets, nullptr);
  }
  template <TargetElement L>
  std::pair<std::size_t, double> evaluate_on(input_view x, std::span<const L> labels, SegmentationMetrics* metrics) {
    constexpr std::size_t per = targets_per_sample<Net, L>;
    std::vector<std::pair<std::size_t, double>> part(n_);
    std::vector<SegmentationMetrics> part_metrics;
    if (metrics) part_metrics.assign(n_, SegmentationMetrics(metrics->classes(), metrics->ignore_index()));
    team_.parallel_for(n_, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r) {
        const auto [begin, count] = shard(labels.size() / per, r);
        if (count == 0) continue;
        part[r] = replicas_[r]->evaluate(prec_.compute(), {x.data() + begin * in_size, count},
                                         labels.subspan(begin * per, count * per), seed_, prec_.master_values(),
                                         metrics ? &part_metrics[r] : nullptr);
      }
    });
    std::pair<std::size_t, double> total{};
    for (const auto& p : part) total.first += p.first, total.second += p.second;
    for (const auto& m : part_metrics) metrics->merge(m);
    return total;
  }

  params_type& parameters() noexcept { return params_; }
  Opt& optimizer() noexcept { return opt_; }
  std::size_t devices() const noexcept { return n_; }
  void set_seed(std::uint64_t seed) noexcept { seed_ = seed; }
  /// Replica r (its executor, gradients and threads), for inspection and tests.
  replica_type& replica(std::size_t r) { return *replicas_.at(r); }
  PrecisionState<Precision, Net>& precision() noexcept { return prec_; }

 private:
  static std::size_t count(const DataParallelOptions& o) { return replica_count<N>(o); }
  /// Samples [begin, begin + count) of a batch of n: replica r's contiguous shard.
  std::pair<std::size_t, std::size_t> shard(std::size_t n, std::size_t r) const noexcept {
    return contiguous_shard(n, n_, r);
  }

  template <TargetElement L>
  double step_shards(input_view x, std::span<const L> labels, const MicroStep& m) {
    constexpr std::size_t per = targets_per_sample<Net, L>;
    const std::size_t n = labels.size() / per;
    const double weights = step_weight_total<classes_of<Net>>(replicas_[0]->loss(), labels, *this);
    std::vector<double> loss(n_, 0.0);
    team_.parallel_for(n_, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r) {
        const auto [begin, count] = shard(n, r);
        grads_type& g = replicas_[r]->gradients();
        if (count == 0) { // fewer samples than replicas: this one adds nothing
          if (m.index == 0) g.values.fill(0.f);
          continue;
        }
        const ShardNorm s = shard_norm(count, n, weights);
        loss[r] = s.share * replicas_[r]->train(prec_.compute(), g, {x.data() + begin * in_size, count},
                                                labels.subspan(begin * per, count * per),
                                                train_step_info(seed_, m, begin, 1, r == 0),
                                                prec_.loss_factor() * s.share / double(m.count), m.index > 0, NoHook{},
                                                prec_.master_values(), s.denominator);
      }
    });
    if (m.last()) {
      std::vector<float*> src(n_);
      for (std::size_t r = 0; r < n_; ++r) src[r] = replicas_[r]->gradients().values.data();
      finish(src);
    }
    double total = 0;
    for (double l : loss) total += l;
    return total;
  }

  template <TargetElement L>
  double step_chunks(input_view x, std::span<const L> labels, const MicroStep& m) {
    constexpr std::size_t per = targets_per_sample<Net, L>;
    const std::size_t n = labels.size() / per, chunks = o_.deterministic_chunks;
    const double weights = step_weight_total<classes_of<Net>>(replicas_[0]->loss(), labels, *this);
    std::vector<double> loss(chunks, 0.0);
    team_.parallel_for(n_, 1, [&](std::size_t lo, std::size_t hi) {
      for (std::size_t r = lo; r < hi; ++r)
        for (std::size_t j = r; j < chunks; j += n_) { // replica r takes chunks r, r + n, ...
          replica_type& rep = *replicas_[r];
          auto& chunk_labels = rep.template chunk_targets_of<L>();
          const std::size_t count =
              gather_strided<typename Net::input_shape, per>(x.data(), labels, j, chunks, rep.chunk_x, chunk_labels);
          grads_type& g = *chunk_grads_[j];
          if (count == 0) {
            if (m.index == 0) g.values.fill(0.f);
            continue;
          }
          const ShardNorm s = shard_norm(count, n, weights);
          loss[j] = s.share * rep.train(prec_.compute(), g, {rep.chunk_x.data(), count},
                                        std::span<const L>(chunk_labels), train_step_info(seed_, m, j, chunks, j == 0),
                                        prec_.loss_factor() * s.share / double(m.count), m.index > 0, NoHook{},
                                        prec_.master_values(), s.denominator);
        }
    });
    if (m.last()) {
      std::vector<float*> src(chunks);
      for (std::size_t j = 0; j < chunks; ++j) src[j] = chunk_grads_[j]->values.data();
      finish(src);
    }
    double total = 0;
    for (double l : loss) total += l;
    return total;
  }

  /// Sums the gradient stores in order and steps the optimiser (unless fp16 overflowed: then
  /// every replica skips the step together, the sum holding all their gradients).
  void finish(std::span<float* const> src) {
    sum_in_order(team_, src, total_.values.data(), total_.values.size());
    if (!prec_.prepare_step(team_, total_.values.span())) return;
    opt_.step(params_.values.span(), std::span<const float>(total_.values.data(), total_.values.size()));
    prec_.after_step(team_);
  }

  DataParallelOptions o_;
  std::uint64_t seed_;
  std::size_t n_;      // replicas
  ThreadPool team_;    // one thread per replica (the caller is replica 0's)
  params_type params_; // float master parameters
  PrecisionState<Precision, Net> prec_;
  std::vector<std::unique_ptr<ThreadPool>> pools_;
  std::vector<std::unique_ptr<replica_type>> replicas_;
  std::vector<std::unique_ptr<grads_type>> chunk_grads_; // deterministic mode: one per chunk
  grads_type total_;
  Opt opt_;
};

} // namespace cohort::detail
