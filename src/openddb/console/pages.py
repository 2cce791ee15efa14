"""The console's route: the static files of `static/`, read once from the package, with the headers that keep the
page to its own origin."""

from __future__ import annotations

from importlib import resources
from typing import NamedTuple

PREFIX = b"/console"
# The page loads only its own script and stylesheet and calls only its own origin; nothing may frame it (no
# clickjacking) and it submits no HTML form anywhere (its forms are handled by its script). No inline script, so a
# value shown by the page can never run as code even if it escaped its text node.
_SECURITY = (b"Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
             b"connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; "
             b"frame-ancestors 'none'\r\n"
             b"X-Frame-Options: DENY\r\nX-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
             b"Cross-Origin-Resource-Policy: same-origin\r\nCross-Origin-Opener-Policy: same-origin\r\n"
             b"Cache-Control: no-cache\r\n")
_FILES = {b"": ("index.html", b"text/html; charset=utf-8"), b"/": ("index.html", b"text/html; charset=utf-8"),
          b"/console.js": ("console.js", b"text/javascript; charset=utf-8"),
          b"/sigv4.js": ("sigv4.js", b"text/javascript; charset=utf-8"),
          b"/advisor.js": ("advisor.js", b"text/javascript; charset=utf-8"),
          b"/metrics.js": ("metrics.js", b"text/javascript; charset=utf-8"),
          b"/console.css": ("console.css", b"text/css; charset=utf-8")}


class Page(NamedTuple):
    status: int
    content_type: bytes
    body: bytes
    headers: bytes  # header lines, each ending in CRLF


class Console:
    """The console's files, loaded when the server starts (a missing file fails the start, not a page view)."""

    def __init__(self) -> None:
        static = resources.files("openddb.console").joinpath("static")
        self._pages = {path: Page(200, kind, static.joinpath(name).read_bytes(), _SECURITY)
                       for path, (name, kind) in _FILES.items()}

    def respond(self, url: bytes) -> Page:
        """The answer to a GET of `url` (a path under PREFIX; a query string is ignored)."""
        path = url.split(b"?", 1)[0][len(PREFIX):]
        page = self._pages.get(path)
        if page is None:
            return Page(404, b"text/plain; charset=utf-8", b"no such page of the console\n", _SECURITY)
        return page
