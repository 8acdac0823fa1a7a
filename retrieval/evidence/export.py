"""A run's graph as GraphML (for networkx, Gephi, yEd) and Graphviz DOT (text; no graphviz needed to write it).

Both hold every paper and edge of the run, kept or not, with the numbers of the audit trail:

- papers: ``title``, ``year``, ``age``, ``role`` (seed, reference, citing), ``seed``, ``kept``, ``reason`` (why it
  was dropped), ``score`` and ``rank`` (ranked papers only);
- edges (citing -> cited): ``delta``, ``covered_claims``, ``claims_citing``, ``age_weight``, ``weight``, ``kept``,
  ``reason`` (why it was pruned);
- the graph: ``query``, ``ranker``, ``status``, ``reference_year``.

In DOT, seeds have a double border, returned papers are bold, and dropped papers and pruned edges are grey and
dashed; an edge's label is its Delta and weight.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from ..outfile import replace_text
from .records import EvidenceRun

GRAPHML_NS = "http://graphml.graphdrawing.org/xmlns"

# (name, GraphML type) of the attributes written for papers, edges and the graph.
_NODE_KEYS = (
    ("title", "string"),
    ("year", "int"),
    ("age", "int"),
    ("role", "string"),
    ("seed", "boolean"),
    ("kept", "boolean"),
    ("reason", "string"),
    ("score", "double"),
    ("rank", "int"),
)
_EDGE_KEYS = (
    ("delta", "double"),
    ("covered_claims", "int"),
    ("claims_citing", "int"),
    ("age_weight", "double"),
    ("weight", "double"),
    ("kept", "boolean"),
    ("reason", "string"),
)
_GRAPH_KEYS = (("query", "string"), ("ranker", "string"), ("status", "string"), ("reference_year", "int"))


#: Characters XML 1.0 cannot hold, even escaped (C0 controls but tab, line feed and carriage return; U+FFFE/F).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _xml(text: str) -> str:
    """``text`` with each character XML cannot hold replaced by U+FFFD (a title or query may hold one; a reader
    refuses the whole file over it)."""
    return _NOT_XML.sub("\ufffd", text)


def _text(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return _xml(str(value))


def _data(parent: ET.Element, prefix: str, values: dict) -> None:
    for name, value in values.items():
        if value is not None:  # an absent value is left out, as GraphML allows
            element = ET.SubElement(parent, f"{{{GRAPHML_NS}}}data", key=f"{prefix}_{name}")
            element.text = _text(value)


def to_graphml(run: EvidenceRun) -> str:
    """The run's graph as a GraphML document (``networkx.read_graphml`` reads it as a directed graph)."""
    ET.register_namespace("", GRAPHML_NS)
    root = ET.Element(f"{{{GRAPHML_NS}}}graphml")
    for prefix, scope, keys in (("g", "graph", _GRAPH_KEYS), ("n", "node", _NODE_KEYS), ("e", "edge", _EDGE_KEYS)):
        for name, kind in keys:
            ET.SubElement(
                root,
                f"{{{GRAPHML_NS}}}key",
                {"id": f"{prefix}_{name}", "for": scope, "attr.name": name, "attr.type": kind},
            )
    graph = ET.SubElement(root, f"{{{GRAPHML_NS}}}graph", id="evidence", edgedefault="directed")
    _data(
        graph,
        "g",
        {
            "query": run.query,
            "ranker": run.config.ranker,
            "status": run.health.status,
            "reference_year": run.reference_year,
        },
    )
    for node in run.nodes.values():
        element = ET.SubElement(graph, f"{{{GRAPHML_NS}}}node", id=_xml(node.paper_id))
        _data(
            element,
            "n",
            {
                "title": node.title,
                "year": node.year,
                "age": node.age,
                "role": node.role,
                "seed": node.seed is not None,
                "kept": node.kept,
                "reason": node.reason,
                "score": node.score,
                "rank": node.rank,
            },
        )
    for edge in run.edges.values():
        element = ET.SubElement(graph, f"{{{GRAPHML_NS}}}edge", source=_xml(edge.citing), target=_xml(edge.cited))
        _data(
            element,
            "e",
            {
                "delta": edge.delta,
                "covered_claims": edge.support.covered,
                "claims_citing": edge.claims_citing,
                "age_weight": edge.age_weight,
                "weight": edge.weight,
                "kept": edge.kept,
                "reason": edge.reason,
            },
        )
    ET.indent(root)
    return "<?xml version='1.0' encoding='utf-8'?>\n" + ET.tostring(root, encoding="unicode") + "\n"


def _escape(text: str) -> str:
    """Text for inside a DOT double-quoted string: backslashes and quotes escaped, line breaks made spaces."""
    return " ".join(str(text).split()).replace("\\", "\\\\").replace('"', '\\"')


def _quote(text: str) -> str:
    return f'"{_escape(text)}"'


def _short(title: str, width: int = 40) -> str:
    return title if len(title) <= width else title[: width - 3] + "..."


def to_dot(run: EvidenceRun) -> str:
    """The run's graph as Graphviz DOT text (render with ``dot -Tsvg``)."""
    lines = [
        "digraph evidence {",
        f"  graph [label={_quote(f'{run.query[:80]} ({run.config.ranker}, {run.health.status})')}, rankdir=LR];",
        "  node [shape=box, fontsize=10];",
        "  edge [fontsize=8];",
    ]
    for node in run.nodes.values():
        rank = f" #{node.rank} {node.score:.4f}" if node.rank is not None else ""
        year = node.year if node.year is not None else "n.d."
        head, title = _escape(f"{node.paper_id} ({year}){rank}"), _escape(_short(node.title))
        label = f'"{head}\\n{title}"'  # \n: DOT's line break inside a label
        attrs = [f"label={label}"]
        if node.seed is not None:
            attrs.append("peripheries=2")
        if node.rank is not None and node.rank <= run.config.top_k:
            attrs.append("style=bold")
        if not node.kept:
            attrs += ["style=dashed", "color=gray", "fontcolor=gray"]
        lines.append(f"  {_quote(node.paper_id)} [{', '.join(attrs)}];")
    for edge in run.edges.values():
        attrs = [f'label="D {edge.delta:.2f} w {edge.weight:.2f}"']
        if not edge.kept:
            attrs += ["style=dashed", "color=gray", "fontcolor=gray"]
        lines.append(f"  {_quote(edge.citing)} -> {_quote(edge.cited)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_graphml(run: EvidenceRun, path: str | os.PathLike[str]) -> Path:
    """Write ``to_graphml(run)`` to ``path``, whole or not at all (``retrieval.outfile``)."""
    return replace_text(path, to_graphml(run))


def write_dot(run: EvidenceRun, path: str | os.PathLike[str]) -> Path:
    """Write ``to_dot(run)`` to ``path``, whole or not at all (``retrieval.outfile``)."""
    return replace_text(path, to_dot(run))
