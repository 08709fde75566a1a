// The preset table itself: unique names, lookups, sorted name lists and shapes a ViT can take.
#include "models/vit_presets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

namespace retort::models {
namespace {

TEST(VitPresetsTest, NamesAreUniqueAndNonEmpty) {
  std::set<std::string_view> seen;
  for (const VitPresetShape& p : VitPresetShapes()) {
    EXPECT_FALSE(p.name.empty());
    EXPECT_TRUE(seen.insert(p.name).second) << "duplicate preset " << p.name;
  }
  EXPECT_EQ(seen.size(), VitPresetShapes().size());
}

TEST(VitPresetsTest, EveryPresetIsFoundByNameAndNoOther) {
  for (const VitPresetShape& p : VitPresetShapes()) {
    const VitPresetShape* found = FindVitPresetShape(p.name);
    ASSERT_NE(found, nullptr) << p.name;
    EXPECT_EQ(found, &p);
  }
  EXPECT_EQ(FindVitPresetShape("vit-h14"), nullptr);
  EXPECT_EQ(FindVitPresetShape(""), nullptr);
  EXPECT_EQ(FindVitPresetShape("VIT-B16"), nullptr);
  EXPECT_EQ(FindVitPresetShape("fm-student "), nullptr);
}

TEST(VitPresetsTest, NameListsAreSortedAndComplete) {
  const auto names = VitPresetNames();
  EXPECT_EQ(names.size(), VitPresetShapes().size());
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  std::string joined;
  for (const auto& n : names) {
    EXPECT_NE(FindVitPresetShape(n), nullptr) << n;
    joined += (joined.empty() ? "" : ", ") + n;
  }
  EXPECT_EQ(VitPresetNameList(), joined);
  // The presets the docs and the demo jobs name.
  for (const char* name : {"fm-teacher", "fm-student", "fm-teacher-p7", "fm-student-p7", "vit-ti16",
                           "vit-s16", "vit-b16"})
    EXPECT_NE(FindVitPresetShape(name), nullptr) << name;
}

TEST(VitPresetsTest, ShapesAreOnesAViTCanTake) {
  for (const VitPresetShape& p : VitPresetShapes()) {
    SCOPED_TRACE(std::string(p.name));
    EXPECT_GT(p.image_size, 0);
    EXPECT_GT(p.in_channels, 0);
    EXPECT_GT(p.patch_size, 0);
    EXPECT_GT(p.depth, 0);
    EXPECT_GT(p.heads, 0);
    EXPECT_GT(p.num_classes, 1);
    EXPECT_EQ(p.image_size % p.patch_size, 0);
    EXPECT_EQ(p.dim % p.heads, 0);
  }
}

}  // namespace
}  // namespace retort::models
