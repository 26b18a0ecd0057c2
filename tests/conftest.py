"""Shared pytest configuration."""

import os

# Tests never open a TensorBoard server or a progress bar on a terminal; keep output quiet and torch small.
os.environ.setdefault("RLEARN_NO_PROGRESS", "1")

import torch  # noqa: E402

torch.set_num_threads(1)
