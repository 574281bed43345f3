# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""trainops-job: this node's part of the training jobs of playbooks/train.yml (role trainops.cluster.train), one
standard-library Python program that owns the job's files (records.py names them all). The role installs it as one
archive, /opt/trainops/lib/trainops_job.zip (Python imports from it), with /usr/local/bin/trainops-job in front; the
command line is cli.py's.

records     the job's settings, folder and marks; the states and stop reasons
runner      run: the command, fail fast, the supervisor's requests (stop, restart on the nodes it names), a stop that
            lets the command end, the exit record
health      this node's GPUs before and after an attempt: a fault that leaves the node out of a restart
lifecycle   prepare, start (detached), stopping, stop, stop-local, sweep
tee         the output into the node's log, its training steps (_progress) into the progress record
supervisor  the first node's stall judge, a failure's restart and its guard (restart limit, crash loop, too few nodes),
            the probe of every node before a restart; wait (train_action=watch)
diagnosis   this node's part of a stall's diagnosis; verdict: the verdict across nodes
report      this node's report: what the controller reads instead of the files
Linked from plugins/module_utils (node side, shared): _progress and _labels (reading output), processes (ending a
run's processes), _ptrace (whether stacks can be read), _flight_recorder (NCCL's dumps), _checkpoints (the newest
complete checkpoint), gpu (Xid events, nvidia-smi's CSV).
"""
