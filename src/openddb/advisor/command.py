"""`openddb advise`: the report of a running server's advisor (GET /openddb/advisor), printed as text, JSON, SARIF
or JUnit XML; exit status 1 when a finding is at least as severe as --fail-on, 2 when the server cannot be read."""

from __future__ import annotations

import argparse
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime
from typing import Any

import orjson

from openddb.advisor import signing
from openddb.advisor.formats import failing, render

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def add_parser(commands: Any) -> None:
    advise = commands.add_parser("advise", help="report where the traffic a running server saw breaks the DynamoDB "
                                                "design standards (docs/ADVISOR.md)")
    advise.add_argument("--endpoint", default="http://127.0.0.1:8000", metavar="URL",
                        help="the server (default http://127.0.0.1:8000)")
    advise.add_argument("--table", default=None, metavar="T", help="one table's findings and patterns only")
    advise.add_argument("--account", default=None, metavar="ID",
                        help="the tables of this account only (with --namespaces account-region)")
    advise.add_argument("--region", default=None, metavar="R",
                        help="the tables of this region only (with --namespaces account-region); also the region "
                             "the request is signed for (default: AWS_REGION, AWS_DEFAULT_REGION, the profile's)")
    advise.add_argument("--since", default=None, metavar="WHEN",
                        help="traffic seen since: a duration ago (30s, 10m, 2h, 1d), an ISO 8601 time or epoch "
                             "seconds")
    advise.add_argument("--format", choices=("text", "json", "sarif", "junit"), default="text")
    advise.add_argument("--fail-on", choices=("error", "warning"), default=None,
                        help="exit 1 if a finding is this severe or more (default: exit 0 whatever is found)")


def since_epoch(text: str, now: float | None = None) -> float:
    """Epoch seconds of --since (ValueError if it is none of the forms)."""
    now = time.time() if now is None else now
    match = _DURATION.match(text.strip())
    if match:
        return now - float(match.group(1)) * _UNIT[match.group(2)]
    try:
        return float(text)
    except ValueError:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
        return moment.timestamp()


def fetch(endpoint: str, table: str | None, since: float | None, account: str | None = None,
          region: str | None = None) -> dict[str, Any]:
    """The report (OSError or ValueError if it cannot be read), the request signed with the credentials found
    (advisor/signing.py) where there are any."""
    query = {name: str(value) for name, value in (("table", table), ("account", account), ("region", region),
                                                  ("since", since)) if value is not None}
    url = endpoint.rstrip("/") + "/openddb/advisor" + (
        "?" + urllib.parse.urlencode(query, quote_via=urllib.parse.quote) if query else "")
    parts = urllib.parse.urlsplit(url)
    signer = signing.found_signer()
    headers = {} if signer is None else signing.signed_headers(
        signer, region or signing.found_region(), parts.netloc, parts.path + ("?" + parts.query if parts.query else ""))
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
            report: dict[str, Any] = orjson.loads(answer.read())
    except urllib.error.HTTPError as error:
        with error:
            detail = error.read().decode(errors="replace")
        raise OSError(f"{url} answered {error.code}: {detail}") from None
    return report


def main(args: argparse.Namespace) -> int:
    try:
        since = since_epoch(args.since) if args.since else None
    except ValueError:
        print(f"openddb advise: --since {args.since}: a duration (10m), an ISO 8601 time or epoch seconds expected",
              file=sys.stderr)
        return 2
    try:
        report = fetch(args.endpoint, args.table, since, args.account, args.region)
    except (OSError, ValueError) as error:
        print(f"openddb advise: {error}", file=sys.stderr)
        return 2
    sys.stdout.write(render(report, args.format))
    return 1 if failing(report, args.fail_on) else 0
