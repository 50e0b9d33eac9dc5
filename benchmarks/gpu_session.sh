#!/usr/bin/env bash
# One prepared run on a lent GPU for the GPU step's profile and benchmark, before and after each candidate setting:
#
#     OUT=/some/folder bash benchmarks/gpu_session.sh                 # every part: about 10 minutes on an H200
#     PARTS="profile_default profile_model bench_eager" bash ...      # some parts (two calls of 5 minutes fit a lease)
#     SMOKE=1 bash benchmarks/gpu_session.sh                          # tiny sizes on any machine: checks the script
#
# It writes into $OUT (default /tmp/gpu_session) a text log and a JSON file per part; each part has its own time
# limit, and a part that runs out of time leaves what it printed while the parts after it still run:
#   profile_default   benchmarks/profile_gpu_step.py, GPT-2 124M and BERT-base, the default step (eager, bf16, SDPA)
#   profile_model     the same with the whole forward and loss compiled (--perf compile=true compile_scope=model)
#   bench_eager       benchmarks/bench_gpu.py, GPT-2 and BERT-base against transformers, eager
#   bench_chunked     the lab's GPT-2 and BERT-base with the vocabulary loss in chunks (--perf vocab_loss=chunked)
#   bench_compiled    GPT-2 with both sides compiled, the lab's whole step (compile_scope=model)
#   bench_structured  UniLM, GLM, MPNet and XLNet against GPT at seq 512, eager
#   zoo_small         (only when PARTS names it: 5 minutes or more) the small-preset zoo of all 17 families on the GPU
set -u
OUT=${OUT:-/tmp/gpu_session}
PARTS=${PARTS:-profile_default profile_model bench_eager bench_chunked bench_compiled bench_structured}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
SMOKE_FLAG=()
[ "${SMOKE:-0}" = 1 ] && SMOKE_FLAG=(--smoke --steps 2 --warmup 1)

part() {  # part NAME SECONDS COMMAND...: runs only the parts named in $PARTS
    local name=$1 limit=$2
    shift 2
    case " $PARTS " in *" $name "*) ;; *) return ;; esac
    echo "== $name (limit ${limit} s): $*" | tee "$OUT/$name.txt"
    local started=$SECONDS
    timeout "$limit" "$@" "${SMOKE_FLAG[@]}" 2>&1 | grep -v "^W[0-9]\{4\} \|USDT" | tee -a "$OUT/$name.txt"
    echo "== $name: exit ${PIPESTATUS[0]} after $((SECONDS - started)) s" | tee -a "$OUT/$name.txt"
}

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 | tee "$OUT/device.txt"
$PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
    | tee -a "$OUT/device.txt"
part profile_default 90 $PY benchmarks/profile_gpu_step.py --json "$OUT/profile_default.json"
part profile_model 130 $PY benchmarks/profile_gpu_step.py --perf compile=true --perf compile_scope=model \
    --json "$OUT/profile_model.json"
part bench_eager 100 $PY benchmarks/bench_gpu.py --only gpt2,bert --json "$OUT/bench_eager.json"
part bench_chunked 60 $PY benchmarks/bench_gpu.py --only gpt2,bert --ours-only --perf vocab_loss=chunked \
    --json "$OUT/bench_chunked.json"
part bench_compiled 140 $PY benchmarks/bench_gpu.py --only gpt2 --compile --perf compile_scope=model \
    --json "$OUT/bench_compiled.json"
part bench_structured 60 $PY benchmarks/bench_gpu.py --only gpt-512,unilm,glm,mpnet,xlnet \
    --json "$OUT/bench_structured.json"
part zoo_small 420 $PY benchmarks/bench_zoo.py --preset small --device cuda --finetune-tasks none
