"""Fault injection against the persistent store: bit flips, truncations, empty files, ``kill -9``.

    python benchmarks/faults.py                    # 300 flips over a 2,000-record store, truncations, 5 kills
    python benchmarks/faults.py --flips 1000 --kills 10 --json benchmarks/results/faults.json

The trials live in ``tests/store_faults.py`` (the tests run the same trials on a smaller scale);
its docstring says what each one does and how an outcome is classified.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from store_faults import main  # noqa: E402

if __name__ == "__main__":
    main()
