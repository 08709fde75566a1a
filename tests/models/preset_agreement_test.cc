// The coordinator's job-spec validation and the trainer agree on the presets: both accept every
// row of the one table (models/vit_presets.h) and refuse any other name, and the trainer builds
// each preset with the table's shape.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/job_spec.h"
#include "models/vit_presets.h"
#include "trainer/models/vit.h"

namespace retort {
namespace {

Status CoordinatorAccepts(const std::string& preset) {
  return coordinator::ParseJobSpec("student: {preset: " + preset + "}\n", "job.yaml").status();
}

TEST(PresetAgreementTest, BothAcceptEveryPresetOfTheTableWithItsShape) {
  for (const models::VitPresetShape& p : models::VitPresetShapes()) {
    const std::string name(p.name);
    SCOPED_TRACE(name);
    Status coordinator = CoordinatorAccepts(name);
    EXPECT_TRUE(coordinator.ok()) << coordinator;
    auto config = trainer::VitPreset(name);
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->name, name);
    EXPECT_EQ(config->image_size, p.image_size);
    EXPECT_EQ(config->in_channels, p.in_channels);
    EXPECT_EQ(config->patch_size, p.patch_size);
    EXPECT_EQ(config->dim, p.dim);
    EXPECT_EQ(config->depth, p.depth);
    EXPECT_EQ(config->heads, p.heads);
    EXPECT_EQ(config->num_classes, p.num_classes);
    EXPECT_TRUE(trainer::ValidateVitConfig(*config).ok());
  }
}

TEST(PresetAgreementTest, BothRefuseOtherNamesAndListTheSamePresets) {
  for (const std::string name : {"vit-h14", "fm-student-p5", "VIT-B16", "vit:fm-student"}) {
    SCOPED_TRACE(name);
    Status coordinator = CoordinatorAccepts("'" + name + "'");
    EXPECT_EQ(coordinator.code(), StatusCode::kInvalidArgument) << coordinator;
    auto config = trainer::VitPreset(name);
    EXPECT_EQ(config.status().code(), StatusCode::kNotFound) << config.status();
    // Both messages list every known preset.
    const std::string list = models::VitPresetNameList();
    EXPECT_NE(coordinator.message().find(list), std::string::npos) << coordinator;
    EXPECT_NE(config.status().message().find(list), std::string::npos) << config.status();
  }
}

}  // namespace
}  // namespace retort
