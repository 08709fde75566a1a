// The local launcher's decisions without processes: restart backoff, exit descriptions, the
// coordinator's failure report read by reflection (with and without the field), and the run
// directory layout with what an earlier run left in it.
#include "tools/launcher_policy.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/dynamic_message.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "coordinator/job_state_file.h"
#include "testing/subprocess.h"
#include "tools/run_layout.h"

namespace retort::tools {
namespace {

using std::chrono::milliseconds;

TEST(RestartDelayTest, DoublesFromOneSecondAndCapsAtThirty) {
  RestartPolicy p;
  EXPECT_EQ(RestartDelay(p, 1), milliseconds(1000));
  EXPECT_EQ(RestartDelay(p, 2), milliseconds(2000));
  EXPECT_EQ(RestartDelay(p, 3), milliseconds(4000));
  EXPECT_EQ(RestartDelay(p, 5), milliseconds(16000));
  EXPECT_EQ(RestartDelay(p, 6), milliseconds(30000));
  EXPECT_EQ(RestartDelay(p, 100), milliseconds(30000));
}

TEST(DescribeExitTest, NamesTheSignal) {
  EXPECT_EQ(DescribeExit(1), "status 1");
  EXPECT_EQ(DescribeExit(137), "status 137 (killed by SIGKILL)");
  EXPECT_EQ(DescribeExit(134), "status 134 (killed by SIGABRT)");
  EXPECT_FALSE(WorthRestarting(0));
  EXPECT_FALSE(WorthRestarting(2));
  EXPECT_TRUE(WorthRestarting(137));
  EXPECT_EQ(DescribeCoordinatorExit(3), "the coordinator exited with status 3 (job failed)");
}

TEST(JobFailureTextTest, EmptyWithoutTheField) {
  v1::StatusResponse st;  // this build's StatusResponse may or may not have `failure`
  EXPECT_EQ(JobFailureText(st), "");
  v1::JobSpec spec;  // certainly has none
  EXPECT_EQ(JobFailureText(spec), "");
}

// A StatusResponse-like message with `JobFailure failure = 20 {kind, message, member_id}`, built
// at run time, as the coordinator that reports failures has it.
TEST(JobFailureTextTest, ReadsKindMessageAndMemberByReflection) {
  google::protobuf::FileDescriptorProto file;
  file.set_name("launcher_policy_test_failure.proto");
  file.set_package("t");
  file.set_syntax("proto3");
  auto* kind = file.add_enum_type();
  kind->set_name("Kind");
  auto* v0 = kind->add_value();
  v0->set_name("KIND_UNSPECIFIED");
  v0->set_number(0);
  auto* v1 = kind->add_value();
  v1->set_name("KIND_BAD_DATA");
  v1->set_number(1);
  auto* failure = file.add_message_type();
  failure->set_name("JobFailure");
  auto add = [](google::protobuf::DescriptorProto* m, const char* name, int number,
                google::protobuf::FieldDescriptorProto::Type type, const char* type_name = "") {
    auto* f = m->add_field();
    f->set_name(name);
    f->set_number(number);
    f->set_type(type);
    f->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
    if (*type_name) f->set_type_name(type_name);
  };
  add(failure, "kind", 1, google::protobuf::FieldDescriptorProto::TYPE_ENUM, ".t.Kind");
  add(failure, "message", 2, google::protobuf::FieldDescriptorProto::TYPE_STRING);
  add(failure, "member_id", 3, google::protobuf::FieldDescriptorProto::TYPE_STRING);
  auto* status = file.add_message_type();
  status->set_name("Status");
  add(status, "failure", 20, google::protobuf::FieldDescriptorProto::TYPE_MESSAGE, ".t.JobFailure");
  google::protobuf::DescriptorPool pool;
  ASSERT_NE(pool.BuildFile(file), nullptr);
  google::protobuf::DynamicMessageFactory factory(&pool);
  std::unique_ptr<google::protobuf::Message> msg(
      factory.GetPrototype(pool.FindMessageTypeByName("t.Status"))->New());
  EXPECT_EQ(JobFailureText(*msg), "") << "an unset failure is no failure";
  const auto* fd = msg->GetDescriptor()->FindFieldByName("failure");
  auto* f = msg->GetReflection()->MutableMessage(msg.get(), fd);
  const auto* fdesc = f->GetDescriptor();
  f->GetReflection()->SetString(f, fdesc->FindFieldByName("message"),
                                "image 17 of /data/train is corrupt");
  f->GetReflection()->SetEnumValue(f, fdesc->FindFieldByName("kind"), 1);
  f->GetReflection()->SetString(f, fdesc->FindFieldByName("member_id"), "w1-2");
  EXPECT_EQ(JobFailureText(*msg),
            "image 17 of /data/train is corrupt (KIND_BAD_DATA, member w1-2)");
}

v1::JobSpec Job(const std::string& name, const std::string& output_dir = "") {
  v1::JobSpec j;
  j.set_name(name);
  j.set_output_dir(output_dir);
  return j;
}

TEST(RunLayoutTest, OneDirectoryUnlessSplitOnPurpose) {
  RunLayout a = ResolveLayout("", "", Job("j"));
  EXPECT_EQ(a.output_dir, "retort-out");
  EXPECT_EQ(a.state_dir, "retort-out/state");
  RunLayout b = ResolveLayout("", "", Job("j", "/runs/j"));
  EXPECT_EQ(b.output_dir, "/runs/j");
  EXPECT_EQ(b.state_dir, "/runs/j/state");
  RunLayout c = ResolveLayout("/x", "", Job("j", "/runs/j"));
  EXPECT_EQ(c.output_dir, "/x") << "the flag wins over the spec";
  EXPECT_EQ(c.state_dir, "/x/state");
  RunLayout d = ResolveLayout("/x", "/s", Job("j"));
  EXPECT_EQ(d.state_dir, "/s");
}

TEST(RunLayoutTest, InspectsWhatAnEarlierRunLeftAndFreshRemovesIt) {
  const std::string dir = testing::MakeTempDir("retort_run_layout");
  RunLayout l = ResolveLayout(dir, "", Job("j"));
  EXPECT_EQ(InspectPreviousRun(l, Job("j")).kind, PreviousRun::Kind::kNone);
  std::filesystem::create_directories(l.state_dir);
  coordinator::JobStateFile store(l.state_dir);
  v1::CoordinatorState st;
  *st.mutable_job() = Job("j", dir + "/results");
  st.set_state(v1::JOB_STATE_RUNNING);
  st.set_last_checkpoint_step(40);
  ASSERT_TRUE(store.Save(st).ok());
  PreviousRun p = InspectPreviousRun(l, Job("j"));
  EXPECT_EQ(p.kind, PreviousRun::Kind::kResumable);
  EXPECT_EQ(p.last_checkpoint_step, 40);
  EXPECT_EQ(InspectPreviousRun(l, Job("other")).kind, PreviousRun::Kind::kOtherJob);
  st.set_state(v1::JOB_STATE_COMPLETED);
  ASSERT_TRUE(store.Save(st).ok());
  p = InspectPreviousRun(l, Job("j"));
  EXPECT_EQ(p.kind, PreviousRun::Kind::kCompleted);
  EXPECT_EQ(p.results_dir, dir + "/results");
  st.set_state(v1::JOB_STATE_STOPPED);
  ASSERT_TRUE(store.Save(st).ok());
  EXPECT_EQ(InspectPreviousRun(l, Job("j")).kind, PreviousRun::Kind::kStopped);

  std::ofstream(dir + "/metrics.jsonl") << "{}\n";
  std::ofstream(dir + "/result.json") << "{}\n";
  std::ofstream(dir + "/notes.txt") << "mine\n";
  std::filesystem::create_directories(dir + "/steps");
  std::ofstream(dir + "/steps/node0-0.jsonl") << "{}\n";
  auto removed = RemovePreviousRun(l);
  ASSERT_TRUE(removed.ok()) << removed.status().message();
  EXPECT_EQ(removed->size(), 4u);
  EXPECT_FALSE(std::filesystem::exists(l.state_dir));
  EXPECT_FALSE(std::filesystem::exists(dir + "/metrics.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(dir + "/steps")) << "a new run's report must not mix runs";
  EXPECT_TRUE(std::filesystem::exists(dir + "/notes.txt"))
      << "--fresh removes only the run's files";
  EXPECT_EQ(InspectPreviousRun(l, Job("j")).kind, PreviousRun::Kind::kNone);

  std::filesystem::create_directories(l.state_dir);
  std::ofstream(l.state_dir + "/state.json") << "not json";
  EXPECT_EQ(InspectPreviousRun(l, Job("j")).kind, PreviousRun::Kind::kUnreadable);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace retort::tools
