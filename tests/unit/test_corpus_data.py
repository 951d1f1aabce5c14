"""The real-line corpus's records (models/corpus/): each source sits in the split its origin's hash
names, every record has the documented fields and a taxonomy category, and the corpus keeps the
size and breadth it is scored on."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from faultline.classify import corpus

REQUIRED = ("source", "excerpt", "kind", "text", "category", "xid", "sxid", "context", "error_looking", "note")
KINDS = {"kernel", "job", "slurmctld"}


@pytest.fixture(scope="module")
def records() -> dict[str, list[dict]]:
    return {split: corpus.load(split) for split in corpus.SPLITS}


def test_every_source_sits_in_the_split_its_origin_hash_names(records):
    misplaced = sorted(
        {(split, r["source"]) for split, recs in records.items() for r in recs if corpus.split_of(r["source"]) != split}
    )
    assert misplaced == []


def test_split_of_reserves_about_one_origin_in_five(records):
    origins = {corpus.origin(r["source"]) for recs in records.values() for r in recs}
    reserved = {corpus.origin(r["source"]) for r in records["reserved"]}
    assert 0.12 < len(reserved) / len(origins) < 0.28


def test_records_have_the_documented_fields_and_vocabulary(records):
    tax = yaml.safe_load(resources.files("faultline.models").joinpath("taxonomy.yaml").read_bytes())
    categories = set(tax["categories"])
    bad = []
    for split, recs in records.items():
        for i, r in enumerate(recs, 1):
            missing = [k for k in REQUIRED if k not in r]
            if missing or r["category"] not in categories or r["kind"] not in KINDS or not r["text"].strip():
                bad.append((split, i, missing, r.get("category"), r.get("kind")))
            elif r["error_looking"] and r["category"] != "benign":
                bad.append((split, i, "error_looking on a failure line"))
    assert bad == []


def test_corpus_size_and_breadth(records):
    dev = records["dev"]
    assert len(dev) + len(records["reserved"]) >= 1500
    assert len({r["source"] for r in dev}) >= 40
    assert sum(1 for r in dev if r["category"] == "benign" and r["error_looking"]) >= 300
