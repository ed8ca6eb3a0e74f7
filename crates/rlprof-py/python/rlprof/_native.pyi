"""Type stubs of ``rlprof._native``, the Rust half of the package (crates/rlprof-py/src/lib.rs)."""

__version__: str

def run(argv: list[str]) -> int:
    """Runs the ``rlprof`` command line with ``argv`` (program name first); returns the exit
    code."""

def report_json(path: str) -> str:
    """The text ``rlprof report PATH --format json`` prints. Raises ``RuntimeError``."""

def report_html(path: str, out: str, force: bool = False, ranks: list[int] = ...) -> None:
    """Writes the page ``rlprof report PATH -o OUT [--force] [--ranks R,...]`` writes. Raises
    ``RuntimeError``."""
