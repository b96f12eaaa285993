"""Importers: existing runs (TensorBoard, MLflow, W&B, lm-eval, HF trainer state, tables, text logs) into the ledger. They translate; they do not analyse."""
