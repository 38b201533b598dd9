#include "transports/shm/pass.h"

#include <emmintrin.h>

#include <algorithm>
#include <cstring>

#include "common/check.h"
#include "reduce/reduce.h"

namespace kolo::shm {

void stream_copy(char* dst, const char* src, size_t bytes) {
  const size_t head = std::min(bytes, (16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  std::memcpy(dst, src, head);
  dst += head;
  src += head;
  bytes -= head;
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  std::memcpy(dst + i, src + i, bytes - i);
}

void copy(char* dst, const char* src, size_t bytes, bool streaming) {
  if (streaming)
    stream_copy(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

void put(char* dst, const char* src, int64_t count, DataType dtype, double prescale,
         bool streaming, char* piece) {
  const size_t elem = dtype_size(dtype);
  if (prescale == 1.0 || !streaming) {
    if (prescale == 1.0)
      copy(dst, src, static_cast<size_t>(count) * elem, streaming);
    else
      reduce::copy_scaled(dst, src, count, dtype, prescale);
    return;
  }
  const int64_t per = static_cast<int64_t>(kPieceBytes / elem);
  for (int64_t j = 0; j < count; j += per) {
    const int64_t m = std::min(per, count - j);
    const size_t at = static_cast<size_t>(j) * elem;
    reduce::copy_scaled(piece, src + at, m, dtype, prescale);
    stream_copy(dst + at, piece, static_cast<size_t>(m) * elem);
  }
}

// Note [One pass over the own shard] (pass.h).
Status reduce_shard(const ShardPass& pass, const char* input, const char* const* peers,
                    int npeers, size_t skip, char* slot, char* output, int64_t count,
                    char* piece) {
  const size_t elem = dtype_size(pass.dtype);
  const int64_t per = static_cast<int64_t>(kPieceBytes / elem);
  for (int64_t j = 0; j < count; j += per) {
    const int64_t m = std::min(per, count - j);
    const size_t at = static_cast<size_t>(j) * elem;
    const size_t bytes = static_cast<size_t>(m) * elem;
    char* acc = pass.stream_slot ? piece : slot + at;
    const void* first = input + at;
    if (pass.prescale != 1.0) {
      reduce::copy_scaled(acc, input + at, m, pass.dtype, pass.prescale);
      first = acc;
    }
    reduce::reduce(acc, first, peers[0] + skip + at, m, pass.dtype, pass.op);
    for (int p = 1; p < npeers; ++p)
      reduce::reduce(acc, acc, peers[p] + skip + at, m, pass.dtype, pass.op);
    if (pass.stage != nullptr) KOLO_RETURN_IF_ERROR_AS_IS((*pass.stage)(acc, m));
    if (pass.stream_slot) stream_copy(slot + at, acc, bytes);
    if (output != nullptr) copy(output + at, acc, bytes, pass.stream_output);
  }
  return Status::OK();
}

}  // namespace kolo::shm
