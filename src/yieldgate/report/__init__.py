"""Rendering: the self-contained HTML report and exporters to TensorBoard, MLflow, W&B and tables."""
