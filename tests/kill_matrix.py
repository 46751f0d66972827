"""The generated checks' kill matrix over this project's mutants and variants.

    python -m tests.kill_matrix                      # 200 programs per property
    python -m tests.kill_matrix --examples 500 --seeds 0,1,2

Any other option of ``python -m kvconform.differential`` is passed through.
"""

from __future__ import annotations

import sys

from kvconform.differential.__main__ import main

if __name__ == "__main__":
    sys.exit(
        main(
            [
                "--against-mutants",
                "--mutants",
                "tests.mutants:all_mutants",
                "--variants",
                "tests.variants:all_variants",
                *sys.argv[1:],
            ]
        )
    )
