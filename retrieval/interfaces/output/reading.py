"""What a reader sees of a corpus's text: TeX rendered as Unicode (``text``) and authors' names taken apart into
given names, family name and suffix (``name_parts``, ``last_first``).

arXiv's records are TeX: hep-th has ``Schr\\"odinger``, ``M\\'aximo Ba\\~nados`` and ``$S= A/4 - k \\ln(A)$`` in its
titles, names and abstracts. The tokeniser folds them for search; a person reading a table, a paper page, the web
pages or an RIS or CSV export is shown them rendered (``Schrödinger``, ``Máximo Bañados``, ``S= A/4 - k ln(A)``).
BibTeX keeps the TeX of titles and abstracts, being a TeX format (``export.tex``); its names are rendered.

The rendering is pylatexenc's LaTeX-to-text (maintained, MIT, and already installed with bibtexparser 2), with
what a corpus needs around it: ``%`` and ``&`` are the characters they look like (a percentage in an abstract is
not a TeX comment), an odd ``$`` is a dollar sign, and simple sub- and superscripts in math become Unicode ones
(``AdS_5`` is ``AdS₅``, ``x^{2n+1}`` is ``x²ⁿ⁺¹``; others keep their ``_`` or ``^``: ``S_BH``, ``ϕ_(2,1)``).
Text with no backslash and no ``$`` is not TeX and is returned as it is, whitespace folded: that is most text,
and it costs nothing (pylatexenc is imported only for text that needs it). ``text`` never raises: text it cannot
render, or whose rendering lost most of its letters (a command that swallowed the rest), is returned raw. Renderings are
cached, so a page that shows a title twice renders it once.
"""

from __future__ import annotations

import re
from _thread import allocate_lock
from collections.abc import Sequence
from functools import lru_cache

from ...corpus.names import SUFFIXES as FOLDED_SUFFIXES

#: Suffixes that follow a family name ("King, Martin Luther, Jr.", "Martin Luther King Jr.").
SUFFIXES = frozenset(FOLDED_SUFFIXES) | {f"{suffix}." for suffix in FOLDED_SUFFIXES}  # "Jr." as "Jr": the filter's
SUPERSCRIPTS = dict(zip("0123456789+-=()n", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿ", strict=True)) | {"i": "ⁱ", "*": "*", "T": "ᵀ"}
SUBSCRIPTS = dict(zip("0123456789+-=()", "₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎", strict=True)) | dict(
    zip("aehijklmnoprstuvx", "ₐₑₕᵢⱼₖₗₘₙₒₚᵣₛₜᵤᵥₓ", strict=True)
)

#: Control words of math symbols that abstracts write outside math as words (Greek letters and a few others).
_SYMBOLS = (
    "[vV]?[aA]lpha", "[bB]eta", "[gG]amma", "[dD]elta", "(?:var)?[eE]psilon", "[zZ]eta", "[eE]ta", "(?:var)?[tT]heta",
    "[iI]ota", "[kK]appa", "[lL]ambda", "[mM]u", "[nN]u", "[xX]i", "(?:var)?[pP]i", "(?:var)?[rR]ho",
    "(?:var)?[sS]igma", "[tT]au", "[uU]psilon", "(?:var)?[pP]hi", "[cC]hi", "[pP]si", "[oO]mega",
    "infty", "partial", "nabla", "hbar", "ell",
)  # fmt: skip

#: The patterns of the TeX path, compiled on its first use (``_tex``): most text has none, and a search that shows
#: none pays nothing for them.
_TEX = {
    "percent_amp": r"(?<!\\)([%&])",
    "dollar": r"(?<!\\)\$",
    "macro": r"\\[A-Za-z]+",
    # A sub- or superscript: the mark, then a group without nested braces, a control word or one character.
    "script": r"([_^])(?:\{([^{}]*)\}|(\\[A-Za-z]+)|([^\s{}\\$]))",
    "single": r"\s*(\\[A-Za-z]+|[^\s\\])\s*",
    # A control word takes all its letters: split between the two alternatives (\ab as \a then b) a label that
    # fails to match was tried every way, in time exponential in its length.
    "label": r"(?:[A-Za-z0-9]|\\[A-Za-z]+(?![A-Za-z]))+",
    # Relations and operators pylatexenc writes with the spaces TeX's parser happened to keep ("c≤ 1", "N →∞"):
    # spaced on both sides where the author spaced them on one.
    "operator": r"(\s*)([≤≥<>→←↔⇒⇐⇔↦×⊗⊕⋅≃≈∼≅≡≠∈∉⊂⊃⊆⊇∝±∓])(\s*)",
    # A math symbol written outside math and followed by a word ("the \\delta operator"): TeX takes the space
    # as the end of the control word, the author meant it between two words.
    "symbol_word": r"(\\(?:" + "|".join(_SYMBOLS) + r"))[ \t]+(?=[^\W_])",
}
_INITIALS = re.compile(r"((?:[^\W\d_][^\W\d_]?\.-?)+)([^\W\d_].*)")

_lock = allocate_lock()  # threading's lock, without importing threading
_converter = None


@lru_cache(maxsize=1)
def _tex() -> dict[str, re.Pattern]:
    return {name: re.compile(pattern) for name, pattern in _TEX.items()}


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines, tabs) as one space, and no control characters (a title's
    ESC would restyle a terminal, or break a line-based format, wherever it is printed or exported)."""
    text = " ".join(text.split())
    if not text.isprintable():
        text = " ".join("".join(char if char.isprintable() else " " for char in text).split())
    return text


def text(value: str | None) -> str:
    """``value`` as a reader should see it: TeX rendered to Unicode where it has any (a backslash or a ``$``),
    whitespace folded to single spaces and control characters dropped (``one_line``); the raw text, so folded,
    where the rendering fails or loses most of it."""
    if not value:
        return ""
    if "\\" not in value and "$" not in value:
        return one_line(value)
    return _render(value)


@lru_cache(maxsize=8192)
def _render(value: str) -> str:
    value = one_line(value)
    raw = value
    patterns = _tex()
    try:
        rendered = " ".join(_convert(_prepare(value)).split())
        spaced = patterns["operator"]
        rendered = spaced.sub(lambda m: f" {m.group(2)} " if m.group(1) or m.group(3) else m.group(2), rendered)
    except Exception:  # pylatexenc is tolerant; anything it still trips on is shown as written
        return raw
    letters = sum(c.isalnum() for c in patterns["macro"].sub("", raw))
    if not rendered or sum(c.isalnum() for c in rendered) * 2 < letters:  # an unclosed \begin swallowed the rest
        return raw
    return rendered


def _convert(tex: str) -> str:
    global _converter
    with _lock:  # one converter, shared by a server's threads
        if _converter is None:
            import logging

            from pylatexenc.latex2text import LatexNodes2Text

            logging.getLogger("pylatexenc").setLevel(logging.ERROR)  # its tolerant parser's notes are not ours
            _converter = LatexNodes2Text(latex_context=_context(), math_mode="text", strict_latex_spaces=False)
        return _converter.latex_to_text(tex)


#: Font and size switches and boxes the corpora use that pylatexenc does not know: their text, without them
#: (``{\\cal N}`` is N, ``\\mbox{if}`` is if).
_SWITCHES = [
    "cal",
    "Cal",
    "it",
    "bf",
    "rm",
    "em",
    "sl",
    "sf",
    "tt",
    "frak",
    "Bbb",
    "boldsymbol",
    "bold",
    "mbox",
    "hbox",
    "texttt",
    "textsf",
    "left",
    "right",
    "big",
    "Big",
    "bigl",
    "bigr",
    "Bigl",
    "Bigr",
    "operatorname",
    "break",
    "displaystyle",
    "scriptstyle",
    "textstyle",
]
#: Other commands the corpora use that pylatexenc does not know, as text.
_SYMBOLS = {"ne": "≠", "over": "/", "half": "½", "Box": "□", "triangle": "△", "slash": "/", "lq": "‘", "rq": "’",
            "det": "det", "tr": "tr", "Tr": "Tr"}  # fmt: skip


def _context():
    """pylatexenc's commands, with ``_SWITCHES`` and ``_SYMBOLS``, and any other command kept as written
    (``\\R``, ``\\BoostMetric``: a paper's own macros), where pylatexenc drops it: a title lost its last word, an
    abstract its ``\\ne`` ("Q_iQ_j 0")."""
    from pylatexenc.latex2text import MacroTextSpec, get_default_latex_context_db

    db = get_default_latex_context_db()
    db.add_context_category(
        "corpus",
        prepend=True,
        macros=[MacroTextSpec(name, _arguments) for name in _SWITCHES]
        + [MacroTextSpec(name, text) for name, text in _SYMBOLS.items()],
    )
    db.set_unknown_macro_spec(MacroTextSpec("", _as_written))
    return db


def _arguments(node, l2tobj=None, **_) -> str:
    """The text of a command's arguments (those pylatexenc's parser gave it), without the command."""
    parsed = getattr(getattr(node, "nodeargd", None), "argnlist", None) or []
    if l2tobj is None:
        return ""
    return "".join(l2tobj.nodelist_to_text([arg]) for arg in parsed if arg is not None)


def _as_written(node, l2tobj=None, **_) -> str:
    """An unknown command as written, then its arguments' text; a space after it where a space, a letter, a digit
    or a group follows, so that ``\\foo{bar}`` and ``\\la \\psi`` do not read as ``\\foobar`` and ``\\laψ``."""
    inner = _arguments(node, l2tobj)
    if inner:
        return f"\\{node.macroname} {inner}"
    source = getattr(getattr(node, "parsing_state", None), "s", "") or ""
    after = source[node.pos + node.len : node.pos + node.len + 1] if node.pos is not None else ""
    spaced = getattr(node, "macro_post_space", "") or after == "{" or (after.isascii() and after.isalnum())
    return f"\\{node.macroname}" + (" " if spaced else "")


def _prepare(value: str) -> str:
    """The corpus's TeX made into what pylatexenc reads as the author meant: ``%`` and ``&`` literal, display math
    inline, a lone ``$`` literal, and each math part's sub- and superscripts rewritten (``_scripts``)."""
    patterns = _tex()
    value = patterns["percent_amp"].sub(r"\\\1", value).replace("$$", "$")
    parts = patterns["dollar"].split(value)
    if len(parts) % 2 == 0:  # an odd number of $: none of them opens math
        return patterns["symbol_word"].sub(r"\1{} ", patterns["dollar"].sub(r"\\$", value))
    spaced = patterns["symbol_word"]
    return "$".join(_scripts(part) if i % 2 else spaced.sub(r"\1{} ", part) for i, part in enumerate(parts))


def _scripts(math: str) -> str:
    """Sub- and superscripts as Unicode where every character has a form (``_5`` is ``₅``, ``^{2n}`` is ``²ⁿ``);
    else a label of letters, digits and symbols is kept after its mark (``_{BH}`` is ``_BH``) and anything else is
    put in parentheses (``_{2,1}`` is ``_(2,1)``); ``^\\prime`` is a prime."""
    patterns = _tex()

    def one(match: re.Match) -> str:
        mark, group, word, char = match.groups()
        forms = SUPERSCRIPTS if mark == "^" else SUBSCRIPTS
        if word is not None:
            return "′" if (mark, word) == ("^", r"\prime") else mark + word
        if char is not None:
            return forms.get(char, mark + char)
        single = patterns["single"].fullmatch(group)
        if single:  # one character or one control word: no parentheses needed
            token = single.group(1)
            if (mark, token) == ("^", r"\prime"):
                return "′"
            return forms.get(token, mark + token)
        squeezed = group.replace(" ", "")
        if squeezed and all(c in forms for c in squeezed):
            return "".join(forms[c] for c in squeezed)
        if patterns["label"].fullmatch(group):  # a label of letters, digits and symbols: S_{BH}, T^{\mu\nu}
            return mark + group
        return f"{mark}({group})"

    return patterns["script"].sub(one, math)


# -- names -------------------------------------------------------------------------------------------------------


@lru_cache(maxsize=16384)
def name_parts(name: str) -> tuple[str, str, str]:
    """``(given, family, suffix)`` of an author's name as a corpus writes it, TeX rendered: "Family, Given[,
    Suffix]" or BibTeX's "Family, Suffix, Given" split at its commas; otherwise the family name is the last word
    with the lowercase words before it (BibTeX's "von" part: "Ludwig van Beethoven", "Gerard 't Hooft"), after
    any suffix ("Jr.", "III"), and initials run into it are split off ("S.N.Solodukhin"). A name whose last word
    has no letter ("Author 1-8") or that is one word is all family name."""
    rendered = text(name)
    if "," in rendered:
        pieces = [p.strip() for p in rendered.split(",")]
        rest = [p for p in pieces[1:] if p]
        if pieces[0] and rest and not (len(rest) == 1 and rest[0].lower() in SUFFIXES):  # "Callan, Jr." alone
            suffix = ""
            if len(rest) > 1 and rest[-1].lower() in SUFFIXES:  # "Family, Given, Suffix"
                suffix = rest.pop()
            elif len(rest) > 1 and rest[0].lower() in SUFFIXES:  # BibTeX's own "Family, Suffix, Given"
                suffix = rest.pop(0)
            family = pieces[0].split()
            if not suffix and len(family) > 1 and family[-1].lower() in SUFFIXES:  # "Thacher Jr., H. C."
                suffix = family.pop()
            return " ".join(rest), " ".join(family), suffix
        rendered = " ".join(p for p in pieces if p)  # "Curtis G. Callan, Jr.", "Greniewski," read without commas
    words = rendered.split()
    suffix = ""
    if len(words) > 1 and words[-1].lower() in SUFFIXES:
        suffix = words.pop()
    if not words:
        return "", "", suffix
    if len(words) == 1 or not any(c.isalpha() for c in words[-1]):
        initials = _INITIALS.fullmatch(words[-1]) if len(words) == 1 else None
        if initials:  # "S.N.Solodukhin"
            return initials.group(1), initials.group(2), suffix
        if len(words) == 1:
            return "", words[0], suffix
        return "", " ".join(words), suffix  # "Author 1-8": no family name to pick out
    start = len(words) - 1
    while start > 1 and _lowercase(words[start - 1]):
        start -= 1
    given = words[:start]
    last = _INITIALS.fullmatch(words[-1]) if start == len(words) - 1 else None
    if last:  # "J. G.Russo"
        given.append(last.group(1))
        return " ".join(given), last.group(2), suffix
    return " ".join(given), " ".join(words[start:]), suffix


def authors(names: Sequence[str]) -> list[str]:
    """``names`` with a suffix standing alone joined to the name before it: a reader that split "Curtis G. Callan,
    Jr." at its comma made two authors of it (49 hep-th papers list a "Jr."), and a table, a page or an export
    should show one."""
    out: list[str] = []
    for name in names:
        if out and name.strip().lower() in SUFFIXES:
            out[-1] = f"{out[-1].rstrip()} {name.strip()}"
        else:
            out.append(name)
    return out


def _lowercase(word: str) -> bool:
    first = next((c for c in word if c.isalpha()), "")
    return bool(first) and first.islower()


def family_name(name: str) -> str:
    """The family name of ``name`` (``name_parts``), for a table's author column."""
    return name_parts(name)[1]


def last_first(name: str) -> str:
    """``name`` as reference formats write a person: "Family, Given" ("Maldacena, Juan M."), with ", Suffix" after
    (RIS's "Lastname, Firstname, Suffix"); a name with no given names is its family name ("Witten", "Author 1-8"),
    and a suffix ("Jones, Jr."), where Zotero keeps suffixes, with the given names."""
    given, family, suffix = name_parts(name)
    return ", ".join(part for part in (family, given, suffix) if part)
