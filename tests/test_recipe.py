from __future__ import annotations

from yieldgate.data.recipe import resolve
from yieldgate.manifest import Recipe


def test_near_dedup_removes_folio_chunks_of_modern_plays():
    recipe = Recipe.model_validate({
        "sources": [{"name": "shakespeare-modern"}, {"name": "shakespeare-folio"}],
        "dedup": {"kind": "near", "shingle": "word:3", "threshold": 0.145},
    })
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
