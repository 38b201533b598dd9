// core/autotune: settings travel as knob lines and come back equal; the space
// holds the starting knobs; a driver's log ends in the frozen setting and the
// next driver reuses it.
#include "core/autotune.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace kolo::core {
namespace {

Config bad_knobs() {
  Config c;
  c.autotune = true;
  c.fusion_threshold_bytes = 64 << 10;
  c.shm_slice_bytes = 16 << 10;
  return c;
}

TEST(AutotuneTest, SettingRoundTripsThroughItsKnobLines) {
  TunedSetting s = setting_of(bad_knobs());
  s.transport_small = "mpi";
  s.transport_large = "shm";
  s.hierarchical_allreduce = true;
  s.frozen = true;
  const std::string text = encode_setting(s);
  EXPECT_NE(text.find("KOLO_FUSION_THRESHOLD=65536\n"), std::string::npos) << text;
  EXPECT_NE(text.find("KOLO_SHM_SLICE_BYTES=16384\n"), std::string::npos) << text;
  TunedSetting back;
  ASSERT_TRUE(decode_setting(text, &back).ok());
  EXPECT_EQ(back, s);
}

TEST(AutotuneTest, DecodingRefusesWhatTheKnobsRefuse) {
  TunedSetting s;
  Status st = decode_setting("KOLO_CACHE_CAPACITY=3\n", &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("KOLO_CACHE_CAPACITY=3"), std::string::npos) << st.message();
  std::string text = encode_setting(setting_of(Config()));
  const size_t at = text.find("KOLO_SHM_SLICE_BYTES=");
  text.replace(at, text.find('\n', at) - at, "KOLO_SHM_SLICE_BYTES=1");
  st = decode_setting(text, &s);
  EXPECT_EQ(st.code(), Code::kInvalidArgument);
  EXPECT_NE(st.message().find("KOLO_SHM_SLICE_BYTES"), std::string::npos) << st.message();
}

TEST(AutotuneTest, CapacitiesFitEverySettingTheSpaceHolds) {
  const Config c = bad_knobs();
  EXPECT_EQ(fusion_capacity(c), size_t{64} << 20);
  EXPECT_EQ(shm_slot_capacity(c), size_t{2} << 20);
  Config off = c;
  off.autotune = false;
  EXPECT_EQ(fusion_capacity(off), size_t{64} << 10);
  EXPECT_EQ(shm_slot_capacity(off), size_t{16} << 10);

  TunedSetting start = setting_of(c);
  start.transport_small = start.transport_large = "shm";  // "auto" as the coordinator resolves it
  const tune::Space space = autotune_space(c, start, TunableWorld{{"mpi", "ring", "shm"}, true, false});
  EXPECT_EQ(setting_at(space, point_of(space, start)), start);
  for (size_t f = 0; f < space.points(); f += 97) {
    const TunedSetting s = setting_at(space, space.point(f));
    EXPECT_LE(static_cast<size_t>(s.fusion_threshold_bytes), fusion_capacity(c));
    EXPECT_LE(static_cast<size_t>(s.shm_slice_bytes), shm_slot_capacity(c));
  }
  // One node, no hierarchical: that dimension has one candidate.
  EXPECT_EQ(space.dim(6).size(), 1u);
  EXPECT_EQ(space.dim(4).labels, (std::vector<std::string>{"mpi", "ring", "shm"}));
}

TEST(AutotuneTest, TheFrozenSettingIsLoggedAndReused) {
  Config c = bad_knobs();
  c.autotune_log = "/tmp/kolo_autotune_unit_" + std::to_string(getpid()) + ".csv";
  c.autotune_warmup_samples = 1;
  c.autotune_sample_seconds = 0.001;
  c.autotune_max_samples = 4;
  TunedSetting start = setting_of(c);
  start.transport_small = start.transport_large = "shm";
  const TunableWorld host{{"mpi", "ring", "shm"}, true, false};
  std::unique_ptr<AutotuneDriver> driver;
  ASSERT_TRUE(AutotuneDriver::create(c, autotune_space(c, start, host), start, &driver).ok());
  EXPECT_FALSE(driver->reused());
  auto t = AutotuneDriver::Clock::now();
  std::optional<TunedSetting> last;
  for (int i = 0; i < 100 && !(last && last->frozen); ++i) {
    t += std::chrono::milliseconds(2);
    if (auto next = driver->cycle_done(1000 + i, t, true)) last = next;
  }
  ASSERT_TRUE(last && last->frozen);
  driver.reset();  // closes the log

  std::ifstream in(c.autotune_log);
  std::stringstream log;
  log << in.rdbuf();
  EXPECT_NE(log.str().find(",warmup,65536,"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find(",frozen,"), std::string::npos) << log.str();
  EXPECT_NE(log.str().find("# KOLO_FUSION_THRESHOLD="), std::string::npos) << log.str();

  ASSERT_TRUE(AutotuneDriver::create(c, autotune_space(c, start, host), start, &driver).ok());
  ASSERT_TRUE(driver->reused());
  EXPECT_EQ(*driver->reused(), *last);
  EXPECT_FALSE(driver->cycle_done(1000, t + std::chrono::seconds(1), true));  // no search
  std::remove(c.autotune_log.c_str());
}

}  // namespace
}  // namespace kolo::core
