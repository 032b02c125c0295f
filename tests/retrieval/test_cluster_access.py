"""Which Ray cluster engine: ray may use: refusals name the fix and never the address."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ragvet.errors import InputError
from ragvet.retrieval.cluster_access import address_host, cluster_address, is_loopback
from ragvet.retrieval.specs.dense import dense_problems

REMOTE = "ray://ops-secret-head.internal.example:10001"


def test_hosts_of_every_address_form():
    assert address_host("127.0.0.1:6379") == "127.0.0.1"
    assert address_host("ray://head.example:10001") == "head.example"
    assert address_host("[::1]:6379") == "::1"
    assert address_host("ray://user:pw@10.0.0.5:10001") == "10.0.0.5"
    assert address_host("auto") == "auto"
    assert [is_loopback(h) for h in ("127.0.0.9", "::1", "localhost", "auto", "10.0.0.5", "head.example")] == [
        True, True, True, True, False, False,
    ]  # fmt: skip


def test_a_remote_cluster_without_token_authentication_is_refused_without_naming_it():
    with pytest.raises(InputError) as err:
        cluster_address({"RAY_ADDRESS": REMOTE}, trusted=False)
    text = str(err.value) + repr(err.value.problems)
    assert "RAY_AUTH_MODE=token" in text and "trusted_cluster: true" in text
    assert "ops-secret-head" not in text and "10001" not in text


def test_token_authentication_or_a_trusted_network_or_loopback_is_accepted():
    assert cluster_address({"RAY_ADDRESS": REMOTE, "RAY_AUTH_MODE": "token"}, trusted=False) == REMOTE
    assert cluster_address({"RAY_ADDRESS": REMOTE}, trusted=True) == REMOTE
    assert cluster_address({"RAY_ADDRESS": "127.0.0.1:6379"}, trusted=False) == "127.0.0.1:6379"


def test_no_address_is_an_input_error_with_the_fix():
    with pytest.raises(InputError, match="RAY_ADDRESS is not set"):
        cluster_address({}, trusted=False)


def test_engine_keys_are_checked_together():
    spec = {
        "kind": "dense", "engine": "spark", "shard_rows": 0, "ray_num_gpus": -1, "vectors": "s3://k:s@b/v",
        "trusted_cluster": "yes",
    }  # fmt: skip
    assert [p.what for p in dense_problems(spec, "params.yaml")] == ["unknown engine 'spark'"]
    spec["engine"] = "ray"
    assert [p.what for p in dense_problems(spec, "params.yaml")] == [
        "shard_rows must be a positive integer, got 0",
        "ray_num_gpus must be a number >= 0, got -1",
        "vectors must not carry credentials",
        "trusted_cluster must be true or false",
    ]


def test_the_retrieve_stage_refuses_an_unauthenticated_remote_cluster_with_exit_2_and_no_address(tmp_path):
    """Through the stage command, as DVC runs it: the fix, no traceback, no run written, no address."""
    root = Path(__file__).resolve().parents[2]
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["retrievers"]["minilm"]["engine"] = "ray"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    chunks, cases = root / "data/chunks/sentences-600.jsonl", root / "data/validated/cases.jsonl"
    if not chunks.is_file() or not cases.is_file():
        pytest.skip("needs the sample's DVC outputs (dvc checkout)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["RAY_ADDRESS"] = "ray://ops-secret-head.internal.example:10001"
    result = subprocess.run(
        [str(Path(sys.executable).parent / "ragvet"), "retrieve", "sentences-600-dense", "--chunks", str(chunks),
         "--cases", str(cases), "--out", "run.parquet", "--params", "params.yaml"],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert "RAY_AUTH_MODE=token" in result.stderr and "Traceback" not in result.stderr
    assert "ops-secret-head" not in result.stdout + result.stderr and "10001" not in result.stdout + result.stderr
    assert not (tmp_path / "run.parquet").exists()
