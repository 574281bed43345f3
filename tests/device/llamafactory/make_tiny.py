# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""A tiny Qwen2 model, its tokenizer, a dataset and a LLaMA-Factory 0.9.5 LoRA SFT config, made with no network.

  python3 make_tiny.py DIR [--force] [--no-llamafactory-check]

Run on the GPU test machine with the carried wheels (.lf-whl, unpacked into a site dir) first on PYTHONPATH:
transformers 4.57.1 and tokenizers 0.22.1 from there, torch from the machine. It writes

  DIR/model/          a byte-level BPE tokenizer trained here on the dataset's chat texts (special tokens <|endoftext|>,
                      <|im_start|>, <|im_end|>; eos <|im_end|>, pad <|endoftext|>, no bos; a Qwen chat template) and a
                      Qwen2ForCausalLM with random weights (hidden 64, 2 layers, 4 heads, 2 kv heads), bf16 safetensors
  DIR/data/           dataset_info.json ({"tiny": {"file_name": "tiny.json"}}) and tiny.json: alpaca records such as
                      "add 3 and 4" -> "7", the same every run
  DIR/lora_sft.yaml   the LLaMA-Factory config (stage sft, LoRA on all linear layers, template qwen, tokenized_path
                      DIR/tokenized, output_dir DIR/out); neither of these two directories is made here

and prints one JSON line: the paths, the vocabulary size, the parameter count and the versions it ran with.

Nothing LLaMA-Factory would reject or silently change is left to the training run: the tokenizer is loaded back the way
LLaMA-Factory loads it and checked (each special token one id, eos/pad as the qwen template wants them, the vocabulary
the model's embedding size, every record within cutoff_len, so none is truncated); then, unless --no-llamafactory-check,
LLaMA-Factory itself parses the config (an unknown key and its version checks fail there; parse_dict does not convert
types, so key values are compared with what was meant), imports what `llamafactory-cli train` imports, applies its qwen
template to the tokenizer (it must add no token and change no eos), and encodes every record, which must match the chat
template's text. Any failure exits non-zero; DIR must be empty or absent (--force makes it again).
"""

import argparse
import contextlib
import json
import os
import shutil
import sys

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
EOS, PAD = "<|im_end|>", "<|endoftext|>"
# LLaMA-Factory 0.9.5's qwen template (llamafactory/data/template.py): this default system prompt unless the data has
# one, "<|im_start|>system\n{system}<|im_end|>\n", "<|im_start|>user\n{query}<|im_end|>\n<|im_start|>assistant\n",
# "{response}<|im_end|>\n", stop word <|im_end|> replacing the eos (replace_eos=True).
QWEN_DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
# The same format as a Jinja chat template. LLaMA-Factory keeps a tokenizer's own template (the qwen template has no
# replace_jinja_template), so this one must render exactly what the template encodes: checked below.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if loop.first and message['role'] != 'system' -%}"
    "{{- '<|im_start|>system\\n" + QWEN_DEFAULT_SYSTEM + "<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)

VOCAB_SIZE = 512
RECORDS = 256
CUTOFF_LEN = 128
MODEL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
             max_position_embeddings=512)
SEED = 0


class Failed(Exception):
    pass


def check(ok, message):
    if not ok:
        raise Failed(message)


def make_records(count=RECORDS):
    """Alpaca records (instruction, input, output), the same every time: four kinds of sum, a quarter using input."""
    records = []
    for i in range(count):
        a, b = i // 4 + 1, (i * 7) % 19 + 1  # a differs from one group of four to the next: no two records alike
        kind = i % 4
        if kind == 0:
            records.append({"instruction": "add %d and %d" % (a, b), "input": "", "output": str(a + b)})
        elif kind == 1:
            records.append({"instruction": "subtract %d from %d" % (b, a + b), "input": "", "output": str(a)})
        elif kind == 2:
            records.append({"instruction": "multiply %d by %d" % (a, b), "input": "", "output": str(a * b)})
        else:
            records.append({"instruction": "add the two numbers", "input": "%d and %d" % (a, b), "output": str(a + b)})
    return records


def messages_of(record):
    """The conversation LLaMA-Factory's alpaca converter makes of a record (instruction, a newline, input)."""
    query = "\n".join(part for part in (record["instruction"], record["input"]) if part)
    return [{"role": "user", "content": query}, {"role": "assistant", "content": record["output"]}]


def render(messages):
    """The text the qwen template encodes for messages (with its default system prompt)."""
    text = "<|im_start|>system\n%s<|im_end|>\n" % QWEN_DEFAULT_SYSTEM
    for message in messages:
        text += "<|im_start|>%s\n%s<|im_end|>\n" % (message["role"], message["content"])
    return text


def train_tokenizer(texts):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE())  # no unk token: byte-level, every byte is in the alphabet
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, min_frequency=1, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


def check_tokenizer(tokenizer, texts, vocab_size):
    """What the qwen template and the model need of the tokenizer, as loaded back from disk."""
    for token in SPECIAL_TOKENS:
        ids = tokenizer.encode(token, add_special_tokens=False)
        check(len(ids) == 1 and ids[0] == tokenizer.convert_tokens_to_ids(token),
              "special token %s is not a single id: %s" % (token, ids))
        added = {t.content: t for t in tokenizer.added_tokens_decoder.values()}
        check(token in added and added[token].special, "%s is not an added special token" % token)
    check(tokenizer.eos_token == EOS and tokenizer.pad_token == PAD and tokenizer.bos_token is None,
          "eos/pad/bos are %r/%r/%r, not %r/%r/None" % (tokenizer.eos_token, tokenizer.pad_token, tokenizer.bos_token, EOS, PAD))
    check(tokenizer.eos_token_id != tokenizer.pad_token_id, "eos and pad are the same id")
    check(tokenizer.unk_token is None, "unk token %r" % tokenizer.unk_token)
    check(len(tokenizer) == vocab_size, "len(tokenizer) %d != vocab size %d" % (len(tokenizer), vocab_size))
    check(isinstance(tokenizer.chat_template, str), "no chat template")
    longest = 0
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False)
        check(max(ids) < vocab_size, "token id %d >= vocab size %d" % (max(ids), vocab_size))
        decoded = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        check(decoded == text, "decode(encode(text)) differs: %r != %r" % (decoded, text))
        longest = max(longest, len(ids))
    check(longest <= CUTOFF_LEN,
          "a record is %d tokens, over cutoff_len %d: it would be truncated" % (longest, CUTOFF_LEN))
    return longest


def yaml_text(root):
    # Every key is a field of LLaMA-Factory 0.9.5's ModelArguments, DataArguments, FinetuningArguments or of
    # transformers' Seq2SeqTrainingArguments; save_total_limit is left unset (every checkpoint kept).
    # 1.0e-3: a float to both PyYAML (YAML 1.1 wants the dot and the exponent's sign) and OmegaConf, which LLaMA-Factory
    # reads it with; a string would pass parse_dict untyped.
    return """\
### model
model_name_or_path: {root}/model

### method
stage: sft
do_train: true
finetuning_type: lora
lora_target: all
lora_rank: 8

### dataset
dataset: tiny
dataset_dir: {root}/data
template: qwen
cutoff_len: {cutoff}
tokenized_path: {root}/tokenized
preprocessing_num_workers: 1

### output
output_dir: {root}/out
logging_steps: 1
save_steps: 10
plot_loss: false
overwrite_output_dir: false
report_to: none

### train
per_device_train_batch_size: 8
gradient_accumulation_steps: 1
learning_rate: 1.0e-3
max_steps: 60
bf16: true
ddp_timeout: 300
""".format(root=root, cutoff=CUTOFF_LEN)


def check_with_llamafactory(config_path, records, vocab_size):
    """LLaMA-Factory's own reading of what was made: its parser, its imports, its template, its encoding."""
    import torch
    from omegaconf import OmegaConf

    from llamafactory.hparams.parser import _parse_train_args  # imports check_dependencies(): version checks fail here
    import llamafactory.train.tuner  # noqa: F401  everything `llamafactory-cli train` imports, trainers included
    from llamafactory.data import get_template_and_fix_tokenizer
    from llamafactory.data.parser import get_dataset_list
    from llamafactory.extras.env import VERSION
    from llamafactory.model import load_tokenizer

    config = OmegaConf.to_container(OmegaConf.load(config_path))  # as llamafactory.hparams.parser.read_args reads it
    if not torch.cuda.is_available():  # bf16 needs a GPU to parse; the keys and types are what is checked here
        config["use_cpu"] = True
    model_args, data_args, training_args, finetuning_args, dummy = _parse_train_args(config)  # unknown keys raise
    check(finetuning_args.stage == "sft" and finetuning_args.finetuning_type == "lora"
          and finetuning_args.lora_target == ["all"] and finetuning_args.lora_rank == 8,
          "finetuning arguments parsed as %s" % finetuning_args)
    check(data_args.dataset == ["tiny"] and data_args.template == "qwen" and data_args.cutoff_len == CUTOFF_LEN,
          "data arguments parsed as %s" % data_args)
    check(isinstance(training_args.learning_rate, float) and training_args.max_steps == 60 and training_args.bf16,
          "training arguments parsed as %s" % training_args)
    (attr,) = get_dataset_list(data_args.dataset, data_args.dataset_dir)
    check(attr.load_from == "file" and attr.formatting == "alpaca", "dataset tiny read as %s" % attr)

    tokenizer = load_tokenizer(model_args)["tokenizer"]
    before = (len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.chat_template)
    template = get_template_and_fix_tokenizer(tokenizer, data_args)
    after = (len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.chat_template)
    check(before == after, "the qwen template changed the tokenizer (size, eos, pad, chat template): %s -> %s"
          % (before[:3], after[:3]))
    check(len(tokenizer) == vocab_size, "len(tokenizer) %d != the model's vocab size %d" % (len(tokenizer), vocab_size))
    for record in records:
        messages = messages_of(record)
        prompt_ids, response_ids = template.encode_oneturn(tokenizer, messages)
        ids = prompt_ids + response_ids
        check(len(ids) <= CUTOFF_LEN, "record %s is %d tokens, over cutoff_len" % (record, len(ids)))
        check(tokenizer.eos_token_id in response_ids, "the response of %s has no eos" % record)
        text = tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        expected = tokenizer.apply_chat_template(messages, tokenize=False)
        check(text == expected,
              "LLaMA-Factory's qwen encoding %r differs from the chat template's %r" % (text, expected))
    return VERSION


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--force", action="store_true",
                        help="DIR is not empty: make model, data and the config again, remove DIR/tokenized")
    parser.add_argument("--no-llamafactory-check", action="store_true",
                        help="skip LLaMA-Factory's own parse of the config and encoding of the dataset")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.dir)
    model_dir, data_dir, tokenized = (os.path.join(root, name) for name in ("model", "data", "tokenized"))
    config_path = os.path.join(root, "lora_sft.yaml")

    import torch  # before anything is written: a missing package leaves DIR as it was
    import tokenizers
    import transformers
    from transformers import AutoConfig, AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    if os.path.isdir(root) and os.listdir(root):
        if not args.force:
            raise Failed("%s is not empty (use --force)" % root)
        # tokenized data from an earlier tokenizer would be loaded as it is, whatever the new one says
        for path in (model_dir, data_dir, tokenized):
            shutil.rmtree(path, ignore_errors=True)
        if os.path.isdir(os.path.join(root, "out")):
            print("warning: %s/out is kept: LLaMA-Factory resumes from its checkpoints" % root, file=sys.stderr)
    os.makedirs(model_dir, exist_ok=True)
    os.makedirs(data_dir, exist_ok=True)

    records = make_records()
    texts = [render(messages_of(record)) for record in records]
    with open(os.path.join(data_dir, "tiny.json"), "w", encoding="utf-8") as f:
        json.dump(records, f, ensure_ascii=False, indent=1)
    with open(os.path.join(data_dir, "dataset_info.json"), "w", encoding="utf-8") as f:
        json.dump({"tiny": {"file_name": "tiny.json"}}, f, indent=2)

    fast = PreTrainedTokenizerFast(tokenizer_object=train_tokenizer(texts), eos_token=EOS, pad_token=PAD,
                                   bos_token=None, additional_special_tokens=["<|im_start|>", "<|im_end|>"],
                                   model_max_length=MODEL["max_position_embeddings"], padding_side="right",
                                   clean_up_tokenization_spaces=False)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(model_dir)
    vocab_size = len(fast)

    config = Qwen2Config(vocab_size=vocab_size, tie_word_embeddings=False, use_sliding_window=False,
                         bos_token_id=None, eos_token_id=fast.convert_tokens_to_ids(EOS),
                         pad_token_id=fast.convert_tokens_to_ids(PAD), dtype="bfloat16", **MODEL)
    torch.manual_seed(SEED)
    model = Qwen2ForCausalLM(config).to(torch.bfloat16)
    model.generation_config.eos_token_id = config.eos_token_id
    model.generation_config.pad_token_id = config.pad_token_id
    model.save_pretrained(model_dir, safe_serialization=True)
    params = sum(p.numel() for p in model.parameters())

    # Loaded back as LLaMA-Factory loads them (AutoTokenizer, AutoConfig from the directory).
    check(os.path.isfile(os.path.join(model_dir, "model.safetensors")), "no model.safetensors in %s" % model_dir)
    saved = AutoConfig.from_pretrained(model_dir)
    check(saved.model_type == "qwen2" and saved.vocab_size == vocab_size, "config.json reads back as %s" % saved)
    check(str(getattr(saved, "dtype", None)).replace("torch.", "") == "bfloat16", "config dtype %s" % saved.dtype)
    tokenizer = AutoTokenizer.from_pretrained(model_dir, padding_side="right")
    longest = check_tokenizer(tokenizer, texts, vocab_size)
    for record, text in zip(records[:8], texts):
        rendered = tokenizer.apply_chat_template(messages_of(record), tokenize=False)
        check(rendered == text, "chat template renders %r, the qwen template %r" % (rendered, text))

    with open(config_path, "w", encoding="utf-8") as f:
        f.write(yaml_text(root))

    lf_version = None
    if not args.no_llamafactory_check:
        lf_version = check_with_llamafactory(config_path, records, vocab_size)

    return {
        "dir": root, "model": model_dir, "data": data_dir, "dataset": os.path.join(data_dir, "tiny.json"),
        "config": config_path, "tokenized_path": tokenized, "output_dir": os.path.join(root, "out"),
        "records": len(records), "vocab_size": vocab_size, "parameters": params, "longest_tokens": longest,
        "cutoff_len": CUTOFF_LEN, "llamafactory_checked": lf_version is not None,
        "versions": {"llamafactory": lf_version, "transformers": transformers.__version__,
                     "tokenizers": tokenizers.__version__, "torch": torch.__version__},
    }


if __name__ == "__main__":
    out = sys.stdout
    try:
        with contextlib.redirect_stdout(sys.stderr):  # LLaMA-Factory logs to stdout: keep it for the one JSON line
            result = main(sys.argv[1:])
    except Failed as e:
        print("make_tiny: %s" % e, file=sys.stderr)
        sys.exit(1)
    print(json.dumps(result, sort_keys=True), file=out)
