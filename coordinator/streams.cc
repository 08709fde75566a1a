#include "coordinator/streams.h"

namespace retort::coordinator {

GenerationStream::GenerationStream(Coordinator* coordinator, std::string member_id, uint64_t after)
    : coordinator_(coordinator), member_id_(std::move(member_id)), last_sent_(after) {
  coordinator_->WatchOpened(member_id_);
  coordinator_->SubscribeGenerations(this);
}

void GenerationStream::OnGeneration(std::shared_ptr<const v1::Generation> generation) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_ || generation->number() <= last_sent_) return;
  pending_ = std::move(generation);
  if (!in_flight_) StartNextLocked();
}

void GenerationStream::StartNextLocked() {
  in_flight_ = std::move(pending_);
  pending_.reset();
  last_sent_ = in_flight_->number();
  StartWrite(in_flight_.get());
}

void GenerationStream::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.reset();
  if (!ok) {
    if (!finished_) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    }
    return;
  }
  if (pending_ && !finished_) StartNextLocked();
}

void GenerationStream::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) {
    finished_ = true;
    Finish(grpc::Status::CANCELLED);
  }
}

void GenerationStream::OnDone() {
  coordinator_->UnsubscribeGenerations(this);
  coordinator_->WatchClosed(member_id_);  // no stream lock held: lock order is coordinator first
  delete this;
}

EventStream::EventStream(Coordinator* coordinator) : coordinator_(coordinator) {
  coordinator_->SubscribeEvents(this);
}

void EventStream::OnEvent(const v1::Event& event) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  if (queue_.size() >= kMaxQueued) {
    finished_ = true;
    Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "watch client too slow; events dropped"));
    return;
  }
  queue_.push_back(event);
  if (!writing_) StartNextLocked();
}

void EventStream::StartNextLocked() {
  writing_ = true;
  StartWrite(&queue_.front());
}

void EventStream::OnWriteDone(bool ok) {
  std::lock_guard<std::mutex> lock(mu_);
  writing_ = false;
  queue_.pop_front();
  if (!ok) {
    if (!finished_) {
      finished_ = true;
      Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "write failed"));
    }
    return;
  }
  if (!queue_.empty() && !finished_) StartNextLocked();
}

void EventStream::OnCancel() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!finished_) {
    finished_ = true;
    Finish(grpc::Status::CANCELLED);
  }
}

void EventStream::OnDone() {
  coordinator_->UnsubscribeEvents(this);
  delete this;
}

}  // namespace retort::coordinator
