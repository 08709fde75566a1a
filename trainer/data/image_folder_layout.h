// Where the class folders of an image folder dataset are, for the training or the evaluation
// split. Two layouts are accepted, as torchvision/timm users lay them out:
//
//   split layout:     <root>/train/<class>/<image>    training
//                     <root>/val/<class>/<image>      evaluation (or <root>/test/<class>/...;
//                                                     val/ wins when both exist)
//   root of classes:  <root>/<class>/<image>          training; evaluation reads the same images
//
// Images are files named *.jpg, *.jpeg or *.png (case-insensitive). A root holding a train/
// folder of class folders is a split layout; anything else must be a root of classes. Labels are
// always the positions of the training split's class names in sorted order, so an evaluation
// split that lacks a class keeps the training labels of the others.
//
// std-only, stateless; safe from any thread.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace retort::trainer::data {

enum class ImageFolderSplit { kTrain, kEval };

struct ImageFolderLayout {
  // Directory whose subdirectories are the classes of the requested split.
  std::string class_root;
  // The label space: the training split's class directory names, sorted.
  std::vector<std::string> label_classes;
  // For logs: "split layout (train/)", "split layout (val/)", "root of classes".
  std::string description;
  // True for a root of classes asked for the evaluation split: it evaluates on training images.
  bool eval_reads_training_images = false;
};

// Resolves `root` for `split`. NotFound when root is not a directory; InvalidArgument when it
// matches neither layout (a split layout without train/, or without val/ and test/ for the
// evaluation split; a root without class directories; class directories without images), with a
// message that states the expected layouts and what was found under root.
StatusOr<ImageFolderLayout> ResolveImageFolderLayout(const std::string& root,
                                                     ImageFolderSplit split);

// True for *.jpg, *.jpeg, *.png (any case).
bool HasImageExtension(const std::string& path);

}  // namespace retort::trainer::data
