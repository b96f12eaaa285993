"""Source metric names onto canonical names: the guess, units, overrides and collisions."""

from __future__ import annotations

import pytest

from yieldgate.aliases import Target, guess
from yieldgate.errors import InputError
from yieldgate.ingest.mapping import parse_map_options, resolve_mapping


@pytest.mark.parametrize(
    ("name", "kind", "key", "scale"),
    [
        ("loss", "core", "loss", 1.0),
        ("train/loss", "core", "loss", 1.0),
        ("train_loss", "core", "loss", 1.0),
        ("learning_rate", "core", "lr", 1.0),
        ("lr-AdamW", "core", "lr", 1.0),
        ("train/grad_norm", "core", "grad_norm", 1.0),
        ("num_input_tokens_seen", "core", "tokens", 1.0),
        ("train_tokens_per_second", "core", "tokens_per_s", 1.0),
        ("_runtime", "core", "wall_s", 1.0),
        ("wall_ms", "core", "wall_s", 1e-3),
        ("train_time_ms", "core", "wall_s", 1e-3),
        ("time_h", "core", "wall_s", 3600.0),
        ("step_ms", "core", "step_s", 1e-3),
        ("energy_j", "core", "energy_j", 1.0),
        ("eval_loss", "eval", "val/loss", 1.0),
        ("val_loss", "eval", "val/loss", 1.0),
        ("validation/loss", "eval", "val/loss", 1.0),
        ("val/code/loss", "eval", "val/code/loss", 1.0),
        ("eval_accuracy", "eval", "val/acc", 1.0),
        ("lambada_openai/acc", "eval", "lambada_openai/acc", 1.0),
        ("gsm8k/exact_match,strict-match", "eval", "gsm8k/exact_match,strict-match", 1.0),
        ("signals/gns", "extra", "signals/gns", 1.0),
        ("imported/epoch", "extra", "imported/epoch", 1.0),
        ("epoch", "extra", "imported/epoch", 1.0),
        ("eval_runtime", "extra", "imported/eval_runtime", 1.0),
        ("train/perplexity", "extra", "imported/train/perplexity", 1.0),
        ("//odd//name", "extra", "imported/odd/name", 1.0),
        # GPT-NeoX's and Megatron's names, Megatron-DeepSpeed's sections
        ("train/lm_loss", "core", "loss", 1.0),
        ("validation/lm_loss", "eval", "val/loss", 1.0),
        ("validation/lm_loss_ppl", "eval", "val/ppl", 1.0),
        ("lm loss", "core", "loss", 1.0),
        ("grad-norm/grad-norm", "core", "grad_norm", 1.0),
        ("lm-loss-training/lm loss", "core", "loss", 1.0),
        ("loss-scale", "extra", "signals/loss_scale", 1.0),
        ("lm-loss-validation/lm loss validation", "eval", "val/loss", 1.0),
        ("iteration-time/samples per second", "extra", "imported/iteration-time/samples per second", 1.0),
        # OLMo's and Composer's names, in their W&B runs and their console blocks alike
        ("train/CrossEntropyLoss", "core", "loss", 1.0),
        ("optim/total_grad_norm", "core", "grad_norm", 1.0),
        ("optim/learning_rate_group0", "core", "lr", 1.0),
        ("throughput/total_tokens", "core", "tokens", 1.0),
        ("eval/c4_en-validation/CrossEntropyLoss", "eval", "val/c4_en_validation/loss", 1.0),
        ("eval/c4_en-validation/Perplexity", "eval", "val/c4_en_validation/ppl", 1.0),
        ("Train loss/train/total", "core", "loss", 1.0),
        ("Train time/token", "core", "tokens", 1.0),
        ("lr-DecoupledAdamW/group0", "core", "lr", 1.0),
        ("metrics/eval/LanguageCrossEntropy", "eval", "val/loss", 1.0),
        ("Eval metrics/eval/LanguageCrossEntropy", "eval", "val/loss", 1.0),
        ("tok/s", "core", "tokens_per_s", 1.0),
        # PyTorch's TensorBoard tutorial (the split after the metric), test splits, NeMo's and Lightning's names
        ("Loss/train", "core", "loss", 1.0),
        ("Loss/test", "eval", "test/loss", 1.0),
        ("Accuracy/val", "eval", "val/acc", 1.0),
        ("perplexity/valid", "eval", "val/ppl", 1.0),
        ("accuracy/train", "extra", "imported/accuracy/train", 1.0),
        ("test_loss", "eval", "test/loss", 1.0),
        ("test_runtime", "extra", "imported/test_runtime", 1.0),
        ("reduced_train_loss", "core", "loss", 1.0),
        ("train/loss_step", "core", "loss", 1.0),
        ("train_loss_epoch", "extra", "imported/train_loss_epoch", 1.0),
        # vision scores: timm's summary.csv, torchvision's and DeiT's logs, segmentation and image quality
        ("eval_top1", "eval", "val/top1", 1.0),
        ("val_acc1", "eval", "val/acc1", 1.0),
        ("eval_mIoU", "eval", "val/miou", 1.0),
        ("val_psnr", "eval", "val/psnr", 1.0),
    ],
)
def test_guess(name, kind, key, scale):
    assert guess(name) == Target(kind, key, scale)


def test_overrides_win_and_collisions_never_overwrite():
    mapping = resolve_mapping(["loss", "train_loss", "ce"], {"ce": "val/loss"})
    assert mapping == {
        "ce": Target("eval", "val/loss"),
        "loss": Target("core", "loss"),
        "train_loss": Target("extra", "imported/train_loss"),
    }
    assert resolve_mapping(["a"], {"a": "signals/gns"})["a"] == Target("extra", "signals/gns")
    assert resolve_mapping(["ms"], {"ms": "wall_ms"})["ms"] == Target("core", "wall_s", 1e-3)


def test_map_options_are_checked():
    assert parse_map_options(["val/loss=eval/ce", "step=iteration"]) == {"eval/ce": "val/loss", "iteration": "step"}
    with pytest.raises(InputError, match="expected KEY=SOURCE_NAME"):
        parse_map_options(["val/loss"])
    with pytest.raises(InputError, match="neither a core column"):
        parse_map_options(["lossy=x"])
    with pytest.raises(InputError, match="no metric 'x' in the source"):
        resolve_mapping(["a"], {"x": "loss"})
