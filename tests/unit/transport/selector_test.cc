// The selector (transport/selector.h): explicit preferences, the auto order and
// the selection table's choices, deterministic and Adasum buckets, the kept
// choice, with fake transports.
#include "transport/selector.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "transport/reduction.h"
#include "tests/unit/transport/fake_transport.h"

namespace kolo::transport {
namespace {


struct Fakes {
  std::vector<std::unique_ptr<FakeTransport>> owned;
  std::vector<Transport*> offered;
  Transport* add(const std::string& name, Status verdict = Status::OK()) {
    owned.push_back(std::make_unique<FakeTransport>(name, std::move(verdict)));
    offered.push_back(owned.back().get());
    return offered.back();
  }
};

Bucket cpu_bucket(size_t bytes) {
  Bucket b;
  b.dtype = DataType::kFloat32;
  b.count = static_cast<int64_t>(bytes / 4);
  return b;
}

constexpr size_t kSmall = (64 << 10) - 4;  // the largest float32 bucket under 64 KiB
constexpr size_t kLarge = 64 << 10;

// Serves only the buckets `serves` accepts and tells the rest `why`, as a real
// transport with limits does (one memory kind, some dtypes).
class PickyTransport : public FakeTransport {
 public:
  PickyTransport(std::string name, std::function<bool(const Bucket&)> serves, std::string why)
      : FakeTransport(std::move(name)), serves_(std::move(serves)), why_(std::move(why)) {}
  Status supports(const Bucket& b) const override {
    return serves_(b) ? Status::OK() : unsupported(std::string(name()) + ": " + why_);
  }

 private:
  std::function<bool(const Bucket&)> serves_;
  std::string why_;
};

// Serves the buckets of one memory kind only, as the real transports do.
std::unique_ptr<PickyTransport> of_memory(std::string name, DeviceKind kind) {
  return std::make_unique<PickyTransport>(
      std::move(name), [kind](const Bucket& b) { return b.device.kind == kind; }, "wrong memory");
}

TEST(SelectorTest, ExplicitPreferencePicksThatTransport) {
  Fakes f;
  f.add("mpi");
  Transport* ring = f.add("ring");
  Selector selector(f.offered, "ring", Topology{});
  ASSERT_TRUE(selector.validate().ok());
  for (size_t bytes : {size_t{4}, kSmall, kLarge, size_t{64} << 20}) {
    Transport* chosen = nullptr;
    ASSERT_TRUE(selector.select(cpu_bucket(bytes), &chosen).ok());
    EXPECT_EQ(chosen, ring);
  }
}

// Note [Deterministic reductions] (transport.h): a marked bucket goes only to a
// transport that folds in rank order, whatever the table asks first; where none
// may take it, the error names the knob. MIN and integers are never marked.
TEST(SelectorTest, DeterministicBucketsGoToRankOrderTransportsOnly) {
  Fakes f;
  Transport* mpi = f.add("mpi");
  Transport* ring = f.add("ring");
  SelectorOptions mpi_first;
  mpi_first.rules = "allreduce host * * : mpi";
  Selector selector(f.offered, mpi_first, Topology{});
  ASSERT_TRUE(selector.validate().ok());
  Bucket b = cpu_bucket(kLarge);
  b.reduction = decide_reduction(ReduceOp::kAverage, DataType::kFloat32, 1.0, 1.0, 2, true);
  ASSERT_TRUE(b.reduction.deterministic);
  Transport* chosen = nullptr;
  ASSERT_TRUE(selector.select(b, &chosen).ok());
  EXPECT_EQ(chosen, ring);
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    EXPECT_FALSE(decide_reduction(op, DataType::kFloat32, 1.0, 1.0, 2, true).deterministic);
  }
  EXPECT_FALSE(decide_reduction(ReduceOp::kSum, DataType::kInt32, 1.0, 1.0, 2, true).deterministic);
  b.reduction.deterministic = false;
  ASSERT_TRUE(selector.select(b, &chosen).ok());
  EXPECT_EQ(chosen, mpi);

  SelectorOptions only;
  only.rules = "allreduce host * * : mpi only";
  Selector mpi_only(f.offered, only, Topology{});
  b.reduction.deterministic = true;
  const Status s = mpi_only.select(b, &chosen);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("KOLO_DETERMINISTIC"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("does not reduce in rank order"), std::string::npos) << s.message();
}

// Note [Adasum has an engine of its own]: an op=adasum bucket goes to "adasum"
// whatever KOLO_TRANSPORT says, and "adasum" never takes another op's bucket.
TEST(SelectorTest, AdasumBucketsGoToTheAdasumEngineOnly) {
  Fakes f;
  f.add("mpi");
  f.add("ring");
  Transport* adasum = f.add("adasum");
  for (const char* preference : {"auto", "ring", "mpi"}) {
    Selector selector(f.offered, preference, Topology{});
    Bucket b = cpu_bucket(kLarge);
    b.reduction.op = ReduceOp::kAdasum;
    Transport* chosen = nullptr;
    ASSERT_TRUE(selector.select(b, &chosen).ok()) << preference;
    EXPECT_EQ(chosen, adasum) << preference;
    for (size_t bytes : {size_t{4}, kLarge}) {
      ASSERT_TRUE(selector.select(cpu_bucket(bytes), &chosen).ok());
      EXPECT_NE(chosen, adasum) << preference << " " << bytes;
    }
    const std::vector<std::string> order = selector.auto_order(cpu_bucket(kLarge));
    EXPECT_EQ(std::count(order.begin(), order.end(), "adasum"), 0);
  }
  Fakes without;
  without.add("mpi");
  Bucket b = cpu_bucket(kSmall);
  b.reduction.op = ReduceOp::kAdasum;
  Transport* chosen = nullptr;
  const Status s = Selector(without.offered, "auto", Topology{}).select(b, &chosen);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("no transport serves bucket"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("offered: mpi"), std::string::npos) << s.message();
  // ADASUM keeps its op and factors: no 1/size.
  const Reduction r = decide_reduction(ReduceOp::kAdasum, DataType::kFloat32, 2.0, 0.5, 4);
  EXPECT_EQ(r.op, ReduceOp::kAdasum);
  EXPECT_EQ(r.prescale, 2.0);
  EXPECT_EQ(r.postscale, 0.5);
  EXPECT_EQ(r.divide, 1);
}

TEST(SelectorTest, ExplicitPreferenceNotOfferedFailsValidation) {
  Fakes f;
  f.add("mpi");
  f.add("ring");
  Status s = Selector(f.offered, "loopback", Topology{}).validate();
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("offers: mpi, ring"), std::string::npos) << s.message();

  s = Selector(f.offered, "shm", Topology{}).validate();
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("not offered by this world"), std::string::npos) << s.message();

  // An unknown name is refused when the knob is read (validate_preference).
  s = Selector(f.offered, "tcp", Topology{}).validate();
  EXPECT_EQ(s.code(), Code::kUnsupported);

  Transport* chosen = nullptr;
  EXPECT_FALSE(Selector(f.offered, "loopback", Topology{}).select(cpu_bucket(4), &chosen).ok());
  EXPECT_EQ(chosen, nullptr);
}

TEST(SelectorTest, ExplicitPreferenceThatCannotServeTheBucketIsAnError) {
  Fakes f;
  f.add("mpi");
  f.add("ring", unsupported("ring: CPU memory only"));
  Transport* chosen = nullptr;
  const Status s = Selector(f.offered, "ring", Topology{}).select(cpu_bucket(4), &chosen);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("ring: CPU memory only"), std::string::npos) << s.message();
  EXPECT_EQ(chosen, nullptr);
}

TEST(SelectorTest, AutoOrderBySize) {
  Fakes f;  // offered in an order unlike either auto order
  f.add("loopback");
  f.add("ring");
  f.add("mpi");
  const Selector selector(f.offered, "auto", Topology{});
  ASSERT_TRUE(selector.validate().ok());
  using Names = std::vector<std::string>;
  EXPECT_EQ(selector.auto_order(cpu_bucket(0)), (Names{"mpi", "loopback", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kSmall)), (Names{"mpi", "loopback", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kLarge)), (Names{"ring", "mpi", "loopback"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(64 << 20)), (Names{"ring", "mpi", "loopback"}));
}

TEST(SelectorTest, AutoOrderListsOnlyOfferedAndUnrankedLast) {
  Fakes f;
  f.add("custom");
  f.add("ring");
  f.add("mpi");
  f.add("nccl");
  const Selector selector(f.offered, "auto", Topology{});
  using Names = std::vector<std::string>;
  // Small host buckets: the rule's "mpi", then the rest in the world's order;
  // large: the rule's "ring, mpi", then the rest. Only transports whose
  // capabilities take the bucket's memory are listed.
  EXPECT_EQ(selector.auto_order(cpu_bucket(kSmall)), (Names{"mpi", "custom", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kLarge)), (Names{"ring", "mpi", "custom"}));
  Bucket gpu = cpu_bucket(kLarge);
  gpu.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(selector.auto_order(gpu), (Names{"nccl"}));
}

TEST(SelectorTest, AutoTakesFirstThatSupportsTheBucket) {
  log::set_level(LogLevel::kDebug);  // the skip lines go to stderr
  Fakes f;
  f.add("loopback");
  f.add("ring", unsupported("ring: no"));
  Transport* mpi = f.add("mpi");
  const Selector selector(f.offered, "auto", Topology{});
  Transport* chosen = nullptr;
  ASSERT_TRUE(selector.select(cpu_bucket(kSmall), &chosen).ok());
  EXPECT_EQ(chosen, mpi);
  ASSERT_TRUE(selector.select(cpu_bucket(kLarge), &chosen).ok());  // ring says no
  EXPECT_EQ(chosen, mpi);
  log::set_level(LogLevel::kWarning);

  Fakes loopback_world;  // what the loopback world offers
  Transport* lb = loopback_world.add("loopback");
  Transport* ring = loopback_world.add("ring");
  const Selector lw(loopback_world.offered, "auto", Topology{});
  ASSERT_TRUE(lw.select(cpu_bucket(kSmall), &chosen).ok());
  EXPECT_EQ(chosen, lb);
  ASSERT_TRUE(lw.select(cpu_bucket(kLarge), &chosen).ok());
  EXPECT_EQ(chosen, ring);
}

TEST(SelectorTest, AutoWithNoSupportingTransportNamesTheReasons) {
  Fakes f;
  f.add("mpi", unsupported("mpi: not today"));
  f.add("ring", unsupported("ring: CPU memory only"));
  const Selector selector(f.offered, "auto", Topology{});
  Transport* chosen = nullptr;
  const Status s = selector.select(cpu_bucket(kLarge), &chosen);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("mpi: not today"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ring: CPU memory only"), std::string::npos) << s.message();
  EXPECT_EQ(chosen, nullptr);

  EXPECT_FALSE(Selector({}, "auto", Topology{}).validate().ok());
}

Topology nodes(int rank, int size, int node_size) {
  Topology t;
  t.rank = rank;
  t.size = size;
  t.local_rank = rank % node_size;
  t.local_size = std::min(node_size, size - rank / node_size * node_size);
  t.cross_rank = rank / node_size;
  t.cross_size = (size - t.local_rank + node_size - 1) / node_size;
  return t;
}

TEST(SelectorTest, AutoOrderOnOneNodeStartsWithShm) {
  Fakes f;  // what the MPI world offers on one node
  f.add("mpi");
  f.add("ring");
  f.add("shm");
  const Selector selector(f.offered, "auto", nodes(0, 4, 4));
  using Names = std::vector<std::string>;
  EXPECT_EQ(selector.auto_order(cpu_bucket(4)), (Names{"shm", "mpi", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kSmall)), (Names{"shm", "mpi", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kLarge)), (Names{"shm", "ring", "mpi"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(64 << 20)), (Names{"shm", "ring", "mpi"}));
  Bucket gpu = cpu_bucket(kLarge);
  gpu.device.kind = DeviceKind::kCuda;
  f.add("nccl");
  const Selector with_nccl(f.offered, "auto", nodes(0, 4, 4));
  EXPECT_EQ(with_nccl.auto_order(gpu), (Names{"nccl"}));
}

// Note [Auto order]: on one node "auto" sends
// host collectives to shm first; KOLO_TRANSPORT=mpi forces MPI; a preference
// that implements none of them ("ring") falls back to the world's order.
TEST(SelectorTest, CollectiveOrder) {
  Fakes f;
  f.add("mpi");
  f.add("ring");
  f.add("shm");
  auto names = [](const std::vector<Transport*>& order) {
    std::vector<std::string> n;
    for (const Transport* t : order) n.push_back(t->name());
    return n;
  };
  using Names = std::vector<std::string>;
  const Collective kAllgather = Collective::kAllgather;
  CollectiveView host;
  EXPECT_EQ(names(Selector(f.offered, "auto", nodes(0, 4, 4)).collective_order(kAllgather, host)),
            (Names{"shm", "mpi", "ring"}));
  EXPECT_EQ(names(Selector(f.offered, "mpi", nodes(0, 4, 4)).collective_order(kAllgather, host)),
            (Names{"mpi", "ring", "shm"}));
  EXPECT_EQ(names(Selector(f.offered, "ring", nodes(0, 4, 4)).collective_order(kAllgather, host)),
            (Names{"ring", "mpi", "shm"}));
  EXPECT_EQ(names(Selector(f.offered, "shm", nodes(0, 4, 4)).collective_order(kAllgather, host)),
            (Names{"shm", "mpi", "ring"}));
  // Several nodes: the world's order (hierarchical implements none yet).
  EXPECT_EQ(names(Selector(f.offered, "auto", nodes(0, 8, 4)).collective_order(kAllgather, host)),
            (Names{"mpi", "ring", "shm"}));
  CollectiveView gpu;
  gpu.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(names(Selector(f.offered, "auto", nodes(0, 4, 4)).collective_order(kAllgather, gpu)),
            (Names{}));
}

// Several nodes of equal size: "auto" sends a collective to "hierarchical" from
// hierarchical_min_bytes(op) up, sizes being the same on every rank (alltoall:
// the world's total); KOLO_TRANSPORT=mpi still forces MPI.
TEST(SelectorTest, CollectiveOrderOnSeveralNodes) {
  Fakes f;
  f.add("mpi");
  f.add("ring");
  f.add("hierarchical");
  auto first = [&](const char* preference, Collective op, const CollectiveView& v) {
    return std::string(Selector(f.offered, preference, nodes(1, 4, 2)).collective_order(op, v)[0]->name());
  };
  CollectiveView v;  // float32
  // The default table's sizes (Note [Auto order]): 64 KiB, 1 MiB, 256 KiB.
  for (Collective op : {Collective::kAllgather, Collective::kReducescatter}) {
    const int64_t at = int64_t{64 << 10} / 4;
    v.recv_counts = {at - 1, 0, 0, 0};
    EXPECT_EQ(first("auto", op, v), "mpi") << collective_name(op);
    v.recv_counts = {at - 1, 0, 1, 0};
    EXPECT_EQ(first("auto", op, v), "hierarchical") << collective_name(op);
    EXPECT_EQ(first("mpi", op, v), "mpi") << collective_name(op);
  }
  v.count = int64_t{1 << 20} / 4;
  EXPECT_EQ(first("auto", Collective::kBroadcast, v), "hierarchical");
  v.count -= 1;
  EXPECT_EQ(first("auto", Collective::kBroadcast, v), "mpi");
  const int64_t per_rank = int64_t{256 << 10} / 4;
  EXPECT_EQ(first("auto", Collective::kAlltoall, v), "mpi");  // total unknown (-1)
  v.alltoall_total = 4 * per_rank;
  EXPECT_EQ(first("auto", Collective::kAlltoall, v), "hierarchical");
  v.alltoall_total -= 1;
  EXPECT_EQ(first("auto", Collective::kAlltoall, v), "mpi");
  CollectiveView gpu = v;
  gpu.device.kind = DeviceKind::kCuda;
  gpu.alltoall_total = 4 * per_rank;
  // No transport here takes device memory (their capabilities say so).
  EXPECT_TRUE(Selector(f.offered, "auto", nodes(1, 4, 2)).collective_order(Collective::kAlltoall, gpu).empty());
  // Nodes of one rank: MPI's own collective is the cross step; nothing to gain.
  v.alltoall_total = 4 * per_rank;
  EXPECT_EQ(Selector(f.offered, "auto", nodes(1, 4, 1)).collective_order(Collective::kAlltoall, v)[0]->name(),
            std::string("mpi"));
}

TEST(SelectorTest, AutoOrderOnSeveralNodes) {
  Fakes f;  // what the MPI world offers on several nodes of equal size
  f.add("mpi");
  f.add("ring");
  f.add("hierarchical");
  const Selector selector(f.offered, "auto", nodes(1, 4, 2));
  using Names = std::vector<std::string>;
  EXPECT_EQ(selector.auto_order(cpu_bucket(4)), (Names{"mpi", "hierarchical", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kSmall)), (Names{"mpi", "hierarchical", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kLarge)), (Names{"hierarchical", "ring", "mpi"}));
  // A world that offers shm although it spans nodes still does not rank it first.
  f.add("shm");
  const Selector odd(f.offered, "auto", nodes(1, 4, 2));
  EXPECT_EQ(odd.auto_order(cpu_bucket(kLarge)), (Names{"hierarchical", "ring", "mpi", "shm"}));
}

// KOLO_TRANSPORT_SMALL / _LARGE (and autotune): the class's first choice moves
// to the front of the auto order, for host buckets only; "auto" changes nothing;
// a name the world does not offer is refused by name.
TEST(SelectorTest, FirstChoicePerSizeClass) {
  Fakes f;
  f.add("mpi");
  f.add("ring");
  f.add("shm");
  f.add("nccl");
  Selector selector(f.offered, "auto", nodes(0, 4, 4));
  using Names = std::vector<std::string>;
  selector.set_first_choices("mpi", "ring");
  EXPECT_EQ(selector.auto_order(cpu_bucket(kSmall)), (Names{"mpi", "shm", "ring"}));
  EXPECT_EQ(selector.auto_order(cpu_bucket(kLarge)), (Names{"ring", "shm", "mpi"}));
  Bucket gpu = cpu_bucket(kLarge);
  gpu.device.kind = DeviceKind::kCuda;
  EXPECT_EQ(selector.auto_order(gpu).front(), "nccl");
  selector.set_first_choices("auto", "auto");
  EXPECT_EQ(selector.auto_order(cpu_bucket(kLarge)), (Names{"shm", "ring", "mpi"}));
  EXPECT_EQ(selector.host_transports(), (Names{"mpi", "ring", "shm"}));
  EXPECT_TRUE(selector.validate_first_choice("KOLO_TRANSPORT_SMALL", "shm").ok());
  const Status bad = selector.validate_first_choice("KOLO_TRANSPORT_LARGE", "nccl");
  EXPECT_EQ(bad.code(), Code::kInvalidArgument);
  EXPECT_NE(bad.message().find("KOLO_TRANSPORT_LARGE=\"nccl\""), std::string::npos) << bad.message();
}

// select() answers from orders computed when the selector is made and again
// whenever a first choice or the hierarchical preference changes (the
// autotuner's moves between cycles): the bucket it picks follows each change,
// and a transport the order names twice is tried once.
TEST(SelectorTest, SelectFollowsEveryChangeOfTheOrder) {
  Fakes f;
  Transport* mpi = f.add("mpi");
  Transport* ring = f.add("ring");
  Transport* hierarchical = f.add("hierarchical");
  Selector selector(f.offered, "auto", nodes(1, 4, 2));
  auto chosen_for = [&](size_t bytes) {
    Transport* chosen = nullptr;
    EXPECT_TRUE(selector.select(cpu_bucket(bytes), &chosen).ok()) << bytes;
    return chosen;
  };
  EXPECT_EQ(chosen_for(kSmall), mpi);
  EXPECT_EQ(chosen_for(kLarge), hierarchical);
  selector.set_first_choices("ring", "mpi");
  EXPECT_EQ(chosen_for(kSmall), ring);
  EXPECT_EQ(chosen_for(kLarge), mpi);
  selector.set_first_choices("auto", "auto");
  selector.set_prefer_hierarchical(true);
  EXPECT_EQ(chosen_for(kSmall), hierarchical);
  using Names = std::vector<std::string>;
  EXPECT_EQ(selector.auto_order(cpu_bucket(kSmall)), (Names{"hierarchical", "mpi", "ring"}));
  selector.set_prefer_hierarchical(false);
  EXPECT_EQ(chosen_for(kSmall), mpi);
}

// Note [The last choice is kept]: a bucket like the last one is answered from
// memory, and only such a bucket: one of the same count that differs in its dtype
// or its op alone gets a choice of its own, and the next like the first gets the
// first's again.
TEST(SelectorTest, TheLastChoiceIsKeptOnlyForTheSameKindOfBucket) {
  Fakes f;
  f.owned.push_back(std::make_unique<PickyTransport>(
      "mpi", [](const Bucket& b) { return b.dtype != DataType::kFloat16; }, "no float16"));
  Transport* mpi = f.owned.back().get();
  f.offered.push_back(mpi);
  Transport* ring = f.add("ring");
  Transport* adasum = f.add("adasum");
  SelectorOptions mpi_first;
  mpi_first.rules = "allreduce host * * : mpi";
  Selector selector(f.offered, mpi_first, Topology{});
  ASSERT_TRUE(selector.validate().ok());
  auto chosen_for = [&](DataType dtype, ReduceOp op) {
    Bucket b = cpu_bucket(kSmall);
    b.dtype = dtype;
    b.reduction.op = op;
    Transport* chosen = nullptr;
    EXPECT_TRUE(selector.select(b, &chosen).ok()) << dtype_name(dtype) << " " << op_name(op);
    return chosen;
  };
  EXPECT_EQ(chosen_for(DataType::kFloat32, ReduceOp::kSum), mpi);
  EXPECT_EQ(chosen_for(DataType::kFloat32, ReduceOp::kSum), mpi);
  EXPECT_EQ(chosen_for(DataType::kFloat16, ReduceOp::kSum), ring);
  EXPECT_EQ(chosen_for(DataType::kFloat32, ReduceOp::kSum), mpi);
  EXPECT_EQ(chosen_for(DataType::kFloat32, ReduceOp::kAdasum), adasum);
  EXPECT_EQ(chosen_for(DataType::kFloat32, ReduceOp::kSum), mpi);
}

// Unequal nodes (3 ranks in nodes of 2): cross sizes differ between ranks, but
// the world offers the same transports everywhere, so every rank still agrees.
TEST(SelectorTest, SameChoiceOnEveryRankWithUnequalNodes) {
  Fakes f;  // neither shm (not one node) nor hierarchical (unequal nodes)
  f.add("mpi");
  f.add("ring");
  for (size_t bytes : {size_t{4}, kSmall, kLarge, size_t{64} << 20}) {
    std::string first;
    for (int rank = 0; rank < 3; ++rank) {
      Transport* chosen = nullptr;
      ASSERT_TRUE(
          Selector(f.offered, "auto", nodes(rank, 3, 2)).select(cpu_bucket(bytes), &chosen).ok());
      if (rank == 0) first = chosen->name();
      EXPECT_EQ(first, chosen->name()) << bytes << " bytes, rank " << rank;
    }
  }
}

// Selection depends on nothing rank-specific: every rank picks the same.
TEST(SelectorTest, SameChoiceOnEveryRank) {
  Fakes f;
  f.add("mpi");
  f.add("ring");
  for (size_t bytes : {size_t{4}, kSmall, kLarge}) {
    std::string first;
    for (int rank = 0; rank < 4; ++rank) {
      Topology t;
      t.rank = rank;
      t.size = 4;
      t.local_rank = rank % 2;
      t.local_size = 2;
      t.cross_rank = rank / 2;
      t.cross_size = 2;
      Transport* chosen = nullptr;
      ASSERT_TRUE(Selector(f.offered, "auto", t).select(cpu_bucket(bytes), &chosen).ok());
      if (rank == 0) first = chosen->name();
      EXPECT_EQ(first, chosen->name());
    }
  }
}

// KOLO_HIERARCHICAL_ALLREDUCE=1 puts the hierarchical path first for every size
// on several nodes; without it, small buckets go to "mpi".
TEST(SelectorTest, HierarchicalKnobPrefersHierarchicalAtEverySize) {
  std::vector<std::unique_ptr<Transport>> owned;
  std::vector<Transport*> offered;
  for (const char* name : {"mpi", "ring", "hierarchical"}) {
    owned.push_back(std::make_unique<FakeTransport>(name));
    offered.push_back(owned.back().get());
  }
  Topology two_nodes{0, 4, 0, 2, 0, 2};
  Bucket tiny;
  tiny.count = 2;
  Selector plain(offered, "auto", two_nodes, false);
  Selector knob(offered, "auto", two_nodes, true);
  Transport* chosen = nullptr;
  ASSERT_TRUE(plain.select(tiny, &chosen).ok());
  EXPECT_STREQ(chosen->name(), "mpi");
  ASSERT_TRUE(knob.select(tiny, &chosen).ok());
  EXPECT_STREQ(chosen->name(), "hierarchical");
}

Bucket cuda_bucket(size_t bytes) {
  Bucket b = cpu_bucket(bytes);
  b.device = Device{DeviceKind::kCuda, 0, nullptr};
  return b;
}

// KOLO_TRANSPORT steers the buckets of its own memory kind; the others go in auto
// order, where a CUDA bucket tries nccl first.
TEST(SelectorTest, PreferenceSteersOnlyItsOwnMemoryKind) {
  std::vector<std::unique_ptr<Transport>> owned;
  owned.push_back(of_memory("mpi", DeviceKind::kCpu));
  owned.push_back(of_memory("shm", DeviceKind::kCpu));
  owned.push_back(of_memory("nccl", DeviceKind::kCuda));
  std::vector<Transport*> offered;
  for (auto& t : owned) offered.push_back(t.get());
  Topology one_node;
  one_node.size = one_node.local_size = 2;

  Transport* chosen = nullptr;
  Selector mpi_preferred(offered, "mpi", one_node);
  ASSERT_TRUE(mpi_preferred.select(cuda_bucket(1 << 20), &chosen).ok());
  EXPECT_STREQ(chosen->name(), "nccl");
  ASSERT_TRUE(mpi_preferred.select(cpu_bucket(1 << 20), &chosen).ok());
  EXPECT_STREQ(chosen->name(), "mpi");

  Selector nccl_preferred(offered, "nccl", one_node);
  ASSERT_TRUE(nccl_preferred.validate().ok());
  ASSERT_TRUE(nccl_preferred.select(cpu_bucket(1 << 20), &chosen).ok());
  EXPECT_STREQ(chosen->name(), "shm");  // auto order on one node
  ASSERT_TRUE(nccl_preferred.select(cuda_bucket(4), &chosen).ok());
  EXPECT_STREQ(chosen->name(), "nccl");

  Selector automatic(offered, "auto", one_node);
  EXPECT_EQ(automatic.auto_order(cuda_bucket(4)).front(), "nccl");
  ASSERT_TRUE(automatic.select(cuda_bucket(64 << 20), &chosen).ok());
  EXPECT_STREQ(chosen->name(), "nccl");
}

// Without a device transport a CUDA bucket fails, naming why each transport said no.
TEST(SelectorTest, CudaBucketWithoutDeviceTransportNamesTheReasons) {
  std::unique_ptr<PickyTransport> mpi = of_memory("mpi", DeviceKind::kCpu);
  Selector selector({mpi.get()}, "auto", Topology{});
  Transport* chosen = nullptr;
  const Status s = selector.select(cuda_bucket(4), &chosen);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("mpi: no device memory"), std::string::npos) << s.message();
  EXPECT_EQ(chosen, nullptr);
}

}  // namespace
}  // namespace kolo::transport
