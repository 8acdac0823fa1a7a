"""The evidence graph of an ``explain`` run drawn as SVG, on the server: a pure function of the ``graph`` part of
``Service.explain``'s dict (nodes and edges), so it is tested without a browser.

What is drawn: every seed, the ``max_nodes`` other papers of highest score (ties by id), and the edges among them
(at most ``max_edges``: kept edges by weight first, then pruned ones by Delta). Given ``core`` (the top papers of
the run), only the seeds, those papers and the paper asked about, with the kept edges among them: the readable
view a page shows first, the whole graph a click away. ``Drawing`` says how many of how many were drawn.

Layout, deterministic and the same for the same run: seeds on an inner circle in order of relevance; the papers the
seeds cite on a middle ring, the papers citing them on an outer ring, each placed in the angular order of the seeds
it came in through (the circular mean of their angles), so a paper sits near its seeds; a ring that would crowd
alternates between two radii. Edges are slightly curved towards the centre.

How it reads: seeds are filled in the accent colour, other kept papers in blue, papers dropped after pruning are
hollow; a node's area grows with its score; kept edges are solid (darker and wider by weight), pruned edges dashed
and grey. Every node is a ``<circle class="node ...">`` (``seed``, ``kept`` or ``dropped``, and ``focus`` for the
paper asked about, which also gets a dashed ring and a label) and every edge a ``<path class="edge kept|pruned">``,
each with a ``<title>`` child (the browser's tooltip: title and year; Delta, weight, kept or why pruned) and
``data-`` attributes with the ids. Given ``link``, each node is inside an ``<a>`` to the page it names (a click
opens the paper). Titles are shown with their TeX rendered (``reading.text``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from html import escape

from ..output.reading import text as readable

SIZE = 1000  # positions lie in a SIZE x SIZE square
CENTRE = SIZE / 2
RADII = {"seed": 150.0, "reference": 300.0, "citing": 420.0}
STAGGER = 22.0  # radial offset of every other node on a crowded ring
MIN_R, MAX_R = 3.5, 13.0  # node radius: MIN_R at score 0, MAX_R at the largest score (by area)
MAX_NODES = 150  # non-seed papers drawn
MAX_EDGES = 2500

SEED_FILL = "#e8590c"
KEPT_FILL = "#1c7ed6"
KEPT_EDGE = "#364fc7"
PRUNED_EDGE = "#adb5bd"


@dataclass(frozen=True)
class Drawing:
    """The SVG text and what it holds: papers and edges drawn of how many in the run."""

    svg: str
    nodes_total: int
    nodes_drawn: int
    seeds_drawn: int
    edges_total: int
    edges_drawn: int
    kept_drawn: int
    pruned_drawn: int
    drawn_ids: frozenset[str]

    @property
    def complete(self) -> bool:
        return self.nodes_drawn == self.nodes_total and self.edges_drawn == self.edges_total


def select(
    graph: dict,
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
    core: Collection[str] | None = None,
    focus: str | None = None,
) -> tuple[list[dict], list[dict]]:
    """The nodes and edges to draw: every seed, the ``max_nodes`` other papers of highest score (ties by id),
    and the edges whose two ends are drawn, at most ``max_edges`` of them (kept by weight, then pruned by Delta).
    With ``core``: every seed, the papers of ``core`` and ``focus``, and only the kept edges among them."""
    nodes = graph.get("nodes", [])
    seeds = [n for n in nodes if n.get("role") == "seed"]
    others = sorted(
        (n for n in nodes if n.get("role") != "seed"), key=lambda n: (-(n.get("score") or 0.0), n["paper_id"])
    )
    if core is not None:
        wanted = set(core) | ({focus} if focus else set())
        others = [n for n in others if n["paper_id"] in wanted]
    chosen = seeds + others[:max_nodes]
    ids = {n["paper_id"] for n in chosen}
    edges = [e for e in graph.get("edges", []) if e["citing"] in ids and e["cited"] in ids]
    if core is not None:
        edges = [e for e in edges if e.get("kept")]
    if len(edges) > max_edges:
        edges.sort(key=lambda e: (not e.get("kept"), -(e.get("weight") or 0.0), -(e.get("delta") or 0.0)))
        edges = edges[:max_edges]
    return chosen, edges


def _ring(node: dict) -> str:
    role = node.get("role") or ""
    if role == "seed":
        return "seed"
    return "reference" if role == "reference" else "citing"  # "citing" and "citing+reference" go outside


def _circular_mean(angles: list[float]) -> float:
    x = sum(math.cos(a) for a in angles)
    y = sum(math.sin(a) for a in angles)
    if abs(x) < 1e-12 and abs(y) < 1e-12:
        return angles[0]
    return math.atan2(y, x) % (2 * math.pi)


def layout(nodes: list[dict]) -> dict[str, tuple[float, float]]:
    """Each node's position (see the module's docstring); the same nodes always give the same positions."""
    seeds = sorted(
        (n for n in nodes if _ring(n) == "seed"),
        key=lambda n: (-((n.get("seed") or {}).get("relevance") or 0.0), n["paper_id"]),
    )
    start = -math.pi / 2  # the first seed at the top, then clockwise
    angle: dict[str, float] = {}
    pos: dict[str, tuple[float, float]] = {}
    radius = RADII["seed"] if len(seeds) > 1 else 0.0
    for i, node in enumerate(seeds):
        a = (2 * math.pi * i / max(1, len(seeds))) % (2 * math.pi)
        angle[node["paper_id"]] = a
        pos[node["paper_id"]] = (CENTRE + radius * math.cos(start + a), CENTRE + radius * math.sin(start + a))
    for ring in ("reference", "citing"):
        members = [n for n in nodes if _ring(n) == ring]
        if not members:
            continue
        anchored = []
        for node in members:
            through = [angle[link["seed"]] for link in node.get("links") or [] if link.get("seed") in angle]
            anchor = _circular_mean(through) if through else 0.0
            anchored.append((anchor, -(node.get("score") or 0.0), node["paper_id"]))
        anchored.sort()
        base = RADII[ring]
        crowded = len(members) * (2 * MAX_R * 0.9) > 2 * math.pi * base
        # Evenly spaced in anchor order, the sequence turned so that its first paper sits at its own anchor.
        step = 2 * math.pi / len(members)
        offset = anchored[0][0]
        for i, (_, _, pid) in enumerate(anchored):
            a = offset + i * step
            r = base + (STAGGER if crowded and i % 2 else 0.0)
            pos[pid] = (CENTRE + r * math.cos(start + a), CENTRE + r * math.sin(start + a))
    return pos


def _radius(score: float, top: float) -> float:
    if top <= 0:
        return MIN_R
    share = max(0.0, min(1.0, score / top))
    return math.sqrt(MIN_R**2 + share * (MAX_R**2 - MIN_R**2))  # area linear in score


def _f(x: float) -> str:
    return f"{x:.1f}"


def _node_tip(node: dict) -> str:
    year = node.get("year")
    lines = [f"{readable(node.get('title')) or node['paper_id']} ({year if year is not None else 'no year'})"]
    facts = [node["paper_id"], node.get("role") or "", f"score {node.get('score') or 0.0:.4f}"]
    if node.get("rank") is not None:
        facts.append(f"rank {node['rank']}")
    lines.append(" · ".join(f for f in facts if f))
    seed = node.get("seed")
    if seed:
        lines.append(f"seed: relevance {seed.get('relevance', 0.0):.3f}")
    if not node.get("kept", True):
        lines.append(f"dropped: {node.get('reason') or 'no reason given'}")
    return "\n".join(lines)


def _edge_tip(edge: dict, titles: dict[str, str]) -> str:
    citing, cited = edge["citing"], edge["cited"]
    lines = [
        f"{citing} cites {cited}",
        f"{titles.get(citing, '')[:60]} → {titles.get(cited, '')[:60]}",
        f"Delta {edge.get('delta') or 0.0:.3f} · weight {edge.get('weight') or 0.0:.3f} · "
        + ("kept" if edge.get("kept") else "pruned"),
    ]
    if not edge.get("kept"):
        lines.append(edge.get("reason") or "pruned")
    return "\n".join(lines)


def draw(
    graph: dict,
    max_nodes: int = MAX_NODES,
    max_edges: int = MAX_EDGES,
    focus: str | None = None,
    core: Collection[str] | None = None,
    link: Callable[[str], str] | None = None,
) -> Drawing:
    """The evidence graph ``graph`` (``{"nodes": [...], "edges": [...]}`` as ``Service.explain`` gives it) as
    an ``<svg>`` element, with ``focus`` (a paper id) ringed and labelled; ``core``: draw only the seeds, these
    papers and ``focus`` (``select``); ``link``: each node a link to ``link(paper_id)``."""
    nodes, edges = select(graph, max_nodes, max_edges, core=core, focus=focus)
    pos = layout(nodes)
    top = max((n.get("score") or 0.0 for n in nodes), default=0.0)
    top_weight = max((e.get("weight") or 0.0 for e in edges if e.get("kept")), default=0.0)
    titles = {n["paper_id"]: readable(n.get("title")) for n in nodes}
    # The viewBox is the drawing's extent (a square around the centre), so a small graph is not lost in margins.
    reach = max((math.hypot(x - CENTRE, y - CENTRE) for x, y in pos.values()), default=0.0) + MAX_R + 18
    reach = max(reach, 80.0)
    box = f"{_f(CENTRE - reach)} {_f(CENTRE - reach)} {_f(2 * reach)} {_f(2 * reach)}"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="evidence" viewBox="{box}" role="img" '
        f'aria-label="evidence graph: {len(nodes)} papers, {len(edges)} edges">'
    ]
    rings = {_ring(n) for n in nodes}
    for ring in ("seed", "reference", "citing"):
        if ring in rings and not (ring == "seed" and sum(_ring(n) == "seed" for n in nodes) < 2):
            out.append(f'<circle class="ring" cx="{_f(CENTRE)}" cy="{_f(CENTRE)}" r="{_f(RADII[ring])}"/>')
    # Pruned edges first, kept ones over them, the strongest last.
    ordered = sorted(edges, key=lambda e: (bool(e.get("kept")), e.get("weight") or 0.0, e["citing"], e["cited"]))
    kept_drawn = 0
    for edge in ordered:
        (x1, y1), (x2, y2) = pos[edge["citing"]], pos[edge["cited"]]
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        cx, cy = CENTRE + (mx - CENTRE) * 0.7, CENTRE + (my - CENTRE) * 0.7
        d = f"M{_f(x1)} {_f(y1)} Q{_f(cx)} {_f(cy)} {_f(x2)} {_f(y2)}"
        data = f'data-citing="{escape(edge["citing"])}" data-cited="{escape(edge["cited"])}"'
        tip = escape(_edge_tip(edge, titles))
        if edge.get("kept"):
            kept_drawn += 1
            share = (edge.get("weight") or 0.0) / top_weight if top_weight > 0 else 0.0
            style = f'stroke-opacity="{0.12 + 0.6 * share:.2f}" stroke-width="{0.6 + 2.2 * share:.2f}"'
            out.append(f'<path class="edge kept" d="{d}" {data} {style}><title>{tip}</title></path>')
        else:
            out.append(f'<path class="edge pruned" d="{d}" {data}><title>{tip}</title></path>')
    # Large nodes first, so that a small one beside a large one stays visible (and can be hovered).
    labels = []
    for node in sorted(nodes, key=lambda n: (-(n.get("score") or 0.0), n["paper_id"])):
        pid = node["paper_id"]
        x, y = pos[pid]
        r = _radius(node.get("score") or 0.0, top)
        kind = "seed" if node.get("role") == "seed" else ("kept" if node.get("kept", True) else "dropped")
        classes = f"node {kind}" + (" focus" if pid == focus else "")
        rank = node.get("rank")
        data = f'data-id="{escape(pid)}" data-score="{node.get("score") or 0.0:.6g}"'
        if rank is not None:
            data += f' data-rank="{rank}"'
        circle = (
            f'<circle class="{classes}" cx="{_f(x)}" cy="{_f(y)}" r="{r:.1f}" {data}>'
            f"<title>{escape(_node_tip(node))}</title></circle>"
        )
        if link is not None:
            circle = f'<a class="paper-link" href="{escape(link(pid))}">{circle}</a>'
        out.append(circle)
        if pid == focus:
            labels.append(f'<circle class="focus-ring" cx="{_f(x)}" cy="{_f(y)}" r="{r + 7:.1f}"/>')
            side = "start" if x < CENTRE else "end"  # written towards the centre, so it stays inside the view
            lx = x - r if x < CENTRE else x + r
            labels.append(
                f'<text class="focus-label" x="{_f(lx)}" y="{_f(y - r - 11)}" text-anchor="{side}">asked about</text>'
            )
        if rank is not None and rank <= 10:
            # The rank beside the node, on the side away from the centre.
            dx, dy = x - CENTRE, y - CENTRE
            norm = math.hypot(dx, dy) or 1.0
            lx, ly = x + dx / norm * (r + 9), y + dy / norm * (r + 9) + 4
            labels.append(f'<text class="rank-label" x="{_f(lx)}" y="{_f(ly)}">{rank}</text>')
    out.extend(labels)
    out.append("</svg>")
    return Drawing(
        svg="\n".join(out),
        nodes_total=len(graph.get("nodes", [])),
        nodes_drawn=len(nodes),
        seeds_drawn=sum(n.get("role") == "seed" for n in nodes),
        edges_total=len(graph.get("edges", [])),
        edges_drawn=len(edges),
        kept_drawn=kept_drawn,
        pruned_drawn=len(edges) - kept_drawn,
        drawn_ids=frozenset(pos),
    )


#: The drawing's CSS, for the page that shows it.
CSS = f"""
svg.evidence {{ width: 100%; max-width: 760px; height: auto; display: block; margin: 0 auto; background: #fff; }}
svg.evidence .ring {{ fill: none; stroke: #e9ecef; stroke-width: 1; }}
svg.evidence .edge {{ fill: none; }}
svg.evidence .edge.kept {{ stroke: {KEPT_EDGE}; }}
svg.evidence .edge.pruned {{ stroke: {PRUNED_EDGE}; stroke-width: 0.8; stroke-dasharray: 4 3; stroke-opacity: 0.4; }}
svg.evidence .edge:hover {{ stroke: #f08c00; stroke-opacity: 1; stroke-width: 3; }}
svg.evidence .node {{ stroke: #fff; stroke-width: 1.2; }}
svg.evidence .node.seed {{ fill: {SEED_FILL}; }}
svg.evidence .node.kept {{ fill: {KEPT_FILL}; fill-opacity: 0.85; }}
svg.evidence .node.dropped {{ fill: #fff; stroke: #868e96; stroke-dasharray: 2 2; }}
svg.evidence .node.focus {{ stroke: #000; stroke-width: 3.5; stroke-dasharray: none; }}
svg.evidence .focus-ring {{ fill: none; stroke: #000; stroke-width: 1.5; stroke-dasharray: 3 2; pointer-events: none; }}
svg.evidence .focus-label {{ font-size: 13px; font-weight: 700; fill: #000; pointer-events: none;
                             paint-order: stroke; stroke: #fff; stroke-width: 3px; }}
svg.evidence a.paper-link {{ cursor: pointer; }}
svg.evidence .node:hover {{ stroke: #000; stroke-width: 2.5; }}
svg.evidence .rank-label {{ font-size: 12px; font-weight: 600; fill: #212529; text-anchor: middle;
                            pointer-events: none; }}
"""
