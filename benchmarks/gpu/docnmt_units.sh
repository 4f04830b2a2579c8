# usage: bash benchmarks/gpu/docnmt_units.sh UNIT... (a process per unit; resumes what a previous call on this machine left)
# env: DEVICE (default cuda), EXTRA (more arguments), NOPIP=1 (skip the wheels), TRANSLATE_BATCH_SIZE (default 32)
[ -n "${NOPIP:-}" ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .dev/whl/*.whl 2>&1 | tail -2
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=2
RES=${RES:-benchmarks/results/docnmt_real}
mkdir -p runs logs
[ -f runs/ende_sentence_data/manifest.json ] || tar -xJf .dev/data.tar.xz -C runs
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
python3 -c "import torch, transformers, datasets, pyarrow, regex; print(torch.__version__, transformers.__version__, datasets.__version__, pyarrow.__version__, torch.cuda.is_available())" || exit 1
pids=""
for u in "$@"; do
  [ -f $RES/runs/$u.json ] && { echo "$u done"; continue; }
  python3 benchmarks/gpu/docnmt_unit.py --units $u --threads 2 --no-aggregate --device ${DEVICE:-cuda} ${EXTRA:-} >> logs/$u.log 2>&1 &
  pids="$pids $!"
done
save() { tar -czf $OUT/units.tar.gz -C $RES runs; tar -czf $OUT/logs.tar.gz logs runs/docnmt_real/*/model/evaluation 2>/dev/null; }
( while :; do sleep 20; save; done ) &
watcher=$!
SECONDS=0
while :; do
  alive=0; for p in $pids; do kill -0 $p 2>/dev/null && alive=1; done
  [ $alive = 0 ] && break
  sleep 30; echo "--- ${SECONDS}s"
  for u in "$@"; do echo "$u: $(grep -v 'examples/s' logs/$u.log 2>/dev/null | tail -n 1 | cut -c1-160)"; done
done
kill $watcher; save; ls -la $RES/runs | tail -n 25
