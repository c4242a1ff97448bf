from translator.cli import run

run()
