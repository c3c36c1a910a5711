#!/usr/bin/env bash
# Runs every benchmark behind BENCHMARKS.md and writes the raw output to
# bench/out/<UTC stamp>/. Run it from anywhere; about 8 minutes on 2 cores.
#   COUNT=5 RUNS=5 bench/run-all.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
count=${COUNT:-5}
runs=${RUNS:-5}
out="$here/out/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
{
  date -u
  git -C "$root" rev-parse HEAD 2>/dev/null || true
  go version
  nproc
  cat /proc/loadavg
} >"$out/env.txt"

cd "$root"
go test -run '^$' -benchmem -count "$count" -benchtime=20000x -bench . ./agent | tee "$out/agent.txt"
go test -run '^$' -benchmem -count "$count" -benchtime=3000x -bench . ./subagent/subagenttool | tee "$out/subagenttool.txt"
go test -run '^$' -benchmem -count "$count" -benchtime=3000x -bench . ./subagent/inproc | tee "$out/inproc.txt"
go test -run '^$' -benchmem -count "$count" -benchtime=200000x -bench 'Append' ./session/jsonl | tee "$out/jsonl-append.txt"
go test -run '^$' -benchmem -count "$count" -benchtime=10x -bench 'Load100k' ./session/jsonl | tee "$out/jsonl-load.txt"
go test -run '^$' -benchmem -count "$count" -benchtime=50x -bench 'StreamLongSSE' ./llm/openai | tee "$out/openai.txt"

cd "$here"
go run ./cmd/compare -runs "$runs" | tee "$out/compare.txt"
go run ./cmd/compare -runs "$runs" -store memory -impls dsh,eino | tee "$out/compare-memory.txt"
go run ./cmd/seam -runs "$runs" | tee "$out/seam.txt"
go run ./cmd/children -runs 3 | tee "$out/children.txt"
go run ./cmd/children -case park -k 0,10000 -runs 3 | tee "$out/children-k10000.txt"
go run ./cmd/fanout -n 1000,10000 | tee "$out/fanout.txt"
go run ./cmd/acpready | tee "$out/acpready.txt"
go run -tags temporal ./cmd/temporal | tee "$out/temporal.txt"
go run ./cmd/cache | tee "$out/cache.txt"
go run ./cmd/stream -runs 5 | tee "$out/stream.txt"
go run ./cmd/reference | tee "$out/reference.txt"
# JSONL last: its file-system work (and the writeback after it) slows what runs next.
go run ./cmd/compare -runs "$runs" -store jsonl -impls dsh,eino | tee "$out/compare-jsonl.txt"
go run ./cmd/seam -runs "$runs" -store jsonl -case roundtrip,tool,fsfloor | tee "$out/seam-jsonl.txt"
cat /proc/loadavg >>"$out/env.txt"
echo "raw output in $out"
