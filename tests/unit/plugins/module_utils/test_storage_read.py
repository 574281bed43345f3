# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The read throughput check's parts: the test file, the wait for a common start, the read, the figure and its verdict."""

import os
import shutil
import tempfile

import pytest

from ansible_collections.trainops.cluster.plugins.module_utils import storage_read as st


class Clock:
    """A clock that moves only when told (or by `step` on every reading)."""

    def __init__(self, start=1000.0, step=0.0):
        self.now, self.step = start, step

    def __call__(self):
        self.now += self.step
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_write_then_read_returns_every_byte_and_a_figure(tmp_path):
    path = str(tmp_path / "probe")
    written = st.write_file(path, 3, timeout=30)
    assert written["bytes"] == 3 * st.MIB and os.path.getsize(path) == 3 * st.MIB and not written["timed_out"]
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    read = st.read_file(path, timeout=30)
    assert read["bytes"] == 3 * st.MIB and not read["timed_out"] and read["cache_dropped"] is True
    assert read["mbps"] > 0 and read["ended"] >= read["started"]
    assert set(read) == {"bytes", "seconds", "mbps", "timed_out", "cache_dropped", "started", "ended"}


def test_the_data_is_random_not_zeros(tmp_path):
    """Storage that compresses or skips zeros would read zeros back faster than the data a job reads."""
    path = tmp_path / "probe"
    st.write_file(str(path), 1, timeout=30)
    data = path.read_bytes()
    assert data.count(0) < len(data) // 100


def test_a_write_over_the_time_limit_stops_and_says_so(tmp_path):
    path = str(tmp_path / "probe")
    written = st.write_file(path, 100, timeout=3, clock=Clock(step=1.0))  # every chunk "takes" a second
    assert written["timed_out"] and 0 < written["bytes"] < 100 * st.MIB


def test_a_read_over_the_time_limit_stops_and_is_still_measured(tmp_path):
    path = str(tmp_path / "probe")
    st.write_file(path, 4, timeout=30)
    read = st.read_file(path, timeout=2.5, clock=Clock(step=1.0))  # every reading of the clock "takes" a second
    assert read["timed_out"] and read["bytes"] == 2 * st.MIB and read["mbps"] is not None


def test_a_write_replaces_a_leftover_file(tmp_path):
    path = tmp_path / "probe"
    path.write_bytes(b"x" * (5 * st.MIB))
    st.write_file(str(path), 1, timeout=30)
    assert path.stat().st_size == st.MIB


def test_remove_says_whether_the_file_was_there(tmp_path):
    path = tmp_path / "probe"
    path.write_text("x")
    assert st.remove_file(str(path)) is True and not path.exists()
    assert st.remove_file(str(path)) is False


def test_a_missing_file_is_an_error_for_the_module_to_report(tmp_path):
    with pytest.raises(FileNotFoundError):
        st.read_file(str(tmp_path / "absent"), timeout=5)


def test_every_node_waits_for_the_common_start():
    clock = Clock()
    assert st.wait_until(1004.5, 60, now=clock, sleep=clock.sleep) == 0.0
    assert clock.now == 1004.5


def test_a_late_node_begins_at_once_and_says_how_late():
    clock = Clock(start=1003.0)
    assert st.wait_until(1000.0, 60, now=clock, sleep=clock.sleep) == 3.0
    assert clock.now == 1003.0


def test_the_wait_is_bounded_when_the_start_is_far_ahead():
    """A node whose clock is far behind the controller's would otherwise wait for ever."""
    clock = Clock()
    st.wait_until(1000.0 + 86400, 60, now=clock, sleep=clock.sleep)
    assert clock.now == 1060.0


def test_no_start_time_means_at_once():
    clock = Clock()
    assert st.wait_until(None, 60, now=clock, sleep=clock.sleep) == 0.0 and clock.now == 1000.0


def test_the_figure_is_decimal_megabytes_per_second():
    assert st.mbps(500 * 10 ** 6, 2.0) == 250.0
    assert st.mbps(0, 0) is None


READ = {"bytes": 256 * st.MIB, "seconds": 0.5, "mbps": 536.9, "timed_out": False, "late": 0.0}


def test_a_fast_read_is_no_warning():
    assert st.verdict("node1", "/mnt/shared/.t", READ, 200) is None
    assert st.verdict("node1", "/mnt/shared/.t", dict(READ, mbps=12.0), None) is None  # no threshold set


def test_a_slow_read_names_the_node_its_figure_and_local_disk():
    warning = st.verdict("node2", "/mnt/shared/.t", dict(READ, mbps=95.2), 200)
    assert warning.startswith("node2: shared storage /mnt/shared read at 95.2 MB/s with every node reading at once, "
                              "below 200 MB/s.")
    assert "Stage datasets on local disk" in warning


def test_a_read_that_did_not_finish_is_warned_about_even_when_fast_so_far():
    warning = st.verdict("node3", "/mnt/shared/.t", dict(READ, timed_out=True), 200)
    assert "node3: " in warning and "did not finish within the time limit" in warning


def test_the_summary_line():
    assert st.summary("node1", "/mnt/shared/.t", READ) == "node1: 536.9 MB/s reading 256 MiB of /mnt/shared/.t in 0.50 s"
    late = st.summary("node2", "/mnt/shared/.t", dict(READ, late=2.5, timed_out=True))
    assert late.endswith("in 0.50 s (stopped at the time limit) (began 2.5 s after the others)")


@pytest.fixture(name="open_dir")
def open_dir_fixture():
    """A directory that another uid can reach (pytest's tmp_path lies below a directory of mode 0700)."""
    path = tempfile.mkdtemp(prefix="trainops-test-")
    os.chmod(path, 0o777)
    yield path
    shutil.rmtree(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="changing ids needs root")
def test_files_are_written_as_the_given_uid_and_the_ids_come_back(open_dir):
    probe = os.path.join(open_dir, "probe")
    before = (os.geteuid(), os.getegid(), os.getgroups())
    with st.as_ids(2000, 2001):
        st.write_file(probe, 1, timeout=30)
        assert st.read_file(probe, timeout=30)["bytes"] == st.MIB
    assert (os.stat(probe).st_uid, os.stat(probe).st_gid) == (2000, 2001)
    assert (os.geteuid(), os.getegid(), os.getgroups()) == before


@pytest.mark.skipif(os.geteuid() != 0, reason="changing ids needs root")
def test_the_given_uid_is_refused_where_it_may_not_write(open_dir):
    os.chmod(open_dir, 0o755)  # root's
    with pytest.raises(PermissionError):
        with st.as_ids(2000):
            st.write_file(os.path.join(open_dir, "probe"), 1, timeout=30)
    assert os.geteuid() == 0
