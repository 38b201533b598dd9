#include "bindings/c/options.h"

#include <vector>

#include "bindings/c/firewall.h"
#include "core/request.h"

namespace kolo::c_api {
namespace {

kolo_status_t invalid(const std::string& message) {
  return report(Code::kInvalidArgument, message);
}

// One kolo_shape_t as a vector of dimensions; `what` names it in messages.
kolo_status_t read_shape(const std::string& what, const kolo_shape_t& shape,
                         std::vector<int64_t>* dims) {
  if (shape.ndim < 0 || shape.ndim > KOLO_MAX_DIMS)
    return invalid(what + ": ndim " + std::to_string(shape.ndim) + " is out of range 0.." +
                   std::to_string(KOLO_MAX_DIMS));
  if (shape.ndim > 0 && shape.dims == nullptr)
    return invalid(what + ": dims is NULL (ndim " + std::to_string(shape.ndim) + ")");
  dims->assign(shape.dims, shape.dims + shape.ndim);
  for (size_t i = 0; i < dims->size(); ++i) {
    if ((*dims)[i] < 0)
      return invalid(what + ": dims[" + std::to_string(i) + "] is negative (" +
                     std::to_string((*dims)[i]) + ")");
  }
  return KOLO_OK;
}

}  // namespace

kolo_status_t read_options(const kolo_options_t* options, int n,
                           const std::function<std::string()>& owner, core::CollectiveArgs* a) {
  if (options == nullptr) return KOLO_OK;
  if ((options->flags & ~KOLO_OPTION_DETERMINISTIC) != 0)
    return invalid("options.flags has unknown bits " + std::to_string(options->flags) +
                   " (KOLO_OPTION_* only; initialise options with KOLO_OPTIONS_INIT or {0})");
  if ((options->flags & KOLO_OPTION_DETERMINISTIC) != 0) {
    if (!core::is_allreduce(a->collective))
      return invalid(owner() + ": options.flags KOLO_OPTION_DETERMINISTIC applies to allreduce "
                     "only, not " + collective_name(a->collective));
    a->deterministic = true;
  }
  a->process_set = options->process_set;  // core::Runtime::submit checks it
  if (options->shapes == nullptr) return KOLO_OK;
  if (n == 0) return invalid(owner() + " takes no shapes: options.shapes must be NULL");
  const bool grouped = !a->member_names.empty();
  std::vector<int64_t> dims;
  for (int i = 0; i < n; ++i) {
    const std::string what =
        grouped ? "tensor '" + a->member_names[static_cast<size_t>(i)] + "': options.shapes[" +
                      std::to_string(i) + "]"
                : owner() + ": options.shapes[0]";
    if (kolo_status_t s = read_shape(what, options->shapes[i], &dims); s != KOLO_OK) return s;
    if (grouped)
      a->member_shapes.push_back(dims);
    else
      a->shape = dims;
  }
  return KOLO_OK;
}

}  // namespace kolo::c_api
