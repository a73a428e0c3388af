"""How many cases the fuzz run tries, its seed, and the count of what it tried.

``AGENTKEEL_FUZZ_EXAMPLES`` is the most cases per operation (CI: a few per operation,
a few hundred in all; ``make fuzz``: enough for more than 10,000), ``AGENTKEEL_FUZZ_SEED``
replays a run (the seed is printed in pytest's header whatever it is).
"""

from __future__ import annotations

import os
import secrets
from collections import Counter

EXAMPLES = int(os.environ.get("AGENTKEEL_FUZZ_EXAMPLES", "4"))
SEED = int(os.environ.get("AGENTKEEL_FUZZ_SEED") or secrets.randbelow(2**32))
TRIED: Counter[str] = Counter()
"""Cases tried, by operation."""
