"""Public entry point matching ``http_parser.http`` of the original package."""

from http_parser.pyparser import HttpParser

__all__ = ["HttpParser"]
