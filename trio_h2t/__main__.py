"""``python -m trio_h2t``: the ``trio-h2t`` command (see ``trio_h2t._cli``)."""

from ._cli import main

raise SystemExit(main())
