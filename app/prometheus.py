"""Prometheus HTTP API reads for the live pages: instant vectors and ranges as pandas frames.

A frame has one column per label plus ``value`` (and ``time``, Unix seconds, for ranges); ``+Inf`` stays
``inf`` ("never" in docs/metrics.md). Any failure to get an answer raises :class:`PrometheusUnavailable`
with one line naming the URL and the fix, so a page can say it instead of showing a traceback.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import pandas as pd


class PrometheusUnavailable(RuntimeError):
    """Prometheus did not answer a query; ``str()`` names the URL and what to check."""


class PrometheusClient:
    def __init__(self, url: str, timeout_s: float = 5.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s

    def instant(self, expr: str) -> pd.DataFrame:
        """The current value of every series ``expr`` returns."""
        return self._frame(vector_frame, self._get("query", {"query": expr}))

    def range(self, expr: str, seconds: float, step_s: float) -> pd.DataFrame:
        """``expr`` evaluated every ``step_s`` over the last ``seconds``."""
        end = time.time()
        params = {"query": expr, "start": end - seconds, "end": end, "step": step_s}
        return self._frame(matrix_frame, self._get("query_range", params))

    def _get(self, endpoint: str, params: dict[str, Any]) -> list[dict[str, Any]]:
        """The ``result`` of one API call. A query Prometheus refuses (400, 422) names its error; any other
        failure (not answering, an HTTP error from a proxy before it, a body that is not the API's JSON)
        says Prometheus is unavailable at this URL."""
        url = f"{self.url}/api/v1/{endpoint}?{urllib.parse.urlencode(params)}"
        try:
            with urllib.request.urlopen(url, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (400, 422):  # the query itself is wrong
                error = _api_error(exc.read()) or exc.reason
                query = params["query"]
                raise PrometheusUnavailable(f"Prometheus at {self.url} refused {query!r}: {error}") from None
            raise self._unavailable(f"HTTP {exc.code} {exc.reason}") from None
        except (OSError, ValueError) as exc:
            raise self._unavailable(getattr(exc, "reason", exc)) from None
        try:
            result = json.loads(body)["data"]["result"]
        except (ValueError, KeyError, TypeError):
            raise self._unavailable(f"an answer that is not the query API's JSON: {_excerpt(body)}") from None
        if not isinstance(result, list):
            raise self._unavailable(f"a result that is not a list: {_excerpt(body)}")
        return result

    def _frame(self, to_frame, result: list[dict[str, Any]]) -> pd.DataFrame:
        try:
            return to_frame(result)
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise self._unavailable(f"a result the app cannot read ({type(exc).__name__}: {exc})") from None

    def _unavailable(self, reason: object) -> PrometheusUnavailable:
        return PrometheusUnavailable(
            f"Prometheus at {self.url} is not answering ({reason}): is it running? "
            "Point app.prometheus_url in the configuration at it."
        )


def _api_error(body: bytes) -> str | None:
    """The ``error`` of a Prometheus API error body; None when the body is something else (a proxy's HTML)."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return None
    return str(error) if error else None


def _excerpt(body: bytes, size: int = 80) -> str:
    """The start of a body on one line, for an error message."""
    text = " ".join(body[:size].decode("utf-8", "replace").split())
    return repr(text + ("…" if len(body) > size else ""))


def vector_frame(result: list[dict[str, Any]]) -> pd.DataFrame:
    """An instant-query result as rows of labels plus ``value``."""
    rows = [{**r["metric"], "value": float(r["value"][1])} for r in result]
    return pd.DataFrame(rows, columns=_columns(result, "value"))


def matrix_frame(result: list[dict[str, Any]]) -> pd.DataFrame:
    """A range-query result as rows of labels plus ``time`` and ``value``."""
    rows = [{**r["metric"], "time": float(t), "value": float(v)} for r in result for t, v in r["values"]]
    return pd.DataFrame(rows, columns=_columns(result, "time", "value"))


def _columns(result: list[dict[str, Any]], *values: str) -> list[str]:
    labels = sorted({label for r in result for label in r["metric"]})
    return [*labels, *values]
