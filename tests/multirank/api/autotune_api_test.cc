// Autotune under mpiexec and on the socket world (tests/socket): rank 0 decides,
// every rank applies the same setting at the same cycle — so every rank's record of
// (cycle, setting) pairs is equal and every result stays exact while the fusion
// threshold, the large-tensor cut-off, the slice and the transport order change
// under it; the frozen setting is logged and read back by the next run.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

// The knobs a tuning run sets; unset again at the end of each test.
const char* const kKnobs[] = {"KOLO_AUTOTUNE", "KOLO_AUTOTUNE_LOG", "KOLO_AUTOTUNE_SAMPLE_SECONDS",
                              "KOLO_AUTOTUNE_WARMUP_SAMPLES", "KOLO_AUTOTUNE_MAX_SAMPLES",
                              "KOLO_FUSION_THRESHOLD", "KOLO_SHM_SLICE_BYTES",
                              "KOLO_TRANSPORT_SMALL"};

class Autotune : public ::testing::Test {
 protected:
  void SetUp() override {
    rank_ = job_rank();
    size_ = job_size();
    // Only rank 0 reads or writes the log (the knob may differ between ranks), so
    // each rank names its own and rank 0's is the one used.
    log_ = "/tmp/kolo_autotune_test_" + std::to_string(getpid()) + ".csv";
    setenv("KOLO_AUTOTUNE", "1", 1);
    setenv("KOLO_AUTOTUNE_LOG", log_.c_str(), 1);
    setenv("KOLO_AUTOTUNE_SAMPLE_SECONDS", "0.02", 1);
    setenv("KOLO_AUTOTUNE_WARMUP_SAMPLES", "1", 1);
    setenv("KOLO_AUTOTUNE_MAX_SAMPLES", "8", 1);
    // Deliberately bad starting knobs (the README's example).
    setenv("KOLO_FUSION_THRESHOLD", "64K", 1);
    setenv("KOLO_SHM_SLICE_BYTES", "16K", 1);
  }
  void TearDown() override {
    for (const char* k : kKnobs) unsetenv(k);
    world_barrier();
    if (rank_ == 0) std::remove(log_.c_str());
  }

  // One step: 24 tensors from 1 to ~600 K elements (some above the 1 MiB
  // cut-off, most below the fusion thresholds tried), summed exactly.
  void step(int s) {
    std::vector<kolo_handle_t> handles;
    for (int t = 0; t < 24; ++t) {
      const int64_t count = t % 6 == 0 ? 300000 + 1000 * t : 1 + 997 * t;
      inputs_[t].assign(count, 0.0f);
      outputs_[t].assign(count, -1.0f);
      for (int64_t i = 0; i < count; ++i) inputs_[t][i] = static_cast<float>(rank_ + 1 + i % 7);
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_allreduce_async(("grad." + std::to_string(t)).c_str(), inputs_[t].data(),
                                     outputs_[t].data(), count, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0,
                                     cpu(), &h),
                KOLO_OK)
          << kolo_last_error();
      handles.push_back(h);
    }
    for (kolo_handle_t h : handles) {
      EXPECT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
      kolo_handle_release(h);
    }
    const float ranks = static_cast<float>(size_ * (size_ + 1) / 2);
    int64_t wrong = 0;
    for (int t = 0; t < 24; ++t)
      for (size_t i = 0; i < outputs_[t].size(); ++i)
        wrong += outputs_[t][i] != ranks + static_cast<float>(size_) * static_cast<float>(i % 7);
    EXPECT_EQ(wrong, 0) << "step " << s;
  }

  // Steps until every rank has applied a frozen setting (or `max_steps`); returns
  // the steps taken.
  int steps_until_frozen(int max_steps) {
    for (int s = 0; s < max_steps; ++s) {
      step(s);
      int frozen = 0;  // (int is KOLO_INT32 here)
      EXPECT_EQ(kolo_autotune_state(&frozen, nullptr, nullptr), KOLO_OK);
      EXPECT_EQ(allreduce("autotune.frozen", &frozen, &frozen, 1, KOLO_INT32, KOLO_OP_MIN),
                KOLO_OK);
      if (frozen) return s + 1;
    }
    return max_steps;
  }

  // Every rank's (changes, digest) equals rank 0's.
  void expect_ranks_agree(int64_t* changes) {
    int frozen = 0;
    uint64_t digest = 0;
    ASSERT_EQ(kolo_autotune_state(&frozen, changes, &digest), KOLO_OK);
    EXPECT_EQ(frozen, 1);
    const int64_t mine[2] = {*changes, static_cast<int64_t>(digest)};
    const std::vector<char> bytes = allgather_bytes("autotune.state", mine, sizeof mine);
    ASSERT_EQ(bytes.size(), sizeof mine * size_);
    std::vector<int64_t> all(2 * size_);
    std::memcpy(all.data(), bytes.data(), bytes.size());
    for (int r = 0; r < size_; ++r) {
      EXPECT_EQ(all[2 * r], all[0]) << "settings applied on rank " << r << " vs rank 0";
      EXPECT_EQ(all[2 * r + 1], all[1]) << "digest of (cycle, setting) on rank " << r;
    }
  }

  int rank_ = 0, size_ = 1;
  std::string log_;
  std::vector<float> inputs_[24], outputs_[24];
};

TEST_F(Autotune, EveryRankAppliesTheSameSettingAtTheSameCycle) {
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  ASSERT_TRUE(joined_the_whole_job());
  const int steps = steps_until_frozen(3000);
  EXPECT_LT(steps, 3000) << "the search did not freeze";
  step(steps);  // at the frozen setting
  int64_t changes = 0;
  expect_ranks_agree(&changes);
  EXPECT_GE(changes, 2);  // it searched: the start, others, the frozen one
  ASSERT_EQ(kolo_shutdown(), KOLO_OK);

  if (rank_ == 0) {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_NE(text.str().find("sample,phase,KOLO_FUSION_THRESHOLD"), std::string::npos);
    EXPECT_NE(text.str().find(",warmup,65536,"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find(",frozen,"), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("# KOLO_FUSION_THRESHOLD="), std::string::npos) << text.str();
  }

  // The next run reads the frozen setting back: frozen from its first cycle,
  // one setting applied, the same on every rank, results exact.
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(steps_until_frozen(1), 1);
  expect_ranks_agree(&changes);
  EXPECT_EQ(changes, 1);
  ASSERT_EQ(kolo_shutdown(), KOLO_OK);
}

TEST_F(Autotune, AnUnofferedFirstChoiceFailsInitOnEveryRank) {
  setenv("KOLO_TRANSPORT_SMALL", "carrier-pigeon", 1);
  EXPECT_EQ(kolo_init(), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kolo_last_error()).find("KOLO_TRANSPORT_SMALL=\"carrier-pigeon\""),
            std::string::npos)
      << kolo_last_error();
}

}  // namespace
}  // namespace kolo_test
