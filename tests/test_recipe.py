from __future__ import annotations

import numpy as np
import pytest

from yieldgate.data.recipe import resolve
from yieldgate.manifest import Recipe


@pytest.mark.slow
def test_near_dedup_removes_folio_chunks_of_modern_plays():
    recipe = Recipe.model_validate(
        {
            "sources": [{"name": "shakespeare-modern"}, {"name": "shakespeare-folio"}],
            "dedup": {"kind": "near", "shingle": "word:3", "threshold": 0.145},
        }
    )
    # The first 300,000 training characters of each source: the same few plays in both editions.
    data = resolve(recipe, max_chars_per_source=300_000, stdlib_bytes=0)
    folio, modern = data.sources["shakespeare-folio"].stats, data.sources["shakespeare-modern"].stats
    folio_docs = folio["train_docs"] + folio["dedup_removed_docs"]
    assert folio["dedup_removed_docs"] >= 0.6 * folio_docs  # most Folio chunks overlap a modern one
    assert modern["dedup_removed_docs"] <= 0.05 * (modern["train_docs"] + modern["dedup_removed_docs"])
    recorded = data.stats["dedup"]
    assert recorded["kind"] == "near" and recorded["bands"] * recorded["rows"] == 128
    assert recorded["docs_in"] - recorded["docs_out"] == folio["dedup_removed_docs"] + modern["dedup_removed_docs"]
    assert data.recipe.dedup.bands == recorded["bands"]  # the manifest carries the policy as applied
    assert data.recipe.sources[1].accepted_tokens > data.recipe.sources[1].unique_tokens


@pytest.mark.slow
def test_a_shuffled_share_damages_training_documents_and_leaves_held_out_text_alone():
    def resolved(share):
        recipe = Recipe.model_validate(
            {
                "sources": [{"name": "milton", "shuffled_share": share}],
                "tokenizer": {"name": "bpe-512", "vocab_size": 512},
            }
        )
        return resolve(recipe, max_chars_per_source=200_000, stdlib_bytes=0).sources["milton"]

    clean, damaged = resolved(0.0), resolved(0.5)
    assert damaged.stats["shuffled_docs"] == round(0.5 * clean.stats["train_docs"]) > 0
    assert len(damaged.train) == len(clean.train) and not np.array_equal(damaged.train, clean.train)
    assert np.array_equal(np.sort(damaged.train), np.sort(clean.train))  # the same tokens, reordered
    # Half the documents keep their order: about half the token positions still match.
    assert 0.3 < float(np.mean(damaged.train == clean.train)) < 0.8
    assert all(np.array_equal(a, b) for a, b in zip(damaged.held_out, clean.held_out, strict=True))
