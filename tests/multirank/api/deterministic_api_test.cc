// Deterministic reductions (docs/deterministic.md), through the C API under
// mpiexec -n 2, 3, 4 and on the socket world (tests/socket/socket_launch.py): random
// tensor sets (sizes, dtypes, ops, names, each rank submitting in its own order)
// reduced with KOLO_DETERMINISTIC=1 or the call's flag under every transport kolo
// runs here (shm, ring, the MPI transport asked first, pretend nodes for
// hierarchical), several fusion thresholds, slice and segment sizes — every result
// byte-identical to a plain reference computed on every rank from the inputs
// allgathered through kolo (rank 0's value, then rank 1's, ..., in the accumulation
// type). Then: the default mode does differ (3+ ranks), so the knob matters; what
// cannot be deterministic fails naming the knob; ranks that disagree on the flag get
// a mismatch; the timeline marks the path.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "api_fixture.h"
#include "common/half.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

using Env = std::vector<std::pair<std::string, std::string>>;

// Sets `env` for one kolo_init..kolo_shutdown and unsets it after.
class ScopedEnv {
 public:
  explicit ScopedEnv(Env env) : env_(std::move(env)) {
    for (const auto& [k, v] : env_) setenv(k.c_str(), v.c_str(), 1);
  }
  ~ScopedEnv() {
    for (const auto& kv : env_) unsetenv(kv.first.c_str());
  }

 private:
  Env env_;
};

size_t elem_size(kolo_dtype_t t) { return kolo_dtype_size(t); }

float widen(kolo_dtype_t t, uint16_t v) {
  if (t == KOLO_FLOAT16) return kolo::half::to_float(v);
  uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t narrow(kolo_dtype_t t, float f) {
  if (t == KOLO_FLOAT16) return kolo::half::from_float(f);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7FFF + ((bits >> 16) & 1);  // nearest, ties to even (no NaN here)
  return static_cast<uint16_t>(bits >> 16);
}

struct Tensor {
  std::string name;
  kolo_dtype_t dtype;
  kolo_op_t op;
  int64_t count;
  std::vector<char> input, output;
};

// The reference: element i is op(x_0[i], x_1[i], ..., x_{n-1}[i]) left to right in
// the accumulation type (float for the 16-bit formats, rounded once), then
// AVERAGE's 1/n as kolo applies an output factor (in the dtype's scaling type).
std::vector<char> reference(const Tensor& t, const std::vector<char>& all, int n) {
  const size_t bytes = static_cast<size_t>(t.count) * elem_size(t.dtype);
  std::vector<char> out(bytes);
  const double inv = 1.0 / n;
  auto combine = [&](auto acc, auto x) { return t.op == KOLO_OP_PRODUCT ? acc * x : acc + x; };
  for (int64_t i = 0; i < t.count; ++i) {
    auto at = [&](int r) { return all.data() + static_cast<size_t>(r) * bytes; };
    if (t.dtype == KOLO_FLOAT64) {
      const double* in0 = reinterpret_cast<const double*>(at(0));
      double acc = in0[i];
      for (int r = 1; r < n; ++r) acc = combine(acc, reinterpret_cast<const double*>(at(r))[i]);
      if (t.op == KOLO_OP_AVERAGE) acc = acc * inv;
      reinterpret_cast<double*>(out.data())[i] = acc;
    } else if (t.dtype == KOLO_FLOAT32) {
      float acc = reinterpret_cast<const float*>(at(0))[i];
      for (int r = 1; r < n; ++r) acc = combine(acc, reinterpret_cast<const float*>(at(r))[i]);
      if (t.op == KOLO_OP_AVERAGE) acc = acc * static_cast<float>(inv);
      reinterpret_cast<float*>(out.data())[i] = acc;
    } else {
      float acc = widen(t.dtype, reinterpret_cast<const uint16_t*>(at(0))[i]);
      for (int r = 1; r < n; ++r)
        acc = combine(acc, widen(t.dtype, reinterpret_cast<const uint16_t*>(at(r))[i]));
      uint16_t h = narrow(t.dtype, acc);
      if (t.op == KOLO_OP_AVERAGE) h = narrow(t.dtype, widen(t.dtype, h) * static_cast<float>(inv));
      reinterpret_cast<uint16_t*>(out.data())[i] = h;
    }
  }
  return out;
}

// A random set from `seed` (the same on every rank): names, dtypes, ops, sizes;
// values from this rank's own stream, spread over many binades so that the
// order of a sum shows in its bits.
std::vector<Tensor> make_set(uint64_t seed, int rank) {
  std::mt19937_64 shape(seed);
  std::mt19937_64 values(seed * 1000003 + static_cast<uint64_t>(rank) + 1);
  const kolo_dtype_t dtypes[] = {KOLO_FLOAT32, KOLO_FLOAT64, KOLO_FLOAT16, KOLO_BFLOAT16};
  const kolo_op_t ops[] = {KOLO_OP_SUM, KOLO_OP_AVERAGE, KOLO_OP_SUM, KOLO_OP_PRODUCT};
  const int64_t sizes[] = {0, 1, 3, 17, 1000, 4099, 70000, 300001};
  std::vector<Tensor> set(6 + shape() % 8);
  for (size_t k = 0; k < set.size(); ++k) {
    Tensor& t = set[k];
    t.name = "det" + std::to_string(seed) + "." + std::to_string(shape() % 1000) + "." +
             std::to_string(k);
    t.dtype = dtypes[shape() % 4];
    t.op = ops[shape() % 4];
    t.count = sizes[shape() % 8];
    const size_t bytes = static_cast<size_t>(t.count) * elem_size(t.dtype);
    t.input.resize(bytes);
    t.output.assign(bytes, 0);
    std::uniform_real_distribution<double> mant(1.0, 2.0), binade(-8, 8), near_one(0.5, 2.0);
    for (int64_t i = 0; i < t.count; ++i) {
      double v = t.op == KOLO_OP_PRODUCT ? near_one(values)
                                         : (values() & 1 ? -1 : 1) * mant(values) *
                                               std::exp2(std::floor(binade(values)));
      if (t.dtype == KOLO_FLOAT64) reinterpret_cast<double*>(t.input.data())[i] = v;
      else if (t.dtype == KOLO_FLOAT32) reinterpret_cast<float*>(t.input.data())[i] = static_cast<float>(v);
      else reinterpret_cast<uint16_t*>(t.input.data())[i] = narrow(t.dtype, static_cast<float>(v));
    }
  }
  return set;
}

#define ASSERT_EQ_OR_RETURN(call)                                                   \
  do {                                                                              \
    const kolo_status_t s_ = (call);                                                \
    EXPECT_EQ(s_, KOLO_OK) << what << ": " << kolo_last_error();                    \
    if (s_ != KOLO_OK) return 1;                                                    \
  } while (0)

// Every tensor's reference from every rank's inputs, gathered through kolo (an
// allgather copies bytes: no order to get wrong).
std::vector<std::vector<char>> references(const std::vector<Tensor>& set, int size) {
  std::vector<std::vector<char>> want;
  for (const Tensor& t : set) {
    std::vector<char> all;
    if (!t.input.empty()) all = allgather_bytes("ref." + t.name, t.input.data(), t.input.size());
    want.push_back(reference(t, all, size));
  }
  return want;
}

// Submits the set in this rank's own order (flag: the call's), waits, and checks
// every output against `want`. Returns the number of mismatching tensors.
int reduce_and_check(std::vector<Tensor>& set, const std::vector<std::vector<char>>& want,
                     bool flag, int rank, const std::string& what) {
  std::vector<size_t> order(set.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(77 + static_cast<uint64_t>(rank)));
  kolo_options_t o = KOLO_OPTIONS_INIT;
  o.flags = flag ? KOLO_OPTION_DETERMINISTIC : 0;
  std::vector<kolo_handle_t> hs(set.size(), nullptr), plain(set.size(), nullptr);
  std::vector<std::vector<char>> plain_out(set.size());
  for (size_t k : order) {
    Tensor& t = set[k];
    // With the call's flag, an unflagged twin goes just before it: fusing the two
    // into one bucket would reduce the flagged one the default way.
    if (flag) {
      plain_out[k].resize(t.output.size());
      const std::string name = t.name + ".plain";
      ASSERT_EQ_OR_RETURN(kolo_allreduce_async(name.c_str(), t.input.data(), plain_out[k].data(),
                                               t.count, t.dtype, t.op, 1.0, 1.0, cpu(), &plain[k]));
    }
    ASSERT_EQ_OR_RETURN(kolo_allreduce_async_ex(t.name.c_str(), t.input.data(), t.output.data(),
                                                t.count, t.dtype, t.op, 1.0, 1.0, cpu(), &o, &hs[k]));
  }
  for (size_t k = 0; k < set.size() && flag; ++k) {
    EXPECT_EQ(wait_or_abort(plain[k], set[k].name), KOLO_OK) << what << " " << set[k].name;
    kolo_handle_release(plain[k]);
  }
  int wrong = 0;
  for (size_t k = 0; k < set.size(); ++k) {
    Tensor& t = set[k];
    EXPECT_EQ(wait_or_abort(hs[k], t.name), KOLO_OK) << what << " " << t.name;
    kolo_handle_release(hs[k]);
    if (want[k] != t.output) {
      ++wrong;
      ADD_FAILURE() << what << ": tensor " << t.name << " (dtype " << t.dtype << ", op " << t.op
                    << ", count " << t.count << ") differs from the rank-order reference";
    }
  }
  return wrong;
}

// The transport that does not reduce in rank order, asked first (or only): MPI's on
// the MPI world; on the socket world, which has no MPI transport, hierarchical over
// pretend nodes of one rank.
Env not_rank_order(bool only) {
  const std::string rest = only ? " only" : "";
  if (socket_job())
    return {{"KOLO_SELECT", "allreduce host * * : hierarchical" + rest},
            {"KOLO_TEST_NODE_SIZE", "1"}};
  return {{"KOLO_SELECT", "allreduce host * * : mpi" + rest}};
}

Env with(Env env, const Env& more) {
  env.insert(env.end(), more.begin(), more.end());
  return env;
}

// Every configuration: the transport asked first (or only), the sizes, and
// whether the knob or the call's flag asks.
std::vector<std::pair<Env, bool>> configurations(int size) {
  std::vector<std::pair<Env, bool>> c = {
      {{{"KOLO_SELECT", "allreduce host * * : shm"}, {"KOLO_SHM_SLICE_BYTES", "4K"}}, false},
      {{{"KOLO_SELECT", "allreduce host * * : shm"}, {"KOLO_FUSION_THRESHOLD", "0"},
        {"KOLO_DETERMINISTIC", "1"}}, true},
      {{{"KOLO_SELECT", "allreduce host * * : shm"}, {"KOLO_FUSION_THRESHOLD", "4K"},
        {"KOLO_SHM_SLICE_BYTES", "64K"}, {"KOLO_AND_CARRY_BYTES", "16K"}}, false},
      {{{"KOLO_SELECT", "allreduce host * * : ring only"}, {"KOLO_RING_SEGMENT_BYTES", "1K"},
        {"KOLO_DETERMINISTIC", "1"}}, true},
      {{{"KOLO_SELECT", "allreduce host * * : ring only"}, {"KOLO_FUSION_THRESHOLD", "4K"},
        {"KOLO_RING_SEGMENT_BYTES", "256K"}}, false},
      // MPI's transport (or hierarchical) first: a marked bucket passes it for one
      // that folds.
      {with(not_rank_order(false), {{"KOLO_FUSION_THRESHOLD", "64K"}}), false},
      // Every rank a pretend node: hierarchical preferred.
      {{{"KOLO_TEST_NODE_SIZE", "1"}, {"KOLO_HIERARCHICAL_ALLREDUCE", "1"},
        {"KOLO_DETERMINISTIC", "1"}}, true},
  };
  if (size % 2 == 0 && size > 2)  // two pretend hosts of size / 2 ranks
    c.push_back({{{"KOLO_TEST_NODE_SIZE", std::to_string(size / 2)},
                  {"KOLO_HIERARCHICAL_ALLREDUCE", "1"}, {"KOLO_RING_SEGMENT_BYTES", "4K"}},
                 false});
  return c;
}

TEST(Deterministic, EveryPathGivesTheRankOrderBits) {
  const int size = job_size();
  int config = 0;
  for (const auto& [env, knob] : configurations(size)) {
    ScopedEnv scoped(env);
    ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
    ASSERT_TRUE(joined_the_whole_job());
    const int rank = kolo_rank();
    std::string what = "configuration " + std::to_string(config);
    for (const auto& [k, v] : env) what += " " + k + "=" + v;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      std::vector<Tensor> set = make_set(seed + 10 * static_cast<uint64_t>(config), rank);
      const std::vector<std::vector<char>> want = references(set, size);
      // Twice: the second time from the response cache (and the AND's carry).
      for (int repeat = 0; repeat < 2; ++repeat)
        EXPECT_EQ(reduce_and_check(set, want, !knob, rank, what), 0) << what;
    }
    world_barrier();
    ASSERT_EQ(kolo_shutdown(), KOLO_OK);
    ++config;
  }
}

// Rank 0 holds 1e8, rank 1 holds 1, rank 2 holds -1e8 (float32), the others 0:
// in rank order (1e8 + 1) - 1e8 == 0; the shm engine's default order starts each
// shard with its owner's value, so rank 2's shard gives (-1e8 + 1e8) + 1 == 1.
TEST(Deterministic, TheDefaultOrderDiffers) {
  if (job_size() < 3) GTEST_SKIP() << "a float sum of two values is the same in either order";
  ScopedEnv scoped(Env{{"KOLO_SELECT", "allreduce host * * : shm"}});
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  const int rank = kolo_rank();
  const float mine = rank == 0 ? 1e8f : rank == 1 ? 1.0f : rank == 2 ? -1e8f : 0.0f;
  const int64_t count = 1 << 16;  // several shards
  std::vector<float> in(count, mine), plain(count), det(count);
  kolo_options_t o = KOLO_OPTIONS_INIT;
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allreduce_async("plain", in.data(), plain.data(), count, KOLO_FLOAT32, KOLO_OP_SUM,
                                 1.0, 1.0, cpu(), &h), KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK);
  kolo_handle_release(h);
  o.flags = KOLO_OPTION_DETERMINISTIC;
  ASSERT_EQ(kolo_allreduce_async_ex("det", in.data(), det.data(), count, KOLO_FLOAT32, KOLO_OP_SUM,
                                    1.0, 1.0, cpu(), &o, &h), KOLO_OK);
  ASSERT_EQ(wait_or_abort(h), KOLO_OK);
  kolo_handle_release(h);
  EXPECT_EQ(det, std::vector<float>(count, 0.0f));
  EXPECT_NE(plain, det) << "the default order gave the rank-order bits: the knob would not matter";
  world_barrier();
  ASSERT_EQ(kolo_shutdown(), KOLO_OK);
}

TEST(Deterministic, RefusalsNameTheKnob) {
  ScopedEnv scoped(with(not_rank_order(true), {{"KOLO_DETERMINISTIC", "1"}}));
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  const int rank = kolo_rank();
  std::vector<float> x(16, 1.0f + static_cast<float>(rank));
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allreduce_async("only_mpi", x.data(), x.data(), 16, KOLO_FLOAT32, KOLO_OP_SUM,
                                 1.0, 1.0, cpu(), &h), KOLO_OK);
  EXPECT_EQ(wait_or_abort(h), KOLO_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kolo_handle_message(h)).find("KOLO_DETERMINISTIC"), std::string::npos)
      << kolo_handle_message(h);
  kolo_handle_release(h);
  // MIN and integers are exact in any order: not marked, so that transport may
  // take them.
  std::vector<int32_t> ints(16, rank);
  ASSERT_EQ(kolo_allreduce_async("ints", ints.data(), ints.data(), 16, KOLO_INT32, KOLO_OP_SUM,
                                 1.0, 1.0, cpu(), &h), KOLO_OK);
  EXPECT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  ASSERT_EQ(kolo_allreduce_async("min", x.data(), x.data(), 16, KOLO_FLOAT32, KOLO_OP_MIN,
                                 1.0, 1.0, cpu(), &h), KOLO_OK);
  EXPECT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  EXPECT_EQ(x[0], 1.0f);
  kolo_handle_release(h);
  world_barrier();
  ASSERT_EQ(kolo_shutdown(), KOLO_OK);
}

TEST(Deterministic, RanksMustAgreeOnTheFlag) {
  ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
  const int rank = kolo_rank();
  std::vector<float> x(8, 1.0f);
  kolo_options_t o = KOLO_OPTIONS_INIT;
  o.flags = rank == 0 ? KOLO_OPTION_DETERMINISTIC : 0;
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allreduce_async_ex("half_det", x.data(), x.data(), 8, KOLO_FLOAT32, KOLO_OP_SUM,
                                    1.0, 1.0, cpu(), &o, &h), KOLO_OK);
  EXPECT_EQ(wait_or_abort(h), KOLO_ERR_MISMATCH);
  EXPECT_NE(std::string(kolo_handle_message(h)).find("deterministic"), std::string::npos)
      << kolo_handle_message(h);
  kolo_handle_release(h);
  world_barrier();
  ASSERT_EQ(kolo_shutdown(), KOLO_OK);
}

TEST(Deterministic, TheTimelineMarksThePath) {
  const std::string path = "/tmp/kolo_det_timeline_" + std::to_string(getppid()) + ".json";
  {
    ScopedEnv scoped(Env{{"KOLO_TIMELINE", path}, {"KOLO_DETERMINISTIC", "1"}});
    ASSERT_EQ(kolo_init(), KOLO_OK) << kolo_last_error();
    std::vector<float> x(1000, 1.0f);
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allreduce_async("marked", x.data(), x.data(), 1000, KOLO_FLOAT32, KOLO_OP_SUM,
                                   1.0, 1.0, cpu(), &h), KOLO_OK);
    ASSERT_EQ(wait_or_abort(h), KOLO_OK);
    kolo_handle_release(h);
    world_barrier();
    ASSERT_EQ(kolo_shutdown(), KOLO_OK);
  }
  if (job_rank() == 0) {
    const std::string text = read_file(path);
    EXPECT_NE(text.find("deterministic\": true"), std::string::npos) << text.substr(0, 2000);
    EXPECT_NE(text.find(" deterministic\""), std::string::npos);
    std::remove(path.c_str());
  }
  world_barrier();
}

}  // namespace
}  // namespace kolo_test
