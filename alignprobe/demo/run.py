"""``alignprobe demo``: the Kimi-K2.5 case in miniature, on a laptop, in about a minute.

A tiny seeded DeepseekV3-shaped model (MLA + MoE, like Kimi-K2.x) is trained for a few seconds;
a training dump and serving dumps with one planted fault each are captured from it
(``alignprobe.demo.scenarios``); each pair is compared and reported. The faults are the three that
gave Kimi-K2.5 an accept length of 1.00, plus a clean pair that must pass:

    clean             the same model and dtype, captured at another batch size: PASS
    eagle_not_eagle3  --speculative-algorithm EAGLE: the drafter gets the H-wide final state
    offset_plus1      the engine reads the layer ids with SGLang's +1
    int4              INT4 weight-only serving against BF16 training states
"""

from __future__ import annotations

import dataclasses
import os
import time
from typing import Callable

from alignprobe.errors import BadInput
from alignprobe.findings import render
from alignprobe.safe_paths import refuse_unusable_name

DEFAULT_OUT = "alignprobe-demo"
MARKER = ".alignprobe-demo"  # marks a folder the demo made, so a rerun may replace its files

# name -> (what is planted, verdict it must get, finding code it must raise or None for "none above info")
SCENARIOS: dict[str, tuple[str, str, str | None]] = {
    "clean": ("same model and dtype, batch size 1 vs 4", "PASS", None),
    "eagle_not_eagle3": ("--speculative-algorithm EAGLE: H-wide final state instead of 3H", "FAIL", "width_mismatch"),
    "offset_plus1": ("layer ids read with SGLang's +1", "FAIL", "layer_offset"),
    "int4": ("INT4 weight-only serving vs BF16 training", "FAIL", "numeric_drift"),
}


@dataclasses.dataclass
class ScenarioOutcome:
    name: str
    planted: str
    expected_verdict: str
    expected_code: str | None
    verdict: str
    codes: list[str]  # finding codes at warn or above, most severe first
    headline: str  # the most severe finding's title, or "no findings"
    report_dir: str

    @property
    def as_expected(self) -> bool:
        if self.verdict != self.expected_verdict:
            return False
        return not self.codes if self.expected_code is None else self.expected_code in self.codes


@dataclasses.dataclass
class DemoResult:
    out_dir: str
    model: str
    outcomes: list[ScenarioOutcome]
    capture_s: float
    compare_s: float

    def __bool__(self) -> bool:
        return all(o.as_expected for o in self.outcomes)

    def format(self) -> str:
        width = max(len(o.name) for o in self.outcomes)
        lines = []
        for o in self.outcomes:
            got = o.codes[0] if o.codes else "-"
            text = o.headline or o.planted
            text = text if len(text) <= 72 else text[:69] + "..."
            if not o.as_expected:
                text = f"expected {o.expected_verdict} {o.expected_code or '(no findings)'}; got: {text}"
            lines.append(f"  {'ok' if o.as_expected else 'WRONG':<5} {o.name:<{width}}  {o.verdict:<4}  {got:<14}  {text}")
        lines.append("")
        lines.append(f"reports: {os.path.join(self.out_dir, '<scenario>', 'report.html')} (and summary.md, result.json)")
        lines.append(f"dumps:   {os.path.join(self.out_dir, 'dumps')}")
        verdict = "every scenario got its expected verdict" if self else "some scenarios did NOT get their expected verdict"
        lines.append(f"{verdict} (capture {self.capture_s:.0f} s, compare and report {self.compare_s:.0f} s)")
        return "\n".join(lines)


def run_demo(
    out_dir: str | os.PathLike = DEFAULT_OUT, log: Callable[[str], None] = lambda line: None, progress: bool = False
) -> DemoResult:
    """Build the tiny model, capture the dumps, compare and report each scenario into ``out_dir``;
    ``progress`` shows a bar over those stages on stderr (the demo takes a minute or two)."""
    from tqdm import tqdm

    from alignprobe.compare import compare
    from alignprobe.report import write_report
    from alignprobe.demo.scenarios import build_scenarios, count_steps

    out_dir = _claim_folder(os.fspath(out_dir))
    dumps = os.path.join(out_dir, "dumps")
    log(f"building a tiny seeded DeepseekV3 model and capturing {len(SCENARIOS) + 1} dumps into {dumps} ...")
    started = time.perf_counter()
    bar = tqdm(total=count_steps(SCENARIOS) + len(SCENARIOS), desc="demo", unit="step", disable=not progress,
               leave=False, dynamic_ncols=True)

    def step(done: str) -> None:
        bar.set_postfix_str(done, refresh=False)
        bar.update(1)

    try:
        paths = build_scenarios(dumps, names=list(SCENARIOS), overwrite=True, step=step)
        captured = time.perf_counter()
        bar.clear()
        log(f"captured in {captured - started:.0f} s; comparing each serve dump with train.h5")
        outcomes = []
        model = ""
        for name, (planted, verdict, code) in SCENARIOS.items():
            result = compare(paths["train"], paths[name])
            report_dir = os.path.join(out_dir, name)
            write_report(result, report_dir)
            step(f"{name} compared")
            model = model or str(result.train_provenance.get("model", ""))
            outcomes.append(ScenarioOutcome(
                name=name,
                planted=planted,
                expected_verdict=verdict,
                expected_code=code,
                verdict=result.verdict,
                codes=result.codes("warn"),
                headline=render.title(result.findings[0]) if result.findings else "",
                report_dir=report_dir,
            ))
    finally:
        bar.close()
    return DemoResult(out_dir, model, outcomes, captured - started, time.perf_counter() - captured)


def _claim_folder(out_dir: str) -> str:
    """Use ``out_dir`` if it is new, empty, or an earlier demo's; never write into someone's folder."""
    refuse_unusable_name(out_dir, "--out")
    if os.path.exists(out_dir):
        if not os.path.isdir(out_dir):
            raise BadInput(f"{out_dir}: exists and is not a folder; give --out a new folder")
        if os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, MARKER)):
            raise BadInput(f"{out_dir}: a folder the demo did not make and not empty; give --out a new or empty folder")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, MARKER), "w") as f:
        f.write("made by `alignprobe demo`; a rerun replaces the files in this folder\n")
    return out_dir
