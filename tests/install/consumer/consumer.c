/* A C program using the installed kolo: init, a few allreduces with exact expected
 * results, shutdown. Run under mpiexec with any number of ranks; exits non-zero on
 * any mismatch. */
#include <kolo/kolo.h>
#include <stdio.h>

enum { kCount = 5 };

static int report(const char* what, kolo_status_t status) {
  fprintf(stderr, "consumer: %s: %s: %s\n", what, kolo_status_string(status), kolo_last_error());
  return 1;
}

int main(void) {
  kolo_status_t status = kolo_init();
  if (status != KOLO_OK) return report("kolo_init", status);
  const int rank = kolo_rank(), size = kolo_size();

  /* Rank r contributes (r + 1) * (i + 1): the sum is (i + 1) * size * (size + 1) / 2. */
  int32_t in[kCount], out[kCount];
  /* Doubles averaged in place: rank r holds r + i / 4.0, the mean is (size - 1) / 2 + i / 4.0,
   * exact in binary for small sizes. */
  double avg[kCount];
  for (int i = 0; i < kCount; ++i) {
    in[i] = (rank + 1) * (i + 1);
    out[i] = -1;
    avg[i] = rank + i / 4.0;
  }
  kolo_handle_t sum_handle = NULL, avg_handle = NULL;
  status = kolo_allreduce_async("consumer/sum", in, out, kCount, KOLO_INT32, KOLO_OP_SUM, 1.0,
                                1.0, KOLO_CPU_DEVICE, &sum_handle);
  if (status != KOLO_OK) return report("kolo_allreduce_async(consumer/sum)", status);
  status = kolo_allreduce_async("consumer/avg", avg, avg, kCount, KOLO_FLOAT64, KOLO_OP_AVERAGE,
                                1.0, 1.0, KOLO_CPU_DEVICE, &avg_handle);
  if (status != KOLO_OK) return report("kolo_allreduce_async(consumer/avg)", status);

  int failed = 0;
  if ((status = kolo_wait(sum_handle, -1.0)) != KOLO_OK) failed = report("kolo_wait(sum)", status);
  if ((status = kolo_wait(avg_handle, -1.0)) != KOLO_OK) failed = report("kolo_wait(avg)", status);
  kolo_handle_release(sum_handle);
  kolo_handle_release(avg_handle);
  for (int i = 0; i < kCount && !failed; ++i) {
    const int32_t want_sum = (i + 1) * size * (size + 1) / 2;
    const double want_avg = (size - 1) / 2.0 + i / 4.0;
    if (out[i] != want_sum || avg[i] != want_avg) {
      fprintf(stderr, "consumer: rank %d element %d: sum %d (want %d), avg %g (want %g)\n", rank,
              i, (int)out[i], (int)want_sum, avg[i], want_avg);
      failed = 1;
    }
  }
  status = kolo_shutdown();
  if (status != KOLO_OK) failed = report("kolo_shutdown", status);
  if (!failed && rank == 0) printf("consumer (C): %d ranks, kolo %s: OK\n", size, kolo_version());
  return failed;
}
