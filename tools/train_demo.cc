// kolo-train-demo: data-parallel training of a small MLP, gradients averaged by kolo.
//
//   mpiexec.mpich -n 2 build/bin/kolo-train-demo [--epochs N] [--batch B] [--lr X]
//                                                [--momentum M] [--seed S] [--check-single]
//
// Every rank builds the same model (same seed) and the same global dataset, then
// trains on its own shard (see train_demo_data.h). At each step it computes
// gradients over its part of the global batch, scaled by n / B, so that kolo's
// AVERAGE over n ranks yields exactly the gradient of the global batch of B
// samples, whatever the split. Backward hands each layer's weight and bias
// gradients to kolo as soon as they are computed (last layer first), so the
// exchange overlaps the rest of backward; the update waits for all of them.
//
// It exits non-zero unless held-out accuracy reaches 0.95 and every rank holds
// bit-identical weights at the end (checked through kolo itself: allreduce MIN and
// MAX of the weights must both equal the local weights bit for bit). With
// --check-single, rank 0 also replays the same global batches in one process and
// the largest weight difference must be at most 1e-4.
#include <kolo/kolo.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "train_demo_data.h"
#include "train_demo_model.h"

namespace kolo::tools {
namespace {

constexpr double kMinAccuracy = 0.95;
constexpr double kMaxSingleDiff = 1e-4;
constexpr int kTrainSize = 2048;
constexpr int kTestSize = 2000;

struct Options {
  int epochs = 20;
  int batch = 64;  // global
  double lr = 0.02;
  double momentum = 0.9;
  uint64_t seed = 1;
  bool check_single = false;
};

bool parse_options(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--check-single") {
      options->check_single = true;
    } else if (arg == "--epochs" && has_value) {
      options->epochs = std::atoi(argv[++i]);
    } else if (arg == "--batch" && has_value) {
      options->batch = std::atoi(argv[++i]);
    } else if (arg == "--lr" && has_value) {
      options->lr = std::atof(argv[++i]);
    } else if (arg == "--momentum" && has_value) {
      options->momentum = std::atof(argv[++i]);
    } else if (arg == "--seed" && has_value) {
      options->seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      return false;
    }
  }
  return options->epochs >= 1 && options->batch >= 1 && options->batch <= kTrainSize &&
         options->lr > 0.0 && options->momentum >= 0.0 && options->momentum < 1.0;
}

// Receives each layer's gradients as backward finishes them; finish() returns
// once every submitted gradient holds its final (exchanged) value.
class GradientExchange {
 public:
  virtual ~GradientExchange() = default;
  virtual void submit(int layer, Dense* grad) = 0;
  virtual void finish() = 0;
};

// Averages gradients across ranks, in place, one named tensor per parameter.
class KoloExchange : public GradientExchange {
 public:
  void submit(int layer, Dense* grad) override {
    const std::string suffix = std::to_string(layer + 1);
    handles_.push_back(kolo::allreduce_async("grad/W" + suffix, grad->w.data(), grad->w.data(),
                                             static_cast<int64_t>(grad->w.size()),
                                             KOLO_OP_AVERAGE));
    handles_.push_back(kolo::allreduce_async("grad/b" + suffix, grad->b.data(), grad->b.data(),
                                             static_cast<int64_t>(grad->b.size()),
                                             KOLO_OP_AVERAGE));
  }
  void finish() override {
    for (kolo::Handle& handle : handles_) handle.wait_or_throw();
    handles_.clear();
  }

 private:
  std::vector<kolo::Handle> handles_;
};

// The single-process replay: the gradient of the whole global batch is local.
class NoExchange : public GradientExchange {
 public:
  void submit(int, Dense*) override {}
  void finish() override {}
};

struct EpochStats {
  double loss_sum = 0.0;
  double correct = 0.0;
  double count = 0.0;
};

struct Trainer {
  Trainer(const Options& options)
      : model(make_mlp({2, 16, 16, 2}, options.seed)),
        grads(zeros_like(model)),
        sgd(model, options.lr, options.momentum) {}
  Mlp model;
  Mlp grads;
  MomentumSgd sgd;
};

// One epoch over the batch parts of `ranks` (this rank alone, or all of them in the
// single-process replay). scale turns a gradient sum into this process's share.
EpochStats train_epoch(const Dataset& train, const Sharding& sharding,
                       const std::vector<int>& ranks, int epoch, double scale,
                       GradientExchange* exchange, Trainer* trainer) {
  std::vector<std::vector<int>> orders;
  for (int r : ranks) orders.push_back(sharding.epoch_order(r, epoch));
  EpochStats stats;
  Dataset batch;
  for (int step = 0; step < sharding.steps_per_epoch(); ++step) {
    std::vector<int> indices;
    for (size_t k = 0; k < ranks.size(); ++k) {
      const std::vector<int> part = sharding.batch(orders[k], ranks[k], step);
      indices.insert(indices.end(), part.begin(), part.end());
    }
    gather(train, indices, &batch);
    const BatchResult result =
        forward_backward(trainer->model, batch, scale, &trainer->grads,
                         [&](int layer) { exchange->submit(layer, &trainer->grads.layers[layer]); });
    exchange->finish();
    trainer->sgd.step(trainer->grads, &trainer->model);
    stats.loss_sum += result.loss_sum;
    stats.correct += result.correct;
    stats.count += batch.size();
  }
  return stats;
}

// Sums the epoch's statistics over all ranks (exact: counts are small integers).
EpochStats global_stats(EpochStats local) {
  double values[3] = {local.loss_sum, local.correct, local.count};
  kolo::allreduce_async("epoch/stats", values, values, 3, KOLO_OP_SUM).wait_or_throw();
  return EpochStats{values[0], values[1], values[2]};
}

// True when every rank holds exactly these weights: the elementwise MIN and MAX
// over ranks must both equal them bit for bit, on every rank.
bool weights_identical_everywhere(const Mlp& model) {
  const std::vector<double> mine = flatten(model);
  const int64_t n = static_cast<int64_t>(mine.size());
  std::vector<double> lo(mine.size()), hi(mine.size());
  kolo::Handle min_handle = kolo::allreduce_async("check/min", mine.data(), lo.data(), n, KOLO_OP_MIN);
  kolo::Handle max_handle = kolo::allreduce_async("check/max", mine.data(), hi.data(), n, KOLO_OP_MAX);
  min_handle.wait_or_throw();
  max_handle.wait_or_throw();
  const size_t bytes = mine.size() * sizeof(double);
  int32_t differs = std::memcmp(lo.data(), mine.data(), bytes) != 0 ||
                    std::memcmp(hi.data(), mine.data(), bytes) != 0;
  kolo::allreduce_async("check/differs", &differs, &differs, 1, KOLO_OP_MAX).wait_or_throw();
  return differs == 0;
}

// Replays the distributed run in this process; returns the largest absolute
// difference between its weights and `distributed`.
double single_process_difference(const Options& options, const Dataset& train,
                                 const Sharding& sharding, const Mlp& distributed) {
  Trainer single(options);
  NoExchange none;
  std::vector<int> all_ranks;
  for (int r = 0; r < sharding.world_size(); ++r) all_ranks.push_back(r);
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    train_epoch(train, sharding, all_ranks, epoch, 1.0 / options.batch, &none, &single);
  }
  const std::vector<double> a = flatten(single.model), b = flatten(distributed);
  double worst = 0.0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::fmax(worst, std::fabs(a[k] - b[k]));
  return worst;
}

int run(const Options& options) {
  kolo::Session session;
  const int rank = session.rank(), size = session.size();
  const bool leader = rank == 0;
  const auto start = std::chrono::steady_clock::now();
  if (size > options.batch) {
    if (leader) std::fprintf(stderr, "kolo-train-demo: --batch must be at least the rank count\n");
    return 2;
  }
  const Dataset train = make_ring_dataset(kTrainSize, options.seed);
  const Dataset test = make_ring_dataset(kTestSize, options.seed + 1000003);
  const Sharding sharding(kTrainSize, options.batch, size, options.seed);
  Trainer trainer(options);
  KoloExchange exchange;
  const double scale = static_cast<double>(size) / options.batch;
  double test_accuracy = 0.0, last_loss = 0.0;
  for (int epoch = 0; epoch < options.epochs; ++epoch) {
    const EpochStats stats = global_stats(
        train_epoch(train, sharding, {rank}, epoch, scale, &exchange, &trainer));
    test_accuracy = accuracy(trainer.model, test);
    last_loss = stats.loss_sum / stats.count;
    if (leader) {
      std::printf("epoch %3d/%d  loss %.4f  train acc %.4f  test acc %.4f\n", epoch + 1,
                  options.epochs, last_loss, stats.correct / stats.count, test_accuracy);
    }
  }
  const bool identical = weights_identical_everywhere(trainer.model);
  double diff = 0.0;
  if (options.check_single && leader) {
    diff = single_process_difference(options, train, sharding, trainer.model);
  }
  // Rank 0 alone knows the replay's verdict; share it so every rank exits alike.
  int32_t failed = test_accuracy < kMinAccuracy || !identical || !(diff <= kMaxSingleDiff);
  kolo::allreduce_async("check/failed", &failed, &failed, 1, KOLO_OP_MAX).wait_or_throw();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (leader) {
    char single[96] = "single-process check: off";
    if (options.check_single) {
      std::snprintf(single, sizeof single, "single-process max |dw| %.3g (max %.0e)", diff,
                    kMaxSingleDiff);
    }
    char line[512];
    std::snprintf(line, sizeof line,
                  "kolo-train-demo: %s  ranks %d  epochs %d  steps %d  global batch %d  "
                  "loss %.4f  test acc %.4f (min %.2f)  weights identical on all ranks: %s  "
                  "%s  %.2f s",
                  failed ? "FAIL" : "PASS", size, options.epochs,
                  options.epochs * sharding.steps_per_epoch(), options.batch, last_loss,
                  test_accuracy, kMinAccuracy, identical ? "yes" : "NO", single, seconds);
    std::printf("%s\n", line);
  }
  return failed ? 1 : 0;
}

}  // namespace
}  // namespace kolo::tools

int main(int argc, char** argv) {
  kolo::tools::Options options;
  if (!kolo::tools::parse_options(argc, argv, &options)) {
    std::fprintf(stderr,
                 "usage: %s [--epochs N] [--batch GLOBAL_BATCH] [--lr X] [--momentum M]"
                 " [--seed S] [--check-single]\n",
                 argv[0]);
    return 2;
  }
  try {
    return kolo::tools::run(options);
  } catch (const kolo::Error& error) {
    std::fprintf(stderr, "kolo-train-demo: %s\n", error.what());
    return 1;
  }
}
