// The optional arguments of kolo.h's *_ex calls (kolo_options_t), read and
// checked into CollectiveArgs. What the options say about one tensor's counts
// (a shape against rows and row_count) is the core's check (collective_args.cc);
// here only what the struct itself can get wrong.
#pragma once

#include <functional>
#include <string>

#include "core/runtime.h"
#include "kolo/kolo.h"

namespace kolo::c_api {

// `options` (NULL: the defaults) into `a`: the process set and, when given, `n`
// shapes — one per member for a grouped call (a->member_names already filled),
// else n == 1; n == 0 for calls that take none. `owner` gives the name of the
// call or the tensor for messages (called only to build one: a call's options
// are read on every call). Returns KOLO_OK, or KOLO_ERR_INVALID_ARGUMENT
// reported (kolo_last_error) with a message naming the field.
kolo_status_t read_options(const kolo_options_t* options, int n,
                           const std::function<std::string()>& owner, core::CollectiveArgs* a);

}  // namespace kolo::c_api
