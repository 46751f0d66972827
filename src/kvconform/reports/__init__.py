"""Reports of a run: one JSON document, and renderings derived from it.

The JSON report (format ``kvconform-report/1``, ``schema/report.schema.json``)
is the record; JUnit XML, the Markdown summary and the HTML pages are all
rendered from that document, so ``kvconform compare`` can work from saved
JSON files of several implementations.
"""
