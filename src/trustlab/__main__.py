"""``python -m trustlab`` runs the CLI."""

from trustlab.cli import main

if __name__ == "__main__":
    main()
