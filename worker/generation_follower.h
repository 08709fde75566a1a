// Which generations the worker agent hands to its handler. A generation is judged against the
// member id the worker has when it arrives (its rank is looked up by that id). A worker that
// re-joins (evicted, or the coordinator restarted) gets a new id, and the generation its own
// re-join formed can arrive on the stream before the Join call has returned the new id: judged
// under the old id it has no rank, and were it then skipped as already seen, the worker would
// never train in it while its peers wait for it. So a generation judged under another id than
// the worker's current one is handed over again (the agent reopens its stream after a re-join,
// asking from ResumeAfter).
//
// Thread-compatible: the agent's watch thread owns it.
#pragma once

#include <cstdint>
#include <string>

namespace retort::worker {

class GenerationFollower {
 public:
  // Whether generation `number`, arriving while this worker is `member_id`, goes to the
  // handler: a newer one, or the newest again when it was judged under another id. Records it
  // when it does.
  bool Accept(uint64_t number, const std::string& member_id);

  // The `after` to reopen the stream with: the newest generation handed over, or one less when
  // that one was judged under another id than `member_id` (so the coordinator sends it again).
  uint64_t ResumeAfter(const std::string& member_id) const;

  // The newest generation handed over (0: none yet).
  uint64_t newest() const { return newest_; }

 private:
  uint64_t newest_ = 0;
  std::string judged_as_;  // the member id the newest one was judged under
};

}  // namespace retort::worker
