// The job spec's precision decides both halves of a CUDA step's arithmetic together: float32
// keeps the teacher and the student in fp32 on a GPU (so a GPU run follows the CPU run's loss
// curve), bfloat16 turns on the bf16 teacher and the student's bf16 autocast.
#include <gtest/gtest.h>

#include "worker/job_setup.h"

namespace retort::worker {
namespace {

TEST(KdStepOptionsTest, PrecisionDecidesTeacherAndStudentTogether) {
  v1::JobSpec job;
  job.set_precision("float32");
  trainer::KdStepOptions o = MakeKdStepOptions(job, 100);
  EXPECT_FALSE(o.teacher_bf16_on_cuda);
  EXPECT_FALSE(o.student_bf16_on_cuda) << "a float32 job must not autocast the student to bf16";
  job.set_precision("bfloat16");
  o = MakeKdStepOptions(job, 100);
  EXPECT_TRUE(o.teacher_bf16_on_cuda);
  EXPECT_TRUE(o.student_bf16_on_cuda);
}

}  // namespace
}  // namespace retort::worker
