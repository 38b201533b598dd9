// Fuzz target: the ring allreduce's schedule (src/algorithms/ring_schedule.h) and
// the reducescatter's shards (shard_rows, src/core/collective_args.h).
// - Chunks: every rank computes the same boundaries; they tile [0, count) in
//   order, sizes non-increasing and differing by at most one; max_chunk_count is
//   the largest. The shards of `rows` rows are the chunks of `rows` elements.
// - The ring, simulated: at every step what rank r sends is what rank r+1
//   expects. In the reduce-scatter no contribution is added twice and each rank
//   ends owning the full sum of its owned chunk; in the allgather each rank
//   receives every chunk it lacks exactly once, only ever a finished one.
// - Segments tile a chunk in order, each at most segment_elems, all but the last
//   exactly segment_elems.
#include <algorithm>
#include <vector>

#include "algorithms/ring_schedule.h"
#include "core/collective_args.h"
#include "tests/fuzz/fuzz_input.h"

namespace kolo::algorithms {
namespace {

using fuzz::FuzzInput;

void check_chunks(int size, int64_t count) {
  const RingSchedule zero(0, size, count);
  for (int r = 0; r < size; ++r) {
    const RingSchedule s(r, size, count);
    int64_t next = 0;
    for (int c = 0; c < size; ++c) {
      const Range chunk = s.chunk(c);
      KOLO_FUZZ_CHECK(chunk == zero.chunk(c), "rank %d disagrees on chunk %d", r, c);
      KOLO_FUZZ_CHECK(chunk.begin == next && chunk.count >= 0, "chunk %d does not tile", c);
      KOLO_FUZZ_CHECK(chunk.count <= s.max_chunk_count() &&
                          chunk.count >= s.max_chunk_count() - 1,
                      "chunk %d of %lld is uneven", c, static_cast<long long>(chunk.count));
      KOLO_FUZZ_CHECK(c == 0 || chunk.count <= s.chunk(c - 1).count, "chunk %d grows", c);
      KOLO_FUZZ_CHECK(chunk.count == core::shard_rows(count, c, size),
                      "shard_rows(%lld, %d, %d) is not chunk %d", static_cast<long long>(count),
                      c, size, c);
      next = chunk.end();
    }
    KOLO_FUZZ_CHECK(next == count, "chunks end at %lld, not at %lld",
                    static_cast<long long>(next), static_cast<long long>(count));
  }
}

// held[r][c]: the set of ranks whose contribution rank r's copy of chunk c holds.
void check_ring(int size) {
  const uint64_t everyone = size == 64 ? ~uint64_t{0} : (uint64_t{1} << size) - 1;
  std::vector<RingSchedule> ranks;
  for (int r = 0; r < size; ++r) ranks.emplace_back(r, size, int64_t{size});
  std::vector<std::vector<uint64_t>> held(size, std::vector<uint64_t>(size));
  for (int r = 0; r < size; ++r)
    for (int c = 0; c < size; ++c) held[r][c] = uint64_t{1} << r;

  for (int step = 0; step < ranks[0].steps(); ++step) {
    std::vector<std::vector<uint64_t>> next = held;  // every rank sends, then receives
    for (int r = 0; r < size; ++r) {
      const int to = ranks[r].right();
      KOLO_FUZZ_CHECK(ranks[to].left() == r, "%d's right does not see it as left", r);
      const int sent = ranks[r].reduce_scatter_send(step);
      KOLO_FUZZ_CHECK(ranks[to].reduce_scatter_recv(step) == sent,
                      "reduce-scatter step %d: %d sends chunk %d, %d expects %d", step, r, sent,
                      to, ranks[to].reduce_scatter_recv(step));
      KOLO_FUZZ_CHECK((held[r][sent] & held[to][sent]) == 0,
                      "reduce-scatter step %d: a contribution to chunk %d is added twice", step,
                      sent);
      next[to][sent] |= held[r][sent];
    }
    held = next;
  }
  for (int r = 0; r < size; ++r)
    KOLO_FUZZ_CHECK(held[r][ranks[r].owned_chunk()] == everyone,
                    "rank %d does not own the full sum of chunk %d", r, ranks[r].owned_chunk());

  for (int step = 0; step < ranks[0].steps(); ++step) {
    std::vector<std::vector<uint64_t>> next = held;
    for (int r = 0; r < size; ++r) {
      const int to = ranks[r].right();
      const int sent = ranks[r].allgather_send(step);
      KOLO_FUZZ_CHECK(ranks[to].allgather_recv(step) == sent,
                      "allgather step %d: %d sends chunk %d, %d expects another", step, r, sent,
                      to);
      KOLO_FUZZ_CHECK(held[r][sent] == everyone, "allgather step %d: %d forwards unfinished %d",
                      step, r, sent);
      KOLO_FUZZ_CHECK(held[to][sent] != everyone, "allgather step %d: %d receives %d twice",
                      step, to, sent);
      next[to][sent] = everyone;
    }
    held = next;
  }
  for (int r = 0; r < size; ++r)
    for (int c = 0; c < size; ++c)
      KOLO_FUZZ_CHECK(held[r][c] == everyone, "rank %d ends without chunk %d", r, c);
}

void check_segments(const Range& chunk, int64_t segment_elems) {
  const int64_t n = RingSchedule::num_segments(chunk.count, segment_elems);
  KOLO_FUZZ_CHECK(n >= 0 && (chunk.count == 0) == (n == 0), "%lld segments",
                  static_cast<long long>(n));
  // All segments when there are few; else the first and last few (the rest is
  // the same arithmetic).
  std::vector<int64_t> ks;
  for (int64_t k = 0; k < std::min<int64_t>(n, 64); ++k) ks.push_back(k);
  for (int64_t k = std::max<int64_t>(64, n - 64); k < n; ++k) ks.push_back(k);
  for (int64_t k : ks) {
    const Range s = RingSchedule::segment(chunk, segment_elems, k);
    KOLO_FUZZ_CHECK(s.count >= 1 && s.count <= segment_elems, "segment %lld has %lld",
                    static_cast<long long>(k), static_cast<long long>(s.count));
    KOLO_FUZZ_CHECK(s.begin - chunk.begin == k * segment_elems, "segment %lld starts elsewhere",
                    static_cast<long long>(k));
    KOLO_FUZZ_CHECK(k == n - 1 ? s.end() == chunk.end() : s.count == segment_elems,
                    "segment %lld of %lld does not tile", static_cast<long long>(k),
                    static_cast<long long>(n));
  }
}

}  // namespace
}  // namespace kolo::algorithms

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  const int ranks = static_cast<int>(in.in_range(1, 64));
  const uint8_t count_kind = in.take<uint8_t>();
  const int64_t count = count_kind < 128   ? in.in_range(0, 4 * ranks)
                        : count_kind < 250 ? in.in_range(0, int64_t{1} << 40)
                                           : in.in_range(0, INT64_MAX);
  kolo::algorithms::check_chunks(ranks, count);
  kolo::algorithms::check_ring(ranks);
  const kolo::algorithms::RingSchedule schedule(0, ranks, count);
  const int64_t segment_elems = in.take<uint8_t>() < 200 ? in.in_range(1, 1 << 16)
                                                          : in.in_range(1, INT64_MAX);
  for (int c = 0; c < ranks; c += std::max(1, ranks / 4))
    kolo::algorithms::check_segments(schedule.chunk(c), segment_elems);
  return 0;
}
