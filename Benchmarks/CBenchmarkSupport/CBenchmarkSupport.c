#include "CBenchmarkSupport.h"

#include <stdlib.h>

#if defined(__GLIBC__)
#include <malloc.h>
size_t benchmark_allocated_bytes(void) {
  struct mallinfo2 info = mallinfo2();
  // In-use bytes from the heap plus chunks served by mmap (large dictionary buffers).
  return info.uordblks + info.hblkhd;
}
#elif defined(__APPLE__)
#include <malloc/malloc.h>
size_t benchmark_allocated_bytes(void) {
  malloc_statistics_t statistics;
  malloc_zone_statistics(NULL, &statistics);
  return statistics.size_in_use;
}
#else
size_t benchmark_allocated_bytes(void) { return 0; }
#endif

void benchmark_sink(const void *pointer) { (void)pointer; }
