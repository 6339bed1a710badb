"""``python -m loaderexp.report <sweep folder>``."""

from loaderexp.report.cli import main

main()
