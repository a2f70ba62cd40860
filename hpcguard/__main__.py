from hpcguard.cli import main

main()
