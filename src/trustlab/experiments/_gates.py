"""The quick gate's rule: which claims ``QUICK_EXPECTED_PASS`` may hold (``docs/design.md``, "Quick gates").

A gated id must be a primary claim or a premise (never a secondary line), PASS on at least
``MIN_PASSES`` of the ``N_SEEDS`` quick seeds 0-4, and not PASS under the experiment's ``KNOCKOUT``
(a claim that passes with its mechanism switched off holds by construction). Quick seed ``k`` is the
quick config with every seed shifted by ``k`` (seed 0 is the quick config itself).

``python -m trustlab.experiments._gates ID [ID ...]`` runs the five seeds and the knockout, each in its own
process, and prints the table and the gate the rule gives; the slow test ``tests/test_gates.py`` checks the
declared gates against it.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field

from trustlab.experiments._isolated import run_isolated, thread_env
from trustlab.experiments.runner import get_experiment
from trustlab.results.result import Result

N_SEEDS = 5
MIN_PASSES = 4


def seed_override(exp_id: str, offset: int) -> tuple[str, ...]:
    """The ``--set`` override of quick seed ``offset`` (every quick seed shifted by ``offset``; none for 0)."""
    if offset == 0:
        return ()
    seeds = get_experiment(exp_id).config_cls.quick().seeds
    return ("seeds=" + ",".join(str(int(s) + offset) for s in seeds),)


@dataclass
class GateTable:
    """Statuses of every claim over the quick seeds and under the knockout, and the gate the rule gives."""

    exp_id: str
    statuses: dict[str, list[str]] = field(default_factory=dict)  # id -> status per seed offset
    knockout: dict[str, str] = field(default_factory=dict)  # id -> status under KNOCKOUT
    eligible: tuple[str, ...] = ()  # primary claims and premises
    errors: list[str] = field(default_factory=list)
    #: fingerprints of each seed's records: five equal ones mean the seed shift does not reach the run
    fingerprints: list[str] = field(default_factory=list)

    def passes(self, cid: str) -> int:
        return sum(s == "PASS" for s in self.statuses.get(cid, []))

    def gate(self) -> tuple[str, ...]:
        """Ids the rule admits: eligible, PASS on >= MIN_PASSES seeds, not PASS under the knockout."""
        if not self.knockout:  # no knockout declared (or it raised): nothing can be shown not to hold by construction
            return ()
        return tuple(c for c in self.eligible if self.passes(c) >= MIN_PASSES and self.knockout.get(c) != "PASS")

    def lines(self) -> list[str]:
        n = max((len(v) for v in self.statuses.values()), default=0)
        out = [f"{self.exp_id}: passes over quick seeds 0-{n - 1} (rule: >= {MIN_PASSES} of {N_SEEDS}), and status "
               "under KNOCKOUT"]
        for cid, sts in self.statuses.items():
            mark = "" if cid in self.eligible else "  (secondary: never gated)"
            out.append(f"  {cid:<24} {self.passes(cid)}/{len(sts)} {' '.join(sts):<30} knockout "
                       f"{self.knockout.get(cid, '-')}{mark}")
        out += [f"  error: {e}" for e in self.errors]
        distinct = len(set(self.fingerprints))
        out.append(f"  distinct runs over the seeds: {distinct}/{len(self.fingerprints)}"
                   + ("  (the seed shift does not reach the run: one measurement repeated)" if distinct == 1 else ""))
        out.append(f"  rule's gate: {self.gate()}")
        return out


def _fingerprint(res: Result) -> str:
    import hashlib

    return hashlib.sha256(json.dumps([res.records, res.summary], sort_keys=True, default=str).encode()).hexdigest()


def _run(exp_id: str, overrides: tuple[str, ...], knockout: bool, threads: int | None) -> Result:
    return run_isolated(exp_id, "quick", out_dir=None, overrides=overrides, show_progress=False,
                        env=thread_env(threads), knockout=knockout).result


def gate_table(exp_id: str, *, n_seeds: int = N_SEEDS, threads: int | None = 1, knockout: bool = True) -> GateTable:
    """Run ``exp_id``'s quick mode on seeds 0..n_seeds-1 (and under its KNOCKOUT) and tabulate the statuses."""
    exp = get_experiment(exp_id)
    table = GateTable(exp_id, eligible=tuple(c.id for c in exp.claims if not c.secondary))
    for k in range(n_seeds):
        res = _run(exp_id, seed_override(exp_id, k), False, threads)
        if res.error is not None:
            table.errors.append(f"seed {k}: {res.error.get('type')}: {res.error.get('message')}")
        table.fingerprints.append(_fingerprint(res))
        got = {c.id: c.status for c in res.claims}
        for c in exp.claims:
            table.statuses.setdefault(c.id, []).append(got.get(c.id, "ERROR"))
    if knockout and exp.knockout:
        res = _run(exp_id, (), True, threads)
        if res.error is not None:
            table.errors.append(f"knockout: {res.error.get('type')}: {res.error.get('message')}")
        table.knockout = {c.id: c.status for c in res.claims}
    return table


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m trustlab.experiments._gates", description=__doc__.split("\n")[0])
    ap.add_argument("ids", nargs="+")
    ap.add_argument("--seeds", type=int, default=N_SEEDS)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="also write the tables to this JSON file")
    args = ap.parse_args(argv)
    tables = []
    for exp_id in args.ids:
        t = gate_table(exp_id, n_seeds=args.seeds, threads=args.threads)
        print("\n".join(t.lines()), flush=True)
        tables.append({"id": exp_id, "statuses": t.statuses, "knockout": t.knockout, "gate": list(t.gate()),
                       "distinct_runs": len(set(t.fingerprints)),
                       "declared": list(get_experiment(exp_id).quick_expected_pass or ()), "errors": t.errors})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(tables, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
