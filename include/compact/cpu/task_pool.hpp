// SPDX-License-Identifier: MIT
#pragma once
/// The CPU backend's worker threads: a process-wide team that sleeps between calls instead of spinning.
///
/// Why not an OpenMP team: with libgomp's default wait policy an idle team thread spins for a while after every
/// region; on a machine whose cores are busy with other processes the scheduler then treats it as a CPU hog and,
/// when the next region wakes it, queues it behind the other processes, so every region waits about a time slice
/// for it at its closing barrier (measured: a 1.2 ms SRHT sketch took 8-21 ms at load 3-9 on 2 cores, 1.9 ms with
/// OMP_WAIT_POLICY=passive). A library cannot set the wait policy (libgomp reads it once, before any library code
/// runs), so compact owns its team: workers block on a condition variable between calls (a sleeping thread is
/// woken promptly), tasks are claimed from a shared counter (a worker that wakes late finds them done), and a call
/// waits only for the workers that actually joined it, never for one still waiting for a core.

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

#include "compact/config.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif
#if defined(__unix__)
#include <unistd.h>
#endif

namespace compact {
namespace detail {

/// True on a pool worker, and on a caller while it runs tasks: nested calls then run serially.
inline thread_local bool in_pool_task = false;

/// While alive, OpenMP-threaded code called on this thread (Eigen's GEMM) runs on one thread: it sets this thread's
/// OpenMP thread count (a per-thread setting) to 1 and restores it.
class OneOpenMpThread {
 public:
#if defined(_OPENMP)
  OneOpenMpThread() : saved_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOpenMpThread() { omp_set_num_threads(saved_); }
#else
  OneOpenMpThread() {}   // user-provided: a scope object, never "unused"
  ~OneOpenMpThread() {}  // NOLINT(modernize-use-equals-default)
#endif
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
#if defined(_OPENMP)
  int saved_;
#endif
};

/// Worker threads that run the tasks of one call at a time, sleeping in between.
class TaskPool {
 public:
  /// A task: call(ctx, task, slot) with slot 0 for the caller and 1 .. helpers for workers.
  using TaskFn = void (*)(void* ctx, index_t task, int slot);

  /// The process's pool: created on first use and never destroyed (its workers sleep until the process ends); a
  /// child process created by fork() gets a new pool on its first call (the parent's workers do not exist there).
  /// Null when the pool cannot be created (out of memory): the caller then runs its tasks itself.
  static TaskPool* instance() noexcept {
    static std::atomic<TaskPool*> pool{nullptr};
    TaskPool* current = pool.load(std::memory_order_acquire);
    if (current != nullptr && current->owned_by_this_process()) return current;
    TaskPool* fresh = nullptr;
    try {
      fresh = new TaskPool();
    } catch (...) {
      return nullptr;
    }
    if (pool.compare_exchange_strong(current, fresh, std::memory_order_acq_rel)) return fresh;
    delete fresh;  // another thread of this process published its pool first (current now holds it)
    return current;
  }

  /// Runs call(ctx, t, slot) once for every t in [0, tasks) on the calling thread and on up to `helpers` workers,
  /// returning when all tasks are done. Returns false, having run nothing, when another thread is using the pool
  /// (the caller then runs its tasks itself). Never throws: when a worker cannot be started, the call runs on the
  /// workers there are (the caller alone at worst). Tasks must not throw.
  bool try_run(index_t tasks, int helpers, TaskFn call, void* ctx) noexcept {
    std::unique_lock<std::mutex> busy(run_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    Job job{tasks, {0}, 0, call, ctx};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (workers_ < helpers) {
        try {
          std::thread([this] { work(); }).detach();
        } catch (...) {
          break;  // no memory or no thread for another worker: run with the workers there are
        }
        ++workers_;
      }
      job.helpers = std::min(helpers, workers_);
      job_ = &job;
      ++epoch_;
      joined_ = 0;
    }
    wake_.notify_all();
    drain(&job, 0);
    std::unique_lock<std::mutex> lock(mutex_);
    job_ = nullptr;  // workers that wake from now on find no job
    done_.wait(lock, [this] { return active_ == 0; });
    return true;
  }

 private:
  struct Job {
    index_t tasks;
    std::atomic<index_t> next;
    int helpers;
    TaskFn call;
    void* ctx;
  };

  TaskPool() = default;

  bool owned_by_this_process() const noexcept {
#if defined(__unix__)
    return pid_ == ::getpid();
#else
    return true;
#endif
  }

  static void drain(Job* job, int slot) {
    for (index_t t = job->next.fetch_add(1, std::memory_order_relaxed); t < job->tasks;
         t = job->next.fetch_add(1, std::memory_order_relaxed)) {
      job->call(job->ctx, t, slot);
    }
  }

  void work() {
    in_pool_task = true;
    const OneOpenMpThread one_thread;
    std::unique_lock<std::mutex> lock(mutex_);
    std::uint64_t seen = 0;
    for (;;) {
      wake_.wait(lock, [&] { return epoch_ != seen && job_ != nullptr && joined_ < job_->helpers; });
      seen = epoch_;
      Job* job = job_;
      const int slot = ++joined_;
      ++active_;
      lock.unlock();
      drain(job, slot);
      lock.lock();
      if (--active_ == 0) done_.notify_all();
    }
  }

  std::mutex run_mutex_;  // one call at a time
  std::mutex mutex_;      // guards everything below
  std::condition_variable wake_;
  std::condition_variable done_;
  Job* job_ = nullptr;
  std::uint64_t epoch_ = 0;
  int joined_ = 0;
  int active_ = 0;
  int workers_ = 0;
#if defined(__unix__)
  pid_t pid_ = ::getpid();
#endif
};

}  // namespace detail
}  // namespace compact
