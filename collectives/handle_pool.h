// HandlePool: recycles handles that cost a driver call to create and destroy (CUDA events: the
// NCCL communicator's done event and the trainer's ready event, two per collective, were each
// created and destroyed every operation). Acquire() hands out a handle in a shared_ptr whose
// last owner gives it back to the pool; `make` runs only when no handle is free. Std-only, so
// the recycling is tested on the CPU with plain handles (tests/collectives/handle_pool_test.cc).
// Threading: thread-safe. Every handle handed out keeps the pool alive, so handles may outlive
// the pool's owner; free handles are destroyed with the pool.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "common/status.h"

namespace retort::collectives {

template <typename H>  // movable; a moved-from H owns nothing
class HandlePool : public std::enable_shared_from_this<HandlePool<H>> {
 public:
  using Make = std::function<StatusOr<H>()>;
  static std::shared_ptr<HandlePool> Create(Make make) {
    return std::shared_ptr<HandlePool>(new HandlePool(std::move(make)));
  }

  // A free handle, or a new one from `make` (whose error it returns).
  StatusOr<std::shared_ptr<H>> Acquire() {
    std::unique_ptr<H> h;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        h = std::make_unique<H>(std::move(free_.back()));
        free_.pop_back();
      }
    }
    if (h == nullptr) {
      StatusOr<H> made = make_();
      if (!made.ok()) return made.status();
      h = std::make_unique<H>(std::move(*made));
      std::lock_guard<std::mutex> lock(mu_);
      ++created_;
    }
    auto self = this->shared_from_this();
    return std::shared_ptr<H>(h.release(), [self](H* given_back) {
      {
        std::lock_guard<std::mutex> lock(self->mu_);
        self->free_.push_back(std::move(*given_back));
      }
      delete given_back;
    });
  }

  size_t created() const {
    std::lock_guard<std::mutex> lock(mu_);
    return created_;
  }
  size_t free_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }

 private:
  explicit HandlePool(Make make) : make_(std::move(make)) {}
  const Make make_;
  mutable std::mutex mu_;
  std::vector<H> free_;
  size_t created_ = 0;
};

}  // namespace retort::collectives
