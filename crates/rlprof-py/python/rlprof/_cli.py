"""The ``rlprof`` console script of the wheel: the same program as the ``rlprof`` binary."""

import signal
import sys

from . import _native


def main() -> None:
    """Runs ``rlprof`` with this process's arguments and exits with its code."""
    # As for the binary: Ctrl-C stops the command (Python's handler would only set a flag that
    # is read when Rust returns); `train` installs its own handlers, which close the open
    # collections first.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    sys.exit(_native.run(["rlprof", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
