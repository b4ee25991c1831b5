from warren.cli import main

main()
