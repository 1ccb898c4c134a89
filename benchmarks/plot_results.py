"""Draw the documentation's benchmark plots from the recorded figures.

    python benchmarks/plot_results.py [--results benchmarks/results.json]
                                      [--out docs/images/benchmarks]

``benchmarks/results.json`` holds the figures: ``peers/grpc_peers.py --record`` and
``bulk.py --record`` write their blocks themselves (``benchmarks/record.py``: rows,
commit, date, command, load); a block without ``--record`` (``grpc_icount``) says
where it was copied from (``source``: a log in ``benchmarks/results/``). This script
only draws them (it measures nothing), one PNG per block, which ``docs/benchmarks.md``
embeds. Rerun it after a recorded run, and commit the PNGs: the documentation build
needs neither matplotlib nor the network. ``tests/test_benchmarks.py`` runs it on the
checked-in results file.

Needs matplotlib (the ``docs`` and ``bench`` extras).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results.json"
OUT = ROOT / "docs" / "images" / "benchmarks"

#: The PNG files this script writes, by results block.
FILES = {
    "grpc_peers": ("grpc-peers-qps.png", "grpc-peers-cpu.png"),
    "grpc_icount": ("grpc-icount.png",),
    "bulk": ("bulk-cpu.png",),
}
#: One colour per implementation, trio_h2t first, the same in every plot.
COLOURS = ["#2a5db0", "#e08a1e", "#f2c14e", "#4f9d69", "#a14a8c", "#777777"]


def _plt() -> Any:
    try:
        import matplotlib
    except ImportError as exc:
        raise SystemExit(
            f"plot_results.py needs matplotlib (pip install -e '.[docs]'): {exc}"
        ) from None
    matplotlib.use("Agg")  # no display; PNG files only
    matplotlib.rcParams["savefig.dpi"] = 100
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    # No software version in the file: a rerun with another matplotlib changes pixels
    # only where the drawing changed.
    fig.savefig(path, metadata={"Software": None})
    return path


def _bars(ax: Any, groups: list[str], series: dict[str, list[float]]) -> None:
    """Grouped bars, one group per ``groups`` entry and one bar per series, with the
    legend in a row above the bars (room is left for it)."""
    width = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        xs = [g + i * width for g in range(len(groups))]
        ax.bar(xs, values, width, label=name, color=COLOURS[i % len(COLOURS)])
    ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))], groups)
    if ax.get_yscale() == "linear":
        ax.set_ylim(0, max(max(v) for v in series.values()) * 1.25)
    ax.legend(fontsize="small", ncols=len(series), loc="upper left")


def plot_grpc_peers(block: dict[str, Any], out: Path) -> list[Path]:
    """QPS relative to trio_h2t (with the 95 % interval) and CPU per call, per preset."""
    plt = _plt()
    rows = block["rows"]
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    impls = list(dict.fromkeys(r["impl"] for r in rows))
    by = {(r["preset"], r["impl"]): r for r in rows}
    qps_file, cpu_file = FILES["grpc_peers"]

    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(impls)
    for i, impl in enumerate(impls):
        xs = [p + i * width for p in range(len(presets))]
        mid = [by[(p, impl)]["ratio"] for p in presets]
        low = [by[(p, impl)]["ratio"] - by[(p, impl)]["ratio_low"] for p in presets]
        high = [by[(p, impl)]["ratio_high"] - by[(p, impl)]["ratio"] for p in presets]
        ax.bar(xs, mid, width, label=impl, color=COLOURS[i % len(COLOURS)])
        ax.errorbar(xs, mid, yerr=[low, high], fmt="none", ecolor="black", capsize=2, lw=0.8)
    ax.set_xticks([p + 0.4 - width / 2 for p in range(len(presets))], presets)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_ylabel("QPS / trio_h2t's QPS (95 % interval)")
    when = block["date"]["start"][:10] if isinstance(block.get("date"), dict) else ""
    ax.set_title(f"gRPC peers, one connection over 127.0.0.1, at {block['commit']} ({when})")
    ax.legend(fontsize="small", ncols=len(impls), loc="upper left")
    ax.set_ylim(0, max(by[k]["ratio_high"] for k in by) * 1.2)
    paths = [_save(fig, out / qps_file)]
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.2))
    ax.set_yscale("log")
    ax.set_ylim(50, 50_000)  # room above the tallest bar for the legend
    _bars(
        ax,
        presets,
        {
            impl: [
                by[(p, impl)]["server_us_per_call"] + by[(p, impl)]["client_us_per_call"]
                for p in presets
            ]
            for impl in impls
        },
    )
    ax.set_ylabel("CPU µs per call, server + client (log)")
    ax.set_title("CPU per call: lower is better")
    paths.append(_save(fig, out / cpu_file))
    plt.close(fig)
    return paths


def plot_grpc_icount(block: dict[str, Any], out: Path) -> list[Path]:
    """Instructions per operation: the hand-framed floor and the gRPC layer, as
    ``grpc_icount.py --record`` wrote them (one tree), or before and after (a block
    copied from a log: ``before`` and ``after`` trees)."""
    plt = _plt()
    rows = block["rows"]
    series = {"floor (hand-framed gRPC)": [r["floor"] / 1e6 for r in rows]}
    if "before" in block:
        series[f"trio_h2t.grpc at {block['before']}"] = [r["before"] / 1e6 for r in rows]
        series[f"trio_h2t.grpc at {block['after']}"] = [r["after"] / 1e6 for r in rows]
    else:
        series[f"trio_h2t.grpc at {block['commit']}"] = [r["layer"] / 1e6 for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4))
    _bars(ax, [r["workload"] for r in rows], series)
    ax.set_ylabel("million instructions per operation")
    ax.set_title("The gRPC layer against its floor (callgrind, both sides in one process)")
    path = _save(fig, out / FILES["grpc_icount"][0])
    plt.close(fig)
    return [path]


def plot_bulk(block: dict[str, Any], out: Path) -> list[Path]:
    """CPU seconds per GB moved, per side: each recorded tree's trio_h2t (one stream
    and eight) beside the raw trio socket of the same run (``bulk.py --record``)."""
    plt = _plt()
    rows = block["rows"]
    runs = block.get("runs", {})
    labels: dict[str, str] = dict(block.get("labels", {}))

    def name(r: dict[str, Any]) -> str:
        what = (
            "raw trio socket"
            if r.get("impl") == "raw"
            else f"trio_h2t, {r['streams']} stream{'s' if r['streams'] > 1 else ''}"
        )
        tree = r["tree"]
        if len(runs) == 1:
            return what
        when = labels.get(tree) or runs.get(tree, {}).get("date", {}).get("start", "")[:10]
        return f"{tree} ({when}): {what}"

    fig, ax = plt.subplots(figsize=(9, 4))
    _bars(
        ax,
        ["client", "server"],
        {name(r): [r["client_cpu_s_per_gb"], r["server_cpu_s_per_gb"]] for r in rows},
    )
    ax.set_ylabel("CPU seconds per GB (lower is better)")
    title = "Bulk transfer (bulk.py)"
    if len(runs) == 1:
        ((tree, run),) = runs.items()
        title = f"Bulk transfer, tree {tree}, {run['date']['start'][:10]} (bulk.py --record)"
    ax.set_title(title)
    path = _save(fig, out / FILES["bulk"][0])
    plt.close(fig)
    return [path]


PLOTS = {"grpc_peers": plot_grpc_peers, "grpc_icount": plot_grpc_icount, "bulk": plot_bulk}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results file")
    parser.add_argument("--out", type=Path, default=OUT, help="directory for the PNG files")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text(encoding="utf-8"))
    args.out.mkdir(parents=True, exist_ok=True)
    for name, draw in PLOTS.items():
        for path in draw(results[name], args.out):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
