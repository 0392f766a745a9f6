"""Matplotlib SVG in fewer bytes, same picture: for the plots the benches commit.

Matplotlib writes every vertex as ``L 279.172727 158.153012`` on its own indented line, wraps
each artist in a ``<g id=...>`` and writes each element's whole style, so a figure of a few
thousand vertices is hundreds of KB. :func:`compact_svg` rewrites what it wrote, keeping every
element that draws something:

* path data (``M``/``L``/``z``, all matplotlib writes for lines and fills) as relative moves
  on a grid of ``1/PER_POINT`` point, taken from the rounded absolute points (no drift), less
  the vertices within ``TOLERANCE`` of the line their kept neighbours make (every step a curve
  shows stays: a straight run needs no vertex inside it);
* ``x``/``y`` attributes on the same grid; the no-op ``rotate(-0 X Y)`` of level text dropped;
* ids nothing refers to dropped, then groups with no attribute left replaced by their
  children (such a group draws nothing of its own);
* a ``<use>``'s style dropped where it equals its target's (which wins anyway), and each
  style two elements share written once, as a class of the style sheet;
* one element a line, unindented.

Paths with other commands keep their data as written.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

#: coordinates are kept to 1/PER_POINT of a point (1/72 inch)
PER_POINT = 10
#: a vertex closer than this (points) to the line its kept neighbours make is dropped: with
#: the grid's rounding (under 0.075) no vertex moves by half a 1-point stroke, the thinnest a
#: bench draws a curve with, so each drawn curve still covers every vertex it had
TOLERANCE = 0.4

NAMESPACES = {
    "": "http://www.w3.org/2000/svg",
    "xlink": "http://www.w3.org/1999/xlink",
    "dc": "http://purl.org/dc/elements/1.1/",
    "cc": "http://creativecommons.org/ns#",
    "rdf": "http://www.w3.org/1999/02/22-rdf-syntax-ns#",
}
_SVG = "{" + NAMESPACES[""] + "}"
_HREF = "{" + NAMESPACES["xlink"] + "}href"
_NO_ROTATION = re.compile(r"rotate\(-?0 [-\d.e+]+ [-\d.e+]+\)")


def compact_svg(text: str) -> str:
    """``text`` (an SVG matplotlib wrote) drawing the same picture in fewer bytes."""
    for prefix, uri in NAMESPACES.items():
        ET.register_namespace(prefix, uri)
    root = ET.fromstring(text)
    used = set(re.findall(r"#([\w.-]+)", text))  # xlink:href="#m..." and url(#p...)
    styles = {e.get("id"): e.get("style") for e in root.iter() if e.get("id") in used}
    _tidy(root, used, styles)
    _short_ids(root)  # before the classes: a style may name an id (a hatch's url(#h...))
    _classes(root)
    root.text = "\n"
    body = ET.tostring(root, encoding="unicode")
    return f'<?xml version="1.0" encoding="utf-8" standalone="no"?>\n{body}\n'


def compact_path(data: str) -> str:
    """Matplotlib's ``M x y L x y ... z`` path data as relative moves on the 1/PER_POINT grid
    (``m47.6-665.6 0 2.2 1.4 2.3z``); data with other commands as it was."""
    parsed = _commands(data.split())
    if parsed is None:
        return data
    commands = _simplified(parsed)
    out, last = [], ""
    here = start = (0, 0)
    for command, point in commands:
        if command == "z":
            out.append("z")
            here, last = start, "z"
            continue
        letter = "m" if command == "M" else "l"
        step = _numbers((point[0] - here[0], point[1] - here[1]))
        if letter != last:
            out.append(letter)
        elif not step.startswith("-"):
            out.append(" ")
        out.append(step)
        if letter == "m":
            start, letter = point, "l"  # the pairs after a moveto are linetos
        here, last = point, letter
    return "".join(out)


Command = tuple[str, tuple[int, int]]  # "M"/"L" and its point on the grid, or ("z", (0, 0))


def _commands(tokens: list[str]) -> list[Command] | None:
    """``M x y``, ``L x y`` and ``z`` as commands; ``None`` for anything else."""
    commands: list[Command] = []
    i = 0
    try:
        while i < len(tokens):
            if tokens[i] == "z":
                commands.append(("z", (0, 0)))
                i += 1
            elif tokens[i] in ("M", "L"):
                commands.append((tokens[i], (_grid(tokens[i + 1]), _grid(tokens[i + 2]))))
                i += 3
            else:
                return None
    except (IndexError, ValueError):
        return None
    return commands


def _simplified(commands: list[Command]) -> list[Command]:
    """Each run of linetos without the vertices within TOLERANCE of the line the kept ones
    make (Ramer-Douglas-Peucker); the run's ends and every moveto and close stay."""
    if TOLERANCE <= 0:
        return commands
    keep = [True] * len(commands)
    start = 0
    for end in range(1, len(commands) + 1):
        if end == len(commands) or commands[end][0] != "L":
            if commands[start][0] != "z":  # a run after a close starts where it is not kept
                _thin(commands, start, end - 1, keep)
            start = end
    return [c for c, k in zip(commands, keep, strict=True) if k]


def _thin(commands: list[Command], first: int, last: int, keep: list[bool]) -> None:
    """Marks the vertices strictly between ``first`` and ``last`` that the line can skip."""
    limit = TOLERANCE * PER_POINT
    spans = [(first, last)]
    while spans:
        a, b = spans.pop()
        if b <= a + 1:
            continue
        (ax, ay), (bx, by) = commands[a][1], commands[b][1]
        dx, dy = bx - ax, by - ay
        length = (dx * dx + dy * dy) ** 0.5
        far, where = -1.0, a
        for j in range(a + 1, b):
            px, py = commands[j][1][0] - ax, commands[j][1][1] - ay
            gap = abs(dx * py - dy * px) / length if length else (px * px + py * py) ** 0.5
            if gap > far:
                far, where = gap, j
        if far > limit:
            spans += [(a, where), (where, b)]
        else:
            for j in range(a + 1, b):
                keep[j] = False


def _grid(number: str) -> int:
    return round(float(number) * PER_POINT)


def _points(steps: int) -> str:
    """``steps`` of the grid as a short decimal (``-.3``, ``1.4``, ``2``)."""
    text = f"{steps / PER_POINT:.7g}"  # the grid's places: 1/PER_POINT is 1, .5, .1, ...
    return re.sub(r"^(-?)0\.", r"\1.", text)


def _numbers(steps: tuple[int, int]) -> str:
    first, second = map(_points, steps)
    return first + ("" if second.startswith("-") else " ") + second


def _tidy(parent: ET.Element, used: set[str], styles: dict[str | None, str | None]) -> None:
    kept: list[ET.Element] = []
    for child in list(parent):
        _tidy(child, used, styles)
        attrs = child.attrib
        if attrs.get("id") not in used:
            attrs.pop("id", None)
        if "d" in attrs:
            attrs["d"] = compact_path(attrs["d"])
        for name in ("x", "y"):
            if name in attrs and re.fullmatch(r"-?[\d.]+", attrs[name]):
                attrs[name] = _points(_grid(attrs[name]))
        if _NO_ROTATION.fullmatch(attrs.get("transform", "")):
            del attrs["transform"]
        target = attrs.get(_HREF, "")[1:]
        if child.tag == _SVG + "use" and "style" in attrs and attrs["style"] == styles.get(target):
            del attrs["style"]
        if child.tag != _SVG + "text" and not (child.text or "").strip():
            child.text = None
        child.tail = "\n"
        if child.tag == _SVG + "g" and not attrs:
            kept.extend(child)
        else:
            kept.append(child)
    parent[:] = kept


def _classes(root: ET.Element) -> None:
    """Every style two or more elements share, once, as a class rule of the style sheet
    (a class outranks the sheet's ``*`` rule as the inline style did)."""
    sheet = root.find(f"{_SVG}defs/{_SVG}style")
    if sheet is None:
        return
    counts: dict[str, int] = {}
    for element in root.iter():
        if "style" in element.attrib and "class" not in element.attrib:
            counts[element.attrib["style"]] = counts.get(element.attrib["style"], 0) + 1
    names = {style: f"s{i}" for i, style in enumerate(s for s, n in counts.items() if n > 1)}
    for element in root.iter():
        name = names.get(element.attrib.get("style", ""))
        if name and "class" not in element.attrib:
            del element.attrib["style"]
            element.set("class", name)
    rules = "".join(f"\n.{name}{{{style}}}" for style, name in names.items())
    sheet.text = (sheet.text or "") + rules + ("\n" if rules else "")


def _short_ids(root: ET.Element) -> None:
    """The ids left (each one referred to) as ``i0``, ``i1``, ... in document order, and so
    every ``#id`` and ``url(#id)`` that names them (matplotlib's are 11 characters)."""
    names = {
        e.attrib["id"]: f"i{n}" for n, e in enumerate(e for e in root.iter() if "id" in e.attrib)
    }

    def rename(found: re.Match[str]) -> str:
        return "#" + names.get(found.group(1), found.group(1))

    for element in root.iter():
        attrs = element.attrib
        if "id" in attrs:
            attrs["id"] = names[attrs["id"]]
        if _HREF in attrs:
            attrs[_HREF] = re.sub(r"^#([\w.-]+)$", rename, attrs[_HREF])
        for key, value in attrs.items():
            if "url(#" in value:
                attrs[key] = re.sub(r"(?<=url\()#([\w.-]+)(?=\))", rename, value)
