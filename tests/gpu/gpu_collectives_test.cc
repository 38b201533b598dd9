// Broadcast, allgather, alltoall and reducescatter of CUDA memory through the C API.
// Allgather and alltoall outputs are device memory on the tensor's device, owned by
// the handle (kolo_handle_output gives the device pointer; the test copies it back
// before releasing the handle).
//
// Every value encodes where it came from (rank, row, column) as a small integer, so
// each output element is checked exactly against the rank and row it must hold.
#include <numeric>

#include "gpu_support.h"

namespace kolo_gpu_test {
namespace {

using F32 = Plain<float, KOLO_FLOAT32>;

class GpuCollectives : public GpuTest {
 protected:
  // Waits for `h`, copies its handle-owned output to the host and its splits, then
  // releases it. Checks the output is device memory on this rank's device.
  void take_output(kolo_handle_t h, std::vector<uint8_t>* bytes, std::vector<int64_t>* splits) {
    const kolo_status_t s = kolo_wait(h, 120.0);
    ASSERT_EQ(s, KOLO_OK) << kolo_handle_message(h);
    const void* data = nullptr;
    int64_t n = -1;
    ASSERT_EQ(kolo_handle_output(h, &data, &n), KOLO_OK) << kolo_last_error();
    ASSERT_GE(n, 0);
    if (n > 0) {
      cudaPointerAttributes attr{};
      GPU_CHECK(cudaPointerGetAttributes(&attr, data));
      EXPECT_EQ(attr.type, cudaMemoryTypeDevice) << "a CUDA collective's output must be device memory";
      EXPECT_EQ(attr.device, device_);
    }
    *bytes = download_bytes(data, static_cast<size_t>(n));
    splits->assign(size_, -1);
    ASSERT_EQ(kolo_handle_splits(h, splits->data(), size_), KOLO_OK) << kolo_last_error();
    kolo_handle_release(h);
  }

  // Row `row` of rank s's input holds s * 100 + row in each of its 5 columns.
  // `uneven`: rank s sends d + 1 + s rows to rank d; else 2 rows to each (splits NULL).
  void alltoall(bool uneven) {
    const int rank = rank_, size = size_;
    constexpr int64_t kRowCount = 5;
    auto sends = [&](int s, int d) -> int64_t { return uneven ? d + 1 + s : 2; };
    std::vector<int64_t> send_splits(size);
    for (int d = 0; d < size; ++d) send_splits[d] = sends(rank, d);
    const int64_t rows = std::accumulate(send_splits.begin(), send_splits.end(), int64_t{0});
    const auto input = make_bytes<F32>(rows * kRowCount, [&](int64_t i) {
      return static_cast<double>(rank * 100 + i / kRowCount);
    });
    DeviceBuffer in(input.size());
    in.upload(input.data(), input.size());
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_alltoall_async(name(uneven ? "uneven" : "even").c_str(), in.get(), rows, kRowCount,
                                  uneven ? send_splits.data() : nullptr, KOLO_FLOAT32, cuda(), &h),
              KOLO_OK)
        << kolo_last_error();
    std::vector<uint8_t> out;
    std::vector<int64_t> splits;
    take_output(h, &out, &splits);
    if (HasFatalFailure()) return;

    std::vector<double> expected;  // rows from each source s, in source order
    for (int s = 0; s < size; ++s) {
      EXPECT_EQ(splits[s], sends(s, rank)) << "from rank " << s;
      int64_t first = 0;  // s's first row for this rank
      for (int d = 0; d < rank; ++d) first += sends(s, d);
      for (int64_t row = first; row < first + sends(s, rank); ++row)
        for (int64_t c = 0; c < kRowCount; ++c) expected.push_back(s * 100 + row);
    }
    ASSERT_EQ(out.size(), expected.size() * sizeof(float));
    EXPECT_TRUE(elements_equal<F32>(out, static_cast<int64_t>(expected.size()),
                                    [&](int64_t i) { return expected[i]; }));
  }
};

// Root is the last rank; out of place (non-root inputs NULL) and in place, at a
// count above 1 MiB and a small odd one.
TEST_F(GpuCollectives, Broadcast) {
  const int root = size_ - 1;
  for (int64_t count : {int64_t{7}, int64_t{(1 << 18) + 5}}) {
    for (bool in_place : {false, true}) {
      SCOPED_TRACE("count " + std::to_string(count) + (in_place ? " in place" : ""));
      auto value = [&](int64_t i) { return static_cast<double>(i % 13 + 100 * root); };
      const auto root_input = make_bytes<F32>(count, value);
      DeviceBuffer in(root_input.size()), out(root_input.size());
      out.fill_bytes(0x11);
      if (rank_ == root) (in_place ? out : in).upload(root_input.data(), root_input.size());
      const void* input = in_place ? out.get() : (rank_ == root ? in.get() : nullptr);
      kolo_handle_t h = nullptr;
      ASSERT_EQ(kolo_broadcast_async(name(std::to_string(count) + (in_place ? "i" : "o")).c_str(),
                                     input, out.get(), count, KOLO_FLOAT32, root, cuda(), &h),
                KOLO_OK)
          << kolo_last_error();
      std::string message;
      ASSERT_EQ(finish(h, &message), KOLO_OK) << message;
      EXPECT_TRUE(elements_equal<F32>(download_bytes(out.get(), root_input.size()), count, value));
    }
  }
}

// Rank r contributes r + 1 rows of 3 int32 (r * 1000 + row * 10 + column); the
// output is every rank's rows in rank order.
TEST_F(GpuCollectives, AllgatherOfUnequalRows) {
  using I32 = Plain<int32_t, KOLO_INT32>;
  constexpr int64_t kRowCount = 3;
  const int64_t rows = rank_ + 1;
  auto value = [](int r, int64_t row, int64_t c) { return static_cast<double>(r * 1000 + row * 10 + c); };
  const auto input = make_bytes<I32>(rows * kRowCount, [&](int64_t i) {
    return value(rank_, i / kRowCount, i % kRowCount);
  });
  DeviceBuffer in(input.size());
  in.upload(input.data(), input.size());
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allgather_async(name("x").c_str(), in.get(), rows, kRowCount, KOLO_INT32, cuda(),
                                 &h),
            KOLO_OK)
      << kolo_last_error();
  std::vector<uint8_t> out;
  std::vector<int64_t> splits;
  take_output(h, &out, &splits);
  if (HasFatalFailure()) return;

  std::vector<double> expected;
  for (int r = 0; r < size_; ++r) {
    EXPECT_EQ(splits[r], r + 1) << "rank " << r;
    for (int64_t row = 0; row <= r; ++row)
      for (int64_t c = 0; c < kRowCount; ++c) expected.push_back(value(r, row, c));
  }
  ASSERT_EQ(out.size(), expected.size() * sizeof(int32_t));
  EXPECT_TRUE(elements_equal<I32>(out, static_cast<int64_t>(expected.size()),
                                  [&](int64_t i) { return expected[i]; }));
}

// Above 1 MiB per rank, float16 rows of 4 elements.
TEST_F(GpuCollectives, AllgatherLarge) {
  constexpr int64_t kRows = (1 << 17) + 3, kRowCount = 4;
  auto value = [](int r, int64_t i) { return static_cast<double>((i % 512) - 256 + r); };
  const auto input = make_bytes<Half>(kRows * kRowCount, [&](int64_t i) { return value(rank_, i); });
  DeviceBuffer in(input.size());
  in.upload(input.data(), input.size());
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allgather_async(name("x").c_str(), in.get(), kRows, kRowCount, KOLO_FLOAT16,
                                 cuda(), &h),
            KOLO_OK)
      << kolo_last_error();
  std::vector<uint8_t> out;
  std::vector<int64_t> splits;
  take_output(h, &out, &splits);
  if (HasFatalFailure()) return;
  const int64_t per_rank = kRows * kRowCount;
  ASSERT_EQ(out.size(), static_cast<size_t>(per_rank * size_ * 2));
  EXPECT_TRUE(elements_equal<Half>(out, per_rank * size_, [&](int64_t i) {
    return value(static_cast<int>(i / per_rank), i % per_rank);
  }));
  for (int r = 0; r < size_; ++r) EXPECT_EQ(splits[r], kRows);
}

TEST_F(GpuCollectives, AlltoallEvenSplit) { alltoall(false); }
TEST_F(GpuCollectives, AlltoallUnevenSplits) { alltoall(true); }

// 2 * size + 1 rows of 4 float32: rank 0's shard has 3 rows, the others 2. SUM, and
// AVERAGE with prescale 2 and postscale 0.5.
TEST_F(GpuCollectives, Reducescatter) {
  constexpr int64_t kRowCount = 4;
  const int64_t rows = 2 * size_ + 1;
  auto value = [](int r, int64_t row, int64_t c) {
    return static_cast<double>((row + c + r) % 7) - 3;
  };
  const auto input = make_bytes<F32>(rows * kRowCount, [&](int64_t i) {
    return value(rank_, i / kRowCount, i % kRowCount);
  });
  int64_t first_row = 0;
  for (int r = 0; r < rank_; ++r) first_row += kolo_reducescatter_shard_rows(rows, r, size_);
  const int64_t my_rows = kolo_reducescatter_shard_rows(rows, rank_, size_);
  ASSERT_EQ(my_rows, rank_ == 0 ? 3 : 2);

  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE}) {
    SCOPED_TRACE(op_label(op));
    const double pre = op == KOLO_OP_AVERAGE ? 2.0 : 1.0, post = op == KOLO_OP_AVERAGE ? 0.5 : 1.0;
    DeviceBuffer in(input.size()), out(my_rows * kRowCount * sizeof(float));
    in.upload(input.data(), input.size());
    out.fill_bytes(0x22);
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_reducescatter_async(name(op_label(op)).c_str(), in.get(), out.get(), rows,
                                       kRowCount, KOLO_FLOAT32, op, pre, post, cuda(), &h),
              KOLO_OK)
        << kolo_last_error();
    std::string message;
    ASSERT_EQ(finish(h, &message), KOLO_OK) << message;
    const auto got = download_bytes(out.get(), out.bytes());
    EXPECT_TRUE(elements_equal<F32>(got, my_rows * kRowCount, [&](int64_t i) {
      std::vector<double> per_rank;
      for (int r = 0; r < size_; ++r)
        per_rank.push_back(value(r, first_row + i / kRowCount, i % kRowCount) * pre);
      return reduce_expected(per_rank, op, false, true) * post;
    }));
  }
}

}  // namespace
}  // namespace kolo_gpu_test
