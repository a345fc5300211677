"""Logging to the host's log, tagged by the host with pipeline, epoch and
operator version: ``weir.log.info("...")``.

While the host calls the operator, ``print()`` (``sys.stdout``, at info)
and ``sys.stderr`` (at warn) go there too, a line per call: a Python operator has
no terminal (stdio is stubbed out of the sandbox), and without this a
``print`` would trap the epoch.
"""

import sys

from wit_world.imports import host as _host

__all__ = ["trace", "debug", "info", "warn", "error"]


def trace(message):
    _host.log(_host.Level.TRACE, str(message))


def debug(message):
    _host.log(_host.Level.DEBUG, str(message))


def info(message):
    _host.log(_host.Level.INFO, str(message))


def warn(message):
    _host.log(_host.Level.WARN, str(message))


def error(message):
    _host.log(_host.Level.ERROR, str(message))


class _LogStream:
    """A text stream that writes each completed line to the host log."""

    def __init__(self, level):
        self._level = level
        self._pending = ""

    def write(self, text):
        text = str(text)
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            _host.log(self._level, line)
        return len(text)

    def flush(self):
        if self._pending:
            _host.log(self._level, self._pending)
            self._pending = ""

    def isatty(self):
        return False

    def writable(self):
        return True


def capture_stdio():
    """Points ``sys.stdout`` and ``sys.stderr`` at the host log. Called as
    each call from the host begins, not at import: the operator's modules
    are imported while the component is built, when the host log is a stub
    that aborts the build, so an error raised during the import (a missing
    module, say) could not be printed and showed as the stub's
    ``AssertionError`` instead of itself."""
    if not isinstance(sys.stdout, _LogStream):
        sys.stdout = _LogStream(_host.Level.INFO)
    if not isinstance(sys.stderr, _LogStream):
        sys.stderr = _LogStream(_host.Level.WARN)


def flush_stdio():
    """Writes out a ``print(..., end="")`` left without a newline."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, _LogStream):
            stream.flush()
