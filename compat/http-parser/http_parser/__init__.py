"""DLC's pure-Python replacement for the ``http-parser`` package, as far as pymesos uses it.

Only the streaming *response* side is implemented: ``http_parser.http.HttpParser`` fed with
``execute(data, length)`` and queried with the ``is_*``/``get_*``/``recv_body`` methods.
"""

__version__ = "0.9.0+dlc1"
