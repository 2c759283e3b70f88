from bsdcrypt.cli import main

main()
