#ifndef C_BENCHMARK_SUPPORT_H
#define C_BENCHMARK_SUPPORT_H

#include <stddef.h>

/// Bytes currently allocated by malloc on this thread's arena (the main arena on the main
/// thread), or 0 where the platform does not say.
size_t benchmark_allocated_bytes(void);

/// Does nothing with `pointer`, in a translation unit the optimizer cannot see into, so that
/// the work producing the value cannot be deleted.
void benchmark_sink(const void *pointer);

#endif
