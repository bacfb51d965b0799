"""`python -m flowmem.cli`: the `flowmem` command, without its script."""

from flowmem.cli import main

main()
