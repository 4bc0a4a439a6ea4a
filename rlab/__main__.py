"""`python -m rlab` runs the CLI."""

from rlab.cli.app import main

if __name__ == "__main__":
    main()
