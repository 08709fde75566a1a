// Where one job run by the local launcher (retort-run) keeps its files, and what an earlier run
// left there. By default one directory holds everything of a run:
//   OUTPUT/job.json            the job spec handed to the coordinator (output_dir = OUTPUT)
//   OUTPUT/metrics.jsonl       one line per completed step (rank 0); the step in flight when a
//                              member fails may appear twice (old and next generation), no other
//   OUTPUT/steps/              every rank's step log (worker/step_log.h)
//   OUTPUT/traces/             step traces on request (worker/trace_recorder.h)
//   OUTPUT/result.json         the job's result (rank 0, at the end)
//   OUTPUT/student.safetensors the trained student
//   OUTPUT/state/              coordinator state; checkpoints in OUTPUT/state/checkpoints
// OUTPUT is --output-dir, else the job spec's output_dir, else retort-out. A user splits this on
// purpose with --state-dir (coordinator state elsewhere) or the spec's checkpoint.dir.
// Thread-compatible.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "retort/v1/retort.pb.h"

namespace retort::tools {

struct RunLayout {
  std::string output_dir;
  std::string state_dir;
  std::string checkpoint_dir;  // "" = the coordinator's default, STATE/checkpoints
};

// output_flag / state_flag: the --output-dir / --state-dir values ("" when not given).
RunLayout ResolveLayout(const std::string& output_flag, const std::string& state_flag,
                        const v1::JobSpec& job);

// What the state directory says about an earlier run of a job.
struct PreviousRun {
  enum class Kind {
    kNone,        // no state: a new job
    kResumable,   // interrupted while waiting/running/paused: the coordinator resumes it
    kCompleted,   // nothing to do
    kStopped,     // stopped by an operator or the launcher: not resumable
    kFailed,      // the coordinator declared it failed
    kOtherJob,    // the state belongs to a job with another name
    kUnreadable,  // state.json exists and cannot be parsed
  };
  Kind kind = Kind::kNone;
  std::string job_name;
  int64_t last_checkpoint_step = 0;
  // Where the earlier run's results are (its spec's output_dir, else the layout's).
  std::string results_dir;
  std::string detail;  // kFailed: the coordinator's failure text; kUnreadable: the error
};

PreviousRun InspectPreviousRun(const RunLayout& layout, const v1::JobSpec& job);

// For --fresh: removes what a run of this layout leaves behind (the state directory, the
// checkpoint directories under an explicit checkpoint dir, and metrics.jsonl, result.json,
// student.safetensors, steps/, traces/ and report.html in the output directory). Returns the
// paths it removed.
StatusOr<std::vector<std::string>> RemovePreviousRun(const RunLayout& layout);

}  // namespace retort::tools
