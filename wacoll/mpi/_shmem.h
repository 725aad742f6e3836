/* Flags shared by the ranks of one node through a shared window: ordered loads and
 * stores of its words, a spin lock, and the pause of a spin loop (one set for both
 * compiled modules: the blocking check of one node, wacoll/mpi/_fastcall.pyx, and
 * the ring of its non-blocking checks, _runner.pyx). */
#ifndef WACOLL_SHMEM_H
#define WACOLL_SHMEM_H
#include <sched.h>
#include <stdint.h>

#define wacoll_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define wacoll_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

static inline void wacoll_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* A lock held for a few instructions (between threads of one process). */
static inline void wacoll_spin_lock(int *lock)
{
    while (__atomic_exchange_n(lock, 1, __ATOMIC_ACQUIRE))
        wacoll_pause();
}

static inline void wacoll_spin_unlock(int *lock)
{
    __atomic_store_n(lock, 0, __ATOMIC_RELEASE);
}
#endif
