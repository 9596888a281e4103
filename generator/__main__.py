from mcptask_gen.launcher import main

main()
