"""``python -m harness.probe``: the same command as the ``probe`` console script."""

from soakbench.harness.probe.cli import main

if __name__ == "__main__":
    main()
