from mcqaudit.cli import main

main()
