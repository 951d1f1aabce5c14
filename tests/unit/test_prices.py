"""prices.csv (docs/costs.md): read strictly, one error naming the line, the most specific row
valid on a day prices it."""

from __future__ import annotations

import datetime as dt

import polars as pl
import pytest

from faultline.analytics.prices import PricesError, load_prices, parse_prices, price_days

HEAD = "provider,cluster,gpu_model,usd_per_gpu_hour,valid_from,valid_to\n"
GOOD = (
    HEAD
    + "northwind,*,H100-SXM5-80GB,2.59,2026-11-01,\n"
    + "northwind,a2,H100-SXM5-80GB,2.10,2026-11-01,2026-11-10\n"
    + "bluepeak,*,*,2.40,,2026-11-14\n"
    + "bluepeak,*,*,2.28,2026-11-15,\n"
)


def test_a_good_file_reads_every_row_with_open_ends():
    df = parse_prices(GOOD.encode())
    assert df.height == 4
    assert df.row(2, named=True) == {
        "provider": "bluepeak",
        "cluster": "*",
        "gpu_model": "*",
        "usd_per_gpu_hour": 2.40,
        "valid_from": None,
        "valid_to": dt.date(2026, 11, 14),
        "line_no": 4,
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + "northwind,*,H100,n/a,2026-11-01,\n", "prices.csv, line 2: usd_per_gpu_hour 'n/a' is not a number"),
        (HEAD + "northwind,*,H100,-1,2026-11-01,\n", "prices.csv, line 2: usd_per_gpu_hour '-1' is not a price >= 0"),
        (HEAD + "a,*,H100,1,2026-11-01,\n" + "a,*,H100,1,2026-13-01,\n", "prices.csv, line 3: valid_from '2026-13-01'"),
        (HEAD + "a,*,H100,1,2026-11-05,2026-11-01\n", "prices.csv, line 2: valid_to 2026-11-01 is before valid_from"),
        (HEAD + "*,*,H100,1,,\n", "prices.csv, line 2: provider must be named"),
        (HEAD + "a,,H100,1,,\n", "prices.csv, line 2: cluster is empty"),
        (HEAD + "a,*,H100,1\n", "prices.csv, line 2: 4 fields, the header has 6"),
        ("provider,cluster,usd_per_gpu_hour\n", "prices.csv, line 1: missing columns gpu_model, valid_from, valid_to"),
        ("", "prices.csv, line 1: empty file"),
        (
            HEAD + "a,*,H100,1,2026-11-01,2026-11-10\n" + "b,*,H100,1,,\n" + "a,*,H100,2,2026-11-10,\n",
            "prices.csv, lines 2 and 4: both price a/*/H100 on 2026-11-10",
        ),
    ],
)
def test_a_bad_file_is_one_error_naming_the_line(text, message):
    with pytest.raises(PricesError) as err:
        parse_prices(text.encode())
    assert str(err.value).startswith(message)


def test_missing_file_is_no_prices_unless_it_was_asked_for(tmp_path):
    assert load_prices(tmp_path / "prices.csv") is None
    assert load_prices(None) is None
    with pytest.raises(PricesError, match="no such file"):
        load_prices(tmp_path / "prices.csv", required=True)
    (tmp_path / "prices.csv").write_text(GOOD)
    assert load_prices(tmp_path / "prices.csv").height == 4


def test_the_most_specific_row_valid_that_day_wins():
    prices = parse_prices(GOOD.encode())
    keys = pl.DataFrame(
        {
            "provider": ["northwind", "northwind", "northwind", "northwind", "bluepeak", "bluepeak", "redrock"],
            "cluster": ["a1", "a2", "a2", "a2", "b1", "b1", "c1"],
            "gpu_model": ["H100-SXM5-80GB"] * 3 + ["A100-SXM4-80GB", "B200-180GB", None, "H100-SXM5-80GB"],
            "date": [dt.date(2026, 11, d) for d in (3, 3, 11, 3, 14, 15, 3)],
        }
    )
    got = price_days(keys, prices)["usd_per_gpu_hour"].to_list()
    # a1: the provider-wide row; a2 before and after its own row ends; no A100 row; bluepeak's
    # price change; a node without a model takes a '*' row; an unpriced provider
    assert got == [2.59, 2.10, 2.59, None, 2.40, 2.28, None]
    assert price_days(keys, None)["usd_per_gpu_hour"].null_count() == keys.height
