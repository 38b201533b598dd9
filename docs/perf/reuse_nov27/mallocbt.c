#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <stdlib.h>
#define N 16384
#define D 6
extern void* __libc_malloc(size_t);
static void* stacks[N][D]; static long counts[N]; static int used;
static __thread int inside;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int armed;
void* malloc(size_t n) {
  if (armed && !inside) {
    inside = 1;
    void* bt[D + 1]; int k = backtrace(bt, D + 1);
    pthread_mutex_lock(&mu);
    int i; int m = k - 1 < D ? k - 1 : D;
    for (i = 0; i < used; ++i) if (memcmp(stacks[i], bt + 1, sizeof(void*) * m) == 0) break;
    if (i == used && used < N) { memset(stacks[i], 0, sizeof(stacks[i])); memcpy(stacks[i], bt + 1, sizeof(void*) * m); ++used; }
    if (i < N) counts[i]++;
    pthread_mutex_unlock(&mu);
    inside = 0;
  }
  return __libc_malloc(n);
}
__attribute__((constructor)) static void arm(void) { void* b[2]; backtrace(b, 2); armed = 1; }
__attribute__((destructor)) static void dump(void) {
  armed = 0; long t=0; for (int i=0;i<used;++i) t+=counts[i]; fprintf(stderr, "pid %d total %ld used %d\n", getpid(), t, used);
  for (int i = 0; i < used; ++i) {
    if (counts[i] < 5000) continue;
    fprintf(stderr, "pid %d count %ld:", getpid(), counts[i]);
    for (int d = 0; d < D && stacks[i][d]; ++d) { Dl_info info; if (dladdr(stacks[i][d], &info) && info.dli_fname) fprintf(stderr, " %s+%lx", strrchr(info.dli_fname,'/') ? strrchr(info.dli_fname,'/')+1 : info.dli_fname, (long)((char*)stacks[i][d] - (char*)info.dli_fbase)); }
    fprintf(stderr, "\n");
  }
}
