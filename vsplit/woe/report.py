"""The value report ("what a partner's data is worth"): every party's attributes ranked by IV, in Markdown and HTML.

``value_report.md`` opens with the ranking (party, attribute, IV, band) and a bar chart of IV per attribute coloured
by party (``iv.png``), then each party's IV in sum and per band, then every attribute's binning table. A partner's
attributes appear as it chose (names, or ``<party>#<k>``). Later sections (the scorecard's Gini of the bank alone
against the joint one) come in through :attr:`~vsplit.woe.result.ValueReport.sections`. ``value_report.html`` is the
same page in one file (:func:`vsplit.report.html.write_html_report`). Files are written atomically.

Example:
    >>> import tempfile, pathlib, numpy as np
    >>> from vsplit.woe.result import ValueReport
    >>> from vsplit.woe.tables import BinningTable
    >>> t = BinningTable(party="shop", attribute="shop#0", kind="numeric", bins=("fine 0", "fine 1", "missing"),
    ...                  events=np.array([10, 40, 0]), nonevents=np.array([90, 60, 0]))
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> paths = write_value_report(folder, ValueReport(label_party="bank", tables=[t], rows=200, events=50))
    >>> sorted(p.name for p in paths), "| 1 | shop | shop#0 | 0.7167 | strong |" in paths[1].read_text()
    (['iv.png', 'value_report.html', 'value_report.md'], True)
"""

from __future__ import annotations

from pathlib import Path

from vsplit.atomic import write_atomic
from vsplit.woe.result import ValueReport
from vsplit.woe.tables import IV_BANDS, BinningTable

SCORECARD_SECTION = "Scorecard: the bank alone against the joint one"


def value_report_markdown(report: ValueReport, *, chart: str | None = "iv.png") -> str:
    """The report as Markdown (``chart``: the bar chart's file, or ``None``)."""
    ranked = report.ranked()
    parties = list(dict.fromkeys([report.label_party, *(t.party for t in report.tables)]))
    lines = [f"# What each party's attributes tell about the label: value report of {report.label_party}", "",
             f"{report.rows:,} aligned customers, {report.events:,} events (rate {report.events / report.rows:.2%}). "
             "Information value (IV) per attribute, from weight of evidence (WOE) on coarse bins; bands: < 0.02 "
             "useless, 0.02-0.1 weak, 0.1-0.3 medium, > 0.3 strong. A partner's attributes are named as it chose; "
             "its bins are positions in its own binning (the label party never sees a value or an edge).", "",
             "| rank | party | attribute | IV | band |", "| ---: | --- | --- | ---: | --- |",
             *(f"| {k} | {t.party} | {t.attribute} | {t.iv:.4f} | {t.band} |" for k, t in enumerate(ranked, 1)), ""]
    if chart:
        lines += [f"![IV per attribute]({chart})", ""]
    lines += ["## Per party", "", "| party | attributes | sum of IV | " + " | ".join(n for _, n in IV_BANDS) + " |",
              "| --- | ---: | ---: |" + " ---: |" * len(IV_BANDS)]
    for party in parties:
        mine = [t for t in report.tables if t.party == party]
        bands = [sum(t.band == n for t in mine) for _, n in IV_BANDS]
        lines.append(f"| {party} | {len(mine)} | {sum(t.iv for t in mine):.4f} | " + " | ".join(map(str, bands)) + " |")
    lines.append("")
    for title, body in report.sections.items():
        lines += [f"## {title}", "", body.rstrip(), ""]
    lines += ["## Binning tables", ""]
    for t in ranked:
        lines += [f"### {t.party}: {t.attribute} (IV {t.iv:.4f}, {t.band})", "", *_table(t), ""]
    return "\n".join(lines)


def _table(t: BinningTable) -> list[str]:
    frame = t.frame()
    out = ["| bin | count | share | non-events | events | event rate | WOE | IV |",
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in frame.itertuples(index=False):
        woe = "" if row.WoE != row.WoE else f"{row.WoE:.4f}"  # NaN on the totals row
        out.append(f"| {str(row.Bin).replace('|', '/')} | {row.Count:,} | {row[2]:.2%} | {row[3]:,} | {row.Event:,} "
                   f"| {row[5]:.2%} | {woe} | {row.IV:.4f} |")
    return out


def write_iv_chart(path: Path, report: ValueReport, *, top: int = 40) -> Path:
    """A horizontal bar chart of the ``top`` attributes' IV, coloured by party, with the band limits."""
    from vsplit.report.plots import _save, plt

    ranked = report.ranked()[:top][::-1]
    parties = list(dict.fromkeys([report.label_party, *(t.party for t in report.tables)]))
    colours = {p: plt.get_cmap("tab10")(k % 10) for k, p in enumerate(parties)}
    fig, ax = plt.subplots(figsize=(6.5, max(2.0, 0.28 * len(ranked) + 1)))
    ax.barh([f"{t.party}: {t.attribute}" for t in ranked], [t.iv for t in ranked],
            color=[colours[t.party] for t in ranked])
    for bound, _ in IV_BANDS[:-1]:
        ax.axvline(bound, linestyle="--", color="grey", linewidth=0.8)
    ax.set(xlabel="information value (dashed: 0.02, 0.1, 0.3)", title="IV per attribute")
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours[p]) for p in parties], labels=parties,
              loc="lower right")
    _save(fig, path)
    return path


def write_value_report(folder: Path, report: ValueReport) -> list[Path]:
    """``iv.png``, ``value_report.md`` and ``value_report.html`` in ``folder``; their paths."""
    from vsplit.report.html import write_html_report

    folder.mkdir(parents=True, exist_ok=True)
    chart = write_iv_chart(folder / "iv.png", report)
    markdown = folder / "value_report.md"
    write_atomic(markdown, (value_report_markdown(report) + "\n").encode("utf-8"))
    return [chart, markdown, write_html_report(markdown, "value_report.html")]
