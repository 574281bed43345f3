# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The kernel's OOM kills read from real kernel logs (tests/fixtures/oom, README there): whose process, how much it held,
a cgroup's limit or the host's memory; the kills an attempt added; and how status says them."""

from pathlib import Path

from ansible_collections.trainops.cluster.plugins.module_utils import _oom as oom

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "oom"


def log(name):
    return (FIXTURES / name).read_text()


def test_the_hosts_memory_ran_out_both_lines_of_one_kill():
    assert oom.kills(log("host-python.log")) == [{"pid": 7899, "task": "python", "uid": 0, "memcg": False, "rss_kb": 15370088}]


def test_a_containers_limit_the_killed_line_alone():
    [kill] = oom.kills(log("memcg-uwsgi.log"))
    assert kill == {"pid": 63214, "task": "uwsgi", "uid": 0, "memcg": True, "rss_kb": 164992 + 52176 + 92}


def test_several_kills_in_order_and_an_old_kernel_without_uid():
    assert [(k["pid"], k["task"]) for k in oom.kills(log("memcg-many.log"))] == [
        (140339, "python3"), (141313, "mount"), (141314, "mount"), (141320, "python3")]
    assert oom.kills(log("host-old.log")) == [{"pid": 15784, "task": "python3", "uid": None, "memcg": False, "rss_kb": 7316},
                                              {"pid": 15925, "task": "(resolved)", "uid": None, "memcg": False, "rss_kb": 7648}]


def test_the_kills_an_attempt_added_of_the_training_users_processes():
    lines = log("memcg-many.log").splitlines()
    before, after = oom.kills("\n".join(lines[:2])), oom.kills("\n".join(lines))
    assert [k["pid"] for k in oom.new(before, after)] == [141314, 141320]
    # The format of a rank of the training user (uid 2000) killed at its container's limit: another user's kill is not the job's.
    rank = ("[ 9001.1] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=x,mems_allowed=0,oom_memcg=/libpod_parent/libpod-1,"
            "task_memcg=/libpod_parent/libpod-1,task=python3,pid=4242,uid=2000\n[ 9001.2] Memory cgroup out of memory: Killed process "
            "4242 (python3) total-vm:4000000kB, anon-rss:2000000kB, file-rss:4000kB, shmem-rss:0kB, UID:2000 pgtables:400kB oom_score_adj:0")
    found = oom.new(after, oom.kills(log("memcg-many.log") + "\n" + rank), uid=2000)
    assert found == [{"pid": 4242, "task": "python3", "uid": 2000, "memcg": True, "rss_kb": 2004000}]
    assert oom.said(found) == "killed by the kernel's OOM killer: python3 (pid 4242) held 1.9 GiB (its container's memory limit)"
    assert oom.new(after, oom.kills(log("memcg-many.log")), uid=2000) == []


def test_a_killed_rank_is_said_with_its_rank():
    # The runner's sampler saw pid 4242 as global rank 5 of the attempt; 4243 (a DataLoader's worker) was no rank.
    killed = [{"pid": 4242, "task": "python3", "uid": 2000, "memcg": False, "rss_kb": 31 * 2 ** 20},
              {"pid": 4243, "task": "pt_data_worker", "uid": 2000, "memcg": False, "rss_kb": 2 ** 20}]
    found = oom.ranked(killed, {4242: 5, 4100: 4})
    assert [k.get("rank") for k in found] == [5, None]
    assert oom.said(found) == ("killed by the kernel's OOM killer: rank 5, python3 (pid 4242) held 31.0 GiB (the node's memory "
                               "ran out), pt_data_worker (pid 4243) held 1.0 GiB (the node's memory ran out)")
