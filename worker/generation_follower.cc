#include "worker/generation_follower.h"

namespace retort::worker {

bool GenerationFollower::Accept(uint64_t number, const std::string& member_id) {
  if (number < newest_ || (number == newest_ && member_id == judged_as_)) return false;
  newest_ = number;
  judged_as_ = member_id;
  return true;
}

uint64_t GenerationFollower::ResumeAfter(const std::string& member_id) const {
  return newest_ > 0 && member_id != judged_as_ ? newest_ - 1 : newest_;
}

}  // namespace retort::worker
