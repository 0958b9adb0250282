"""Subcommands. Each module: a docstring (the command's --help description),
``configure(parser)`` and ``run(args) -> int``. Keep module-level imports light."""
