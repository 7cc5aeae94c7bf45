#include "_ConcordAtomics.h"

#include <pthread.h>
#include <stdlib.h>

// Thread numbers: small, so that the threads alive have the stripes of a striped counter to
// themselves. A number up to 64 goes back to the pool when its thread exits, and the next
// thread to ask gets the lowest one there; larger ones are never given twice.

/// Guards the pool.
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
/// Numbers up to 64 whose threads exited: bit n - 1 for number n.
static uint64_t pool = 0;
/// The lowest number never given out.
static intptr_t next_number = 1;
/// The next number for a thread that already gave its own back: far above the others.
static intptr_t next_late_number = (intptr_t)1 << (sizeof(intptr_t) * 8 - 2);
/// Calls `give_back` when a thread that has a number exits.
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

_Thread_local intptr_t _concord_thread_number = 0;

_Thread_local const void *_concord_thread_mark = 0;
_Thread_local const void *_concord_shared_lock = 0;
_Thread_local intptr_t _concord_shared_depth = 0;

/// Stops the program if a pthread call failed.
static void check(int status) {
  if (status != 0) abort();
}

/// At a thread's exit: its number goes back to the pool. NB: code that runs later on this
/// thread (another key's destructor dropping a handle, say) gets a late number, never given
/// twice: the old one may already be another thread's.
static void give_back(void *value) {
  intptr_t number = (intptr_t)value;
  check(pthread_mutex_lock(&pool_lock));
  _concord_thread_number = next_late_number++;
  if (number <= 64) pool |= (uint64_t)1 << (number - 1);
  check(pthread_mutex_unlock(&pool_lock));
}

static void make_exit_key(void) {
  check(pthread_key_create(&exit_key, give_back));
}

intptr_t _concord_number_thread(void) {
  check(pthread_once(&exit_key_once, make_exit_key));
  check(pthread_mutex_lock(&pool_lock));
  intptr_t number;
  if (pool != 0) {
    number = __builtin_ctzll(pool) + 1;
    pool &= pool - 1;
  } else {
    number = next_number++;
  }
  check(pthread_mutex_unlock(&pool_lock));
  _concord_thread_number = number;
  check(pthread_setspecific(exit_key, (void *)number));
  return number;
}
