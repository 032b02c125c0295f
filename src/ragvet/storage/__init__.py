"""Files between stages: atomic deterministic writes, the intermediate tables and their numpy columns."""
