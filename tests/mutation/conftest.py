"""Keep the mutation run's test out of the normal ``pytest`` run.

``tests/mutation/test_suite_for_mutmut.py`` is run by ``tests/mutation/run.sh``
(a periodic command, not a CI step). Set ``KVCONFORM_MUTATION=1`` to collect it
here anyway, e.g. to check that it passes on the unmutated reference.
"""

from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("KVCONFORM_MUTATION") else ["test_suite_for_mutmut.py"]
