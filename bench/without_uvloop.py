"""Run a module as ``python -m`` would, with uvloop made unimportable: Warren on asyncio's own loop.

    python bench/without_uvloop.py warren worker --config warren.toml

The benchmark's "before": the same installed Warren, falling back to the default loop as it does wherever
uvloop is absent (``warren.loop``).
"""

from __future__ import annotations

import runpy
import sys

if __name__ == "__main__":
    sys.modules["uvloop"] = None  # type: ignore[assignment]  # `import uvloop` now raises ImportError
    module, *args = sys.argv[1:]
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
