"""Why one guess was kept or rejected: the distributions behind a verdict, as data (`explain_node`) and as HTML
bars (`why_html`), for the inspector and the step mode.

Reads the fields a Round carries for it (target_top, draft_top, u, accept_probs, residual_top,
bonus_residual_prob; see events.Round). A record from before them gets a sentence instead of a panel.
The three parts of a sampled decision are numbered as a class would step through them: (1) p and q side by
side, (2) the coin u against min(1, p/q), (3) what the residual norm(max(0, p - q)) gave. No torch here.
"""
from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional

from specviz.events import ACCEPTED, REJECTED, Round, depth_of
from specviz.i18n import EN, TEXTS, term, text
from specviz.render import COLORS, fmt_prob, token_span

GREEDY, SAMPLED, POINT, TYPICAL = "greedy", "sampled", "point", "typical"  # the rule a verdict followed
TARGET_BAR, DRAFT_BAR = "#1e3a8a", "#d97706"  # the target's p (the bonus's colour), the draft's q
RESIDUAL_BAR = "#60a5fa"


@dataclass(frozen=True)
class Bar:
    """One token of the panel: its probability under each distribution shown (None: not among the recorded top)."""

    token: int
    piece: str
    target: Optional[float]  # p: the target distribution the rule compared the guess with
    draft: Optional[float]  # q: the draft distribution (sampled guesses), or 1 on a chosen guess (point mass)
    residual: Optional[float]  # norm(max(0, p - q)) after a rejection
    guess: bool  # the node's own token
    drawn: bool  # drawn from this node's residual: the round's bonus token


@dataclass(frozen=True)
class Why:
    """Everything the panel says about one checked node."""

    node: int
    piece: str  # the guess
    status: str  # accepted / rejected
    rule: str  # GREEDY, SAMPLED (q a distribution), POINT (a chosen guess: q = 1 on it) or TYPICAL
    bars: list[Bar]  # the union of the recorded top tokens, likeliest under p first
    target_prob: Optional[float]  # p of the guess, as the rule compared it
    draft_prob: Optional[float]  # q of the guess under the rule (1 for a point mass); None for greedy and typical
    own_prob: Optional[float]  # the drafter's own probability of its guess (draft_probs), when it has one
    accept_prob: Optional[float]  # min(1, p/q): the chance of being kept
    u: Optional[float]  # the uniform draw compared with accept_prob
    top: Optional[tuple[str, float]]  # the target's likeliest token and its p (greedy: the one it would write)
    later_sibling: bool  # earlier guesses at this position were rejected: p is what was left of the target
    next_piece: Optional[str]  # a rejection followed by another guess at this position: that guess
    drawn_prob: Optional[float]  # the bonus's probability in this node's residual, when it was drawn from it
    threshold: Optional[float]  # typical acceptance: the p the guess had to beat


def has_reasons(r: Round) -> bool:
    """The record carries the distributions (a record from before them, e.g. an old trace, does not)."""
    return r.target_top is not None


def checked_nodes(r: Round) -> list[int]:
    """The guesses the target looked at (kept or rejected), in node order."""
    return [i for i, s in enumerate(r.status) if s in (ACCEPTED, REJECTED)]


def default_node(r: Round) -> Optional[int]:
    """The node the panel opens on: the first rejected guess, else the last kept one, else None."""
    rejected = [i for i in checked_nodes(r) if r.status[i] == REJECTED]
    return rejected[0] if rejected else r.accepted_path[-1] if r.accepted_path else None


def node_choices(r: Round, lang: str = "en") -> list[tuple[str, int]]:
    """(label, node) for a dropdown of the round's checked nodes."""
    return [(text("why.node", lang, n=i, piece=repr(r.pieces[i]), depth=depth_of(r.parents, i),
                  status=term("status", r.status[i], lang)), i) for i in checked_nodes(r)]


def _rule(r: Round, node: int) -> str:
    if r.thresholds is not None:
        return TYPICAL
    if r.u is None or r.u[node] is None:
        return GREEDY
    return SAMPLED if r.draft_top is not None and r.draft_top[node] is not None else POINT


def _earlier_sibling(r: Round, node: int) -> Optional[int]:
    """The sibling tried just before `node` (siblings are tried in node order), if any."""
    before = [i for i in range(node) if r.parents[i] == r.parents[node] and r.status[i] == REJECTED]
    return before[-1] if before else None


def _drawn_here(r: Round, node: int) -> bool:
    """The bonus was drawn from this node's residual: the last guess tried at the end of the kept path."""
    end = r.accepted_path[-1] if r.accepted_path else -1
    tried = [i for i in range(r.n_proposed) if r.parents[i] == end and r.status[i] == REJECTED]
    return (r.bonus_source == "residual" and r.bonus_token is not None and r.status[node] == REJECTED
            and bool(tried) and tried[-1] == node)


def _as_map(top: Optional[list]) -> dict[int, float]:
    """A recorded top list [[piece, probability, token], ...] -> {token: probability}."""
    return {token: prob for _, prob, token in top or []}


def explain_node(r: Round, node: int) -> Optional[Why]:
    """The panel's data for one node; None when the record lacks the distributions or the node was not checked."""
    if not has_reasons(r) or node not in checked_nodes(r) or r.target_top[node] is None:
        return None
    rule, token, rejected = _rule(r, node), r.tokens[node], r.status[node] == REJECTED
    sampled = rule in (SAMPLED, POINT)
    sibling = _earlier_sibling(r, node) if sampled else None
    compared = r.residual_top[sibling] if sibling is not None and r.residual_top[sibling] else r.target_top[node]
    tops, target = [compared], _as_map(compared)
    target_prob = r.target_probs[node] if sibling is None else target.get(token)
    if target_prob is None and rule == POINT:
        target_prob = r.accept_probs[node]  # min(1, p / 1) = p
    draft = {token: 1.0} if rule == POINT else {}
    if rule == SAMPLED:
        tops.append(r.draft_top[node])
        draft = {**_as_map(r.draft_top[node]), token: r.draft_probs[node]}
    residual = {}
    if sampled and rejected and r.residual_top[node]:
        tops.append(r.residual_top[node])
        residual = _as_map(r.residual_top[node])
    drawn = sampled and _drawn_here(r, node)
    pieces = {t: piece for top in tops for piece, _, t in top}
    pieces[token] = r.pieces[node]
    if target_prob is not None:
        target[token] = target_prob
    if drawn:
        pieces[r.bonus_token] = r.bonus_piece
        residual.setdefault(r.bonus_token, r.bonus_residual_prob)
    bars = sorted((Bar(t, piece, target.get(t), draft.get(t), residual.get(t), t == token, drawn and t == r.bonus_token)
                   for t, piece in pieces.items()), key=lambda b: (-(b.target or 0), -(b.draft or 0), -(b.residual or 0)))
    after = [i for i in range(node + 1, r.n_proposed) if r.parents[i] == r.parents[node] and r.status[i] in (ACCEPTED, REJECTED)]
    top_piece, top_prob, _ = r.target_top[node][0]
    return Why(node=node, piece=r.pieces[node], status=r.status[node], rule=rule, bars=bars, target_prob=target_prob,
               draft_prob=draft.get(token), own_prob=r.draft_probs[node], accept_prob=r.accept_probs[node] if sampled else None,
               u=r.u[node] if sampled else None, top=(top_piece, top_prob), later_sibling=sibling is not None,
               next_piece=r.pieces[after[0]] if after and rejected and sampled else None,
               drawn_prob=r.bonus_residual_prob if drawn else None,
               threshold=r.thresholds[node] if rule == TYPICAL else None)


# --- the panel as HTML ------------------------------------------------------------------------------------

BAR_PX = 130  # width of a probability bar of 1
ROWS = 12  # tokens shown at most: the likeliest under any of the distributions, the guess and the drawn token always


def why_html(r: Round, node: Optional[int] = None, lang: str = "en") -> str:
    """The Why panel of one round: `node` (a checked node; otherwise `default_node`) explained as bars of p, q
    and the residual, the coin, and what the residual gave. Greedy rounds show only p and the target's top
    choice; a record without distributions, or a round without guesses, gets one sentence."""
    if not has_reasons(r):
        return _box(_say("why.old", lang))
    if not checked_nodes(r):
        return _box(_say("why.none", lang))
    w = explain_node(r, node if node in checked_nodes(r) else default_node(r))
    head = _say("why.head", lang, piece=_tok(w.piece, w.status), n=str(w.node), depth=str(depth_of(r.parents, w.node)),
                status=f"<b>{html.escape(term('status', w.status, lang))}</b>")
    if w.rule in (GREEDY, TYPICAL):
        return _box(head, _rule_line(w, lang), _bars(w, (TARGET_BAR,), lang), _say("why.recorded", lang))
    steps = [_step1(w, lang), _bars(w, (TARGET_BAR, DRAFT_BAR) + ((RESIDUAL_BAR,) if w.status == REJECTED else ()), lang),
             _say("why.step2", lang, u=_num(w.u), guess=_tok(w.piece, w.status), p=_num(w.target_prob),
                  q=_num(w.draft_prob), a=_num(w.accept_prob)),
             _coin(w, lang), _say("why.step2.kept" if w.status == ACCEPTED else "why.step2.rejected", lang,
                                  u=_num(w.u), a=_num(w.accept_prob))]
    if w.status == REJECTED:
        steps.append(_step3(w, r, lang))
    return _box(head, *steps, _say("why.recorded", lang))


def _rule_line(w: Why, lang: str) -> str:
    if w.rule == TYPICAL:
        key = "why.typical.kept" if w.status == ACCEPTED else "why.typical.rejected"
        return _say(key, lang, guess=_tok(w.piece, w.status), p=_num(w.target_prob), t=_num(w.threshold))
    key = "why.greedy.kept" if w.status == ACCEPTED else "why.greedy.rejected"
    return _say(key, lang, top=_tok(w.top[0], w.status if w.status == ACCEPTED else "plain"), p=_num(w.top[1]),
                guess=_tok(w.piece, w.status),
                pg=_num(w.target_prob))


def _step1(w: Why, lang: str) -> str:
    if w.rule == POINT:
        own = _say("why.own", lang, q=_num(w.own_prob)) if w.own_prob is not None else ""
        line = _say("why.step1.point", lang, guess=_tok(w.piece, w.status), own=own)
    else:
        line = _say("why.step1", lang)
    return line + (" " + _say("why.step1.later", lang) if w.later_sibling else "")


def _step3(w: Why, r: Round, lang: str) -> str:
    if w.drawn_prob is not None:
        return _say("why.step3.drawn", lang, drawn=_tok(r.bonus_piece, "bonus"), pr=_num(w.drawn_prob),
                    p=_num(r.bonus_prob))
    if w.next_piece is not None:
        return _say("why.step3.next", lang, next=_tok(w.next_piece, "plain"))
    return _say("why.step3.stopped", lang)


def _bars(w: Why, columns: tuple[str, ...], lang: str) -> str:
    """One row per token: its piece, then a bar per distribution (p, q, residual), the guess and the drawn
    token marked in the legend's colours."""
    names = {TARGET_BAR: "why.col.target", DRAFT_BAR: "why.col.draft", RESIDUAL_BAR: "why.col.residual"}
    head = "".join(f'<th style="text-align:left;font-weight:600;padding:2px 6px">{html.escape(text(names[c], lang))}</th>'
                   for c in columns)
    rows = []
    for b in shown_bars(w.bars):
        values = {TARGET_BAR: b.target, DRAFT_BAR: b.draft, RESIDUAL_BAR: b.residual}
        role = w.status if b.guess else "bonus" if b.drawn else "plain"
        mark = (text("why.mark.guess", lang) if b.guess else text("why.mark.drawn", lang) if b.drawn else "")
        cells = "".join(_bar_cell(values[c], "#1d4ed8" if b.drawn and c == RESIDUAL_BAR else c) for c in columns)
        rows.append(f'<tr><td style="padding:1px 6px;white-space:nowrap">{token_span(b.piece, role, mark or b.piece)}'
                    f'<span style="font-size:11px;color:#6b7280"> {html.escape(mark)}</span></td>{cells}</tr>')
    more = len(w.bars) - len(rows)
    more = (f'<tr><td colspan="{1 + len(columns)}" style="padding:1px 6px;font-size:12px;color:#6b7280">'
            f'{html.escape(text("why.more", lang, n=more))}</td></tr>' if more else "")
    return (f'<table class="sv-why-bars" style="border-collapse:collapse;font-size:13px;margin:4px 0">'
            f'<tr><th style="text-align:left;padding:2px 6px">{html.escape(text("why.col.token", lang))}</th>{head}</tr>'
            f'{"".join(rows)}{more}</table>')


def shown_bars(bars: list[Bar], limit: int = ROWS) -> list[Bar]:
    """The rows worth a class's attention, in their order: the guess, the drawn token, then the largest."""
    size = {id(b): max(b.target or 0, b.draft or 0, b.residual or 0) for b in bars}
    ranked = sorted(bars, key=lambda b: (not (b.guess or b.drawn), -size[id(b)]))
    keep = {id(b) for b in ranked[:limit]}
    return [b for b in bars if id(b) in keep]


def _bar_cell(value: Optional[float], color: str) -> str:
    if value is None:
        return '<td style="padding:1px 6px;color:#9ca3af">·</td>'
    width = max(1, round(min(value, 1.0) * BAR_PX)) if value > 0 else 0
    return (f'<td style="padding:1px 6px;white-space:nowrap"><span style="display:inline-block;vertical-align:middle;'
            f'width:{width}px;height:10px;background:{color};border-radius:2px"></span>'
            f'<span style="font-size:12px;margin-left:4px">{_num(value)}</span></td>')


def _coin(w: Why, lang: str) -> str:
    """The unit interval split at min(1, p/q): keep to its left, reject to its right; the draw u as a line."""
    keep, reject = COLORS[ACCEPTED], COLORS[REJECTED]
    a, u = 100 * (w.accept_prob or 0.0), 100 * (w.u or 0.0)
    return (f'<div class="sv-why-coin" style="position:relative;width:320px;height:20px;margin:10px 0 4px;'
            f'border:1px solid #9ca3af;border-radius:3px;font-size:11px">'
            f'<div style="position:absolute;left:0;top:0;bottom:0;width:{a:.2f}%;background:{keep[0]};color:{keep[1]};'
            f'overflow:hidden;padding-left:2px">{html.escape(text("why.coin.keep", lang))}</div>'
            f'<div style="position:absolute;left:{a:.2f}%;top:0;bottom:0;right:0;background:{reject[0]};color:{reject[1]};'
            f'overflow:hidden;text-align:right;padding-right:2px">{html.escape(text("why.coin.reject", lang))}</div>'
            f'<div title="u = {w.u:.3f}" style="position:absolute;left:calc({u:.2f}% - 1px);top:-5px;bottom:-5px;width:3px;'
            f'background:#111827"></div></div>'
            f'<div style="width:320px;font-size:11px;color:#6b7280;display:flex;justify-content:space-between">'
            f'<span>0</span><span>min(1, p/q) = {w.accept_prob:.3f} · u = {w.u:.3f}</span><span>1</span></div>')


def _box(*parts: str) -> str:
    body = "".join(f'<div style="margin:4px 0">{part}</div>' for part in parts if part)
    return f'<div class="sv-why" style="font-size:14px;line-height:1.5;padding:6px">{body}</div>'


def _say(key: str, lang: str, **values: str) -> str:
    """An i18n sentence as HTML: its own words escaped, the values (HTML already) put in."""
    template = html.escape(TEXTS.get(lang, EN)[key], quote=False)
    return template.format(**values) if values else template


def _tok(piece: str, role: str) -> str:
    return token_span(piece, role, piece)


def _num(value: Optional[float]) -> str:
    """A probability to 3 decimals; a tiny one as "<0.001", not as a zero it is not."""
    return "&lt;0.001" if value is not None and 0 < value < 0.0005 else html.escape(fmt_prob(value))
