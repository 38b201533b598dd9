// build_transports (Note [Which transports a world offers] in transport/registry.cc):
// which transports a world offers on one node, on several equal nodes and with a
// device, decided by the registry over a fake backend.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "tests/unit/transport/fake_transport.h"
#include "transport/factory.h"
#include "transport/registry.h"
#include "transport/world.h"

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
  Status ring(std::unique_ptr<Transport>* out) override { return make("ring", out); }
  Status shared_memory(size_t, std::unique_ptr<Transport>* out) override { return make("shm", out); }
  Status equal_nodes(bool* out) override {
    *out = equal;
    return Status::OK();
  }
  Status cross(std::shared_ptr<CrossEngine>* out) override {
    struct Cross : CrossEngine {
      Status allreduce(void*, int64_t, DataType, ReduceOp) override { return Status::OK(); }
    };
    ++crosses;
    *out = std::make_shared<Cross>();
    return Status::OK();
  }
  Status hierarchical(std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out) override {
    EXPECT_NE(cross, nullptr);
    return make("hierarchical", out);
  }
  Status device(size_t, std::shared_ptr<CrossEngine> cross, std::unique_ptr<Transport>* out,
                DeviceSupport** support) override {
    *support = nullptr;
    device_cross = cross;
    if (!has_device) return unsupported("no device here");
    return make("nccl", out);
  }

 private:
  Status make(const std::string& name, std::unique_ptr<Transport>* out, Status answer = Status::OK()) {
    asked.push_back(name);
    if (!answer.ok()) return answer;
    *out = std::make_unique<FakeTransport>(name);
    return Status::OK();
  }
};

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
  ASSERT_TRUE(build_transports(one, Topology{0, 4, 0, 4, 0, 1}, BuildOptions{}, &a).ok());
  EXPECT_EQ(names_of(a), (Names{"mpi", "ring", "shm"}));
  EXPECT_EQ(a.device_support, nullptr);  // the device transport said Unsupported: not offered

  FakeFactory two;
  World b;
  ASSERT_TRUE(build_transports(two, Topology{0, 4, 0, 2, 0, 2}, BuildOptions{}, &b).ok());
  EXPECT_EQ(names_of(b), (Names{"mpi", "ring", "hierarchical"}));
  EXPECT_EQ(two.crosses, 1);

  FakeFactory unequal;
  unequal.equal = false;
  World c;
  ASSERT_TRUE(build_transports(unequal, Topology{0, 3, 0, 2, 0, 2}, BuildOptions{}, &c).ok());
  EXPECT_EQ(names_of(c), (Names{"mpi", "ring"}));
  EXPECT_EQ(unequal.crosses, 0);
}

TEST(BuildTransports, UnsupportedIsLeftOutOtherErrorsFailInit) {
  FakeFactory f;
  f.native_answer = unsupported("no native collectives");
  World a;
  ASSERT_TRUE(build_transports(f, Topology{0, 2, 0, 2, 0, 1}, BuildOptions{}, &a).ok());
  EXPECT_EQ(names_of(a), (Names{"ring", "shm"}));

  FakeFactory g;
  g.native_answer = Status(Code::kTransport, "MPI said no");
  World b;
  Status s = build_transports(g, Topology{0, 2, 0, 2, 0, 1}, BuildOptions{}, &b);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_EQ(g.asked, (Names{"mpi"}));  // nothing built after the failure
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
      ASSERT_TRUE(build_transports(f, Topology{0, 2, 0, 2, 0, 1}, options, &w).ok());
      EXPECT_EQ(names_of(w).back(), "nccl");
      const bool want_cross = knob && equal && known_transports().back().built;  // nccl
      EXPECT_EQ(f.device_cross != nullptr, want_cross) << "knob " << knob << " equal " << equal;
    }
  }
}

}  // namespace
}  // namespace kolo::transport
