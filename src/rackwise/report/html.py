"""The report page: one self-contained HTML file, no scripts, no network.

Everything the page shows is passed in as plain records; this module only
escapes and lays it out. A Content-Security-Policy forbids any fetch or
script, so a reader's browser cannot be made to load anything from outside.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass, field

_CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"
_CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: #1b1b1b;
       margin: 0; background: #fff; }
main { max-width: 1320px; margin: 0 auto; padding: 1.5rem 1.25rem 4rem; }
h1 { font-size: 1.7rem; margin-bottom: 0.25rem; }
h2 { font-size: 1.3rem; margin-top: 2.2rem; border-bottom: 1px solid #ddd; padding-bottom: 0.2rem; }
h3 { font-size: 1.05rem; margin-bottom: 0.3rem; }
nav ol { columns: 2; padding-left: 1.2rem; }
.how { color: #444; margin: 0.3rem 0 0.6rem; }
.how strong { color: #1b1b1b; }
figure { margin: 0.6rem 0 1.2rem; }
figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.9rem; color: #444; margin-top: 0.3rem; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; font-size: 0.88rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-size: 0.9rem; color: #444; padding-bottom: 0.4rem; }
th, td { border: 1px solid #ddd; padding: 0.25rem 0.5rem; text-align: right; white-space: nowrap; }
th[scope=row], thead th { text-align: left; background: #f6f6f6; }
/* Group labels and headings wrap, so a sweep's many columns fit a laptop screen. */
th[scope=row], thead th { white-space: normal; min-width: 5rem; }
th[scope=row] { max-width: 18rem; }
td.better { color: #0a6b2b; } td.worse { color: #a11c1c; }
pre { background: #f6f6f6; padding: 0.6rem; overflow-x: auto; font-size: 0.82rem; }
details { margin: 0.4rem 0; } summary { cursor: pointer; }
.note { background: #fff7e0; border-left: 4px solid #e0a800; padding: 0.4rem 0.7rem; }
"""


@dataclass(frozen=True)
class FigureBlock:
    """A figure section: heading, a one-line guide, the image and its caption."""

    anchor: str
    heading: str
    how_to_read: str
    alt: str
    src: str  # a data: URI
    caption: str


@dataclass(frozen=True)
class Cell:
    text: str
    tone: str = ""  # "better", "worse" or "" (a CSS class)


@dataclass(frozen=True)
class TableBlock:
    anchor: str
    heading: str
    how_to_read: str
    caption: str
    headers: Sequence[str]
    rows: Sequence[Sequence[Cell]]  # the first cell of each row heads the row


@dataclass(frozen=True)
class ConfigBlock:
    """The configuration of one group: the folders it read and the settings as JSON."""

    title: str
    folders: Sequence[str]
    config_json: str


@dataclass(frozen=True)
class Page:
    title: str
    intro: Sequence[str]
    notes: Sequence[str] = ()
    sections: Sequence[FigureBlock | TableBlock] = ()
    configs: Sequence[ConfigBlock] = field(default_factory=tuple)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def render(page: Page) -> str:
    """The page as an HTML document (a string that ends with a newline)."""
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="rackwise report">',
        f"<title>{_e(page.title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        f"<h1>{_e(page.title)}</h1>",
    ]
    out += [f"<p>{_e(line)}</p>" for line in page.intro]
    out += [f'<p class="note" role="note">{_e(note)}</p>' for note in page.notes]
    out.append('<nav aria-label="Contents"><h2 id="contents">Contents</h2><ol>')
    anchors = [(s.anchor, s.heading) for s in page.sections] + [("configuration", "Configuration")]
    out += [f'<li><a href="#{_e(a)}">{_e(h)}</a></li>' for a, h in anchors]
    out.append("</ol></nav>")
    for section in page.sections:
        out += _figure(section) if isinstance(section, FigureBlock) else _table(section)
    out += _configs(page.configs)
    out += ["</main>", "</body>", "</html>"]
    return "\n".join(out) + "\n"


def _figure(block: FigureBlock) -> list[str]:
    return [
        f'<section aria-labelledby="{_e(block.anchor)}">',
        f'<h2 id="{_e(block.anchor)}">{_e(block.heading)}</h2>',
        f'<p class="how"><strong>How to read:</strong> {_e(block.how_to_read)}</p>',
        "<figure>",
        f'<img src="{block.src}" alt="{_e(block.alt)}">',
        f"<figcaption>{_e(block.caption)}</figcaption>",
        "</figure>",
        "</section>",
    ]


def _table(block: TableBlock) -> list[str]:
    out = [
        f'<section aria-labelledby="{_e(block.anchor)}">',
        f'<h2 id="{_e(block.anchor)}">{_e(block.heading)}</h2>',
        f'<p class="how"><strong>How to read:</strong> {_e(block.how_to_read)}</p>',
        '<div class="table-wrap"><table>',
        f"<caption>{_e(block.caption)}</caption>",
        "<thead><tr>" + "".join(f'<th scope="col">{_e(h)}</th>' for h in block.headers)
        + "</tr></thead>",
        "<tbody>",
    ]
    for row in block.rows:
        head, *cells = row
        out.append(f'<tr><th scope="row">{_e(head.text)}</th>'
                   + "".join(_cell(c) for c in cells) + "</tr>")
    out += ["</tbody>", "</table></div>", "</section>"]
    return out


def _cell(cell: Cell) -> str:
    cls = f' class="{cell.tone}"' if cell.tone else ""
    return f"<td{cls}>{_e(cell.text)}</td>"


def _configs(blocks: Sequence[ConfigBlock]) -> list[str]:
    out = [
        '<section aria-labelledby="configuration">',
        '<h2 id="configuration">Configuration</h2>',
        '<p class="how"><strong>How to read:</strong> the settings each group ran with, as its '
        "summary.json records them; the seed is replaced by the list of seeds.</p>",
    ]
    for block in blocks:
        out += [
            "<details>",
            f"<summary>{_e(block.title)}</summary>",
            f"<p>Folders: {_e(', '.join(block.folders))}</p>",
            f"<pre>{_e(block.config_json)}</pre>",
            "</details>",
        ]
    out.append("</section>")
    return out
