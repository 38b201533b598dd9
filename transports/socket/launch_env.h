// How kolo_init chooses its world, and reads the socket world's options from
// what a launcher leaves in the environment (torchrun's variables and the
// KOLO_* knobs); the same for kolo_init_store's arguments. Pure functions of
// their inputs (the environment is injectable), so every rule is a unit test.
#pragma once

#include <cstdint>
#include <string>

#include "common/knobs.h"
#include "common/status.h"
#include "transports/socket/socket_world.h"

namespace kolo::socket {

enum class WorldChoice { kMpi, kSocket };

// See Note [Which world kolo_init starts]. *why says what decided (for the log).
WorldChoice choose_world(const Config& config, const EnvLookup& env, std::string* why);

// kolo_init in the socket world: RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT
// (required), LOCAL_RANK and LOCAL_WORLD_SIZE (optional), and the knobs. A
// variable that is missing or not a number is an error naming it.
Status options_from_env(const Config& config, const EnvLookup& env, SocketWorldOptions* out);

// kolo_init_store: the store at `address`:`port` ("file:<directory>" and port
// 0: a file store), this rank and size, the job token (may be empty) and the
// generation; the knobs for the rest.
Status options_for_store(const Config& config, const EnvLookup& env, const std::string& address,
                         int port, int rank, int size, const std::string& token,
                         int64_t generation, SocketWorldOptions* out);

// `env` with every KOLO_* knob hidden but those that say how a rank finds the
// others (KOLO_WORLD, the store's and the socket's, the token, the generation,
// the timeouts, KOLO_TEST_NODE_SIZE, KOLO_LOG_LEVEL): kolo_init reads them alone
// when another knob is bad, so that the world still forms and every rank gets
// that error (Note [One verdict at init] in core/init_agreement.h).
EnvLookup meeting_env(const EnvLookup& env);

// Note [Which world kolo_init starts]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// KOLO_WORLD=mpi or KOLO_WORLD=socket decides. With KOLO_WORLD=auto (the
// default), kolo_init starts the socket world when torchrun's variables are set
// (MASTER_ADDR, MASTER_PORT, RANK and WORLD_SIZE) and no MPI launcher's are
// (PMI_RANK, PMI_SIZE, PMIX_RANK, OMPI_COMM_WORLD_RANK, MPI_LOCALRANKID: mpiexec
// and srun --mpi set them), else the MPI world, as before. The store: kolo's own,
// at MASTER_ADDR:KOLO_STORE_PORT (default MASTER_PORT + 1: torchrun's agent
// serves its own c10d store, another protocol, at MASTER_PORT), served by rank 0
// unless something already listens there (a launcher's kolo store); or a file
// store in KOLO_STORE_DIR. The job token is KOLO_JOB_TOKEN; without it, one is
// derived from TORCHELASTIC_RUN_ID, MASTER_ADDR and MASTER_PORT — it keeps two
// jobs apart but is no secret. The generation is KOLO_GENERATION, else
// TORCHELASTIC_RESTART_COUNT (torchrun counts its restarts), else 0.

}  // namespace kolo::socket
