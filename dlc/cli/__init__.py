"""The ``dlc`` command line: one click group whose subcommands live in their own modules."""
