"""``python -m dlc`` runs the ``dlc`` command."""

from dlc.cli.main import main

main()
