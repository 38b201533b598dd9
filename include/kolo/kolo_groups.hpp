// kolo_groups.hpp — the grouped collectives of kolo.hpp (which includes this
// header; include kolo.hpp, not this). Each comes in kolo.hpp's two forms: a
// non-throwing one that takes Handle* and returns kolo_status_t, and a throwing
// one that returns the Handle. A group is negotiated as one unit: ready together,
// and a mismatch in any member fails the whole group on every rank.
#ifndef KOLO_KOLO_GROUPS_HPP_
#define KOLO_KOLO_GROUPS_HPP_

#include <kolo/kolo.hpp>

namespace kolo {

// Grouped allreduce: tensor i is names[i], counts[i] elements from inputs[i] into
// outputs[i]; the group is negotiated as one unit and reduced as one bucket, never
// split or mixed with other tensors. One Handle for the group. The four vectors
// must have equal sizes (else KOLO_ERR_INVALID_ARGUMENT; kolo_last_error() is not
// updated for it, nor for an allocation failure, KOLO_ERR_INTERNAL).
template <class T>
kolo_status_t grouped_allreduce_async(const std::vector<std::string>& names,
                                      const std::vector<const T*>& inputs,
                                      const std::vector<T*>& outputs,
                                      const std::vector<std::int64_t>& counts, Handle* handle,
                                      kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                                      double postscale = 1.0,
                                      kolo_device_t device = cpu_device(),
                                      const Options& options = Options()) noexcept {
  const size_t n = names.size();
  if (inputs.size() != n || outputs.size() != n || counts.size() != n) {
    if (handle) *handle = Handle();
    return KOLO_ERR_INVALID_ARGUMENT;
  }
  return detail::submit(handle, options, n, -1, [&](const kolo_options_t* o, kolo_handle_t* raw) {
    const detail::GroupNames c_names(names);
    const std::vector<const void*> c_inputs(inputs.begin(), inputs.end());
    const std::vector<void*> c_outputs(outputs.begin(), outputs.end());
    return kolo_grouped_allreduce_async_ex(static_cast<int>(n), c_names.c.data(),
                                           c_inputs.data(), c_outputs.data(), counts.data(),
                                           dtype_of<T>(), op, prescale, postscale, device, o, raw);
  });
}

template <class T>
Handle grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<const T*>& inputs,
                               const std::vector<T*>& outputs,
                               const std::vector<std::int64_t>& counts,
                               kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                               double postscale = 1.0, kolo_device_t device = cpu_device(),
                               const Options& options = Options()) {
  if (inputs.size() != names.size() || outputs.size() != names.size() ||
      counts.size() != names.size()) {
    throw Error(KOLO_ERR_INVALID_ARGUMENT, "kolo::grouped_allreduce_async",
                "names, inputs, outputs and counts differ in size");
  }
  detail::check_shapes(options, names.size(), "grouped_allreduce_async");
  Handle handle;
  const kolo_status_t status = grouped_allreduce_async(names, inputs, outputs, counts, &handle,
                                                       op, prescale, postscale, device, options);
  const std::string first = names.empty() ? std::string() : names.front();
  return detail::handle_or_throw(status, std::move(handle), "grouped_allreduce_async", first);
}

// Grouped allgather: member i gathers rows[i] rows of row_counts[i] elements
// (empty row_counts: 1 each) from inputs[i]; negotiated as one unit (a mismatch
// in any member fails the group on every rank) and run with no other tensor
// between its members. One Handle: output<T>() is member 0's gathered rows, then
// member 1's, ...; splits() has n * set size values, member-major. The vectors
// must have equal sizes (else KOLO_ERR_INVALID_ARGUMENT, kolo_last_error() not
// updated).
template <class T>
kolo_status_t grouped_allgather_async(const std::vector<std::string>& names,
                                      const std::vector<const T*>& inputs,
                                      const std::vector<std::int64_t>& rows, Handle* handle,
                                      const std::vector<std::int64_t>& row_counts = {},
                                      kolo_device_t device = cpu_device(),
                                      const Options& options = Options()) noexcept {
  const size_t n = names.size();
  if (inputs.size() != n || rows.size() != n || (!row_counts.empty() && row_counts.size() != n)) {
    if (handle) *handle = Handle();
    return KOLO_ERR_INVALID_ARGUMENT;
  }
  const int size = detail::set_size(options);
  const int splits = size >= 0 ? static_cast<int>(n) * size : -1;
  return detail::submit(handle, options, n, splits, [&](const kolo_options_t* o,
                                                        kolo_handle_t* raw) {
    const detail::GroupNames c_names(names);
    const std::vector<const void*> c_inputs(inputs.begin(), inputs.end());
    const std::vector<std::int64_t> ones(row_counts.empty() ? n : 0, 1);
    return kolo_grouped_allgather_async(static_cast<int>(n), c_names.c.data(), c_inputs.data(),
                                        rows.data(), row_counts.empty() ? ones.data()
                                                                        : row_counts.data(),
                                        dtype_of<T>(), device, o, raw);
  });
}

template <class T>
Handle grouped_allgather_async(const std::vector<std::string>& names,
                               const std::vector<const T*>& inputs,
                               const std::vector<std::int64_t>& rows,
                               const std::vector<std::int64_t>& row_counts = {},
                               kolo_device_t device = cpu_device(),
                               const Options& options = Options()) {
  if (inputs.size() != names.size() || rows.size() != names.size() ||
      (!row_counts.empty() && row_counts.size() != names.size())) {
    throw Error(KOLO_ERR_INVALID_ARGUMENT, "kolo::grouped_allgather_async",
                "names, inputs, rows and row_counts differ in size");
  }
  detail::check_shapes(options, names.size(), "grouped_allgather_async");
  Handle handle;
  const kolo_status_t status =
      grouped_allgather_async(names, inputs, rows, &handle, row_counts, device, options);
  const std::string first = names.empty() ? std::string() : names.front();
  return detail::handle_or_throw(status, std::move(handle), "grouped_allgather_async", first);
}

// Grouped reducescatter (op SUM or AVERAGE): member i reduces rows[i] rows of
// row_counts[i] elements (empty: 1 each) from inputs[i] and writes this rank's
// shard of it (reducescatter_shard_rows) to outputs[i]; negotiated as one unit.
// Vectors of different sizes: as grouped_allgather_async.
template <class T>
kolo_status_t grouped_reducescatter_async(const std::vector<std::string>& names,
                                          const std::vector<const T*>& inputs,
                                          const std::vector<T*>& outputs,
                                          const std::vector<std::int64_t>& rows, Handle* handle,
                                          const std::vector<std::int64_t>& row_counts = {},
                                          kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                                          double postscale = 1.0,
                                          kolo_device_t device = cpu_device(),
                                          const Options& options = Options()) noexcept {
  const size_t n = names.size();
  if (inputs.size() != n || outputs.size() != n || rows.size() != n ||
      (!row_counts.empty() && row_counts.size() != n)) {
    if (handle) *handle = Handle();
    return KOLO_ERR_INVALID_ARGUMENT;
  }
  return detail::submit(handle, options, n, -1, [&](const kolo_options_t* o, kolo_handle_t* raw) {
    const detail::GroupNames c_names(names);
    const std::vector<const void*> c_inputs(inputs.begin(), inputs.end());
    const std::vector<void*> c_outputs(outputs.begin(), outputs.end());
    const std::vector<std::int64_t> ones(row_counts.empty() ? n : 0, 1);
    return kolo_grouped_reducescatter_async(
        static_cast<int>(n), c_names.c.data(), c_inputs.data(), c_outputs.data(), rows.data(),
        row_counts.empty() ? ones.data() : row_counts.data(), dtype_of<T>(), op, prescale,
        postscale, device, o, raw);
  });
}

template <class T>
Handle grouped_reducescatter_async(const std::vector<std::string>& names,
                                   const std::vector<const T*>& inputs,
                                   const std::vector<T*>& outputs,
                                   const std::vector<std::int64_t>& rows,
                                   const std::vector<std::int64_t>& row_counts = {},
                                   kolo_op_t op = KOLO_OP_SUM, double prescale = 1.0,
                                   double postscale = 1.0, kolo_device_t device = cpu_device(),
                                   const Options& options = Options()) {
  if (inputs.size() != names.size() || outputs.size() != names.size() ||
      rows.size() != names.size() || (!row_counts.empty() && row_counts.size() != names.size())) {
    throw Error(KOLO_ERR_INVALID_ARGUMENT, "kolo::grouped_reducescatter_async",
                "names, inputs, outputs, rows and row_counts differ in size");
  }
  detail::check_shapes(options, names.size(), "grouped_reducescatter_async");
  Handle handle;
  const kolo_status_t status = grouped_reducescatter_async(
      names, inputs, outputs, rows, &handle, row_counts, op, prescale, postscale, device, options);
  const std::string first = names.empty() ? std::string() : names.front();
  return detail::handle_or_throw(status, std::move(handle), "grouped_reducescatter_async", first);
}

}  // namespace kolo

#endif  // KOLO_KOLO_GROUPS_HPP_
