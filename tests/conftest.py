"""Test-wide settings: offline hub, one torch thread (tiny models are dominated by thread sync)."""
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # the render-only tests need no torch
    pass
