"""The reference probe model: a small decoder-only transformer (GPT), built from a config in code.

Pre-norm blocks, learned positions, tied input/output embeddings, in the manner of nanoGPT. Small enough
that a million-token probe trains in well under a minute on two CPU cores.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["GPTConfig", "GPT"]


@dataclass(frozen=True, kw_only=True)
class GPTConfig:
    """Shape of the probe GPT."""

    vocab_size: int = 256
    """Vocabulary size (256: raw bytes)."""
    context: int = 64
    """Context length T in tokens."""
    layers: int = 2
    """Transformer blocks L."""
    width: int = 64
    """Model width d_model."""
    heads: int = 4
    """Attention heads H (head size Q = width / heads)."""
    dropout: float = 0.0
    """Dropout probability."""

    def __post_init__(self) -> None:
        for name in ("vocab_size", "context", "layers", "width", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"GPTConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.width % self.heads:
            raise ValueError(f"GPTConfig.width ({self.width}) must be divisible by heads ({self.heads})")


class _Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.width)
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width))
        self.dropout = cfg.dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape  # (batch, time, width)
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        # (b, t, c) -> (b, heads, t, head size)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=self.dropout if self.training else 0.0)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only transformer; `forward(idx, targets)` returns (logits, mean cross-entropy or None)."""

    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.width)
        self.pos = nn.Embedding(cfg.context, cfg.width)
        self.blocks = nn.ModuleList(_Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.width)
        self.head = nn.Linear(cfg.width, cfg.vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied embeddings
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def non_embedding_params(self) -> int:
        """N of 6N + 12·L·H·Q·T: every parameter but the position embedding. The token embedding is tied
        to the output projection, whose matmul runs for every token, so it counts (once), as in PaLM's N."""
        return sum(p.numel() for p in self.parameters()) - self.pos.weight.numel()

    def forward(
        self, idx: torch.Tensor, targets: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        b, t = idx.shape  # (batch, time) token ids
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))  # (batch, time, vocab)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(b * t, -1), targets.reshape(b * t))
