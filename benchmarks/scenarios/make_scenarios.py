"""Write the seven allocation benchmark scenarios as JSON files beside this script.

Every task is spelled out by hand below; nothing is random, so running the
script again reproduces byte-identical files. The JSON follows the scenario
contract of DESIGN.md section 5 (see README.md in this folder for a summary).

Conventions used throughout:

- one step is one hour and step 0 is midnight, so ``demand[9]`` is 09:00-10:00;
- realtime curves are GPUs wanted per hour, already converted with the swap
  rule (adjacent hours never differ by more than ``max_swap``), and ``initial``
  is what the service held at 23:00 the evening before;
- a ``running`` task started ``-start`` hours before the plan on the GPUs
  ``[first_gpu, first_gpu + gpus)`` and keeps them until ``start + duration``;
- training ``duration`` may exceed the 24-hour horizon (multi-day runs).

Usage: ``python benchmarks/scenarios/make_scenarios.py``
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The scenarios ship with the package (gpuopt bench runs them from any folder).
OUT = HERE.parents[1] / "gpuopt" / "scenarios"

HORIZON = 24
COMMON = {
    "horizon": HORIZON,
    "step_minutes": 60,
    "decay": 0.97,
    "realtime_penalty": 8.0,
}


# --------------------------------------------------------------------- helpers
def batch(kind, task_id, priority, gpus, duration, arrival, deadline=None, running=None):
    """A batch-like task; ``running`` is ``(start, first_gpu)`` for an inherited one."""
    task = {
        "id": task_id,
        "kind": kind,
        "priority": priority,
        "gpus": gpus,
        "duration": duration,
        "arrival": arrival,
    }
    if deadline is not None:
        task["deadline"] = deadline
    if running is not None:
        start, first_gpu = running
        task["running"] = {"start": start, "first_gpu": first_gpu}
    return task


def training(*args, **kwargs):
    return batch("training", *args, **kwargs)


def inference(*args, **kwargs):
    return batch("batch_inference", *args, **kwargs)


def quantization(*args, **kwargs):
    return batch("quantization", *args, **kwargs)


def realtime(task_id, priority, max_swap, initial, demand):
    """A realtime service: ``demand`` lists GPUs wanted for each hour 00:00 .. 23:00."""
    return {
        "id": task_id,
        "kind": "realtime",
        "priority": priority,
        "max_swap": max_swap,
        "initial": initial,
        "demand": list(demand),
    }


def scenario(name, gpus, tasks, align_blocks=False, gpus_per_node=None):
    return {
        "name": name,
        "gpus": gpus,
        **COMMON,
        "align_blocks": align_blocks,
        "gpus_per_node": gpus_per_node,
        "tasks": tasks,
    }


# ------------------------------------------------------------------ scenarios
def mixed_control():
    """8 GPUs, 10 tasks: one chat service beside a typical mix of batch work."""
    #          hour: 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    chat_demand = [3, 2, 2, 2, 2, 2, 3, 4, 5, 6, 6, 6, 6, 6, 6, 5, 5, 5, 5, 5, 4, 4, 3, 3]
    tasks = [
        realtime("chat", 9, max_swap=2, initial=3, demand=chat_demand),
        # inherited from the previous plan
        training("lora-support-v3", 5, gpus=2, duration=14, arrival=0, running=(-6, 4)),
        inference("eval-sweep-old", 3, gpus=2, duration=5, arrival=0, running=(-2, 6)),
        # the day's queue
        training("sft-llama-8b", 6, gpus=4, duration=6, arrival=0),
        inference("nightly-embeddings", 3, gpus=2, duration=4, arrival=1, deadline=8),
        quantization("quant-awq-8b", 3, gpus=1, duration=2, arrival=7),
        training("dpo-7b", 4, gpus=4, duration=8, arrival=9),
        inference("report-summaries", 4, gpus=1, duration=3, arrival=13, deadline=20),
        quantization("quant-gptq-70b", 2, gpus=4, duration=3, arrival=16),
        training("sft-ticket-router", 5, gpus=2, duration=10, arrival=18),
    ]
    return scenario("mixed-control", 8, tasks)


def realtime_contention():
    """8 GPUs, 8 tasks: three realtime services whose peaks overlap at midday."""
    #          hour: 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    chat_demand = [1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 1, 1]
    code_demand = [0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 0, 0, 0, 0]
    companion_demand = [1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 1]
    tasks = [
        realtime("chat", 10, max_swap=1, initial=1, demand=chat_demand),
        realtime("code-assist", 8, max_swap=1, initial=0, demand=code_demand),
        realtime("companion-app", 8, max_swap=1, initial=1, demand=companion_demand),
        training("reward-model-7b", 6, gpus=4, duration=10, arrival=0),
        inference("doc-extract", 4, gpus=2, duration=6, arrival=6, deadline=14),
        inference("eval-harness", 5, gpus=1, duration=6, arrival=10, deadline=18),
        quantization("quant-awq-13b", 3, gpus=2, duration=2, arrival=13),
        training("lora-evening", 4, gpus=4, duration=8, arrival=16),
    ]
    return scenario("realtime-contention", 8, tasks)


def training_heavy():
    """8 GPUs, 16 tasks: a research queue of twelve training runs beside one chat service."""
    #          hour: 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    chat_demand = [2, 2, 1, 1, 1, 1, 2, 2, 3, 4, 4, 4, 4, 4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2]
    tasks = [
        realtime("chat", 9, max_swap=2, initial=2, demand=chat_demand),
        # a two-day continued-pretraining run, 26 hours in
        training("cpt-domain-13b", 6, gpus=2, duration=40, arrival=0, running=(-26, 6)),
        training("sft-7b-full", 6, gpus=4, duration=6, arrival=0),
        training("lora-8b-a", 4, gpus=1, duration=5, arrival=1),
        training("lora-8b-b", 4, gpus=1, duration=5, arrival=1),
        training("dpo-13b", 5, gpus=2, duration=8, arrival=4),
        training("rlhf-ppo-7b", 7, gpus=4, duration=8, arrival=7),
        quantization("quant-awq-sft7b", 3, gpus=1, duration=2, arrival=9),
        training("sft-reranker", 4, gpus=1, duration=6, arrival=10),
        inference("eval-checkpoints", 4, gpus=2, duration=3, arrival=11, deadline=20),
        training("lora-sweep-1", 3, gpus=1, duration=4, arrival=12),
        training("lora-sweep-2", 3, gpus=1, duration=4, arrival=12),
        training("dpo-8b-safety", 6, gpus=2, duration=8, arrival=14),
        training("rlvr-math-8b", 5, gpus=2, duration=30, arrival=17),
        quantization("quant-gptq-dpo13b", 2, gpus=2, duration=2, arrival=20),
        training("sft-70b-lora", 5, gpus=4, duration=20, arrival=21),
    ]
    return scenario("training-heavy", 8, tasks, align_blocks=True)


def large_mixed_tasks():
    """The tasks of large-mixed (also reused by uniform-priority)."""
    #          hour: 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    chat_demand = [3, 2, 2, 2, 2, 2, 3, 4, 5, 6, 6, 6, 6, 6, 6, 6, 5, 5, 5, 5, 5, 4, 4, 3]
    code_demand = [0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 3, 3, 2, 3, 3, 3, 3, 2, 1, 1, 0, 0, 0, 0]
    return [
        realtime("chat", 10, max_swap=2, initial=3, demand=chat_demand),
        realtime("code-assist", 8, max_swap=1, initial=0, demand=code_demand),
        # inherited from the previous plan
        training("pretrain-ablation-3b", 4, gpus=4, duration=36, arrival=0, running=(-20, 8)),
        inference("translate-backlog", 3, gpus=2, duration=6, arrival=0, running=(-3, 12)),
        quantization("quant-bnb-old", 2, gpus=1, duration=2, arrival=0, running=(-1, 7)),
        # the day's queue
        training("sft-mistral-7b", 6, gpus=4, duration=8, arrival=0),
        inference("nightly-embeddings", 3, gpus=2, duration=4, arrival=1, deadline=9),
        training("llama-70b-lora", 5, gpus=8, duration=8, arrival=2),
        training("dpo-chat-v7", 5, gpus=2, duration=10, arrival=6),
        inference("doc-ocr-backfill", 2, gpus=4, duration=6, arrival=8, deadline=22),
        inference("eval-suite", 5, gpus=1, duration=3, arrival=9, deadline=16),
        quantization("quant-awq-70b", 3, gpus=4, duration=3, arrival=11),
        quantization("quant-gptq-8b", 3, gpus=1, duration=1, arrival=14),
        training("rlvr-code-8b", 6, gpus=2, duration=28, arrival=15),
        inference("report-gen", 4, gpus=2, duration=3, arrival=17, deadline=23),
        training("sft-classifier", 3, gpus=1, duration=5, arrival=20),
    ]


def large_mixed():
    """14 GPUs, 16 tasks: two realtime services, three inherited jobs, a 70B LoRA run."""
    return scenario("large-mixed", 14, large_mixed_tasks())


def oversubscribed():
    """8 GPUs, 9 tasks: release day, with far more work than the cluster can hold."""
    #          hour: 0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19 20 21 22 23
    chat_demand = [2, 2, 2, 2, 2, 2, 2, 3, 4, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 3, 3, 3, 2]
    tasks = [
        realtime("chat", 10, max_swap=2, initial=2, demand=chat_demand),
        training("release-sft-8b", 7, gpus=4, duration=10, arrival=0, deadline=16),
        training("research-cpt-3b", 3, gpus=4, duration=30, arrival=0),
        inference("customer-backfill", 4, gpus=4, duration=6, arrival=2, deadline=18),
        training("release-dpo-8b", 6, gpus=4, duration=8, arrival=4, deadline=22),
        inference("safety-evals", 6, gpus=2, duration=4, arrival=6, deadline=14),
        inference("benchmark-sweep", 2, gpus=2, duration=6, arrival=9),
        quantization("quant-awq-release", 4, gpus=2, duration=3, arrival=12, deadline=20),
        quantization("quant-gptq-release", 3, gpus=2, duration=2, arrival=14, deadline=22),
    ]
    return scenario("oversubscribed", 8, tasks)


def scale():
    """64 GPUs in 8 nodes of 8, 30 tasks: the mixed workload at eight times the size."""
    chat_demand = [
        8,
        7,
        6,
        6,
        6,
        6,
        8,
        11,
        14,
        17,
        19,
        20,
        20,
        20,
        19,
        18,
        17,
        16,
        15,
        14,
        13,
        12,
        10,
        9,
    ]
    code_demand = [1, 1, 1, 1, 1, 1, 2, 4, 6, 8, 8, 8, 6, 8, 8, 8, 7, 5, 3, 2, 2, 1, 1, 1]
    companion_demand = [4, 3, 2, 2, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5, 6, 7, 8, 8, 8, 7, 5]
    tasks = [
        realtime("chat", 10, max_swap=4, initial=9, demand=chat_demand),
        realtime("code-assist", 8, max_swap=2, initial=1, demand=code_demand),
        realtime("companion-app", 8, max_swap=2, initial=5, demand=companion_demand),
        # inherited from the previous plan (node n = GPUs 8n .. 8n+7)
        training("cpt-7b-multiday", 5, gpus=8, duration=48, arrival=0, running=(-30, 0)),
        training("rlhf-70b", 7, gpus=8, duration=40, arrival=0, running=(-12, 8)),
        inference("embed-backfill", 3, gpus=4, duration=8, arrival=0, running=(-5, 16)),
        quantization("quant-awq-70b-old", 3, gpus=2, duration=3, arrival=0, running=(-1, 20)),
        training("lora-legal-13b", 4, gpus=2, duration=12, arrival=0, running=(-4, 22)),
        # the day's queue
        training("sft-70b-full", 6, gpus=8, duration=16, arrival=0),
        inference("nightly-embed", 3, gpus=4, duration=5, arrival=1, deadline=8),
        training("lora-sweep-a", 3, gpus=1, duration=4, arrival=2),
        training("lora-sweep-b", 3, gpus=1, duration=4, arrival=2),
        training("lora-sweep-c", 3, gpus=1, duration=4, arrival=2),
        training("lora-sweep-d", 3, gpus=1, duration=4, arrival=2),
        training("cpt-finance-13b", 4, gpus=8, duration=48, arrival=3),
        quantization("quant-awq-70b", 3, gpus=4, duration=3, arrival=5),
        training("dpo-70b", 6, gpus=8, duration=12, arrival=6),
        inference("doc-summaries", 4, gpus=2, duration=4, arrival=7, deadline=15),
        quantization("quant-gptq-8b-a", 3, gpus=1, duration=1, arrival=8),
        quantization("quant-gptq-8b-b", 3, gpus=1, duration=1, arrival=8),
        training("sft-router-1b", 4, gpus=2, duration=6, arrival=9),
        training("rlvr-math-32b", 6, gpus=8, duration=20, arrival=10),
        inference("eval-release-cand", 6, gpus=4, duration=3, arrival=11, deadline=17),
        training("dpo-8b-support", 5, gpus=4, duration=10, arrival=13),
        inference("synthetic-data-gen", 3, gpus=8, duration=6, arrival=14),
        quantization("quant-bnb-13b", 2, gpus=2, duration=2, arrival=15),
        inference("translate-catalog", 4, gpus=2, duration=5, arrival=16, deadline=23),
        training("lora-support-8b", 4, gpus=2, duration=8, arrival=18),
        inference("ocr-backfill", 2, gpus=4, duration=6, arrival=19),
        quantization("quant-awq-32b", 4, gpus=2, duration=3, arrival=20),
    ]
    return scenario("scale", 64, tasks, align_blocks=True, gpus_per_node=8)


def uniform_priority():
    """large-mixed with every priority overridden to 5: no priority signal at all."""
    tasks = [{**task, "priority": 5} for task in large_mixed_tasks()]
    return scenario("uniform-priority", 14, tasks)


SCENARIOS = [
    mixed_control,
    realtime_contention,
    training_heavy,
    large_mixed,
    oversubscribed,
    scale,
    uniform_priority,
]


# ------------------------------------------------------------- sanity + output
def check(sc):
    """Light sanity checks of the contract; a failure means a typo above."""
    name, gpus, node = sc["name"], sc["gpus"], sc["gpus_per_node"] or sc["gpus"]
    assert gpus % node == 0, name
    ids = [t["id"] for t in sc["tasks"]]
    assert len(ids) == len(set(ids)), f"{name}: duplicate ids"
    held_at_zero = 0
    for t in sc["tasks"]:
        where = f"{name}/{t['id']}"
        if t["kind"] == "realtime":
            d = t["demand"]
            assert len(d) == HORIZON and all(0 <= v <= gpus for v in d), where
            steps = [t["initial"], *d]
            assert all(abs(a - b) <= t["max_swap"] for a, b in itertools.pairwise(steps)), where
            held_at_zero += t["initial"]
            continue
        g = t["gpus"]
        assert g & (g - 1) == 0 and g <= node, where
        assert 0 <= t["arrival"] < HORIZON, where
        if "deadline" in t:
            assert t["deadline"] >= t["arrival"] + t["duration"], where
        if "running" in t:
            start, first = t["running"]["start"], t["running"]["first_gpu"]
            assert start <= 0 < start + t["duration"], where
            assert first // node == (first + g - 1) // node and first + g <= gpus, where
            assert not sc["align_blocks"] or first % g == 0, where
            held_at_zero += g
    # what ran just before the plan (realtime at `initial`, inherited blocks) fit
    assert held_at_zero <= gpus, f"{name}: {held_at_zero} GPUs held at step 0"


def to_json(sc):
    """Top-level fields one per line, then one task per line."""
    lines = ["{"]
    for key, value in sc.items():
        if key != "tasks":
            lines.append(f' "{key}": {json.dumps(value)},')
    lines.append(' "tasks": [')
    rows = [f"  {json.dumps(task)}" for task in sc["tasks"]]
    lines.append(",\n".join(rows))
    lines.append(" ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    for make in SCENARIOS:
        sc = make()
        check(sc)
        path = OUT / f"{sc['name']}.json"
        path.write_text(to_json(sc), encoding="utf-8")
        print(f"wrote {path.name}: {sc['gpus']} GPUs, {len(sc['tasks'])} tasks")


if __name__ == "__main__":
    main()
