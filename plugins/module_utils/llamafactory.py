# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The traps of a LLaMA-Factory training config that make a multi-node run hang or start over, found before launch.

From LLaMA-Factory's issue tracker: the model, datasets or tokenized data missing on some node; output_dir on a local
disk; overwrite_output_dir while resuming (silently from step 0); data_shared_file_system not matching where the
datasets cache is; rank 0 tokenizing inside a barrier that the other ranks leave after ddp_timeout (1800 s).
"""

from __future__ import annotations

import posixpath

# LLaMA-Factory's (transformers') default: the other ranks wait this long at the barrier while rank 0 tokenizes.
DEFAULT_DDP_TIMEOUT = 1800
# Keys that name files or directories every node must see.
PATH_KEYS = ("model_name_or_path", "adapter_name_or_path", "dataset_dir", "tokenized_path")


def _under(path, directory):
    path, directory = posixpath.normpath(path), posixpath.normpath(directory)
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def node_paths(config):
    """The absolute paths of the config that every node must find (a hub id such as Qwen/Qwen2-0.5B is not one)."""
    return [str(config[key]) for key in PATH_KEYS if isinstance(config.get(key), str) and config[key].startswith("/")]


def findings(config, shared_dir, present, checkpoints):
    """[finding] for one config.

    present: {node: {path: exists}} for node_paths(config); checkpoints: names of checkpoint-N directories found in
    output_dir (a resume).
    """
    found = []
    keys = {str(config.get(key)): key for key in PATH_KEYS if config.get(key) is not None}
    for node, paths in present.items():
        for path, exists in paths.items():
            if not exists:
                found.append("%s: %s %s does not exist there" % (node, keys.get(path, "path"), path))
    output_dir = config.get("output_dir")
    if not output_dir:
        found.append("output_dir is not set: the checkpoints must go to shared storage (%s)" % shared_dir)
    elif not _under(str(output_dir), shared_dir):
        found.append("output_dir %s is not on shared storage (%s): each node would keep its own checkpoints, and a resume "
                     "finds them on one node only" % (output_dir, shared_dir))
    if checkpoints and config.get("overwrite_output_dir"):
        found.append("overwrite_output_dir is true while %s holds %s: the run would start again from step 0 instead of "
                     "resuming" % (output_dir, ", ".join(sorted(checkpoints)[-2:])))
    cache = config.get("cache_dir")
    if isinstance(cache, str) and cache.startswith("/"):
        shared = _under(cache, shared_dir)
        if shared and not config.get("data_shared_file_system"):
            found.append("cache_dir %s is on shared storage but data_shared_file_system is not true: every node's first "
                         "rank preprocesses into the same cache at once" % cache)
        if not shared and config.get("data_shared_file_system"):
            found.append("data_shared_file_system is true but cache_dir %s is not on shared storage: only the first "
                         "node preprocesses, and the others never see the data" % cache)
    if not config.get("tokenized_path") and int(config.get("ddp_timeout") or DEFAULT_DDP_TIMEOUT) <= DEFAULT_DDP_TIMEOUT:
        found.append('no tokenized_path and ddp_timeout %s: rank 0 tokenizes the dataset inside a barrier and the other '
                     'ranks give up after %s s (the hang at "Loading dataset"); tokenize once into tokenized_path on '
                     'shared storage, or raise ddp_timeout' % (config.get("ddp_timeout", "unset"),
                                                               config.get("ddp_timeout") or DEFAULT_DDP_TIMEOUT))
    return found
