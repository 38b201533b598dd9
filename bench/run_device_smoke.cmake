# Runs kolo-allreduce-perf -t nccl for CTest and accepts exactly two outcomes:
#   - it ran: exit 0 and "Wrong elements (...): 0 OK" (a machine with a GPU and NCCL);
#   - it could not: exit 2 within 60 s and one of the one-line reasons
#     "-t nccl: no CUDA device visible" / "-t nccl: this build has no NCCL transport".
# Anything else (a hang, an abort, wrong elements, another message) fails.
# Usage: cmake -DCOMMAND=<mpiexec;-n;1;perf> -DARGS="<flags>" -P run_device_smoke.cmake
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${COMMAND} ${args}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message("${out}${err}")
set(ran_ok "Wrong elements \\([a-z ,]+\\): 0 OK")
set(refused
    "kolo-allreduce-perf: -t nccl: (no CUDA device visible|this build has no NCCL transport)")
if(rc EQUAL 0 AND out MATCHES "${ran_ok}")
  message("device smoke: ran and checked OK")
elseif(rc EQUAL 2 AND err MATCHES "${refused}")
  message("device smoke: refused cleanly (exit 2): no GPU or no NCCL here")
else()
  message(FATAL_ERROR "device smoke: unexpected outcome (exit ${rc})")
endif()
