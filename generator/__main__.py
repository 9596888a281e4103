from mcptask_gen.cli import main

main()
