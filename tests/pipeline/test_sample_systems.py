"""The sample's own search systems (``python -m sample_systems``): what it hands DVC.

The whole run (servers, the temporary experiment, the identical check) is CI's
(`.ci/run`); here, the overrides are checked through DVC's own ``-S`` parser, and
the configurations against the sample's params and retriever rules.
"""

from __future__ import annotations

import shutil

import pytest
import yaml
from dvc.utils.hydra import apply_overrides
from repos import ROOT

from ragvet.errors import InputError
from ragvet.inputs.params import run_cache_blind_keys, validate_params
from ragvet.retrieval.specs.dense import dense_settings
from sample_systems.__main__ import SYSTEMS, hydra_value, overrides

SAMPLE = yaml.safe_load((ROOT / "params.yaml").read_text())
SYSTEMS_YAML = yaml.safe_load(SYSTEMS.read_text())


def test_dvc_reads_the_overrides_back_as_the_systems_file_has_them(tmp_path):
    """`dvc exp run -S` applies these to params.yaml: every retriever and configuration
    arrives exactly (placeholders, dots, colons and all), and nothing else moves."""
    params = tmp_path / "params.yaml"
    shutil.copy(ROOT / "params.yaml", params)
    apply_overrides(params, overrides(SYSTEMS_YAML))
    applied = yaml.safe_load(params.read_text())
    for section in ("retrievers", "configs"):
        assert applied[section] == {**SAMPLE[section], **SYSTEMS_YAML[section]}
    assert applied["retrievers"]["lines-endpoint"]["url"] == "http://127.0.0.1:9250/sample/_search?size={k}"
    assert {key: value for key, value in applied.items() if key not in ("retrievers", "configs")} == {
        key: value for key, value in SAMPLE.items() if key not in ("retrievers", "configs")
    }
    apply_overrides(params, overrides(SYSTEMS_YAML))  # `++` replaces what is already there
    assert yaml.safe_load(params.read_text()) == applied


def test_the_systems_are_valid_configurations_of_the_sample():
    merged = {**SAMPLE, **{s: {**SAMPLE[s], **SYSTEMS_YAML[s]} for s in ("retrievers", "configs")}}
    assert validate_params(merged, "params.yaml") == []
    assert run_cache_blind_keys(merged["retrievers"]) == []
    for config, other in SYSTEMS_YAML["identical"].items():
        assert merged["configs"][config]["chunking"] == merged["configs"][other]["chunking"]
    # the same vectors: pgvector embeds with exactly the encoder settings of the dense retriever it must equal
    pgvector, minilm = (dense_settings(merged["retrievers"][name]) for name in ("minilm-pgvector", "minilm"))
    encoder = ("model", "query_prefix", "passage_prefix", "batch_size")
    assert {key: pgvector[key] for key in encoder} == {key: minilm[key] for key in encoder}
    assert pgvector["index"] == "exact" and minilm["index"] == "flat"


def test_values_are_quoted_for_the_override_grammar():
    assert hydra_value({"a": [1, 2.5, True, None], "b": "{k}?x:y"}) == "{a: [1, 2.5, true, null], b: '{k}?x:y'}"
    for bad in ("it's", "a\\b", "${oops}"):
        with pytest.raises(InputError, match="holds a quote, a backslash"):
            hydra_value(bad)
