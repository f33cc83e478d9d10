"""Records -> what a viewer reads: coloured token spans, tables, a tree picture, a narration.

Every function takes Round records (plain data) and returns HTML, Markdown or table rows.
Styles are inline so the HTML looks the same in the app, in a saved page and in the API.
Every text comes from specviz.i18n in the language `lang` ("en" or "zh").
No torch here.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Optional

from specviz.events import ACCEPTED, FALLBACK, REJECTED, UNREACHED, Round, depth_of
from specviz.i18n import term, text

SPECIAL = re.compile(r"<\|[^|<>]*\|>|</?s>")  # special tokens such as <|im_end|>
COLORS = {  # role -> (background, text)
    ACCEPTED: ("#bbf7d0", "#14532d"),
    REJECTED: ("#fecaca", "#991b1b"),
    UNREACHED: ("#f3f4f6", "#9ca3af"),
    "bonus": ("#bfdbfe", "#1e3a8a"),
    "plain": ("#e5e7eb", "#111827"),
}


def fmt_prob(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.3f}"


def keep_chance(draft_prob: Optional[float], target_prob: float) -> float:
    """min(1, target / draft): the chance a sampled guess is kept (no draft probability: a certain guess)."""
    draft = 1.0 if draft_prob is None else draft_prob
    return min(1.0, target_prob / draft) if draft > 0 else 1.0


def _visible(piece: str, line_breaks: bool) -> str:
    escaped = html.escape(piece)
    if SPECIAL.fullmatch(piece):  # <|im_end|> and friends: shown, but small
        return f'<span style="font-size:0.7em">{escaped}</span>'
    return escaped.replace("\n", "↵<br>" if line_breaks else "↵") if escaped else "∅"


def token_span(piece: str, role: str, title: str) -> str:
    background, color = COLORS[role]
    strike = "text-decoration:line-through;text-decoration-thickness:2px;" if role in (REJECTED, UNREACHED) else ""
    return (f'<span class="sv-tok sv-{role}" title="{html.escape(title, quote=True)}" '
            f'style="background:{background};color:{color};{strike}border-radius:3px;padding:1px 1px">'
            f"{_visible(piece, role in (ACCEPTED, 'bonus', 'plain'))}</span>")


def _node_title(r: Round, i: int, lang: str) -> str:
    draft, target = r.draft_probs[i], r.target_probs[i]
    return text("title.node", lang, piece=repr(r.pieces[i]), status=term("status", r.status[i], lang),
                draft=fmt_prob(draft), target=fmt_prob(target), keep=f"{keep_chance(draft, target):.3f}")


def _bonus_title(r: Round, lang: str) -> str:
    return text("title.bonus", lang, piece=repr(r.bonus_piece), source=term("source", r.bonus_source, lang),
                p=fmt_prob(r.bonus_prob))


def round_summary(r: Round, lang: str = "en") -> str:
    """'5 guessed, 3 kept, 1 bonus' in words."""
    if r.n_proposed == 0:
        return text("summary.plain", lang, n=r.index + 1, mode=term("mode", r.mode, lang))
    bonus = text("summary.bonus" if r.bonus_token is not None else "summary.no_bonus", lang)
    return text("summary.spec", lang, n=r.index + 1, proposed=r.n_proposed, kept=r.n_accepted, bonus=bonus)


def shown_rejections(r: Round) -> list[int]:
    """Nodes to show struck through in the text: a chain's whole rejected tail. A tree's rejected siblings
    are alternatives, not text: they belong to the tree picture, never inline."""
    if not r.is_chain:
        return []
    on_path = set(r.accepted_path)
    return [i for i in range(r.n_proposed) if i not in on_path]


def round_html(r: Round, highlight: bool = False, lang: str = "en") -> str:
    """One round: kept guesses, rejected guesses struck through where they stood, the bonus token."""
    kept = r.accepted_path[: len(r.emitted)]
    spans = [token_span(r.pieces[i], ACCEPTED, _node_title(r, i, lang)) for i in kept]
    spans += [token_span(r.pieces[i], r.status[i] if r.status[i] != ACCEPTED else UNREACHED, _node_title(r, i, lang))
              for i in shown_rejections(r)]
    if r.bonus_token is not None and len(r.emitted) > len(kept):
        spans.append(token_span(r.bonus_piece, "bonus" if r.n_proposed else "plain", _bonus_title(r, lang)))
    mark = ";outline:2px solid #f59e0b;background:#fef3c7" if highlight else ""
    badge = (f'<sup style="font-size:0.62em;color:#6b7280;margin-right:1px">{r.n_accepted}/{r.n_proposed}</sup>'
             if r.n_proposed else "")
    return (f'<span class="sv-round" title="{html.escape(round_summary(r, lang), quote=True)}" '
            f'style="border-left:2px solid #9ca3af;padding-left:1px;margin-left:2px{mark}">'
            f'{badge}{"".join(spans)}</span>')


def stream_html(rounds: list[Round], empty: Optional[str] = None, highlight: Optional[int] = None,
                lang: str = "en") -> str:
    """The run's text so far, one coloured group per round; `highlight` marks one round (0-based);
    `empty` is shown while there is none (default: the "text appears here" line)."""
    if not rounds:
        note = text("stream.empty", lang) if empty is None else empty
        return f'<div class="sv-stream" style="color:#6b7280;padding:8px">{html.escape(note)}</div>'
    body = "".join(round_html(r, n == highlight, lang) for n, r in enumerate(rounds))
    return (f'<div class="sv-stream" style="font-family:ui-monospace,Menlo,Consolas,monospace;font-size:15px;'
            f'line-height:2.1;white-space:pre-wrap;padding:8px;max-height:460px;overflow-y:auto">{body}</div>')


def legend_html(lang: str = "en") -> str:
    """The colour key."""
    items = "".join(f'{token_span(text(f"legend.sample.{role}", lang), role, text(f"legend.{role}", lang))} '
                    f'{html.escape(text(f"legend.{role}", lang))}&nbsp;&nbsp; '
                    for role in (ACCEPTED, REJECTED, UNREACHED, "bonus"))
    return (f'<div class="sv-legend" style="font-size:13px;line-height:2">{items}'
            f'<span style="color:#6b7280">{text("legend.note", lang)}</span></div>')


def emitted_pieces(r: Round) -> list[str]:
    """Text of each committed token of a round, in order."""
    pieces = [r.pieces[i] for i in r.accepted_path]
    if r.bonus_token is not None:
        pieces.append(r.bonus_piece)
    return pieces[: len(r.emitted)]


def headers(key: str, lang: str = "en") -> list[str]:
    """A table's column names ("a | b | c" in i18n)."""
    return [h.strip() for h in text(key, lang).split("|")]


def table(key: str, rows: list[list], lang: str = "en") -> dict:
    """A Dataframe value with its headers in `lang`."""
    return {"headers": headers(key, lang), "data": rows}


def round_rows(rounds: list[Round], lang: str = "en") -> list[list]:
    """One row per round, columns as in headers("headers.rounds")."""
    return [[r.index + 1, term("mode", r.mode, lang), r.k, r.n_proposed, r.n_accepted,
             r.bonus_piece if r.bonus_token is not None else "", r.text,
             round(r.draft_time_s * 1000, 1), round(r.verify_time_s * 1000, 1), r.tokens_so_far]
            for r in rounds]


def token_rows(r: Round, lang: str = "en") -> list[list]:
    """One row per guessed token of a round, then the bonus token; columns as in headers("headers.tokens")."""
    rows = [[i, depth_of(r.parents, i), r.pieces[i].replace("\n", "↵"), term("status", r.status[i], lang),
             fmt_prob(r.draft_probs[i]), fmt_prob(r.target_probs[i]),
             f"{keep_chance(r.draft_probs[i], r.target_probs[i]):.3f}" if r.thresholds is None
             else text("cell.threshold", lang, threshold=fmt_prob(r.thresholds[i]))]  # typical: the bar to beat
            for i in range(r.n_proposed)]
    if r.bonus_token is not None:
        rows.append(["bonus", len(r.accepted_path) + 1, r.bonus_piece.replace("\n", "↵"),
                     text("status.bonus", lang, source=term("source", r.bonus_source, lang)), "—",
                     fmt_prob(r.bonus_prob), "—"])
    return rows


MORE = "more"  # a collapsed box: the nodes under a guess that was never reached, counted instead of drawn


def _layout(r: Round) -> tuple[dict, dict[int, int]]:
    """(column, row) of every box: depth across, rows down in depth-first order with the accepted path and the
    bonus token first (row 0). The never-checked subtree under a guess is one box, keyed (MORE, parent), whose
    count is in the second dict; -1 is the root (the context)."""
    kids: dict[int, list[int]] = {-1: []}
    for i, p in enumerate(r.parents):
        kids.setdefault(p, []).append(i)
    on_path = set(r.accepted_path)
    end = r.accepted_path[-1] if r.accepted_path else -1
    place: dict = {}
    hidden: dict[int, int] = {}
    next_row = 0

    def subtree(node: int) -> int:
        return 1 + sum(subtree(c) for c in kids.get(node, []))

    def visit(node: int, depth: int) -> int:
        nonlocal next_row
        first = None
        if node == end and r.bonus_token is not None:  # the bonus continues the path on its row
            place["bonus"], first = (depth + 1, next_row), next_row
            next_row += 1
        children = sorted(kids.get(node, []), key=lambda c: c not in on_path)  # the path's child first
        unreached = [c for c in children if r.status[c] == UNREACHED]
        for c in children:
            if c not in unreached:
                row = visit(c, depth + 1)
                first = row if first is None else first
        if unreached:
            hidden[node] = sum(subtree(c) for c in unreached)
            place[(MORE, node)], first = (depth + 1, next_row), next_row if first is None else first
            next_row += 1
        if first is None:
            first, next_row = next_row, next_row + 1
        place[node] = (depth, first)
        return first

    visit(-1, 0)
    return place, hidden


def tree_svg(r: Round, lang: str = "en") -> str:
    """The round's candidate tree, fitted to the panel's width: accepted path in green along the top row, the
    bonus token at its end, rejected alternatives below, and what was never checked collapsed into a count."""
    if r.n_proposed == 0:
        return f'<div style="color:#6b7280;padding:8px">{html.escape(text("tree.none", lang))}</div>'
    place, hidden = _layout(r)
    col_w, row_h, box_w, box_h = 118, 30, 104, 22
    width = (max(c for c, _ in place.values()) + 1) * col_w + 10
    height = (max(rw for _, rw in place.values()) + 1) * row_h + 10

    def xy(node) -> tuple[int, int]:
        c, rw = place[node]
        return 5 + c * col_w, 5 + rw * row_h

    def link(parent, child, color: str, bold: bool) -> str:
        (x0, y0), (x1, y1) = xy(parent), xy(child)
        return _edge(x0 + box_w, y0 + box_h / 2, x1, y1 + box_h / 2, color, bold)

    on_path = set(r.accepted_path)
    edges, boxes = [], []
    for i, p in enumerate(r.parents):
        if i in place:
            edges.append(link(p, i, "#16a34a" if i in on_path else "#9ca3af", i in on_path))
            boxes.append(_box(*xy(i), box_w, box_h, r.pieces[i], r.status[i], _node_title(r, i, lang)))
    for parent, count in hidden.items():
        label = text("tree.more", lang, n=count)
        edges.append(link(parent, (MORE, parent), "#d1d5db", False))
        boxes.append(_box(*xy((MORE, parent)), box_w, box_h, label, UNREACHED, text("tree.more_title", lang, n=count),
                          strike=False, clip=14))
    if r.bonus_token is not None:
        end = r.accepted_path[-1] if r.accepted_path else -1
        edges.append(link(end, "bonus", "#2563eb", True))
        boxes.append(_box(*xy("bonus"), box_w, box_h, r.bonus_piece, "bonus", _bonus_title(r, lang)))
    boxes.append(_box(*xy(-1), box_w, box_h, text("tree.context", lang), "plain", text("tree.context_title", lang)))
    note = (f'<div style="font-size:12px;color:#6b7280">'
            f'{html.escape(text("tree.note", lang, summary=round_summary(r, lang), n=r.n_proposed))}</div>')
    return (f'{note}<div class="sv-tree" style="max-height:460px;overflow:auto"><svg xmlns="http://www.w3.org/2000/svg" '
            f'viewBox="0 0 {width} {height}" width="100%" style="max-width:{width}px;min-width:{min(width, 480)}px;'
            f'font-family:ui-monospace,monospace;font-size:12px">{"".join(edges)}{"".join(boxes)}</svg></div>')


def _edge(x0: float, y0: float, x1: float, y1: float, color: str, bold: bool) -> str:
    mid = (x0 + x1) / 2
    return (f'<path d="M{x0},{y0} C{mid},{y0} {mid},{y1} {x1},{y1}" fill="none" stroke="{color}" '
            f'stroke-width="{3 if bold else 1.2}"/>')


def _box(x: float, y: float, w: int, h: int, piece: str, role: str, title: str, strike: bool = True,
         clip: int = 12) -> str:
    background, color = COLORS[role]
    label = piece.replace("\n", "↵")
    label = label if len(label) <= clip else label[:clip - 1] + "…"
    strike = ' text-decoration="line-through"' if strike and role in (REJECTED, UNREACHED) else ""
    return (f'<g><title>{html.escape(title)}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" '
            f'fill="{background}" stroke="{color}" stroke-width="1"/><text x="{x + 6}" y="{y + 15}" '
            f'fill="{color}"{strike} xml:space="preserve">{html.escape(label)}</text></g>')


def narrate(r: Round, greedy: bool, lang: str = "en") -> str:
    """A plain-language account of one round, for the classroom step mode."""
    lines = [text("narr.round", lang, n=r.index + 1)]
    if r.n_proposed == 0:
        why = (text("narr.why.fallback", lang, note=r.note or text("narr.low_acceptance", lang))
               if r.mode == FALLBACK else text("narr.why.nothing", lang, method=r.method)
               if r.method != "baseline" else text("narr.why.baseline", lang))
        lines.append(text("narr.plain", lang, why=why, piece=_q(r.bonus_piece), p=fmt_prob(r.bonus_prob)))
        return "\n\n".join(lines + _stop_line(r, lang))
    if r.is_chain:
        guesses = ", ".join(_q(r.pieces[i]) for i in range(r.n_proposed))
        lines.append(text("narr.guessed", lang, method=r.method, n=r.n_proposed, shape=text("narr.chain", lang),
                          guesses=guesses))
    else:
        lines.append(_tree_by_depth(r, lang))
    kept = ", ".join(_q(r.pieces[i]) for i in r.accepted_path) or text("narr.none", lang)
    lines.append(text("narr.kept", lang, n=r.n_accepted, kept=kept))
    rejected = [i for i in range(r.n_proposed) if r.status[i] == REJECTED]
    lines += [_why_rejected(r, i, greedy, lang) for i in rejected[:4]]
    if len(rejected) > 4:
        lines.append(text("narr.more_rejected", lang, n=len(rejected) - 4))
    unreached = sum(s == UNREACHED for s in r.status)
    if unreached:
        lines.append(text("narr.unreached", lang, n=unreached))
    lines.append(_bonus_line(r, greedy, lang))
    return "\n\n".join(lines + _stop_line(r, lang))


def _tree_by_depth(r: Round, lang: str) -> str:
    """A tree's guesses told level by level: how many, how many the target reached, which one it kept."""
    depths = [depth_of(r.parents, i) for i in range(r.n_proposed)]
    levels = []
    for d in range(1, max(depths) + 1):
        nodes = [i for i in range(r.n_proposed) if depths[i] == d]
        checked = sum(r.status[i] != UNREACHED for i in nodes)
        kept = r.accepted_path[d - 1] if d <= len(r.accepted_path) else None
        levels.append(text("narr.depth", lang, depth=d, n=len(nodes),
                           checked=text("narr.depth_checked", lang, n=checked) if checked < len(nodes) else "",
                           kept=_q(r.pieces[kept]) if kept is not None else text("narr.none", lang)))
    return text("narr.guessed_tree", lang, method=r.method, n=r.n_proposed, levels=len(levels)) + "\n" + "\n".join(levels)


def _why_rejected(r: Round, i: int, greedy: bool, lang: str) -> str:
    draft, target = r.draft_probs[i], r.target_probs[i]
    if r.thresholds is not None:  # typical acceptance: a threshold, no coin
        passed = target > r.thresholds[i]
        return text("narr.rejected_typical_passed" if passed else "narr.rejected_typical", lang, piece=_q(r.pieces[i]),
                    p=fmt_prob(target), threshold=fmt_prob(r.thresholds[i]))
    if greedy:
        end = r.accepted_path[-1] if r.accepted_path else -1
        preferred = (text("narr.preferred", lang, piece=_q(r.bonus_piece))
                     if r.parents[i] == end and r.bonus_token is not None else "")
        return text("narr.rejected_greedy", lang, piece=_q(r.pieces[i]), p=fmt_prob(target), preferred=preferred)
    draft_text = fmt_prob(draft) if draft is not None else text("narr.no_draft_prob", lang)
    return text("narr.rejected_sampled", lang, piece=_q(r.pieces[i]), target=fmt_prob(target), draft=draft_text,
                keep=f"{keep_chance(draft, target):.3f}")


def _bonus_line(r: Round, greedy: bool, lang: str) -> str:
    if r.bonus_token is None:
        return text("narr.no_bonus", lang)
    where = text("narr.after_kept" if r.n_accepted else "narr.in_place", lang)
    how = ("narr.how.residual" if r.bonus_source == "residual" else "narr.how.greedy" if greedy
           else "narr.how.sampled")
    return text("narr.bonus", lang, piece=_q(r.bonus_piece), where=where, how=text(how, lang),
                p=fmt_prob(r.bonus_prob), n=len(r.emitted))


def _stop_line(r: Round, lang: str) -> list[str]:
    return [text("narr.stop", lang, reason=term("stop", r.stop_reason, lang))] if r.finished else []


def _q(piece: str) -> str:
    return "`" + piece.replace("`", "'").replace("\n", "↵") + "`" if piece.strip() else f"`{piece!r}`"


def run_ids(rounds: list[Round]) -> list[int]:
    return [t for r in rounds for t in r.emitted]


def stopped_early(rounds: list[Round]) -> bool:
    """True when a run ended before its natural end: cut by the time budget, or stopped mid-way."""
    return bool(rounds) and (not rounds[-1].finished or rounds[-1].stop_reason == "time_budget")


@dataclass(frozen=True)
class Agreement:
    """How a speculative run's tokens compare with the baseline's.

    A run cut short (time budget, stop) is compared on the common prefix only: its text so far is
    correct, just shorter, so a length difference is no difference. A length difference counts only
    when the shorter run ended on its own (an end-of-sequence token the other run did not produce)."""

    first_difference: Optional[int]  # 0-based index of the first differing token; None: they agree
    compared: int  # how many tokens were compared
    short: Optional[str]  # "baseline" or "run": which one stopped early, when the comparison is partial
    lengths: tuple[int, int]  # (run tokens, baseline tokens)


def agreement(spec: list[Round], base: list[Round]) -> Agreement:
    a, b = run_ids(spec), run_ids(base)
    n = min(len(a), len(b))
    first = next((i for i in range(n) if a[i] != b[i]), None)
    short = None
    if len(a) != len(b):
        shorter, name = (base, "baseline") if len(b) < len(a) else (spec, "run")
        if stopped_early(shorter):
            short = name
        elif first is None:
            first = n
    elif stopped_early(base) or stopped_early(spec):
        short = "baseline" if stopped_early(base) else "run"
    return Agreement(first, n if first is None else first + 1, short, (len(a), len(b)))


def lossless_markdown(spec: list[Round], base: list[Round], greedy: bool, lang: str = "en") -> str:
    """Whether a speculative run's tokens equal the baseline's, or where they first differ."""
    if not spec or not base:
        return ""
    if any(r.thresholds is not None for r in spec):
        return text("lossless.typical", lang)
    if not greedy:
        return text("lossless.sampling", lang)
    check = agreement(spec, base)
    first, n = check.first_difference, check.compared
    if first is None and check.short:
        return text("lossless.prefix", lang, n=n, who=text(f"who.{check.short}", lang))
    if first is None:
        return text("lossless.identical", lang, n=n)
    a, b = check.lengths
    if first == min(a, b):
        return text("lossless.ended_earlier", lang, n=first, a=a, b=b)
    pa, pb = [p for r in spec for p in emitted_pieces(r)], [p for r in base for p in emitted_pieces(r)]
    return text("lossless.first_difference", lang, n=first + 1, context=_q("".join(pa[max(0, first - 12):first])),
                spec=_q("".join(pa[first:first + 4])), base=_q("".join(pb[first:first + 4])))
