"""The Agent Framework reports usage as running totals over its tool loop; the adapter
turns them into one AG-UI ``TokenUsage`` per report (what the calls since the last one
added), so the run's final event counts every call once."""

from __future__ import annotations

from outlast.agents.maf import RunningUsage


def test_running_totals_become_what_each_report_added() -> None:
    usage = RunningUsage()
    reports = [{"input_token_count": 11, "output_token_count": 3, "total_token_count": 14},
               {"input_token_count": 111, "output_token_count": 33, "total_token_count": 144},
               {"input_token_count": 122, "output_token_count": 36, "total_token_count": 158}]
    got = [usage.call(r, "m") for r in reports]
    assert got == [
        {"inputTokens": 11, "outputTokens": 3, "totalTokens": 14, "model": "m"},
        {"inputTokens": 100, "outputTokens": 30, "totalTokens": 130, "model": "m"},
        {"inputTokens": 11, "outputTokens": 3, "totalTokens": 14, "model": "m"}]


def test_nothing_new_bad_counts_and_a_restarted_count() -> None:
    usage = RunningUsage()
    assert usage.call({"input_token_count": 5}) == {"inputTokens": 5}
    assert usage.call({"input_token_count": 5}) is None  # the same total again
    assert usage.call({"input_token_count": -3, "output_token_count": True}) is None
    assert usage.call(None) is None and usage.call("12") is None
    assert usage.call({"input_token_count": 2}) == {"inputTokens": 2}  # counting anew
