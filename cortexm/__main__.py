from cortexm.cli import main

main()
