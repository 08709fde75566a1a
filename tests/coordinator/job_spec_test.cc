#include "coordinator/job_spec.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace retort::coordinator {
namespace {

constexpr const char* kValid = R"(
name: "fm-kd"
teacher: {preset: fm-teacher}
student:
  preset: fm-student
dataset: {kind: fashion-mnist, augment: true}
global_batch: 128
steps: 500
optimizer: {lr: 0.002, weight_decay: 0.05, warmup_steps: 50, clip_grad_norm: 1.0}
distillation: {temperature: 4, alpha: 0.7}
elastic: {min_workers: 2, max_workers: 4}
)";

TEST(JobSpecTest, ParsesYamlAndAppliesDefaults) {
  auto spec = ParseJobSpec(kValid, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "fm-kd");
  EXPECT_EQ(spec->student().preset(), "fm-student");
  EXPECT_TRUE(spec->dataset().augment());
  EXPECT_EQ(spec->dataset().path(), "/usr/share/datasets/fashion-mnist");
  EXPECT_EQ(spec->steps(), 500);
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 0.002);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta2(), 0.999);
  EXPECT_DOUBLE_EQ(spec->distillation().alpha(), 0.7);
  EXPECT_EQ(spec->elastic().max_workers(), 4);
  EXPECT_EQ(spec->precision(), "float32");
}

TEST(JobSpecTest, ParsesJson) {
  auto spec =
      ParseJobSpec(R"({"teacher": {"preset": "fm-teacher"}, "student": {"preset": "fm-student"},
                               "epochs": 2, "global_batch": 64})",
                   "job.json");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->epochs(), 2);
  EXPECT_EQ(spec->global_batch(), 64);
}

std::string ModelsOnly() {
  return "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n";
}

void ExpectError(const std::string& text, const std::string& fragment) {
  auto spec = ParseJobSpec(text, "bad.yaml");
  ASSERT_FALSE(spec.ok()) << "accepted: " << text;
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(spec.status().message().find(fragment), std::string::npos)
      << "message '" << spec.status().message() << "' lacks '" << fragment << "'";
  EXPECT_NE(spec.status().message().find("bad.yaml"), std::string::npos);
}

TEST(JobSpecTest, MalformedSpecsGetPreciseErrors) {
  const std::string models = "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n";
  ExpectError("teacher: [unclosed", "not valid YAML");
  ExpectError("- a\n- b\n", "must be a mapping");
  ExpectError(models + "stpes: 10\n", "stpes");
  ExpectError(models + "global_batch: many\n", "global_batch");
  ExpectError(models + "global_batch: -1\n", "global_batch");
  ExpectError(models + "steps: 10\nepochs: 2\n", "exactly one of steps or epochs");
  ExpectError(models + "optimizer: {lr: -1}\n", "optimizer.lr");
  ExpectError(models + "distillation: {alpha: 1.5}\n", "distillation.alpha");
  ExpectError(models + "elastic: {min_workers: 4, max_workers: 2}\n", "elastic.max_workers");
  ExpectError("teacher: {preset: vit-huge}\nstudent: {preset: fm-student}\n",
              "unknown preset 'vit-huge'");
  ExpectError(
      "teacher: {preset: fm-teacher, torchscript_path: /x.pt}\nstudent: {preset: fm-student}\n",
      "exactly one of preset, torchscript_path or exported_path");
  // Exported (AOTInductor) packages: teachers only, and they carry their weights.
  ExpectError("teacher: {preset: fm-teacher}\nstudent: {exported_path: /s.pt2}\n",
              "student.exported_path: an exported package is forward-only");
  ExpectError(
      "teacher: {exported_path: /t.pt2, torchscript_path: /t.pt}\n"
      "student: {preset: fm-student}\n",
      "teacher: set exactly one of preset, torchscript_path or exported_path");
  ExpectError(
      "teacher: {exported_path: /t.pt2, weights_path: /w.safetensors}\n"
      "student: {preset: fm-student}\n",
      "teacher.weights_path: an exported package carries its weights");
  ExpectError(models + "dataset: {kind: imagenet}\n", "dataset.kind");
  ExpectError(models + "precision: fp8\n", "precision");
}

// Every field's bad values: wrong type, negative, zero where 0 is not a documented value,
// out of range, duplicate and unknown keys, keys without a value. Each row is appended to a
// valid spec (teacher + student) unless it sets `whole`, and must be refused naming the field.
struct BadSpec {
  std::string text;
  std::string fragment;
  bool whole = false;  // text is the whole spec
};

TEST(JobSpecTest, TableOfBadValuesIsRefusedNamingTheField) {
  const std::string models = "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n";
  const std::vector<BadSpec> rows = {
      // name
      {"name: \"\"\n", "name: empty string"},
      {"name: ~\n", "name: no value"},
      {"name:\n", "name: no value"},
      {"name: [a, b]\n", "name: expected a single value, got a list"},
      // global_batch (0 used to become 128)
      {"global_batch: 0\n", "global_batch: must be in [1, 16777216], got 0"},
      {"global_batch: -5\n", "global_batch: must be in [1, 16777216], got -5"},
      {"global_batch: 16777217\n", "global_batch: must be in [1, 16777216], got 16777217"},
      {"global_batch: many\n", "global_batch: expected an integer, got 'many'"},
      {"global_batch: 1.5\n", "global_batch: expected an integer, got 1.5"},
      {"global_batch: true\n", "global_batch: expected an integer, got 'true'"},
      {"global_batch: 1e30\n", "global_batch: 1e30 is out of range (int64"},
      {"global_batch: {a: 1}\n", "global_batch: expected a single value, got a mapping"},
      // steps / epochs (steps: 0 used to become epochs: 1; 1e18 was accepted)
      {"steps: 0\n", "steps: must be >= 1, got 0"},
      {"steps: -3\n", "steps: must be in [1, 1000000000], got -3"},
      {"steps: 1e18\n", "steps: must be in [1, 1000000000], got 1000000000000000000"},
      {"steps: 1000000001\n", "steps: must be in [1, 1000000000], got 1000000001"},
      {"steps: 99999999999999999999\n", "steps: 99999999999999999999 is out of range (int64"},
      {"steps: 0x10\n", "steps: expected an integer, got '0x10'"},
      {"steps: .inf\n", "steps: expected an integer, got '.inf'"},
      {"epochs: 0\n", "epochs: must be >= 1, got 0"},
      {"epochs: -1\n", "epochs: must be in [1, 1000000], got -1"},
      {"epochs: 1000001\n", "epochs: must be in [1, 1000000], got 1000001"},
      {"steps: 10\nepochs: 2\n", "set exactly one of steps or epochs, got steps 10 and epochs 2"},
      {"steps: 10\nepochs: 0\n", "epochs: must be >= 1, got 0"},
      // duplicate keys (the last one used to win)
      {"steps: 10\nsteps: 20\n", "steps: written twice (lines 3 and 4)"},
      {"global_batch: 64\nglobalBatch: 32\n", "global_batch: written twice"},
      {"optimizer: {lr: 0.1, lr: 0.2}\n", "optimizer.lr: written twice"},
      {"dataset: {kind: synthetic}\ndataset: {augment: true}\n", "dataset: written twice"},
      // unknown keys
      {"stpes: 10\n", "stpes: unknown field (line 3) (retort.v1.JobSpec has name, teacher"},
      {"dataset: {knd: synthetic}\n", "dataset.knd: unknown field"},
      {"optimizer: {learning_rate: 0.1}\n", "optimizer.learning_rate: unknown field"},
      // teacher / student
      {"teacher: ~\nstudent: {preset: fm-student}\n", "teacher: no value", true},
      {"teacher: fm-teacher\nstudent: {preset: fm-student}\n", "teacher: expected a mapping", true},
      {"teacher: {preset: vit-huge}\nstudent: {preset: fm-student}\n",
       "teacher.preset: unknown preset 'vit-huge'", true},
      {"teacher: {preset: fm-teacher, torchscript_path: /x.pt}\nstudent: {preset: fm-student}\n",
       "teacher: set exactly one of preset, torchscript_path or exported_path", true},
      {"teacher: {preset: \"\"}\nstudent: {preset: fm-student}\n", "teacher.preset: empty string",
       true},
      {"teacher: {preset: fm-teacher, weights_path: \"\"}\nstudent: {preset: fm-student}\n",
       "teacher.weights_path: empty string", true},
      {"teacher: {preset: fm-teacher}\n", "student: set exactly one of preset", true},
      {"teacher: {preset: fm-teacher}\nstudent: {preset: fm-student, allow_partial_weights: "
       "maybe}\n",
       "student.allow_partial_weights: expected true or false, got 'maybe'", true},
      // dataset
      {"dataset: [fashion-mnist]\n", "dataset: expected a mapping of retort.v1.DatasetSpec"},
      {"dataset: {kind: imagenet}\n", "dataset.kind: 'imagenet' is not one of"},
      {"dataset: {kind: \"\"}\n", "dataset.kind: empty string"},
      {"dataset: {kind: image-folder}\n", "dataset.path: required for image-folder"},
      {"dataset: {path: \"\"}\n", "dataset.path: empty string"},
      {"dataset: {augment: 1}\n", "dataset.augment: expected true or false, got '1'"},
      {"dataset: {skip_corrupt: \"true\"}\n", "dataset.skip_corrupt: expected true or false"},
      {"dataset: {decode: tpu}\n", "dataset.decode: 'tpu' is not one of cpu, gpu, auto"},
      {"dataset: {decode: \"\"}\n", "dataset.decode: empty string"},
      {"dataset: {loader_threads: -1}\n", "dataset.loader_threads: must be in [0, 256], got -1"},
      {"dataset: {loader_threads: 257}\n", "dataset.loader_threads: must be in [0, 256], got 257"},
      {"dataset: {prefetch_batches: 0}\n", "dataset.prefetch_batches: must be in [1, 1024], got 0"},
      {"dataset: {prefetch_batches: 1025}\n", "dataset.prefetch_batches: must be in [1, 1024]"},
      {"dataset: {image_size: 0}\n", "dataset.image_size: must be in [8, 4096], got 0"},
      {"dataset: {image_size: 4097}\n", "dataset.image_size: must be in [8, 4096], got 4097"},
      {"dataset: {image_size: 3000000000}\n",
       "dataset.image_size: 3000000000 is out of range (int32"},
      {"dataset: {image_size: big}\n", "dataset.image_size: expected an integer"},
      {"dataset: {num_classes: 0}\n", "dataset.num_classes: must be in [2, 1048576], got 0"},
      {"dataset: {num_classes: 1}\n", "dataset.num_classes: must be in [2, 1048576], got 1"},
      {"dataset: {kind: synthetic, synthetic_samples: 0}\n",
       "dataset.synthetic_samples: must be in [1, 1099511627776], got 0"},
      {"dataset: {synthetic_samples: -1}\n", "dataset.synthetic_samples: must be in [0,"},
      // optimizer
      {"optimizer: {lr: 0}\n", "optimizer.lr: must be in (0, 10), got 0"},
      {"optimizer: {lr: -1}\n", "optimizer.lr: must be in (0, 10), got -1"},
      {"optimizer: {lr: 10}\n", "optimizer.lr: must be in (0, 10), got 10"},
      {"optimizer: {lr: nan}\n", "optimizer.lr: expected a number, got 'nan'"},
      {"optimizer: {lr: .nan}\n", "optimizer.lr: expected a number, got '.nan'"},
      {"optimizer: {lr: 1e999}\n", "optimizer.lr: 1e999 is not a finite number"},
      {"optimizer: {lr: fast}\n", "optimizer.lr: expected a number, got 'fast'"},
      {"optimizer: {weight_decay: -0.1}\n", "optimizer.weight_decay: must be in [0, 1e+06]"},
      {"optimizer: {beta1: 1}\n", "optimizer.beta1: must be in [0, 1), got 1"},
      {"optimizer: {beta1: -0.1}\n", "optimizer.beta1: must be in [0, 1), got -0.1"},
      {"optimizer: {beta2: 1.5}\n", "optimizer.beta2: must be in [0, 1), got 1.5"},
      {"optimizer: {eps: 0}\n", "optimizer.eps: must be in (0, 1], got 0"},
      {"optimizer: {eps: -1e-8}\n", "optimizer.eps: must be in (0, 1]"},
      {"optimizer: {warmup_steps: -1}\n", "optimizer.warmup_steps: must be in [0, 1000000000]"},
      {"optimizer: {warmup_steps: 1e12}\n", "optimizer.warmup_steps: must be in [0, 1000000000]"},
      {"steps: 4\noptimizer: {warmup_steps: 5}\n",
       "optimizer.warmup_steps: must be <= steps (4), got 5"},
      {"optimizer: {lr: 0.01, min_lr: 0.1}\n", "optimizer.min_lr: must be in [0, 0.01], got 0.1"},
      {"optimizer: {min_lr: -1}\n", "optimizer.min_lr: must be in [0,"},
      {"optimizer: {clip_grad_norm: -1}\n", "optimizer.clip_grad_norm: must be in [0,"},
      // distillation
      {"distillation: {temperature: 0}\n", "distillation.temperature: must be in (0, 100], got 0"},
      {"distillation: {temperature: 101}\n", "distillation.temperature: must be in (0, 100]"},
      {"distillation: {alpha: 1.5}\n", "distillation.alpha: must be in [0, 1], got 1.5"},
      {"distillation: {alpha: -0.1}\n", "distillation.alpha: must be in [0, 1], got -0.1"},
      {"distillation: {alpha: ~}\n", "distillation.alpha: no value"},
      {"distillation: {cache_top_k: -1}\n", "distillation.cache_top_k: must be in [0, 10], got -1"},
      {"distillation: {cache_top_k: 11}\n", "distillation.cache_top_k: must be in [0, 10], got 11"},
      // threads_per_worker
      {"threads_per_worker: -1\n", "threads_per_worker: must be in [0, 1024], got -1"},
      {"threads_per_worker: 1025\n", "threads_per_worker: must be in [0, 1024], got 1025"},
      // checkpoint
      {"checkpoint: {every_steps: -1}\n", "checkpoint.every_steps: must be in [0, 1000000000]"},
      {"checkpoint: {every_steps: 1e10}\n", "checkpoint.every_steps: must be in [0, 1000000000]"},
      {"checkpoint: {keep: 0}\n", "checkpoint.keep: must be in [1, 1000], got 0"},
      {"checkpoint: {keep: 1001}\n", "checkpoint.keep: must be in [1, 1000], got 1001"},
      {"checkpoint: {dir: \"\"}\n", "checkpoint.dir: empty string"},
      {"checkpoint: {replicate_every_steps: -1}\n",
       "checkpoint.replicate_every_steps: must be in [0, 1000000000]"},
      // elastic
      {"elastic: {min_workers: 0}\n", "elastic.min_workers: must be in [1, 100000], got 0"},
      {"elastic: {min_workers: -2}\n", "elastic.min_workers: must be in [1, 100000], got -2"},
      {"elastic: {max_workers: 0}\n", "elastic.max_workers: must be in [1, 100000], got 0"},
      {"elastic: {min_workers: 4, max_workers: 2}\n",
       "elastic.max_workers: must be in [4, 100000], got 2"},
      {"elastic: {max_workers: 100001}\n", "elastic.max_workers: must be in [1, 100000]"},
      // seed, precision, output_dir, evaluate
      {"seed: -1\n", "seed: -1 is out of range (uint64"},
      {"seed: 1.5\n", "seed: expected an integer, got 1.5"},
      {"seed: 18446744073709551616\n", "seed: 18446744073709551616 is out of range (uint64"},
      {"precision: fp8\n", "precision: 'fp8' is not float32 or bfloat16"},
      {"precision: \"\"\n", "precision: empty string"},
      {"output_dir: \"\"\n", "output_dir: empty string"},
      {"evaluate: yes\n", "evaluate: expected true or false, got 'yes'"},
  };
  for (const BadSpec& row : rows) {
    const std::string text = row.whole ? row.text : models + row.text;
    SCOPED_TRACE(text);
    ExpectError(text, row.fragment);
  }
}

// An explicitly written value is kept (0 included where it is a value of its own), never
// replaced by the default that an absent field gets.
TEST(JobSpecTest, ExplicitValuesAreKept) {
  auto spec = ParseJobSpec(R"(
teacher: {preset: fm-teacher}
student: {preset: fm-student}
steps: 1e3
global_batch: "64"
seed: 0
dataset: {loader_threads: 0}
optimizer: {beta1: 0, beta2: 0, weight_decay: 0, warmup_steps: 0, clip_grad_norm: 0}
distillation: {cache_top_k: 0}
checkpoint: {every_steps: 0, replicate_every_steps: 0}
)",
                           "explicit.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->steps(), 1000);
  EXPECT_EQ(spec->epochs(), 0);
  EXPECT_EQ(spec->global_batch(), 64);
  EXPECT_EQ(spec->seed(), 0u);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta1(), 0.0);
  EXPECT_DOUBLE_EQ(spec->optimizer().beta2(), 0.0);
  EXPECT_DOUBLE_EQ(spec->optimizer().lr(), 1e-3);  // absent: default

  // Absent fields take the documented defaults.
  auto defaults = ParseJobSpec(ModelsOnly(), "defaults.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->global_batch(), 128);
  EXPECT_EQ(defaults->epochs(), 1);
  EXPECT_EQ(defaults->steps(), 0);
  EXPECT_EQ(defaults->seed(), 1234u);
  EXPECT_DOUBLE_EQ(defaults->optimizer().beta1(), 0.9);
  EXPECT_EQ(defaults->dataset().prefetch_batches(), 4);
  EXPECT_EQ(defaults->checkpoint().keep(), 3);
}

// JobSpecToJson's output (int64 printed as strings) parses back to the same spec.
TEST(JobSpecTest, JsonOutputParsesBack) {
  auto spec = ParseJobSpec(kValid, "job.yaml");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::string json = JobSpecToJson(*spec);
  auto again = ParseJobSpec(json, "job.json");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << json;
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString()) << json;
}

// The specs the repository ships pass the strict parser.
TEST(JobSpecTest, ShippedDeploySpecsParse) {
  for (const char* relative : {"deploy/k8s/base/job.yaml", "deploy/k8s/overlays/gpu/job.yaml"}) {
    const std::string path = std::string(RETORT_SOURCE_DIR) + "/" + relative;
    auto spec = LoadJobSpecFile(path);
    EXPECT_TRUE(spec.ok()) << spec.status();
  }
}

TEST(JobSpecTest, NoTeacherMeansSupervisedAndAlphaDefaultsFollow) {
  auto supervised = ParseJobSpec("student: {preset: fm-teacher}\nsteps: 10\n", "t.yaml");
  ASSERT_TRUE(supervised.ok()) << supervised.status();
  EXPECT_DOUBLE_EQ(supervised->distillation().alpha(), 0.0);
  auto kd =
      ParseJobSpec("teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n", "k.yaml");
  ASSERT_TRUE(kd.ok());
  EXPECT_DOUBLE_EQ(kd->distillation().alpha(), 0.5);
  auto explicit_zero = ParseJobSpec(
      "teacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\ndistillation: {alpha: 0}\n",
      "z.yaml");
  ASSERT_TRUE(explicit_zero.ok());
  EXPECT_DOUBLE_EQ(explicit_zero->distillation().alpha(), 0.0);
  ExpectError("student: {preset: fm-student}\ndistillation: {alpha: 0.5}\n",
              "must be 0 without a teacher");
}

// A field the spec defines but training does not apply yet is refused by name (UNIMPLEMENTED),
// never silently run without; leaving it out (or at its off value) runs.
TEST(JobSpecTest, FieldsNotYetAvailableAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"student: {preset: fm-student, drop_path_rate: 0.1}", "student.drop_path_rate"},
      {"student: {preset: fm-student, distillation_token: true}", "student.distillation_token"},
      {"dataset: {augmentation: {auto_augment: rand-m9-mstd0.5-inc1}}",
       "dataset.augmentation.auto_augment"},
      {"dataset: {repeated_augmentations: 3}", "dataset.repeated_augmentations"},
      {"ema: {decay: 0.9998}", "ema"},
      {"max_micro_batch: 32", "max_micro_batch"},
      {"recipe: deit", "recipe"},
      {"distillation: {loss: dist}", "distillation.loss: dist"},
      {"distillation: {soft_labels: /tmp/store}", "distillation.soft_labels"},
      {"checkpoint: {replicas: 2}", "checkpoint.replicas"},
  };
  for (const auto& [line, field] : cases) {
    // The student line replaces the default one; other lines add to it.
    const std::string text = line.rfind("student:", 0) == 0
                                 ? "teacher: {preset: fm-teacher}\n" + line + "\n"
                                 : ModelsOnly() + line + "\n";
    auto spec = ParseJobSpec(text, "new.yaml");
    ASSERT_FALSE(spec.ok()) << "accepted: " << text;
    EXPECT_EQ(spec.status().code(), StatusCode::kUnimplemented) << spec.status();
    EXPECT_NE(spec.status().message().find(field), std::string::npos)
        << "message '" << spec.status().message() << "' lacks '" << field << "'";
  }
  // Written at their off values, they run.
  auto off = ParseJobSpec(ModelsOnly() +
                              "ema: {decay: 0}\ndistillation: {loss: kl}\ncheckpoint: "
                              "{replicas: 1}\ndataset: {repeated_augmentations: 1}\n",
                          "off.yaml");
  EXPECT_TRUE(off.ok()) << off.status();
}

TEST(JobSpecTest, StragglerRebalancingDefaultsAndRules) {
  auto spec = ParseJobSpec(ModelsOnly() + "elastic: {straggler: {rebalance: true}}\n", "s");
  ASSERT_TRUE(spec.ok()) << spec.status();
  const auto& st = spec->elastic().straggler();
  EXPECT_DOUBLE_EQ(st.threshold(), 0.1);
  EXPECT_EQ(st.window_steps(), 20);
  EXPECT_DOUBLE_EQ(st.min_share(), 0.25);
  auto tuned =
      ParseJobSpec(ModelsOnly() +
                       "elastic: {straggler: {rebalance: true, threshold: 0.3, window_steps: 5, "
                       "min_share: 0.5}}\n",
                   "t");
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  EXPECT_DOUBLE_EQ(tuned->elastic().straggler().threshold(), 0.3);
  EXPECT_EQ(tuned->elastic().straggler().window_steps(), 5);
  ExpectError(ModelsOnly() + "elastic: {straggler: {threshold: 0.3}}\n", "set rebalance: true");
  ExpectError(ModelsOnly() + "elastic: {straggler: {rebalance: true, threshold: 0}}\n",
              "elastic.straggler.threshold");
  ExpectError(ModelsOnly() + "elastic: {straggler: {rebalance: true, min_share: 1.5}}\n",
              "elastic.straggler.min_share");
  ExpectError(ModelsOnly() + "elastic: {straggler: {rebalance: true, window_steps: -1}}\n",
              "elastic.straggler.window_steps");
  auto off = ParseJobSpec(ModelsOnly() + "elastic: {straggler: {rebalance: false}}\n", "o");
  EXPECT_TRUE(off.ok()) << off.status();
  // Draining a straggler: both fields or neither, with or without rebalancing.
  auto drain = ParseJobSpec(
      ModelsOnly() + "elastic: {straggler: {drain_below: 0.5, drain_after_steps: 100}}\n", "d");
  EXPECT_TRUE(drain.ok()) << drain.status();
  ExpectError(ModelsOnly() + "elastic: {straggler: {drain_below: 0.5}}\n", "go together");
  ExpectError(ModelsOnly() + "elastic: {straggler: {drain_below: 1.5, drain_after_steps: 9}}\n",
              "elastic.straggler.drain_below");
}

TEST(JobSpecTest, MixingDefaultsAndRules) {
  auto spec = ParseJobSpec(ModelsOnly() + "mixing: {mixup_alpha: 0.8, cutmix_alpha: 1.0}\n", "m");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->mixing().prob(), 1.0);
  EXPECT_DOUBLE_EQ(spec->mixing().switch_prob(), 0.5);
  EXPECT_EQ(spec->mixing().mode(), "pair");
  EXPECT_DOUBLE_EQ(spec->mixing().label_smoothing(), 0.1);
  // Written values are kept, 0 included.
  auto kept = ParseJobSpec(
      ModelsOnly() + "mixing: {cutmix_alpha: 1, prob: 0, label_smoothing: 0, mode: batch}\n", "k");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_DOUBLE_EQ(kept->mixing().prob(), 0.0);
  EXPECT_DOUBLE_EQ(kept->mixing().label_smoothing(), 0.0);
  EXPECT_EQ(kept->mixing().mode(), "batch");
  // Label smoothing alone is allowed; mixing's other knobs without an alpha are not.
  EXPECT_TRUE(ParseJobSpec(ModelsOnly() + "mixing: {label_smoothing: 0.1}\n", "s").ok());
  ExpectError(ModelsOnly() + "mixing: {prob: 0.5}\n", "need mixing on");
  ExpectError(ModelsOnly() + "mixing: {mixup_alpha: -1}\n", "mixing.mixup_alpha");
  ExpectError(ModelsOnly() + "mixing: {mixup_alpha: 1, mode: elem}\n", "mixing.mode");
  ExpectError(ModelsOnly() + "mixing: {mixup_alpha: 1, switch_prob: 2}\n", "mixing.switch_prob");
  ExpectError(ModelsOnly() + "mixing: {label_smoothing: 1}\n", "mixing.label_smoothing");
  ExpectError(ModelsOnly() + "mixing: {mixup_alpha: 1}\ndistillation: {cache_top_k: 5}\n",
              "distillation.cache_top_k");
}

TEST(JobSpecTest, EvaluationDuringTrainingRules) {
  auto spec =
      ParseJobSpec(ModelsOnly() + "evaluation: {every_steps: 50, export_best: true}\n", "e");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->evaluation().every_steps(), 50);
  ExpectError(ModelsOnly() + "evaluation: {every_steps: -1}\n", "evaluation.every_steps");
  ExpectError(ModelsOnly() + "evaluation: {export_best: true}\n", "every_steps or");
  ExpectError(ModelsOnly() + "evaluation: {max_samples: 100}\n", "every_steps or");
}

TEST(JobSpecTest, DistillationLossesAndTheirWeights) {
  auto dkd = ParseJobSpec(ModelsOnly() + "distillation: {loss: dkd}\n", "d");
  ASSERT_TRUE(dkd.ok()) << dkd.status();
  EXPECT_DOUBLE_EQ(dkd->distillation().dkd_alpha(), 1.0);
  EXPECT_DOUBLE_EQ(dkd->distillation().dkd_beta(), 8.0);
  auto plain = ParseJobSpec(ModelsOnly(), "p");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->distillation().loss(), "") << "left out: Hinton's KL";
  EXPECT_TRUE(ParseJobSpec(ModelsOnly() + "distillation: {loss: hard}\n", "h").ok());
  ExpectError(ModelsOnly() + "distillation: {loss: soft}\n", "not one of kl, hard, dkd");
  ExpectError(ModelsOnly() + "distillation: {loss: kl, dkd_beta: 2}\n", "loss: dkd only");
  ExpectError(ModelsOnly() + "distillation: {loss: dkd, dkd_beta: -2}\n", "distillation.dkd_beta");
  ExpectError("student: {preset: fm-student}\ndistillation: {loss: hard}\n", "has none");
}

TEST(JobSpecTest, ColorJitterRules) {
  EXPECT_TRUE(ParseJobSpec(ModelsOnly() + "dataset: {augment: true, augmentation: "
                                          "{color_jitter: 0.4}}\n",
                           "j")
                  .ok());
  ExpectError(ModelsOnly() + "dataset: {augmentation: {color_jitter: 0.4}}\n",
              "dataset.augment: true");
  ExpectError(ModelsOnly() +
                  "dataset: {kind: synthetic, augment: true, augmentation: "
                  "{color_jitter: 0.4}}\n",
              "needs images");
  ExpectError(ModelsOnly() + "dataset: {augment: true, augmentation: {color_jitter: 1.5}}\n",
              "color_jitter");
}

TEST(JobSpecTest, RandomErasingRules) {
  EXPECT_TRUE(ParseJobSpec(ModelsOnly() + "dataset: {augment: true, augmentation: "
                                          "{random_erase_prob: 0.25, random_erase_mode: pixel}}\n",
                           "e")
                  .ok());
  ExpectError(ModelsOnly() + "dataset: {augmentation: {random_erase_prob: 0.25}}\n",
              "set dataset.augment: true");
  ExpectError(ModelsOnly() + "dataset: {augment: true, augmentation: {random_erase_prob: 2}}\n",
              "random_erase_prob");
  ExpectError(ModelsOnly() +
                  "dataset: {augment: true, augmentation: {random_erase_prob: 0.2, "
                  "random_erase_mode: noise}}\n",
              "random_erase_mode");
  ExpectError(ModelsOnly() + "dataset: {augment: true, augmentation: {random_erase_count: 2}}\n",
              "set random_erase_prob > 0");
}

TEST(JobSpecTest, QuotedNumbersStayStrings) {
  auto spec = ParseJobSpec(
      "name: \"123\"\nteacher: {preset: fm-teacher}\nstudent: {preset: fm-student}\n", "j");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name(), "123");
}

}  // namespace
}  // namespace retort::coordinator
