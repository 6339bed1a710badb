"""Config: the typed schema, composition, resolvers and validation of a run's settings.

Owns everything between the YAML files in ``conf/`` and a frozen, checked spec: the dataclasses of
:mod:`.schema` (each default stated once), registered in Hydra's ConfigStore (:mod:`.store`) so typos
and wrong types fail at compose time; composing outside an app, the resolvers the YAML uses and the
composed config turned into those dataclasses (:mod:`.compose`, ``to_spec``); and the checks that
run before any dataset is built (:mod:`.validation`, :mod:`.targets`).  It may import Hydra,
OmegaConf and ``result``, and no other loaderexp package; every later stage receives the typed spec
(:class:`~loaderexp.config.schema.Config`), never a DictConfig, and reads no setting by string.

Adding a DataLoader knob is a field of ``LoaderConfig``; a knob that only applies with other
settings adds a check to ``validation``.
"""

from loaderexp.config.compose import (
    RESOLVED_CONFIG,
    apply_python_path,
    compose,
    composed_spec,
    config_dir,
    config_from_file,
    config_hash,
    flatten,
    plain,
    resolve_auto_transform,
    spec_from_file,
    spec_params,
    to_spec,
)
from loaderexp.config.errors import ConfigError
from loaderexp.config.schema import META_KEYS, Config
from loaderexp.config.validation import check_targets, check_tracking, validate, without_inapplicable

__all__ = [
    "META_KEYS",
    "RESOLVED_CONFIG",
    "Config",
    "ConfigError",
    "apply_python_path",
    "check_targets",
    "check_tracking",
    "compose",
    "composed_spec",
    "config_dir",
    "config_from_file",
    "config_hash",
    "flatten",
    "plain",
    "resolve_auto_transform",
    "spec_from_file",
    "spec_params",
    "to_spec",
    "validate",
    "without_inapplicable",
]
