// What kolo knows about the NCCL library it was linked with; kolo-info and the
// build-info JSON print it. Empty strings in a build without NCCL
// (nccl_unavailable.cc).
#pragma once

#include <string>

namespace kolo::nccl {

// The version of the NCCL library loaded at run time (ncclGetVersion), e.g.
// "2.28.9", which can differ from the headers kolo was built with; or a message
// saying why it could not be read.
std::string library_version();

// The version of the NCCL headers kolo was compiled against, e.g. "2.28.9".
std::string header_version();

}  // namespace kolo::nccl
