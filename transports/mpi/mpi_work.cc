#include "transports/mpi/mpi_work.h"

#include <utility>

#include "transports/mpi/mpi_check.h"
#include "transports/mpi/mpi_wait.h"

namespace kolo::mpi {

bool MpiWork::test() {
  if (done_) return true;
  int flag = 0;
  const int rc = MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &flag,
                             MPI_STATUSES_IGNORE);
  if (rc != MPI_SUCCESS) {
    status_ = explain_mpi_error(mpi_error(rc, "MPI_Testall", __FILE__, __LINE__), alive_);
    flag = 1;
  } else if (flag && alive_) {
    status_ = alive_->check_now();  // Note [A completed wait asks liveness too]
  }
  done_ = flag != 0;
  return done_;
}

Status MpiWork::wait() {
  if (!done_) {
    Status waited = wait_all(requests_.data(), static_cast<int>(requests_.size()), alive_);
    if (status_.ok()) status_ = waited;
    for (MPI_Request r : requests_) abandoned_ = abandoned_ || r != MPI_REQUEST_NULL;
    done_ = true;
  }
  return status_;
}

void MpiWork::fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

void MpiWork::finish() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!done_ && !finalized) wait().ignore();
}

}  // namespace kolo::mpi
