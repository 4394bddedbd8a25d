"""Nsight Systems: SQLite exports (``nsys export --type sqlite``) read into a ``Trace``,
reports (``.nsys-rep``) exported first with ``nsys``, the JSON export refused.

``files`` routes a path; ``loader`` reads an export (``sql`` → numpy columns, ``gpu``
and ``host`` per table, ``targets``/``lanes``/``names`` for who ran what); ``rep``
exports reports; ``json_export`` recognises the JSON export.
"""
