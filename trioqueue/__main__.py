"""``python -m trioqueue``: the same as the ``trioqueue`` command."""

import os
import sys

# python -m puts the current directory first on sys.path. What trioqueue imports from
# here on must be the installed packages, not a file of the same name there (a tqdm.py,
# a cronsim.py): as for the trioqueue command, the current directory goes last, where
# a handler module given as MODULE:HANDLER is still found.
if sys.path and sys.path[0] in ("", os.getcwd()):
    sys.path.append(sys.path.pop(0))

from ._cli._main import main  # after the path is set

raise SystemExit(main())
