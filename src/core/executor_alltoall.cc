#include "core/executor_alltoall.h"

namespace kolo::core {

using transport::CollectiveView;

Status AlltoallFamily::start(Batch& batch, std::unique_ptr<transport::Work>* work) {
  TensorEntry& entry = *batch.entries[0];
  const Response& response = *batch.responses[0];
  const TensorParams& p = entry.request.params;
  const int n = context_.world_size;
  const int me = context_.rank;
  KOLO_CHECK_EQ(response.rows_matrix.size(), static_cast<size_t>(n) * n);
  CollectiveView view = context_.view_of(entry);
  std::vector<int64_t> received(n);
  int64_t total = 0;
  view.alltoall_total = 0;
  for (int64_t rows : response.rows_matrix) view.alltoall_total += rows * p.row_count;
  view.send_counts.reserve(static_cast<size_t>(n));
  view.recv_counts.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    view.send_counts.push_back(response.rows_matrix[me * n + r] * p.row_count);
    received[r] = response.rows_matrix[r * n + me];
    view.recv_counts.push_back(received[r] * p.row_count);
    total += received[r] * p.row_count;
  }
  KOLO_RETURN_IF_ERROR(
      context_.allocate_output(entry, static_cast<size_t>(total) * dtype_size(p.dtype)));
  entry.handle->splits = received;
  view.output = entry.handle->output.data();
  // Even when nothing moves on this rank the call is made: it is collective.
  return context_.start_on_transport(Collective::kAlltoall, view, work);
}

bool AlltoallFamily::pack(const Response& response, const TensorEntry& entry, char* slot,
                          size_t limit, size_t capacity) {
  const size_t n = static_cast<size_t>(context_.world_size);
  if (response.params.collective != Collective::kAlltoall || response.rows_matrix.size() != n * n)
    return false;
  const size_t me = static_cast<size_t>(context_.rank);
  part_.input = entry.input;
  part_.dtype = response.params.dtype;
  part_.send_counts.clear();
  for (size_t d = 0; d < n; ++d)
    part_.send_counts.push_back(response.rows_matrix[me * n + d] * entry.request.params.row_count);
  return context_.carrier->pack(Collective::kAlltoall, part_, slot, limit, capacity);
}

}  // namespace kolo::core
