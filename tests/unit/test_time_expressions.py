import random
import time
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from memplane_server.core.retrieval.time_expressions import TimeRange, parse_time_range

# A Thursday afternoon; chosen so "this week", "last Monday" and "on Thursday" all differ.
NOW = datetime(2023, 6, 15, 14, 0, tzinfo=timezone.utc)
SHANGHAI = ZoneInfo("Asia/Shanghai")


def day(y, m, d, h=0):
    return datetime(y, m, d, h, tzinfo=timezone.utc)


def span(query, now=NOW, zone=None):
    found = parse_time_range(query, now, zone)
    return found and (found.start, found.end)


def test_query_without_time_names_no_range():
    assert parse_time_range("how do I rotate the API keys?", NOW) is None


def test_today_is_the_current_day():
    assert span("what did we do today") == (day(2023, 6, 15), day(2023, 6, 16))


def test_yesterday_is_the_day_before_today():
    assert span("yesterday's deploy") == (day(2023, 6, 14), day(2023, 6, 15))


def test_tomorrow_is_the_day_after_today():
    assert span("what is planned for tomorrow") == (day(2023, 6, 16), day(2023, 6, 17))


def test_this_week_runs_from_monday_to_next_monday():
    assert span("this week") == (day(2023, 6, 12), day(2023, 6, 19))


def test_last_week_is_monday_to_monday_before_this_week():
    assert span("what broke last week?") == (day(2023, 6, 5), day(2023, 6, 12))


def test_next_week_follows_this_week():
    assert span("next week") == (day(2023, 6, 19), day(2023, 6, 26))


def test_last_month_is_the_previous_calendar_month():
    assert span("last month") == (day(2023, 5, 1), day(2023, 6, 1))


def test_last_month_in_january_is_december_of_the_year_before():
    assert span("last month", now=day(2024, 1, 10)) == (day(2023, 12, 1), day(2024, 1, 1))


@pytest.mark.parametrize("query, year", [("this year", 2023), ("last year", 2022)])
def test_this_and_last_year_are_whole_calendar_years(query, year):
    assert span(query) == (day(year, 1, 1), day(year + 1, 1, 1))


def test_english_is_case_insensitive():
    assert span("LAST WEEK") == span("last week")


def test_days_ago_is_that_whole_day():
    assert span("3 days ago") == (day(2023, 6, 12), day(2023, 6, 13))


def test_weeks_ago_is_the_monday_based_week_it_lands_in():
    assert span("two weeks ago") == (day(2023, 5, 29), day(2023, 6, 5))


def test_months_ago_clamps_to_a_shorter_month():
    assert span("3 months ago", now=day(2023, 5, 31)) == (day(2023, 2, 1), day(2023, 3, 1))


def test_a_year_ago_is_last_calendar_year():
    assert span("a year ago") == (day(2022, 1, 1), day(2023, 1, 1))


@pytest.mark.parametrize("query", ["in May 2023", "May 2023", "during May of 2023"])
def test_month_with_year_is_that_month(query):
    assert span(query) == (day(2023, 5, 1), day(2023, 6, 1))


def test_month_without_year_already_past_is_this_years():
    assert span("what happened in May") == (day(2023, 5, 1), day(2023, 6, 1))


def test_current_month_without_year_is_this_month():
    assert span("in June") == (day(2023, 6, 1), day(2023, 7, 1))


@pytest.mark.parametrize("query", ["in September", "in Sept", "in sep"])
def test_month_without_year_still_ahead_is_last_years(query):
    assert span(query) == (day(2022, 9, 1), day(2022, 10, 1))


@pytest.mark.parametrize("query", [
    "on 8 May 2023", "May 8, 2023", "8 May 2023", "May 8th 2023", "the 8th of May", "2023-05-08",
    "2023/05/08", "2023-05-08T10:00:00Z", "2023年5月8日", "5月8日", "5月8号", "五月八日",
])
def test_day_forms_name_that_day(query):
    assert span(query) == (day(2023, 5, 8), day(2023, 5, 9))


def test_day_without_year_still_ahead_is_last_years():
    assert span("Dec 25") == (day(2022, 12, 25), day(2022, 12, 26))


@pytest.mark.parametrize("query", ["in 2022", "the summer of 2022", "2022年"])
def test_year_is_the_whole_year(query):
    assert span(query) == (day(2022, 1, 1), day(2023, 1, 1))


@pytest.mark.parametrize("query", [
    "May I ask what we decided?", "march on to the next step", "these 2 may differ",
    "I have 2023 points", "wait a second", "in 1850", "the 1990年代",
])
def test_words_that_only_look_like_times_name_no_range(query):
    assert parse_time_range(query, NOW) is None


@pytest.mark.parametrize("query", ["31 February 2023", "2023-02-30", "2月30日", "2023-13-01"])
def test_impossible_dates_name_no_range(query):
    assert parse_time_range(query, NOW) is None


def test_last_weekday_is_the_most_recent_one_before_today():
    assert span("last Monday") == (day(2023, 6, 12), day(2023, 6, 13))


def test_last_weekday_named_on_that_weekday_is_a_week_ago():
    assert span("last Thursday") == (day(2023, 6, 8), day(2023, 6, 9))


def test_on_weekday_named_on_that_weekday_is_today():
    assert span("on Thursday") == (day(2023, 6, 15), day(2023, 6, 16))


def test_last_weekend_is_saturday_and_sunday_of_last_week():
    assert span("last weekend") == (day(2023, 6, 10), day(2023, 6, 12))


def test_earlier_this_year_runs_from_new_year_to_now():
    assert span("earlier this year") == (day(2023, 1, 1), NOW)


@pytest.mark.parametrize("query", ["over the past 3 days", "in the last 3 days", "last three days"])
def test_past_n_days_is_a_rolling_window_ending_now(query):
    assert span(query) == (NOW - timedelta(days=3), NOW)


def test_the_last_week_is_rolling_unlike_last_week():
    assert span("in the last week") == (NOW - timedelta(days=7), NOW)


@pytest.mark.parametrize("query", ["recently", "lately", "最近", "近期"])
def test_recently_means_the_past_fourteen_days(query):
    assert span(query) == (NOW - timedelta(days=14), NOW)


def test_week_before_a_date_is_the_seven_days_before_it():
    assert span("the week before 9 June 2023") == (day(2023, 6, 2), day(2023, 6, 9))


def test_day_before_yesterday_composes_from_yesterday():
    assert span("the day before yesterday") == (day(2023, 6, 13), day(2023, 6, 14))


@pytest.mark.parametrize("query, days_back", [("今天", 0), ("昨天", 1), ("前天", 2), ("大前天", 3)])
def test_chinese_day_words(query, days_back):
    first = day(2023, 6, 15) - timedelta(days=days_back)
    assert span(query) == (first, first + timedelta(days=1))


@pytest.mark.parametrize("query", ["本周", "这周", "这个星期"])
def test_chinese_this_week(query):
    assert span(query) == (day(2023, 6, 12), day(2023, 6, 19))


@pytest.mark.parametrize("query", ["上周", "上个星期", "上星期", "上个礼拜"])
def test_chinese_last_week(query):
    assert span(query) == (day(2023, 6, 5), day(2023, 6, 12))


@pytest.mark.parametrize("query, month", [("本月", 6), ("这个月", 6), ("上个月", 5), ("上月", 5)])
def test_chinese_calendar_months(query, month):
    assert span(query) == (day(2023, month, 1), day(2023, month + 1, 1))


@pytest.mark.parametrize("query, year", [("今年", 2023), ("去年", 2022), ("前年", 2021)])
def test_chinese_calendar_years(query, year):
    assert span(query) == (day(year, 1, 1), day(year + 1, 1, 1))


@pytest.mark.parametrize("query, first, after", [
    ("五月", day(2023, 5, 1), day(2023, 6, 1)),
    ("5月份", day(2023, 5, 1), day(2023, 6, 1)),
    ("十二月", day(2022, 12, 1), day(2023, 1, 1)),
    ("2023年5月", day(2023, 5, 1), day(2023, 6, 1)),
    ("去年五月", day(2022, 5, 1), day(2022, 6, 1)),
])
def test_chinese_months_without_year_are_the_most_recent(query, first, after):
    assert span(query) == (first, after)


@pytest.mark.parametrize("query, first, after", [
    ("三天前", day(2023, 6, 12), day(2023, 6, 13)),
    ("3天前", day(2023, 6, 12), day(2023, 6, 13)),
    ("两周前", day(2023, 5, 29), day(2023, 6, 5)),
    ("三个月前", day(2023, 3, 1), day(2023, 4, 1)),
])
def test_chinese_n_units_ago_cover_the_whole_unit(query, first, after):
    assert span(query) == (first, after)


@pytest.mark.parametrize("query", ["周一", "星期一", "礼拜一"])
def test_chinese_bare_weekday_is_the_most_recent_one(query):
    assert span(query) == (day(2023, 6, 12), day(2023, 6, 13))


def test_chinese_last_week_weekday_is_in_the_previous_calendar_week():
    assert span("上周一") == (day(2023, 6, 5), day(2023, 6, 6))


def test_chinese_rolling_window_ends_now():
    assert span("最近三天") == (NOW - timedelta(days=3), NOW)


@pytest.mark.parametrize("query", ["如今天气很好", "以前天天跑步", "马上周末了", "两周一次"])
def test_chinese_words_containing_time_characters_are_not_misread(query):
    assert parse_time_range(query, NOW) is None


def test_chinese_month_before_qian_is_that_month_not_months_ago():
    # "三月前" says "before March"; "three months ago" needs 个 ("三个月前").
    assert span("三月前") == (day(2023, 3, 1), day(2023, 4, 1))


def test_zone_decides_which_local_day_is_today():
    late_utc = day(2023, 6, 15, 20)  # already 04:00 on the 16th in Shanghai
    assert span("today", now=late_utc, zone=SHANGHAI) == (day(2023, 6, 15, 16), day(2023, 6, 16, 16))


def test_zone_decides_which_week_is_this_week():
    sunday_utc = day(2023, 6, 18, 17)  # Monday 01:00 in Shanghai, so a new week there
    assert span("这周", now=sunday_utc, zone=SHANGHAI) == (day(2023, 6, 18, 16), day(2023, 6, 25, 16))


def test_results_are_utc_aware():
    found = parse_time_range("昨天", NOW, SHANGHAI)
    assert found.start.tzinfo is timezone.utc and found.end.tzinfo is timezone.utc


def test_leftmost_expression_wins():
    assert parse_time_range("yesterday or last week", NOW).matched == "yesterday"


def test_longest_expression_at_the_same_place_wins():
    assert parse_time_range("我去年五月去了北京", NOW).matched == "去年五月"


def test_matched_is_the_substring_of_the_query():
    assert parse_time_range("What did Caroline do in May 2023?", NOW).matched == "in May 2023"


def test_naive_now_is_taken_as_utc():
    assert span("today", now=NOW.replace(tzinfo=None)) == span("today")


def test_random_input_never_raises():
    tokens = ["in", "on", "the", "last", "past", "May", "Sept", "8th", "2023", "0", "99", "-", "/", ".", ",",
              "ago", "days", "week", "before", "after", "年", "月", "日", "号", "周", "星期", "上", "去", "前",
              "天", "十", "两", "个", "最近", "9999", "1900", "\x00", "\u200b", "é"]
    rng = random.Random(0)
    for _ in range(2000):
        query = rng.choice(["", " "]).join(rng.choices(tokens, k=rng.randint(0, 8)))
        found = parse_time_range(query, NOW, rng.choice([None, SHANGHAI]))
        assert found is None or (isinstance(found, TimeRange) and found.start <= found.end)


@pytest.mark.parametrize("query", ["next year", "明年", "tomorrow"])
def test_range_past_the_end_of_the_calendar_is_none(query):
    assert parse_time_range(query, datetime(9999, 12, 31, 12, tzinfo=timezone.utc)) is None


def test_long_query_is_parsed_quickly():
    query = "in May the 8 " * 2000 + "上个" * 2000
    started = time.perf_counter()
    parse_time_range(query, NOW)
    assert time.perf_counter() - started < 1.0
