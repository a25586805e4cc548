"""Shared reporting for the Python client scripts of the client matrix.

Each script runs named checks; every check prints one line, `PASS <client> <check>` or
`FAIL <client> <check>: <reason>`. A check that raises is a FAIL; the script goes on with the
next check and exits 0 when all have run. The connection parameters come from the libpq
environment variables (PGHOST, PGPORT, PGUSER, PGDATABASE) the test sets.
"""

import os
import sys


def conninfo():
    """The libpq connection string for the server under test."""
    return "host={} port={} user={} dbname={}".format(
        os.environ.get("PGHOST", "127.0.0.1"),
        os.environ.get("PGPORT", "9347"),
        os.environ.get("PGUSER", "weir"),
        os.environ.get("PGDATABASE", "weir"),
    )


def reason(exc):
    """A one-line reason: the SQLSTATE when the error carries one, then the first line."""
    code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    if isinstance(exc, AssertionError):
        return first[:300]
    prefix = f"{code} " if code else f"{type(exc).__name__}: "
    return (prefix + first)[:300]


class Checks:
    """Runs the checks of one client and prints their outcome."""

    def __init__(self, client, on_failure=None):
        self.client = client
        self.on_failure = on_failure

    def run(self, name, fn):
        try:
            fn()
        except Exception as exc:  # every failure is reported, none stops the script
            print(f"FAIL {self.client} {name}: {reason(exc)}", flush=True)
            if self.on_failure is not None:
                try:
                    self.on_failure()
                except Exception:
                    pass
            return False
        print(f"PASS {self.client} {name}", flush=True)
        return True


def eq(actual, expected, what):
    """Asserts `actual == expected` (and of the same type), naming `what` otherwise."""
    if actual != expected or type(actual) is not type(expected):
        raise AssertionError(
            f"{what}: got {actual!r} ({type(actual).__name__}), "
            f"expected {expected!r} ({type(expected).__name__})"
        )


def finish():
    sys.stdout.flush()
    sys.exit(0)
