from kvconform.cli import console

console()
