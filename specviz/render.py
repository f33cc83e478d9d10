"""Records -> what a viewer reads: coloured token spans, tables, a tree picture, a narration.

Every function takes Round records (plain data) and returns HTML, Markdown or table rows.
Styles are inline so the HTML looks the same in the app, in a saved page and in the API.
No torch here.
"""
from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Optional

from specviz.events import ACCEPTED, FALLBACK, REJECTED, UNREACHED, Round, depth_of

SPECIAL = re.compile(r"<\|[^|<>]*\|>|</?s>")  # special tokens such as <|im_end|>
COLORS = {  # role -> (background, text)
    ACCEPTED: ("#bbf7d0", "#14532d"),
    REJECTED: ("#fecaca", "#991b1b"),
    UNREACHED: ("#f3f4f6", "#9ca3af"),
    "bonus": ("#bfdbfe", "#1e3a8a"),
    "plain": ("#e5e7eb", "#111827"),
}
LABELS = {
    ACCEPTED: "accepted guess",
    REJECTED: "rejected guess (replaced)",
    UNREACHED: "guess after a rejection (never checked)",
    "bonus": "bonus token (from the target)",
    "plain": "plain step (nothing guessed)",
}


def fmt_prob(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.3f}"


def keep_chance(draft_prob: Optional[float], target_prob: float) -> float:
    """min(1, target / draft): the chance a sampled guess is kept (no draft probability: a certain guess)."""
    draft = 1.0 if draft_prob is None else draft_prob
    return min(1.0, target_prob / draft) if draft > 0 else 1.0


def _visible(piece: str, line_breaks: bool) -> str:
    text = html.escape(piece)
    if SPECIAL.fullmatch(piece):  # <|im_end|> and friends: shown, but small
        return f'<span style="font-size:0.7em">{text}</span>'
    return text.replace("\n", "↵<br>" if line_breaks else "↵") if text else "∅"


def token_span(piece: str, role: str, title: str) -> str:
    background, color = COLORS[role]
    strike = "text-decoration:line-through;text-decoration-thickness:2px;" if role in (REJECTED, UNREACHED) else ""
    return (f'<span class="sv-tok sv-{role}" title="{html.escape(title, quote=True)}" '
            f'style="background:{background};color:{color};{strike}border-radius:3px;padding:1px 1px">'
            f"{_visible(piece, role in (ACCEPTED, 'bonus', 'plain'))}</span>")


def _node_title(r: Round, i: int) -> str:
    draft, target = r.draft_probs[i], r.target_probs[i]
    return (f"{r.pieces[i]!r} — {r.status[i]}\ndraft p = {fmt_prob(draft)}, target p = {fmt_prob(target)}\n"
            f"keep chance min(1, target/draft) = {keep_chance(draft, target):.3f}")


def round_summary(r: Round) -> str:
    """'5 guessed, 3 kept, 1 bonus' in words."""
    if r.n_proposed == 0:
        return f"round {r.index + 1}: plain step ({r.mode}), 1 token from the target"
    bonus = "1 bonus" if r.bonus_token is not None else "no bonus (run stopped)"
    return f"round {r.index + 1}: {r.n_proposed} guessed, {r.n_accepted} kept, {bonus}"


def shown_rejections(r: Round) -> list[int]:
    """Nodes to show struck through: a chain's whole rejected tail; in a tree, the rejected
    siblings at the point where the accepted path ends (where the bonus token replaced them)."""
    on_path = set(r.accepted_path)
    if r.parents == list(range(-1, r.n_proposed - 1)):
        return [i for i in range(r.n_proposed) if i not in on_path]
    end = r.accepted_path[-1] if r.accepted_path else -1
    return [i for i in range(r.n_proposed) if r.parents[i] == end and r.status[i] == REJECTED]


def round_html(r: Round, highlight: bool = False) -> str:
    """One round: kept guesses, rejected guesses struck through where they stood, the bonus token."""
    kept = r.accepted_path[: len(r.emitted)]
    spans = [token_span(r.pieces[i], ACCEPTED, _node_title(r, i)) for i in kept]
    spans += [token_span(r.pieces[i], r.status[i] if r.status[i] != ACCEPTED else UNREACHED, _node_title(r, i))
              for i in shown_rejections(r)]
    if r.bonus_token is not None and len(r.emitted) > len(kept):
        role = "bonus" if r.n_proposed else "plain"
        spans.append(token_span(r.bonus_piece, role, f"{r.bonus_piece!r} — bonus token from the {r.bonus_source}\n"
                                                     f"target p = {fmt_prob(r.bonus_prob)}"))
    mark = ";outline:2px solid #f59e0b;background:#fef3c7" if highlight else ""
    badge = (f'<sup style="font-size:0.62em;color:#6b7280;margin-right:1px">{r.n_accepted}/{r.n_proposed}</sup>'
             if r.n_proposed else "")
    return (f'<span class="sv-round" title="{html.escape(round_summary(r), quote=True)}" '
            f'style="border-left:2px solid #9ca3af;padding-left:1px;margin-left:2px{mark}">'
            f'{badge}{"".join(spans)}</span>')


def stream_html(rounds: list[Round], empty: str = "The text appears here, round by round.",
                highlight: Optional[int] = None) -> str:
    """The run's text so far, one coloured group per round; `highlight` marks one round (0-based)."""
    if not rounds:
        return f'<div class="sv-stream" style="color:#6b7280;padding:8px">{html.escape(empty)}</div>'
    body = "".join(round_html(r, n == highlight) for n, r in enumerate(rounds))
    return (f'<div class="sv-stream" style="font-family:ui-monospace,Menlo,Consolas,monospace;font-size:15px;'
            f'line-height:2.1;white-space:pre-wrap;padding:8px;max-height:460px;overflow-y:auto">{body}</div>')


LEGEND_NOTE = "│ starts a round; <sup>3/5</sup> = kept / guessed. Hover a token for its draft and target probability."


def legend_html(labels: Optional[dict[str, str]] = None, note: str = LEGEND_NOTE) -> str:
    """The colour key; `labels` (role -> text) and `note` (trusted HTML) translate it."""
    labels = {**LABELS, **(labels or {})}
    samples = {ACCEPTED: " kept", REJECTED: " wrong", UNREACHED: " later", "bonus": " bonus"}
    items = "".join(f'{token_span(samples[role], role, labels[role])} {html.escape(labels[role])}&nbsp;&nbsp; '
                    for role in samples)
    return (f'<div class="sv-legend" style="font-size:13px;line-height:2">{items}'
            f'<span style="color:#6b7280">{note}</span></div>')


def emitted_pieces(r: Round) -> list[str]:
    """Text of each committed token of a round, in order."""
    pieces = [r.pieces[i] for i in r.accepted_path]
    if r.bonus_token is not None:
        pieces.append(r.bonus_piece)
    return pieces[: len(r.emitted)]


ROUND_HEADERS = ["round", "mode", "k", "guessed", "kept", "bonus", "added text", "draft ms", "verify ms", "tokens"]


def round_rows(rounds: list[Round]) -> list[list]:
    return [[r.index + 1, r.mode, r.k, r.n_proposed, r.n_accepted,
             r.bonus_piece if r.bonus_token is not None else "", r.text,
             round(r.draft_time_s * 1000, 1), round(r.verify_time_s * 1000, 1), r.tokens_so_far]
            for r in rounds]


TOKEN_HEADERS = ["node", "depth", "token", "status", "draft p", "target p", "min(1, target/draft)"]


def token_rows(r: Round) -> list[list]:
    """One row per guessed token of a round, then the bonus token."""
    rows = [[i, depth_of(r.parents, i), r.pieces[i].replace("\n", "↵"), r.status[i], fmt_prob(r.draft_probs[i]),
             fmt_prob(r.target_probs[i]), f"{keep_chance(r.draft_probs[i], r.target_probs[i]):.3f}"]
            for i in range(r.n_proposed)]
    if r.bonus_token is not None:
        rows.append(["bonus", len(r.accepted_path) + 1, r.bonus_piece.replace("\n", "↵"),
                     f"bonus ({r.bonus_source})", "—", fmt_prob(r.bonus_prob), "—"])
    return rows


def _layout(r: Round) -> dict[int, tuple[int, int]]:
    """(column, row) of each node: depth across, leaves down in depth-first order; -1 is the root."""
    kids: dict[int, list[int]] = {-1: []}
    for i, p in enumerate(r.parents):
        kids.setdefault(p, []).append(i)
    place: dict[int, tuple[int, int]] = {}
    next_row = 0

    def visit(node: int, depth: int) -> int:
        nonlocal next_row
        children = kids.get(node, [])
        rows = [visit(c, depth + 1) for c in children]
        if not rows:
            rows = [next_row]
            next_row += 1
        place[node] = (depth, rows[0])
        return rows[0]

    visit(-1, 0)
    return place


def tree_svg(r: Round, max_nodes: int = 120) -> str:
    """The round's candidate tree, accepted path in green, the bonus token attached to its end."""
    if r.n_proposed == 0:
        return '<div style="color:#6b7280;padding:8px">This round guessed nothing: no tree to draw.</div>'
    place = _layout(r)
    end = r.accepted_path[-1] if r.accepted_path else -1
    if r.bonus_token is not None:  # on a row of its own, beside the guess it replaced
        place["bonus"] = (place[end][0] + 1, max(row for _, row in place.values()) + 1)
    col_w, row_h, box_w, box_h = 118, 30, 104, 22
    width = (max(c for c, _ in place.values()) + 1) * col_w + 10
    height = (max(rw for _, rw in place.values()) + 1) * row_h + 10

    def xy(node) -> tuple[int, int]:
        c, rw = place[node]
        return 5 + c * col_w, 5 + rw * row_h

    on_path = set(r.accepted_path)
    edges, boxes = [], []
    for i, p in enumerate(r.parents[:max_nodes]):
        (x0, y0), (x1, y1) = xy(p), xy(i)
        kept = i in on_path
        edges.append(_edge(x0 + box_w, y0 + box_h / 2, x1, y1 + box_h / 2, "#16a34a" if kept else "#9ca3af", kept))
        boxes.append(_box(x1, y1, box_w, box_h, r.pieces[i], r.status[i], _node_title(r, i)))
    if r.bonus_token is not None:
        (x0, y0), (x1, y1) = xy(end), xy("bonus")
        edges.append(_edge(x0 + box_w, y0 + box_h / 2, x1, y1 + box_h / 2, "#2563eb", True))
        boxes.append(_box(x1, y1, box_w, box_h, r.bonus_piece, "bonus",
                          f"bonus token from the {r.bonus_source}, target p = {fmt_prob(r.bonus_prob)}"))
    x, y = xy(-1)
    boxes.append(_box(x, y, box_w, box_h, "context", "plain", "the last committed token: every guess hangs from it"))
    note = (f'<div style="font-size:12px;color:#6b7280">{html.escape(round_summary(r))}; '
            f"{r.n_proposed} nodes in the tree, accepted path in green.</div>")
    return (f'{note}<div style="max-height:440px;overflow:auto"><svg xmlns="http://www.w3.org/2000/svg" '
            f'width="{width}" height="{height}" style="font-family:ui-monospace,monospace;font-size:12px">'
            f'{"".join(edges)}{"".join(boxes)}</svg></div>')


def _edge(x0: float, y0: float, x1: float, y1: float, color: str, bold: bool) -> str:
    mid = (x0 + x1) / 2
    return (f'<path d="M{x0},{y0} C{mid},{y0} {mid},{y1} {x1},{y1}" fill="none" stroke="{color}" '
            f'stroke-width="{3 if bold else 1.2}"/>')


def _box(x: float, y: float, w: int, h: int, piece: str, role: str, title: str) -> str:
    background, color = COLORS[role]
    label = piece.replace("\n", "↵")
    label = label if len(label) <= 12 else label[:11] + "…"
    strike = ' text-decoration="line-through"' if role in (REJECTED, UNREACHED) else ""
    return (f'<g><title>{html.escape(title)}</title><rect x="{x}" y="{y}" width="{w}" height="{h}" rx="4" '
            f'fill="{background}" stroke="{color}" stroke-width="1"/><text x="{x + 6}" y="{y + 15}" '
            f'fill="{color}"{strike} xml:space="preserve">{html.escape(label)}</text></g>')


def narrate(r: Round, greedy: bool) -> str:
    """A plain-language account of one round, for the classroom step mode."""
    lines = [f"### Round {r.index + 1}"]
    if r.n_proposed == 0:
        why = (f"the engine fell back to plain decoding ({r.note or 'acceptance was low'})" if r.mode == FALLBACK
               else f"{r.method} had nothing to guess here" if r.method != "baseline"
               else "the baseline never guesses")
        lines.append(f"Nothing was guessed this round: {why}. The target ran one plain step and produced "
                     f"{_q(r.bonus_piece)} (target p = {fmt_prob(r.bonus_prob)}).")
        return "\n\n".join(lines + _stop_line(r))
    guesses = ", ".join(_q(r.pieces[i]) for i in range(r.n_proposed))
    shape = "a chain" if r.parents == list(range(-1, r.n_proposed - 1)) else "a tree"
    lines.append(f"**{r.method}** guessed **{r.n_proposed}** tokens as {shape}: {guesses}. "
                 "The target checked them all in **one** forward pass.")
    kept = ", ".join(_q(r.pieces[i]) for i in r.accepted_path) or "none"
    lines.append(f"It kept **{r.n_accepted}**: {kept}.")
    rejected = [i for i in range(r.n_proposed) if r.status[i] == REJECTED]
    for i in rejected[:4]:
        lines.append(_why_rejected(r, i, greedy))
    if len(rejected) > 4:
        lines.append(f"…and {len(rejected) - 4} more rejected branches.")
    unreached = sum(s == UNREACHED for s in r.status)
    if unreached:
        lines.append(f"{unreached} guess(es) came after a rejection and were never checked: once one "
                     "token is wrong, everything after it was guessed from the wrong text.")
    lines.append(_bonus_line(r, greedy))
    return "\n\n".join(lines + _stop_line(r))


def _why_rejected(r: Round, i: int, greedy: bool) -> str:
    draft, target = r.draft_probs[i], r.target_probs[i]
    if greedy:
        end = r.accepted_path[-1] if r.accepted_path else -1
        preferred = (f"; its top choice there was {_q(r.bonus_piece)}"
                     if r.parents[i] == end and r.bonus_token is not None else "")
        return (f"{_q(r.pieces[i])} was **rejected**: at temperature 0 a guess is kept only if it is the "
                f"target's top choice, and the target gave it p = {fmt_prob(target)}{preferred}.")
    draft_text = fmt_prob(draft) if draft is not None else "1 (no draft probability: a certain guess)"
    return (f"{_q(r.pieces[i])} was **rejected**: the target gave it p = {fmt_prob(target)}, the draft "
            f"{draft_text}; a guess is kept with chance min(1, target / draft) = "
            f"{keep_chance(draft, target):.3f}, and the coin said no.")


def _bonus_line(r: Round, greedy: bool) -> str:
    if r.bonus_token is None:
        return "No bonus token: the run stopped inside this round."
    where = "after the last kept guess" if r.n_accepted else "in place of the first guess"
    if r.bonus_source == "residual":
        how = ("sampled from the **residual** max(0, target − draft), renormalised: the probability the "
               "target wanted there and the draft did not already cover, which keeps the output "
               "distribution exactly the target's")
    elif greedy:
        how = "the target's top choice there"
    else:
        how = "sampled from the target's own distribution there"
    return (f"**Bonus**: {_q(r.bonus_piece)} {where}, {how} (target p = {fmt_prob(r.bonus_prob)}). "
            f"This round committed **{len(r.emitted)}** token(s) for one target forward.")


def _stop_line(r: Round) -> list[str]:
    return [f"The run stopped here ({r.stop_reason})."] if r.finished else []


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


def lossless_markdown(spec: list[Round], base: list[Round], greedy: bool) -> str:
    """Whether a speculative run's tokens equal the baseline's, or where they first differ."""
    if not spec or not base:
        return ""
    if not greedy:
        return ("*Sampling (temperature > 0): speculative decoding keeps the target's distribution, not "
                "the exact text, so the two texts differ by chance. Set temperature 0 to compare them.*")
    check = agreement(spec, base)
    first = check.first_difference
    if first is None and check.short:
        who = "the baseline" if check.short == "baseline" else "this run"
        return (f"✓ **Identical to the baseline on the first {check.compared} tokens**: {who} stopped early "
                f"at {check.compared} tokens (time budget or stop), so only those were compared.")
    if first is None:
        return f"✓ **Identical to the baseline**: all {check.compared} tokens match, as speculative decoding promises."
    a, b = check.lengths
    if first == min(a, b):
        return f"✗ Same first {first} tokens; one run ended earlier ({a} against {b} tokens)."
    pa, pb = [p for r in spec for p in emitted_pieces(r)], [p for r in base for p in emitted_pieces(r)]
    context = "".join(pa[max(0, first - 12):first])
    return (f"✗ **First difference at token {first + 1}**: after …{_q(context)} the speculative run wrote "
            f"{_q(''.join(pa[first:first + 4]))} and the baseline {_q(''.join(pb[first:first + 4]))}. "
            "A near-tie between two tokens can flip when the target scores several tokens at once "
            "(different float rounding); a difference at a clear winner would be a bug.")
