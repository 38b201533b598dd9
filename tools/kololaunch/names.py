"""Every environment variable kolorun hands its workers, and every name of the
elastic driver's protocol, in one place: a name the C++ socket world or the Python
elastic layer reads differently is a one-line change here (and, for the protocol,
in bindings/python/kolo/elastic/_driver.py, which tests/kolorun checks against
this file).

The contract, per worker (docs/kolorun.md has the table):
  torchrun's   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK GROUP_WORLD_SIZE
               ROLE_RANK ROLE_WORLD_SIZE ROLE_NAME MASTER_ADDR MASTER_PORT
  kolo's       KOLO_WORLD=socket KOLO_JOB_TOKEN KOLO_STORE_PORT KOLO_GENERATION
  horovodrun's HOROVOD_HOSTNAME HOROVOD_RANK HOROVOD_SIZE HOROVOD_LOCAL_RANK
               HOROVOD_LOCAL_SIZE HOROVOD_CROSS_RANK HOROVOD_CROSS_SIZE
  elastic      HOROVOD_ELASTIC=1 KOLO_ELASTIC_ADDR KOLO_ELASTIC_PORT
"""

# torchrun's (torch.distributed.run) variables; kolo_init reads the first six.
RANK = "RANK"
WORLD_SIZE = "WORLD_SIZE"
LOCAL_RANK = "LOCAL_RANK"
LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE"
GROUP_RANK = "GROUP_RANK"              # the host's index, torchrun's node rank
GROUP_WORLD_SIZE = "GROUP_WORLD_SIZE"  # the number of hosts
ROLE_RANK = "ROLE_RANK"                # one role: the rank
ROLE_WORLD_SIZE = "ROLE_WORLD_SIZE"
ROLE_NAME = "ROLE_NAME"
ROLE = "default"                       # torchrun's default role name
MASTER_ADDR = "MASTER_ADDR"
MASTER_PORT = "MASTER_PORT"

# kolo's socket world (transports/socket/launch_env.h, Note [Which world kolo_init
# starts]): the world forced, the job's secret, kolo's store port at MASTER_ADDR
# (rank 0 serves it; MASTER_PORT stays free for torch.distributed's own store),
# and the generation (elastic jobs count up).
KOLO_WORLD = "KOLO_WORLD"
SOCKET_WORLD = "socket"
KOLO_JOB_TOKEN = "KOLO_JOB_TOKEN"
KOLO_STORE_PORT = "KOLO_STORE_PORT"
KOLO_STORE_ADDR = "KOLO_STORE_ADDR"    # the elastic driver's store (store.py)
KOLO_INIT_TIMEOUT_SECONDS = "KOLO_INIT_TIMEOUT_SECONDS"
KOLO_GENERATION = "KOLO_GENERATION"

# horovodrun's (gloo_run's create_slot_env_vars).
HOROVOD_HOSTNAME = "HOROVOD_HOSTNAME"
HOROVOD_RANK = "HOROVOD_RANK"
HOROVOD_SIZE = "HOROVOD_SIZE"
HOROVOD_LOCAL_RANK = "HOROVOD_LOCAL_RANK"
HOROVOD_LOCAL_SIZE = "HOROVOD_LOCAL_SIZE"
HOROVOD_CROSS_RANK = "HOROVOD_CROSS_RANK"
HOROVOD_CROSS_SIZE = "HOROVOD_CROSS_SIZE"

# An elastic job's workers: Horovod's flag, and where the driver's service is.
HOROVOD_ELASTIC = "HOROVOD_ELASTIC"
KOLO_ELASTIC_ADDR = "KOLO_ELASTIC_ADDR"
KOLO_ELASTIC_PORT = "KOLO_ELASTIC_PORT"

# An MPI launcher's variables: a worker must not inherit them (kolorun run inside
# an mpiexec or srun job), or kolo_init could take it for an MPI rank.
MPI_LAUNCHER_PREFIXES = ("PMI_", "PMIX_", "OMPI_", "HYDRA_", "MPI_LOCALRANKID",
                         "MPI_LOCALNRANKS", "MPIR_")

# The elastic driver's protocol (HTTP/1.1, JSON bodies, every request carries the
# job token in TOKEN_HEADER; service.py serves it, kolo/elastic/_driver.py asks).
TOKEN_HEADER = "X-Kolo-Job-Token"
PATH_READY = "/ready"            # POST {slot, generation, ports}: this worker re-forms
PATH_ASSIGNMENT = "/assignment"  # GET ?slot=&after=: the next generation's assignment
PATH_UPDATES = "/updates"        # GET ?generation=: did the hosts change since it formed
PATH_STATUS = "/status"          # GET: the driver's state, for tests and for people
# HostUpdateResult, as Horovod numbers it: what changed.
UPDATE_REMOVED = 1
UPDATE_ADDED = 2
