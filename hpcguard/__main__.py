from hpcguard.streams.cli import main

main()
