"""Run reports: ``report.json`` (validated against ``schema.json``) and a Markdown report with PNG plots."""

from vsplit.report.plots import write_plots
from vsplit.report.writer import write_label_report, write_partner_report

__all__ = ["write_label_report", "write_partner_report", "write_plots"]
