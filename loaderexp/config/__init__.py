"""Config: the typed schema, composition, resolvers and validation of a run's settings.

Owns everything between the YAML files in ``conf/`` and a plain, checked dict: the dataclasses
registered in Hydra's ConfigStore (:mod:`.schema`, so typos and wrong types fail at compose
time), composing outside an app and the resolvers the YAML uses (:mod:`.compose`), and the
cross-field checks that run before any dataset is built (:mod:`.validation`).  It may import
Hydra and OmegaConf, and no other loaderexp package: every later stage receives plain values
(``to_plain``), never a DictConfig.

Adding a DataLoader knob touches the schema (``LoaderConfig``), ``conf/loader/default.yaml``,
``validation._check_loader`` when it only applies with other settings, and
``data.build.build_loader``.
"""

from loaderexp.config.compose import (
    apply_python_path,
    compose,
    config_dir,
    config_hash,
    flatten,
    resolve_auto_transform,
    run_params,
    to_plain,
)
from loaderexp.config.schema import META_KEYS
from loaderexp.config.validation import ConfigError, check_targets, validate, without_inapplicable

__all__ = [
    "META_KEYS",
    "ConfigError",
    "apply_python_path",
    "compose",
    "config_dir",
    "config_hash",
    "flatten",
    "resolve_auto_transform",
    "run_params",
    "to_plain",
    "check_targets",
    "validate",
    "without_inapplicable",
]
