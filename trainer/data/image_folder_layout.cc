#include "trainer/data/image_folder_layout.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <system_error>

namespace retort::trainer::data {
namespace fs = std::filesystem;
namespace {

constexpr const char* kExpectedLayouts =
    "expected <root>/train/<class>/<image> with <root>/val/<class>/<image> or "
    "<root>/test/<class>/<image> beside it (split layout), or <root>/<class>/<image> (root of "
    "classes), images being .jpg/.jpeg/.png files";

// What one directory holds (not recursive).
struct DirectoryContents {
  std::vector<std::string> subdirectories;  // sorted names
  int64_t image_files = 0;
  int64_t other_files = 0;
};

StatusOr<DirectoryContents> List(const fs::path& dir) {
  DirectoryContents contents;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      contents.subdirectories.push_back(it->path().filename().string());
    } else if (HasImageExtension(it->path().string())) {
      ++contents.image_files;
    } else {
      ++contents.other_files;
    }
  }
  if (ec) return UnavailableError(dir.string() + ": cannot list: " + ec.message());
  std::sort(contents.subdirectories.begin(), contents.subdirectories.end());
  return contents;
}

std::string Count(int64_t n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

std::string Summary(const DirectoryContents& c) {
  return Count(static_cast<int64_t>(c.subdirectories.size()), "subdirectory", "subdirectories") +
         ", " + Count(c.image_files, "image file", "image files") + ", " +
         Count(c.other_files, "other file", "other files");
}

// "found: a/ (0 subdirectories, 0 image files, 1 other file), b/ (...), and 2 files": the
// root's entries, each subdirectory with a summary of its contents (the first few only).
std::string DescribeRoot(const fs::path& root, const DirectoryContents& contents) {
  constexpr size_t kMaxListed = 6;
  std::string found = "found under " + root.string() + ": ";
  if (contents.subdirectories.empty()) found += "no subdirectories";
  for (size_t i = 0; i < contents.subdirectories.size() && i < kMaxListed; ++i) {
    const std::string& name = contents.subdirectories[i];
    StatusOr<DirectoryContents> sub = List(root / name);
    found += (i ? ", " : "") + name + "/ (" + (sub.ok() ? Summary(*sub) : "unreadable") + ")";
  }
  if (contents.subdirectories.size() > kMaxListed) {
    found += " and " + std::to_string(contents.subdirectories.size() - kMaxListed) + " more";
  }
  return found + "; " + Count(contents.image_files, "image file", "image files") + " and " +
         Count(contents.other_files, "other file", "other files") + " at the top";
}

// A folder of class folders: a directory with at least one subdirectory.
StatusOr<bool> HoldsClassFolders(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  RETORT_ASSIGN_OR_RETURN(DirectoryContents contents, List(dir));
  return !contents.subdirectories.empty();
}

}  // namespace

bool HasImageExtension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext == ".jpg" || ext == ".jpeg" || ext == ".png";
}

StatusOr<ImageFolderLayout> ResolveImageFolderLayout(const std::string& root_name,
                                                     ImageFolderSplit split) {
  const fs::path root(root_name);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return NotFoundError(root_name + ": image folder root is not a directory (" + kExpectedLayouts +
                         ")");
  }
  RETORT_ASSIGN_OR_RETURN(DirectoryContents contents, List(root));
  RETORT_ASSIGN_OR_RETURN(bool has_train, HoldsClassFolders(root / "train"));
  RETORT_ASSIGN_OR_RETURN(bool has_val, HoldsClassFolders(root / "val"));
  RETORT_ASSIGN_OR_RETURN(bool has_test, HoldsClassFolders(root / "test"));

  ImageFolderLayout layout;
  if (has_train) {
    RETORT_ASSIGN_OR_RETURN(DirectoryContents train, List(root / "train"));
    layout.label_classes = train.subdirectories;
    if (split == ImageFolderSplit::kTrain) {
      layout.class_root = (root / "train").string();
      layout.description = "split layout (train/)";
    } else if (has_val || has_test) {
      const char* name = has_val ? "val" : "test";
      layout.class_root = (root / name).string();
      layout.description = std::string("split layout (") + name + "/)";
    } else {
      return InvalidArgumentError(root_name +
                                  ": split layout without an evaluation split: train/ holds "
                                  "class folders but there is no val/ or test/ folder of class "
                                  "folders beside it (" +
                                  kExpectedLayouts + "; " + DescribeRoot(root, contents) + ")");
    }
    return layout;
  }
  if (has_val || has_test) {
    return InvalidArgumentError(root_name + ": " + (has_val ? "val/" : "test/") +
                                " holds class folders but there is no train/ folder of class "
                                "folders beside it (" +
                                kExpectedLayouts + "; " + DescribeRoot(root, contents) + ")");
  }

  // Root of classes: every subdirectory is a class and holds images itself.
  if (contents.subdirectories.empty()) {
    return InvalidArgumentError(root_name + ": no class directories (" + kExpectedLayouts + "; " +
                                DescribeRoot(root, contents) + ")");
  }
  std::string without_images;
  for (const std::string& name : contents.subdirectories) {
    RETORT_ASSIGN_OR_RETURN(DirectoryContents sub, List(root / name));
    if (sub.image_files == 0) {
      without_images += (without_images.empty() ? "" : ", ") + name + "/ (" + Summary(sub) + ")";
    }
  }
  if (!without_images.empty()) {
    return InvalidArgumentError(root_name +
                                ": class directories without images: " + without_images + " (" +
                                kExpectedLayouts + "; " + DescribeRoot(root, contents) + ")");
  }
  layout.class_root = root_name;
  layout.label_classes = contents.subdirectories;
  layout.description = "root of classes";
  layout.eval_reads_training_images = split == ImageFolderSplit::kEval;
  return layout;
}

}  // namespace retort::trainer::data
