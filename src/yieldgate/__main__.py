"""`python -m yieldgate` runs the command line."""

from yieldgate.cli import main

main()
