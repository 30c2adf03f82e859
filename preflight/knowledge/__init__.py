"""Knowledge with its sources: what NVIDIA, PyTorch and PyPI publish, as preflight uses it."""
