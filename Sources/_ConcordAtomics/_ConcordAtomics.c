#include "_ConcordAtomics.h"

/// The number the next thread gets.
static intptr_t next_thread_number = 1;

_Thread_local intptr_t _concord_thread_number = 0;

intptr_t _concord_number_thread(void) {
  _concord_thread_number = __atomic_fetch_add(&next_thread_number, 1, __ATOMIC_RELAXED);
  return _concord_thread_number;
}
