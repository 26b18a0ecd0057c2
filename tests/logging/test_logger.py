"""get_logger: line format, ERROR location, colours on TTYs only, warning de-duplication, rank files."""

import io
import logging
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from rlearn.distributed.utils import DistributedError
from rlearn.logging import get_logger
from rlearn.logging.logger import get_rank, rank_log_file

LINE = re.compile(r"^\d{2}/\d{2} \d{2}:\d{2}:\d{2} - (?P<name>\S+) - (?P<level>[A-Z]+) - (?P<rest>.*)$")


def _name():
    return f"rlearn.test.{uuid.uuid4().hex[:8]}"


class _Tty(io.StringIO):
    def isatty(self):
        return True


def _lines(text):
    return [line for line in text.splitlines() if line]


def test_line_format_and_no_propagation(capsys, caplog):
    name = _name()
    logger = get_logger(name)
    with caplog.at_level(logging.DEBUG):  # caplog listens on the root logger
        logger.info("this is a test")
        logger.debug("hidden at INFO")
    lines = _lines(capsys.readouterr().out)
    assert len(lines) == 1
    match = LINE.match(lines[0])
    assert match and match["name"] == name and match["level"] == "INFO" and match["rest"] == "this is a test"
    assert logger.propagate is False and caplog.records == []
    assert "\033[" not in lines[0]  # captured output is not a terminal: no colours


def test_error_lines_carry_path_function_and_line(capsys):
    logger = get_logger(_name())

    def failing_step():
        logger.error("division by zero"); return sys._getframe().f_lineno  # noqa: E702 - same line on purpose

    line_no = failing_step()
    (line,) = _lines(capsys.readouterr().out)
    match = LINE.match(line)
    assert match["level"] == "ERROR"
    assert match["rest"] == f"{__file__} - failing_step - {line_no} - division by zero"
    logger.critical("boom")
    assert f" - CRITICAL - {__file__} - test_error_lines_carry_path_function_and_line - " in capsys.readouterr().out


def test_colours_only_on_a_terminal(monkeypatch, tmp_path):
    tty = _Tty()
    monkeypatch.setattr(sys, "stdout", tty)
    logger = get_logger(_name(), log_file=tmp_path / "run.log")
    logger.warning("careful")
    logger.error("broken")
    logger.info("plain")
    out = tty.getvalue()
    assert "\033[33mWARNING\033[0m - careful" in out
    assert "\033[31mERROR\033[0m - " in out
    assert " - INFO - plain" in out
    assert "\033[" not in (tmp_path / "run.log").read_text()  # files never get colour codes


def test_repeated_warnings_are_shown_once(capsys):
    logger = get_logger(_name())
    for _ in range(3):
        logger.warning("key 'x' is not declared")
        logger.info("same info")
    logger.warning("key 'y' is not declared")
    logger.warning("key %r is not declared", "x")  # same final text: dropped too
    lines = [LINE.match(line)["rest"] for line in _lines(capsys.readouterr().out)]
    assert lines == ["key 'x' is not declared", "same info", "same info", "same info", "key 'y' is not declared"]


def test_second_call_reuses_handlers_and_updates_level(tmp_path, capsys):
    name = _name()
    log_file = tmp_path / "nested" / "dir" / "exp.log"
    first = get_logger(name, log_file=log_file)
    second = get_logger(name, log_file=str(log_file), log_level="debug")
    assert first is second and len(second.handlers) == 2
    second.debug("once")
    assert _lines(capsys.readouterr().out)[0].endswith(" - DEBUG - once")
    assert log_file.read_text().count("once") == 1  # parent directories were created
    other = tmp_path / "other.log"
    get_logger(name, log_file=other)
    assert len(second.handlers) == 3
    second.info("both files")
    assert "both files" in log_file.read_text() and "both files" in other.read_text()


@pytest.mark.parametrize("level", ["LOUD", "", 15, True, None])
def test_unknown_level_raises(level):
    with pytest.raises(ValueError, match="log_level"):
        get_logger(_name(), log_level=level)


def test_rank_helpers(monkeypatch):
    assert rank_log_file("work/exp.log", 0) == Path("work/exp.log")
    assert rank_log_file("work/exp.log", 3) == Path("work/exp_rank3.log")
    assert rank_log_file("work/exp", 1) == Path("work/exp_rank1")
    monkeypatch.setenv("RANK", "2")
    assert get_rank() == 2
    monkeypatch.setenv("RANK", "two")
    with pytest.raises(DistributedError, match="RANK must be an int >= 0, got 'two'"):
        get_rank()
    monkeypatch.delenv("RANK")
    assert get_rank() == 0


_CHILD = """
import sys
from rlearn.logging import get_logger
logger = get_logger("rlearn.child", log_file=sys.argv[1], distributed=sys.argv[2] == "1")
logger.info("hello from a rank")
logger.error("an error")
"""


def _run_child(log_file, distributed, rank):
    env = {**os.environ, "RANK": str(rank), "WORLD_SIZE": "2"}
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(log_file), "1" if distributed else "0"],
        env=env, capture_output=True, text=True, timeout=120, check=True,
    )


def test_rank_files_in_subprocesses(tmp_path):
    log_file = tmp_path / "logs" / "exp.log"
    rank1 = _run_child(log_file, distributed=True, rank=1)
    assert sorted(p.name for p in log_file.parent.iterdir()) == ["exp_rank1.log"]
    text = (log_file.parent / "exp_rank1.log").read_text()
    assert "- rlearn.child - INFO - hello from a rank" in text and " - ERROR - <string> - <module> - 6 - an error" in text
    assert "hello from a rank" not in rank1.stdout and "an error" in rank1.stdout  # rank > 0 console: errors only

    _run_child(log_file, distributed=True, rank=0)
    assert sorted(p.name for p in log_file.parent.iterdir()) == ["exp.log", "exp_rank1.log"]
    assert "hello from a rank" in log_file.read_text()

    other = tmp_path / "plain" / "exp.log"
    _run_child(other, distributed=False, rank=1)
    assert not other.parent.exists()  # distributed=False: other ranks write no file


def test_get_instance_current_instance_and_print_log(capsys):
    from rlearn.logging import get_current_instance, get_instance, print_log

    name = _name()
    logger = get_instance(name, log_level="DEBUG")
    assert logger is logging.getLogger(name) and get_current_instance() is logger
    assert get_instance(name) is logger  # returned again, not duplicated
    print_log("plain print")
    print_log("via name", logger=name, level=logging.WARNING)
    print_log("via current", logger="current")
    print_log("via object", logger=logger, level=logging.DEBUG)
    print_log("never shown", logger="silent")
    out = _lines(capsys.readouterr().out)
    assert out[0] == "plain print"
    assert [LINE.match(line).group("level", "rest") for line in out[1:]] == [
        ("WARNING", "via name"), ("INFO", "via current"), ("DEBUG", "via object"),
    ]
    with pytest.raises(ValueError, match=r"no logger named 'nobody.*'; create it with get_instance"):
        print_log("x", logger=f"nobody.{uuid.uuid4().hex}")
    with pytest.raises(TypeError, match="logger must be"):
        print_log("x", logger=3)
    set_up = get_logger(_name())  # a logger set up by get_logger becomes the current one
    assert get_current_instance() is set_up and get_instance(name) is logger and get_current_instance() is logger
