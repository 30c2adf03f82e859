"""What the container image asks of the host: the NVIDIA_* and CUDA_* variables."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

_NAMES = ("NVIDIA_DISABLE_REQUIRE", "CUDA_VERSION", "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_VISIBLE_DEVICES")


def probe(environ: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    environ = os.environ if environ is None else environ
    facts: Dict[str, Any] = {name: environ.get(name) for name in _NAMES}
    # The toolkit skips every NVIDIA_REQUIRE_JETPACK* variable (NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS, ...).
    facts["requirements"] = {
        name: value for name, value in sorted(environ.items())
        if name.startswith("NVIDIA_REQUIRE_") and not name.startswith("NVIDIA_REQUIRE_JETPACK")
    }
    return facts
