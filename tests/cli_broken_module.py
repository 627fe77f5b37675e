"""A handler module that fails while it is imported (``trioqueue worker`` must say so)."""

raise RuntimeError("this module is broken on purpose")
