"""``python -m trioqueue``: the same as the ``trioqueue`` command."""

from ._cli import main

raise SystemExit(main())
