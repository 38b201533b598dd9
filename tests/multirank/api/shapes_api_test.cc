// kolo_options_t and the *_ex calls under mpiexec: a shape given must agree with
// the counts given (checked on the caller's rank, before anything is enqueued),
// the options struct refuses what it does not know, and shaped calls compute what
// the plain calls compute.
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class Shapes : public KoloTest {};

// Not an allocation: a handle value no failed call may leave behind.
const kolo_handle_t kStale = reinterpret_cast<kolo_handle_t>(uintptr_t{0x10});

bool last_error_has(const std::string& what) {
  return std::string(kolo_last_error()).find(what) != std::string::npos;
}

kolo_options_t with_shape(const kolo_shape_t* shape) {
  kolo_options_t o = KOLO_OPTIONS_INIT;
  o.shapes = shape;
  return o;
}

TEST_F(Shapes, AShapeMustAgreeWithTheCountsNamingBoth) {
  std::vector<float> buf(12, 1.0f);
  const int64_t d23[] = {2, 3};
  const kolo_shape_t s23 = {2, d23};
  const kolo_options_t o = with_shape(&s23);
  kolo_handle_t h = kStale;
  EXPECT_EQ(kolo_allreduce_async_ex("ar", buf.data(), buf.data(), 5, KOLO_FLOAT32, KOLO_OP_SUM,
                                    1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("shape [2, 3] has 6 elements, but count is 5")) << kolo_last_error();
  EXPECT_TRUE(last_error_has("'ar'")) << kolo_last_error();

  h = kStale;
  EXPECT_EQ(kolo_broadcast_async_ex("bc", buf.data(), buf.data(), 7, KOLO_FLOAT32, 0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("6 elements, but count is 7")) << kolo_last_error();

  EXPECT_EQ(kolo_allgather_async_ex("ag", buf.data(), 3, 3, KOLO_FLOAT32, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("shape [2, 3] has 2 rows (its first dimension), but rows is 3"))
      << kolo_last_error();
  EXPECT_EQ(kolo_alltoall_async_ex("a2a", buf.data(), 2, 2, nullptr, KOLO_FLOAT32, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("has rows of 3 elements (the product of its other dimensions), but "
                             "row_count is 2"))
      << kolo_last_error();
  EXPECT_EQ(kolo_reducescatter_async_ex("rs", buf.data(), buf.data(), 6, 1, KOLO_FLOAT32,
                                        KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("but rows is 6")) << kolo_last_error();
  EXPECT_EQ(h, nullptr);
}

TEST_F(Shapes, ReducescatterRefusesAZeroDimensionalTensor) {
  float x = 1.0f, y = 0.0f;
  const kolo_shape_t scalar = {0, nullptr};
  const kolo_options_t o = with_shape(&scalar);
  kolo_handle_t h = kStale;
  EXPECT_EQ(kolo_reducescatter_async_ex("rs0", &x, &y, 1, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0,
                                        cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("reducescatter needs a tensor of at least one dimension"))
      << kolo_last_error();
  // A scalar allreduce is fine: one element.
  ASSERT_EQ(kolo_allreduce_async_ex("ar0", &x, &y, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(),
                                    &o, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  EXPECT_EQ(y, static_cast<float>(size_));
  kolo_handle_release(h);
}

TEST_F(Shapes, BadShapesAndOptionsAreRefusedByName) {
  float x[4] = {0, 0, 0, 0};
  kolo_handle_t h = kStale;
  const int64_t negative[] = {2, -2};
  const kolo_shape_t bad_dim = {2, negative};
  kolo_options_t o = with_shape(&bad_dim);
  EXPECT_EQ(kolo_allreduce_async_ex("neg", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("dims[1] is negative (-2)")) << kolo_last_error();
  const kolo_shape_t too_many = {KOLO_MAX_DIMS + 1, negative};
  o = with_shape(&too_many);
  EXPECT_EQ(kolo_allreduce_async_ex("many", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("ndim 17 is out of range 0..16")) << kolo_last_error();
  const kolo_shape_t no_dims = {2, nullptr};
  o = with_shape(&no_dims);
  EXPECT_EQ(kolo_allreduce_async_ex("nodims", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("dims is NULL")) << kolo_last_error();
  o = KOLO_OPTIONS_INIT;
  o.flags = 2;
  EXPECT_EQ(kolo_allreduce_async_ex("res", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("options.flags has unknown bits 2")) << kolo_last_error();
  EXPECT_EQ(kolo_barrier_ex(&o), KOLO_ERR_INVALID_ARGUMENT);
  o.flags = KOLO_OPTION_DETERMINISTIC;
  EXPECT_EQ(kolo_barrier_ex(&o), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("KOLO_OPTION_DETERMINISTIC applies to allreduce only"))
      << kolo_last_error();
  o = KOLO_OPTIONS_INIT;
  o.process_set = 3;
  EXPECT_EQ(kolo_allreduce_async_ex("ps", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("unknown process set id 3")) << kolo_last_error();
  EXPECT_EQ(h, nullptr);
  const int64_t d4[] = {4};
  const kolo_shape_t s4 = {1, d4};
  o = with_shape(&s4);
  EXPECT_EQ(kolo_barrier_ex(&o), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("barrier takes no shapes")) << kolo_last_error();
  EXPECT_EQ(kolo_join_ex(&o, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("join takes no shapes")) << kolo_last_error();
  // The defaults, spelled both ways, are the plain calls.
  const kolo_options_t defaults = KOLO_OPTIONS_INIT;
  EXPECT_EQ(kolo_barrier_ex(&defaults), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_barrier_ex(nullptr), KOLO_OK) << kolo_last_error();
}

TEST_F(Shapes, ShapedCallsComputeWhatThePlainCallsCompute) {
  // allreduce [2, 3] of int32, a grouped allreduce of a [4] and a scalar, and an
  // allgather of [1 + rank, 2].
  std::vector<int32_t> a(6);
  for (int i = 0; i < 6; ++i) a[i] = rank_ * 10 + i;
  const int64_t d23[] = {2, 3};
  const kolo_shape_t s23 = {2, d23};
  const kolo_options_t o = with_shape(&s23);
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allreduce_async_ex("a", a.data(), a.data(), 6, KOLO_INT32, KOLO_OP_SUM, 1.0, 1.0,
                                    cpu(), &o, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a[i], 10 * size_ * (size_ - 1) / 2 + size_ * i);

  std::vector<int64_t> g0(4, rank_ + 1);
  int64_t g1 = 2;
  const char* names[] = {"g0", "g1"};
  const void* ins[] = {g0.data(), &g1};
  void* outs[] = {g0.data(), &g1};
  const int64_t counts[] = {4, 1};
  const int64_t d4[] = {4};
  const kolo_shape_t shapes[] = {{1, d4}, {0, nullptr}};
  kolo_options_t og = KOLO_OPTIONS_INIT;
  og.shapes = shapes;
  ASSERT_EQ(kolo_grouped_allreduce_async_ex(2, names, ins, outs, counts, KOLO_INT64, KOLO_OP_SUM,
                                            1.0, 1.0, cpu(), &og, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  for (int64_t v : g0) EXPECT_EQ(v, int64_t(size_) * (size_ + 1) / 2);
  EXPECT_EQ(g1, 2 * size_);

  std::vector<int16_t> rows(2 * (rank_ + 1), int16_t(rank_));
  const int64_t dg[] = {rank_ + 1, 2};
  const kolo_shape_t sg = {2, dg};
  const kolo_options_t oa = with_shape(&sg);
  ASSERT_EQ(kolo_allgather_async_ex("gather", rows.data(), rank_ + 1, 2, KOLO_INT16, cpu(), &oa, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
  const void* data = nullptr;
  int64_t bytes = 0;
  ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
  EXPECT_EQ(bytes, int64_t(sizeof(int16_t)) * size_ * (size_ + 1));
  kolo_handle_release(h);
}

TEST_F(Shapes, AGroupedShapeIsCheckedPerMember) {
  std::vector<float> x(4), y(3);
  const char* names[] = {"m0", "m1"};
  const void* ins[] = {x.data(), y.data()};
  void* outs[] = {x.data(), y.data()};
  const int64_t counts[] = {4, 3};
  const int64_t d4[] = {4}, d2[] = {2};
  const kolo_shape_t shapes[] = {{1, d4}, {1, d2}};
  kolo_options_t og = KOLO_OPTIONS_INIT;
  og.shapes = shapes;
  kolo_handle_t h = kStale;
  EXPECT_EQ(kolo_grouped_allreduce_async_ex(2, names, ins, outs, counts, KOLO_FLOAT32, KOLO_OP_SUM,
                                            1.0, 1.0, cpu(), &og, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("tensor 'm1' (grouped): shape [2] has 2 elements, but count is 3"))
      << kolo_last_error();
}

// Rank 0 gives `mine`, every other rank `theirs`; both hold the same count.
struct Split {
  std::vector<int64_t> mine, theirs;
  const std::vector<int64_t>& of(int rank) const { return rank == 0 ? mine : theirs; }
};

// What every rank must read in a shape mismatch's message, at any world size.
std::string named_shapes(const std::string& name, const std::string& rank0,
                         const std::string& others, int size) {
  return "tensor '" + name + "': ranks disagree on shape: " + rank0 + " on rank 0; " + others +
         (size > 2 ? " on ranks 1,2" + std::string(size > 3 ? ",3" : "") : " on rank 1");
}

// `h` by address: it is read after the submitting call (an argument beside it) ran.
kolo_status_t wait_for(kolo_status_t submitted, const kolo_handle_t* h, std::string* message) {
  if (submitted != KOLO_OK) {
    *message = kolo_last_error();
    return submitted;
  }
  const kolo_status_t s = wait_or_abort(*h);
  *message = kolo_handle_message(*h);
  kolo_handle_release(*h);
  return s;
}

// Equal counts, different shapes: fails on every rank, naming each rank's shape —
// also after the name was cached with agreeing shapes (the cache compares shapes).
TEST_F(Shapes, DifferentShapesOfEqualCountsFailOnEveryRankNamingEach) {
  const Split split{{2, 3}, {3, 2}};
  std::vector<float> in(6, 1.0f), out(6, 0.0f);
  for (bool cached_first : {false, true}) {
    for (int kind = 0; kind < 3; ++kind) {
      const std::string name = std::string(kind == 0 ? "ar" : kind == 1 ? "bc" : "rs") +
                               (cached_first ? "_cached" : "");
      auto submit = [&](const std::vector<int64_t>& dims, std::string* message) {
        const kolo_shape_t shape = {static_cast<int32_t>(dims.size()), dims.data()};
        const kolo_options_t o = with_shape(&shape);
        kolo_handle_t h = nullptr;
        kolo_status_t s;
        if (kind == 0)
          s = kolo_allreduce_async_ex(name.c_str(), in.data(), out.data(), 6, KOLO_FLOAT32,
                                      KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h);
        else if (kind == 1)
          s = kolo_broadcast_async_ex(name.c_str(), in.data(), out.data(), 6, KOLO_FLOAT32, 0,
                                      cpu(), &o, &h);
        else
          s = kolo_reducescatter_async_ex(name.c_str(), in.data(), out.data(), dims[0],
                                          6 / dims[0], KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(),
                                          &o, &h);
        return wait_for(s, &h, message);
      };
      std::string message;
      if (cached_first) {
        ASSERT_EQ(submit(split.mine, &message), KOLO_OK) << message;
        ASSERT_EQ(submit(split.mine, &message), KOLO_OK) << message;
      }
      EXPECT_EQ(submit(split.of(rank_), &message), KOLO_ERR_MISMATCH) << name << ": " << message;
      EXPECT_NE(message.find(named_shapes(name, "[2, 3]", "[3, 2]", size_)), std::string::npos)
          << message;
    }
  }
}

TEST_F(Shapes, AllgatherShapesMayDifferInRowsButNotInTheRest) {
  std::vector<int32_t> in(12, rank_);
  // Rows differ by rank (fine); then the trailing dimensions differ (not fine).
  const std::vector<int64_t> ok = {rank_ + 1, 2}, bad = rank_ == 0 ? std::vector<int64_t>{1, 2, 3}
                                                                    : std::vector<int64_t>{1, 3, 2};
  for (const auto* dims : {&ok, &bad}) {
    int64_t row = 1;
    for (size_t i = 1; i < dims->size(); ++i) row *= (*dims)[i];
    const kolo_shape_t shape = {static_cast<int32_t>(dims->size()), dims->data()};
    const kolo_options_t o = with_shape(&shape);
    kolo_handle_t h = nullptr;
    std::string message;
    const kolo_status_t s = wait_for(
        kolo_allgather_async_ex("g", in.data(), (*dims)[0], row, KOLO_INT32, cpu(), &o, &h), &h,
        &message);
    if (dims == &ok) {
      EXPECT_EQ(s, KOLO_OK) << message;
    } else {
      EXPECT_EQ(s, KOLO_ERR_MISMATCH) << message;
      EXPECT_NE(message.find(named_shapes("g", "[1, 2, 3]", "[1, 3, 2]", size_)), std::string::npos)
          << message;
    }
  }
}

// Note [Negotiated shapes]: "no shape" is a value of its own.
TEST_F(Shapes, AShapedAndAnUnshapedSubmissionMismatch) {
  std::vector<double> x(6, 1.0);
  const int64_t d[] = {6};
  const kolo_shape_t shape = {1, d};
  const kolo_options_t o = with_shape(&shape);
  kolo_handle_t h = nullptr;
  std::string message;
  const kolo_status_t s =
      wait_for(kolo_allreduce_async_ex("mixed", x.data(), x.data(), 6, KOLO_FLOAT64, KOLO_OP_SUM,
                                       1.0, 1.0, cpu(), rank_ == 0 ? nullptr : &o, &h),
               &h, &message);
  EXPECT_EQ(s, KOLO_ERR_MISMATCH) << message;
  EXPECT_NE(message.find(named_shapes("mixed", "(no shape)", "[6]", size_)), std::string::npos)
      << message;
}

TEST_F(Shapes, GroupedMemberShapesMustAgree) {
  std::vector<float> x(6, 1.0f), y(2, 1.0f);
  const char* names[] = {"gx", "gy"};
  const void* ins[] = {x.data(), y.data()};
  void* outs[] = {x.data(), y.data()};
  const int64_t counts[] = {6, 2};
  const int64_t d23[] = {2, 3}, d32[] = {3, 2}, d2[] = {2};
  const kolo_shape_t shapes[] = {{2, rank_ == 0 ? d23 : d32}, {1, d2}};
  kolo_options_t og = KOLO_OPTIONS_INIT;
  og.shapes = shapes;
  kolo_handle_t h = nullptr;
  std::string message;
  const kolo_status_t s = wait_for(
      kolo_grouped_allreduce_async_ex(2, names, ins, outs, counts, KOLO_FLOAT32, KOLO_OP_SUM, 1.0,
                                      1.0, cpu(), &og, &h),
      &h, &message);
  EXPECT_EQ(s, KOLO_ERR_MISMATCH) << message;
  EXPECT_NE(message.find("[[2, 3], [2]] on rank 0; [[3, 2], [2]] on rank"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace kolo_test
