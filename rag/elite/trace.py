"""Readable printing of an ELITE trace (the trace itself is plain JSON-serialisable data)."""
from __future__ import annotations


def format_trace(trace: dict) -> str:
    """Policy, scope, each round's terms, hits, chunks and verdict, LLM usage and time per stage."""
    scope = trace.get("scope", {})
    lines = [f"ELITE · policy {trace.get('policy')} · branch {trace.get('branch')} · "
             f"{scope.get('documents', 0)} readable documents, {scope.get('sentences', 0)} sentences "
             f"(sentence store {scope.get('store')}, built in {scope.get('store_build_seconds', 0)} s)"]
    if trace.get("direct_answer"):
        answer = trace["direct_answer"]
        lines.append(f"direct answer: {answer['answer']}  forms: {', '.join(answer['forms'])}")
        lines += [f"  {d['doc_id']} · version {d['version']}: {d['count']} at {d['offsets'][:5]}"
                  for d in answer["documents"]]
    for r in trace.get("rounds", []):
        new = [t for t in r["terms"] if t["new"]]
        lines.append(f"round {r['round']}: {len(r['terms'])} terms, new: "
                     + ", ".join(f"{t['term']} ({t['kind']})" for t in new))
        lines.append(f"  {len(r['hits'])} sentences hit, {len(r['chunks'])} chunks; "
                     f"coverage {r['coverage']:.2f}, focus {r['focus']:.2f}")
        for c in r["chunks"]:
            imp = "-" if c["importance"] is None else f"{c['importance']:.2f}"
            lines.append(f"    {c['doc_id']} · {c['version']} [{c['start']}:{c['end']}] "
                         f"score {c['score']:.2f} importance {imp}")
        judge = r["judge"]
        lines.append(f"  judge: {judge['rule']} → {'sufficient' if judge['sufficient'] else 'insufficient'}")
    if "stopped" in trace:
        lines.append(f"stopped: {trace['stopped']}")
    if "organise" in trace:
        o = trace["organise"]
        lines.append(f"organise: {o['chunks']} chunks, kept {o['kept']} (pruned {o['pruned_low_score']} low-score, "
                     f"{o['pruned_by_judge']} by the judge)")
    if "packed" in trace:
        p = trace["packed"]
        lines.append(f"packed: {p['items']} items, {p['tokens']} of {p['budget']} tokens")
    totals = trace.get("llm_totals", {})
    lines.append(f"LLM: {totals.get('calls', 0)} calls, {totals.get('input_tokens', 0)} in / "
                 f"{totals.get('output_tokens', 0)} out tokens, {totals.get('fallbacks', 0)} fallbacks")
    lines.append("seconds: " + ", ".join(f"{k} {v:.3f}" for k, v in trace.get("seconds", {}).items()))
    return "\n".join(lines)
