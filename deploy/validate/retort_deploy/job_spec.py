"""Checks of a job spec (YAML, retort.v1.JobSpec with snake_case field names) against the
message definitions in proto/retort/v1/retort.proto: unknown fields, wrong scalar types, and
the rules the coordinator enforces that a manifest author can get wrong."""
import json
import math
import re

# Proto scalar type -> the kind of YAML value it takes.
_SCALARS = {
    "string": "string",
    "bool": "boolean",
    "double": "number",
    "float": "number",
    "int32": "integer",
    "int64": "integer",
    "uint32": "integer",
    "uint64": "integer",
}


def parse_proto_messages(proto_path):
    """{message: {field: (type, repeated)}} of the non-nested `message Name { ... }` blocks."""
    with open(proto_path, encoding="utf-8") as f:
        text = re.sub(r"//.*$", "", f.read(), flags=re.M)
    messages = {}
    for match in re.finditer(r"\bmessage\s+(\w+)\s*\{([^{}]*)\}", text):
        fields = {}
        for f in re.finditer(r"(repeated\s+)?([\w.]+)\s+(\w+)\s*=\s*\d+\s*;", match.group(2)):
            fields[f.group(3)] = (f.group(2), bool(f.group(1)))
        messages[match.group(1)] = fields
    return messages


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_scalar(value, kind):
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "number":
        return _is_number(value)
    return _is_number(value) and math.isfinite(value) and float(value).is_integer()


def _check_message(value, message, messages, where, errors):
    fields = messages.get(message)
    if fields is None:
        errors.append(f"{where}: message {message} not found in the proto")
        return
    if not isinstance(value, dict):
        errors.append(f"{where or 'job'}: expected a mapping ({message})")
        return
    for key, v in value.items():
        at = f"{where}.{key}" if where else str(key)
        if key not in fields:
            errors.append(f"{at}: unknown field (not in retort.v1.{message})")
            continue
        field_type, repeated = fields[key]
        if repeated and not isinstance(v, list):
            errors.append(f"{at}: expected a list")
        values = (v if isinstance(v, list) else [None]) if repeated else [v]
        for item in values:
            if item is None:
                continue
            kind = _SCALARS.get(field_type)
            if kind is None:
                _check_message(item, field_type, messages, at, errors)
            elif not _is_scalar(item, kind):
                errors.append(f"{at}: expected {field_type}, got {json.dumps(item, default=str)}")


def _positive(value):
    return _is_number(value) and value > 0


def check_job_spec(spec, messages):
    """Error messages for a parsed job spec (empty when it is valid)."""
    errors = []
    _check_message(spec, "JobSpec", messages, "", errors)
    if errors:
        return errors
    if not spec.get("name"):
        errors.append("name: required")
    if _positive(spec.get("steps")) == _positive(spec.get("epochs")):
        errors.append("exactly one of steps or epochs must be positive")
    if not _positive(spec.get("global_batch")):
        errors.append("global_batch: must be positive")
    for role, sources in (("teacher", ("preset", "torchscript_path", "exported_path")),
                          ("student", ("preset", "torchscript_path"))):
        model = spec.get(role) or {}
        if role == "student" and model.get("exported_path"):
            errors.append("student.exported_path: an exported package is forward-only and "
                          "cannot be trained")
        elif sum(bool(model.get(k)) for k in sources) != 1:
            errors.append(f"{role}: set exactly one of {', '.join(sources[:-1])} or {sources[-1]}")
    kinds = ["fashion-mnist", "image-folder", "synthetic"]
    if (spec.get("dataset") or {}).get("kind") not in kinds:
        errors.append(f"dataset.kind: must be one of {', '.join(kinds)}")
    if spec.get("precision") is not None and spec["precision"] not in ("float32", "bfloat16"):
        errors.append("precision: must be float32 or bfloat16")
    elastic = spec.get("elastic") or {}
    low, high = elastic.get("min_workers"), elastic.get("max_workers")
    if not (_is_number(low) and low >= 1 and _is_number(high) and high >= low):
        errors.append("elastic: need 1 <= min_workers <= max_workers")
    if not (spec.get("checkpoint") or {}).get("dir"):
        errors.append("checkpoint.dir: required (on storage shared by all pods)")
    return errors
