"""Registry of the real public training logs (provenance in tests/data/real/SOURCES.md).

Plain data: one entry per file or TensorBoard run directory (the earlier pythia checkpoints differ only in their
values, so `_pythia_5shot` writes the rest once). ``kind`` is the yieldgate import
kind, ``format`` a descriptive name of the source format, ``parser`` the independent parser in
tests/test_real_sources.py, ``params`` what that parser needs (which tags or columns to
summarise, where warm-up ends, where a spike sits), ``facts`` what a correct reading of the raw
file yields. Series facts are ``count`` and ``[step, value]`` pairs for ``first``, ``last``,
``min``, ``max``, ``max_after`` (largest value past ``params["after_step"]``) and
``max_in_window`` (largest value in ``params["spike_window"]``).

``REAL_LOGS`` are committed under tests/data/real: each is a text file the search index stores
and was verified against (see SOURCES.md). ``SHARED_LOGS`` have the same shape but are not
committed (binary TensorBoard event files, or text files the index does not hold, all taken
from repository snapshots): their paths are relative to the steering repository's
``shared/real`` folder, and the checks skip them where that folder or file is absent.
"""

from typing import Any

_PYTHIA_METRICS = [
    ["lambada_openai", "acc"],
    ["lambada_openai", "ppl"],
    ["arc_easy", "acc"],
    ["arc_easy", "acc_norm"],
    ["piqa", "acc"],
    ["winogrande", "acc"],
]


def _pythia_5shot(step: int, values: dict[str, float]) -> dict:
    """An earlier checkpoint of the 5-shot pythia-v1.1-160m set: the same 65 tasks and checked metrics as step143000,
    with the file's own values."""
    return {
        "path": f"lmeval-v03-pythia-160m-5shot-step{step}.json",
        "kind": "lm-eval",
        "format": "lm-eval-v0.3",
        "parser": "lm-eval",
        "note": f"lm-evaluation-harness v0.3 results of EleutherAI pythia-v1.1-160m at revision step{step}, 5-shot, "
        "the same 65 tasks as step143000: with it and the other checkpoints (3000, 13000, 33000, 143000) a "
        "many-checkpoint set, 2,097,152 tokens a step (Pythia: 1024 x 2048), for capability yield per B "
        "tokens.",
        "params": {"metrics": _PYTHIA_METRICS},
        "facts": {"tasks": 65, "versions": 65, "has_groups": False, "values": values},
    }


REAL_LOGS: list[dict[str, Any]] = [
    {
        "path": "hf-whisper-large-v2-ja-trainer_state.json",
        "kind": "hf-trainer",
        "format": "hf-trainer-state",
        "parser": "hf-trainer-state",
        "note": "Whisper large-v2 fine-tuned on Common Voice 11 Japanese for 5000 steps: training loss "
        "falls to 1e-4 while eval_loss rises at every eval (0.321 at 1000 -> 0.420 at 5000): "
        "overfitting from step 1000; eval_wer is a fraction (0.74).",
        "params": {"eval_keys": ["eval_loss", "eval_wer"], "after_step": 500},
        "facts": {
            "global_step": 5000,
            "history_rows": 206,
            "stepless_rows": 0,
            "summary_rows": 1,
            "train": {
                "count": 200,
                "first": [25, 0.3048],
                "last": [5000, 0.0002],
                "min": [4325, 0.0001],
                "max": [25, 0.3048],
                "max_after": [525, 0.0652],
            },
            "eval_rows": 5,
            "eval_loss": {
                "count": 5,
                "first": [1000, 0.320997953414917],
                "last": [5000, 0.4200145900249481],
                "min": [1000, 0.320997953414917],
                "max": [5000, 0.4200145900249481],
            },
            "eval_wer": {
                "count": 5,
                "first": [1000, 0.78878255063432],
                "last": [5000, 0.7449365679946583],
                "min": [3000, 0.7431560204762965],
                "max": [1000, 0.78878255063432],
            },
        },
    },
    {
        "path": "hf-whisper-tiny-nb-trainer_state.json",
        "kind": "hf-trainer",
        "format": "hf-trainer-state",
        "parser": "hf-trainer-state",
        "note": "Whisper tiny fine-tuned on Norwegian (NbAiLab) for 100k steps at a constant LR of 3e-6 "
        "after a 1000-step warm-up: a slow plateau (eval_loss 0.571 at 41k, 0.513 at 100k); "
        "eval_wer is a percentage (24.97).",
        "params": {"eval_keys": ["eval_loss", "eval_wer"], "after_step": 1000},
        "facts": {
            "global_step": 100000,
            "history_rows": 2101,
            "stepless_rows": 0,
            "summary_rows": 1,
            "train": {
                "count": 2000,
                "first": [50, 2.936],
                "last": [100000, 0.8333],
                "min": [99400, 0.8176],
                "max": [50, 2.936],
                "max_after": [1050, 1.8776],
            },
            "eval_rows": 100,
            "eval_loss": {
                "count": 100,
                "first": [1000, 1.1868911981582642],
                "last": [100000, 0.512780487537384],
                "min": [98000, 0.5099794864654541],
                "max": [1000, 1.1868911981582642],
            },
            "eval_wer": {
                "count": 100,
                "first": [1000, 61.96711327649208],
                "last": [100000, 24.96954933008526],
                "min": [98000, 24.878197320341048],
                "max": [1000, 61.96711327649208],
            },
        },
    },
    {
        "path": "hf-whisper-small-hi-trainer_state.json",
        "kind": "hf-trainer",
        "format": "hf-trainer-state",
        "parser": "hf-trainer-state",
        "note": "Whisper small fine-tuned on Common Voice Hindi for 5000 steps (12.2 epochs): training loss "
        "falls to 2e-4 while eval_loss rises at every eval (0.307 at 1000 -> 0.468 at 5000): "
        "overfitting from step 1000; eval_wer is a percentage (best 32.01 at 4000).",
        "params": {"eval_keys": ["eval_loss", "eval_wer"], "after_step": 500},
        "facts": {
            "global_step": 5000,
            "history_rows": 206,
            "stepless_rows": 0,
            "summary_rows": 1,
            "train": {
                "count": 200,
                "first": [25, 0.8917],
                "last": [5000, 0.0002],
                "min": [4850, 0.0001],
                "max": [25, 0.8917],
                "max_after": [525, 0.1946],
            },
            "eval_rows": 5,
            "eval_loss": {
                "count": 5,
                "first": [1000, 0.30747494101524353],
                "last": [5000, 0.4679179787635803],
                "min": [1000, 0.30747494101524353],
                "max": [5000, 0.4679179787635803],
            },
            "eval_wer": {
                "count": 5,
                "first": [1000, 34.63133835604842],
                "last": [5000, 32.09599593667993],
                "min": [4000, 32.011343435198505],
                "max": [1000, 34.63133835604842],
            },
        },
    },
    {
        "path": "hf-bert-taami-checkpoint-5000-trainer_state.json",
        "kind": "hf-trainer",
        "format": "hf-trainer-state",
        "parser": "hf-trainer-state",
        "note": "BERT token classification (27 Hebrew cantillation labels) fine-tuned 5 epochs, checkpoint at "
        "step 5000 of 5260: eval every 50 steps, training loss only every 500; eval_loss is best at "
        "step 2000 (1.095) and rises epoch by epoch to 1.46 while the training loss falls 0.94 -> "
        "0.21 and eval_accuracy keeps improving: overfitting from step 2000; no summary row.",
        "params": {"eval_keys": ["eval_loss", "eval_accuracy"], "after_step": 500},
        "facts": {
            "global_step": 5000,
            "history_rows": 110,
            "stepless_rows": 0,
            "summary_rows": 0,
            "train": {
                "count": 10,
                "first": [500, 1.4586],
                "last": [5000, 0.2085],
                "min": [5000, 0.2085],
                "max": [500, 1.4586],
                "max_after": [1000, 1.2591],
            },
            "eval_rows": 100,
            "eval_loss": {
                "count": 100,
                "first": [50, 1.5866029262542725],
                "last": [5000, 1.4625375270843506],
                "min": [2000, 1.0950350761413574],
                "max": [50, 1.5866029262542725],
            },
            "eval_accuracy": {
                "count": 100,
                "first": [50, 0.49329439757733073],
                "last": [5000, 0.6893791910015141],
                "min": [50, 0.49329439757733073],
                "max": [4700, 0.690893359290504],
            },
        },
    },
    {
        "path": "trl-grpo-chaos-economy-trainer_state.json",
        "kind": "hf-trainer",
        "format": "hf-trainer-state",
        "parser": "hf-trainer-state",
        "note": "TRL GRPOTrainer state of a 200-step GRPO fine-tune (logging every 5 steps, 5 reward functions): its "
        "'loss' is the GRPO objective, negative at 18 of 40 logged steps, beside 'kl', 'reward' and "
        "'rewards/<function>/mean'; not a cross-entropy, so no bits per byte and no learning per token.",
        "params": {"objective_keys": ["kl", "reward", "rewards/pnl_reward_fn/mean"]},
        "facts": {
            "global_step": 200,
            "history_rows": 40,
            "stepless_rows": 0,
            "summary_rows": 0,
            "train": {
                "count": 40,
                "first": [5, -0.007858997583389283],
                "last": [200, 4.723668098449707e-05],
                "min": [40, -0.2165149211883545],
                "max": [65, 0.04334478974342346],
            },
            "eval_rows": 0,
            "negative_losses": 18,
            "objective_keys": ["kl", "reward", "rewards/pnl_reward_fn/mean"],
        },
    },
    {
        "path": "hf-t5-summarization-trainer_state.json",
        "kind": "hf-trainer",
        "format": "hf-trainer-state",
        "parser": "hf-trainer-state",
        "note": "t5-small summarisation fine-tune, 3 epochs, 215337 steps; same run as "
        "hf-t5-summarization-tb; no eval rows in log_history (the eval is only in the TensorBoard "
        ".1 file).",
        "params": {"eval_keys": [], "after_step": 1000},
        "facts": {
            "global_step": 215337,
            "history_rows": 431,
            "stepless_rows": 0,
            "summary_rows": 1,
            "train": {
                "count": 430,
                "first": [500, 1.9963],
                "last": [215000, 1.7423],
                "min": [181000, 1.734],
                "max": [500, 1.9963],
                "max_after": [4500, 1.9169],
            },
            "eval_rows": 0,
        },
    },
    {
        "path": "lightning-slm-metrics.csv",
        "kind": "table",
        "format": "lightning-csvlogger",
        "parser": "csv-table",
        "note": "PyTorch Lightning CSVLogger metrics.csv of a 12-layer/768 small LM (GPT-2 vocab), 10 "
        "epochs: train_loss_step every 50 steps, val_loss and epoch aggregates on separate rows "
        "with empty cells elsewhere.",
        "params": {
            "step_column": "step",
            "columns": ["train_loss_step", "val_loss", "train_loss_epoch", "epoch_time"],
            "after_step": 1000,
        },
        "facts": {
            "rows": 2834,
            "columns": 11,
            "series": {
                "train_loss_step": {
                    "count": 2814,
                    "first": [49, 7.628580570220947],
                    "last": [140699, 3.565943479537964],
                    "min": [139099, 3.428741931915283],
                    "max": [49, 7.628580570220947],
                    "max_after": [1199, 5.651123046875],
                },
                "val_loss": {
                    "count": 10,
                    "first": [14073, 4.132571697235107],
                    "last": [140739, 3.570486068725586],
                    "min": [140739, 3.570486068725586],
                    "max": [14073, 4.132571697235107],
                    "max_after": [14073, 4.132571697235107],
                },
                "train_loss_epoch": {
                    "count": 10,
                    "first": [14073, 4.776971817016602],
                    "last": [140739, 3.687237024307251],
                    "min": [140739, 3.687237024307251],
                    "max": [14073, 4.776971817016602],
                    "max_after": [14073, 4.776971817016602],
                },
                "epoch_time": {
                    "count": 10,
                    "first": [14073, 2517.10107421875],
                    "last": [140739, 2419.625244140625],
                    "min": [28147, 2414.659423828125],
                    "max": [14073, 2517.10107421875],
                    "max_after": [14073, 2517.10107421875],
                },
            },
        },
    },
    {
        "path": "keras-csvlogger-amazon-reviews-training_log.csv",
        "kind": "table",
        "format": "keras-csvlogger",
        "parser": "csv-table",
        "note": "Keras CSVLogger of a positive/negative text classifier on scraped Amazon reviews, 6 epochs, one "
        "row per epoch and no step column: val_loss is best after the first epoch (0.340) and rises to "
        "0.485 while the training loss falls 0.211 -> 0.096 and val_accuracy slips 0.858 -> 0.844: "
        "overfitting from epoch 0.",
        "params": {"step_column": "epoch", "columns": ["loss", "val_loss", "val_accuracy"]},
        "facts": {
            "rows": 6,
            "columns": 5,
            "series": {
                "loss": {
                    "count": 6,
                    "first": [0, 0.21096207201480865],
                    "last": [5, 0.09570132195949554],
                    "min": [5, 0.09570132195949554],
                    "max": [0, 0.21096207201480865],
                },
                "val_loss": {
                    "count": 6,
                    "first": [0, 0.33970698714256287],
                    "last": [5, 0.48545894026756287],
                    "min": [0, 0.33970698714256287],
                    "max": [5, 0.48545894026756287],
                },
                "val_accuracy": {
                    "count": 6,
                    "first": [0, 0.8583999872207642],
                    "last": [5, 0.8442000150680542],
                    "min": [5, 0.8442000150680542],
                    "max": [0, 0.8583999872207642],
                },
            },
        },
    },
    {
        "path": "yolo11-seg-gallstone-results.csv",
        "kind": "table",
        "format": "ultralytics-results-csv",
        "parser": "csv-table",
        "note": "Ultralytics YOLO11 segmentation fine-tune (gallstones), 10 epochs, one row per epoch and no step "
        "column: training loss only as its four terms (train/box_loss ...), the validation set's scores under metrics/ "
        "(mAP50(B) 0.231 -> 0.946, mAP50-95(B) 0.139 -> 0.703: higher is better), val/*_loss terms, lr per "
        "parameter group; the first epochs trade precision for recall (precision(B) 0.742 -> 0.672 at epoch 3 "
        "while recall(B) climbs 0.136 -> 0.705). CRLF line ends.",
        "params": {
            "step_column": "epoch",
            "columns": ["metrics/mAP50-95(B)", "metrics/precision(B)", "val/box_loss", "train/box_loss", "time"],
        },
        "facts": {
            "rows": 10,
            "columns": 21,
            "series": {
                "metrics/mAP50-95(B)": {
                    "count": 10,
                    "first": [1, 0.13895],
                    "last": [10, 0.703],
                    "min": [1, 0.13895],
                    "max": [10, 0.703],
                },
                "metrics/precision(B)": {
                    "count": 10,
                    "first": [1, 0.74238],
                    "last": [10, 0.91387],
                    "min": [3, 0.6723],
                    "max": [7, 0.93619],
                },
                "val/box_loss": {
                    "count": 10,
                    "first": [1, 1.2426],
                    "last": [10, 0.93292],
                    "min": [10, 0.93292],
                    "max": [2, 1.3116],
                },
                "train/box_loss": {
                    "count": 10,
                    "first": [1, 1.49295],
                    "last": [10, 0.98836],
                    "min": [10, 0.98836],
                    "max": [1, 1.49295],
                },
                "time": {
                    "count": 10,
                    "first": [1, 597.18],
                    "last": [10, 6229.92],
                    "min": [1, 597.18],
                    "max": [10, 6229.92],
                },
            },
        },
    },
    {
        "path": "wandb-nanogpt-char-token-train-loss-export.csv",
        "kind": "wandb",
        "format": "wandb-chart-csv",
        "parser": "csv-table",
        "note": "W&B chart export (Step, '<run> - train/loss', __MIN, __MAX) of 8 nanoGPT runs with "
        "different lengths; shorter runs have empty cells, one run has a gap (166 values over "
        "steps 0..166).",
        "params": {
            "step_column": "Step",
            "columns": [
                "gpt2 - train/loss",
                "gpt2 - train/loss__MIN",
                "gpt2_last_char_token_to_char1729587337.8266432 - train/loss",
            ],
        },
        "facts": {
            "rows": 386,
            "columns": 25,
            "series": {
                "gpt2 - train/loss": {
                    "count": 386,
                    "first": [0, 10.95404052734375],
                    "last": [385, 3.2849113941192627],
                    "min": [347, 3.2631642818450928],
                    "max": [0, 10.95404052734375],
                },
                "gpt2 - train/loss__MIN": {
                    "count": 386,
                    "first": [0, 10.95404052734375],
                    "last": [385, 3.2849113941192627],
                    "min": [347, 3.2631642818450928],
                    "max": [0, 10.95404052734375],
                },
                "gpt2_last_char_token_to_char1729587337.8266432 - train/loss": {
                    "count": 166,
                    "first": [0, 24.70099639892578],
                    "last": [166, 12.2328462600708],
                    "min": [72, 7.9701080322265625],
                    "max": [0, 24.70099639892578],
                },
            },
        },
    },
    {
        "path": "olmo-ladder-peteish-190m-1xC.csv",
        "kind": "table",
        "format": "olmo-wandb-history-csv",
        "parser": "csv-table",
        "note": "OLMo model-ladder run (190M params, 1x Chinchilla) exported from W&B: 37 eval "
        "checkpoints x 95 eval metrics with throughput/total_tokens; no training-loss column.",
        "params": {
            "step_column": "_step",
            "columns": [
                "eval/c4_en-validation/CrossEntropyLoss",
                "eval/downstream/hellaswag_val_rc_5shot_len_norm",
                "throughput/total_tokens",
                "optim/learning_rate_group0",
            ],
        },
        "facts": {
            "rows": 37,
            "columns": 97,
            "series": {
                "eval/c4_en-validation/CrossEntropyLoss": {
                    "count": 37,
                    "first": [200, 6.029934883117676],
                    "last": [7272, 3.600973129272461],
                    "min": [7272, 3.600973129272461],
                    "max": [200, 6.029934883117676],
                },
                "eval/downstream/hellaswag_val_rc_5shot_len_norm": {
                    "count": 37,
                    "first": [200, 0.2524397671222687],
                    "last": [7272, 0.30521807074546814],
                    "min": [200, 0.2524397671222687],
                    "max": [7200, 0.3053176701068878],
                },
                "throughput/total_tokens": {
                    "count": 37,
                    "first": [200, 104857600.0],
                    "last": [7272, 3812622336.0],
                    "min": [200, 104857600.0],
                    "max": [7272, 3812622336.0],
                },
                "optim/learning_rate_group0": {
                    "count": 37,
                    "first": [200, 0.0005359385778077217],
                    "last": [7272, 9.72728518721015e-05],
                    "min": [7272, 9.72728518721015e-05],
                    "max": [400, 0.0009726663896590409],
                },
            },
        },
    },
    {
        "path": "nanogpt-build-gpt2-124m-epoch2-log.txt",
        "kind": "textlog",
        "format": "build-nanogpt-logtxt",
        "parser": "build-nanogpt-logtxt",
        "note": "karpathy/build-nanogpt log/log.txt of a GPT-2 124M second epoch resumed from step 19072: "
        "the first step after resume spikes to 3.96 and recovers within ~5 steps; a further "
        "one-step spike at 30454 (3.357 vs ~3.03 around it).",
        "params": {"after_step": 19072, "spike_window": [30400, 30500]},
        "facts": {
            "hella": {
                "count": 78,
                "first": [19080, 0.3036],
                "last": [38145, 0.3172],
                "min": [19250, 0.2976],
                "max": [38000, 0.3182],
            },
            "train": {
                "count": 19074,
                "first": [19072, 3.021431],
                "last": [38145, 2.992749],
                "min": [24879, 2.7709],
                "max": [19073, 3.961587],
                "max_after": [19073, 3.961587],
                "max_in_window": [30454, 3.35681],
            },
            "val": {
                "count": 78,
                "first": [19080, 3.2034],
                "last": [38145, 3.0167],
                "min": [38145, 3.0167],
                "max": [19080, 3.2034],
            },
        },
    },
    {
        "path": "nanogpt-build-gpt2-124m-stdout.log",
        "kind": "textlog",
        "format": "build-nanogpt-stdout",
        "parser": "build-nanogpt-stdout",
        "note": "build-nanogpt printed output (2x H100, resumed at 19072, stopped at 21816 without a "
        "final line): 'step N | loss ...' rows, 'validation loss: X' and 'HellaSwag accuracy: "
        "a/b=acc' lines carry no step.",
        "params": {"after_step": 19072},
        "facts": {
            "train": {
                "count": 2745,
                "first": [19072, 3.021431],
                "last": [21816, 2.972183],
                "min": [21478, 2.850489],
                "max": [19073, 3.961587],
                "max_after": [19073, 3.961587],
            },
            "stepless_val_lines": 12,
            "val_first": 3.2034,
            "val_last": 3.1243,
            "stepless_hellaswag_lines": 12,
            "hellaswag_last": 0.3016,
            "max_tokens_per_s": 659055.17,
        },
    },
    {
        "path": "nanogpt-owt-gpt2-output.log",
        "kind": "textlog",
        "format": "nanogpt",
        "parser": "nanogpt",
        "note": "karpathy/nanoGPT GPT-2 124M on OpenWebText, W&B-captured stdout: eval every 200 iters, "
        "mfu -100% for the first 5 iters then above 100% (108.9%: impossible MFU); killed by "
        "KeyboardInterrupt at iter 2546 (traceback at the end).",
        "params": {"after_step": 100},
        "facts": {
            "train": {
                "count": 2547,
                "first": [0, 10.9766],
                "last": [2546, 3.5074],
                "min": [2516, 3.2644],
                "max": [0, 10.9766],
                "max_after": [104, 8.1501],
            },
            "val": {
                "count": 13,
                "first": [0, 10.9897],
                "last": [2400, 3.6716],
                "min": [2400, 3.6716],
                "max": [0, 10.9897],
            },
            "max_mfu_percent": 108.9,
            "mfu_placeholder_lines": 5,
            "ends_with_traceback": True,
        },
    },
    {
        "path": "nanogpt-mitos-char-results.txt",
        "kind": "textlog",
        "format": "nanogpt",
        "parser": "nanogpt",
        "note": "karpathy/nanoGPT train.py output of a 10.7M-parameter character model trained from scratch "
        "on a 5.2M-character text for ~15.6 epochs (out-mitos, 5000 iters, eval every 250): val loss "
        "is best at step 1000 (0.7441) and rises to 0.9406 at 5000 while the train split falls 0.399 "
        "-> 0.128: overfitting from step 1000; the evaluations include the untrained step 0 (val "
        "5.22); the file ends in a shell prompt without a line end.",
        "params": {"after_step": 250},
        "facts": {
            "train": {
                "count": 501,
                "first": [0, 5.2389],
                "last": [5000, 0.2668],
                "min": [4020, 0.2287],
                "max": [0, 5.2389],
                "max_after": [260, 1.2878],
            },
            "val": {
                "count": 21,
                "first": [0, 5.2199],
                "last": [5000, 0.9406],
                "min": [1000, 0.7441],
                "max": [0, 5.2199],
            },
            "max_mfu_percent": 2.23,
            "mfu_placeholder_lines": 1,
            "ends_with_traceback": False,
        },
    },
    {
        "path": "llmc-gpt2-124m-main.log",
        "kind": "textlog",
        "format": "llmc",
        "parser": "llmc",
        "note": "karpathy/llm.c GPT-2 124M 10B-token run main.log: trl every step, tel (val loss) and "
        "eval (HellaSwag) every 250 steps and at the final step 19552 (one past the last trl); "
        "transient spike at step 4867 (3.882 vs ~3.59).",
        "params": {"after_step": 1000, "spike_window": [4800, 4950]},
        "facts": {
            "eval": {
                "count": 79,
                "first": [250, 0.2437],
                "last": [19552, 0.3054],
                "min": [500, 0.2435],
                "max": [18250, 0.3059],
            },
            "tel": {
                "count": 80,
                "first": [0, 11.0095],
                "last": [19552, 3.2731],
                "min": [19250, 3.2731],
                "max": [0, 11.0095],
            },
            "trl": {
                "count": 19552,
                "first": [0, 11.0116],
                "last": [19551, 3.2813],
                "min": [19542, 3.081],
                "max": [0, 11.0116],
                "max_after": [1022, 4.4764],
                "max_in_window": [4867, 3.8823],
            },
        },
    },
    {
        "path": "megatron-deepspeed-qwen7b-tp4-500it.log",
        "kind": "textlog",
        "format": "megatron-deepspeed",
        "parser": "megatron",
        "note": "Megatron-DeepSpeed Qwen2.5-7B-shaped model, TP=4, 500 iterations on Chinese Wikipedia: "
        "validation every 100 iterations plus a final 'on 160-sample draw from validation set' "
        "line; DeepSpeed's own 'steps: N loss:' line duplicates every iteration.",
        "params": {"after_step": 50},
        "facts": {
            "train": {
                "count": 500,
                "first": [1, 12.63599],
                "last": [500, 6.234454],
                "min": [464, 5.962782],
                "max": [2, 12.65924],
                "max_after": [51, 9.013215],
            },
            "val": {
                "count": 5,
                "first": [100, 7.66649],
                "last": [500, 6.314754],
                "min": [500, 6.314754],
                "max": [100, 7.66649],
            },
            "final_eval_lines": 1,
            "final_eval": [500, 6.335348],
            "deepspeed_steps_lines": 500,
        },
    },
    {
        "path": "fairseq-wav2vec2-mandarin-hydra_train.log",
        "kind": "textlog",
        "format": "fairseq-hydra-json",
        "parser": "fairseq-hydra-json",
        "note": "fairseq-hydra-train wav2vec 2.0 base pre-training on AISHELL-2, 10 epochs, log_format "
        "json: train_inner every 200 updates, valid and per-epoch train summaries with prefixed "
        "keys (valid_loss, valid_num_updates); repeated fp16 overflow notes.",
        "params": {"after_step": 1000},
        "facts": {
            "train_inner": {
                "count": 23,
                "first": [200, 9.276],
                "last": [4600, 3.922],
                "min": [4600, 3.922],
                "max": [200, 9.276],
                "max_after": [1200, 4.826],
            },
            "valid": {
                "count": 10,
                "first": [479, 6.389],
                "last": [4791, 3.792],
                "min": [4791, 3.792],
                "max": [479, 6.389],
            },
            "epoch_summaries": {
                "count": 10,
                "first": [479, 7.864],
                "last": [4791, 3.924],
                "min": [4791, 3.924],
                "max": [479, 7.864],
            },
            "last_valid_epoch": 10,
        },
    },
    {
        "path": "torchtitan-kimi-447m-fp8-c4-killed.log",
        "kind": "textlog",
        "format": "torchtitan",
        "parser": "torchtitan-validate",
        "note": "TorchTitan (kimi_linear 447M block-attention-residual variant, FP8, FSDP dp_shard=8 on RTX 5090s) "
        "pre-training on C4, logged every 10 steps, killed after step 360 of 12750: a validate line at step 1 "
        "(12.2079, beside the training loss 12.20778 of the same step), tps per device, mfu N/A (unknown "
        "peak), the global batch (384 x 2048 tokens) printed once; httpx request lines cut.",
        "params": {"after_step": 100},
        "facts": {
            "train": {
                "count": 37,
                "first": [1, 12.20778],
                "last": [360, 4.97691],
                "min": [360, 4.97691],
                "max": [1, 12.20778],
                "max_after": [110, 7.5135],
            },
            "validate": [[1, 12.2079]],
            "world_size": 8,
            "tokens_per_step": 786432,
            "last_tps": 3562.0,
            "killed": True,
        },
    },
    {
        "path": "keras-kanji-cnn-fit-log.txt",
        "kind": "textlog",
        "format": "keras-fit-stdout",
        "parser": "keras-fit",
        "note": "Keras 2 model.fit(verbose=2) output of a CNN for handwritten kanji on an augmented 400k-sample set: "
        "three fit calls (10, 9 and 6 epochs; the last two stopped early), each restarting at Epoch 1/10; "
        "val_loss spikes at epoch 6 (0.448 between 0.347 and 0.273) and creeps up over the last fit (0.0705 "
        "-> 0.0740) while the training loss falls 0.029 -> 0.013; ~3100 s per epoch.",
        "facts": {
            "fits": 3,
            "early_stops": 2,
            "loss": {"count": 25, "first": [1, 1.7197], "last": [25, 0.0134], "min": [25, 0.0134], "max": [1, 1.7197]},
            "val_loss": {
                "count": 25,
                "first": [1, 0.3504],
                "last": [25, 0.074],
                "min": [20, 0.0705],
                "max": [6, 0.4478],
            },
            "val_acc": {
                "count": 25,
                "first": [1, 0.8959],
                "last": [25, 0.9848],
                "min": [6, 0.8754],
                "max": [23, 0.9855],
            },
            "total_seconds": 77484,
        },
    },
    {
        "path": "lmeval-v03-pythia-160m-5shot-step143000.json",
        "kind": "lm-eval",
        "format": "lm-eval-v0.3",
        "parser": "lm-eval",
        "note": "lm-evaluation-harness v0.3 results (results + versions + config) for EleutherAI "
        "pythia-v1.1-160m at revision step143000 (the final checkpoint), 5-shot, 65 tasks incl. "
        "hendrycksTest-*, lambada_openai (acc and ppl, ppl lower is better), wsc and winogrande "
        "without acc_norm; the step is only in config.model_args.",
        "params": {"metrics": _PYTHIA_METRICS},
        "facts": {
            "tasks": 65,
            "versions": 65,
            "has_groups": False,
            "values": {
                "lambada_openai|acc": 0.25732582961381717,
                "lambada_openai|ppl": 65.34571058345023,
                "arc_easy|acc": 0.4494949494949495,
                "arc_easy|acc_norm": 0.4175084175084175,
                "piqa|acc": 0.6213275299238302,
                "winogrande|acc": 0.5067087608524072,
            },
        },
    },
    {
        "path": "lmeval-v04-llama3-8b-mmlu.json",
        "kind": "lm-eval",
        "format": "lm-eval-v0.4",
        "parser": "lm-eval",
        "note": "lm-evaluation-harness v0.4 MMLU results for Meta-Llama-3-8B: 'acc,none' keys, 57 "
        "subtasks plus 5 group rows (mmlu, mmlu_stem, ...) in results, group_subtasks, groups and "
        "n-shot.",
        "params": {
            "metrics": [
                ["mmlu", "acc,none"],
                ["mmlu_stem", "acc,none"],
                ["mmlu_abstract_algebra", "acc,none"],
                ["mmlu_abstract_algebra", "acc_stderr,none"],
            ]
        },
        "facts": {
            "tasks": 62,
            "versions": 57,
            "has_groups": True,
            "values": {
                "mmlu|acc,none": 0.6504059250818972,
                "mmlu_stem|acc,none": 0.5572470662860768,
                "mmlu_abstract_algebra|acc,none": 0.29,
                "mmlu_abstract_algebra|acc_stderr,none": 0.04560480215720683,
            },
        },
    },
    {
        "path": "lmeval-v04-llama3-8b-gsm8k.json",
        "kind": "lm-eval",
        "format": "lm-eval-v0.4",
        "parser": "lm-eval",
        "note": "lm-evaluation-harness v0.4 GSM8K results for Meta-Llama-3-8B: two filters "
        "('exact_match,strict-match' and 'exact_match,flexible-extract'), no 'none' filter.",
        "params": {"metrics": [["gsm8k", "exact_match,strict-match"], ["gsm8k", "exact_match,flexible-extract"]]},
        "facts": {
            "tasks": 1,
            "versions": 1,
            "has_groups": False,
            "values": {
                "gsm8k|exact_match,strict-match": 0.5087187263078089,
                "gsm8k|exact_match,flexible-extract": 0.511751326762699,
            },
        },
    },
    _pythia_5shot(
        3000,
        {
            "lambada_openai|acc": 0.15253250533669707,
            "lambada_openai|ppl": 271.2371578187154,
            "arc_easy|acc": 0.3792087542087542,
            "arc_easy|acc_norm": 0.35648148148148145,
            "piqa|acc": 0.5903155603917302,
            "winogrande|acc": 0.5248618784530387,
        },
    ),
    _pythia_5shot(
        13000,
        {
            "lambada_openai|acc": 0.22705220260042694,
            "lambada_openai|ppl": 84.02309334919916,
            "arc_easy|acc": 0.41792929292929293,
            "arc_easy|acc_norm": 0.3846801346801347,
            "piqa|acc": 0.6164309031556039,
            "winogrande|acc": 0.5146014206787688,
        },
    ),
    _pythia_5shot(
        33000,
        {
            "lambada_openai|acc": 0.2555792742091985,
            "lambada_openai|ppl": 56.75131477014402,
            "arc_easy|acc": 0.4393939393939394,
            "arc_easy|acc_norm": 0.4187710437710438,
            "piqa|acc": 0.6365614798694232,
            "winogrande|acc": 0.5224940805051302,
        },
    ),
    {
        "path": "olmo-1b-azure-nccl-sharp-10steps.log",
        "kind": "textlog",
        "format": "olmo",
        "parser": "olmo",
        "note": "allenai/OLMo trainer console (OLMo-1B, torchrun on 8 GPUs of one Azure NDv5 node, NCCL and SHARP "
        "set): `[step=N/739328]` lines, then indented name=value lines with thousands commas (76,631); "
        "throughput is per device and from step 2 only; 10 steps, loss 11.25 -> 9.331 with a rise at 4 and 10.",
        "params": {
            "names": [
                "train/CrossEntropyLoss",
                "throughput/total_tokens",
                "throughput/device/tokens_per_second",
                "train/Perplexity",
            ]
        },
        "facts": {
            "blocks": 10,
            "planned_steps": 739328,
            "series": {
                "train/CrossEntropyLoss": {
                    "count": 10,
                    "first": [1, 11.25],
                    "last": [10, 9.331],
                    "min": [9, 9.092],
                    "max": [1, 11.25],
                },
                "throughput/total_tokens": {
                    "count": 10,
                    "first": [1, 4194304.0],
                    "last": [10, 41943040.0],
                    "min": [1, 4194304.0],
                    "max": [10, 41943040.0],
                },
                "throughput/device/tokens_per_second": {
                    "count": 9,
                    "first": [2, 45538.0],
                    "last": [10, 45236.0],
                    "min": [10, 45236.0],
                    "max": [2, 45538.0],
                },
                "train/Perplexity": {
                    "count": 10,
                    "first": [1, 76631.0],
                    "last": [10, 11283.0],
                    "min": [9, 8879.0],
                    "max": [1, 76631.0],
                },
            },
        },
    },
    {
        "path": "detectron2-maskrcnn-balloon-metrics.json",
        "kind": "table",
        "format": "detectron2-metrics-json",
        "parser": "jsonl-table",
        "note": "detectron2's metrics.json (its JSONWriter: one JSON object per logged iteration) of the Mask R-CNN "
        "balloon tutorial, 300 iterations logged every 20: total_loss beside its terms (loss_cls, loss_box_reg, "
        "loss_mask, loss_rpn_cls, loss_rpn_loc), time and data_time the seconds of each iteration (a window's "
        "median, not a clock), and iteration 19 logged twice (a second launch into the same output folder).",
        "params": {"step_key": "iteration", "columns": ["total_loss", "time", "data_time"]},
        "facts": {
            "rows": 16,
            "keys": 22,
            "series": {
                "total_loss": {
                    "count": 16,
                    "first": [19, 2.1678951284848154],
                    "last": [299, 0.3522665523341857],
                    "min": [279, 0.32313136279117316],
                    "max": [19, 2.1678951284848154],
                },
                "time": {
                    "count": 16,
                    "first": [19, 0.3566403815000285],
                    "last": [299, 0.36708652150002763],
                    "min": [59, 0.31442212799993285],
                    "max": [279, 0.371560326499889],
                },
                "data_time": {
                    "count": 16,
                    "first": [19, 0.00434096649996718],
                    "last": [299, 0.004519335000054525],
                    "min": [19, 0.00434096649996718],
                    "max": [179, 0.005491295499950866],
                },
            },
        },
    },
]

SHARED_LOGS: list[dict[str, Any]] = [
    {
        "path": "hf-t5-summarization-tb",
        "kind": "tensorboard",
        "format": "tensorboard-hf-trainer",
        "parser": "tensorboard",
        "note": "HF Trainer TensorBoard run directory of the same t5-small run: .0 holds train/* scalars "
        "every 500 steps (tensor-encoded scalars), .1 holds the single final eval/* point at step "
        "215337; train/grad_norm spikes to 35.6 at step 190000.",
        "params": {
            "tags": [
                "train/loss",
                "train/learning_rate",
                "train/grad_norm",
                "train/train_loss",
                "eval/loss",
                "eval/rougeL",
            ]
        },
        "facts": {
            "event_files": 2,
            "scalar_tags": [
                "eval/gen_len",
                "eval/loss",
                "eval/rouge1",
                "eval/rouge2",
                "eval/rougeL",
                "eval/rougeLsum",
                "eval/runtime",
                "eval/samples_per_second",
                "eval/steps_per_second",
                "train/epoch",
                "train/grad_norm",
                "train/learning_rate",
                "train/loss",
                "train/total_flos",
                "train/train_loss",
                "train/train_runtime",
                "train/train_samples_per_second",
                "train/train_steps_per_second",
            ],
            "series": {
                "train/loss": {
                    "count": 430,
                    "first": [500, 1.9962999820709229],
                    "last": [215000, 1.742300033569336],
                    "min": [181000, 1.7339999675750732],
                    "max": [500, 1.9962999820709229],
                },
                "train/learning_rate": {
                    "count": 430,
                    "first": [500, 4.988390355720185e-05],
                    "last": [215000, 7.824944248113752e-08],
                    "min": [215000, 7.824944248113752e-08],
                    "max": [500, 4.988390355720185e-05],
                },
                "train/grad_norm": {
                    "count": 430,
                    "first": [500, 3.155489444732666],
                    "last": [215000, 2.5202980041503906],
                    "min": [178500, 1.6890056133270264],
                    "max": [190000, 35.5915412902832],
                },
                "train/train_loss": {
                    "count": 1,
                    "first": [215337, 1.804049015045166],
                    "last": [215337, 1.804049015045166],
                    "min": [215337, 1.804049015045166],
                    "max": [215337, 1.804049015045166],
                },
                "eval/loss": {
                    "count": 1,
                    "first": [215337, 1.633907675743103],
                    "last": [215337, 1.633907675743103],
                    "min": [215337, 1.633907675743103],
                    "max": [215337, 1.633907675743103],
                },
                "eval/rougeL": {
                    "count": 1,
                    "first": [215337, 29.453100204467773],
                    "last": [215337, 29.453100204467773],
                    "min": [215337, 29.453100204467773],
                    "max": [215337, 29.453100204467773],
                },
            },
        },
    },
    {
        "path": "lightning-l1trigger-vqvae-tb",
        "kind": "tensorboard",
        "format": "tensorboard-lightning",
        "parser": "tensorboard",
        "note": "PyTorch Lightning TensorBoardLogger (VQ-VAE tokenizer for L1-trigger data): train_loss "
        "every 10 steps, val_loss once per epoch; val_loss is lowest at step 1085 (epoch 1) and "
        "rises every epoch after, and so does the training loss (its epoch means 0.044 -> 0.069): "
        "not overfitting.",
        "params": {"tags": ["train_loss", "val_loss", "epoch"]},
        "facts": {
            "event_files": 1,
            "scalar_tags": [
                "commit_loss",
                "epoch",
                "hp_metric",
                "recon_loss",
                "train_loss",
                "val_commit_loss",
                "val_loss",
                "val_recon_loss",
            ],
            "series": {
                "train_loss": {
                    "count": 683,
                    "first": [9, 0.7048369646072388],
                    "last": [6829, 0.07092489302158356],
                    "min": [1019, 0.04023106023669243],
                    "max": [9, 0.7048369646072388],
                },
                "val_loss": {
                    "count": 12,
                    "first": [542, 0.056474510580301285],
                    "last": [6515, 0.06962998956441879],
                    "min": [1085, 0.04170220345258713],
                    "max": [6515, 0.06962998956441879],
                },
                "epoch": {"count": 695, "first": [9, 0.0], "last": [6829, 12.0], "min": [9, 0.0], "max": [6519, 12.0]},
            },
        },
    },
    {
        "path": "torchtitan-kimi-linear-436m-c4.log",
        "kind": "textlog",
        "format": "torchtitan",
        "parser": "torchtitan",
        "note": "TorchTitan (kimi_linear 436M, FSDP x4) on C4, 12500 steps logged every 10: every metrics "
        "line carries ANSI colour codes and an impossible MFU (~15000%, the FLOP count is wrong "
        "for this model); transient spike at step 2470 (5.17 vs ~4.6).",
        "params": {"after_step": 1000, "spike_window": [2400, 2550]},
        "facts": {
            "train": {
                "count": 1251,
                "first": [1, 12.23925],
                "last": [12500, 3.82854],
                "min": [11540, 3.33839],
                "max": [1, 12.23925],
                "max_after": [1310, 5.61729],
                "max_in_window": [2470, 5.17275],
            },
            "lines_with_ansi": 1252,
            "max_mfu_percent": 15386.25,
            "last_tps": 3217.0,
        },
    },
    {
        "path": "lmeval-v03-pythia-160m-step143000.json",
        "kind": "lm-eval",
        "format": "lm-eval-v0.3",
        "parser": "lm-eval",
        "note": "lm-evaluation-harness v0.3 results (results + versions + config) for EleutherAI "
        "pythia-v1.1-160m at revision step143000, zero-shot, 87 tasks incl. hendrycksTest-*, "
        "crows_pairs_*, lambada_openai (acc and ppl).",
        "params": {
            "metrics": [
                ["lambada_openai", "acc"],
                ["lambada_openai", "ppl"],
                ["arc_easy", "acc"],
                ["arc_easy", "acc_norm"],
                ["piqa", "acc"],
                ["winogrande", "acc"],
            ]
        },
        "facts": {
            "tasks": 87,
            "versions": 87,
            "has_groups": False,
            "values": {
                "lambada_openai|acc": 0.3283524160683097,
                "lambada_openai|ppl": 38.064877017771195,
                "arc_easy|acc": 0.4351851851851852,
                "arc_easy|acc_norm": 0.39646464646464646,
                "piqa|acc": 0.6273122959738846,
                "winogrande|acc": 0.5311760063141279,
            },
        },
    },
    {
        "path": "keras-tf2-cbam-noise-tb",
        "kind": "tensorboard",
        "format": "tensorboard-keras",
        "parser": "keras-tensorboard",
        "note": "Keras' TensorBoard callback (TF 2, Oct 2022): train/ and validation/ folders of one 1000-epoch fit "
        "with the same tags (epoch_loss, epoch_Euclidean, epoch_cosine_similarity) at step = epoch; a "
        "transient spike of the validation loss at epoch 15 (11.97 against ~1).",
        "params": {"keys": ["train/epoch_loss", "validation/epoch_loss", "validation/epoch_cosine_similarity"]},
        "facts": {
            "event_files": 3,
            "scalars": [
                "train/epoch_Euclidean",
                "train/epoch_cosine_similarity",
                "train/epoch_loss",
                "validation/epoch_Euclidean",
                "validation/epoch_cosine_similarity",
                "validation/epoch_loss",
            ],
            "series": {
                "train/epoch_loss": {
                    "count": 1000,
                    "first": [0, 1.3067651987075806],
                    "last": [999, 0.024575471878051758],
                    "min": [516, 0.02328176610171795],
                    "max": [0, 1.3067651987075806],
                },
                "validation/epoch_loss": {
                    "count": 1000,
                    "first": [0, 1.363363265991211],
                    "last": [999, 0.02572011947631836],
                    "min": [678, 0.023791849613189697],
                    "max": [15, 11.968791961669922],
                },
                "validation/epoch_cosine_similarity": {
                    "count": 1000,
                    "first": [0, 0.5594489574432373],
                    "last": [999, 0.9912811517715454],
                    "min": [15, 0.04293754696846008],
                    "max": [966, 0.9923977851867676],
                },
            },
        },
    },
    {
        "path": "keras-tf2-mnist-fashion-tb",
        "kind": "tensorboard",
        "format": "tensorboard-keras",
        "parser": "keras-tensorboard",
        "note": "Keras' TensorBoard callback (TF 2.0, Oct 2019), a train/ folder only: epoch_loss and "
        "epoch_accuracy at step = epoch for 5 epochs, plus the Keras graph and a profile run.",
        "params": {"keys": ["train/epoch_loss", "train/epoch_accuracy"]},
        "facts": {
            "event_files": 2,
            "scalars": ["train/epoch_accuracy", "train/epoch_loss"],
            "series": {
                "train/epoch_loss": {
                    "count": 5,
                    "first": [0, 0.5385050773620605],
                    "last": [4, 0.5368683338165283],
                    "min": [4, 0.5368683338165283],
                    "max": [0, 0.5385050773620605],
                },
                "train/epoch_accuracy": {
                    "count": 5,
                    "first": [0, 0.8333333134651184],
                    "last": [4, 0.8333333134651184],
                    "min": [0, 0.8333333134651184],
                    "max": [0, 0.8333333134651184],
                },
            },
        },
    },
]

# The second wave (issue 35), registered from its own module
from tests.support.real_wave2 import WAVE2_LOGS, WAVE2_SHARED  # noqa: E402

REAL_LOGS += WAVE2_LOGS
SHARED_LOGS += WAVE2_SHARED

# The third wave (issue 35: a real OpenMMLab log and scalars.json, ms-swift), registered from its own module
from tests.support.real_wave3 import WAVE3_LOGS  # noqa: E402

REAL_LOGS += WAVE3_LOGS

# The fourth wave (issue 45: trainers and formats new to the corpus), registered from its own module
from tests.support.real_wave4 import WAVE4_LOGS  # noqa: E402

REAL_LOGS += WAVE4_LOGS
