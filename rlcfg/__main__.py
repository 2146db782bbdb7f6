from rlcfg.cli import main

main()
