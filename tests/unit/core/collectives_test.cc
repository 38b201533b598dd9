// The collectives beyond allreduce through the coordinator, ranks as threads over
// the loopback transport: allgather, broadcast, alltoall, reducescatter, grouped
// allreduce, barrier and join — exact values, uneven shapes, mismatches.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "core/collective_args.h"
#include "loopback_job.h"

namespace kolo::core {
namespace {

using testing::LoopbackJob;
using testing::submit_args;
using testing::wait_code;

CollectiveArgs args(Collective c, const std::string& name, const void* in, void* out, int64_t rows,
                    int64_t row_count = 1, DataType dtype = DataType::kInt32) {
  CollectiveArgs a;
  a.collective = c;
  a.name = name;
  a.input = in;
  a.output = out;
  a.rows = rows;
  a.row_count = row_count;
  a.dtype = dtype;
  return a;
}

TEST(Collectives, AllgatherWithRowsDifferingPerRankIncludingZero) {
  for (int size : {1, 2, 3, 5, 8}) {
    LoopbackJob job(size);
    job.run([&](int rank, Runtime& rt) {
      const int64_t rows = rank % 3;  // 0, 1, 2, 0, ...
      const int64_t row = 3;
      std::vector<int32_t> in(rows * row);
      for (size_t i = 0; i < in.size(); ++i) in[i] = rank * 100 + static_cast<int>(i);
      auto h = submit_args(rt, args(Collective::kAllgather, "g", in.data(), nullptr, rows, row));
      ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
      std::vector<int32_t> want;
      std::vector<int64_t> splits;
      for (int r = 0; r < size; ++r) {
        splits.push_back(r % 3);
        for (int64_t i = 0; i < (r % 3) * row; ++i) want.push_back(r * 100 + static_cast<int>(i));
      }
      EXPECT_EQ(h->splits, splits);
      ASSERT_EQ(h->output.size(), want.size() * sizeof(int32_t));
      if (!want.empty()) {  // memcmp must not get NULL, even for 0 bytes
        EXPECT_EQ(0, std::memcmp(h->output.data(), want.data(), h->output.size()));
      }
    });
  }
}

// Note [Caching per-rank sizes]: one name submitted again and again, its rows per
// rank unchanged for two steps (cache hits), then changed (stale, renegotiated);
// then one rank's trailing dimension differs from a cached entry (a mismatch on
// every rank), and the name works again afterwards.
TEST(Collectives, CachedAllgatherAndAlltoallFollowRowChanges) {
  for (int size : {1, 2, 3, 4}) {
    LoopbackJob job(size);
    job.run([&](int rank, Runtime& rt) {
      for (int step = 0; step < 8; ++step) {
        const int64_t rows = (rank + step / 2) % 3;
        std::vector<int32_t> in(rows * 2);
        for (size_t i = 0; i < in.size(); ++i) in[i] = step * 1000 + rank * 100 + static_cast<int>(i);
        auto h = submit_args(rt, args(Collective::kAllgather, "g", in.data(), nullptr, rows, 2));
        // alltoall: rank r sends (r + d + step / 2) % 2 rows of one element to rank d.
        std::vector<int64_t> send(size);
        std::vector<int32_t> a2a;
        for (int d = 0; d < size; ++d) {
          send[d] = (rank + d + step / 2) % 2;
          if (send[d] == 1) a2a.push_back(step * 1000 + rank * 10 + d);
        }
        auto a = args(Collective::kAlltoall, "a", a2a.data(), nullptr,
                      static_cast<int64_t>(a2a.size()), 1);
        a.send_rows = send.data();
        auto ha = submit_args(rt, a);
        ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
        ASSERT_EQ(wait_code(ha), Code::kOk) << ha->message();
        std::vector<int32_t> want, want_a2a;
        for (int r = 0; r < size; ++r) {
          for (int64_t i = 0; i < (r + step / 2) % 3 * 2; ++i)
            want.push_back(step * 1000 + r * 100 + static_cast<int>(i));
          if ((r + rank + step / 2) % 2 == 1) want_a2a.push_back(step * 1000 + r * 10 + rank);
        }
        ASSERT_EQ(h->output.size(), want.size() * sizeof(int32_t)) << "step " << step;
        if (!want.empty()) EXPECT_EQ(0, std::memcmp(h->output.data(), want.data(), h->output.size()));
        ASSERT_EQ(ha->output.size(), want_a2a.size() * sizeof(int32_t)) << "step " << step;
        if (!want_a2a.empty())
          EXPECT_EQ(0, std::memcmp(ha->output.data(), want_a2a.data(), ha->output.size()));
      }
      if (size == 1) return;
      std::vector<int32_t> in(6, rank);
      auto bad = submit_args(rt, args(Collective::kAllgather, "g", in.data(), nullptr, 2,
                                      rank == size - 1 ? 3 : 2));
      ASSERT_EQ(wait_code(bad), Code::kMismatch);
      EXPECT_NE(bad->message().find("trailing dimensions"), std::string::npos) << bad->message();
      auto good = submit_args(rt, args(Collective::kAllgather, "g", in.data(), nullptr, 1, 2));
      ASSERT_EQ(wait_code(good), Code::kOk) << good->message();
      const int32_t* got = reinterpret_cast<const int32_t*>(good->output.data());
      for (int r = 0; r < size; ++r) EXPECT_EQ(got[2 * r], r);
    });
  }
}

TEST(Collectives, BroadcastFromEveryRootInPlaceAndOutOfPlace) {
  LoopbackJob job(4);
  for (int root = 0; root < 4; ++root) {
    job.run([&](int rank, Runtime& rt) {
      std::vector<float> in(1000), out(1000, -1.0f);
      for (size_t i = 0; i < in.size(); ++i) in[i] = rank * 1000.0f + i;
      auto a = args(Collective::kBroadcast, "b", in.data(), out.data(), 1000, 1, DataType::kFloat32);
      a.root = root;
      auto h1 = submit_args(rt, a);
      a.name = "b_in_place";
      a.output = in.data();
      auto h2 = submit_args(rt, a);
      ASSERT_EQ(wait_code(h1), Code::kOk) << h1->message();
      ASSERT_EQ(wait_code(h2), Code::kOk) << h2->message();
      for (size_t i = 0; i < 1000; ++i) {
        ASSERT_EQ(out[i], root * 1000.0f + i);
        ASSERT_EQ(in[i], root * 1000.0f + i);
      }
    });
  }
}

TEST(Collectives, AlltoallWithUnevenAndEvenSplits) {
  const int size = 3;
  LoopbackJob job(size);
  job.run([&](int rank, Runtime& rt) {
    // Rank r sends (r + d) % 3 rows of 2 elements to rank d; values encode (r, d, i).
    std::vector<int64_t> splits(size);
    std::vector<int16_t> in;
    for (int d = 0; d < size; ++d) {
      splits[d] = (rank + d) % 3;
      for (int64_t i = 0; i < splits[d] * 2; ++i) in.push_back(static_cast<int16_t>(rank * 100 + d * 10 + i));
    }
    auto a = args(Collective::kAlltoall, "a2a", in.data(), nullptr,
                  std::accumulate(splits.begin(), splits.end(), int64_t{0}), 2, DataType::kInt16);
    a.send_rows = splits.data();
    auto h = submit_args(rt, a);
    ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
    std::vector<int16_t> want;
    std::vector<int64_t> received;
    for (int s = 0; s < size; ++s) {
      received.push_back((s + rank) % 3);
      for (int64_t i = 0; i < received.back() * 2; ++i) want.push_back(static_cast<int16_t>(s * 100 + rank * 10 + i));
    }
    EXPECT_EQ(h->splits, received);
    ASSERT_EQ(h->output.size(), want.size() * 2);
    EXPECT_EQ(0, std::memcmp(h->output.data(), want.data(), h->output.size()));
    // Even split (no splits given).
    std::vector<int16_t> even(size * 2, static_cast<int16_t>(rank));
    auto h2 = submit_args(rt, args(Collective::kAlltoall, "even", even.data(), nullptr, size, 2, DataType::kInt16));
    ASSERT_EQ(wait_code(h2), Code::kOk) << h2->message();
    const int16_t* got = reinterpret_cast<const int16_t*>(h2->output.data());
    for (int s = 0; s < size; ++s) EXPECT_EQ(got[2 * s], s);
  });
}

TEST(Collectives, ReducescatterShardsLikeHorovod) {
  for (int size : {1, 2, 3, 4}) {
    LoopbackJob job(size);
    job.run([&](int rank, Runtime& rt) {
      const int64_t rows = 7, row = 2;  // 7 rows over `size` ranks: first ranks get one more
      std::vector<int32_t> in(rows * row);
      for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<int32_t>(i) * (rank + 1);
      const int64_t mine = shard_rows(rows, rank, size);
      std::vector<int32_t> out(mine * row, -1);
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
        auto a = args(Collective::kReducescatter, "rs" + std::to_string(static_cast<int>(op)),
                      in.data(), out.data(), rows, row);
        a.op = op;
        auto h = submit_args(rt, a);
        ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
        int64_t first = 0;
        for (int r = 0; r < rank; ++r) first += shard_rows(rows, r, size) * row;
        const int32_t rank_sum = size * (size + 1) / 2;
        for (int64_t i = 0; i < mine * row; ++i) {
          int32_t sum = static_cast<int32_t>(first + i) * rank_sum;
          ASSERT_EQ(out[i], op == ReduceOp::kSum ? sum : sum / size) << "rank " << rank << " i " << i;
        }
      }
    });
  }
}

TEST(Collectives, GroupedAllreduceIsOneBucketAndExact) {
  for (int64_t threshold : {int64_t{0}, int64_t{64}, int64_t{1} << 20}) {  // 64 B: group exceeds it
    Config config;
    config.fusion_threshold_bytes = threshold;
    LoopbackJob job(3, config);
    job.run([&](int rank, Runtime& rt) {
      std::vector<std::vector<float>> bufs = {std::vector<float>(10), std::vector<float>(1),
                                              std::vector<float>(100)};
      CollectiveArgs a;
      a.collective = Collective::kGroupedAllreduce;
      a.dtype = DataType::kFloat32;
      a.op = ReduceOp::kSum;
      for (size_t t = 0; t < bufs.size(); ++t) {
        for (size_t i = 0; i < bufs[t].size(); ++i) bufs[t][i] = (rank + 1) * float(t + i);
        a.member_names.push_back("m" + std::to_string(t));
        a.members.push_back({bufs[t].data(), bufs[t].data(), static_cast<int64_t>(bufs[t].size())});
      }
      auto h = submit_args(rt, a);
      ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
      for (size_t t = 0; t < bufs.size(); ++t)
        for (size_t i = 0; i < bufs[t].size(); ++i) ASSERT_EQ(bufs[t][i], 6 * float(t + i));
    });
  }
}

// Note [Grouped collectives]: each member's result is the lone collective's, at
// every world size; a member may be empty.
TEST(Collectives, GroupedAllgatherAndReducescatterAtEveryWorldSize) {
  for (int size : {1, 2, 3, 4}) {
    LoopbackJob job(size);
    job.run([&](int rank, Runtime& rt) {
      const std::vector<int64_t> rows = {rank + 1, 0, 7}, row_counts = {2, 3, 1};
      std::vector<std::vector<int32_t>> in(3), out(3);
      CollectiveArgs g, rs;
      g.collective = Collective::kGroupedAllgather;
      rs.collective = Collective::kGroupedReducescatter;
      g.dtype = rs.dtype = DataType::kInt32;
      rs.op = ReduceOp::kSum;
      for (int m = 0; m < 3; ++m) {
        for (int64_t i = 0; i < rows[m] * row_counts[m]; ++i) in[m].push_back(1000 * m + 10 * rank + int32_t(i));
        out[m].assign(shard_rows(rows[m], rank, size) * row_counts[m], -1);
        for (CollectiveArgs* a : {&g, &rs}) {
          a->member_names.push_back("m" + std::to_string(m));
          a->member_row_counts.push_back(row_counts[m]);
        }
        g.members.push_back({in[m].data(), nullptr, rows[m]});
        rs.members.push_back({in[m].data(), out[m].data(), rows[m]});
      }
      // Reducescatter rows agree on every rank: member 0 has 3 there.
      std::vector<int32_t> in0(3 * row_counts[0]);
      for (size_t i = 0; i < in0.size(); ++i) in0[i] = 10 * rank + int32_t(i);
      out[0].assign(shard_rows(3, rank, size) * row_counts[0], -1);
      rs.members[0] = {in0.data(), out[0].data(), 3};
      auto hg = submit_args(rt, g);
      ASSERT_EQ(wait_code(hg), Code::kOk) << hg->message();
      std::vector<int32_t> want;
      std::vector<int64_t> splits;
      for (int m = 0; m < 3; ++m)
        for (int r = 0; r < size; ++r) {
          const int64_t rr = m == 0 ? r + 1 : rows[m];
          splits.push_back(rr);
          for (int64_t i = 0; i < rr * row_counts[m]; ++i) want.push_back(1000 * m + 10 * r + int32_t(i));
        }
      EXPECT_EQ(hg->splits, splits);
      ASSERT_EQ(hg->output.size(), want.size() * sizeof(int32_t));
      EXPECT_EQ(0, std::memcmp(hg->output.data(), want.data(), hg->output.size()));
      auto hr = submit_args(rt, rs);
      ASSERT_EQ(wait_code(hr), Code::kOk) << hr->message();
      for (int m : {0, 2}) {
        const int64_t member_rows = m == 0 ? 3 : rows[m];
        int64_t first = 0;
        for (int r = 0; r < rank; ++r) first += shard_rows(member_rows, r, size);
        for (size_t k = 0; k < out[m].size(); ++k) {
          const int64_t i = first * row_counts[m] + int64_t(k);
          ASSERT_EQ(out[m][k], size * (1000 * m + int32_t(i)) + 10 * size * (size - 1) / 2)
              << "member " << m << " element " << k;
        }
      }
    });
  }
}

TEST(Collectives, GroupMembershipMismatchIsReported) {
  LoopbackJob job(2);
  job.run([&](int rank, Runtime& rt) {
    std::vector<float> x(4, 1.0f), y(4, 1.0f);
    CollectiveArgs a;
    a.collective = Collective::kGroupedAllreduce;
    a.member_names = {"m0", rank == 0 ? "m1" : "other"};
    a.members = {{x.data(), x.data(), 4}, {y.data(), y.data(), 4}};
    auto h = submit_args(rt, a);
    ASSERT_EQ(wait_code(h), Code::kMismatch);
    EXPECT_NE(h->message().find("member names"), std::string::npos) << h->message();
  });
}

TEST(Collectives, BarrierWaitsForEveryRank) {
  LoopbackJob job(4);
  std::atomic<int> arrived{0};
  job.run([&](int rank, Runtime& rt) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20 * rank));
    arrived++;
    CollectiveArgs a;
    a.collective = Collective::kBarrier;
    a.name = rt.next_barrier_name();
    ASSERT_EQ(wait_code(submit_args(rt, a)), Code::kOk);
    EXPECT_EQ(arrived.load(), 4);
  });
}

// Ranks with fewer batches join early; the others' allreduces go on with zeros
// from the joined ranks and the average still divides by the full size.
TEST(Collectives, JoinWithUnevenStepsThenNormalWork) {
  const int size = 3;
  LoopbackJob job(size);
  job.run([&](int rank, Runtime& rt) {
    const int steps = 2 + rank;  // rank 2 joins last
    for (int step = 0; step < steps; ++step) {
      std::vector<float> g(8, 3.0f);
      auto a = args(Collective::kAllreduce, "grad", g.data(), g.data(), 8, 1, DataType::kFloat32);
      a.op = ReduceOp::kAverage;
      ASSERT_EQ(wait_code(submit_args(rt, a)), Code::kOk);
      int active = 0;
      for (int r = 0; r < size; ++r) active += step < 2 + r ? 1 : 0;
      EXPECT_EQ(g, std::vector<float>(8, 3.0f * active / size)) << "rank " << rank << " step " << step;
    }
    if (rank == size - 1) {  // ranks 0 and 1 have joined by now: other collectives fail
      std::vector<int32_t> x(2);
      auto a = args(Collective::kAllgather, "during_join", x.data(), nullptr, 2);
      EXPECT_EQ(wait_code(submit_args(rt, a)), Code::kInvalidArgument);
    }
    CollectiveArgs j;
    j.collective = Collective::kJoin;
    j.name = "kolo.join";
    auto h = submit_args(rt, j);
    ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
    EXPECT_EQ(h->last_joined, 2);
    // Normal work afterwards, every rank taking part again.
    std::vector<int32_t> v(4, rank);
    ASSERT_EQ(wait_code(submit_args(rt, args(Collective::kAllreduce, "after", v.data(), v.data(), 4))),
              Code::kOk);
    EXPECT_EQ(v, std::vector<int32_t>(4, 3));
  });
}

// A joined rank must run any allreduce response, cached or not, naming tensors it
// never submitted: every rank joining first, with and without the response cache,
// fused small tensors of two sizes in one cycle (the zeros must not move under the
// first one's feet) and a lone large one, float AVERAGE and int32 SUM. The sums
// are over the ranks that did submit.
TEST(Collectives, JoinAfterNamesAreCachedEveryFirstRank) {
  for (int size : {2, 3, 4}) {
    for (int64_t cache : {int64_t{0}, int64_t{1024}}) {
      Config config;
      config.cache_capacity = cache;
      LoopbackJob job(size, config);
      for (int first = 0; first < size; ++first) {
        SCOPED_TRACE("size " + std::to_string(size) + " cache " + std::to_string(cache) +
                     " first " + std::to_string(first));
        job.run([&](int rank, Runtime& rt) {
          std::vector<float> a(5), b(17), big(300000);  // big: 1.2 MB, a bucket alone
          std::vector<int32_t> n(9);
          auto submit_all = [&](int active) {
            std::fill(a.begin(), a.end(), float(rank + 1));
            std::fill(b.begin(), b.end(), float(rank + 1));
            std::fill(big.begin(), big.end(), float(rank + 1));
            std::fill(n.begin(), n.end(), rank + 1);
            auto fa = args(Collective::kAllreduce, "a", a.data(), a.data(), 5, 1, DataType::kFloat32);
            auto fb = args(Collective::kAllreduce, "b", b.data(), b.data(), 17, 1, DataType::kFloat32);
            auto fbig = args(Collective::kAllreduce, "big", big.data(), big.data(), 300000, 1,
                             DataType::kFloat32);
            fa.op = fb.op = fbig.op = ReduceOp::kAverage;
            auto fn = args(Collective::kAllreduce, "n", n.data(), n.data(), 9);
            std::vector<std::shared_ptr<HandleState>> hs;
            for (auto* x : {&fa, &fb, &fbig, &fn}) hs.push_back(submit_args(rt, *x));
            for (auto& h : hs) ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
            // Ranks 1..size take part but `active` of them submitted: sum of r + 1.
            const int sum = active == size ? size * (size + 1) / 2 : size * (size + 1) / 2 - (first + 1);
            const float average = float(sum) * float(1.0 / size);  // kolo.h's rounding
            EXPECT_EQ(a, std::vector<float>(5, average));
            EXPECT_EQ(b, std::vector<float>(17, average));
            EXPECT_EQ(big.front(), average);
            EXPECT_EQ(big.back(), average);
            EXPECT_EQ(n, std::vector<int32_t>(9, sum));
          };
          submit_all(size);  // every rank: the names enter the cache
          CollectiveArgs j;
          j.collective = Collective::kJoin;
          j.name = "kolo.join";
          if (rank != first) submit_all(size - 1);
          auto h = submit_args(rt, j);
          ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
        });
      }
    }
  }
}

TEST(Collectives, MismatchesAcrossRanksAreReportedOnEveryRank) {
  LoopbackJob job(3);
  job.run([&](int rank, Runtime& rt) {
    std::vector<int32_t> buf(12, 1), out(12);
    // allgather: trailing dimensions differ on rank 2
    auto g = args(Collective::kAllgather, "g", buf.data(), nullptr, 2, rank == 2 ? 3 : 2);
    auto hg = submit_args(rt, g);
    // broadcast: root differs
    auto b = args(Collective::kBroadcast, "b", buf.data(), buf.data(), 4);
    b.root = rank == 1 ? 1 : 0;
    auto hb = submit_args(rt, b);
    // dtype differs
    auto d = args(Collective::kReducescatter, "rs", buf.data(), out.data(), 3, 1,
                  rank == 0 ? DataType::kInt32 : DataType::kFloat32);
    auto hd = submit_args(rt, d);
    // a different collective under one name
    auto c = args(rank == 0 ? Collective::kAllreduce : Collective::kBroadcast, "kind", buf.data(),
                  buf.data(), 4);
    auto hc = submit_args(rt, c);
    for (auto& [h, field] : std::vector<std::pair<std::shared_ptr<HandleState>, std::string>>{
             {hg, "trailing dimensions"}, {hb, "root"}, {hd, "dtype"}, {hc, "collective"}}) {
      ASSERT_EQ(wait_code(h), Code::kMismatch);
      EXPECT_NE(h->message().find(field), std::string::npos) << h->message();
    }
  });
}

TEST(Collectives, LocalArgumentErrors) {
  LoopbackJob job(2);
  Runtime& rt = job.rank(0);
  std::vector<int32_t> buf(8);
  auto a2a = args(Collective::kAlltoall, "a", buf.data(), nullptr, 3);
  submit_args(rt, a2a, Code::kInvalidArgument);  // 3 rows over 2 ranks, no splits
  std::vector<int64_t> splits = {1, 1};
  a2a.send_rows = splits.data();
  submit_args(rt, a2a, Code::kInvalidArgument);  // splits add up to 2, not 3
  auto rs = args(Collective::kReducescatter, "r", buf.data(), buf.data(), 4);
  rs.op = ReduceOp::kMax;
  submit_args(rt, rs, Code::kInvalidArgument);
  auto bc = args(Collective::kBroadcast, "b", buf.data(), buf.data(), 4);
  bc.root = 2;
  submit_args(rt, bc, Code::kInvalidArgument);
  auto g = args(Collective::kAllgather, "g", buf.data(), nullptr, 2, 0);
  submit_args(rt, g, Code::kInvalidArgument);
  CollectiveArgs grp;
  grp.collective = Collective::kGroupedAllreduce;
  grp.member_names = {"x", "x"};
  grp.members = {{buf.data(), buf.data(), 1}, {buf.data() + 1, buf.data() + 1, 1}};
  submit_args(rt, grp, Code::kInvalidArgument);
}

}  // namespace
}  // namespace kolo::core
