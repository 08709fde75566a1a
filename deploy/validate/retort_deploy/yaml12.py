"""YAML reading with the YAML 1.2 core schema, as Kubernetes manifests and job specs are written.

PyYAML's safe loader follows YAML 1.1: `yes`/`on` become booleans, `1e-3` stays a string,
`010` is octal and `2024-01-01` a date. This loader resolves plain scalars the YAML 1.2 way
(true/false, decimal/0o/0x integers, floats with an optional exponent, .inf/.nan, null) and
rejects duplicate mapping keys. Everything else is left as a string.
"""
import math
import re

import yaml

_BOOL = "tag:yaml.org,2002:bool"
_INT = "tag:yaml.org,2002:int"
_FLOAT = "tag:yaml.org,2002:float"
_TIMESTAMP = "tag:yaml.org,2002:timestamp"

_INT_RE = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT_RE = re.compile(
    r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
    r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
)
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


class Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 core-schema scalars and unique mapping keys."""


Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _INT, _FLOAT, _TIMESTAMP)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver(_BOOL, _BOOL_RE, list("tTfF"))
Loader.add_implicit_resolver(_INT, _INT_RE, list("-+0123456789"))
Loader.add_implicit_resolver(_FLOAT, _FLOAT_RE, list("-+0123456789."))


def _construct_bool(loader, node):
    return loader.construct_scalar(node).lower() == "true"


def _construct_int(loader, node):
    text = loader.construct_scalar(node)
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text, 10)


def _construct_float(loader, node):
    text = loader.construct_scalar(node).lower()
    if text.endswith(".nan"):
        return math.nan
    if text.endswith(".inf"):
        return -math.inf if text.startswith("-") else math.inf
    return float(text)


def _construct_mapping(loader, node):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: let PyYAML report it
            continue
        if duplicate:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping", node.start_mark, f"found duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_yaml_map(node)


Loader.add_constructor(_BOOL, _construct_bool)
Loader.add_constructor(_INT, _construct_int)
Loader.add_constructor(_FLOAT, _construct_float)
Loader.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


def load(text):
    """One YAML document as plain Python values. Raises yaml.YAMLError when malformed."""
    return yaml.load(text, Loader=Loader)


def load_all(text):
    """Every document of a multi-document YAML text. Raises yaml.YAMLError when malformed."""
    return list(yaml.load_all(text, Loader=Loader))
