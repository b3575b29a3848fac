"""``python -m examples.table1``: the Table 1 protocol's command."""

import sys

from . import reproduce

sys.exit(reproduce.main())
