"""python -m kvconform.cli: the kvconform command."""

from kvconform.cli import console

console()
