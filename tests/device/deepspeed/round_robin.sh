#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-3.0-or-later
# The question device-deepspeed left open: is ZeRO-2's round_robin_gradients what loses the LoRA weights when a
# universal checkpoint is loaded by another number of ranks? A/C as in device-deepspeed with round_robin_gradients
# true (A, then C1: resumed by 2 ranks with it off), and A0/C0 with it off from the start.
# Usage (there, repo root; [".lf-whl", ".ds-whl"] carried): tests/device/deepspeed/round_robin.sh
set -u
OUT=${OUT:-/tmp/device-deepspeed}
cd "$(dirname "$0")/../../.." || exit 1
repo=$PWD logs=$OUT/rr lf=/srv/lf-ds site=/srv/lf-ds-site
mkdir -p "$logs"; rm -rf "$lf"
exec > >(tee "$OUT/summary.txt") 2>&1
trap 'tar czf "$OUT/rr.tgz" -C "$OUT" rr' EXIT
since() { python3 -c "print(round($(date +%s.%N) - $1, 1))"; }
PY=/opt/torch/.venv/bin/python3
$PY -m pip install -q --no-index --no-deps --no-compile --target "$site" .lf-whl/*.whl .ds-whl/*.whl 2>/dev/null || exit 1
export PATH=/opt/torch/.venv/bin:$site/bin:/usr/bin:/bin PYTHONPATH=$site HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
export PYTHONUNBUFFERED=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NCCL_DEBUG=WARN TOKENIZERS_PARALLELISM=false DS_DROP_EMPTY_PARAM_GROUPS=1
nvidia-smi --query-gpu=name --format=csv,noheader
$PY tests/device/llamafactory/make_tiny.py "$lf" > "$logs/make_tiny.log" 2>&1 || { tail -20 "$logs/make_tiny.log"; exit 1; }
(cd /tmp && llamafactory-cli train "$lf/lora_sft.yaml" max_steps=1 output_dir=/tmp/lf-ds-tokenize) > "$logs/tokenize.log" 2>&1
port=29600
run() {  # name, ranks, then LLaMA-Factory key=value overrides
  local name=$1 n=$2 s rc; shift 2; port=$((port + 1)); s=$(date +%s.%N)
  timeout 200 $PY -m torch.distributed.run --nproc-per-node "$n" --master-port "$port" \
    tests/device/deepspeed/rank.py "$lf/lora_sft.yaml" "$@" > "$logs/$name.log" 2>&1
  rc=$?; echo "run $name ($n ranks) rc=$rc $(since "$s") s"; grep -a -m1 'loaded universal' "$logs/$name.log" | cut -c1-200
  [ "$rc" = 0 ] || grep -a -E 'Error|Exception' "$logs/$name.log" | grep -v -i warn | tail -3 | cut -c1-400
}
config() {  # round_robin_gradients (true/false), load_universal (true/false), out
  $PY -c "import json,sys; c=json.load(open(sys.argv[1])); c['zero_optimization']['round_robin_gradients']=sys.argv[2]=='true'
if sys.argv[3]=='true': c['checkpoint']={'load_universal': True}
json.dump(c, open(sys.argv[4],'w'), indent=2)" "$repo/tests/device/deepspeed/ds_z2_config.json" "$@"
}
convert() {  # checkpoint folder
  local s
  s=$(date +%s.%N)
  $PY "$site/deepspeed/checkpoint/ds_to_universal.py" --input_folder "$1/global_step20" --output_folder "$1/global_step20_universal" \
    --inject_missing_state > "$logs/convert-$(basename "$1").log" 2>&1; echo "convert $(basename "$1") rc=$? $(since "$s") s"
}
config true false "$lf/rr.json"; config false false "$lf/norr.json"; config false true "$lf/norr_u.json"
common=(max_steps=40 save_steps=10 logging_steps=1 seed=42 per_device_train_batch_size=8 report_to=none optim=adamw_torch)
run A 3 "${common[@]}" gradient_accumulation_steps=2 deepspeed="$lf/rr.json" output_dir="$lf/A"
run A0 3 "${common[@]}" gradient_accumulation_steps=2 deepspeed="$lf/norr.json" output_dir="$lf/A0"
cp -a "$lf/A/checkpoint-20" "$lf/ckA"; cp -a "$lf/A0/checkpoint-20" "$lf/ckA0"
convert "$lf/ckA"; convert "$lf/ckA0"
run C1 2 "${common[@]}" gradient_accumulation_steps=3 deepspeed="$lf/norr_u.json" output_dir="$lf/C1" resume_from_checkpoint="$lf/ckA"
run C0 2 "${common[@]}" gradient_accumulation_steps=3 deepspeed="$lf/norr_u.json" output_dir="$lf/C0" resume_from_checkpoint="$lf/ckA0"
echo "A (round robin) against A0 (none): the same run, another partition order"
$PY tests/device/deepspeed/compare.py 1 40 "$lf/A" A0="$lf/A0" | tail -3
echo "C1: A's checkpoint (round robin), 2 ranks without it; C0: A0's, 2 ranks"
$PY tests/device/deepspeed/compare.py 21 40 "$lf/A" C1="$lf/C1" | tail -3
$PY tests/device/deepspeed/compare.py 21 40 "$lf/A0" C0="$lf/C0" | tail -3
for r in A A0 C1 C0; do cp "$lf/$r/trainer_state.json" "$logs/trainer_state_$r.json" 2>/dev/null; done
