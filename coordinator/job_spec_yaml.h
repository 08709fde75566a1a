// Strict YAML (or JSON, which YAML includes) -> protobuf message conversion for the job spec,
// by reflection over the message's descriptor. Every error names the field by its dotted path
// ("dataset.image_size") and, where it helps, the line.
//
// Rules: keys are the proto field names (snake_case; the JSON camelCase names are accepted as
// well); an unknown key, a key written twice, a key without a value (`steps:` or `steps: ~`) and
// an empty string are errors. Integers must be integral numbers within the field's type (plain,
// exponent form such as 1e6, or quoted as protobuf's JSON form prints int64); doubles must be
// finite numbers; bools are true or false; enums take their value names. The set `written`
// receives the dotted path of every field the text sets, so that defaults can be applied only
// to fields the text leaves out (proto3 scalars cannot tell "absent" from 0).
//
// Stateless; safe from any thread.
#pragma once

#include <google/protobuf/message.h>
#include <yaml-cpp/yaml.h>

#include <set>
#include <string>

#include "common/status.h"

namespace retort::coordinator {

// Fills `message` (assumed freshly constructed) from the mapping `node`. `path` is the dotted
// prefix of the message's fields ("" for the root). InvalidArgument naming the field on error.
Status YamlToMessage(const YAML::Node& node, google::protobuf::Message* message,
                     const std::string& path, std::set<std::string>* written);

}  // namespace retort::coordinator
