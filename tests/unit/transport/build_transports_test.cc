// build_transports (Note [Which transports a world offers] in transport/registry.cc):
// which transports a world offers on one node, on several equal nodes and with a
// device, decided by the registry over a fake backend, fake verbs and a fake
// device maker.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/unit/transport/fake_transport.h"
#include "transport/factory.h"
#include "transport/point_to_point.h"
#include "transport/registry.h"
#include "transport/world.h"
#include "transports/shm/transport.h"

namespace kolo::transport {
namespace {

// A backend that can build what it is told, and records what it was asked.
class FakeFactory : public TransportFactory {
 public:
  bool equal = true;
  bool has_device = false;
  Status native_answer = Status::OK();
  std::vector<std::string> asked;
  int crosses = 0;
  std::shared_ptr<CrossEngine> device_cross;

  Status native(std::unique_ptr<Transport>* out) override { return make("mpi", out, native_answer); }
  std::vector<size_t> node_slots;
  Status node(size_t slot_bytes, std::unique_ptr<shm::ShmTransport>* out) override {
    asked.push_back("node");
    node_slots.push_back(slot_bytes);
    *out = std::make_unique<shm::ShmTransport>(nullptr);  // engines unused: named "shm"
    return Status::OK();
  }
  Status equal_nodes(bool* out) override {
    *out = equal;
    return Status::OK();
  }
  Status cross(std::shared_ptr<CrossEngine>* out) override {
    struct Cross : CrossEngine {
      int rank() const override { return 0; }
      int size() const override { return 2; }
      Status allreduce(void*, int64_t, DataType, ReduceOp) override { return Status::OK(); }
      std::unique_ptr<Work> allgatherv(const void*, void*, const std::vector<int64_t>&,
                                       const std::vector<int64_t>&, DataType) override {
        return nullptr;
      }
      std::unique_ptr<Work> broadcast(void*, int64_t, DataType, int) override { return nullptr; }
      std::unique_ptr<Work> alltoallv(const void*, const std::vector<int64_t>&,
                                      const std::vector<int64_t>&, void*,
                                      const std::vector<int64_t>&, const std::vector<int64_t>&,
                                      DataType) override {
        return nullptr;
      }
      std::unique_ptr<Work> reducescatter(const void*, void*, const std::vector<int64_t>&,
                                          DataType, ReduceOp) override {
        return nullptr;
      }
    };
    ++crosses;
    *out = std::make_shared<Cross>();
    return Status::OK();
  }
  // The registry's HierarchicalMaker over this backend: it gets the node's engines
  // and the cross engine, and builds nothing else.
  HierarchicalMaker hierarchical() {
    return [this](ControlPlane*, std::unique_ptr<shm::ShmTransport> node,
                  std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out) {
      EXPECT_NE(node, nullptr);
      EXPECT_NE(cross, nullptr);
      return make("hierarchical", out);
    };
  }
  // The registry's DeviceMaker over this backend.
  DeviceMaker device() {
    return [this](size_t, std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out,
                  DeviceSupport** support) {
      *support = nullptr;
      device_cross = cross;
      if (!has_device) return unsupported("no device here");
      return make("nccl", out);
    };
  }

 private:
  Status make(const std::string& name, std::unique_ptr<Transport>* out, Status answer = Status::OK()) {
    asked.push_back(name);
    if (!answer.ok()) return answer;
    *out = std::make_unique<FakeTransport>(name);
    return Status::OK();
  }
};

// Point-to-point verbs that are never used: the registry builds the ring and the
// Adasum engine over them, and building sends nothing.
class IdleP2P : public PointToPoint {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  Status isend(int, const void*, size_t, int, RequestId*) override { return unused(); }
  Status irecv(int, void*, size_t, int, RequestId*) override { return unused(); }
  Status wait(RequestId) override { return unused(); }
  Status test(RequestId, bool*) override { return unused(); }

 private:
  static Status unused() { return internal_error("IdleP2P is not for sending"); }
};

// build_transports over `f`, with verbs unless `verbs` is false.
Status build(FakeFactory& f, const Topology& topology, const BuildOptions& options, World* w,
             bool verbs = true) {
  if (verbs) w->p2p = std::make_unique<IdleP2P>();
  return build_transports(f, topology, options, w, f.device(), f.hierarchical());
}

std::vector<std::string> names_of(const World& w) {
  std::vector<std::string> names;
  for (const auto& t : w.transports) names.push_back(t->name());
  return names;
}

using Names = std::vector<std::string>;

// Note [Which transports a world offers]: the registry, not the backend, decides.
TEST(BuildTransports, OneNodeOffersShmSeveralEqualNodesHierarchical) {
  FakeFactory one;
  World a;
  ASSERT_TRUE(build(one, Topology{0, 4, 0, 4, 0, 1}, BuildOptions{}, &a).ok());
  EXPECT_EQ(names_of(a), (Names{"mpi", "ring", "adasum", "shm"}));
  EXPECT_EQ(a.device_support, nullptr);  // the device transport said Unsupported: not offered

  FakeFactory two;
  World b;
  ASSERT_TRUE(build(two, Topology{0, 4, 0, 2, 0, 2}, BuildOptions{}, &b).ok());
  EXPECT_EQ(names_of(b), (Names{"mpi", "ring", "adasum", "hierarchical"}));
  EXPECT_EQ(two.crosses, 1);
  // The node step's engines with the hierarchical transport's slots, not shm's.
  EXPECT_EQ(two.node_slots, (std::vector<size_t>{hierarchical_slot_bytes()}));

  FakeFactory unequal;
  unequal.equal = false;
  World c;
  ASSERT_TRUE(build(unequal, Topology{0, 3, 0, 2, 0, 2}, BuildOptions{}, &c).ok());
  EXPECT_EQ(names_of(c), (Names{"mpi", "ring", "adasum"}));
  EXPECT_EQ(unequal.crosses, 0);
}

TEST(BuildTransports, UnsupportedIsLeftOutOtherErrorsFailInit) {
  FakeFactory f;
  f.native_answer = unsupported("no native collectives");
  World a;
  ASSERT_TRUE(build(f, Topology{0, 2, 0, 2, 0, 1}, BuildOptions{}, &a).ok());
  EXPECT_EQ(names_of(a), (Names{"ring", "adasum", "shm"}));

  FakeFactory g;
  g.native_answer = Status(Code::kTransport, "MPI said no");
  World b;
  Status s = build(g, Topology{0, 2, 0, 2, 0, 1}, BuildOptions{}, &b);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_EQ(g.asked, (Names{"mpi"}));  // nothing built after the failure
}

// The ring and Adasum are the registry's, over the world's verbs: none without them.
TEST(BuildTransports, RingAndAdasumComeWithTheWorldsVerbs) {
  FakeFactory f;
  World w;
  ASSERT_TRUE(build(f, Topology{0, 2, 0, 2, 0, 1}, BuildOptions{}, &w, /*verbs=*/false).ok());
  EXPECT_EQ(names_of(w), (Names{"mpi", "shm"}));
}

TEST(BuildTransports, DeviceGoesHierarchicalOnlyWhenAskedAndNodesAreEqual) {
  for (bool knob : {false, true}) {
    for (bool equal : {false, true}) {
      FakeFactory f;
      f.has_device = true;
      f.equal = equal;
      World w;
      BuildOptions options;
      options.hierarchical_allreduce = knob;
      ASSERT_TRUE(build(f, Topology{0, 2, 0, 2, 0, 1}, options, &w).ok());
      EXPECT_EQ(names_of(w).back(), "nccl");
      const bool want_cross = knob && equal && known_transports().back().built;  // nccl
      EXPECT_EQ(f.device_cross != nullptr, want_cross) << "knob " << knob << " equal " << equal;
    }
  }
}

}  // namespace
}  // namespace kolo::transport
