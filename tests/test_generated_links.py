"""Every link a generated file shows people (the model card, the report, in Markdown and HTML) leads somewhere: a
docs page of this repository (and its heading, for an anchor) or a file next to the generated one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_explain import make_views

from vsplit.estimator import SplitClassifier
from vsplit.explain.card import model_card
from vsplit.report.card import write_model_card

ROOT = Path(__file__).resolve().parent.parent
#: a docs path named in text ("see docs/x.md#part"), a Markdown link target, an HTML href or src
PATTERNS = (re.compile(r"(docs/[\w./-]+\.md(?:#[\w-]+)?)"), re.compile(r"\]\(([^)\s]+)\)"),
            re.compile(r"""(?:href|src)=["']([^"']+)["']"""))


def _slug(heading: str) -> str:
    """A heading's anchor as MkDocs makes it (lower case, punctuation dropped, spaces as dashes)."""
    text = re.sub(r"[^\w\s-]", "", heading.strip().lower())
    return re.sub(r"[\s]+", "-", text)


def broken_links(path: Path) -> list[str]:
    """The links of the generated file ``path`` that lead nowhere."""
    text = path.read_text()
    broken = []
    for pattern in PATTERNS:
        for target in pattern.findall(text):
            if re.match(r"^(https?:|mailto:|data:|#)", target):
                continue
            file, _, anchor = target.partition("#")
            found = ROOT / file if file.startswith("docs/") else path.parent / file
            if not found.is_file():
                broken.append(target)
            elif anchor and found.suffix == ".md":
                headings = {_slug(h) for h in re.findall(r"^#+\s+(.*)$", found.read_text(), flags=re.M)}
                if anchor not in headings:
                    broken.append(target)
    return broken


def test_links_in_the_code_that_writes_cards_and_reports_lead_to_docs_pages():
    sources = [*sorted((ROOT / "vsplit" / "report").glob("*.py")), ROOT / "vsplit" / "explain" / "card.py"]
    named = {m for p in sources for m in PATTERNS[0].findall(p.read_text())}
    assert named, "no docs link found in the card's and report's code: the pattern is out of date"
    for target in sorted(named):
        file, _, anchor = target.partition("#")
        assert (ROOT / file).is_file(), f"{target}: no such docs page"
        if anchor:
            headings = {_slug(h) for h in re.findall(r"^#+\s+(.*)$", (ROOT / file).read_text(), flags=re.M)}
            assert anchor in headings, f"{target}: no such heading"


@pytest.mark.parametrize("page", ["model_card.md", "model_card.html"])
def test_links_in_the_committed_example_card_resolve(page):
    assert broken_links(ROOT / "docs" / "governance" / page) == []


def test_links_in_a_generated_model_card_resolve_and_its_epoch_counts_from_one(tmp_path):
    views = make_views(n=300, seed=1)
    clf = SplitClassifier(candidates="network", epochs=2, random_state=0, alignment="join").fit(views)
    card = model_card(clf, views, views, draws=20)
    assert card["recipe"]["chosen_epoch"] == str(clf.best_epoch_ + 1)  # as the report's "Chosen epoch"
    markdown, html = write_model_card(tmp_path, card)
    assert "docs/privacy.md#measured-results" in markdown.read_text()
    assert broken_links(markdown) == [] and broken_links(html) == []


def test_the_link_check_finds_a_missing_page_and_a_missing_heading(tmp_path):
    page = tmp_path / "card.md"
    page.write_text("see docs/privacy_audit.md and docs/privacy.md#no-such-part, [ok](docs/privacy.md) ![x](x.png)")
    assert broken_links(page) == ["docs/privacy_audit.md", "docs/privacy.md#no-such-part", "x.png"]
