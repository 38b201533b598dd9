// KOLO_MPI_CHECK: the boundary where an MPI error code becomes a kolo Status.
//
// Every MPI call kolo makes goes through it, so an error travels up as
// KOLO_ERR_TRANSPORT with MPI's own words (MPI_Error_string) and the call's text,
// and file:line in its where() — as NCCL's NCCLCHECK does. It only sees errors if the communicator
// returns them: kolo's communicators get MPI_ERRORS_RETURN (mpi_world.cc); on a
// communicator with MPI_ERRORS_ARE_FATAL, MPI aborts before the macro sees a code.
#pragma once

#include <mpi.h>

#include <string>

#include "common/check.h"
#include "common/status.h"

namespace kolo::mpi {

// MPI's description of an error code, e.g. "Message truncated, error stack: ...".
inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  return std::string(text, static_cast<size_t>(length));
}

// A KOLO_ERR_TRANSPORT Status for a failed MPI call.
inline Status mpi_error(int code, const char* call, const char* file, int line) {
  return transport_error(std::string(call) + " failed: " + mpi_error_string(code))
      .with_location(file, line);
}

}  // namespace kolo::mpi

// Returns a KOLO_ERR_TRANSPORT Status from the enclosing function if `call` does
// not return MPI_SUCCESS.
#define KOLO_MPI_CHECK(call)                                                      \
  do {                                                                            \
    int kolo_mpi_rc_ = (call);                                                    \
    if (kolo_mpi_rc_ != MPI_SUCCESS)                                              \
      return ::kolo::mpi::mpi_error(kolo_mpi_rc_, #call, __FILE__, __LINE__);     \
  } while (0)
