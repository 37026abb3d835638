"""``python -m ujobs.services.cli``: the ``ujobs`` command without its console script."""

from ujobs.services.cli.root import main

main()
