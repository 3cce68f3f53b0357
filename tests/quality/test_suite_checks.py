"""Suite files are checked when they are loaded: columns against the topic's model, regexes compiled.

No Spark here: every mistake must surface before a stage starts.
"""

from __future__ import annotations

import re

import pytest

from minikafka.quality import QualityError, load_suite
from minikafka.quality.suite import check_regex
from tests.cli.helpers import invoke
from tests.pipelines.helpers import ROOT, homelab_copy

FIELDS = {"out": ["url", "n", "label"]}


def load(tmp_path, text: str, name: str = "suite.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_suite(path, fields=FIELDS, topic="out")


def expect(type_name: str, **kwargs) -> str:
    lines = [f"[[expect]]\ntype = {type_name!r}"]
    for key, value in kwargs.items():
        lines.append(f"{key} = {_toml(value)}")
    return "\n".join(lines) + "\n"


def _toml(value) -> str:
    if isinstance(value, str):  # a TOML literal string: backslashes stay as written
        return f"'{value}'"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


GOOD = expect("expect_column_values_to_not_be_null", column="url")


@pytest.mark.parametrize("args, bad", [
    ({"column_A": "nope", "column_B": "n"}, "column_A 'nope'"),
    ({"column_A": "url", "column_B": "nope"}, "column_B 'nope'"),
])
def test_column_pair_naming_missing_column_fails_at_load(tmp_path, args, bad):
    with pytest.raises(QualityError) as info:
        load(tmp_path, GOOD + expect("expect_column_pair_values_to_be_equal", **args))
    message = str(info.value)
    assert "suite.toml: expectation #2 (expect_column_pair_values_to_be_equal)" in message
    assert bad in message and "is not a field of topic 'out'" in message and "['url', 'n', 'label']" in message


def test_column_list_naming_missing_column_fails_at_load_naming_its_position(tmp_path):
    with pytest.raises(QualityError, match=r"expectation #1 \(expect_compound_columns_to_be_unique\): "
                                           r"column_list\[1\] 'nope': column 'nope' is not a field"):
        load(tmp_path, expect("expect_compound_columns_to_be_unique", column_list=["url", "nope"]))


def test_column_list_given_as_a_string_is_refused_not_read_letter_by_letter(tmp_path):
    with pytest.raises(QualityError, match="'column_list' must be a non-empty list of column names, got 'url'"):
        load(tmp_path, expect("expect_compound_columns_to_be_unique", column_list="url"))


def test_column_argument_that_is_not_a_string_is_refused(tmp_path):
    with pytest.raises(QualityError, match=r"expectation #1 \(expect_column_values_to_not_be_null\): "
                                           r"'column' must be a column name \(a string\), got \['url'\]"):
        load(tmp_path, expect("expect_column_values_to_not_be_null", column=["url"]))


@pytest.mark.parametrize("type_name, arg, value, shown", [
    ("expect_column_values_to_match_regex", "regex", "^(https?://", "regex: invalid regex '^(https?://'"),
    ("expect_column_values_to_not_match_regex", "regex", "*x", "regex: invalid regex '*x'"),
    ("expect_column_values_to_match_regex_list", "regex_list", ["^a", "[b"], "regex_list[1]: invalid regex '[b'"),
    ("expect_column_values_to_not_match_regex_list", "regex_list", ["(", "b"], "regex_list[0]: invalid regex '('"),
])
def test_invalid_regex_fails_at_load_naming_the_expectation(tmp_path, type_name, arg, value, shown):
    with pytest.raises(QualityError) as info:
        load(tmp_path, GOOD + expect(type_name, column="url", **{arg: value}))
    message = str(info.value)
    assert f"suite.toml: expectation #2 ({type_name}): {shown}" in message
    assert "Java regex" in message


@pytest.mark.parametrize("pattern", [
    r"^https?://(www\.)?(youtube\.com/watch|youtu\.be/)",
    r"^\p{L}+$", r"\p{Lu}\pL", r"(?<year>\d{4})-\k<year>", r"\Q(literal)\E+", r"[a-z&&[^q]]+",
    r"\h+\z", r"a(?i)b", r"\x{1F600}", r"(?<=a)b(?!c)", r"a{2,}", r"\{x\}", r"[{}]",
])
def test_java_regex_syntax_spark_accepts_loads(tmp_path, pattern):
    assert check_regex(pattern) is None
    suite = load(tmp_path, expect("expect_column_values_to_match_regex", column="url", regex=pattern))
    assert suite.expectations[0].kwargs["regex"] == pattern  # Spark gets the pattern unchanged


@pytest.mark.parametrize("pattern, reason", [
    (r"(?P<y>\d+)", "not Java regex syntax"),
    (r"(?#comment)a", "not Java regex syntax"),
    (r"a{,3}", "must start a repetition"),
    (r"{name}", "must start a repetition"),
    (r"\U0001F600", r"\\U at position 0 is not a Java regex escape"),
    (r"(?<my_year>\d+)", "not Java regex syntax"),
])
def test_regex_python_accepts_but_java_refuses_fails_at_load(pattern, reason):
    problem = check_regex(pattern)
    assert problem is not None and "Spark matches with Java regex" in problem
    assert re.search(reason, problem)


def test_regex_that_is_not_a_string_is_refused(tmp_path):
    with pytest.raises(QualityError, match=r"#1 \(expect_column_values_to_match_regex\): regex: must be a string, "
                                           r"got int 5"):
        load(tmp_path, expect("expect_column_values_to_match_regex", column="url", regex=5))


@pytest.mark.parametrize("type_name", ["expect_the_moon", "expectation", "column_map_expectation", "ExpectColumnToExist"])
def test_unknown_expectation_type_fails_at_load(tmp_path, type_name):
    with pytest.raises(QualityError, match=rf"expectation #1: unknown expectation type '{type_name}'"):
        load(tmp_path, expect(type_name, column="url"))


def test_unknown_expectation_argument_fails_at_load(tmp_path):
    with pytest.raises(QualityError, match=r"#1 \(expect_column_values_to_not_be_null\): invalid arguments: .*colum"):
        load(tmp_path, '[[expect]]\ntype = "expect_column_values_to_not_be_null"\ncolumn = "url"\ncolum = "x"\n')


@pytest.mark.parametrize("text, match", [
    ('policy = "sometimes"\n' + GOOD, r"policy must be one of \('fail', 'warn', 'quarantine'\), got 'sometimes'"),
    ("policy = 1\n" + GOOD, "policy must be one of"),
    ('expect = "expect_column_values_to_not_be_null"\n', r"'expect' must be an array of tables \(\[\[expect\]\]"),
    ('[expect]\ntype = "expect_column_values_to_not_be_null"\ncolumn = "url"\n', "'expect' must be an array of tables"),
    ('expect = ["expect_column_values_to_not_be_null"]\n', r"expectation #1: must be a table"),
    ('[[expect]]\ncolumn = "url"\n', "expectation #1: needs a 'type'"),
    ("name = 5\n" + GOOD, "'name' must be a non-empty string, got 5"),
    ("topic = ['out']\n" + GOOD, "'topic' must be a non-empty string"),
    ("colour = 1\n" + GOOD, r"unknown key\(s\) \['colour'\]"),
    ("row_count = 0.5\n" + GOOD, r"'row_count' must be a table \(\[row_count\]"),
    (GOOD + "[row_count]\nmin = 0.5\n", r"\[row_count\]: unknown key\(s\) \['min'\]"),
    (GOOD + '[row_count]\nmin_ratio = "half"\n', r"\[row_count\]: min_ratio must be a number >= 0, got 'half'"),
    (GOOD + "[row_count]\nmax_ratio = -1\n", "max_ratio must be a number >= 0"),
    (GOOD + "[row_count]\nmin_ratio = 2.0\nmax_ratio = 1.0\n", "min_ratio 2.0 is above max_ratio 1.0"),
    ("[row_count]\n", r"give min_ratio, max_ratio or both"),
    ('policy = "warn"\n', "the suite has no expectations"),
    ("[[expect\n", "invalid TOML"),
])
def test_malformed_suite_file_fails_at_load_naming_the_file(tmp_path, text, match):
    with pytest.raises(QualityError, match=match) as info:
        load(tmp_path, text, name="odd.toml")
    assert str(info.value).startswith(str(tmp_path / "odd.toml"))


def test_shipped_suites_pass_the_load_checks(tmp_path):
    from minikafka.pipelines import load_pipeline

    defn = load_pipeline(homelab_copy(tmp_path))
    loaded = [s for stage in defn.stages for s in stage.suites]
    assert len(loaded) == 4 and all(s.expectations for s in loaded)
    assert {s.path.parent for s in loaded} == {ROOT / "conf" / "quality"}


BAD_REGEX_SUITE = ('topic = "rss.youtube"\npolicy = "fail"\n' + GOOD
                   + expect("expect_column_values_to_match_regex", column="url", regex="^https?://(www"))


def _pipeline_with_bad_suite(tmp_path):
    """The example pipeline whose youtube suite holds an invalid regex; (pipeline, suite path)."""
    bad = tmp_path / "bad.toml"
    bad.write_text(BAD_REGEX_SUITE)
    return homelab_copy(tmp_path, replace={'expectations = ["quality/youtube.toml"]': f'expectations = ["{bad}"]'}), bad


def test_check_stops_on_a_bad_suite_before_spark_starts(tmp_path):
    pipeline, bad = _pipeline_with_bad_suite(tmp_path)
    result = invoke("check", pipeline)
    assert result.exit_code == 2, result.output
    assert f"{bad}: expectation #2 (expect_column_values_to_match_regex): regex: invalid regex" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "homelab.sqlite").exists()  # nothing started, no ledger written


def test_run_with_a_bad_suite_and_no_ledger_stops_on_the_ledger_before_loading_suites(tmp_path):
    # run loads a stage's suites only once that stage has rows (no great-expectations import
    # for a night with nothing new), so without a ledger it stops there, writing nothing
    pipeline, _ = _pipeline_with_bad_suite(tmp_path)
    result = invoke("run", pipeline)
    assert result.exit_code == 1, result.output
    assert "no ledger at" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "homelab.sqlite").exists()


def test_check_names_a_suite_column_the_topic_lacks(tmp_path):
    bad = tmp_path / "pair.toml"
    bad.write_text('topic = "rss.youtube"\n'
                   + expect("expect_column_pair_values_to_be_equal", column_A="url", column_B="link"))
    pipeline = homelab_copy(tmp_path, replace={'expectations = ["quality/youtube.toml"]': f'expectations = ["{bad}"]'})
    result = invoke("check", pipeline)
    assert result.exit_code == 2
    assert "column_B 'link': column 'link' is not a field of topic 'rss.youtube'" in result.output
    assert not (tmp_path / "homelab.sqlite").exists()
