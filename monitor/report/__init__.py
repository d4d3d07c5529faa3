"""The governance report: one self-contained HTML page a board can read and print.

``data`` reads what the page needs (a service's DuckDB file, read-only, or an offline
audit directory) into typed objects, ``figures`` draws them as inline SVG,
``sentences`` says in plain words what each cell and event means, and ``render``
puts it into the page. Nothing here writes to the database.
"""

from monitor.report.render import render_report, report_file_name

__all__ = ["render_report", "report_file_name"]
