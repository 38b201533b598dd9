// The transport registry: the known transports and KOLO_TRANSPORT's validation
// (the selector's tests: selector_test.cc).
#include "transport/registry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kolo_build_config.h"

namespace kolo::transport {
namespace {

TEST(RegistryTest, KnownTransports) {
  const std::vector<TransportInfo>& known = known_transports();
  std::vector<std::string> names;
  for (const TransportInfo& t : known) names.push_back(t.name);
  // The loopback world's transport is for tests: never offered to users.
  EXPECT_EQ(names, (std::vector<std::string>{"mpi", "ring", "shm", "hierarchical", "nccl"}));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(known[i].built) << known[i].name;
  EXPECT_EQ(known[4].built, KOLO_HAVE_NCCL != 0);
  EXPECT_EQ(known[4].reason, KOLO_NCCL_REASON);
}

TEST(RegistryTest, ValidatePreference) {
  for (const char* ok : {"auto", "mpi", "ring", "shm", "hierarchical", "nccl"}) {
    EXPECT_TRUE(validate_preference(ok).ok()) << ok;
  }
  for (const char* bad : {"", "MPI", "tcp", "auto ", "loopback"}) {
    const Status s = validate_preference(bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("auto, mpi, ring, shm, hierarchical, nccl"), std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace kolo::transport
