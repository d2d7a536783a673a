"""Start bench/cpu_sampler.py in a process the bench starts (``HCR_CPU_PROFILE`` names where
its totals go); put this directory on PYTHONPATH."""

import os
import sys

if os.environ.get("HCR_CPU_PROFILE"):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import cpu_sampler

    cpu_sampler.start(os.environ["HCR_CPU_PROFILE"])
